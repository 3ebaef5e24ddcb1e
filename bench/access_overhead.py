#!/usr/bin/env python3
"""access_overhead: what data-access sampling adds to a recording of bench/kvcache, side by
side in one run: kvcache alone; memprofd record --access off; memprofd record as by
default (--access auto: soft at its default frequency where no PMU opens) and
--access soft at any --freqs given. Variants are interleaved run
by run so drift hits all alike. Per variant and thread count:
  slowdown      baseline median ops/s / variant median ops/s (kvcache's own figure, wall)
  cpu ratio     kvcache's CPU time (user+sys, from rusage) / the baseline's: what the
                sampling interrupts and the BPF programs cost the workload itself, less
                sensitive than wall time to other load on the machine
  memprofd cpu  the recorder's own CPU (its closing line), in ms per second of kvcache
  us/sample     kvcache's extra CPU over the --access off variant's median, per access
                sample the recorder reports (its "memprofd: access:" line): the price of
                one sample to the sampled task (resolvable with a high --freqs, e.g. 4000)
Default mode (--alloc sampled) throughout, as a default recording runs.
Usage: bench/access_overhead.py --build BUILDDIR [--runs 7] [--ops 2000000]
       [--threads 1,2] [--freqs 250,1000] [--csv FILE]"""
import argparse
import csv
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from overhead import OPS_RE  # noqa: E402  (kvcache's closing line; overhead.py owns it)

MPD_CPU_RE = re.compile(r"memprofd cpu (\d+) ms")
SAMPLES_RE = re.compile(r"memprofd: access: \w+: (\d+) samples of the targets")


def variants(a, tmp):
    kv = os.path.join(a.build, "bench", "kvcache")
    mpd = os.path.join(a.build, "daemon", "memprofd")
    db = os.path.join(tmp, "bench.db")

    def rec(*extra):
        return lambda ops, th: [mpd, "record", "--db", db, *extra, "--", kv, "--ops", ops,
                                "--threads", th]

    v = [("kvcache alone", lambda ops, th: [kv, "--ops", ops, "--threads", th]),
         ("record --access off", rec("--access", "off")),
         ("record (default: --access auto)", rec())]
    for f in [x for x in a.freqs.split(",") if x]:
        v.append(("record --access soft --freq %s" % f, rec("--access", "soft", "--freq", f)))
    return v


def run_once(cmd, timeout):
    """((ops/s, kvcache cpu s, memprofd cpu s, access samples), error) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "timed out"
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = p.stdout + p.stderr
    m = OPS_RE.search(out)
    if p.returncode != 0 or not m:
        return None, (p.stderr.strip().splitlines() or ["rc %d" % p.returncode])[-1]
    # Children's rusage covers memprofd and, through its wait, kvcache: take memprofd's own.
    total = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    c = MPD_CPU_RE.search(out)
    mpd = int(c.group(1)) / 1000.0 if c else 0.0
    n = SAMPLES_RE.search(out)
    return (int(m.group(3)), total - mpd, mpd, int(n.group(1)) if n else 0), None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", required=True, help="meson build directory")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--ops", type=int, default=2000000)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--freqs", default="", help="extra soft frequencies to compare (Hz)")
    ap.add_argument("--csv", help="also write the figures to this CSV file")
    ap.add_argument("--timeout", type=int, default=300)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="mpd-access-overhead-")
    try:
        vs = variants(a, tmp)
        res = {}       # (variant, threads) -> [(ops/s, kv cpu, mpd cpu)]
        errors = {}
        for th in a.threads.split(","):
            for i in range(a.runs):
                for name, mk in vs:
                    r, err = run_once(mk(str(a.ops), th), a.timeout)
                    if r is None:
                        errors[(name, th)] = err
                    else:
                        res.setdefault((name, th), []).append(r)
                print("threads %s: run %d/%d done" % (th, i + 1, a.runs), file=sys.stderr,
                      flush=True)
        rows = []
        for th in a.threads.split(","):
            base = res.get((vs[0][0], th))
            if not base:
                sys.exit("access_overhead: the baseline failed: %s" % errors.get((vs[0][0], th)))
            bops = statistics.median(r[0] for r in base)
            bcpu = statistics.median(r[1] for r in base)
            off = res.get((vs[1][0], th))
            ocpu = statistics.median(r[1] for r in off) if off else None
            for name, _ in vs:
                r = res.get((name, th))
                if not r:
                    rows.append([name, th] + [""] * 8 + [errors.get((name, th), "no data")])
                    continue
                per = [(x[1] - ocpu) / x[3] * 1e6 for x in r if ocpu is not None and x[3]]
                ops = [x[0] for x in r]
                kcpu = statistics.median(x[1] for x in r)
                mcpu = statistics.median(x[2] for x in r)
                med = statistics.median(ops)
                secs = a.ops / med          # kvcache's own run time at the median rate
                rows.append([name, th, int(med), "%.3f" % (bops / med),
                             "%.3f" % (bops / max(ops)), "%.3f" % (bops / min(ops)),
                             "%.3f" % (kcpu / bcpu if bcpu else 0), "%.1f" % (1000 * mcpu / secs),
                             "%.1f" % statistics.median(per) if per else "-", len(r), ""])
        hdr = ["variant", "threads", "median_ops_s", "slowdown", "slowdown_best",
               "slowdown_worst", "kvcache_cpu_ratio", "memprofd_cpu_ms_per_s",
               "kvcache_us_per_sample", "runs", "error"]
        with open(a.csv or os.devnull, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(hdr)
            w.writerows(rows)
        print("| variant | threads | median ops/s | slowdown (median, [best, worst]) | "
              "kvcache cpu ratio | memprofd cpu ms/s | kvcache us/sample |")
        print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
        for r in rows:
            if r[2] == "":
                print("| %s | %s | - | failed: %s | - | - | - |" % (r[0], r[1], r[10]))
            else:
                print("| %s | %s | %d | %sx [%s, %s] | %sx | %s | %s |" % tuple(r[:9]))
        print("\n%d interleaved runs per variant; kvcache --ops %d; CSV: %s" %
              (a.runs, a.ops, a.csv or "--csv FILE"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
