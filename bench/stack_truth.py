#!/usr/bin/env python3
"""stack_truth: memprofd's allocation stacks against valgrind's (DHAT, which unwinds each
malloc from the objects' CFI under its own CPU), on real programs a user would profile.
Each program runs once under `valgrind --tool=dhat` and once under `memprofd record
--alloc exact --access off`. Both sides' stacks become function names (the part before
any "(", "?" where unnamed), innermost first, without the allocator's own frames (malloc,
operator new, ...), up to and including main, or, for stacks that never reach main (a
thread's, a constructor's), without the C runtime's root frames. Per program, the bytes
of DHAT's allocation points whose stack memprofd has: whole (the same names), truncated
(memprofd's stack is a strict prefix of it), wrong (memprofd has stacks from the same
innermost function, none of them this one or a prefix), missing (none from it). The
programs are deterministic enough for the same stacks to occur in both runs; what is
left over in `missing` and `wrong` is read by hand (--show NAME prints the differences).
Usage: bench/stack_truth.py --memprofd build/cli/memprofd [--only NAME,...] [--show NAME]
       [--ctor build/tests/workloads/ctor_allocs]"""
import argparse
import json
import re
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
import mpdtest  # noqa: E402

TIMEOUT = 600
ALLOCATORS = {"malloc", "calloc", "realloc", "reallocarray", "memalign", "aligned_alloc",
              "posix_memalign", "valloc", "pvalloc", "operator new", "operator new[]",
              "libc_malloc", "libc_calloc", "libc_realloc", "libc_memalign", "mid_memalign"}
ROOTS = {"_start", "libc_start_main", "libc_start_main_impl", "libc_start_call_main",
         "start_thread", "clone3", "clone", "dl_start_user", "dl_start", "(below main)"}
PY = ("import json, re, zlib\n"
      "d = {str(i): [i, 'v' * (i % 40)] for i in range(3000)}\n"
      "s = json.dumps(d); e = json.loads(s)\n"
      "print(len(zlib.compress(s.encode())), len(re.findall(r'v+', s)))\n")
SQL = ("create table t(a integer primary key, b text); "
       "with recursive c(x) as (select 1 union all select x + 1 from c where x < 2000) "
       "insert into t select x, printf('%08d', x) from c; create index tb on t(b); "
       "select count(*), sum(length(b)) from t;")
PERL = "my %h; $h{\"k$_\"} = [$_, 'v' x ($_ % 50)] for 1..5000; print scalar(keys %h), \"\\n\";"
BASH = "a=(); for i in $(seq 1 300); do a+=(\"x$i\"); s=\"${s}y\"; done; echo ${#a[@]} ${#s}"
JQ = "[range(0; 3000) | {k: (. | tostring), v: [., . * 2]}] | map(.v[1]) | add"


def workloads(tmp, ctor):
    data = os.path.join(tmp, "data.txt")
    with open(data, "w") as f:
        for i in range(20000):
            f.write("%d line of text %x\n" % (i, i * 2654435761 % 2**32))
    key = os.path.join(tmp, "k.pem")
    w = [("python3", ["/usr/bin/python3", "-c", PY]),
         ("sqlite3", ["/usr/bin/sqlite3", ":memory:", SQL]),
         ("xz", ["/usr/bin/xz", "-6", "-T1", "-k", "-f", data]),
         ("zstd", ["/usr/bin/zstd", "-19", "-q", "-f", data, "-o", data + ".zst"]),
         ("perl", ["/usr/bin/perl", "-e", PERL]),
         ("bash", ["/bin/bash", "-c", BASH]),
         ("jq", ["/usr/bin/jq", "-n", JQ]),
         ("openssl genpkey", ["/usr/bin/openssl", "genpkey", "-algorithm", "EC", "-pkeyopt",
                              "ec_paramgen_curve:P-256", "-out", key]),
         ("cmake --version (C++)", ["/usr/bin/cmake", "--version"])]
    if ctor:
        w.append(("ctor_allocs (frame pointers)", [os.path.abspath(ctor)]))
    return w


def norm_name(n):
    """A function's name as both sides can agree on it: no parameters, no symbol version,
    and glibc's aliases of one address (__GI__IO_fputs, _IO_fputs, fputs) as one."""
    n = (n or "?").strip()
    if n.startswith("operator new"):
        return "operator new[]" if "[]" in n else "operator new"
    if n == "(below main)":
        return n
    n = n.split("@")[0]
    n = n.split("(")[0].strip() or n
    return re.sub(r"64$", "", re.sub(r"^_*(GI_+)?(IO_)?(new_)?", "", n)) or n


def norm(names):
    """Allocator frames off the top; cut before the first of the runtime's root frames
    (main's caller, a thread's start), or after the loader's _dl_init."""
    i = 0
    while i < len(names) and names[i] in ALLOCATORS:
        i += 1
    names = names[i:]
    if "dl_init" in names:   # a constructor's: the loader's entry below is unnamed
        names = names[:len(names) - names[::-1].index("dl_init")]
    for j, n in enumerate(names):
        if n in ROOTS:
            return tuple(names[:j])
    return tuple(names)


def dhat_stacks(path):
    d = json.load(open(path))
    out = {}
    for pp in d["pps"]:
        names = []
        for i in pp["fs"]:
            s = d["ftbl"][i]
            if s == "[root]":
                continue
            fn = s.split(": ", 1)[1] if ": " in s else s
            fn = fn.rsplit(" (", 1)[0] if fn.endswith(")") else fn
            names.append(norm_name("?" if fn.startswith("???") else fn))
        st = norm(names)
        out[st] = out.get(st, 0) + pp["tb"]
    return out


def mpd_stacks(ctxs):
    out = {}
    for c in ctxs:
        st = norm([norm_name(f.get("function")) for f in c["frames"]])
        out[st] = out.get(st, 0) + c["total_size"]
    return out


def compare(truth, got, show):
    res = {"whole": 0, "truncated": 0, "wrong": 0, "missing": 0}
    by_top = {}
    for st in got:
        by_top.setdefault(st[:1], []).append(st)
    for st, b in truth.items():
        if st in got:
            k = "whole"
        elif any(len(g) < len(st) and st[:len(g)] == g for g in by_top.get(st[:1], [])):
            k = "truncated"
        elif by_top.get(st[:1]):
            k = "wrong"
        else:
            k = "missing"
        res[k] += b
        if show and k != "whole":
            print("  %s %d B: valgrind %s" % (k, b, " < ".join(st)), file=sys.stderr)
            for g in by_top.get(st[:1], [])[:3]:
                print("      memprofd %s" % " < ".join(g), file=sys.stderr)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--only", default="")
    ap.add_argument("--show", default="")
    ap.add_argument("--ctor", default="")
    a = ap.parse_args()
    if mpdtest.bpf_unavailable():
        raise SystemExit("stack_truth: " + mpdtest.bpf_unavailable())
    tmp = tempfile.mkdtemp(prefix="mpd-truth-")
    print("| program | valgrind stacks | memprofd contexts | % bytes whole | truncated | wrong | missing |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, argv in workloads(tmp, a.ctor):
        if a.only and not any(name.startswith(o) for o in a.only.split(",")):
            continue
        out = os.path.join(tmp, name.split()[0] + ".dhat")
        p = subprocess.run(["valgrind", "--tool=dhat", "--read-inline-info=yes", "--show-below-main=yes",
                            "--num-callers=500", "--dhat-out-file=" + out] + argv,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           timeout=TIMEOUT, cwd=tmp)
        if p.returncode != 0 or not os.path.exists(out):
            print("| %s | valgrind failed: %s |" % (name, p.stderr.strip().splitlines()[-1:]))
            continue
        truth = dhat_stacks(out)
        db = os.path.join(tmp, name.split()[0] + ".db")
        r = mpdtest.record(a.memprofd, db, argv, extra=["--access", "off"], alloc="exact",
                           timeout=TIMEOUT)
        if r.returncode != 0:
            print("| %s | memprofd failed: %s |" % (name, mpdtest.describe(r)))
            continue
        got = mpd_stacks(mpdtest.query_contexts(a.memprofd, db))
        if a.show and name.startswith(a.show):
            print("%s:" % name, file=sys.stderr)
        res = compare(truth, got, a.show and name.startswith(a.show))
        tot = sum(res.values()) or 1
        print("| %s | %d | %d | %.1f | %.1f | %.1f | %.1f |" % (
            name, len(truth), len(got), 100.0 * res["whole"] / tot,
            100.0 * res["truncated"] / tot, 100.0 * res["wrong"] / tot,
            100.0 * res["missing"] / tot))
        sys.stdout.flush()
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
