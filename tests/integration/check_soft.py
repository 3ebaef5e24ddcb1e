#!/usr/bin/env python3
"""check_soft: `memprofd record --access soft` on tests/workloads/hot_cold for real.
Asserts: hundreds of access samples in a few seconds; in `query data` the hot global
array ranks far above the cold one; in `query contexts` the context allocated by
alloc_hot ranks far above alloc_cold's; TLS accesses are counted in `query status`
(exact mode).
With --alloc sampled (the default mode) the heap buffers are split into --pieces
objects of about the sampling mean (MEMPROFD_SAMPLE_BYTES=--sample-bytes), so each is
sampled with probability ~0.63 and weight ~1.58: the hot context's est_accesses must be
its sampled objects' accesses scaled by their weights (Horvitz-Thompson: between 1x
and 2x the heap class's unweighted estimate, never exactly 1x), accesses to unsampled
pieces must be counted as heap_unsampled, and nothing as heap_untracked."""
import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpdtest  # noqa: E402

RATIO = 10          # hot must have at least this many times cold's samples
MIN_SAMPLES = 100   # "hundreds of samples in a few seconds" (at 1 kHz per CPU, 3 s)


def query(memprofd, db, what, extra=()):
    p = mpdtest.run([memprofd, "query", what, "--db", db, "--format", "json",
                     "--limit", "0", *extra], timeout=60)
    if p.returncode != 0:
        raise RuntimeError("query %s failed: %s" % (what, mpdtest.describe(p)))
    return json.loads(p.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--workload", required=True)
    ap.add_argument("--seconds", default="3")
    ap.add_argument("--freq", default="1000")
    ap.add_argument("--alloc", default="exact", choices=("exact", "sampled"))
    ap.add_argument("--pieces", default="1")
    ap.add_argument("--sample-bytes", default="32768")
    a = ap.parse_args()
    mpdtest.require_bpf()
    sampled = a.alloc == "sampled"
    tmp = tempfile.mkdtemp(prefix="check_soft.")
    db = os.path.join(tmp, "soft.db")
    errs = []
    p = mpdtest.record(a.memprofd, db, [a.workload, "--seconds", a.seconds, "--pieces", a.pieces],
                       extra=("--access", "soft", "--freq", a.freq, "--watch", "off"), timeout=120, alloc=a.alloc,
                       env={"MEMPROFD_SAMPLE_BYTES": a.sample_bytes} if sampled else None)
    if p.returncode != 0:
        mpdtest.finish(["record failed: " + mpdtest.describe(p)], "soft source", tmp)
    try:
        data = query(a.memprofd, db, "data")
        ctxs = query(a.memprofd, db, "contexts")
    except (RuntimeError, json.JSONDecodeError) as e:
        mpdtest.finish([str(e)], "soft source", tmp)

    def data_samples(sym):
        return sum(d.get("access_samples", 0) for d in data if d.get("symbol") == sym)

    hot_g, cold_g = data_samples("hot_global"), data_samples("cold_global")
    mpdtest.log("query data: hot_global %d samples, cold_global %d" % (hot_g, cold_g))
    if hot_g < MIN_SAMPLES:
        errs.append("hot_global has %d samples, expected >= %d" % (hot_g, MIN_SAMPLES))
    if hot_g < RATIO * max(cold_g, 1):
        errs.append("hot_global (%d) does not rank far above cold_global (%d)" % (hot_g, cold_g))
    order = [d.get("symbol") for d in data]
    if "hot_global" in order and "cold_global" in order and \
            order.index("hot_global") > order.index("cold_global"):
        errs.append("query data lists cold_global before hot_global")

    def ctx_samples(fn):
        return sum(c.get("access_samples", 0) for c in ctxs if mpdtest.frames_have(c, fn))

    hot_c, cold_c = ctx_samples("alloc_hot"), ctx_samples("alloc_cold")
    mpdtest.log("query contexts: alloc_hot %d samples, alloc_cold %d" % (hot_c, cold_c))
    if hot_c < MIN_SAMPLES:
        errs.append("alloc_hot's context has %d samples, expected >= %d" % (hot_c, MIN_SAMPLES))
    if hot_c < RATIO * max(cold_c, 1):
        errs.append("alloc_hot (%d) does not rank far above alloc_cold (%d)" % (hot_c, cold_c))
    for c in ctxs:
        if mpdtest.frames_have(c, "alloc_hot") and c.get("est_accesses", 0) <= 0:
            errs.append("alloc_hot's context has no est_accesses")

    st = mpdtest.run([a.memprofd, "query", "status", "--db", db, "--format", "json"], timeout=60)
    if st.returncode != 0:
        errs.append("query status failed: " + mpdtest.describe(st))
        mpdtest.finish(errs, "soft source", tmp)
    runs = json.loads(st.stdout)

    def cls(name, what="samples"):
        return sum((r.get("access_classes") or {}).get(name, {}).get(what, 0) for r in runs)

    mpdtest.log("query status: " + ", ".join("%s %d" % (k, cls(k)) for k in (
        "heap", "heap_untracked", "heap_unsampled", "static", "stack", "tls", "anon", "file",
        "unknown")))
    if not sampled and cls("tls") < MIN_SAMPLES // 4:
        errs.append("query status counts %d tls samples for the hot TLS counter" % cls("tls"))
    if sampled:
        check_weighting(ctxs, cls, int(a.pieces), errs)
    mpdtest.finish(errs, "soft source (--alloc %s): hot ranks above cold in data and contexts"
                   % a.alloc, tmp)


def check_weighting(ctxs, cls, pieces, errs):
    """Sampled mode: weights scale the accesses of sampled objects; misses are unsampled."""
    hot = [c for c in ctxs if mpdtest.frames_have(c, "alloc_hot")]
    est_hot = sum(c.get("est_accesses", 0) for c in hot)
    est_heap = cls("heap", "est_accesses")
    n_hot = sum(c.get("alloc_count", 0) for c in hot)
    mpdtest.log("alloc_hot: est alloc_count %d of %d pieces, est_accesses %d; heap class "
                "(unweighted) est %d" % (n_hot, pieces, est_hot, est_heap))
    if cls("heap_untracked"):
        errs.append("sampled mode counted %d samples as heap_untracked (allocated before "
                    "attach), but they hit unsampled objects" % cls("heap_untracked"))
    if est_heap <= 0:
        errs.append("no access hit a sampled object")
        return
    ratio = est_hot / est_heap
    lo = 1.15 if pieces > 1 else 0.95
    if not lo <= ratio <= 2.0:
        errs.append("alloc_hot's est_accesses is %.2fx the unweighted heap estimate; with "
                    "sampling weights ~1.58 (integer shares 1 or 2) it must be in [%.2f, 2]"
                    % (ratio, lo))
    # Every piece sampled (est count ~1.58 per piece) leaves no unsampled piece to hit.
    if pieces > 1 and n_hot < 1.5 * pieces and cls("heap_unsampled") == 0:
        errs.append("accesses to the unsampled pieces are not counted as heap_unsampled")


if __name__ == "__main__":
    main()
