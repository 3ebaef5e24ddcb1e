#!/usr/bin/env python3
"""stack_sweep: whole, named stacks on Debian programs the tests do not cover (issues 16
and 17). Each workload is recorded in the default mode (sampled, MEMPROFD_SAMPLE_BYTES
small enough for many samples) and with --alloc exact, access off. Per run: objects and
contexts; the share of bytes in contexts whose stack reaches main's caller, a thread's
start routine or the dynamic loader's entry code (tests/integration/stackroots.py);
frames naming no module; frames in objects with debug info (libc6-dbg) that lack
file:line; bytes in contexts that stop short of a root without saying so
(`truncated` false); the target's exit status against a run without memprofd, and its
time (a hang is a timeout). Prints one markdown table.
Usage: bench/stack_sweep.py --memprofd build/cli/memprofd [--only NAME,...] [--modes sampled,exact]"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
import mpdtest  # noqa: E402
import stackroots  # noqa: E402

SAMPLE_BYTES = "4096"
TIMEOUT = 300
# Objects with a separate debug file on this machine (libc6-dbg): their frames want file:line.
DEBUG_OBJECTS = ("/libc.so.6",)

PERL = ("my %h; for my $i (1..200000) { $h{\"k$i\"} = [$i, \"v\" x ($i % 50)]; } "
        "my @k = sort keys %h; use List::Util qw(sum); print sum(map { $h{$_}[0] } @k[0..99]), \"\\n\";")
AWK = "{ n[$1 % 5000] = n[$1 % 5000] $2 } END { for (k in n) s += length(n[k]); print s }"
PY_EXT = ("import json, sqlite3, zlib\n"
          "d = [{'k%d' % i: [i, str(i) * 5]} for i in range(40000)]\n"
          "s = json.dumps(d); e = json.loads(s)\n"
          "c = sqlite3.connect(':memory:'); c.execute('create table t(a, b)')\n"
          "c.executemany('insert into t values (?, ?)', ((i, 'x' * 60) for i in range(40000)))\n"
          "print(len(zlib.compress(s.encode(), 9)), c.execute('select count(*) from t').fetchone())\n")
PY_THREADS = ("import threading\n"
              "def work(n):\n"
              "    d = {}\n"
              "    for i in range(n): d[i] = [i] * 8\n"
              "ts = [threading.Thread(target=work, args=(60000,)) for _ in range(3)]\n"
              "[t.start() for t in ts]; [t.join() for t in ts]\n")
CXX_SRC = ("#include <map>\n#include <string>\n#include <vector>\n#include <iostream>\n"
           "template <int N> struct F { static const int v = N * F<N - 1>::v; };\n"
           "template <> struct F<0> { static const int v = 1; };\n"
           "int main() { std::map<std::string, std::vector<int>> m; m[\"a\"].push_back(F<5>::v);"
           " std::cout << m.size(); }\n")


BASH = ("a=(); for i in $(seq 1 300); do a+=(\"x$i\"); s=\"${s}y\"; done; "
        "for i in 1 2 3; do expr $i + 1 >/dev/null; done; echo ${#a[@]} ${#s}")
JQ = "[range(0; 30000) | {k: (. | tostring), v: [., . * 2]}] | map(.v[1]) | add"
NODE = ("const a = []; for (let i = 0; i < 200000; i++) a.push({k: 'x' + i, v: [i, i * 2]});"
        "const b = []; for (let i = 0; i < 2000; i++) b.push(Buffer.alloc(5000 + i));"
        "console.log(a.length, b.length);")
GIT = ("mkdir -p %s && cd $_ && git init -q . && for i in $(seq 1 40); do echo $i >> f$((i %% 7));"
       " done && git add . && git -c user.name=a -c user.email=a@b commit -qm one"
       " && git log --oneline >/dev/null")
PY_FORK = ("import os\n"
           "for i in range(200):\n"
           "    pid = os.fork()\n"
           "    if pid == 0:\n"
           "        b = bytearray(777777)\n"
           "        os._exit(0)\n"
           "    os.waitpid(pid, 0)\n")
STATIC_SRC = ("#include <stdio.h>\n#include <stdlib.h>\n"
              "__attribute__((noinline)) void *leaf(size_t n) { return malloc(n); }\n"
              "__attribute__((noinline)) void mid(int i, void **v) { v[i] = leaf(100 + i); }\n"
              "int main(void) { static void *v[1000]; for (int i = 0; i < 1000; i++) mid(i, v);\n"
              "  printf(\"%p\\n\", v[3]); for (int i = 0; i < 1000; i++) free(v[i]); return 0; }\n")


def make_inputs(tmp):
    """A few MB of compressible text, a small tree, a C++ file."""
    data = os.path.join(tmp, "data.txt")
    with open(data, "w") as f:
        for i in range(120000):
            f.write("%d %s line of text %x\n" % (i, "word" * (i % 7), i * 2654435761 % 2**32))
    tree = os.path.join(tmp, "tree")
    shutil.copytree("/usr/share/doc/python3.11", tree, symlinks=True)
    cxx = os.path.join(tmp, "m.cc")
    with open(cxx, "w") as f:
        f.write(CXX_SRC)
    spie = os.path.join(tmp, "spie")
    with open(spie + ".c", "w") as f:
        f.write(STATIC_SRC)
    subprocess.run(["gcc", "-O2", "-g", "-static-pie", "-o", spie, spie + ".c"], check=True)
    return data, tree, cxx, spie


def workloads(tmp):
    data, tree, cxx, static_pie = make_inputs(tmp)
    ld_cache = os.path.join(tmp, "ld.so.cache")
    return [
        ("xz -9", ["/usr/bin/xz", "-9", "-T1", "-k", "-f", data], "lzma; big buffers"),
        ("xz -T2", ["/usr/bin/xz", "-6", "-T2", "--block-size=1MiB", "-k", "-f", data],
         "worker threads"),
        ("bzip2", ["/usr/bin/bzip2", "-9", "-k", "-f", data], ""),
        ("gzip", ["/usr/bin/gzip", "-9", "-k", "-f", data], ""),
        ("perl hash", ["/usr/bin/perl", "-e", PERL], "XS module dlopen'ed (List::Util)"),
        ("mawk", ["/usr/bin/mawk", AWK, data], ""),
        ("file", ["/usr/bin/file", "-z", data, "/usr/bin/perl", tree], "libmagic"),
        ("tar", ["/usr/bin/tar", "-cf", os.path.join(tmp, "t.tar"), "-C", tmp, "tree"], ""),
        ("cmake --version", ["/usr/bin/cmake", "--version"], "C++"),
        ("g++ -fsyntax-only", ["/usr/bin/g++", "-fsyntax-only", cxx],
         "non-PIE driver, forks non-PIE C++ cc1plus"),
        ("clang-19 -fsyntax-only", ["/usr/bin/clang-19", "-fsyntax-only", cxx], "C++, libLLVM"),
        ("python3 ext", ["/usr/bin/python3", "-c", PY_EXT], "_json/_sqlite3/zlib dlopen'ed"),
        ("python3 threads", ["/usr/bin/python3", "-c", PY_THREADS], "3 threads"),
        ("ldconfig", ["/usr/sbin/ldconfig", "-X", "-C", ld_cache], "static-PIE, stripped"),
        ("static-PIE", [static_pie], "gcc -static-pie, with symbols"),
        ("python3 fork", ["/usr/bin/python3", "-c", PY_FORK], "200 children exit at once"),
        ("zstd -19", ["/usr/bin/zstd", "-19", "-q", "-f", data, "-o", data + ".zst"], ""),
        ("bash loop", ["/bin/bash", "-c", BASH], "forks seq, expr (short-lived)"),
        ("jq", ["/usr/bin/jq", "-n", JQ], ""),
        ("openssl genpkey", ["/usr/bin/openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt",
                             "rsa_keygen_bits:1024", "-out", os.path.join(tmp, "k.pem")],
         "libcrypto"),
        ("node", ["/usr/bin/node", "-e", NODE], "V8: JIT frames without CFI"),
        ("sh + git", ["/bin/sh", "-c", GIT % os.path.join(tmp, "repo")],
         "dash forks git x4 (short-lived, PATH search before exec)"),
    ]


def is_root(f):
    return stackroots.is_root(f)


def measure(ctxs):
    total = sum(c["total_size"] for c in ctxs) or 1
    whole = sum(c["total_size"] for c in ctxs if any(is_root(f) for f in c["frames"]))
    dishonest = sum(c["total_size"] for c in ctxs
                    if not c.get("truncated") and not any(is_root(f) for f in c["frames"]))
    frames = [f for c in ctxs for f in c["frames"]]
    nomod = sum(1 for f in frames if not f.get("module") or not f.get("build_id"))
    dbg = [f for f in frames if (f.get("module") or "").endswith(DEBUG_OBJECTS)]
    noline = sum(1 for f in dbg if not (f.get("file") and f.get("line")))
    noname = sum(1 for f in frames if not f.get("function"))
    return {"objects": sum(c["alloc_count"] for c in ctxs), "contexts": len(ctxs),
            "whole": 100.0 * whole / total, "unmarked": 100.0 * dishonest / total,
            "frames": len(frames), "nomod": nomod, "noname": noname, "dbg": len(dbg),
            "noline": noline, "maxdepth": max((len(c["frames"]) for c in ctxs), default=0),
            "modules": len({f.get("module") for f in frames})}


def bare_run(argv):
    t0 = time.monotonic()
    p = mpdtest.run(argv, timeout=TIMEOUT)
    return p.returncode, time.monotonic() - t0


def one(memprofd, tmp, name, argv, mode):
    db = os.path.join(tmp, "%s-%s.db" % (name.replace(" ", "_").replace("/", "_"), mode))
    env = {"MEMPROFD_SAMPLE_BYTES": SAMPLE_BYTES} if mode == "sampled" else None
    t0 = time.monotonic()
    p = mpdtest.record(memprofd, db, argv, extra=["--access", "off"], alloc=mode,
                       timeout=TIMEOUT, env=env)
    wall = time.monotonic() - t0
    row = {"rc": p.returncode, "wall": wall, "err": ""}
    if p.returncode == 124:
        row["err"] = "timeout"
        return row
    try:
        row.update(measure(mpdtest.query_contexts(memprofd, db)))
    except RuntimeError as e:
        row["err"] = str(e).splitlines()[0][:80]
    drops = [ln for ln in (p.stderr or "").splitlines() if "drops:" in ln]
    row["drops"] = drops[0].split("drops:")[1].strip() if drops else ""
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--only", default="", help="comma-separated workload names")
    ap.add_argument("--modes", default="sampled,exact")
    ap.add_argument("--keep", action="store_true", help="keep the stores (path printed)")
    a = ap.parse_args()
    if mpdtest.bpf_unavailable():
        raise SystemExit("stack_sweep: " + mpdtest.bpf_unavailable())
    tmp = tempfile.mkdtemp(prefix="mpd-sweep-")
    rows = []
    for name, argv, note in workloads(tmp):
        if a.only and name not in a.only.split(","):
            continue
        if not os.access(argv[0], os.X_OK):
            print("skipped %s: %s not installed" % (name, argv[0]), file=sys.stderr)
            continue
        brc, bwall = bare_run(argv)
        for mode in a.modes.split(","):
            r = one(a.memprofd, tmp, name, argv, mode)
            r.update(name=name, mode=mode, brc=brc, bwall=bwall, note=note)
            rows.append(r)
            print("%s %s: %s" % (name, mode, r), file=sys.stderr)
    print("| program | mode | rc (bare) | objects | contexts | modules | max depth | % bytes whole "
          "| % bytes short, unmarked | frames w/o module | libc frames w/o line | unnamed frames "
          "| drops | notes |")
    print("|" + " --- |" * 14)
    for r in rows:
        if "objects" not in r:
            print("| %s | %s | %s (%s) | %s |" % (r["name"], r["mode"], r["rc"], r["brc"], r["err"]))
            continue
        print("| %s | %s | %d (%d) | %d | %d | %d | %d | %.1f | %.1f | %d/%d | %d/%d | %d/%d | %s | %s |" % (
            r["name"], r["mode"], r["rc"], r["brc"], r["objects"], r["contexts"], r["modules"],
            r["maxdepth"], r["whole"], r["unmarked"], r["nomod"], r["frames"], r["noline"],
            r["dbg"], r["noname"], r["frames"], r["drops"], r["note"]))
    if a.keep:
        print("stores kept in " + tmp, file=sys.stderr)
    else:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
