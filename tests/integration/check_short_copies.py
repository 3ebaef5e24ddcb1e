#!/usr/bin/env python3
"""check_short_copies: `memprofd record --alloc exact --access soft --freq 1000` on
tests/workloads/short_copies (~4 s): short-lived 4 KiB buffers filled by memcpy and freed
within microseconds, a hot and a cold site alternating on the same address, once from the
program's own code (malloc) and once through std::string (allocated in libstdc++'s
_M_mutate, code that uses %rbp as a plain register). For each pattern: a context whose
frames reach hot_<p> and one reaching cold_<p> (a frame-pointer walk cut inside
libstdc++ merges both into one context of libstdc++ frames only), the hot one with >=
MIN_SAMPLES samples and >= RATIO x the cold one's access samples (a sample credited to
the object at its address at another time than the sample's would mix them: the true
ratio is ~65x, the time each spends) and >= EST_RATIO x its est_accesses; no context
made only of libstdc++/libc frames claims to be whole. Prints est/exact per site, the
exact count of 8-byte words being what the workload prints.
EST_RATIO is below RATIO because the weights depend on the CPU (README, soft estimator):
on the Intel hosts of earlier runs glibc filled 4 KiB with rep movsb and the estimates
held >= 20x; on an AMD EPYC (AVX-512, fsrm) the samples still split 66-132 : 1 but a
sample in the cold site's copy weighed 5-6x one in the hot read loop (hot x0.33-0.42 of
its exact count, cold x1.5-2.7 on 6-10 samples): est ratios 10-17x; in the ASan build
there (the workload's copies go through ASan's memcpy) cold was x4.9 and the ratio 4.5x.
So the estimates are only held to rank hot clearly above cold."""
import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpdtest  # noqa: E402

PATTERNS = ("buf", "str")
RATIO = 20
EST_RATIO = 2
MIN_SAMPLES = 20
RUNTIME = ("libstdc++.so", "libc.so", "ld-linux")


def runtime_only(c):
    mods = [os.path.basename(f.get("module") or "") for f in c.get("frames", [])]
    return bool(mods) and all(any(m.startswith(r) for r in RUNTIME) for m in mods)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--workload", required=True)
    ap.add_argument("--seconds", default="4")
    a = ap.parse_args()
    mpdtest.require_bpf()
    tmp = tempfile.mkdtemp(prefix="check_short_copies.")
    db = os.path.join(tmp, "s.db")
    errs = []
    p = mpdtest.record_soft(a.memprofd, db, [a.workload, "--seconds", a.seconds])
    if p.returncode != 0:
        mpdtest.finish(["record failed: " + mpdtest.describe(p)], "short_copies", tmp)
    words = p.stdout.split()
    truth = {words[i]: int(words[i + 1]) for i in range(0, len(words) - 1, 2)}
    ctxs = mpdtest.query_contexts(a.memprofd, db)
    for c in ctxs:
        if runtime_only(c) and not c.get("truncated") and c.get("alloc_count", 0) > 1000:
            errs.append("context of runtime frames only, %d allocations, not marked truncated: %s"
                        % (c["alloc_count"], [f.get("function") for f in c["frames"]]))

    def sums(fn):
        return mpdtest.access_sums(ctxs, fn)

    for pat in PATTERNS:
        (hs, he, hn), (cs, ce, cn) = sums("hot_" + pat), sums("cold_" + pat)
        ht, ct = truth.get("hot_" + pat, 0), truth.get("cold_" + pat, 0)
        mpdtest.log("%-4s hot %5d samples est %12d (exact %12d, x%.2f) | cold %4d samples "
                    "est %10d (exact %10d, x%.2f)" % (pat, hs, he, ht, he / max(ht, 1), cs, ce,
                                                     ct, ce / max(ct, 1)))
        if not hn or not cn:
            errs.append("%s: no context reaching hot_%s or cold_%s" % (pat, pat, pat))
        elif hs < MIN_SAMPLES:
            errs.append("%s: hot context has %d samples, expected >= %d" % (pat, hs, MIN_SAMPLES))
        elif hs < RATIO * cs:
            errs.append("%s: hot access samples %d are not >= %dx the cold one's %d"
                        % (pat, hs, RATIO, cs))
        elif he < EST_RATIO * ce or he <= 0:
            errs.append("%s: hot est_accesses %d is not >= %dx the cold one's %d"
                        % (pat, he, EST_RATIO, ce))
    mpdtest.finish(errs, "short-lived copied objects: whole stacks, hot >= %dx cold samples, "
                   ">= %dx est" % (RATIO, EST_RATIO), tmp)


if __name__ == "__main__":
    main()
