#!/usr/bin/env python3
"""check_access_default: `memprofd record` samples data accesses by default.
1. No --access, no --alloc: the run says which source it uses, stores access_mode
   "auto" and that source, and hot_cold's alloc_hot context gets access samples.
2. The default source cannot open (a --freq no kernel accepts): the recording goes on
   without access sampling, says so on stderr, exits 0 and stores access_mode "off".
3. The same source asked for explicitly: one-line error, exit 1.
4. --access off: no access source line, access_mode "off"."""
import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpdtest  # noqa: E402

TOO_FAST = "100000000"   # above any kernel.perf_event_max_sample_rate: perf_event_open EINVAL
ENV = {"MEMPROFD_SAMPLE_BYTES": "4096"}   # hot_cold's 512 KiB buffers: always sampled


def record(a, db, extra, seconds="0.3"):
    cmd = [a.memprofd, "record", "--db", db, *extra, "--", a.workload, "--seconds", seconds]
    p = mpdtest.run(cmd, timeout=120, env=dict(os.environ, **ENV))
    return p


def last_run(a, db):
    p = mpdtest.run([a.memprofd, "query", "status", "--db", db, "--format", "json"], timeout=60)
    if p.returncode != 0:
        raise RuntimeError("query status: " + mpdtest.describe(p))
    return json.loads(p.stdout)[-1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--workload", required=True, help="tests/workloads/hot_cold")
    a = ap.parse_args()
    mpdtest.require_bpf()
    tmp = tempfile.mkdtemp(prefix="check_access_default.")
    errs = []

    db = os.path.join(tmp, "default.db")
    p = record(a, db, [], seconds="2")
    if p.returncode != 0:
        mpdtest.finish(["default record failed: " + mpdtest.describe(p)], "access default", tmp)
    if "memprofd: access: using " not in p.stderr:
        errs.append("default record does not say which access source it uses: %r" % p.stderr)
    run = last_run(a, db)
    mpdtest.log("default: alloc_mode %s, access_mode %s, source %s" % (
        run.get("alloc_mode"), run.get("access_mode"), run.get("access_source")))
    if run.get("alloc_mode") != "sampled" or run.get("access_mode") != "auto":
        errs.append("default run stored alloc %r access %r, expected sampled/auto" % (
            run.get("alloc_mode"), run.get("access_mode")))
    if not run.get("access_source"):
        errs.append("default run stored no access source")
    ctxs = mpdtest.query_contexts(a.memprofd, db)
    hot = sum(c.get("access_samples", 0) for c in ctxs
              if any(f.get("function") == "alloc_hot" for f in c.get("frames", [])))
    mpdtest.log("default: alloc_hot has %d access samples" % hot)
    if hot <= 0:
        errs.append("default record attributed no access to alloc_hot's context")

    db = os.path.join(tmp, "fallback.db")
    p = record(a, db, ["--freq", TOO_FAST])
    if p.returncode != 0:
        errs.append("record with an unopenable default source failed: " + mpdtest.describe(p))
    else:
        if "recording without access sampling" not in p.stderr:
            errs.append("no warning that access sampling is off: %r" % p.stderr)
        run = last_run(a, db)
        if run.get("access_mode") != "off":
            errs.append("fallback run stored access_mode %r, expected off" % run.get("access_mode"))
        if not mpdtest.query_contexts(a.memprofd, db):
            errs.append("fallback run recorded no allocation context")

    db = os.path.join(tmp, "explicit.db")
    p = record(a, db, ["--access", "soft", "--freq", TOO_FAST])
    lines = [x for x in p.stderr.splitlines() if x.startswith("memprofd: record:")]
    if p.returncode != 1 or len(lines) != 1 or "soft" not in lines[0]:
        errs.append("explicit --access soft that cannot open: expected exit 1 and one "
                    "'memprofd: record: ... soft ...' line: " + mpdtest.describe(p))

    db = os.path.join(tmp, "off.db")
    p = record(a, db, ["--access", "off"])
    if p.returncode != 0:
        errs.append("--access off failed: " + mpdtest.describe(p))
    elif "memprofd: access:" in p.stderr or last_run(a, db).get("access_mode") != "off":
        errs.append("--access off still sampled accesses: %r" % p.stderr)
    mpdtest.finish(errs, "record samples accesses by default, and records on without them", tmp)


if __name__ == "__main__":
    main()
