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
Usage: bench/record_cost.py --build BUILDDIR [--build OTHER]... [--runs 7] [--check SECONDS]
                            [--limit MODE.PHASE=S]
A second --build (e.g. main's) is measured side by side: each round runs every build's
every mode in turn. --check: exit 1 if a median start-up or shutdown cost of the first
build exceeds SECONDS (issue 18: 0.1); --limit: the same for one mode's phase (e.g.
sampled.shutdown=0.12), repeatable. --phases: first, one run of each mode with
MEMPROFD_TRACE_PHASES=1, its phase lines printed (where start-up and shutdown go).
Exits 77 (skip) where BPF cannot work (not root, no kernel BTF)."""
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


HELPER_GRACE_S = 10.0


def helpers_left(d, grace):
    """Pids whose command line names the temporary directory d, after waiting up to grace."""
    end = time.monotonic() + grace
    while True:
        left = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    if d.encode() in f.read():
                        left.append(int(pid))
            except OSError:
                pass
        if not left or time.monotonic() > end:
            return left
        time.sleep(0.1)


def print_phases(build, pre, modes, d):
    """One run of each mode with the phase trace; whether every run printed its phases
    from the options to the closes."""
    ok = True
    for m, opts in modes.items():
        p = subprocess.run(pre + [os.path.join(build, "cli", "memprofd"), "record", "--db",
                                  os.path.join(d, "phases-%s.db" % m), *opts, "--", *CMD],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           env=dict(os.environ, MEMPROFD_TRACE_PHASES="1"))
        lines = [x[len("memprofd: phase "):] for x in p.stderr.splitlines()
                 if x.startswith("memprofd: phase ")]
        print("phases, %s:\n  %s" % (m, "\n  ".join(lines)))
        ok &= p.returncode == 0 and any(x.startswith("options:") for x in lines) and \
            any(x.startswith("exec:") for x in lines) and any(x.startswith("closes:") for x in lines)
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True, action="append")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--check", type=float)
    ap.add_argument("--limit", action="append", default=[])
    ap.add_argument("--phases", action="store_true")
    a = ap.parse_args()
    limits = {}
    for x in a.limit:
        k, _, v = x.partition("=")
        limits[k] = float(v)
    if os.geteuid() != 0 or not os.path.exists("/sys/kernel/btf/vmlinux"):
        print("SKIP: needs root and kernel BTF (memprofd record loads BPF)")
        sys.exit(77)
    d = tempfile.mkdtemp(prefix="record_cost.")
    pre = private_libc(d, os.path.join(a.build[0], "cli", "memprofd"))
    modes = {"sampled": ["--alloc", "sampled", "--access", "off"],
             "exact": ["--alloc", "exact", "--access", "off"], "off": ["--alloc", "off", "--access", "soft"]}
    if a.phases and not print_phases(a.build[0], pre, modes, d):
        sys.exit("FAIL: MEMPROFD_TRACE_PHASES=1 printed no phase of start-up and shutdown")
    runs = [("bare", None, None)] + [(m, b, "%s:%s" % (b, m)) for b in a.build for m in modes]
    got = {k: ([], []) for k, _, _ in [("bare", 0, 0)] + [(r[2], 0, 0) for r in runs[1:]]}
    for i in range(a.runs):
        for m, b, k in runs:
            if m == "bare":
                k, argv = "bare", pre + CMD
            else:
                db = os.path.join(d, "%s%d.%d.db" % (m, i, a.build.index(b)))
                argv = pre + [os.path.join(b, "cli", "memprofd"), "record", "--db", db, *modes[m],
                              "--", *CMD]
                if len(a.build) > 1:   # each build's own sampler, whatever finds it
                    os.environ["MEMPROFD_SAMPLER"] = os.path.join(b, "sampler", "libmemprofd_sampler.so")
            s, e = spans(argv)
            got[k][0].append(s)
            got[k][1].append(e)
    bs, be = statistics.median(got["bare"][0]), statistics.median(got["bare"][1])
    print("%-8s %12s %12s   (bare sh: start %.1f ms, end %.1f ms; %d runs)" % (
        "mode", "start-up", "shutdown", bs / 1e6, be / 1e6, a.runs))
    over = []
    for m, b, k in runs[1:]:
        s = (statistics.median(got[k][0]) - bs) / 1e9
        e = (statistics.median(got[k][1]) - be) / 1e9
        print("%-8s %10.3f s %10.3f s%s" % (m, s, e, "   " + b if len(a.build) > 1 else ""))
        for phase, v in (("start-up", s), ("shutdown", e)):
            lim = limits.get("%s.%s" % (m, phase), a.check)
            if b == a.build[0] and lim is not None and v > lim:
                over.append("%s %s %.3f s > %.3f s" % (m, phase, v, lim))
    # Each record leaves a helper holding its BPF objects (daemon/record/release_later.c):
    # it must be gone soon after, not hold the probes (or a pipe) on.
    left = helpers_left(d, HELPER_GRACE_S)
    if left:
        over.append("%d record helper(s) still running %.0f s after the last run: %s" %
                    (len(left), HELPER_GRACE_S, left))
    subprocess.run(["rm", "-rf", d])
    if over:
        print("FAIL: " + "; ".join(over))
        sys.exit(1)
    if a.check is not None or limits:
        print("PASS: every median within its bound")


if __name__ == "__main__":
    main()
