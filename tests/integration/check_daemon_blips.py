#!/usr/bin/env python3
"""No process lost to the daemon's discovery latency (issue 18): `memprofd daemon` in
sampled mode, 200 blip processes of ~4 ms (one allocation site, 10 blocks each, every
allocation sampled: LD_PRELOAD=libmemprofd_sampler.so MEMPROFD_SAMPLE_BYTES=1), launched
20 at a time, then 40 more through `sh -c 'exec blip'` (sh rejected at its exec, blip
decided again at the next). Asserts: >= 198 of them recorded with their executable and comm, >= 99% of
their blip_site allocations stored, each with the kernel's ppid (this script) and start_ns
and exit_ns on the epoch clock, and query status's per-run `missed` counters present
(whatever was still missed is counted, not invisible). With --access soft (issue 15) the
daemon also links each blip's memprofd:watch (in-process watches, watch_links.c): the
same counts must hold; the blips still running when the daemon looks at them are queued
for their links (most end before the daemon's worker thread makes it): some must be
queued, one made (for a last blip of 500 ms) and none refused (its status line);
its CPU time and link creation time are logged (MEMPROFD_WATCH_INPROCESS=0 in the
environment: the same run without the links, to compare). Skips (77) where BPF cannot
work (and, with --access soft, where the breakpoint PMU is missing)."""
import argparse
import json
import os
import signal
import subprocess
import re
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpdtest as t  # noqa: E402
from check_daemon import Notify  # noqa: E402

PROCS, BATCH, COUNT, WRAPPED = 200, 20, 10, 40
MIN_PROCS, MIN_SHARE = 198, 0.99
MIN_WRAPPED = 0.95   # of the wrapped ones: a few ms of each may fall between decisions


def config(db, blip, access):
    return ("[store]\ndb = %s\nflush_interval = 200ms\nretention = 1d\ncompact = off\n"
            "[sampling]\nalloc = sampled\naccess = %s\naccess_freq = 10\n[governor]\ninterval = 1s\n"
            "cpu_budget = 6400%%\n[targets]\nrescan_interval = 60s\n"
            "[target blip]\nexe = %s\n" % (db, access, blip))


def keep_status(notify, last):
    """Reads the daemon's messages in a thread (an unread socket blocks it), keeping the
    last STATUS= line in last[0]."""
    def loop():
        notify.sock.settimeout(None)
        while True:
            try:
                m = notify.sock.recv(4096).decode()
            except OSError:
                return
            for line in m.split("\n"):
                if line.startswith("STATUS="):
                    last[0] = line
    threading.Thread(target=loop, daemon=True).start()


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        v = f.read().rsplit(")", 1)[1].split()
    return (int(v[11]) + int(v[12])) / os.sysconf("SC_CLK_TCK")


def query(memprofd, db, what):
    lim = [] if what == "status" else ["--limit", "0"]
    p = t.run([memprofd, "query", what, "--db", db, "--format", "json", *lim], timeout=60)
    if p.returncode != 0:
        raise AssertionError("query %s: %s" % (what, t.describe(p)))
    return json.loads(p.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--blip", required=True)
    ap.add_argument("--sampler", required=True)
    ap.add_argument("--access", default="off", choices=("off", "soft"))
    a = ap.parse_args()
    blip, sampler = os.path.realpath(a.blip), os.path.realpath(a.sampler)
    t.require_bpf()
    watching = a.access == "soft" and os.environ.get("MEMPROFD_WATCH_INPROCESS") != "0"
    if watching:
        t.require_breakpoints()
    d = tempfile.mkdtemp(prefix="check_daemon_blips.")
    db, conf = d + "/m.db", d + "/m.conf"
    with open(conf, "w") as f:
        f.write(config(db, blip, a.access))
    notify = Notify(d + "/notify.sock")
    env = dict(os.environ, NOTIFY_SOCKET=d + "/notify.sock")
    dmn = subprocess.Popen([a.memprofd, "daemon", "--config", conf], env=env,
                           stderr=subprocess.PIPE, text=True)
    fails = []
    try:
        notify.ready(dmn, 30)
        status = [None]
        keep_status(notify, status)
        c0 = cpu_s(dmn.pid)
        pre = dict(os.environ, LD_PRELOAD=sampler, MEMPROFD_SAMPLE_BYTES="1")
        pids, t0, e0 = set(), time.monotonic(), time.time_ns()
        for _ in range(PROCS // BATCH):
            batch = [subprocess.Popen([blip, "--count", str(COUNT), "--ms", "4"], env=pre)
                     for _ in range(BATCH)]
            for p in batch:
                if p.wait() != 0:
                    fails.append("blip exited %d" % p.returncode)
                pids.add(p.pid)
        t.log("%d blips in %.2f s" % (PROCS, time.monotonic() - t0))
        # Wrapped: sh is rejected at its exec, then exec's blip (often before the daemon
        # has read sh's record): decided again at that exec.
        wrapped = set()
        for _ in range(WRAPPED // BATCH):
            batch = [subprocess.Popen(["sh", "-c", 'exec "$0" --count %d --ms 4' % COUNT, blip],
                                      env=pre) for _ in range(BATCH)]
            for p in batch:
                p.wait()
                wrapped.add(p.pid)
        if watching:   # one that lives long enough for its link (not counted below)
            subprocess.run([blip, "--count", "1", "--ms", "500"], env=pre, timeout=30)
        time.sleep(1.0)                                # a few flushes
        c1 = cpu_s(dmn.pid)
        t.log("daemon CPU over the blips: %.2f s; %s" % (c1 - c0, status[0]))
        # A blip still running when the daemon looks at it is queued for its link; most
        # end before the worker thread reaches them (then they cost a poll).
        links = re.search(r"watch links \d+ \((\d+) queued, (\d+) made, [\d.]+ us each, "
                          r"(\d+) failed", status[0] or "")
        if watching and (not links or int(links.group(1)) < 1 or
                         int(links.group(2)) < 1 or int(links.group(3))):
            fails.append("the daemon queued no blip's memprofd:watch link, made none, "
                         "or the kernel refused some: %r" % status[0])
        dmn.send_signal(signal.SIGTERM)
        err = dmn.communicate(timeout=30)[1]
        if dmn.returncode != 0:
            fails.append("daemon exited %d: %s" % (dmn.returncode, err))
        procs = [p for p in query(a.memprofd, db, "processes") if p["pid"] in pids]
        named = [p for p in procs if p["exe"] == blip and p["comm"] == "blip"]
        # Every allocation a blip makes is at blip_site (10 each; the sampler samples all).
        stored = sum(p["alloc_count"] for p in named)
        run = query(a.memprofd, db, "status")[0]
        t.log("recorded %d of %d blips with their executable (%d rows); %d of %d blip_site "
              "allocations stored; missed %r" % (len(named), PROCS, len(procs), stored,
                                                 PROCS * COUNT, run.get("missed")))
        if len(named) < MIN_PROCS:
            fails.append("only %d of %d blips recorded with exe %s and comm blip: %r" % (
                len(named), PROCS, blip, [p for p in procs if p not in named][:3]))
        if stored < MIN_SHARE * PROCS * COUNT:
            fails.append("only %d of %d sampled allocations stored" % (stored, PROCS * COUNT))
        # Process fields (issue 18 item 5): the kernel's ppid, start_ns on the epoch clock.
        e1 = time.time_ns()
        bad = [p for p in named if p["ppid"] != os.getpid() or not e0 <= p["start_ns"] <= e1
               or not p["start_ns"] <= (p["exit_ns"] or 0) <= e1]
        if bad:
            fails.append("%d blips with ppid other than %d or start/exit not epoch ns in "
                         "[%d, %d]: %r" % (len(bad), os.getpid(), e0, e1, bad[:2]))
        allp = query(a.memprofd, db, "processes")
        wnamed = [p for p in allp if p["pid"] in wrapped and p["exe"] == blip]
        t.log("wrapped (sh -c 'exec blip'): %d of %d recorded as blip" % (len(wnamed), WRAPPED))
        if len(wnamed) < WRAPPED * MIN_WRAPPED:
            fails.append("only %d of %d blips exec'd by a rejected sh recorded; rows of the "
                         "others: %r" % (len(wnamed), WRAPPED, [p for p in allp if p["pid"] in wrapped
                                                             and p not in wnamed][:4]))
        m = run.get("missed")
        if not isinstance(m, dict) or set(m) != {"exec", "late", "unknown"}:
            fails.append("query status has no per-run missed counters: %r" % run)
    finally:
        if dmn.poll() is None:
            dmn.kill()
            dmn.wait()
    t.finish(fails, "daemon blips", d)


if __name__ == "__main__":
    main()
