#!/usr/bin/env python3
"""check_procs: process lifecycle under `memprofd record --alloc exact`.
 - forker: the parent's sites before and after fork() and the children's sites (freed and
   still live at the child's exit) are all present with exact counts;
 - killed (SIGKILL, and SIGSEGV): what the recorder saw before the death is stored, the
   blocks live at the death counted;
 - short_lived: a process that allocates in an ELF constructor and exits at once is fully
   recorded;
 - attach: `record --pid PID --duration 2` on a running churn process records its sites,
   returns after about the duration and leaves the process running.
Usage: check_procs.py --memprofd PATH --forker PATH --killed PATH --short-lived PATH --churn PATH"""
import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpdtest as t  # noqa: E402


def exact_case(a, tmp, label, workload, wargs=(), want_rc=0):
    """Records workload, compares with its --expect; returns a list of problems."""
    db = os.path.join(tmp, label + ".db")
    expect_path = os.path.join(tmp, label + ".expect.json")
    argv = [os.path.abspath(workload), "--expect", expect_path, *wargs]
    t.log("== %s: %s" % (label, " ".join(argv)))
    start = time.monotonic()
    p = t.record(a.memprofd, db, argv, timeout=120)
    t.log("   memprofd record rc=%d after %.2fs%s" % (
        p.returncode, time.monotonic() - start,
        ("; stderr: " + p.stderr.strip().replace("\n", " | ")) if p.stderr.strip() else ""))
    errs = []
    if p.returncode == 124:
        return ["%s: memprofd record hung: %s" % (label, t.describe(p))]
    if want_rc is not None and p.returncode != want_rc:
        errs.append("%s: memprofd record exit %d, expected %d: %s" %
                    (label, p.returncode, want_rc, t.describe(p)))
    if p.returncode == 2:
        errs.append("%s: memprofd record reported a usage error: %s" % (label, t.describe(p)))
    if not os.path.exists(expect_path):
        return errs + ["%s: the workload did not write its --expect file" % label]
    expect = t.load_expect(expect_path)
    try:
        ctxs = t.query_contexts(a.memprofd, db)
    except RuntimeError as e:
        return errs + ["%s: %s" % (label, e)]
    errs += ["%s: %s" % (label, e) for e in t.contract_errors(ctxs)[:10]]
    serrs, lines = t.compare(ctxs, expect, workload, label)
    for line in lines:
        t.log("   " + line)
    return errs + serrs


def attach_case(a, tmp):
    label = "attach"
    db = os.path.join(tmp, "attach.db")
    t.log("== attach: record --pid on a running churn")
    w = subprocess.Popen([os.path.abspath(a.churn), "--seconds", "12"])
    errs = []
    try:
        time.sleep(0.3)
        start = time.monotonic()
        cmd = [a.memprofd, "record", "--alloc", "exact", "--db", db, "--duration", "2",
               "--pid", str(w.pid)]
        p = t.run(cmd, timeout=60)
        took = time.monotonic() - start
        t.log("   memprofd record rc=%d after %.2fs" % (p.returncode, took))
        if p.returncode != 0:
            return ["attach: memprofd record --pid exit %d: %s" % (p.returncode, t.describe(p))]
        if not 1.8 <= took <= 8:
            errs.append("attach: --duration 2 returned after %.2fs" % took)
        if w.poll() is not None:
            errs.append("attach: the traced process died (rc %s) while or after being traced"
                        % w.returncode)
        try:
            ctxs = t.query_contexts(a.memprofd, db)
        except RuntimeError as e:
            return errs + ["attach: %s" % e]
        errs += ["attach: %s" % e for e in t.contract_errors(ctxs)[:10]]
        by = {}
        for c in ctxs:
            by.setdefault(t.first_fn(c), []).append(c)
        # churn_malloc asks 16..1039 bytes, churn_calloc (1..8) * 64.
        for fn, lo, hi in (("churn_malloc", 16, 1039), ("churn_calloc", 64, 512)):
            g = by.get(fn, [])
            n = sum(c["alloc_count"] for c in g)
            t.log("   %s: %d allocations in %d contexts" % (fn, n, len(g)))
            if n == 0:
                errs.append("attach: no allocations recorded at %s" % fn)
                continue
            mn, mx = min(c["min_size"] for c in g), max(c["max_size"] for c in g)
            if not (lo <= mn <= mx <= hi):
                errs.append("attach: %s sizes [%d, %d] outside what it asks, [%d, %d]" %
                            (fn, mn, mx, lo, hi))
            for c in g:
                if os.path.realpath(c["binary"]) != os.path.realpath(a.churn):
                    errs.append("attach: %s binary %r" % (fn, c["binary"]))
        for fn in ("main", "free_all"):
            if by.get(fn):
                errs.append("attach: contexts attributed to %r, which never allocates" % fn)
    finally:
        if w.poll() is None:
            w.send_signal(signal.SIGKILL)
        w.wait()
    return errs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--forker", required=True)
    ap.add_argument("--killed", required=True)
    ap.add_argument("--short-lived", required=True)
    ap.add_argument("--churn", required=True)
    a = ap.parse_args()
    t.require_bpf()
    tmp = tempfile.mkdtemp(prefix="mpd-procs-")
    t.log("temporary directory: " + tmp)
    errs = []
    errs += exact_case(a, tmp, "forker", a.forker, ["--children", "2"])
    # The recorder's own exit status for a child killed by a signal is not in the
    # contract; only a hang or a usage error is wrong.
    errs += exact_case(a, tmp, "killed-SIGKILL", a.killed, ["--signal", "9"], want_rc=None)
    errs += exact_case(a, tmp, "killed-SIGSEGV", a.killed, ["--signal", "11"], want_rc=None)
    errs += exact_case(a, tmp, "short_lived", a.short_lived)
    errs += attach_case(a, tmp)
    t.finish(errs, "process lifecycle (fork, killed, short-lived, attach)", tmp)


if __name__ == "__main__":
    main()
