#!/usr/bin/env python3
"""Inline frames end to end: a context whose allocation sits in an always_inline helper
must come out of `query contexts --format json` as the helper (inlined: true) then its
caller (inlined: false) at the same address, each with the source file and the line of
its call, then main; the expected lines are the MARK comments of the workload's source."""
import argparse
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpdtest as t  # noqa: E402


def marks(src):
    found = {}
    with open(src) as f:
        for n, line in enumerate(f, 1):
            m = re.search(r"MARK:([a-z-]+)", line)
            if m:
                found[m.group(1)] = n
    return found


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--workload", required=True)
    ap.add_argument("--source", required=True)
    a = ap.parse_args()
    t.require_bpf()
    lines = marks(a.source)
    tmp = tempfile.mkdtemp(prefix="mpd-inline-")
    db = os.path.join(tmp, "i.db")
    p = t.record(a.memprofd, db, [a.workload])
    errs = []
    if p.returncode != 0:
        t.finish(["record failed: " + t.describe(p)], "inline frames", tmp)
    ctxs = t.query_contexts(a.memprofd, db)
    errs += t.contract_errors(ctxs)
    mine = [c for c in ctxs if c["frames"] and c["frames"][0]["function"] == "inl_helper"]
    if len(mine) != 1:
        t.finish(errs + ["expected one context led by inl_helper, got %d; first frames: %s" % (
            len(mine), sorted({str(c["frames"][0]["function"]) for c in ctxs if c["frames"]}))],
            "inline frames", tmp)
    c = mine[0]
    fr = c["frames"]
    if c["alloc_count"] != 25 or c["total_size"] != 25 * 96:
        errs.append("counts: %d objects, %d bytes (want 25, 2400)" % (c["alloc_count"], c["total_size"]))
    want = [("inl_helper", True, lines["helper-call"]), ("inl_site", False, lines["site-call"]),
            ("main", False, lines["main-call"])]
    for i, (fn, inl, ln) in enumerate(want):
        if i >= len(fr):
            errs.append("frame %d missing (want %s)" % (i, fn))
            continue
        f = fr[i]
        if f["function"] != fn or f["inlined"] != inl or f["line"] != ln:
            errs.append("frame %d: %s inlined=%s line=%s (want %s inlined=%s line=%d)" % (
                i, f["function"], f["inlined"], f["line"], fn, inl, ln))
        if not f["file"] or os.path.basename(f["file"]) != os.path.basename(a.source):
            errs.append("frame %d: file %r (want %s)" % (i, f["file"], os.path.basename(a.source)))
        if not isinstance(f["column"], int) or f["column"] <= 0:
            errs.append("frame %d: column %r (want a positive column)" % (i, f["column"]))
    if len(fr) >= 2 and fr[0]["address"] != fr[1]["address"]:
        errs.append("the inlined helper and its caller must share one address: %s vs %s" % (
            fr[0]["address"], fr[1]["address"]))
    t.finish(errs, "inline frames (%s)" % " < ".join(
        "%s:%s%s" % (f["function"], f["line"], "*" if f["inlined"] else "") for f in fr), tmp)


if __name__ == "__main__":
    main()
