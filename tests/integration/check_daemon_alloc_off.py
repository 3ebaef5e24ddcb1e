#!/usr/bin/env python3
"""check_daemon_alloc_off: `memprofd daemon` with [sampling] alloc = off, access = soft:
a target (tests/workloads/hot_cold, by exe path) started after the daemon is traced for
access sampling with no allocator probe. Asserts: the run's alloc_mode is "off"; no
allocation context is recorded; `query data` ranks hot_global far above cold_global
(>= MIN_SAMPLES samples); SIGTERM ends the daemon with 0; the store passes
integrity_check. A config with alloc = off and access = off is refused (exit 1)."""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpdtest as t  # noqa: E402

MIN_SAMPLES = 100   # 3 s of hot_cold at 1 kHz
RATIO = 10


def config(db, exe, access="soft"):
    return ("[store]\ndb = %s\nflush_interval = 200ms\nretention = 1d\ncompact = off\n"
            "[sampling]\nalloc = off\naccess = %s\naccess_freq = 1000\n"
            "[governor]\ninterval = 1s\ncpu_budget = 6400%%\n"
            "[targets]\nrescan_interval = 1s\n[target hot]\nexe = %s\n" % (db, access, exe))


def query(memprofd, db, what):
    lim = [] if what == "status" else ["--limit", "0"]
    p = t.run([memprofd, "query", what, "--db", db, "--format", "json", *lim], timeout=60)
    if p.returncode != 0:
        raise AssertionError("query %s: %s" % (what, t.describe(p)))
    return json.loads(p.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--hot-cold", required=True)
    a = ap.parse_args()
    exe = os.path.abspath(a.hot_cold)
    d = tempfile.mkdtemp(prefix="check_daemon_alloc_off.")
    fails = []
    nothing = os.path.join(d, "nothing.conf")
    with open(nothing, "w") as f:
        f.write(config(os.path.join(d, "n.db"), exe, access="off"))
    p = t.run([a.memprofd, "daemon", "--config", nothing], timeout=20)
    if p.returncode != 1 or "alloc = off with access = off" not in p.stderr:
        fails.append("alloc = off, access = off: want exit 1 and a reason; got %s" % t.describe(p))
    t.require_bpf()
    db, conf = os.path.join(d, "m.db"), os.path.join(d, "m.conf")
    with open(conf, "w") as f:
        f.write(config(db, exe))
    dmn = subprocess.Popen([a.memprofd, "daemon", "--config", conf], stderr=subprocess.PIPE,
                           text=True)
    hot = None
    try:
        end = time.monotonic() + 20
        while time.monotonic() < end and not os.path.exists(db):
            time.sleep(0.2)
        time.sleep(1.0)                     # BPF attached and the first flush written
        hot = subprocess.Popen([exe, "--seconds", "3"], stdout=subprocess.DEVNULL)
        hot.wait(timeout=60)
        time.sleep(1.0)                     # a flush after its exit
        dmn.send_signal(signal.SIGTERM)
        rc = dmn.wait(timeout=15)
        err = dmn.stderr.read()
        if rc != 0:
            fails.append("SIGTERM: rc %s; stderr %s" % (rc, err[-800:]))
        runs = query(a.memprofd, db, "status")
        if not runs or runs[0].get("alloc_mode") != "off":
            fails.append("alloc_mode of the daemon's run is not 'off': %r" %
                         [r.get("alloc_mode") for r in runs])
        ctxs = query(a.memprofd, db, "contexts")
        if ctxs:
            fails.append("alloc = off recorded %d allocation contexts" % len(ctxs))
        data = query(a.memprofd, db, "data")
        hg = sum(r["access_samples"] for r in data if r["symbol"] == "hot_global")
        cg = sum(r["access_samples"] for r in data if r["symbol"] == "cold_global")
        t.log("alloc = off: hot_global %d samples, cold_global %d; %d contexts" %
              (hg, cg, len(ctxs)))
        if hg < MIN_SAMPLES or hg < RATIO * max(cg, 1):
            fails.append("static: hot_global %d vs cold_global %d samples (want >= %d, >= %dx)"
                         % (hg, cg, MIN_SAMPLES, RATIO))
        if t.integrity(db) != "ok":
            fails.append("integrity_check: " + t.integrity(db))
    except (AssertionError, subprocess.TimeoutExpired) as e:
        fails.append(str(e))
    finally:
        if dmn.poll() is None:
            dmn.kill()
        if hot and hot.poll() is None:
            hot.kill()
    t.finish(fails, "daemon, alloc = off, access = soft: static data without allocator probes", d)


if __name__ == "__main__":
    main()
