#!/usr/bin/env python3
"""check_exact: `memprofd record --alloc exact` must count, per allocation site, exactly
what the workload did. Runs the workload under the recorder, queries every context, and
compares per site (first frame's function, contexts of one site summed): alloc_count,
total_size, min_size, max_size exactly; the number of contexts and their second frames;
binary and build-id; lifetimes within the workload's own CLOCK_MONOTONIC brackets; and
that the JSON has exactly the contract's keys and types.
With --start-at-second the run straddles a minute boundary: counts must not depend on
how the recorder splits a context into time buckets.
With --sample-every the recording is the default sampled mode with a sampling mean of 1
byte (MEMPROFD_SAMPLE_BYTES=1): every allocation is a sample of weight 1, so the same exact
counts check that each of the sampler's entry points passes its caller to the probe.
Usage: check_exact.py --memprofd PATH --workload PATH [--seed N|random] [--sample-every]
       [-- WORKLOAD_ARGS]"""
import argparse
import os
import random
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpdtest as t  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--workload", required=True)
    ap.add_argument("--seed", help="pass --seed N to the workload; 'random' picks one")
    ap.add_argument("--record-arg", action="append", default=[],
                    help="extra argument for memprofd record (repeatable)")
    ap.add_argument("--timeout", type=int, default=150)
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    ap.add_argument("--start-at-second", type=float,
                    help="start when the wall clock's seconds reach this value, so that the "
                         "run straddles a minute boundary (a time-bucket boundary for any "
                         "bucket length that divides 60 s)")
    ap.add_argument("--sample-every", action="store_true",
                    help="record in sampled mode with every allocation sampled (see above)")
    ap.add_argument("workload_args", nargs="*")
    a = ap.parse_args()

    t.require_bpf()
    wargs = list(a.workload_args)
    if a.seed:
        seed = random.SystemRandom().randrange(1, 1 << 31) if a.seed == "random" else int(a.seed)
        t.log("workload seed: %d (rerun with --seed %d)" % (seed, seed))
        wargs += ["--seed", str(seed)]
    tmp = tempfile.mkdtemp(prefix="mpd-exact-")
    db, expect_path = os.path.join(tmp, "exact.db"), os.path.join(tmp, "expect.json")
    name = os.path.basename(a.workload)
    argv = [os.path.abspath(a.workload), "--expect", expect_path, *wargs]
    t.log("temporary directory: %s%s" % (tmp, "" if a.keep else " (removed on pass)"))

    if a.start_at_second is not None:
        while not a.start_at_second <= time.time() % 60 < a.start_at_second + 0.3:
            time.sleep(0.05)
        t.log("started at %s (wall clock)" % time.strftime("%H:%M:%S"))
    if a.sample_every:
        p = t.run([a.memprofd, "record", "--db", db, *a.record_arg, "--", *argv], timeout=a.timeout,
                  env=dict(os.environ, MEMPROFD_SAMPLE_BYTES="1"))
    else:
        p = t.record(a.memprofd, db, argv, extra=a.record_arg, timeout=a.timeout)
    errs = []
    if p.returncode != 0:
        errs.append("memprofd record did not exit 0 for a workload that exits 0: " + t.describe(p))
    if p.stderr.strip():
        t.log("memprofd record stderr:\n  " + p.stderr.strip().replace("\n", "\n  "))
    if not os.path.exists(expect_path):
        errs.append("the workload did not write %s: it did not run to completion under the "
                    "recorder" % expect_path)
        t.finish(errs, "exact counts for " + name, None if a.keep else tmp)
    expect = t.load_expect(expect_path)
    try:
        ctxs = t.query_contexts(a.memprofd, db)
    except RuntimeError as e:
        errs.append(str(e))
        t.finish(errs, "exact counts for " + name, None if a.keep else tmp)
    t.log("query returned %d contexts" % len(ctxs))
    cerrs = t.contract_errors(ctxs)
    if len(cerrs) > 20:
        cerrs = cerrs[:20] + ["... and %d more contract problems" % (len(cerrs) - 20)]
    errs += cerrs
    if isinstance(ctxs, list):
        try:
            serrs, lines = t.compare(ctxs, expect, a.workload)
        except (KeyError, TypeError) as e:
            serrs, lines = ["cannot compare, malformed context: %r" % (e,)], []
        errs += serrs
        for line in lines:
            t.log(line)
    t.finish(errs, "exact counts for %s (%d sites)" % (name, len(expect["sites"])),
             None if a.keep else tmp)


if __name__ == "__main__":
    main()
