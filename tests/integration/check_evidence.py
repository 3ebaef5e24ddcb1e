#!/usr/bin/env python3
"""check_evidence: estimates with their evidence and objects live at exit, on real
recordings of the four-site workload (tests/workloads/four_sites.c, built here with cc):
- --alloc exact: site_leak's 100 x 256 B are live at exit (live_at_exit_count/bytes),
  their lifetimes apart from freed ones (freed_lifetime_ms 0, the table's AVG LIFE "at
  exit"); no other site has any; every estimate is exact (alloc_samples = alloc_count,
  lo = hi = value); `--sort live` ranks site_leak first;
- --alloc sampled with MEMPROFD_SAMPLE_BYTES=4096: each site's count and bytes rest on
  alloc_samples samples with a 95% interval around the estimate that holds the true
  count (5000 objects of site_small; one re-recording allowed: a 95% interval misses 1
  time in 20), few-sample contexts marked (few_samples, '*'), '±' in the table; the
  sampled leak is live at exit too.
Exits 0 pass, 1 fail, 77 skip (no BPF, no cc)."""
import argparse
import json
import os
import shutil
import subprocess
import tempfile

import mpdtest

TRUE = {"site_small": (5000, 64), "site_leak": (100, 256), "site_long": (10, 4096)}


def by_site(ctxs):
    out = {}
    for c in ctxs:
        fn = c["frames"][0]["function"] if c["frames"] else None
        if fn in TRUE:
            out[fn] = c
    return out


def check_exact(errs, m, db):
    ctxs = mpdtest.query_contexts(m, db)
    errs += mpdtest.contract_errors(ctxs)
    s = by_site(ctxs)
    if set(s) != set(TRUE):
        errs.append("exact: sites %s, want %s" % (sorted(s), sorted(TRUE)))
        return
    leak = s["site_leak"]
    if (leak["live_at_exit_count"], leak["live_at_exit_bytes"]) != (100, 25600):
        errs.append("exact: site_leak live at exit %d objects %d B, want 100 and 25600" %
                    (leak["live_at_exit_count"], leak["live_at_exit_bytes"]))
    if leak["freed_lifetime_ms"] != 0 or leak["live_at_exit_lifetime_ms"] < 100 * 250:
        errs.append("exact: site_leak lifetimes mixed: freed %d ms, at exit %d ms" %
                    (leak["freed_lifetime_ms"], leak["live_at_exit_lifetime_ms"]))
    for fn in ("site_small", "site_long"):
        if s[fn]["live_at_exit_count"] or s[fn]["live_at_exit_bytes"]:
            errs.append("exact: %s counted live at exit: %r" % (fn, s[fn]))
    for fn, c in s.items():
        if c["alloc_samples"] != c["alloc_count"] or c["alloc_count_lo"] != c["alloc_count"] \
                or c["total_size_hi"] != c["total_size"] or c["few_samples"]:
            errs.append("exact: %s is not an exact estimate: %r" % (fn, c))
    first = mpdtest.query_contexts(m, db, ["--sort", "live", "--limit", "1"])
    if not first or first[0]["frames"][0]["function"] != "site_leak":
        errs.append("--sort live: first is %r" % (first[:1],))
    table = mpdtest.run([m, "query", "contexts", "--db", db, "--limit", "0"]).stdout
    row = [l for l in table.splitlines() if "site_leak" in l]
    if not row or "at exit" not in row[0] or "25.0 KiB" not in row[0]:
        errs.append("exact: the table's site_leak row says nothing of exit: %r" % row)


def check_sampled(m, db):
    """Problems with one sampled recording; the interval check apart (it may miss)."""
    errs, misses = [], []
    ctxs = mpdtest.query_contexts(m, db)
    errs += mpdtest.contract_errors(ctxs)
    s = by_site(ctxs)
    if "site_small" not in s:
        return ["sampled: no site_small context: %r" % sorted(s)], []
    for fn, c in s.items():
        n, size = TRUE[fn]
        if not c["alloc_samples"] or not c["alloc_count_lo"] <= c["alloc_count"] <= \
                c["alloc_count_hi"] or not c["total_size_lo"] <= c["total_size"] <= \
                c["total_size_hi"] or c["alloc_count_lo"] == c["alloc_count_hi"]:
            errs.append("sampled: %s has no interval around its estimate: %r" % (fn, c))
        # Weak evidence: the count, or an access estimate (sampler-armed watches count
        # their traps as samples), rests on fewer than 10 samples.
        weak = c["alloc_samples"] < 10 or (0 < c["access_samples"] < 10 and
                                           c["est_accesses"] > c["access_samples"])
        if c["few_samples"] != weak:
            errs.append("sampled: %s few_samples %s with %d samples, %d access samples" %
                        (fn, c["few_samples"], c["alloc_samples"], c["access_samples"]))
        if not c["alloc_count_lo"] <= n <= c["alloc_count_hi"]:
            misses.append("%s: %d objects not in [%d, %d] (%d samples)" % (
                fn, n, c["alloc_count_lo"], c["alloc_count_hi"], c["alloc_samples"]))
    if "site_leak" in s and (s["site_leak"]["live_at_exit_count"] != s["site_leak"]["alloc_count"]
                             or s["site_leak"]["freed_lifetime_ms"]):
        errs.append("sampled: site_leak not all live at exit: %r" % s["site_leak"])
    table = mpdtest.run([m, "query", "contexts", "--db", db, "--limit", "0"]).stdout
    if "\u00b1" not in table:
        errs.append("sampled: no \u00b1 in the table:\n" + table)
    for fn, c in s.items():
        rows = [l for l in table.splitlines() if " %s " % fn in l]
        marked = bool(rows) and any(k + "*" in rows[0] for k in ("notcold", "hot", "cold", "unknown"))
        if marked != c["few_samples"]:
            errs.append("sampled: %s (%d samples) marked %s in the table: %r" %
                        (fn, c["alloc_samples"], marked, rows))
    return errs, misses


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--source", required=True)
    a = ap.parse_args()
    mpdtest.require_bpf()
    cc = shutil.which("cc")
    if not cc:
        mpdtest.skip("no C compiler (cc) to build the workload")
    tmp = tempfile.mkdtemp(prefix="mpd-evidence-")
    m, exe = a.memprofd, os.path.join(tmp, "four_sites")
    subprocess.run([cc, "-g", "-O1", "-fno-omit-frame-pointer", "-o", exe, a.source], check=True)
    errs = []
    db = os.path.join(tmp, "exact.db")
    p = mpdtest.record(m, db, [exe])
    if p.returncode != 0:
        mpdtest.finish(["record exact: " + mpdtest.describe(p)], "evidence", tmp)
    check_exact(errs, m, db)

    for attempt in (1, 2):
        db = os.path.join(tmp, "sampled%d.db" % attempt)
        p = mpdtest.record(m, db, [exe], alloc="sampled", env={"MEMPROFD_SAMPLE_BYTES": "4096"})
        if p.returncode != 0:
            mpdtest.finish(errs + ["record sampled: " + mpdtest.describe(p)], "evidence", tmp)
        e, misses = check_sampled(m, db)
        mpdtest.log("sampled attempt %d: %s" % (attempt, "; ".join(misses) or "all in"))
        if not misses or attempt == 2:
            errs += e + ["sampled, twice: " + x for x in misses]
            break
    mpdtest.finish(errs, "evidence: intervals, samples, live at exit", tmp)


if __name__ == "__main__":
    main()
