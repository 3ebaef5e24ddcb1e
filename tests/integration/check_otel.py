#!/usr/bin/env python3
"""The OpenTelemetry memory USDT contract (issue 18): otel_contract, a sampler written only
against the contract (otel_memory:alloc(ptr, size, weight), otel_memory:free(ptr)), is
recorded by `memprofd record` (default sampled mode, without memprofd's own sampler
injected under it) and by `memprofd daemon` (alloc = sampled): exactly --count objects
of --size bytes at otel_site, each freed (no live-at-exit). libmemprofd_sampler emits the
contract too (its ELF notes: otel_memory alloc with 3 arguments and free, with
semaphores). Skips (77) where BPF cannot work."""
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
from check_daemon import Notify  # noqa: E402

COUNT, SIZE = 100, 100


def site_totals(memprofd, db):
    ctxs = t.query_contexts(memprofd, db)
    mine = [c for c in ctxs if any(f.get("function") == "otel_site" for f in c["frames"])]
    return (sum(c["alloc_count"] for c in mine), sum(c["total_size"] for c in mine),
            sum(c.get("live_at_exit_count", 0) for c in mine), len(ctxs))


def check(label, got, fails):
    n, size, live, nctx = got
    if (n, size, live) != (COUNT, COUNT * SIZE, 0):
        fails.append("%s: otel_site %d objects, %d bytes, %d live at exit (want %d, %d, 0)" % (
            label, n, size, live, COUNT, COUNT * SIZE))
    else:
        t.log("ok: %s: otel_site %d objects, %d bytes (%d contexts in all)" % (label, n, size, nctx))


def check_notes(sampler, fails):
    out = t.run(["readelf", "-n", sampler]).stdout
    blocks = out.split("Provider: ")[1:]
    otel = {b.split("Name: ")[1].split()[0]: b for b in blocks if b.startswith("otel_memory")}
    ok = set(otel) == {"alloc", "free"} and all("Semaphore: 0x0000000000000000" not in b for b in otel.values()) \
        and len(otel["alloc"].split("Arguments:")[1].split("\n")[0].split()) == 3
    if not ok:
        fails.append("libmemprofd_sampler does not emit otel_memory alloc(3 args)/free with "
                     "semaphores: %r" % otel)
    else:
        t.log("ok: libmemprofd_sampler emits otel_memory:alloc(ptr, size, weight) and free")


def daemon_case(a, d, fails):
    db, conf = d + "/d.db", d + "/d.conf"
    with open(conf, "w") as f:
        f.write("[store]\ndb = %s\nflush_interval = 200ms\nretention = 1d\ncompact = off\n"
                "[sampling]\nalloc = sampled\naccess = off\n[governor]\ninterval = 1s\n"
                "[targets]\nrescan_interval = 60s\n[target o]\nexe = %s\n" % (db, a.otel))
    notify = Notify(d + "/notify.sock")
    dmn = subprocess.Popen([a.memprofd, "daemon", "--config", conf],
                           env=dict(os.environ, NOTIFY_SOCKET=d + "/notify.sock"),
                           stderr=subprocess.PIPE, text=True)
    try:
        notify.ready(dmn, 30)
        notify.drain()
        p = subprocess.run([a.otel, "--count", str(COUNT), "--size", str(SIZE), "--wait-ms", "500"])
        if p.returncode != 0:
            fails.append("otel_contract exited %d under the daemon" % p.returncode)
        time.sleep(0.8)
        dmn.send_signal(signal.SIGTERM)
        dmn.wait(timeout=30)
    finally:
        if dmn.poll() is None:
            dmn.kill()
            dmn.wait()
    check("daemon", site_totals(a.memprofd, db), fails)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--otel", required=True)
    ap.add_argument("--sampler", required=True)
    a = ap.parse_args()
    a.otel = os.path.realpath(a.otel)
    t.require_bpf()
    d = tempfile.mkdtemp(prefix="check_otel.")
    fails = []
    check_notes(a.sampler, fails)
    db = d + "/r.db"
    p = t.record(a.memprofd, db, [a.otel, "--count", str(COUNT), "--size", str(SIZE)],
                 extra=["--access", "off"], alloc="sampled")
    if p.returncode != 0:
        fails.append("record: " + t.describe(p))
    else:
        check("record", site_totals(a.memprofd, db), fails)
    daemon_case(a, d, fails)
    t.finish(fails, "otel_memory contract in record and daemon", d)


if __name__ == "__main__":
    main()
