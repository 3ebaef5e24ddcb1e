#!/usr/bin/env python3
"""daemon_hold_cost: what the daemon's exact mode costs a target it holds at its exec
(issue 18), and how it keeps up with a rate of targets.
--mode seq (default): --n sequential blips (tests/workloads/blip, ~4 ms, 10 allocations)
beside nothing, beside the daemon with per-process probes (exact_per_process = 1: each
exec held until its links exist) and with host-wide ones (0), interleaved per round
(--rounds) so load hits all alike; prints each variant's median and max blip wall time,
and the daemon's own account of its holds (MEMPROFD_HOLD_STATS: mean and max hold, link
time, link closes). --private-libc runs everything in a private copy of libc (overhead.py)
so other sessions' probes on the system's libc do not count; without it the links are on
the system's libc, whose every mapper the kernel walks per registration.
--mode rate: --n short_lived processes (100 ms each) launched at --rate a second, as
daemon_stress does, per-process and host-wide: launch time, the daemon's CPU and stop
time, missed counts.
Usage: bench/daemon_hold_cost.py --build BUILDDIR [--mode seq|rate] [--n 20] [--rounds 3]
[--rate 200] [--private-libc]. Needs root and BPF (exits 77 otherwise)."""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
sys.path.insert(0, HERE)
from check_daemon import Notify  # noqa: E402
from overhead import private_libc  # noqa: E402

CONF = ("[store]\ndb = %s\nflush_interval = 200ms\nretention = 1d\ncompact = off\n"
        "[sampling]\nalloc = exact\nexact_per_process = %d\naccess = off\n[governor]\n"
        "interval = 1s\ncpu_budget = 6400%%\n[targets]\nrescan_interval = 60s\n"
        "max_processes = 16384\n[target t]\nexe = %s\n")


class Daemon:
    def __init__(self, mpd, d, name, per, exe, pre):
        self.d, self.db = d, "%s/%s.db" % (d, name)
        conf = "%s/%s.conf" % (d, name)
        with open(conf, "w") as f:
            f.write(CONF % (self.db, per, exe))
        self.notify = Notify("%s/%s.sock" % (d, name))
        env = dict(os.environ, NOTIFY_SOCKET="%s/%s.sock" % (d, name), MEMPROFD_HOLD_STATS="1")
        self.errp = "%s/%s.err" % (d, name)
        self.p = subprocess.Popen(pre + [mpd, "daemon", "--config", conf], env=env,
                                  stderr=open(self.errp, "w"))
        self.notify.until("READY=1", 60)

    def cpu_ms(self):
        with open("/proc/%d/stat" % self.p.pid) as f:
            st = f.read().rsplit(")", 1)[1].split()
        return (int(st[11]) + int(st[12])) * 1000 // os.sysconf("SC_CLK_TCK")

    def stop(self):
        t0 = time.monotonic()
        self.p.send_signal(signal.SIGTERM)
        try:
            self.p.wait(120)
        finally:
            if self.p.poll() is None:
                self.p.kill()
                self.p.wait()
        return time.monotonic() - t0

    def stats(self):
        with open(self.errp) as f:
            return [ln.strip() for ln in f if "held" in ln or "linked" in ln]

    def missed(self, mpd):
        q = subprocess.run([mpd, "query", "status", "--db", self.db, "--format", "json"],
                           capture_output=True, text=True).stdout
        return json.loads(q)[0].get("missed") if q.startswith("[") else q.strip()


def seq(a, mpd, d):
    blip = os.path.realpath(os.path.join(a.build, "tests", "workloads", "blip"))
    pre = private_libc(d, blip) if a.private_libc else []
    times = {"none": [], "per-process": [], "host-wide": []}
    for r in range(a.rounds):
        for name in times:
            dm = None if name == "none" else Daemon(mpd, d, "%s%d" % (name, r),
                                                    name == "per-process", blip, pre)
            try:
                for _ in range(a.n):
                    t0 = time.monotonic()
                    subprocess.run(pre + [blip, "--count", "10", "--ms", "4"], check=True)
                    times[name].append((time.monotonic() - t0) * 1000)
            finally:
                if dm:
                    dm.stop()
                    for s in dm.stats():
                        print("  round %d %s: %s" % (r, name, s))
    for name, v in times.items():
        print("%s: blip wall median %.1f ms, max %.1f ms (%d blips)"
              % (name, statistics.median(v), max(v), len(v)))


def rate(a, mpd, d):
    sl = os.path.realpath(os.path.join(a.build, "tests", "workloads", "short_lived"))
    devnull = os.open(os.devnull, os.O_RDWR)
    for name, per in (("per-process", 1), ("host-wide", 0)):
        dm = Daemon(mpd, d, name, per, sl, [])
        try:
            t0, running = time.monotonic(), set()
            for i in range(a.n):
                while True:
                    for pid in list(running):
                        if os.waitpid(pid, os.WNOHANG)[0]:
                            running.discard(pid)
                    wait = t0 + i / a.rate - time.monotonic()
                    if wait <= 0:
                        break
                    time.sleep(min(wait, 0.005))
                running.add(os.posix_spawn(sl, [sl, "--count", "1", "--size", str(1000 + 2 * i),
                                                "--delay-ms", "100"], os.environ,
                                           file_actions=[(os.POSIX_SPAWN_DUP2, devnull, 1)]))
            spawn = time.monotonic() - t0
            for pid in running:
                os.waitpid(pid, 0)
            time.sleep(2.5)
            cpu = dm.cpu_ms()
        finally:
            stop = dm.stop()
        print("%s: %d launched in %.2f s (ideal %.2f), daemon cpu %d ms, stop %.2f s, missed %r"
              % (name, a.n, spawn, a.n / a.rate, cpu, stop, dm.missed(mpd)))
        for s in dm.stats():
            print("  " + s)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--mode", choices=("seq", "rate"), default="seq")
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rate", type=float, default=200)
    ap.add_argument("--private-libc", action="store_true")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("SKIP: needs root")
        return 77
    mpd = os.path.join(a.build, "cli", "memprofd")
    with tempfile.TemporaryDirectory(prefix="daemon_hold_cost.") as d:
        (seq if a.mode == "seq" else rate)(a, mpd, d)
    return 0


if __name__ == "__main__":
    sys.exit(main())
