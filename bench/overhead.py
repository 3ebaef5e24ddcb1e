#!/usr/bin/env python3
"""overhead: bench/kvcache's own throughput (ops/s it prints), 1 and 2 threads, under
each way of profiling its heap, measured side by side in one run: the variants are
interleaved run by run so drift hits all alike; the table gives median ops/s, min/max,
and the slowdown ratio (baseline median / variant median; 1.00x = free).
Variants: nothing; the sampler preloaded without a daemon; memprofd record (default,
sampled); memprofd --alloc exact; the same source built with clang-19 -fmemory-profile;
valgrind --tool=dhat; heaptrack. Slow variants run fewer ops (--slow-ops) so each run
stays a few seconds; throughput is per op, so the ratio is unaffected.
Usage: bench/overhead.py --build BUILDDIR [--runs 5] [--ops 2000000] [--csv FILE]

--uprobe-cost: instead, the cost of exact mode's BPF handlers over the bare uprobes they
run on. bench/malloc_loop (one malloc + free per iteration) under: nothing; uprobes with an
empty BPF program at exact mode's sites (bench/uprobe_cost --probes empty: malloc entry +
return, free entry); the same as tracefs events (--probes tracefs); memprofd record
--alloc exact. Interleaved, thread CPU time per iteration (the trap and the handlers are
charged to the thread, so other processes' load does not count), in a private copy of
libc (see private_libc: other processes' uprobes do not fire in it). Reports
(exact - nothing) / (bare - nothing) - 1 per round, median [min, max].
Usage: bench/overhead.py --build BUILDDIR --uprobe-cost [--runs 9] [--iters 200000]"""
import argparse
import csv
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

OPS_RE = re.compile(r"kvcache: (\d+) ops in ([0-9.]+) s: (\d+) ops/s")
LOOP_RE = re.compile(r"malloc_loop: \d+ iters in [0-9.]+ s: [0-9.]+ ns/iter, cpu ([0-9.]+) ns/iter")


def variants(a, tmp):
    kv = os.path.join(a.build, "bench", "kvcache")
    mpd = os.path.join(a.build, "daemon", "memprofd")
    so = os.path.join(a.build, "sampler", "libmemprofd_sampler.so")
    db = os.path.join(tmp, "bench.db")
    v = [("nothing", lambda ops, th: ([kv, "--ops", ops, "--threads", th], {}), False),
         ("sampler preloaded", lambda ops, th: ([kv, "--ops", ops, "--threads", th],
                                                {"LD_PRELOAD": so}), False),
         ("memprofd (sampled)", lambda ops, th: ([mpd, "record", "--db", db, "--", kv, "--ops", ops,
                                                  "--threads", th], {}), False),
         ("memprofd --alloc exact", lambda ops, th: ([mpd, "record", "--alloc", "exact", "--db", db,
                                                      "--", kv, "--ops", ops, "--threads", th], {}), True)]
    clang = shutil.which("clang-19")
    if clang:
        mp = os.path.join(tmp, "kvcache-memprof")
        src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kvcache.c")
        r = subprocess.run([clang, "-O2", "-g", "-fno-omit-frame-pointer", "-fmemory-profile",
                            src, "-o", mp, "-lpthread"], capture_output=True, text=True)
        if r.returncode == 0:
            v.append(("clang-19 -fmemory-profile", lambda ops, th: (
                [mp, "--ops", ops, "--threads", th],
                {"MEMPROF_OPTIONS": "log_path=" + os.path.join(tmp, "memprof")}), False))
        else:
            print("skipping MemProf: " + r.stderr.strip().splitlines()[-1], file=sys.stderr)
    if shutil.which("valgrind"):
        v.append(("valgrind --tool=dhat", lambda ops, th: (
            ["valgrind", "--tool=dhat", "--dhat-out-file=/dev/null", kv, "--ops", ops, "--threads", th],
            {}), True))
    if shutil.which("heaptrack"):
        v.append(("heaptrack", lambda ops, th: (
            ["heaptrack", "-o", os.path.join(tmp, "ht"), kv, "--ops", ops, "--threads", th], {}), True))
    return v


def run_once(cmd, env, timeout):
    e = dict(os.environ, **env)
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=e, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "timed out"
    m = OPS_RE.search(p.stdout + p.stderr)
    if p.returncode != 0 or not m:
        return None, (p.stderr.strip().splitlines() or ["rc %d" % p.returncode])[-1]
    return int(m.group(3)), None


def private_libc(tmp, exe):
    """A command prefix that runs a command in a private mount namespace where a copy of
    the libc exe links is bind-mounted over the system's: the same path, another inode,
    which no uprobe is attached to. Another process's exact-mode recording (system-wide
    uprobes on the system's libc) would otherwise trap in every malloc the benchmark makes
    (and kill valgrind with SIGTRAP); memprofd, run inside too, attaches to the copy.
    Needs root, as the BPF variants do."""
    out = subprocess.run(["ldd", exe], capture_output=True, text=True).stdout
    m = re.search(r"libc\.so\.6 => (\S+)", out)
    if not m:
        sys.exit("memprofd: overhead: cannot find the libc of %s in ldd's output" % exe)
    real = os.path.realpath(m.group(1))
    copy = os.path.join(tmp, "libc.so.6")
    if not os.path.exists(copy):
        shutil.copy2(real, copy)
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            'mount --bind "$1" "$2" && shift 2 && exec "$@"', "sh", copy, real]


def uprobe_cost_variants(a, tmp):
    loop = os.path.join(a.build, "bench", "malloc_loop")
    bare = os.path.join(a.build, "bench", "uprobe_cost")
    mpd = os.path.join(a.build, "daemon", "memprofd")
    db = os.path.join(tmp, "uprobe_cost.db")
    work = [loop, "--iters", str(a.iters)]
    return [("nothing", work),
            ("uprobes, empty BPF program", [bare, "--probes", "empty", "--"] + work),
            ("uprobes, tracefs events", [bare, "--probes", "tracefs", "--"] + work),
            ("memprofd --alloc exact", [mpd, "record", "--alloc", "exact", "--db", db, "--"] + work)] + [
            ("memprofd --alloc exact (%s)" % m, [m, "record", "--alloc", "exact", "--db", db, "--"] + work)
            for m in a.compare_memprofd]


def uprobe_cost(a, tmp):
    vs = uprobe_cost_variants(a, tmp)
    iso = private_libc(tmp, vs[0][1][0])
    cpu = {name: [] for name, _ in vs}
    rounds = []
    for i in range(a.runs):
        rnd = {}
        for name, cmd in vs:
            p = subprocess.run(iso + cmd, capture_output=True, text=True, timeout=a.timeout)
            m = LOOP_RE.search(p.stdout)
            if p.returncode != 0 or not m:
                sys.exit("memprofd: overhead: %s failed: %s" % (
                    name, (p.stderr.strip().splitlines() or ["rc %d" % p.returncode])[-1]))
            rnd[name] = float(m.group(1))
            cpu[name].append(rnd[name])
        rounds.append(rnd)
        print("round %d/%d done" % (i + 1, a.runs), file=sys.stderr, flush=True)
    rows = []
    for name, _ in vs:
        v = cpu[name]
        rows.append([name, "%.1f" % statistics.median(v), "%.1f" % min(v), "%.1f" % max(v), len(v)])
    over = {}
    for exact, _ in vs[3:]:
        for base in ("uprobes, empty BPF program", "uprobes, tracefs events"):
            r = [(x[exact] - x["nothing"]) / (x[base] - x["nothing"]) - 1 for x in rounds]
            over[(exact, base)] = (statistics.median(r), min(r), max(r))
    with open(a.csv, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["variant", "cpu_ns_per_iter", "min", "max", "runs"])
        w.writerows(rows)
        for (exact, base), (med, lo, hi) in over.items():
            w.writerow(["%s handlers over %s" % (exact, base), "%.3f" % med, "%.3f" % lo,
                        "%.3f" % hi, a.runs])
    print("| malloc_loop, malloc+free per iteration | CPU ns/iter, median [min, max] |")
    print("| --- | ---: |")
    for r in rows:
        print("| %s | %s [%s, %s] |" % (r[0], r[1], r[2], r[3]))
    for (exact, base), (med, lo, hi) in over.items():
        print("%s: handlers over %s: %+.0f%% [%+.0f%%, %+.0f%%]" % (
            exact, base, med * 100, lo * 100, hi * 100))
    print("(per round: (exact - nothing) / (bare - nothing) - 1; median [min, max])")
    print("\n%d interleaved rounds, malloc_loop --iters %d, in a private copy of libc; CSV: %s" % (
        a.runs, a.iters, a.csv))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", required=True, help="meson build directory")
    ap.add_argument("--runs", type=int, help="interleaved runs per variant (default 5; 9 with --uprobe-cost)")
    ap.add_argument("--ops", type=int, default=2000000)
    ap.add_argument("--slow-ops", type=int, default=200000)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--only", help="comma-separated variant names (prefix match)")
    ap.add_argument("--csv", default="overhead.csv")
    ap.add_argument("--timeout", type=int, default=120)
    ap.add_argument("--uprobe-cost", action="store_true",
                    help="exact mode's handlers against bare uprobes (see above)")
    ap.add_argument("--iters", type=int, default=200000, help="malloc_loop iterations (--uprobe-cost)")
    ap.add_argument("--compare-memprofd", action="append", default=[], metavar="MEMPROFD",
                    help="--uprobe-cost: also another memprofd build's exact mode (e.g. before a change)")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="mpd-overhead-")
    try:
        if a.uprobe_cost:
            a.runs = a.runs or 9
            uprobe_cost(a, tmp)
            return
        vs = variants(a, tmp)
        if a.only:
            want = a.only.split(",")
            vs = [x for x in vs if x[0] == "nothing" or any(x[0].startswith(w) for w in want)]
        results = {}   # (variant, threads) -> [ops/s]
        errors = {}
        for th in a.threads.split(","):
            for i in range(a.runs):
                for name, mk, slow in vs:
                    cmd, env = mk(str(a.slow_ops if slow else a.ops), th)
                    ops, err = run_once(cmd, env, a.timeout)
                    if ops is None:
                        errors[(name, th)] = err
                    else:
                        results.setdefault((name, th), []).append(ops)
                print("threads %s: run %d/%d done" % (th, i + 1, a.runs), file=sys.stderr, flush=True)
        rows = []
        for th in a.threads.split(","):
            base = statistics.median(results.get(("nothing", th), [0])) or 1
            for name, _, slow in vs:
                r = results.get((name, th))
                if not r:
                    rows.append([name, th, "", "", "", "", "", "", errors.get((name, th), "no data")])
                    continue
                med = statistics.median(r)
                rows.append([name, th, int(med), min(r), max(r), "%.3f" % (base / med),
                             "%.3f" % (base / max(r)), "%.3f" % (base / min(r)), len(r)])
        hdr = ["variant", "threads", "median_ops_s", "min_ops_s", "max_ops_s", "slowdown",
               "slowdown_best", "slowdown_worst", "runs"]
        with open(a.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(hdr)
            w.writerows(rows)
        print("| variant | threads | median ops/s | min..max ops/s | slowdown (median, [best, worst]) |")
        print("| --- | --- | ---: | ---: | ---: |")
        for r in rows:
            if r[2] == "":
                print("| %s | %s | - | - | failed: %s |" % (r[0], r[1], r[8]))
            else:
                print("| %s | %s | %d | %d..%d | %sx [%s, %s] |" % (r[0], r[1], r[2], r[3], r[4],
                                                                   r[5], r[6], r[7]))
        print("\n%d interleaved runs per variant; kvcache --ops %d (slow variants %d); CSV: %s" %
              (a.runs, a.ops, a.slow_ops, a.csv))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
