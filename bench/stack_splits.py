#!/usr/bin/env python3
"""stack_splits: one stack per allocation site, within a run and from run to run, on
Debian programs (python3, sqlite3, git, xz, a C++ program) and on a program that keeps
frame pointers (tests' ctor_allocs). Each program is recorded --runs times with --alloc
exact and --access off. Per program it prints:
  split: contexts of one run that have the same frames up to and including main (or a
    thread's start routine) but differ beyond it, or whose frames are a strict prefix of
    another context's: one site shown as two stacks (different roots, or a walk cut
    short where another reached further);
  unstable: stacks (frame names) whose site (innermost frame's function and module, with
    its size) shows a different set of stacks in another run, with the share of bytes;
  whole: the share of bytes in stacks reaching a root (tests/integration/stackroots.py).
Usage: bench/stack_splits.py --memprofd build/cli/memprofd [--runs 3] [--only NAME,...]
       [--ctor build/tests/workloads/ctor_allocs]"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
import mpdtest  # noqa: E402
import stackroots  # noqa: E402

TIMEOUT = 300
ROOTS = ("main", "start_thread")
SQL = ("create table t(a integer primary key, b text); "
       "with recursive c(x) as (select 1 union all select x + 1 from c where x < 20000) "
       "insert into t select x, printf('%08d-%s', x, hex(randomblob(20))) from c; "
       "create index tb on t(b); select count(*), sum(length(b)) from t;")
PY = ("import json, re\n"
      "d = {str(i): [i, 'v' * (i % 40)] for i in range(30000)}\n"
      "s = json.dumps(d); e = json.loads(s)\n"
      "print(len(s), len(re.findall(r'v+', s)))\n")
GIT = ("set -e\ncd \"$1\"\ngit init -q .\nfor i in $(seq 1 40); do echo line $i >> f$((i % 7)); done\n"
       "git add .\ngit -c user.name=a -c user.email=a@b commit -qm one\ngit log --oneline >/dev/null\n")


def workloads(tmp, ctor):
    data = os.path.join(tmp, "data.txt")
    with open(data, "w") as f:
        for i in range(60000):
            f.write("%d line of text %x\n" % (i, i * 2654435761 % 2**32))
    git = os.path.join(tmp, "git.sh")
    with open(git, "w") as f:
        f.write(GIT)
    cxx = os.path.join(tmp, "m.cc")
    with open(cxx, "w") as f:
        f.write("#include <map>\n#include <string>\nint main() { std::map<std::string, int> m;"
                " for (int i = 0; i < 1000; i++) m[std::to_string(i)] = i; return m.size() != 1000; }\n")
    w = [("python3", ["/usr/bin/python3", "-c", PY]),
         ("sqlite3", ["/usr/bin/sqlite3", ":memory:", SQL]),
         ("xz", ["/usr/bin/xz", "-6", "-T1", "-k", "-f", data]),
         ("git", ["/bin/sh", git, None]),
         ("g++ (cc1plus, C++)", ["/usr/bin/g++", "-fsyntax-only", cxx])]
    if ctor:
        w.append(("ctor_allocs (frame pointers)", [ctor]))
    return w


def names(c):
    return tuple("%s@%s" % (f.get("function") or f.get("address"), os.path.basename(f.get("module") or ""))
                 for f in c["frames"])


def splits(ctxs):
    """Contexts that show a site a second time: same frames up to main, or a prefix."""
    stacks = {names(c): c for c in ctxs}
    bad = set()
    by_main = {}
    for st in stacks:
        cut = [i for i, n in enumerate(st) if n.split("@")[0] in ROOTS]
        if cut:
            by_main.setdefault(st[:cut[0] + 1], []).append(st)
    for group in by_main.values():
        if len(group) > 1:
            bad.update(group)
    for b in stacks:
        for n in range(1, len(b)):
            if b[:n] in stacks:
                bad.add(b[:n])
                bad.add(b)
    return bad


def site(c):
    f = c["frames"][0] if c["frames"] else {}
    return (f.get("function"), f.get("module"), c["total_size"] // max(c["alloc_count"], 1))


def run_one(memprofd, tmp, name, argv, i):
    db = os.path.join(tmp, "%s-%d.db" % (name.split()[0], i))
    argv = list(argv)
    if argv[-1] is None:   # git: a fresh repository per run
        repo = os.path.join(tmp, "repo%d" % i)
        os.mkdir(repo)
        argv[-1] = repo
    p = mpdtest.record(memprofd, db, argv, extra=["--access", "off"], alloc="exact",
                       timeout=TIMEOUT)
    if p.returncode != 0:
        raise RuntimeError("%s: %s" % (name, mpdtest.describe(p)))
    return mpdtest.query_contexts(memprofd, db)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", default="")
    ap.add_argument("--ctor", default="")
    a = ap.parse_args()
    if mpdtest.bpf_unavailable():
        raise SystemExit("stack_splits: " + mpdtest.bpf_unavailable())
    tmp = tempfile.mkdtemp(prefix="mpd-splits-")
    print("| program | contexts/run | split contexts | unstable stacks (% bytes) | % bytes whole |")
    print("| --- | --- | --- | --- | --- |")
    for name, argv in workloads(tmp, a.ctor):
        if a.only and not any(name.startswith(o) for o in a.only.split(",")):
            continue
        runs = [run_one(a.memprofd, tmp, name, argv, i) for i in range(a.runs)]
        per_site = []
        for ctxs in runs:
            d = {}
            for c in ctxs:
                d.setdefault(site(c), set()).add(names(c))
            per_site.append(d)
        unstable = total = ubytes = tbytes = whole = 0
        nsplit = 0
        for r, ctxs in enumerate(runs):
            nsplit += len(splits(ctxs))
            for c in ctxs:
                s = site(c)
                total += 1
                tbytes += c["total_size"]
                whole += c["total_size"] if stackroots.whole(c) else 0
                others = [d.get(s) for j, d in enumerate(per_site) if j != r]
                if any(o is not None and o != per_site[r][s] for o in others):
                    unstable += 1
                    ubytes += c["total_size"]
        print("| %s | %.0f | %.1f | %.1f (%.1f%%) | %.1f |" % (
            name, total / a.runs, nsplit / a.runs, unstable / a.runs,
            100.0 * ubytes / max(tbytes, 1), 100.0 * whole / max(tbytes, 1)))
        sys.stdout.flush()
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
