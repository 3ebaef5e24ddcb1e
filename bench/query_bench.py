#!/usr/bin/env python3
"""query_bench: `memprofd query contexts --limit 20` on a generated store of 1M contexts
and 10M MIB rows (bench/gen_store, made once and kept beside the build, never in git),
for every --sort key, every --format, and the filters (--binary, --class, --pid,
--since/--until). Each case runs --runs times, interleaved with the others so that a
burst of load on a shared machine hits every case alike; the table gives the median
wall time with the quartiles, the median CPU time (user + sys of the process), and the
200 ms target. Then bench/query_bench (the same queries in-process, with each of the
store's plans forced) shows what every plan costs side by side.

    python3 bench/query_bench.py --build build        # generates the store the first time

Exits 1 when an unfiltered case (the target's "top-20 contexts") misses the target."""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

TARGET_MS = 200.0
T0_S = 1700000000           # gen_store's first bucket (GEN_T0)
DAY_S = 1440 * 60           # gen_store's default span: 1440 one-minute buckets
GEN_VERSION = 2             # bump when gen_store's output changes, to regenerate


def cases():
    sorts = ["bytes", "count", "lifetime", "density", "accesses"]
    out = [("--sort %s" % k, ["--sort", k]) for k in sorts]
    out += [("--format %s" % f, ["--format", f]) for f in ("json", "csv")]
    out += [
        ("--binary BUILDID", ["--binary", "9e00000000000002"]),
        ("--binary ID --sort count", ["--binary", "9e00000000000002", "--sort", "count"]),
        ("--class hot", ["--class", "hot"]),
        ("--class cold", ["--class", "cold"]),
        ("--class notcold --sort density", ["--class", "notcold", "--sort", "density"]),
        ("--pid (1 of 32 processes)", ["--pid", "1005"]),
        ("--since last hour", ["--since", str(T0_S + DAY_S - 3600)]),
        ("--since last 5 min", ["--since", str(T0_S + DAY_S - 300)]),
        ("--since last 12 h", ["--since", str(T0_S + DAY_S // 2)]),
        ("--until first hour", ["--until", str(T0_S + 3600)]),
        ("--since/--until 1 h at noon", ["--since", str(T0_S + DAY_S // 2),
                                         "--until", str(T0_S + DAY_S // 2 + 3600)]),
        ("--since last hour --sort density", ["--since", str(T0_S + DAY_S - 3600),
                                              "--sort", "density"]),
        ("--pid --since last 12 h", ["--pid", "1005", "--since", str(T0_S + DAY_S // 2)]),
        ("--since last hour --class hot", ["--since", str(T0_S + DAY_S - 3600),
                                           "--class", "hot"]),
    ]
    return out


def ensure_store(a):
    params = {"contexts": a.contexts, "rows": a.rows, "version": GEN_VERSION}
    stamp = a.db + ".params"
    try:
        with open(stamp) as f:
            fresh = json.load(f) == params and os.path.exists(a.db)
    except (OSError, ValueError):
        fresh = False
    if fresh and not a.regen:
        return
    for sfx in ("", "-wal", "-shm", ".params"):
        try:
            os.unlink(a.db + sfx)
        except FileNotFoundError:
            pass
    print("query_bench: generating %s (%d contexts, %d rows); this takes minutes" %
          (a.db, a.contexts, a.rows), flush=True)
    t = time.monotonic()
    subprocess.run([os.path.join(a.build, "bench", "gen_store"), "--db", a.db, "--contexts",
                    str(a.contexts), "--rows", str(a.rows)], check=True)
    print("query_bench: generated in %.0f s" % (time.monotonic() - t), flush=True)
    with open(stamp, "w") as f:
        json.dump(params, f)


def run_once(cmd):
    """Wall ms of one run and the bytes it printed (read and thrown away)."""
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True)
    wall = (time.perf_counter() - t) * 1e3
    if p.returncode != 0:
        sys.exit("query_bench: %s: exit %d: %s" % (" ".join(cmd), p.returncode,
                                                    p.stderr.decode(errors="replace")))
    return wall, len(p.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--db", help="default: BUILD/bench/query-1m.db")
    ap.add_argument("--contexts", type=int, default=1000000)
    ap.add_argument("--rows", type=int, default=10000000)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--regen", action="store_true", help="generate the store again")
    ap.add_argument("--no-plans", action="store_true", help="skip the in-process plan table")
    a = ap.parse_args()
    a.db = a.db or os.path.join(a.build, "bench", "query-1m.db")
    memprofd = os.path.join(a.build, "daemon", "memprofd")
    ensure_store(a)

    cs = cases()
    wall = {name: [] for name, _ in cs}
    cpu = {name: [] for name, _ in cs}
    size = {}
    base = [memprofd, "query", "contexts", "--db", a.db, "--limit", "20"]
    for name, args in cs:               # warm the page cache, check every case runs
        run_once(base + args)
    for _ in range(a.runs):
        for name, args in cs:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            w, n = run_once(base + args)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            wall[name].append(w)
            cpu[name].append(((after.ru_utime - before.ru_utime) +
                              (after.ru_stime - before.ru_stime)) * 1e3)
            size[name] = n

    print("\nmemprofd query contexts --limit 20 on %s: %d runs each, interleaved" %
          (a.db, a.runs))
    print("%-34s %9s %19s %9s  %s" % ("case", "wall ms", "[q1, q3]", "cpu ms", "<= 200 ms"))
    missed = []
    for name, _ in cs:
        w = sorted(wall[name])
        q = statistics.quantiles(w, n=4) if len(w) > 1 else [w[0], w[0], w[0]]
        med, cmed = statistics.median(w), statistics.median(cpu[name])
        ok = med <= TARGET_MS
        print("%-34s %9.1f   [%7.1f, %7.1f] %9.1f  %s" % (name, med, q[0], q[2], cmed,
                                                        "ok" if ok else "MISSED"))
        if not ok and not any(name.startswith(p) for p in ("--pid", "--since", "--until")):
            missed.append(name)
    if not a.no_plans:
        print("\nThe same in-process (bench/query_bench), per plan of store_query_contexts():",
              flush=True)
        subprocess.run([os.path.join(a.build, "bench", "query_bench"), "--db", a.db,
                        "--runs", str(a.runs)], check=False)
    if missed:
        print("\nquery_bench: missed the %.0f ms target: %s" % (TARGET_MS, ", ".join(missed)))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
