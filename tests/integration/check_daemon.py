#!/usr/bin/env python3
"""memprofd daemon under a fake systemd: NOTIFY_SOCKET is a datagram socket this check
reads. The daemon must send READY=1, attach to a running target chosen by [target]
comm, write contexts a concurrent `memprofd query` (read-only, WAL) sees, answer SIGHUP
with RELOADING=1 then READY=1, keep running on a broken config (one line naming the
file and line), and on SIGTERM send STOPPING=1 and exit 0 within 2 s with a final
flush and a sound database. Skips (77) where BPF cannot work or `daemon` is not yet a
memprofd command."""
import argparse
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


def config(db, comm, extra=""):
    return ("[store]\ndb = %s\nflush_interval = 200ms\nretention = 1d\ncompact = off\n"
            "[sampling]\nalloc = exact\naccess = off\n[governor]\ninterval = 1s\n"
            "[targets]\nrescan_interval = 1s\n[target t]\ncomm = %s\n%s" % (db, comm, extra))


def recv_until(sock, want, timeout):
    """Messages until one contains `want`; returns them all (AssertionError on timeout)."""
    got, end = [], time.monotonic() + timeout
    while time.monotonic() < end:
        sock.settimeout(max(0.01, end - time.monotonic()))
        try:
            m = sock.recv(4096).decode()
        except socket.timeout:
            break
        got.append(m)
        if want in m.split("\n"):
            return got
    raise AssertionError("no %r within %ss; got %r" % (want, timeout, got))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--churn", required=True)
    a = ap.parse_args()
    t.require_bpf()
    h = t.run([a.memprofd, "daemon", "--help"], timeout=10)
    if h.returncode != 0:
        t.skip("`memprofd daemon` is not dispatched in this build")

    d = tempfile.mkdtemp(prefix="check_daemon.")
    db, conf, sockp = d + "/m.db", d + "/m.conf", d + "/notify.sock"
    with open(conf, "w") as f:
        f.write(config(db, "churn"))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(sockp)
    churn = subprocess.Popen([a.churn, "--seconds", "60", "--pdeathsig", "1"])
    for _ in range(200):                               # until it has exec'd
        with open("/proc/%d/comm" % churn.pid) as f:
            if f.read().strip() == "churn":
                break
        time.sleep(0.01)
    env = dict(os.environ, NOTIFY_SOCKET=sockp)
    dmn = subprocess.Popen([a.memprofd, "daemon", "--config", conf], env=env,
                           stderr=subprocess.PIPE, text=True)
    fails = []
    try:
        try:
            recv_until(sock, "READY=1", 20)
        except AssertionError as e:
            dmn.kill()
            err = dmn.communicate()[1]
            if t.says_no_cap_bpf(err) or "Operation not permitted" in err:
                t.skip("BPF refused: " + err.strip().splitlines()[-1])
            raise AssertionError("%s; stderr: %s" % (e, err))
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
        dmn.send_signal(signal.SIGHUP)
        msgs = recv_until(sock, "READY=1", 5)
        if not any(m.startswith("RELOADING=1") for m in msgs):
            fails.append("SIGHUP: no RELOADING=1 before READY=1: %r" % msgs)
        with open(conf, "a") as f:
            f.write("[store]\nno_such_key = 1\n")
        dmn.send_signal(signal.SIGHUP)
        recv_until(sock, "READY=1", 5)
        time.sleep(0.3)
        if dmn.poll() is not None:
            fails.append("daemon exited on a broken reload (rc %s)" % dmn.returncode)
        t0 = time.monotonic()
        dmn.send_signal(signal.SIGTERM)
        recv_until(sock, "STOPPING=1", 2)
        rc = dmn.wait(timeout=5)
        took = time.monotonic() - t0
        err = dmn.stderr.read()
        if rc != 0 or took > 2.0:
            fails.append("SIGTERM: rc %s after %.2fs (want 0 within 2 s); stderr %s" % (rc, took, err))
        else:
            t.log("ok: SIGTERM -> exit 0 in %.2fs" % took)
        want = "%s:%d: [store] unknown key 'no_such_key'" % (conf, config(db, "churn").count("\n") + 2)
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
