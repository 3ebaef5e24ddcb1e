#!/usr/bin/env python3
"""The daemon names frames off its loop, in its namer (daemon/service/namer.c), on real
BPF: a daemon whose namer is stopped (SIGSTOP) commits churn's rows bare, and is killed
-9 (its namer with it: no process left); the next daemon on the same store, with no
target running, names those frames (churn.c's by their ELF symbols, with lines) within
NAME_S, and stops on SIGTERM with 0; integrity_check ok after each.
Skips (77) without BPF."""
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
from check_daemon_stress import config, exe_rule, start, total_allocs, wait_progress  # noqa: E402

NAME_S = 10.0           # the next daemon's namer, cold caches, loaded machine
COMMIT_S = 10.0         # the first rows, bare


def namer_pid(daemon_pid):
    """The daemon's child named memprofd-namer, or None."""
    for tid in os.listdir("/proc/%d/task" % daemon_pid):
        try:
            with open("/proc/%d/task/%s/children" % (daemon_pid, tid)) as f:
                kids = f.read().split()
        except OSError:
            continue
        for k in kids:
            try:
                with open("/proc/%s/comm" % k) as f:
                    if f.read().strip() == "memprofd-namer":
                        return int(k)
            except OSError:
                pass
    return None


def churn_frames(db, churn):
    """(frames of churn's binary, of them bare: no name and no lines)."""
    con = sqlite3.connect("file:%s?mode=ro" % db, uri=True, timeout=10)
    try:
        return con.execute(
            "SELECT count(*), coalesce(sum(f.function IS NULL AND NOT EXISTS (SELECT 1 FROM "
            "frame_lines l WHERE l.frame_id = f.id)), 0) FROM frames f JOIN binaries b ON "
            "b.id = f.binary_id WHERE b.path = ?", (os.path.realpath(churn),)).fetchone()
    finally:
        con.close()


def killed_bare(a, tmp, db, conf, fails):
    prog, gate = tmp + "/churn.progress", tmp + "/go"
    churn = subprocess.Popen([a.churn, "--seconds", "3", "--pdeathsig", "9", "--progress", prog,
                              "--wait-file", gate])
    d = None
    try:
        time.sleep(0.2)
        d = start(a.memprofd, conf, tmp)
        npid = namer_pid(d.p.pid)
        if not npid:
            fails.append("no memprofd-namer child of the daemon")
            return
        os.kill(npid, signal.SIGSTOP)
        open(gate, "w").close()
        wait_progress(prog)
        end = time.monotonic() + COMMIT_S
        while time.monotonic() < end and not total_allocs(db):
            time.sleep(0.1)
        time.sleep(0.5)        # a few more flushes: the loop names nothing itself
        stored, (frames, bare) = total_allocs(db), churn_frames(db, a.churn)
        d.p.send_signal(signal.SIGKILL)
        d.kill()
        time.sleep(0.2)
        alive = os.path.exists("/proc/%d" % npid) and \
            open("/proc/%d/stat" % npid).read().split()[2] != "Z"
    finally:
        churn.kill()
        churn.wait()
        if d:
            d.kill()
    t.log("killed daemon: %d allocations stored, churn's frames %d, bare %d; namer %d %s"
          % (stored, frames, bare, npid, "still running" if alive else "gone"))
    if not stored or not frames:
        fails.append("nothing of churn's was stored before the kill (%d, %d)" % (stored, frames))
    elif bare != frames:
        fails.append("%d of churn's %d frames were named with the namer stopped: the loop "
                     "still names" % (frames - bare, frames))
    if alive:
        fails.append("the namer outlived its daemon's kill -9")


def next_daemon_names(a, tmp, db, conf, fails):
    d = start(a.memprofd, conf, tmp)
    t0, named_at = time.monotonic(), None
    try:
        while time.monotonic() < t0 + NAME_S:
            frames, bare = churn_frames(db, a.churn)
            if frames and not bare:
                named_at = time.monotonic() - t0
                break
            time.sleep(0.1)
    finally:
        d.p.send_signal(signal.SIGTERM)
        rc = d.p.wait(timeout=30)
        err = d.stderr()
        d.close()
    con = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
    names = sorted(r[0] for r in con.execute(
        "SELECT DISTINCT f.function FROM frames f JOIN binaries b ON b.id = f.binary_id "
        "WHERE b.path = ? AND f.function IS NOT NULL", (os.path.realpath(a.churn),)))
    lines = con.execute("SELECT count(*) FROM frame_lines l JOIN frames f ON f.id = l.frame_id "
                        "JOIN binaries b ON b.id = f.binary_id WHERE b.path = ? AND "
                        "l.file LIKE '%churn.c'", (os.path.realpath(a.churn),)).fetchone()[0]
    con.close()
    t.log("next daemon: churn's frames named after %s s (%s), %d lines in churn.c; rc %s"
          % ("%.2f" % named_at if named_at is not None else "never", names, lines, rc))
    if named_at is None:
        fails.append("the next daemon left churn's frames bare for %.0f s: %s" % (NAME_S, err))
    if "churn_malloc" not in names or not lines:
        fails.append("churn's frames lack their names or lines: %s, %d lines" % (names, lines))
    if rc != 0:
        fails.append("daemon rc %s at SIGTERM: %s" % (rc, err))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--churn", required=True)
    a = ap.parse_args()
    a.churn = os.path.abspath(a.churn)
    t.require_bpf()
    tmp = tempfile.mkdtemp(prefix="check_daemon_namer.")
    db, conf = tmp + "/n.db", tmp + "/n.conf"
    with open(conf, "w") as f:
        f.write(config(db, exe_rule(a.churn)))
    fails = []
    try:
        killed_bare(a, tmp, db, conf, fails)
        if t.integrity(db) != "ok":
            fails.append("integrity_check after the kill: " + t.integrity(db))
        if not fails:
            next_daemon_names(a, tmp, db, conf, fails)
            if t.integrity(db) != "ok":
                fails.append("integrity_check at the end: " + t.integrity(db))
    except AssertionError as e:
        fails.append(str(e))
    t.finish(fails, "daemon names frames off its loop, the next one what a kill left", tmp)


if __name__ == "__main__":
    sys.exit(main())
