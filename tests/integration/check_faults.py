#!/usr/bin/env python3
"""ENOSPC and EIO at every write point: `memprofd merge` and `memprofd record` run with
tests/fault/fault_inject.so failing the Nth write, pwrite, fsync, fdatasync or ftruncate on
the database's files, for every N a clean run reaches (evenly thinned to --points). Each
run must end in exit 0 with exactly the clean run's contents (a failed flush retried,
nothing lost) or exit 1 with one error line and a database that is absent or passes
PRAGMA integrity_check; never a crash, a signal, a sanitizer report or a silent loss.
record's writes right after its schema's (its run row: found by a binary search for the
first write point whose failure is not the schema's) are visited besides the thinned
ones: a failure there must fail the start, not kill a command already running."""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpdtest as t  # noqa: E402

ERRNOS = ("ENOSPC", "EIO")
AFTER_POINTS = 6   # record: the writes after the schema's, its run row among them, always
# visited: thinned evenly they were missed on one build and not another, and a run row
# that could not be committed once killed a command already started (exit 143, not 1)


def env_for(a, workdir, nth=None, errno=None, count=None):
    e = dict(os.environ, LD_PRELOAD=a.inject, MEMPROFD_FAULT_PATH=workdir,
             ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0")
    if nth is not None:
        e.update(MEMPROFD_FAULT_NTH=str(nth), MEMPROFD_FAULT_ERRNO=errno)
    if count:
        e["MEMPROFD_FAULT_COUNT"] = count
    return e


def contents(a, db):
    """What a reader sees: contexts (without ids that may differ) as sorted JSON, frame
    names included for every stack (a constructor's before main too: its context is its
    DWARF stack however, and whenever, the process was walked)."""
    ctxs = t.query_contexts(a.memprofd, db)
    keep = [(c["binary"], [f.get("function") for f in c["frames"]], c["alloc_count"],
             c["total_size"]) for c in ctxs]
    return json.dumps(sorted(keep, key=str))


def points(total, cap):
    if total <= cap:
        return list(range(1, total + 1))
    return sorted({1 + (i * (total - 1)) // (cap - 1) for i in range(cap)})


def first_past(a, make_cmd, work, total, marker):
    """The first write point whose failure no longer says marker (binary search: the
    writes are made in one order every run, so failures before that point all say it)."""
    lo, hi = 1, total + 1
    while lo < hi:
        mid = (lo + hi) // 2
        db = os.path.join(work, "search.db")
        p = t.run(make_cmd(db), env=env_for(a, work, mid, "ENOSPC"), timeout=120)
        for ext in ("", "-wal", "-shm"):
            if os.path.exists(db + ext):
                os.unlink(db + ext)
        if marker in p.stderr:
            lo = mid + 1
        else:
            hi = mid
    return lo


def scenario(a, name, make_cmd, errs, after=None):
    work = tempfile.mkdtemp(prefix="mpd-fault-%s-" % name)
    try:
        countf = os.path.join(work, "count")
        db = os.path.join(work, "clean.db")
        p = t.run(make_cmd(db), env=env_for(a, work, count=countf), timeout=120)
        if p.returncode != 0:
            errs.append("%s: clean run failed: %s" % (name, t.describe(p)))
            return
        clean = contents(a, db)
        total = sum(int(x) for x in open(countf).read().split())
        pts = points(total, a.points)
        if after:   # the writes right after the first one past `after` (always visited)
            b = first_past(a, make_cmd, work, total, after)
            pts = sorted(set(pts) | set(range(b, min(b + AFTER_POINTS, total + 1))))
        outcomes = {"ok": 0, "failed": 0}
        for nth in pts:
            for err in ERRNOS:
                db = os.path.join(work, "f%d_%s.db" % (nth, err))
                p = t.run(make_cmd(db), env=env_for(a, work, nth, err), timeout=120)
                what = "%s: %s at write point %d of %d" % (name, err, nth, total)
                lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
                if p.returncode == 0:
                    outcomes["ok"] += 1
                    got = contents(a, db)
                    if got != clean:
                        errs.append("%s: exit 0 but the store differs from the clean run" % what)
                elif p.returncode == 1:
                    outcomes["failed"] += 1
                    errors = [ln for ln in lines if not ln.startswith("memprofd: warning")
                              and "flush" not in ln]
                    if len(errors) > 1 or (errors and not errors[0].startswith("memprofd: ")):
                        errs.append("%s: want one error line, got %r" % (what, lines[:4]))
                    if os.path.exists(db) and t.integrity(db) != "ok":
                        errs.append("%s: the store left behind fails integrity_check" % what)
                else:
                    errs.append("%s: exit %d (crash or signal): %s" % (what, p.returncode,
                                                                       "; ".join(lines[-3:])))
                for ext in ("", "-wal", "-shm"):
                    if os.path.exists(db + ext):
                        os.unlink(db + ext)
        t.log("%s: %d write points, %d visited x %s: %d recovered (exit 0, same contents), "
              "%d refused (exit 1, sound or no store)" % (name, total, len(pts), "/".join(ERRNOS),
                                                          outcomes["ok"], outcomes["failed"]))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--inject", required=True)
    ap.add_argument("--gen-store", required=True)
    ap.add_argument("--workload", required=True)
    ap.add_argument("--points", type=int, default=30)
    a = ap.parse_args()
    errs = []
    src = tempfile.mkdtemp(prefix="mpd-fault-src-")
    ins = []
    for i in range(2):
        ins.append(os.path.join(src, "in%d.db" % i))
        subprocess.run([a.gen_store, "--db", ins[-1], "--contexts", "20", "--rows", "60",
                        "--binaries", "1", "--procs", "2", "--buckets", "3", "--seed", str(i + 1)],
                       check=True, capture_output=True)
    scenario(a, "merge", lambda db: [a.memprofd, "merge", "-o", db] + ins, errs)
    why = t.bpf_unavailable()
    if why:
        t.log("SKIP (record part): " + why)
    else:
        scenario(a, "record", lambda db: [a.memprofd, "record", "--alloc", "exact", "--access",
                                          "off", "--db", db, "--", a.workload], errs,
                 after="migrating to schema")
    shutil.rmtree(src, ignore_errors=True)
    t.finish(errs, "ENOSPC/EIO at every write point of merge and record")


if __name__ == "__main__":
    main()
