#!/usr/bin/env python3
"""record_cost: what `memprofd record -- CMD` adds around a command, split in two: start-up
(from launching record to the command's first instruction) and shutdown (from the
command's exit to record's), each minus the same spans of the bare command, medians of
--runs interleaved runs (each mode and the bare command in turn, so load hits all alike).
The command is `sh -c 'date +%s%N; exec date +%s%N'`: its first and last moments on the
epoch clock. Modes: the default (sampled) and --alloc exact, with --access off; --alloc off with
--access soft (no allocator probe: the store, lifecycle and soft access sampler).
Every command runs with a private copy of libc bind-mounted over the system's
(overhead.py's private_libc): other processes' exact-mode recordings put uprobes on the
system's libc, and every malloc memprofd makes would trap in them.
Usage: bench/record_cost.py --build BUILDDIR [--runs 7] [--check SECONDS]
--check: exit 1 if a median start-up or shutdown cost exceeds SECONDS (issue 18: 0.1)."""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from overhead import private_libc  # noqa: E402

CMD = ["sh", "-c", "date +%s%N; exec date +%s%N"]


def spans(argv):
    t0 = time.time_ns()
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    t3 = time.time_ns()
    if p.returncode != 0:
        raise SystemExit("failed (%d): %s" % (p.returncode, " ".join(argv)))
    first, last = (int(x) for x in p.stdout.split())
    return first - t0, t3 - last


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--check", type=float)
    a = ap.parse_args()
    memprofd = os.path.join(a.build, "cli", "memprofd")
    d = tempfile.mkdtemp(prefix="record_cost.")
    pre = private_libc(d, memprofd)
    modes = {"sampled": ["--alloc", "sampled", "--access", "off"],
             "exact": ["--alloc", "exact", "--access", "off"], "off": ["--alloc", "off", "--access", "soft"]}
    got = {m: ([], []) for m in ["bare", *modes]}
    for i in range(a.runs):
        for m in got:
            if m == "bare":
                argv = pre + CMD
            else:
                db = os.path.join(d, "%s%d.db" % (m, i))
                argv = pre + [memprofd, "record", "--db", db, *modes[m], "--", *CMD]
            s, e = spans(argv)
            got[m][0].append(s)
            got[m][1].append(e)
    bs, be = statistics.median(got["bare"][0]), statistics.median(got["bare"][1])
    print("%-8s %12s %12s   (bare sh: start %.1f ms, end %.1f ms; %d runs)" % (
        "mode", "start-up", "shutdown", bs / 1e6, be / 1e6, a.runs))
    worst = 0.0
    for m in modes:
        s = (statistics.median(got[m][0]) - bs) / 1e9
        e = (statistics.median(got[m][1]) - be) / 1e9
        worst = max(worst, s, e)
        print("%-8s %10.3f s %10.3f s" % (m, s, e))
    subprocess.run(["rm", "-rf", d])
    if a.check is not None and worst > a.check:
        print("FAIL: a cost above %.3f s" % a.check)
        sys.exit(1)


if __name__ == "__main__":
    main()
