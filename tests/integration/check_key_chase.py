#!/usr/bin/env python3
"""check_key_chase: `memprofd record --alloc exact --access soft --freq 1000` on
tests/workloads/key_chase (~3 s): a block of four instructions with two dependent loads
that miss (db_bench's memtable lookup shape). Timer samples pile up on the instruction
after each load, so a median over all four is itself a pile-up and the block read as
unstalled: ~155-165x over the exact reads the workload prints. soft_stall's reference
leaves the instructions after a heap read out: ~17x over, what its floor
(SOFT_STALL_MIN_FACTOR, 1/64) allows for a block this slow (~350 ns per step on the
shared 2-core VM).
MAX_OVER sits between the two; nodes and keys are summed (the window may give a
sample's share to either read). Also >= MIN_SAMPLES samples each."""
import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpdtest  # noqa: E402

SITES = (("nodes", "alloc_nodes"), ("keys", "alloc_keys"))
MAX_OVER = 50.0
MIN_SAMPLES = 20


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--workload", required=True)
    ap.add_argument("--seconds", default="3")
    a = ap.parse_args()
    mpdtest.require_bpf()
    tmp = tempfile.mkdtemp(prefix="check_key_chase.")
    db = os.path.join(tmp, "k.db")
    errs = []
    p = mpdtest.record_soft(a.memprofd, db, [a.workload, "--seconds", a.seconds])
    if p.returncode != 0:
        mpdtest.finish(["record failed: " + mpdtest.describe(p)], "key_chase", tmp)
    words = p.stdout.split()
    truth = {words[i]: int(words[i + 1]) for i in range(0, len(words) - 1, 2)}
    ctxs = mpdtest.query_contexts(a.memprofd, db)
    est = exact = 0
    for name, fn in SITES:
        s, e, n = mpdtest.access_sums(ctxs, fn)
        t = truth.get(name, 0)
        est, exact = est + e, exact + t
        mpdtest.log("%-5s %5d samples est %12d exact %12d x%.2f" % (name, s, e, t, e / max(t, 1)))
        if not n or not t:
            errs.append("%s: no context reaching %s, or no exact count printed" % (name, fn))
        elif s < MIN_SAMPLES:
            errs.append("%s: %d samples, expected >= %d" % (name, s, MIN_SAMPLES))
    mpdtest.log("both  est %12d exact %12d x%.2f" % (est, exact, est / max(exact, 1)))
    if exact and est > MAX_OVER * exact:
        errs.append("est_accesses %d is %.1fx the exact %d (limit %.0fx): the stalled block "
                    "was weighted as if unstalled" % (est, est / exact, exact, MAX_OVER))
    mpdtest.finish(errs, "two dependent misses per block: est within %.0fx of exact" % MAX_OVER,
                   tmp)


if __name__ == "__main__":
    main()
