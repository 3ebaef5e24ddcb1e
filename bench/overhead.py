#!/usr/bin/env python3
"""overhead: bench/kvcache's own throughput (ops/s it prints), 1 and 2 threads, under
each way of profiling its heap, measured side by side in one run: the variants are
interleaved run by run so drift hits all alike; the table gives median ops/s, min/max,
and the slowdown ratio (baseline median / variant median; 1.00x = free).
Variants: nothing; the sampler preloaded without a daemon; `memprofd record -- CMD` (the
default mode, no flags); memprofd --alloc exact; the same source built with clang-19
-fmemory-profile; valgrind --tool=dhat; heaptrack. Slow variants run fewer ops
(--slow-ops) so each run stays a few seconds; throughput is per op, so the ratio is
unaffected. Besides wall-clock throughput, the ratio of the workload's CPU time per op
(all its threads, as kvcache prints it: what the probes cost it, not other processes'
load); memprofd's rows also give its own CPU time and peak RSS (medians).
A second workload, kvcache --work N (default 100), adds per-operation compute so that
malloc/free are ~7% of its instructions, the share of cycles Google's fleet spends in
memory allocation (Kanev et al., "Profiling a warehouse-scale computer", ISCA 2015, as
cited in Mallacc, ASPLOS 2017: "nearly 7% of all cycles"); it runs the cheap variants only.
Then instruction counts (valgrind --tool=callgrind, deterministic): kvcache and the --work
variant, nothing vs the sampler preloaded (no daemon: with one, its uprobes' int3 would stop
valgrind), with the share of their instructions in the malloc family; and the sampler's
instructions per malloc+free (bench/malloc_loop at two lengths, the difference).
Every command runs in a private copy of libc (private_libc), so other processes' uprobes
on the system's libc do not fire in the benchmark.
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
CPU_RE = re.compile(r"kvcache: \d+ ops in [0-9.]+ s: \d+ ops/s, cpu ([0-9.]+) s")
DAEMON_RE = re.compile(r"memprofd cpu (\d+) ms, peak rss (\d+) KiB")
WORK_ROUNDS = 100       # kvcache --work: malloc/free ~7% of its instructions (see above)
CG_OPS = 200000         # kvcache ops under callgrind
CG_ITERS = (100000, 200000)   # malloc_loop lengths under callgrind
MALLOC_FAMILY = ("malloc", "free", "calloc", "realloc", "cfree")
LOOP_RE = re.compile(r"malloc_loop: \d+ iters in [0-9.]+ s: [0-9.]+ ns/iter, cpu ([0-9.]+) ns/iter")


def memprofd_path(build):
    """The binary's place in the build: cli/ since the layout change, daemon/ before."""
    for d in ("cli", "daemon"):
        p = os.path.join(build, d, "memprofd")
        if os.path.exists(p):
            return p
    return os.path.join(build, "cli", "memprofd")


def variants(a, tmp):
    kv = os.path.join(a.build, "bench", "kvcache")
    mpd = memprofd_path(a.build)
    so = os.path.join(a.build, "sampler", "libmemprofd_sampler.so")
    db = os.path.join(tmp, "bench.db")
    v = [("nothing", lambda ops, th: ([kv, "--ops", ops, "--threads", th], {}), False),
         ("sampler preloaded", lambda ops, th: ([kv, "--ops", ops, "--threads", th],
                                                {"LD_PRELOAD": so}), False),
         ("memprofd record (default)", lambda ops, th: ([mpd, "record", "--db", db, "--", kv,
                                                         "--ops", ops, "--threads", th], {}), False),
         ("memprofd record --watch off", lambda ops, th: ([mpd, "record", "--watch", "off", "--db",
                                                           db, "--", kv, "--ops", ops, "--threads",
                                                           th], {}), False),
         ("memprofd --alloc exact", lambda ops, th: ([mpd, "record", "--alloc", "exact", "--db", db,
                                                      "--", kv, "--ops", ops, "--threads", th], {}), True),
         # No allocator probe: access sampling only (static data for linker layout).
         ("memprofd --alloc off --access soft", lambda ops, th: (
             [mpd, "record", "--alloc", "off", "--access", "soft", "--db", db, "--", kv,
              "--ops", ops, "--threads", th], {}), False)]
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


def run_measure(cmd, env, timeout):
    """As run_once, plus the workload's CPU seconds per op (all its threads: a uprobe's
    trap and handlers are charged to it, other processes' load is not) and memprofd's own
    (CPU ms, peak RSS KiB) when it prints them: (ops/s, cpu/op, own, error)."""
    e = dict(os.environ, **env)
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=e, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, None, None, "timed out"
    m = OPS_RE.search(p.stdout + p.stderr)
    if p.returncode != 0 or not m:
        return None, None, None, (p.stderr.strip().splitlines() or ["rc %d" % p.returncode])[-1]
    c = CPU_RE.search(p.stdout)
    d = DAEMON_RE.search(p.stderr)
    return (int(m.group(3)), float(c.group(1)) / int(m.group(1)) if c else None,
            (int(d.group(1)), int(d.group(2))) if d else None, None)


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
    mpd = memprofd_path(a.build)
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
    with open(a.csv or os.devnull, "w", newline="") as f:
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
        a.runs, a.iters, a.csv or "--csv FILE"))


def callgrind(iso, cmd, env, tmp):
    """(total Ir, Ir inclusive in the malloc family's entry points) of one callgrind run."""
    out = os.path.join(tmp, "callgrind.out")
    p = subprocess.run(iso + ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out] + cmd,
                       capture_output=True, text=True, env=dict(os.environ, **env), timeout=600)
    if p.returncode != 0:
        sys.exit("memprofd: overhead: callgrind %s: %s" % (" ".join(cmd), p.stderr.strip()[-300:]))
    ann = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", out],
                         capture_output=True, text=True).stdout
    total, family = 0, 0
    for line in ann.splitlines():
        m = re.match(r"\s*([\d,]+) \([ \d.]+%\)\s+(.*)$", line)
        if not m:
            continue
        ir, what = int(m.group(1).replace(",", "")), m.group(2)
        if what.startswith("PROGRAM TOTALS"):
            total = ir
        elif not what.startswith("=>"):
            fn = re.match(r"\S*:(\w+)(@\S*)? \[(\S+)\]", what)
            if fn and fn.group(1) in MALLOC_FAMILY and "libc.so" in fn.group(3):
                family += ir
    os.unlink(out)
    return total, family


def instructions(a, tmp):
    """Rows for the callgrind table: [what, Ir nothing, Ir sampler, ratio, malloc share]."""
    kv = os.path.join(a.build, "bench", "kvcache")
    loop = os.path.join(a.build, "bench", "malloc_loop")
    pre = {"LD_PRELOAD": os.path.join(a.build, "sampler", "libmemprofd_sampler.so")}
    iso = private_libc(tmp, kv)
    rows = []
    for label, extra in (("kvcache", []), ("kvcache --work %d" % a.work, ["--work", str(a.work)])):
        cmd = [kv, "--ops", str(CG_OPS), "--threads", "1"] + extra
        base, fam = callgrind(iso, cmd, {}, tmp)
        smp, _ = callgrind(iso, cmd, pre, tmp)
        rows.append(["%s --ops %d, 1 thread" % (label, CG_OPS), base, smp, smp / base, fam / base])
    per = {}
    for env_name, env in (("nothing", {}), ("sampler", pre)):
        ir = [callgrind(iso, [loop, "--iters", str(n)], env, tmp)[0] for n in CG_ITERS]
        per[env_name] = (ir[1] - ir[0]) / (CG_ITERS[1] - CG_ITERS[0])
    rows.append(["malloc_loop, per malloc+free", per["nothing"], per["sampler"],
                 per["sampler"] / per["nothing"], 1.0])
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", required=True, help="meson build directory")
    ap.add_argument("--runs", type=int, help="interleaved runs per variant (default 5; 9 with --uprobe-cost)")
    ap.add_argument("--ops", type=int, default=2000000)
    ap.add_argument("--slow-ops", type=int, default=200000)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--only", help="comma-separated variant names (prefix match)")
    ap.add_argument("--csv", help="also write the figures to this CSV file")
    ap.add_argument("--timeout", type=int, default=120)
    ap.add_argument("--work", type=int, default=WORK_ROUNDS,
                    help="kvcache --work rounds of the realistic-share workload (0: leave it out)")
    ap.add_argument("--skip-instructions", action="store_true", help="leave out the callgrind table")
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
        iso = private_libc(tmp, os.path.join(a.build, "bench", "kvcache"))
        cheap = ("nothing", "sampler preloaded", "memprofd record (default)",
                 "memprofd record --watch off")
        loads = [("kvcache", [], vs)]
        if a.work:
            loads.append(("kvcache --work %d" % a.work, ["--work", str(a.work)],
                          [x for x in vs if x[0] in cheap]))
        results, cpu, daemon, errors = {}, {}, {}, {}   # (workload, variant, threads) -> ...
        for th in a.threads.split(","):
            for i in range(a.runs):
                for load, extra, lvs in loads:
                    for name, mk, slow in lvs:
                        cmd, env = mk(str(a.slow_ops if slow else a.ops), th)
                        ops, cop, own, err = run_measure(iso + cmd + extra, env, a.timeout)
                        key = (load, name, th)
                        if ops is None:
                            errors[key] = err
                            continue
                        results.setdefault(key, []).append(ops)
                        if cop:
                            cpu.setdefault(key, []).append(cop)
                        if own:
                            daemon.setdefault(key, []).append(own)
                print("threads %s: run %d/%d done" % (th, i + 1, a.runs), file=sys.stderr, flush=True)
        rows = []
        for load, _, lvs in loads:
            for th in a.threads.split(","):
                base = statistics.median(results.get((load, "nothing", th), [0])) or 1
                cbase = statistics.median(cpu.get((load, "nothing", th), [0])) or 1
                for name, _, slow in lvs:
                    key = (load, name, th)
                    r = results.get(key)
                    if not r:
                        rows.append([load, name, th, "", "", "", "", "", "", "", "", "", "", "",
                                     errors.get(key, "no data")])
                        continue
                    med = statistics.median(r)
                    own = daemon.get(key)
                    c = cpu.get(key)
                    rows.append([load, name, th, int(med), min(r), max(r), "%.3f" % (base / med),
                                 "%.3f" % (base / max(r)), "%.3f" % (base / min(r)),
                                 "%.3f" % (statistics.median(c) / cbase) if c else "",
                                 "%.3f" % (min(c) / cbase) if c else "",
                                 "%.3f" % (max(c) / cbase) if c else "",
                                 int(statistics.median(x[0] for x in own)) if own else "",
                                 int(statistics.median(x[1] for x in own)) if own else "", len(r)])
        ins = [] if a.skip_instructions else instructions(a, tmp)
        hdr = ["workload", "variant", "threads", "median_ops_s", "min_ops_s", "max_ops_s",
               "slowdown", "slowdown_best", "slowdown_worst", "cpu_slowdown", "cpu_slowdown_best",
               "cpu_slowdown_worst", "memprofd_cpu_ms", "memprofd_rss_kib", "runs"]
        with open(a.csv or os.devnull, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(hdr)
            w.writerows(rows)
            for r in ins:   # deterministic: ratio in all three slowdown columns, one run
                w.writerow(["callgrind: " + r[0], "sampler preloaded (instructions)", "1",
                            "%.0f" % r[1], "", "%.0f" % r[2], "%.4f" % r[3], "%.4f" % r[3],
                            "%.4f" % r[3], "%.4f" % r[3], "%.4f" % r[3], "%.4f" % r[3], "", "", 1])
        print("| workload | variant | threads | median ops/s | min..max ops/s | slowdown (median, "
              "[best, worst]) | CPU per op (median, [best, worst]) | memprofd CPU ms, peak RSS KiB |")
        print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |")
        for r in rows:
            if r[3] == "":
                print("| %s | %s | %s | - | - | failed: %s | | |" % (r[0], r[1], r[2], r[14]))
            else:
                print("| %s | %s | %s | %d | %d..%d | %sx [%s, %s] | %s | %s |" % (
                    r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8],
                    "%sx [%s, %s]" % (r[9], r[10], r[11]) if r[9] else "",
                    "%s, %s" % (r[12], r[13]) if r[12] != "" else ""))
        print("\n%d interleaved runs per variant; kvcache --ops %d (slow variants %d); CSV: %s" %
              (a.runs, a.ops, a.slow_ops, a.csv or "--csv FILE"))
        if ins:
            print("\n| callgrind (instructions) | nothing | sampler preloaded | ratio | "
                  "in malloc/free/calloc |")
            print("| --- | ---: | ---: | ---: | ---: |")
            for r in ins:
                print("| %s | %s | %s | %.4fx | %s |" % (
                    r[0], "{:,.0f}".format(r[1]) if r[1] > 1000 else "%.1f" % r[1],
                    "{:,.0f}".format(r[2]) if r[2] > 1000 else "%.1f" % r[2], r[3],
                    "%.1f%%" % (100 * r[4]) if r[4] < 1 else "all"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
