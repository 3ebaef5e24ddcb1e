#!/usr/bin/env python3
"""The daemon's flush on a store that cannot be written for a while, on real BPF:
1. ENOSPC, real: the database on a small tmpfs this test mounts, filled by a filler file;
2. EIO: tests/fault/fault_inject.so preloaded into the daemon fails every write, pwrite,
   fsync and ftruncate of the database while a flag file exists;
In both a churn target allocates through the outage and exits before it ends: the daemon
keeps running, commits nothing while the store fails, logs the failure exactly once and
the recovery once, and once the store is writable again writes everything it held: the
stored allocation count equals churn's own count (less what the rings dropped, counted in
runs), and integrity_check is ok during and after. (memory_limit while flushes fail is
check_daemon_stress.py's phase 3.)
Skips (77) without BPF; phase 1 skips (said so) only where `mount -t tmpfs` fails."""
import argparse
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpdtest as t  # noqa: E402
from check_daemon_stress import (config, exe_rule, fill, read_progress, start,  # noqa: E402
                                 total_allocs, wait_progress)

OUTAGE_S = 3.0            # failing flushes: 15 flush intervals
CHURN_S = 2               # churn's allocating time, inside the outage
RECOVER_S = 10.0          # how long a recovered flush may take to show up
TMPFS = "4m"
FAILED_LINE = "will retry, nothing is dropped"


def drops(db):
    con = sqlite3.connect("file:%s?mode=ro" % db, uri=True, timeout=10)
    try:
        return con.execute("SELECT coalesce(sum(drops_ringbuf + drops_live_full + "
                           "drops_state_full), 0) FROM runs").fetchone()[0]
    finally:
        con.close()


def start_faulty(a, conf, tmp, flag, errno):
    """The daemon with the injector failing the database's writes while flag exists."""
    # The sanitizer build: the injector preloaded ahead of ASan's runtime is fine (it
    # wraps write calls only), as in check_faults.
    env = dict(LD_PRELOAD=a.inject, MEMPROFD_FAULT_PATH=tmp + "/eio",
               MEMPROFD_FAULT_WHILE=flag, MEMPROFD_FAULT_ERRNO=errno,
               ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0")
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        return start(a.memprofd, conf, tmp)
    finally:
        os.environ.clear()
        os.environ.update(saved)


def outage(a, tmp, db, start_daemon, begin, end, what, fails):
    """churn allocates only while the store is unwritable (begin() .. end()); then the
    daemon must store all of it. churn runs (waiting) before the daemon starts: the
    daemon's first scan attaches to it before its first allocation."""
    prog, gate = tmp + "/%s.progress" % what, tmp + "/%s.go" % what
    churn = subprocess.Popen([a.churn, "--seconds", str(CHURN_S), "--pdeathsig", "1",
                              "--progress", prog, "--wait-file", gate])
    d = None
    try:
        time.sleep(0.2)
        d = start_daemon()
        time.sleep(0.5)
        before = total_allocs(db)
        begin()
        with open(gate, "w"):
            pass
        wait_progress(prog)
        time.sleep(OUTAGE_S)
        churn.wait(timeout=30)
        done = read_progress(prog)[1]
        full = total_allocs(db)
        alive = d.p.poll() is None
        ig_full = t.integrity(db)
        end()
        deadline, after = time.monotonic() + RECOVER_S, full
        while time.monotonic() < deadline and after < before + done:
            time.sleep(0.2)
            after = total_allocs(db)
    finally:
        if churn.poll() is None:
            churn.kill()
        churn.wait()
        if d and sys.exc_info()[0]:
            d.kill()
    d.p.send_signal(signal.SIGTERM)
    rc = d.p.wait(timeout=10)
    err = d.stderr()
    d.close()
    ig, lost = t.integrity(db), drops(db)
    t.log("%s: churn did %d allocations during the outage; stored %d before, %d while "
          "failing, %d after (%d dropped by the rings); failure lines %d; rc %s; integrity %s/%s"
          % (what, done, before, full, after, lost, err.count(FAILED_LINE), rc, ig_full, ig))
    if not alive:
        fails.append("%s: the daemon died while its flushes failed: %s" % (what, err))
    if full != before:
        fails.append("%s: rows were committed while the store was unwritable (%d -> %d): "
                     "the fault did not bite" % (what, before, full))
    if err.count(FAILED_LINE) != 1 or "writable again" not in err:
        fails.append("%s: want the failure logged once and the recovery once: %s" % (what, err))
    if after - before + lost < done or after - before > done:
        fails.append("%s: stored %d allocations after recovery, churn did %d (%d dropped by "
                     "the rings)" % (what, after - before, done, lost))
    if ig_full != "ok" or ig != "ok":
        fails.append("%s: integrity_check %s / %s" % (what, ig_full, ig))
    if rc != 0:
        fails.append("%s: daemon rc %s at SIGTERM: %s" % (what, rc, err))


def phase_enospc(a, tmp, fails):
    mnt = tmp + "/small"
    why = t.mount_tmpfs(mnt, TMPFS)
    if why:
        t.log("SKIP (phase enospc): " + why)
        return
    try:
        db, conf = mnt + "/full.db", tmp + "/full.conf"
        with open(conf, "w") as f:
            f.write(config(db, exe_rule(a.churn), "checkpoint_interval = 1h\n"))
        outage(a, tmp, db, lambda: start(a.memprofd, conf, tmp), lambda: fill(mnt + "/filler"),
               lambda: os.unlink(mnt + "/filler"), "enospc", fails)
    finally:
        t.umount_lazy(mnt)


def phase_eio(a, tmp, fails):
    os.makedirs(tmp + "/eio", exist_ok=True)
    db, conf, flag = tmp + "/eio/eio.db", tmp + "/eio.conf", tmp + "/eio.failing"
    with open(conf, "w") as f:
        f.write(config(db, exe_rule(a.churn), "checkpoint_interval = 1h\n"))
    outage(a, tmp, db, lambda: start_faulty(a, conf, tmp, flag, "EIO"),
           lambda: open(flag, "w").close(), lambda: os.unlink(flag), "eio", fails)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--churn", required=True)
    ap.add_argument("--inject", required=True)
    ap.add_argument("--phases", default="enospc,eio")
    a = ap.parse_args()
    a.churn = os.path.abspath(a.churn)
    a.inject = os.path.abspath(a.inject)
    t.require_bpf()
    if not os.path.exists(a.inject):
        raise SystemExit("check_daemon_flush_faults: %s not built" % a.inject)
    tmp = tempfile.mkdtemp(prefix="check_daemon_flush_faults.")
    fails = []
    for name, fn in (("enospc", phase_enospc), ("eio", phase_eio)):
        if name in a.phases.split(","):
            t0 = time.monotonic()
            try:
                fn(a, tmp, fails)
            except AssertionError as e:
                fails.append("%s: %s" % (name, e))
            t.log("phase %s: %.1f s" % (name, time.monotonic() - t0))
    t.finish(fails, "daemon flush under ENOSPC and EIO", tmp)


if __name__ == "__main__":
    sys.exit(main())
