#!/usr/bin/env python3
"""Page-granular access rates from DAMON's physical-address monitor, measured against
known rates (issue 15: a density source for hosts whose breakpoints never fire).

bench/damon_pages (built by meson) accesses pages of its own at known Poisson rates and
prints their frame numbers; this script monitors exactly those frames with a kdamond of
operations `paddr` (one region per page), reads the `damon:damon_aggregated` tracepoint
from a private tracefs instance, and turns each page's presence (the share of sampling
intervals in which the page was found accessed) into a rate: with accesses a Poisson
process of rate r, an interval of tau seconds holds one with probability 1 - exp(-r tau),
so r = -ln(1 - presence) / tau. Prints, per mode and rate: the rate achieved, the
presence, the estimate and their ratio; and the kdamond's CPU (schedstat) per page
monitored.

What it showed (README, "Access densities in the default mode"): DAMON clears the
accessed bit without a TLB flush, so presence counts TLB refills: right under a busy
host's context switches, near 0 for a hot page on a quiet one. Run it beside a load and
alone to see both.

    python3 bench/damon_pages.py --build build [--seconds 4] [--modes sleep,busy,spin]
        [--per 1] [--rates 0,2,10,50,200,1000,5000] [--sample-us 5000] [--aggr-us 100000]

Needs root, DAMON's sysfs with `paddr` operations, tracefs, and no kdamond of anyone
else's (it refuses to replace them). Leaves no kdamond and no tracefs instance behind."""
import argparse
import math
import os
import subprocess
import sys
import time

DAMON = "/sys/kernel/mm/damon/admin/kdamonds"
TRACEFS = "/sys/kernel/tracing"
PAGE = 4096


def put(path, value):
    with open(path, "w") as f:
        f.write(str(value))


def get(path):
    with open(path) as f:
        return f.read().strip()


def prerequisites():
    if os.geteuid() != 0:
        return "not root"
    if not os.path.isdir(DAMON):
        return "no DAMON sysfs interface (%s)" % DAMON
    if int(get(DAMON + "/nr_kdamonds")) != 0:
        return "kdamonds already exist (another DAMON user): not replacing them"
    if not os.path.isdir(TRACEFS + "/events/damon/damon_aggregated"):
        return "no damon:damon_aggregated tracepoint under " + TRACEFS
    return None


def frames(proc):
    """The workload's 'PFN RATE' lines, up to its blank line."""
    out = []
    for line in proc.stdout:
        if not line.strip():
            return out
        pfn, rate = line.split()
        out.append((int(pfn), float(rate)))
    raise RuntimeError("damon_pages ended before it printed its frames")


def cpu_ns(pid):
    with open("/proc/%d/schedstat" % pid) as f:
        return int(f.read().split()[0])


def monitor(pages, sample_us, aggr_us, wait, inst):
    """Runs a paddr kdamond over pages (sorted frame numbers) until wait() returns;
    returns the aggregated lines and the kdamond's CPU ns."""
    put(DAMON + "/nr_kdamonds", 1)
    ctx = DAMON + "/0/contexts"
    try:
        put(ctx + "/nr_contexts", 1)
        c = ctx + "/0"
        if "paddr" not in get(c + "/avail_operations").split():
            raise RuntimeError("DAMON has no paddr operations: " + get(c + "/avail_operations"))
        put(c + "/operations", "paddr")
        put(c + "/monitoring_attrs/intervals/sample_us", sample_us)
        put(c + "/monitoring_attrs/intervals/aggr_us", aggr_us)
        # One region per page, kept so: DAMON merges two adjacent regions (physically
        # adjacent pages) whose counts are close only while the union stays within
        # total size / min regions, here one page; and splits only below max / 2 regions.
        n = max(3, len(pages))
        put(c + "/monitoring_attrs/nr_regions/max", n)
        put(c + "/monitoring_attrs/nr_regions/min", n)
        put(c + "/targets/nr_targets", 1)   # paddr takes one target
        regs = c + "/targets/0/regions"
        put(regs + "/nr_regions", len(pages))
        for i, pfn in enumerate(pages):
            put("%s/%d/end" % (regs, i), (pfn + 1) * PAGE)   # end first: start < end holds
            put("%s/%d/start" % (regs, i), pfn * PAGE)
            put("%s/%d/end" % (regs, i), (pfn + 1) * PAGE)
        put(inst + "/buffer_size_kb", 8192)
        put(inst + "/events/damon/damon_aggregated/enable", 1)
        put(DAMON + "/0/state", "on")
        pid = int(get(DAMON + "/0/pid"))
        c0 = cpu_ns(pid)
        wait()
        c1 = cpu_ns(pid)
        put(DAMON + "/0/state", "off")
        put(inst + "/events/damon/damon_aggregated/enable", 0)
        with open(inst + "/trace") as f:
            return [l for l in f if "damon_aggregated:" in l], c1 - c0
    finally:
        try:
            if get(DAMON + "/0/state") == "on":
                put(DAMON + "/0/state", "off")
        finally:
            put(DAMON + "/nr_kdamonds", 0)


def presence(lines, pages, per_aggr):
    """Per page: (present samples, samples) over the whole windows (the first and last
    of each region are cut: partial). A region DAMON merged counts for each page in it."""
    # "... damon_aggregated: target_id=0 nr_regions=N START-END: NR_ACCESSES AGE"
    out = {p: [] for p in pages}
    for l in lines:
        head, tail = l.rsplit(":", 1)
        start, end = (int(x) for x in head.split()[-1].split("-"))
        nr = int(tail.split()[0])
        for p in range(start // PAGE, (end + PAGE - 1) // PAGE):
            if p in out:
                out[p].append(nr)
    res = {}
    for p, ks in out.items():
        ks = ks[1:-1]
        res[p] = (sum(ks), per_aggr * len(ks))
    return res


def run_mode(args, mode, rates):
    argv = [os.path.join(args.build, "bench", "damon_pages"), str(args.seconds), mode,
            str(args.per)] + [str(r) for r in rates]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    fr = frames(proc)
    if any(p == 0 for p, _ in fr):
        proc.kill()
        raise RuntimeError("a page without a frame number (pagemap hid it?)")
    inst = "%s/instances/memprofd-damon-pages-%d" % (TRACEFS, os.getpid())
    os.mkdir(inst)
    try:
        err = []
        lines, cpu = monitor(sorted(p for p, _ in fr), args.sample_us, args.aggr_us,
                             lambda: err.append(proc.communicate()[1]), inst)
    finally:
        os.rmdir(inst)
    achieved = {}
    for l in err[0].splitlines():
        r, a = l.split()
        achieved[float(r)] = float(a)
    per_aggr = args.aggr_us // args.sample_us
    pres = presence(lines, [p for p, _ in fr], per_aggr)
    tau = args.sample_us / 1e6
    rows = []
    for r in rates:
        k = sum(pres[p][0] for p, rr in fr if rr == r)
        n = sum(pres[p][1] for p, rr in fr if rr == r)
        f = k / n if n else float("nan")
        sat = n and k >= n - 0.5
        est = max(0.0, -math.log(1 - min(f, 1 - 0.5 / n)) / tau) if n else float("nan")
        a = achieved.get(float(r), float("nan"))
        rows.append((r, a, f, est, sat, n))
    return rows, cpu, len(fr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--modes", default="sleep,busy,spin")
    ap.add_argument("--per", type=int, default=1, help="pages per rate")
    ap.add_argument("--rates", default="0,2,10,50,200,1000,5000")
    ap.add_argument("--sample-us", type=int, default=5000)
    ap.add_argument("--aggr-us", type=int, default=100000)
    args = ap.parse_args()
    why = prerequisites()
    if why:
        print("damon_pages: " + why, file=sys.stderr)
        return 77
    rates = [float(x) for x in args.rates.split(",")]
    print("| mode | rate set | achieved/s | presence | estimate/s | est/achieved |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    costs = []
    for mode in args.modes.split(","):
        rows, cpu, npages = run_mode(args, mode, rates)
        for r, a, f, est, sat, n in rows:
            ratio = est / a if a > 0 else float("nan")
            print("| %s | %g | %.1f | %.3f | %s%.0f | %s |" %
                  (mode, r, a, f, ">= " if sat else "", est,
                   "%.2f" % ratio if a > 0 else "-"))
        costs.append((mode, npages, cpu))
    tau = args.sample_us / 1e6
    for mode, npages, cpu in costs:
        print("kdamond CPU (%s): %.2f%% of one CPU for %d pages at %g us samples, %.1f us per "
              "page-sample" % (mode, 100 * cpu / 1e9 / args.seconds, npages, args.sample_us,
                               cpu / 1e3 / (npages * args.seconds / tau)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
