#!/usr/bin/env python3
"""The daemon's two limits on real BPF, one phase per meson test:
memory: its store on a tmpfs this test fills (ENOSPC) for --outage-s while ctx_fanout
  forks a child every INTERVAL_MS allocating at 2^--depth contexts (new aggregates each):
  the aggregates the daemon holds stay within memory_limit plus GROWTH_S of the workload's
  (its own peak, `query status` memory_limit_drops.peak_bytes), its RssAnon within
  memory_limit + RSS_SLACK_KIB (median of the outage's second half); once the filler is
  gone it recovers (rows written again) and counts what it dropped (aggregates, objects
  > 0; stored + dropped <= allocated); integrity_check ok; SIGTERM exits 0.
stop: ctx_fanout with no pause and two churns, more than the daemon can write: SIGTERM
  ends it within STOP_BOUND_S (stop.h's 2 s bound + STOP_SLACK_S), exit 0, integrity ok,
  and `query status` stop_drops counts what it left (> 0: it was behind).
bench/memory_limit.py runs the memory phase long (depth 10, 20 s outage).
Skips (77) without BPF, or where `mount -t tmpfs` fails (checked first)."""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpdtest as t  # noqa: E402
from check_daemon_stress import (FLUSH_MS, config, exe_rule, fill, rss_kib, start,  # noqa: E402
                                 total_allocs)

INTERVAL_MS = 100         # a child every 100 ms
# The limit bounds the aggregates held after each failed flush; until the next one they
# grow by what the workload brings meanwhile. Slack: GROWTH_S of it (a child's 2^depth
# aggregates of up to AGG_BYTES each, a child every INTERVAL_MS): on 2 cores at load 14 a
# loop turn took that long (depth 7, memory_limit 1M: peaks up to 1.84 MB; without the
# bound 4.3 MB after 8 s).
GROWTH_S = 2.0
AGG_BYTES = 512
# What else the outage holds: exited processes' records, malloc's arenas keeping dropped
# aggregates' memory, a failing flush's transaction (its pages until the rollback).
# bench/memory_limit.py: +4.5 to +6.4 MiB held at depth 10 and memory_limit = 2M.
RSS_SLACK_KIB = 8 << 10
CACHE = "256K"
TMPFS = "64m"             # the WAL grows (no checkpoint) until the filler takes the rest
RECOVER_S = 10.0
STOP_BOUND_MS = 2000      # daemon/service/stop.h DAEMON_STOP_BOUND_MS
STOP_SLACK_S = 1.0        # process exit, probes detached, on 2 loaded cores (--stop-slack-s)
STOP_FEED_S = 6.0         # fed before SIGTERM


def size_bytes(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def progress(path):
    """(children, blocks) from ctx_fanout's --progress file, (0, 0) before the first."""
    for _ in range(100):
        try:
            with open(path) as f:
                _, c, b = f.read(128).split()
            return int(c), int(b)
        except FileNotFoundError:
            return 0, 0
        except ValueError:
            time.sleep(0.001)
    raise AssertionError("unreadable progress in %s" % path)


def status(memprofd, db):
    p = t.run([memprofd, "query", "status", "--db", db, "--format", "json"], timeout=60)
    if p.returncode != 0:
        raise AssertionError("query status: " + t.describe(p))
    return json.loads(p.stdout)[0]


def stop(d, timeout=60):
    """SIGTERM: (rc, seconds to exit, stderr)."""
    t0 = time.monotonic()
    d.p.send_signal(signal.SIGTERM)
    try:
        rc = d.p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        rc = "none: still running %d s after SIGTERM" % timeout
        d.kill()
    took = time.monotonic() - t0
    err = d.stderr()
    d.close()
    return rc, took, err


def sample_outage(a, d, base):
    """RssAnon growth over the outage: (median of its second half, peak) KiB."""
    t0, samples = time.monotonic(), []
    while time.monotonic() < t0 + a.outage_s:
        samples.append((time.monotonic() - t0, rss_kib(d.p.pid)[1] - base))
        time.sleep(0.1)
    late = sorted(v for ts, v in samples if ts >= a.outage_s / 2)
    peak = max(v for _, v in samples)
    return (late[len(late) // 2] if late else peak), peak


def outage(a, tmp, mnt, fails):
    db, conf, prog, gate = mnt + "/m.db", tmp + "/m.conf", tmp + "/fanout.progress", tmp + "/go"
    limit = size_bytes(a.memory_limit)
    with open(conf, "w") as f:
        f.write(config(db, exe_rule(a.fanout), "memory_limit = %s\ncache_size = %s\n"
                       "checkpoint_interval = 1h\n" % (a.memory_limit, CACHE)))
    fan = subprocess.Popen([a.fanout, "--depth", str(a.depth), "--interval-ms", str(INTERVAL_MS),
                            "--seconds", "120", "--pdeathsig", "9", "--progress", prog,
                            "--wait-file", gate])
    d = None
    try:
        time.sleep(0.2)
        d = start(a.memprofd, conf, tmp)
        open(gate, "w").close()
        time.sleep(2.0)          # the first children's rows stored
        base = rss_kib(d.p.pid)[1]
        before = total_allocs(db)
        try:
            fill(mnt + "/filler")
        except OSError:
            pass                 # the store filled it already: unwritable all the same
        steady, peak = sample_outage(a, d, base)
        full, alive = total_allocs(db), d.p.poll() is None
        os.unlink(mnt + "/filler")
        end, after = time.monotonic() + RECOVER_S, full
        while time.monotonic() < end and after <= full:
            time.sleep(0.2)
            after = total_allocs(db)
        fan.send_signal(signal.SIGKILL)
        fan.wait()
        done = progress(prog)[1]
        time.sleep(2 * FLUSH_MS / 1000)
        st = status(a.memprofd, db)
        stored = total_allocs(db)
        rc, took, err = stop(d, 30)
    finally:
        if fan.poll() is None:
            fan.kill()
        fan.wait()
        if d and d.p.poll() is None:
            d.kill()
    drops = st.get("memory_limit_drops") or {}
    ig = t.integrity(db)
    slack = int(GROWTH_S * 1000 / INTERVAL_MS) * 2 ** a.depth * AGG_BYTES
    bound = limit + slack
    t.log("memory_limit %s: aggregates held at most %s bytes (bound %d); RssAnon %d KiB "
          "before the outage, +%d KiB held (median of its second half; bound +%d KiB), peak "
          "+%d KiB; stored %d before, %d while full, %d after recovery, %d at the end; "
          "dropped %s; fanout allocated %d; stop %.2f s" % (
              a.memory_limit, drops.get("peak_bytes"), bound, base, steady,
              limit // 1024 + RSS_SLACK_KIB, peak, before, full, after, stored, drops, done, took))
    if not alive:
        fails.append("the daemon died while the store was full: %s" % err)
    if full > before and "will retry" not in err:
        fails.append("rows were committed while the disk was full (%d -> %d): the fill did "
                     "not bite" % (before, full))
    if not drops.get("peak_bytes") or drops["peak_bytes"] > bound:
        fails.append("aggregates held %s bytes while unwritable, bound memory_limit + %d = %d"
                     % (drops.get("peak_bytes"), slack, bound))
    if a.rss_check and steady > limit // 1024 + RSS_SLACK_KIB:
        fails.append("RssAnon held +%d KiB in the outage's second half, bound memory_limit + "
                     "%d KiB" % (steady, RSS_SLACK_KIB))
    if after <= full or "writable again" not in err:
        fails.append("no recovery once space returned (%d -> %d): %s" % (full, after, err))
    if not drops.get("aggregates") or not drops.get("objects") or \
            drops.get("memory_limit") != limit:
        fails.append("query status does not count the drops over memory_limit: %s" % drops)
    # ctx_fanout's parent allocates too (its progress file: FILE and buffer, 2 a child),
    # and a child killed mid-walk allocated up to 2^depth blocks never counted.
    most = done + 2 * done // 2 ** a.depth + 2 ** a.depth
    if stored + drops.get("objects", 0) > most:
        fails.append("stored %d + dropped %d objects > %d allocated: counted twice" % (
            stored, drops.get("objects", 0), most))
    if "while the store is unwritable: dropping" not in err:
        fails.append("no drop over memory_limit while the store was unwritable: %s" % err)
    if ig != "ok":
        fails.append("integrity_check: %s" % ig)
    if rc != 0:
        fails.append("daemon rc %s at SIGTERM: %s" % (rc, err))


def phase_memory(a, tmp, fails):
    mnt = tmp + "/small"
    why = t.mount_tmpfs(mnt, TMPFS)
    if why:
        t.skip(why)
    try:
        outage(a, tmp, mnt, fails)
    finally:
        t.umount_lazy(mnt)


def phase_stop(a, tmp, fails):
    db, conf = tmp + "/stop.db", tmp + "/stop.conf"
    with open(conf, "w") as f:
        f.write(config(db, exe_rule(a.fanout) + "\n[target c]\n" + exe_rule(a.churn)))
    feed = [subprocess.Popen([a.churn, "--seconds", "120", "--pdeathsig", "9"]) for _ in range(2)]
    feed.append(subprocess.Popen([a.fanout, "--depth", "10", "--seconds", "120",
                                  "--pdeathsig", "9"]))
    try:
        d = start(a.memprofd, conf, tmp)
        time.sleep(STOP_FEED_S)
        rc, took, err = stop(d)
    finally:
        for p in feed:
            p.kill()
            p.wait()
    st = status(a.memprofd, db)
    drops, stored, ig = st.get("stop_drops"), total_allocs(db), t.integrity(db)
    t.log("stop of a daemon fed %.0f s by ctx_fanout (depth 10, no pause) and 2 churns: "
          "exit %s after %.2f s (bound %.1f s); %d objects stored; stop_drops %s; "
          "integrity %s" % (STOP_FEED_S, rc, took, STOP_BOUND_MS / 1000 + a.stop_slack_s,
                            stored, drops, ig))
    if rc != 0:
        fails.append("daemon rc %s at SIGTERM: %s" % (rc, err))
    if took > STOP_BOUND_MS / 1000 + a.stop_slack_s:
        fails.append("SIGTERM -> exit took %.2f s, bound %d ms + %.1f s" % (
            took, STOP_BOUND_MS, a.stop_slack_s))
    if not drops or not (drops["records"] or drops["aggregates"]) or \
            drops["budget_ms"] != STOP_BOUND_MS:
        fails.append("query status shows no stop drops (the daemon kept up: the check proves "
                     "nothing, or the drops were not counted): %s; %s" % (drops, err))
    if not stored:
        fails.append("nothing stored")
    if ig != "ok":
        fails.append("integrity_check: %s" % ig)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--fanout", required=True)
    ap.add_argument("--churn", help="the stop phase's second workload")
    ap.add_argument("--phase", choices=("memory", "stop"), required=True)
    ap.add_argument("--memory-limit", default="1M")
    ap.add_argument("--depth", type=int, default=7)
    ap.add_argument("--outage-s", type=float, default=8.0)
    ap.add_argument("--stop-slack-s", type=float, default=STOP_SLACK_S,
                    help="beyond the 2 s bound (the sanitizer build's exit runs LSan)")
    ap.add_argument("--no-rss-check", dest="rss_check", action="store_false",
                    help="report RssAnon without judging it (the sanitizer build's "
                         "allocator quarantines freed memory)")
    a = ap.parse_args()
    if a.phase == "stop" and not a.churn:
        ap.error("--phase stop needs --churn")
    a.fanout = os.path.abspath(a.fanout)
    a.churn = a.churn and os.path.abspath(a.churn)
    t.require_bpf()
    # meson's MALLOC_PERTURB_ makes malloc write every freed block: the daemon's resident
    # memory would be the harness's, not its own.
    os.environ.pop("MALLOC_PERTURB_", None)
    tmp = tempfile.mkdtemp(prefix="check_daemon_limits.")
    fails = []
    t0 = time.monotonic()
    try:
        (phase_memory if a.phase == "memory" else phase_stop)(a, tmp, fails)
    except AssertionError as e:
        fails.append(str(e))
    t.log("phase %s: %.1f s" % (a.phase, time.monotonic() - t0))
    t.finish(fails, "daemon %s limit" % a.phase, tmp)


if __name__ == "__main__":
    sys.exit(main())
