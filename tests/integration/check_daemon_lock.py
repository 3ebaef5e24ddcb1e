#!/usr/bin/env python3
"""One daemon per database, and SIGTERM within 2 s whatever holds the database: a second
`memprofd daemon` on the same database exits 1 at once with one line naming the first
one's pid (it creates no run in the database, the first one keeps running and flushing);
then, while another connection holds the database's write lock (BEGIN IMMEDIATE), SIGTERM
makes the daemon exit within 2 s (its final flush gives up at its deadline and says so),
and once the lock is released the database is sound. Issue 18: the lock is the database
file's, so a second daemon through a symlink to it is refused too; a daemon killed with -9
leaves a run that the next daemon marks `crashed`, ended at its last flush (query status);
`daemon --check` fails (1) for a db that cannot be written and leaves no file behind.
Skips (77) where BPF cannot work."""
import argparse
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpdtest as t  # noqa: E402
from check_daemon import Notify  # noqa: E402


def config(db, churn):
    return ("[store]\ndb = %s\nflush_interval = 200ms\nretention = 1d\ncompact = off\n"
            "[sampling]\nalloc = exact\naccess = off\n[governor]\ninterval = 1s\n"
            "[targets]\nrescan_interval = 1s\n[target t]\nexe = %s\n" % (db, churn))


def runs(db):
    con = sqlite3.connect("file:%s?mode=ro" % db, uri=True, timeout=10)
    try:
        return con.execute("SELECT id, status FROM runs ORDER BY id").fetchall()
    finally:
        con.close()


def check_check(memprofd, d, fails):
    """daemon --check writes: a db it cannot create fails; a good one leaves no file; one
    whose directories are missing passes (the daemon makes them, as the unit's
    StateDirectory= would) and leaves no directory."""
    with open(d + "/a_file", "w") as f:
        f.write("not a directory\n")
    for name, db, rc in (("unwritable", d + "/a_file/m.db", 1), ("writable", d + "/new.db", 0),
                         ("dirless", d + "/state/sub/m.db", 0)):
        conf = d + "/check_%s.conf" % name
        with open(conf, "w") as f:
            f.write(config(db, "/bin/true"))
        p = t.run([memprofd, "daemon", "--config", conf, "--check"], timeout=30)
        left = os.path.exists(db) or os.path.exists(d + "/state")
        if p.returncode != rc or (rc and "not writable" not in p.stderr) or left:
            fails.append("daemon --check on a %s db: want rc %d; got %s (file left: %s)" % (
                name, rc, t.describe(p), left))
        else:
            t.log("ok: daemon --check on a %s db: rc %d" % (name, rc))


def check_crashed(memprofd, conf, db, fails):
    """The next daemon marks the killed one's run crashed, its duration frozen."""
    before = runs(db)
    nxt = subprocess.Popen([memprofd, "daemon", "--config", conf], stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    nxt.send_signal(signal.SIGTERM)
    nxt.wait(timeout=10)
    p = t.run([memprofd, "query", "status", "--db", db, "--format", "json"], timeout=30)
    st = {r["run_id"]: r for r in json.loads(p.stdout)} if p.returncode == 0 else {}
    killed = st.get(before[-1][0], {})
    if killed.get("status") != "crashed" or not killed.get("ended_ns") or \
            killed.get("ended_ns") != killed.get("flushed_ns"):
        fails.append("the run of a daemon killed with -9: want crashed, ended at its last "
                     "flush; got %r" % killed)
    else:
        t.log("ok: a killed daemon's run shown as crashed, %.2f s long" % (
            (killed["ended_ns"] - killed["started_ns"]) / 1e9))
    tbl = t.run([memprofd, "query", "status", "--db", db], timeout=30).stdout
    if "crashed" not in tbl:
        fails.append("query status's table does not show the crashed run: %s" % tbl)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--churn", required=True)
    a = ap.parse_args()
    a.churn = os.path.abspath(a.churn)
    t.require_bpf()
    d = tempfile.mkdtemp(prefix="check_daemon_lock.")
    # The db's directory does not exist: the daemon makes it (0750).
    db, conf = d + "/var/m.db", d + "/m.conf"
    with open(conf, "w") as f:
        f.write(config(db, a.churn))
    fails = []
    churn = subprocess.Popen([a.churn, "--seconds", "60", "--pdeathsig", "1"])
    notify = Notify(d + "/notify.sock")
    first = subprocess.Popen([a.memprofd, "daemon", "--config", conf],
                             env=dict(os.environ, NOTIFY_SOCKET=d + "/notify.sock"),
                             stderr=subprocess.PIPE, text=True)
    try:
        notify.ready(first, 30)
        notify.drain()

        t0 = time.monotonic()
        p = t.run([a.memprofd, "daemon", "--config", conf], timeout=20)
        took = time.monotonic() - t0
        real = os.path.realpath(db)
        want = ("memprofd: daemon: %s: another memprofd daemon (pid %d) writes this database "
                "(%s); one daemon per database (lock %s.lock)" % (db, first.pid, real, real))
        if p.returncode != 1 or p.stderr.strip() != want or took > 5:
            fails.append("a second daemon: want exit 1 with %r at once; got %s after %.1fs" % (
                want, t.describe(p), took))
        else:
            t.log("ok: a second daemon on the database: exit 1 in %.2fs: %s" % (took, want))
        if len(runs(db)) != 1 or first.poll() is not None:
            fails.append("the second daemon touched the database or the first one: runs %r, "
                         "first rc %r" % (runs(db), first.poll()))

        link, lconf = d + "/link.db", d + "/link.conf"
        os.symlink(db, link)
        with open(lconf, "w") as f:
            f.write(config(link, a.churn))
        p = t.run([a.memprofd, "daemon", "--config", lconf], timeout=20)
        if p.returncode != 1 or "another memprofd daemon (pid %d)" % first.pid not in p.stderr:
            fails.append("a second daemon through a symlink: want exit 1; got %s" % t.describe(p))
        else:
            t.log("ok: a second daemon through a symlink to the database refused")
        check_check(a.memprofd, d, fails)

        # Another writer holds the lock: the daemon's flushes fail, SIGTERM still ends it.
        time.sleep(0.5)
        con = sqlite3.connect(db, timeout=10, isolation_level=None)
        con.execute("BEGIN IMMEDIATE")
        time.sleep(0.6)                                # a flush or two fail meanwhile
        t0 = time.monotonic()
        first.send_signal(signal.SIGTERM)
        try:
            rc = first.wait(timeout=10)
        except subprocess.TimeoutExpired:
            rc = None
        took = time.monotonic() - t0
        con.execute("ROLLBACK")
        con.close()
        err = first.stderr.read() if rc is not None else ""
        if rc != 0 or took > 2.0:
            fails.append("SIGTERM with the database locked: rc %r after %.2fs (want 0 within "
                         "2 s); stderr %s" % (rc, took, err))
        else:
            t.log("ok: SIGTERM with the database locked by another writer: exit 0 in %.2fs" % took)
        if "final flush failed" not in err:
            fails.append("the final flush's failure is not said: %s" % err)
        if t.integrity(db) != "ok":
            fails.append("integrity_check: " + t.integrity(db))
        # The lock is the daemon's own: once it is gone, another daemon may start.
        p = subprocess.Popen([a.memprofd, "daemon", "--config", conf], stderr=subprocess.PIPE,
                             text=True)
        time.sleep(1.5)
        if p.poll() is not None:
            fails.append("a daemon after the first one ended: rc %s: %s" % (
                p.returncode, p.stderr.read()))
        p.kill()                                       # -9: its run cannot end itself
        p.wait(timeout=10)
        check_crashed(a.memprofd, conf, db, fails)
    except AssertionError as e:
        fails.append(str(e))
    finally:
        if first.poll() is None:
            first.kill()
        churn.kill()
        churn.wait()
    t.finish(fails, "one daemon per database; SIGTERM within 2 s", d)


if __name__ == "__main__":
    main()
