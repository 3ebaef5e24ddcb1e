#!/usr/bin/env python3
"""check_watch: the default (sampled) mode measures the sampled objects' accesses with
watchpoint windows, whatever their share of the heap. watch_known's hot objects (every
granule read and written in a loop) and cold ones (written once) are recorded with the
soft source at 1 Hz, so nearly every access estimate must come from the watch:
- the run says how many windows and traps it took, within its trap budget;
- alloc_dense_hot has traps behind it, a density interval above 0, and is hot when a
  trap is cheap enough for the windows to show the hot threshold (8000 accesses/s per
  8-byte granule: a trap under 125 us), else at least half the trap-limited rate;
- alloc_idle_cold has no access beyond its one initial write (which the sampler's own
  in-process watch, armed at the allocation, may see: at most one trap per byte of a
  granule, a rep stosb that goes on byte by byte after the first trap), a finite density
  bound, and is not hot (cold needs 200 s lifetimes: it is notcold here,
  with the evidence to say so, not unknown).
Skips when BPF or the breakpoint PMU is missing."""
import argparse
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpdtest  # noqa: E402

HOT_DENSITY = 1000.0          # reporter/classify.h
GRANULE = 8                   # daemon/access/watch.h
SECONDS = "3"
OBJECTS = 4                   # --objects
WORDS_PER_OBJECT = 8 * 1024   # tests/workloads/watch_known.c: 64 KiB, 8-byte granules


def ctx_of(ctxs, fn):
    for c in ctxs:
        if any(f.get("function") == fn for f in c.get("frames", [])):
            return c
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--workload", required=True, help="tests/workloads/watch_known")
    a = ap.parse_args()
    mpdtest.require_bpf()
    # The breakpoint PMU, checked here rather than read from memprofd's message.
    mpdtest.require_breakpoints()
    tmp = tempfile.mkdtemp(prefix="check_watch.")
    errs = []
    db = os.path.join(tmp, "watch.db")
    env = dict(os.environ, MEMPROFD_SAMPLE_BYTES="16384")   # 64 KiB objects: 98% sampled
    p = mpdtest.run([a.memprofd, "record", "--db", db, "--freq", "1", "--", a.workload,
                     "--seconds", SECONDS, "--objects", str(OBJECTS)], timeout=120, env=env)
    if p.returncode != 0:
        mpdtest.finish(["record failed: " + mpdtest.describe(p)], "watch", tmp)
    m = re.search(r"watch: (\d+) windows on (\d+) objects, (\d+) traps \(([\d.]+) us each, "
                  r"budget (\d+)/s\)", p.stderr)
    if not m:
        mpdtest.finish(["record does not report its watch windows: %r" % p.stderr], "watch", tmp)
    windows, objects, traps = int(m.group(1)), int(m.group(2)), int(m.group(3))
    trap_us, budget = float(m.group(4)), float(m.group(5))
    mpdtest.log("watch: %d windows on %d objects, %d traps, %.1f us each, budget %.0f/s" %
                (windows, objects, traps, trap_us, budget))
    if windows < 4:
        errs.append("only %d windows" % windows)
    # Budget: a second's worth saved up at most, plus the windows open at the end.
    if traps > budget * (float(SECONDS) + 2) + 4 * 16:
        errs.append("%d traps over the budget of %.0f/s" % (traps, budget))

    ctxs = mpdtest.query_contexts(a.memprofd, db)
    hot, cold = ctx_of(ctxs, "alloc_dense_hot"), ctx_of(ctxs, "alloc_idle_cold")
    if not hot or not cold:
        mpdtest.finish(["contexts alloc_dense_hot/alloc_idle_cold missing"], "watch", tmp)
    # Every object the sampler kept had a window (a 64 KiB object escapes a 16 KiB mean
    # with p = e^-4: one of the 8 does in ~14% of runs, which is no fault of the watch).
    sampled = (hot.get("alloc_samples") or 0) + (cold.get("alloc_samples") or 0)
    if objects < sampled or sampled < OBJECTS:
        errs.append("windows on %d objects of %d sampled" % (objects, sampled))
    for c in (hot, cold):
        mpdtest.log("%s: %d samples, est %d, density %.4g %s, class %s" % (
            c["frames"][0]["function"], c["access_samples"], c["est_accesses"],
            c["lifetime_access_density"], c.get("density_interval"), c["class"]))
    lo, hi = hot.get("density_interval") or [0, None]
    if hot["access_samples"] < 16 or hot["est_accesses"] <= 0 or lo <= 0:
        errs.append("alloc_dense_hot: %d traps, est %d, interval %r: the watch did not see it"
                    % (hot["access_samples"], hot["est_accesses"], hot.get("density_interval")))
    shown = 1e6 / trap_us / GRANULE           # accesses/byte/s the traps can show at most
    if shown > 1.25 * HOT_DENSITY:
        if hot["class"] != "hot":
            errs.append("alloc_dense_hot is %s (density %.4g), want hot" % (
                hot["class"], hot["lifetime_access_density"]))
    elif hot["lifetime_access_density"] < 0.5 * shown:
        errs.append("alloc_dense_hot: density %.4g below half the trap-limited %.4g" % (
            hot["lifetime_access_density"], shown))
    chi = (cold.get("density_interval") or [0, None])[1]
    # The memset at start, per granule: one trap, or up to one per byte (GRANULE): beside
    # busy CPUs one run in 12 had a cold object's in-process watch take 8 traps, every
    # other run 1 (its rep stosb, we take it, going on byte by byte after a trap).
    init_writes = OBJECTS * WORDS_PER_OBJECT * GRANULE
    if cold["est_accesses"] > init_writes or cold["class"] != "notcold" or chi is None:
        errs.append("alloc_idle_cold: est %d, class %s, interval %r: want <= %d, notcold, bounded"
                    % (cold["est_accesses"], cold["class"], cold.get("density_interval"),
                       init_writes))
    mpdtest.finish(errs, "the watch tells the sampled hot objects from the cold ones", tmp)


if __name__ == "__main__":
    main()
