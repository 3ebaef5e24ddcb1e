#!/usr/bin/env python3
"""check_fault_time: `memprofd record --alloc exact --access soft --freq 1000` on
tests/workloads/fresh_pages (~3 s): a hot buffer read in a loop beside 8 MiB blocks of
fresh pages, each page written once. The hot context's est_accesses must be >= RATIO x
the fresh blocks' context's, and the hot one must have >= MIN_SAMPLES samples. Under a
hypervisor that backs guest memory on first touch, a fault's host time (~10-13 us here)
ends with the thread at the faulting store, where the cpu-clock samples due meanwhile
land (bpf/soft.h SOFT_F_FAULT): weighed as the program's instructions, they made the
fresh blocks (a few thousand stores) 1.5x the hot buffer (billions of loads); taken as
the faults' time, 0-3 samples were left to them in 7 runs, the hot buffer >= 180x them. Prints both contexts' samples and estimates,
the workload's counts, and how many samples were taken as fault time. Skips (77)
without BPF."""
import argparse
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpdtest  # noqa: E402

RATIO = 20
MIN_SAMPLES = 100


def frames_have(c, name):
    return any(f.get("function") == name for f in c.get("frames", []))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--workload", required=True)
    ap.add_argument("--seconds", default="3")
    a = ap.parse_args()
    mpdtest.require_bpf()
    tmp = tempfile.mkdtemp(prefix="check_fault_time.")
    errs = []
    db = os.path.join(tmp, "fresh.db")
    p = mpdtest.record(a.memprofd, db, [a.workload, "--seconds", a.seconds],
                       extra=("--access", "soft", "--freq", "1000"), timeout=120)
    if p.returncode != 0:
        mpdtest.finish(["record failed: %s" % mpdtest.describe(p)],
                       "soft source: page faults' time is not accesses", tmp)
    counts = re.search(r"hot_reads (\d+) fresh_writes (\d+)", p.stdout)
    told = re.search(r"(\d+) at page faults' instructions", p.stderr)
    mpdtest.log("workload: %s; samples taken as fault time: %s" % (
        counts.group(0) if counts else "no counts", told.group(1) if told else "none"))
    for line in p.stderr.splitlines():
        if "page faults not told apart" in line:
            mpdtest.log(line)
    ctxs = mpdtest.query_contexts(a.memprofd, db)

    def sums(fn):
        cs = [c for c in ctxs if frames_have(c, fn)]
        return (sum(c.get("access_samples", 0) for c in cs),
                sum(c.get("est_accesses", 0) for c in cs), len(cs))

    (hs, he, hn), (fs, fe, fn) = sums("alloc_hot"), sums("alloc_fresh")
    mpdtest.log("hot %d samples est %d | fresh %d samples est %d" % (hs, he, fs, fe))
    if not hn or not fn:
        errs.append("no context for alloc_hot or alloc_fresh")
    elif hs < MIN_SAMPLES:
        errs.append("the hot context has %d samples, expected >= %d" % (hs, MIN_SAMPLES))
    elif he < RATIO * fe or he <= 0:
        errs.append("hot est_accesses %d is not >= %dx the fresh blocks' %d (page faults' "
                    "time weighed as accesses)" % (he, RATIO, fe))
    mpdtest.finish(errs, "soft source: page faults' time is not accesses", tmp)


if __name__ == "__main__":
    main()
