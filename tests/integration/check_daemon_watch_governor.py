#!/usr/bin/env python3
"""The daemon's governor lowers the watch's trap budget (issue 15, item 4). watch_known
(sampler preloaded, a sample every 16 KiB, so its 64 KiB objects are all sampled; they
live for the whole run, so the daemon's windows trap on the hot ones) runs under a
daemon whose cpu_budget (2%) the watch's traps and the recorder's windows exceed: the
watch source must have traps (events) and its scale (the allowed traps/s with it) be
lowered to at most 1/2, not under the floor, and its traps per tick must drop.
A first short run of watch_known makes the daemon attach the sampler file, so that the
second, measured one is traced from its start. Skips (77) where BPF or the breakpoint
PMU is missing."""
import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpdtest as t  # noqa: E402
from check_daemon import Notify, governor_of  # noqa: E402

FLOOR = 0.125          # [governor] min_scale
LOWERED = 0.5          # the watch's scale must fall at least this far
BUDGET = "2%"          # [governor] cpu_budget: the watch may take half (1%), and its
                       # traps plus the recorder's own work exceed the whole


def config(db, exe):
    return ("[store]\ndb = %s\nflush_interval = 200ms\nretention = 1d\ncompact = off\n"
            "[sampling]\nalloc = sampled\naccess = soft\naccess_freq = 10\n"
            "[governor]\ninterval = 1s\ncpu_budget = %s\nmin_scale = %g\n"
            "[targets]\nrescan_interval = 1s\n[target w]\nexe = %s\n" % (db, BUDGET, FLOOR, exe))


def source(g, name):
    return next((s for s in g["sources"] if s["name"] == name), None) if g else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--workload", required=True, help="tests/workloads/watch_known")
    ap.add_argument("--sampler", required=True)
    a = ap.parse_args()
    a.workload, a.sampler = os.path.abspath(a.workload), os.path.abspath(a.sampler)
    t.require_bpf()
    t.require_breakpoints()
    d = tempfile.mkdtemp(prefix="check_daemon_watch_governor.")
    db, conf = d + "/m.db", d + "/m.conf"
    with open(conf, "w") as f:
        f.write(config(db, a.workload))
    fails = []
    notify = Notify(d + "/notify.sock")
    dmn = subprocess.Popen([a.memprofd, "daemon", "--config", conf],
                           env=dict(os.environ, NOTIFY_SOCKET=d + "/notify.sock"),
                           stderr=subprocess.PIPE, text=True)
    env = dict(os.environ, LD_PRELOAD=a.sampler, MEMPROFD_SAMPLE_BYTES="16384")
    try:
        notify.ready(dmn, 30)
        notify.drain()
        subprocess.run([a.workload, "--seconds", "1", "--objects", "1"], env=env,
                       stdout=subprocess.DEVNULL, timeout=30)
        wk = subprocess.Popen([a.workload, "--seconds", "8", "--objects", "8"], env=env,
                              stdout=subprocess.DEVNULL)
        # full_rate: traps/s allowed at scale 1 (rate / scale of any tick: the recorder's
        # budget is that times the scale); trapped: most traps in a tick.
        # low: ticks that ran at a lowered scale (events of a tick ran at the scale the
        # previous tick left, and up to a second's traps are saved up).
        full_rate, trapped, g, low, prev = None, 0, None, set(), None
        end = time.monotonic() + 12
        while wk.poll() is None and time.monotonic() < end and len(low) < 3:
            g = governor_of(a.memprofd, db)
            w = source(g, "watch")
            if w:
                if w["scale"] > 0 and w["rate"] > 0:
                    full_rate = w["rate"] / w["scale"]
                trapped = max(trapped, w["events"])
                if prev and prev["ticks"] < g["ticks"] and source(prev, "watch")["scale"] <= LOWERED:
                    low.add(g["ticks"])
                if not prev or prev["ticks"] < g["ticks"]:
                    prev = g
            time.sleep(0.5)
        wk.kill()
        wk.wait()
        w = source(g, "watch")
        t.log("watch source: %r (at scale 1: %r traps/s allowed; most traps in a tick %d)"
              % (w, full_rate, trapped))
        if not w or not trapped:
            fails.append("the watch never trapped under the daemon: %r" % w)
        elif w["scale"] > LOWERED or w["scale"] < FLOOR - 1e-9:
            fails.append("the watch's budget was not lowered (to [%g, %g]): %r" % (
                FLOOR, LOWERED, w))
        elif w["events"] > trapped / 2:
            fails.append("traps per tick did not drop at the floor: %d vs %d at most" % (
                w["events"], trapped))
    except AssertionError as e:
        fails.append(str(e))
    finally:
        dmn.terminate()
        try:
            dmn.wait(timeout=10)
        except subprocess.TimeoutExpired:
            dmn.kill()
            dmn.wait()
    t.finish(fails, "the governor lowers the watch's trap budget", d)


if __name__ == "__main__":
    main()
