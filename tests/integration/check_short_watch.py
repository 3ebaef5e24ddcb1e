#!/usr/bin/env python3
"""check_short_watch: the sampler's in-process watches measure sampled objects that live
under a millisecond, which die before any daemon-side watch window can open on them
(issue 15). short_watch's hot objects (alloc_brief_hot: every granule read for 0.8 ms)
and cold ones (alloc_brief_cold: written once, then idle for 0.8 ms) are recorded in the
default mode, the soft source at 1 Hz so that its samples cannot decide:
- the run reports in-process watches and their traps;
- alloc_brief_hot has at least one watch's worth of traps behind it (16; the soft source
  gives 2 samples in the whole run), an estimate, a density interval above 0, and is hot
  when a trap is cheap enough to show the hot threshold (see check_watch.py);
- alloc_brief_cold is not hot, and its own watches decide it: no trap over enough watched
  time says it is not hot, so its class is not `unknown` and its density interval ends
  below the hot threshold (the store-wide soft samples alone leave it unknown);
- --passes: objects of about a microsecond with a known count of accesses; those no
  watch saw take the whole-watched ones' accesses per byte, and the context's estimate
  per object lies within KNOWN_SPAN of the count;
- no target dies: --runs short runs, each sent --stray-traps SIGTRAPs shaped as the
  kernel's debug traps (TRAP_HWBKPT/TRAP_BRKPT, the traps that killed ~1 in 10 targets
  here before the sampler guarded SIGTRAP), all exit 0 and record counts the traps as
  swallowed; a tgkill'd SIGTRAP (not a debug trap) still kills its target.
Without the in-process watches (MEMPROFD_SAMPLER_WATCH_PPM=0, or no memprofd:watch
probe) alloc_brief_hot has no traps and this fails. Skips when BPF or the breakpoint PMU
is missing."""
import argparse
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpdtest  # noqa: E402

HOT_DENSITY = 1000.0          # reporter/classify.h
GRANULE = 8                   # sampler/sampler_watch.h
K = 16                        # SAMPLER_WATCH_HITS
WORDS = 512                   # tests/workloads/short_watch.c: 4 KiB objects
PASSES = 4                    # --passes: each hot object's granules read this many times
KNOWN_SPAN = (0.5, 3.0)       # accesses per hot object over the known count, allowed
SIGTRAP_STATUS = 128 + 5      # record's exit status for a target killed by SIGTRAP


def ctx_of(ctxs, fn):
    for c in ctxs:
        if any(f.get("function") == fn for f in c.get("frames", [])):
            return c
    return None


def short_run(a, db, extra):
    env = dict(os.environ, MEMPROFD_SAMPLE_BYTES="16384")
    p = mpdtest.run([a.memprofd, "record", "--db", db, "--freq", "1", "--", a.workload,
                     "--seconds", "0.5", "--life-us", "800"] + extra, timeout=120, env=env)
    for f in (db, db + "-wal", db + "-shm"):
        if os.path.exists(f):
            os.unlink(f)
    m = re.search(r"(\d+) stray debug traps swallowed", p.stderr)
    return p, int(m.group(1)) if m else None


def check_known_counts(a, tmp, errs):
    """--passes: objects of about a microsecond, every granule written once and read
    PASSES times (WORDS x (PASSES + 1) accesses each). The sampler's watches see some of
    them whole; the unwatched rest take their accesses per byte. Per byte-second of the
    watched ones' lives, whose few traps (~15 us each) outlast the objects' own
    microsecond many times over, every unwatched one came out ~40x too low."""
    db = os.path.join(tmp, "known.db")
    env = dict(os.environ, MEMPROFD_SAMPLE_BYTES="16384")
    p = mpdtest.run([a.memprofd, "record", "--db", db, "--freq", "1", "--", a.workload,
                     "--seconds", "1", "--passes", str(PASSES)], timeout=120, env=env)
    if p.returncode != 0:
        errs.append("--passes: record failed: " + mpdtest.describe(p))
        return
    m = re.search(r"watch: in-process: (\d+) watches", p.stderr)
    hot = ctx_of(mpdtest.query_contexts(a.memprofd, db), "alloc_brief_hot")
    if not m or int(m.group(1)) < 4 or not hot or not hot["alloc_count"]:
        errs.append("--passes: too few in-process watches or no alloc_brief_hot: %r" %
                    (m and m.group(0)))
        return
    known = WORDS * (PASSES + 1)
    per = hot["est_accesses"] / hot["alloc_count"]
    mpdtest.log("--passes %d: alloc_brief_hot %.0f accesses per object (known %d), %d "
                "objects, %s" % (PASSES, per, known, hot["alloc_count"], m.group(0)))
    if not KNOWN_SPAN[0] * known <= per <= KNOWN_SPAN[1] * known:
        errs.append("--passes: alloc_brief_hot estimated at %.0f accesses per object, known "
                    "%d (want %.1f-%.1fx)" % (per, known, KNOWN_SPAN[0], KNOWN_SPAN[1]))


def check_no_deaths(a, tmp, errs):
    """Targets sent kernel-shaped debug traps live on; a user's SIGTRAP still kills."""
    db, deaths, swallowed, sent = os.path.join(tmp, "runs.db"), 0, 0, 0
    for i in range(a.runs):
        p, n = short_run(a, db, ["--stray-traps", str(a.stray_traps)])
        if p.returncode != 0:
            deaths += 1
            mpdtest.log("run %d: %s" % (i, mpdtest.describe(p)))
            sent += a.stray_traps     # unknown: it died before reporting
        else:
            m = re.search(r'"stray_traps": (\d+)', p.stdout or "")
            sent += int(m.group(1)) if m else 0
        swallowed += n or 0
    mpdtest.log("%d runs, %d deaths, %d stray traps sent (each once the guard was "
                "installed), %d swallowed" % (a.runs, deaths, sent, swallowed))
    if deaths:
        errs.append("%d of %d targets died" % (deaths, a.runs))
    if sent < a.runs * a.stray_traps // 2:
        errs.append("only %d of %d stray traps were sent: the sampler's guard (installed "
                    "with its first watch) was missing in most runs" % (
                        sent, a.runs * a.stray_traps))
    if swallowed < sent - deaths * a.stray_traps:
        errs.append("record counted %d swallowed traps, %d were sent" % (
            swallowed, sent - deaths * a.stray_traps))
    p, _ = short_run(a, db, ["--stray-traps", "1", "--user-trap"])
    if p.returncode != SIGTRAP_STATUS:
        errs.append("a tgkill'd SIGTRAP did not kill the target: %s" % mpdtest.describe(p))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--workload", required=True, help="tests/workloads/short_watch")
    ap.add_argument("--runs", type=int, default=8, help="short runs that must not die")
    ap.add_argument("--stray-traps", type=int, default=2, help="debug traps sent per run")
    a = ap.parse_args()
    mpdtest.require_bpf()
    mpdtest.require_breakpoints()
    tmp = tempfile.mkdtemp(prefix="check_short_watch.")
    errs = []
    db = os.path.join(tmp, "short.db")
    env = dict(os.environ, MEMPROFD_SAMPLE_BYTES="16384")   # 4 KiB objects: 22% sampled
    p = mpdtest.run([a.memprofd, "record", "--db", db, "--freq", "1", "--", a.workload,
                     "--seconds", "2", "--life-us", "800"], timeout=120, env=env)
    if p.returncode != 0:
        mpdtest.finish(["record failed: " + mpdtest.describe(p)], "short_watch", tmp)
    m = re.search(r"watch: in-process: (\d+) watches, (\d+) traps", p.stderr)
    t = re.search(r"traps \(([\d.]+) us each", p.stderr)
    if not m or not t:
        mpdtest.finish(["record does not report in-process watches: %r" % p.stderr],
                       "short_watch", tmp)
    watches, traps, trap_us = int(m.group(1)), int(m.group(2)), float(t.group(1))
    mpdtest.log("in-process: %d watches, %d traps, %.1f us a trap" % (watches, traps, trap_us))
    if watches < 4:
        errs.append("only %d in-process watches" % watches)

    ctxs = mpdtest.query_contexts(a.memprofd, db)
    hot, cold = ctx_of(ctxs, "alloc_brief_hot"), ctx_of(ctxs, "alloc_brief_cold")
    if not hot or not cold:
        mpdtest.finish(["contexts alloc_brief_hot/alloc_brief_cold missing"], "short_watch", tmp)
    for c in (hot, cold):
        mpdtest.log("%s: %d samples, est %d, density %.4g %s, class %s" % (
            c["frames"][0]["function"], c["access_samples"], c["est_accesses"],
            c["lifetime_access_density"], c.get("density_interval"), c["class"]))
    lo = (hot.get("density_interval") or [0, None])[0]
    if hot["access_samples"] < K or hot["est_accesses"] <= 0 or lo <= 0:
        errs.append("alloc_brief_hot: %d samples, est %d, interval %r: no watch saw it"
                    % (hot["access_samples"], hot["est_accesses"], hot.get("density_interval")))
    shown = 1e6 / trap_us / GRANULE           # accesses/byte/s the traps can show at most
    if shown > 1.25 * HOT_DENSITY and hot["class"] != "hot":
        errs.append("alloc_brief_hot is %s (density %.4g), want hot" % (
            hot["class"], hot["lifetime_access_density"]))
    if cold["class"] == "hot":
        errs.append("alloc_brief_cold is hot (density %.4g, %d samples)" % (
            cold["lifetime_access_density"], cold["access_samples"]))
    # 3 traps expected at the hot threshold over the granule-ns its watches covered
    expected = HOT_DENSITY * GRANULE * cold.get("watch_ns", 0) / 1e9
    mpdtest.log("alloc_brief_cold: %d traps over %d granule-ns watched, %.1f expected if hot"
                % (cold.get("watch_hits", 0), cold.get("watch_ns", 0), expected))
    if expected < 3 or cold["class"] == "unknown":
        errs.append("alloc_brief_cold is %s, %.1f traps expected from its own watches: they "
                    "did not decide it" % (cold["class"], expected))
    check_known_counts(a, tmp, errs)
    check_no_deaths(a, tmp, errs)
    mpdtest.finish(errs, "in-process watches tell short-lived hot objects from cold ones, "
                   "and no target dies of their traps", tmp)


if __name__ == "__main__":
    main()
