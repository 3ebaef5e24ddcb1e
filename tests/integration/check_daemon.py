#!/usr/bin/env python3
"""memprofd daemon under a fake systemd: NOTIFY_SOCKET is a datagram socket this check
reads, WATCHDOG_USEC asks for watchdog pings. First, without BPF: a config with bad
lines exits 2 with one `memprofd: FILE:LINE: why` line per bad line (unknown keys
included), an unreadable config (missing, a directory) exits 2 saying so, and --check
accepts a good one. Then the daemon must send READY=1, attach to a running target chosen
by [target] comm, write contexts a concurrent `memprofd query` (read-only, WAL) sees,
send STATUS= lines and WATCHDOG=1 at half the watchdog period, record its governor in
`query status` (budget, measured CPU, decision, memory), answer SIGHUP with RELOADING=1
then READY=1 and apply the new config (a 0.01% budget shows in query status, over
budget), keep running on a broken config (one line naming the file and line), and on
SIGTERM send STOPPING=1 and exit 0 within 2 s with a final flush and a sound database.
Skips (77) where BPF cannot work."""
import argparse
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpdtest as t  # noqa: E402

WATCHDOG_USEC = 600000


def config(db, comm, extra=""):
    return ("[store]\ndb = %s\nflush_interval = 200ms\nretention = 1d\ncompact = off\n"
            "[sampling]\nalloc = exact\naccess = off\n[governor]\ninterval = 1s\n"
            "[targets]\nrescan_interval = 1s\n[target t]\ncomm = %s\n%s" % (db, comm, extra))


class Notify:
    """Every message the daemon sends, in order."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.msgs = []

    def until(self, want, timeout):
        """Reads until a message holds the line `want` (or, ending in '=', a line that
        starts with it); returns the messages read (AssertionError on timeout)."""
        got, end = [], time.monotonic() + timeout
        while time.monotonic() < end:
            self.sock.settimeout(max(0.01, end - time.monotonic()))
            try:
                m = self.sock.recv(4096).decode()
            except socket.timeout:
                break
            got.append(m)
            self.msgs.append((time.monotonic(), m))
            lines = m.split("\n")
            if want in lines or (want.endswith("=") and any(x.startswith(want) for x in lines)):
                return got
        raise AssertionError("no %r within %ss; got %r" % (want, timeout, got))

    def ready(self, daemon, timeout):
        """Waits for the daemon's READY=1. If it does not come, the daemon is killed and
        the check fails with the daemon's stderr (require_bpf() ran before: a refusal here is
        a failure, not a skip)."""
        try:
            self.until("READY=1", timeout)
        except AssertionError as e:
            daemon.kill()
            err = daemon.communicate()[1]
            raise AssertionError("%s; stderr: %s" % (e, err))

    def drain(self):
        """From now on, reads and drops every message in a thread: an unread socket
        fills up and blocks the daemon's sd_notify (systemd itself always reads)."""
        import threading

        def loop():
            self.sock.settimeout(None)
            while True:
                try:
                    self.sock.recv(4096)
                except OSError:
                    return
        threading.Thread(target=loop, daemon=True).start()


def check_config_errors(memprofd, d, fails):
    """Bad configs, no BPF needed: exit 2, one line per problem naming file and line."""
    bad = d + "/bad.conf"
    with open(bad, "w") as f:
        f.write("[store]\nflush_interval = soon\ncolour = blue\n[governor]\ncpu_budget = 1\n"
                "[nonsense]\nx = 1\n")
    p = t.run([memprofd, "daemon", "--config", bad], timeout=10)
    lines = p.stderr.strip().splitlines()
    want = ["memprofd: %s:2: " % bad, "memprofd: %s:3: [store] unknown key 'colour'" % bad,
            "memprofd: %s:5: " % bad, "memprofd: %s:7: unknown section [nonsense]" % bad]
    if p.returncode != 2 or len(lines) != 4 or \
            any(not ln.startswith(w) for ln, w in zip(lines, want)):
        fails.append("bad config: want exit 2 and 4 lines %r; got %s" % (want, t.describe(p)))
    else:
        t.log("ok: bad config -> exit 2, one file:line error per bad line")
    for path, why in ((d + "/missing.conf", "No such file or directory"),
                      (d, "Is a directory")):
        p = t.run([memprofd, "daemon", "--config", path], timeout=10)
        want = "memprofd: %s: cannot read the config: %s" % (path, why)
        if p.returncode != 2 or p.stderr.strip() != want:
            fails.append("unreadable config: want exit 2 and %r; got %s" % (want, t.describe(p)))
    good = d + "/good.conf"
    with open(good, "w") as f:
        f.write(config(d + "/x.db", "churn"))
    p = t.run([memprofd, "daemon", "--config", good, "--check"], timeout=10)
    if p.returncode != 0 or p.stdout.strip() != good + ": ok":
        fails.append("--check of a good config: %s" % t.describe(p))
    if os.path.exists(d + "/x.db"):
        fails.append("--check created the database")


def governor_of(memprofd, db):
    """The newest run's governor object from `query status --format json`."""
    p = t.run([memprofd, "query", "status", "--db", db, "--format", "json"], timeout=30)
    if p.returncode != 0:
        raise AssertionError("query status: " + t.describe(p))
    runs = json.loads(p.stdout)
    return runs[0].get("governor") if runs else None


def wait_governor(memprofd, db, pred, timeout):
    g, end = None, time.monotonic() + timeout
    while time.monotonic() < end:
        g = governor_of(memprofd, db)
        if g and pred(g):
            return g
        time.sleep(0.3)
    raise AssertionError("query status governor never matched within %ss; last %r" % (timeout, g))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--churn", required=True)
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="check_daemon.")
    fails = []
    check_config_errors(a.memprofd, d, fails)
    t.require_bpf()

    db, conf, sockp = d + "/m.db", d + "/m.conf", d + "/notify.sock"
    with open(conf, "w") as f:
        f.write(config(db, "churn"))
    notify = Notify(sockp)
    churn = subprocess.Popen([a.churn, "--seconds", "60", "--pdeathsig", "1"])
    for _ in range(200):                               # until it has exec'd
        with open("/proc/%d/comm" % churn.pid) as f:
            if f.read().strip() == "churn":
                break
        time.sleep(0.01)
    env = dict(os.environ, NOTIFY_SOCKET=sockp, WATCHDOG_USEC=str(WATCHDOG_USEC))
    env.pop("WATCHDOG_PID", None)
    dmn = subprocess.Popen([a.memprofd, "daemon", "--config", conf], env=env,
                           stderr=subprocess.PIPE, text=True)
    try:
        notify.ready(dmn, 20)
        t.log("ok: READY=1")
        ctxs, end = [], time.monotonic() + 10
        while time.monotonic() < end and not ctxs:     # a reader beside the writer
            time.sleep(0.5)
            ctxs = t.query_contexts(a.memprofd, db)
        if not ctxs or sum(c["alloc_count"] for c in ctxs) == 0:
            fails.append("no allocations of the churn target recorded: %r; processes: %s" % (
                ctxs[:2], t.run([a.memprofd, "query", "processes", "--db", db]).stdout))
        else:
            t.log("ok: %d contexts while running" % len(ctxs))

        # sd_notify: STATUS= from the governor's tick, WATCHDOG=1 every half period.
        notify.until("STATUS=", 5)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 2.0:
            try:
                notify.until("WATCHDOG=1", 2.0 - (time.monotonic() - t0))
            except AssertionError:
                break
        pings = sorted(ts for ts, m in notify.msgs if "WATCHDOG=1" in m.split("\n"))
        gaps = [b - a_ for a_, b in zip(pings, pings[1:])]
        if len(pings) < 3 or max(gaps) > WATCHDOG_USEC / 1e6:
            fails.append("watchdog: want a WATCHDOG=1 at least every %.1f s; pings at %r" % (
                WATCHDOG_USEC / 2e6, pings))
        else:
            t.log("ok: STATUS= sent; %d WATCHDOG=1, gaps <= %.2f s (period %.1f s)" % (
                len(pings), max(gaps), WATCHDOG_USEC / 1e6))

        # The governor in query status: the default budget, what it measured and did.
        g = wait_governor(a.memprofd, db, lambda g: g["ticks"] >= 1, 5)
        if abs(g["budget"] - 0.01) > 1e-9 or not g["decision"] or g["memory"]["rss_bytes"] <= 0:
            fails.append("query status governor before the reload: %r" % g)
        else:
            t.log("ok: governor in query status: budget 1%%, cpu %.3f%%, %s: %s" % (
                g["cpu"] * 100, g["action"], g["decision"]))

        # SIGHUP: RELOADING=1 then READY=1, and the new config applies: a tiny budget.
        with open(conf, "w") as f:
            f.write(config(db, "churn", "[governor]\ncpu_budget = 0.01%\n"))
        dmn.send_signal(signal.SIGHUP)
        msgs = notify.until("READY=1", 5)
        if not any(m.startswith("RELOADING=1") for m in msgs):
            fails.append("SIGHUP: no RELOADING=1 before READY=1: %r" % msgs)
        g = wait_governor(a.memprofd, db, lambda g: abs(g["budget"] - 0.0001) < 1e-12 and
                          g["cpu"] > g["budget"], 5)
        if g["action"] != "at_floor" or "over budget" not in g["decision"]:
            fails.append("a 0.01%% budget: the governor should be over budget: %r" % g)
        else:
            t.log("ok: SIGHUP applied cpu_budget = 0.01%%: query status says %s (%s)" % (
                g["action"], g["decision"]))
        table = t.run([a.memprofd, "query", "status", "--db", db], timeout=30).stdout
        if "governor: budget 0.010% of one CPU" not in table:
            fails.append("query status table lacks the governor block: %s" % table)

        with open(conf, "a") as f:
            f.write("[store]\nno_such_key = 1\n")
        dmn.send_signal(signal.SIGHUP)
        notify.until("READY=1", 5)
        time.sleep(0.3)
        if dmn.poll() is not None:
            fails.append("daemon exited on a broken reload (rc %s)" % dmn.returncode)
        t0 = time.monotonic()
        dmn.send_signal(signal.SIGTERM)
        notify.until("STOPPING=1", 2)
        rc = dmn.wait(timeout=5)
        took = time.monotonic() - t0
        err = dmn.stderr.read()
        if rc != 0 or took > 2.0:
            fails.append("SIGTERM: rc %s after %.2fs (want 0 within 2 s); stderr %s" % (rc, took, err))
        else:
            t.log("ok: SIGTERM -> exit 0 in %.2fs" % took)
        n = config(db, "churn", "[governor]\ncpu_budget = 0.01%\n").count("\n") + 2
        want = "%s:%d: [store] unknown key 'no_such_key'" % (conf, n)
        if want not in err:
            fails.append("broken reload: expected %r in stderr: %s" % (want, err))
        if t.integrity(db) != "ok":
            fails.append("integrity_check: " + t.integrity(db))
        con = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
        st = con.execute("SELECT status, ended_ns FROM runs ORDER BY id DESC LIMIT 1").fetchone()
        con.close()
        if not st or not st[0].startswith("stopped by") or not st[1]:
            fails.append("run not closed by the final flush: %r" % (st,))
    except AssertionError as e:
        fails.append(str(e))
    finally:
        if dmn.poll() is None:
            dmn.kill()
        churn.kill()
        churn.wait()
    for f in fails:
        t.log("FAIL: " + f)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
