#!/usr/bin/env python3
"""memprofd daemon under stress, three phases on real BPF:
1. kill -9 in a loop (--kills, default 50) while it writes a churn target: integrity_check
   ok every time; each daemon run owns its MIB rows (schema v5), so an earlier run's total
   never changes after a restart, a run never stores more than churn did while it was
   attached, and what churn had done one flush interval (plus slack) before the kill is
   committed;
2. --rate short-lived processes per second for --churn-seconds (default 200/s for 60 s),
   found at exec (EV_NEWEXEC): over the last half the slope of the daemon's anonymous
   memory stays under --max-slope-kib KiB/s and its RSS grows by at most
   MAX_STEADY_GROWTH_KIB from the third quarter's median to the last's (each quarter's
   slope of both is printed); the daemon's own
   account in `query status` (processes and aggregates held, page cache) stays bounded
   and shows every exited process freed; each process's unique allocation size is stored
   under that process and no other; and `memprofd query` (read-only, WAL) keeps working;
3. disk full on a 2 MiB tmpfs: flushes fail (logged), the daemon keeps running, the DB
   stays sound, and writes resume once the filler file is deleted.
Skips (77) without BPF; phase 3 is skipped (said so) where tmpfs cannot be mounted."""
import argparse
import errno
import json
import os
import random
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpdtest as t  # noqa: E402

FLUSH_MS = 200
SLACK_S = 0.4           # ring-buffer poll (<= 1 s wait, woken early) and the commit
                        # (--slack-s: the sanitizer build's first flush, symbolizing with
                        # libc6-dbg at ASan's speed, can take over a second)
BATCH_OBJS = 100        # one churn batch (50 malloc + 26 calloc): done but not yet in progress
SIZE_BASE = (1 << 20) | 1   # short-lived process i allocates SIZE_BASE + 2 i bytes
CACHE, CACHE_BYTES = "256K", 256 << 10   # [store] cache_size of the short-lived phase
MAX_STEADY_GROWTH_KIB = 2048   # VmRSS after warm-up: library pages first touched late


def exe_rule(path):
    """A target rule for this very binary: `comm = churn` would also take another
    checkout's churn running on the same host (its counts would land in this run)."""
    return "exe = " + os.path.realpath(path)


def config(db, rule, extra=""):
    return ("[store]\ndb = %s\nflush_interval = %dms\nretention = 1d\ncompact = off\n%s"
            "[sampling]\nalloc = exact\naccess = off\n[governor]\ninterval = 1s\n"
            "[targets]\nrescan_interval = 5s\nmax_processes = 16384\n[target t]\n%s\n"
            % (db, FLUSH_MS, extra, rule))


LIVE = []   # every Daemon started: killed at the end whatever happened


class Daemon:
    def __init__(self, memprofd, conf, sockdir):
        self.sockp = os.path.join(sockdir, "notify.%d.sock" % random.randrange(1 << 30))
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.sockp)
        self.errf = tempfile.TemporaryFile(mode="w+")
        env = dict(os.environ, NOTIFY_SOCKET=self.sockp)
        # Not meson's pipe: a daemon left running would hold it open until the timeout.
        self.p = subprocess.Popen([memprofd, "daemon", "--config", conf], env=env,
                                  stdout=self.errf, stderr=self.errf, text=True)
        LIVE.append(self.p)

    def wait_ready(self, timeout=20):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self.sock.settimeout(max(0.01, end - time.monotonic()))
            try:
                m = self.sock.recv(4096).decode()
            except socket.timeout:
                break
            if "READY=1" in m.split("\n"):
                # Nobody reads it from here on: gone, the daemon's sends fail at once
                # instead of blocking on a full queue.
                self.close()
                return True
            if self.p.poll() is not None:
                break
        return False

    def stderr(self):
        self.errf.seek(0)
        return self.errf.read()

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()
        self.close()

    def close(self):
        self.sock.close()
        try:
            os.unlink(self.sockp)
        except OSError:
            pass


def start(memprofd, conf, sockdir):
    d = Daemon(memprofd, conf, sockdir)
    if not d.wait_ready():
        d.kill()
        err = d.stderr()
        raise AssertionError("daemon not READY within 20 s; stderr: %s" % err)
    return d


def read_progress(path):
    """(CLOCK_MONOTONIC s, objects done) from churn's --progress file."""
    for _ in range(100):
        try:
            with open(path) as f:
                ts, n = f.read(64).split()
            return int(ts) / 1e9, int(n)
        except (OSError, ValueError):
            time.sleep(0.001)    # between churn's truncate and its write
    raise AssertionError("no progress in %s" % path)


def wait_progress(path):
    for _ in range(500):
        if os.path.exists(path) and os.path.getsize(path):
            return
        time.sleep(0.01)
    raise AssertionError("churn wrote no progress to %s" % path)


def total_allocs(db):
    con = sqlite3.connect("file:%s?mode=ro" % db, uri=True, timeout=10)
    try:
        return con.execute("SELECT coalesce(sum(alloc_count), 0) FROM mib").fetchone()[0]
    finally:
        con.close()


def rss_kib(pid):
    """(VmRSS, RssAnon) in KiB. RssAnon is the heap and anonymous maps, where a leak
    would show; the rest are file pages (libraries paged in as code paths first run,
    bounded by their size) and the BPF maps."""
    v = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k = line.split(":")[0]
            if k in ("VmRSS", "RssAnon"):
                v[k] = int(line.split()[1])
    return v.get("VmRSS", 0), v.get("RssAnon", 0)


def slope(samples):
    """Least-squares slope of (t, v) samples, v per second."""
    n = len(samples)
    mt = sum(s[0] for s in samples) / n
    mv = sum(s[1] for s in samples) / n
    den = sum((s[0] - mt) ** 2 for s in samples)
    return sum((s[0] - mt) * (s[1] - mv) for s in samples) / den if den else 0.0


def run_totals(db):
    """{run_id: sum(alloc_count)} over the MIB rows (schema v5: a run owns its rows), and
    the newest run's id."""
    con = sqlite3.connect("file:%s?mode=ro" % db, uri=True, timeout=10)
    try:
        rows = dict(con.execute("SELECT run_id, coalesce(sum(alloc_count), 0) FROM mib "
                                "GROUP BY run_id").fetchall())
        last = con.execute("SELECT max(id) FROM runs").fetchone()[0]
    finally:
        con.close()
    return rows, last


def phase_kills(a, tmp, fails):
    """One churn (its own progress file) lives across every daemon run: a restarted daemon
    writes the rows of its own run, so each run's total is judged on its own."""
    db, conf, prog = tmp + "/kill.db", tmp + "/kill.conf", tmp + "/kill.progress"
    with open(conf, "w") as f:
        f.write(config(db, exe_rule(a.churn)))
    churn = subprocess.Popen([a.churn, "--seconds", str(int(a.kills * 4 + 60)), "--pdeathsig",
                              "1", "--progress", prog])
    try:
        wait_progress(prog)
        kept, worst_margin, worst_loss_ms = {}, None, 0.0
        for it in range(a.kills):
            pre = read_progress(prog)
            d = start(a.memprofd, conf, tmp)
            time.sleep(0.05)
            p0 = read_progress(prog)
            hist = []
            run_s = 2.0 if it % 10 == 9 else random.uniform(0.4, 1.0)
            end = time.monotonic() + run_s
            while time.monotonic() < end:
                hist.append(read_progress(prog))
                time.sleep(0.02)
            kill_at = time.monotonic()
            d.p.send_signal(signal.SIGKILL)
            d.kill()
            post = read_progress(prog)
            ig = t.integrity(db)
            if ig != "ok":
                fails.append("kill %d: integrity_check: %s" % (it, ig))
                return
            totals, run_id = run_totals(db)
            # Earlier runs' rows are theirs: a restart never rewrites them.
            for rid, n in kept.items():   # a run that stored nothing has no rows: 0
                if totals.get(rid, 0) != n:
                    fails.append("kill %d: run %d's stored allocations changed %d -> %s after a "
                                 "restart" % (it, rid, n, totals.get(rid)))
            got = totals.get(run_id, 0)
            kept[run_id] = got
            # Never more than churn did while this run was attached (no double counting).
            most = post[1] - pre[1] + BATCH_OBJS
            if got > most:
                fails.append("kill %d: run %d stored %d objects, churn did only %d meanwhile" % (
                    it, run_id, got, most))
            # Everything churn finished one flush interval (plus slack) before the kill.
            due = [h for h in hist if h[0] <= kill_at - FLUSH_MS / 1000 - SLACK_S]
            if due:
                want = due[-1][1] - p0[1] - BATCH_OBJS
                margin = got - want
                worst_margin = margin if worst_margin is None else min(worst_margin, margin)
                if got < want:
                    fails.append("kill %d: %d objects committed, want >= %d (done %.2f s before "
                                 "the kill)" % (it, got, want, kill_at - due[-1][0]))
            # How old the newest committed work was at the kill: the last progress point
            # the committed count covers.
            covered = [h for h in hist if h[1] - p0[1] <= got + BATCH_OBJS]
            if covered:
                worst_loss_ms = max(worst_loss_ms, (kill_at - covered[-1][0]) * 1000)
        t.log("ok: %d kill -9 (integrity ok each time, earlier runs' rows never rewritten), "
              "%d objects stored; worst margin over the one-flush-interval bound %s objects; "
              "newest committed work at most %.0f ms old at a kill (flush %d ms + %.0f ms slack)"
              % (a.kills, sum(kept.values()), worst_margin, worst_loss_ms, FLUSH_MS,
                 SLACK_S * 1000))
    finally:
        churn.kill()
        churn.wait()


def governor_memory(memprofd, db):
    """The newest run's governor memory record from `query status`, or None."""
    p = t.run([memprofd, "query", "status", "--db", db, "--format", "json"], timeout=30)
    if p.returncode != 0:
        return None
    runs = json.loads(p.stdout)
    g = runs[0].get("governor") if runs else None
    return g["memory"] if g else None


def query_loop(memprofd, db, stop, out):
    """Readers beside the writer; every 10th round also the daemon's own account of the
    memory it holds (query status), kept in out["mem"]."""
    while not stop.is_set():
        p = t.run([memprofd, "query", "contexts", "--db", db, "--format", "json",
                   "--limit", "5"], timeout=30)
        out["n"] += 1
        if p.returncode != 0:
            out["fail"].append(t.describe(p))
        if out["n"] % 10 == 1:
            m = governor_memory(memprofd, db)
            if m:
                out["mem"].append(m)
        stop.wait(0.5)


def phase_short_lived(a, tmp, fails):
    db, conf = tmp + "/sl.db", tmp + "/sl.conf"
    # A small page cache: it fills within seconds, so what follows is the steady state.
    with open(conf, "w") as f:
        f.write(config(db, exe_rule(a.short_lived), "cache_size = %s\n" % CACHE))
    d = start(a.memprofd, conf, tmp)
    stop, qout = threading.Event(), {"n": 0, "fail": [], "mem": []}
    qt = threading.Thread(target=query_loop, args=(a.memprofd, db, stop, qout))
    qt.start()
    n = int(a.rate * a.churn_seconds)
    pids, rss, running = [], [], set()
    devnull = os.open(os.devnull, os.O_RDWR)
    fa = [(os.POSIX_SPAWN_DUP2, devnull, 1)]
    t0 = time.monotonic()
    next_rss = t0
    try:
        for i in range(n):
            while True:
                now = time.monotonic()
                if now >= next_rss:
                    rss.append((now - t0, *rss_kib(d.p.pid)))
                    next_rss += 0.5
                for pid in list(running):
                    if os.waitpid(pid, os.WNOHANG)[0]:
                        running.discard(pid)
                wait = t0 + i / a.rate - now
                if wait <= 0:
                    break
                time.sleep(min(wait, 0.005))
            pid = os.posix_spawn(a.short_lived, [a.short_lived, "--count", "1", "--size",
                                                 str(SIZE_BASE + 2 * i), "--delay-ms",
                                                 str(a.delay_ms)], os.environ, file_actions=fa)
            pids.append(pid)
            running.add(pid)
        spawn_s = time.monotonic() - t0
        for pid in list(running):
            os.waitpid(pid, 0)
        time.sleep(2.5)     # two governor ticks: the record shows the processes gone
        rss.append((time.monotonic() - t0, *rss_kib(d.p.pid)))
        final_mem = governor_memory(a.memprofd, db)
    finally:
        stop.set()
        qt.join()
        os.close(devnull)
    d.p.send_signal(signal.SIGTERM)
    rc = d.p.wait(timeout=10)
    err = d.stderr()
    d.close()
    if rc != 0:
        fails.append("short-lived phase: daemon rc %s; stderr %s" % (rc, err))
    # Judged over the last half (warm-up: the page cache filling to cache_size, hash
    # tables reaching their size, the first /proc rescans; since each process's first
    # frame-pointer key is checked against a DWARF copy, libdwfl's transient mappings and
    # arenas settle over the first quarters); growth is the last quarter's median over
    # the third's, so a transient peak is not read as growth. Each quarter's slope reported.
    span = rss[-1][0]
    verdict = {}
    for i, what in ((1, "VmRSS"), (2, "RssAnon")):
        ser = [(s[0], s[i]) for s in rss]
        quarters = [slope([x for x in ser if q * span / 4 <= x[0] <= (q + 1) * span / 4])
                    for q in range(4)]
        steady = [x for x in ser if x[0] >= span / 2]
        third = sorted(v for tt, v in ser if span / 2 <= tt < 3 * span / 4)
        last = sorted(v for tt, v in ser if tt >= 3 * span / 4)
        verdict[what] = (slope(steady), last[len(last) // 2] - third[len(third) // 2])
        t.log("short-lived, daemon %s: %d -> %d KiB (max %d); slope per quarter %s KiB/s; "
              "%.2f KiB/s over the last half, %+d KiB last quarter's median over the third's" % (
                  what, ser[0][1], ser[-1][1], max(v for _, v in ser),
                  " ".join("%.2f" % q for q in quarters), verdict[what][0], verdict[what][1]))
    t.log("short-lived: %d processes in %.1f s (%.0f/s); anonymous memory growth after "
          "warm-up: %.1f bytes per process" % (n, spawn_s, n / spawn_s,
                                               verdict["RssAnon"][0] * 1024 / (n / spawn_s)))
    if a.rss_check and (verdict["RssAnon"][0] > a.max_slope_kib or
                        verdict["VmRSS"][1] > MAX_STEADY_GROWTH_KIB):
        fails.append("daemon memory grows under process churn: RssAnon %.2f KiB/s (limit "
                     "%.1f), VmRSS %+d KiB last quarter over third (limit %d): %r" % (
                         verdict["RssAnon"][0], a.max_slope_kib, verdict["VmRSS"][1],
                         MAX_STEADY_GROWTH_KIB, rss))
    # The daemon's own structures: exited processes are freed within a flush, the page
    # cache stays at cache_size, aggregates do not pile up.
    mem = qout["mem"] + ([final_mem] if final_mem else [])
    if not mem:
        fails.append("query status never showed the governor's memory record")
    else:
        most = {k: max(m[k] for m in mem) for k in ("processes", "aggregates", "cache_bytes")}
        t.log("daemon's account over %d samples: at most %d processes and %d aggregates held, "
              "page cache at most %d bytes; at the end %r" % (len(mem), most["processes"],
                                                             most["aggregates"],
                                                             most["cache_bytes"], final_mem))
        if most["processes"] > a.rate * 2 or most["cache_bytes"] > CACHE_BYTES + (64 << 10):
            fails.append("the daemon holds too much under churn: %r" % most)
        if not final_mem or final_mem["processes"] > 5:
            fails.append("exited processes not freed: %r at the end" % (final_mem,))
    if qout["fail"]:
        fails.append("memprofd query failed beside the writer: %s" % qout["fail"][0])
    else:
        t.log("ok: %d concurrent `memprofd query` runs all succeeded" % qout["n"])
    if t.integrity(db) != "ok":
        fails.append("short-lived DB integrity_check: " + t.integrity(db))
    con = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
    rows = con.execute("SELECT p.pid, p.comm, m.min_size, m.max_size, m.alloc_count FROM mib m "
                       "JOIN processes p ON p.id = m.process_id WHERE m.max_size >= ?",
                       (SIZE_BASE,)).fetchall()
    con.close()
    seen, wrong = set(), []
    for pid, comm, mn, mx, cnt in rows:
        i = (mn - SIZE_BASE) // 2
        if mn != mx or (mn - SIZE_BASE) % 2 or not 0 <= i < n or pids[i] != pid or cnt != 1 \
                or i in seen:
            wrong.append((pid, comm, mn, mx, cnt))
        seen.add(i)
    if wrong:
        fails.append("%d allocations attributed to the wrong process, e.g. %r" % (
            len(wrong), wrong[:5]))
    caught = len(seen) / n
    t.log("%s: %d of %d short-lived processes' allocations stored (%.1f%%), %d misattributed"
          % ("ok" if caught >= a.min_caught and not wrong else "FAIL", len(seen), n,
             100 * caught, len(wrong)))
    if caught < a.min_caught:
        fails.append("only %.1f%% of short-lived processes were profiled (want >= %.0f%%)" % (
            100 * caught, 100 * a.min_caught))


def fill(path):
    """Writes path until the file system is full. Unbuffered: a buffered file kept the
    part of a 64 KiB write that did not fit and raised ENOSPC again at its close (the
    traceback on the `with` line, in runs where the free space was no multiple of 64 KiB)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 65536)
    except OSError as e:
        if e.errno != errno.ENOSPC:
            raise
    finally:
        os.close(fd)


def phase_disk_full(a, tmp, fails):
    mnt = tmp + "/small"
    why = t.mount_tmpfs(mnt, "2m")
    if why:
        t.log("SKIP (phase 3): " + why)
        return
    try:
        db, conf = mnt + "/full.db", tmp + "/full.conf"
        with open(conf, "w") as f:
            f.write(config(db, exe_rule(a.churn), "memory_limit = 1M\ncheckpoint_interval = 1h\n"))
        churn = subprocess.Popen([a.churn, "--seconds", "60", "--pdeathsig", "1"])
        d = start(a.memprofd, conf, tmp)
        time.sleep(1.0)
        before = total_allocs(db)
        fill(mnt + "/filler")
        time.sleep(3.0)
        full_total = total_allocs(db)
        alive = d.p.poll() is None
        ig_full = t.integrity(db)
        os.unlink(mnt + "/filler")
        time.sleep(2.0)
        after = total_allocs(db)
        d.p.send_signal(signal.SIGTERM)
        rc = d.p.wait(timeout=10)
        churn.kill()
        churn.wait()
        err = d.stderr()
        d.close()
        ig = t.integrity(db)
        failed_flush = "flush:" in err and "will retry" in err
        t.log("disk full: stored %d before, %d while full, %d after recovery; flush failure "
              "logged: %s; 'writable again': %s; integrity while full %s, at the end %s" % (
                  before, full_total, after, failed_flush, "writable again" in err, ig_full, ig))
        if not alive:
            fails.append("daemon died on a full disk: %s" % err)
        if ig_full != "ok" or ig != "ok":
            fails.append("disk full: integrity_check %s / %s" % (ig_full, ig))
        if not failed_flush:
            fails.append("disk full: no failed flush was logged (the fill did not bite?): %s" % err)
        elif err.count("will retry, nothing is dropped") != 1:
            fails.append("disk full: the flush failure was not logged exactly once: %s" % err)
        if after <= full_total or "writable again" not in err:
            fails.append("disk full: no recovery once space returned (%d -> %d): %s" % (
                full_total, after, err))
        if rc != 0:
            fails.append("disk full: daemon rc %s at SIGTERM: %s" % (rc, err))
    finally:
        t.umount_lazy(mnt)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--churn", required=True)
    ap.add_argument("--short-lived", required=True)
    ap.add_argument("--kills", type=int, default=50)
    ap.add_argument("--slack-s", type=float, default=0.4,
                    help="commit latency allowed beyond one flush interval")
    ap.add_argument("--rate", type=float, default=200)
    ap.add_argument("--churn-seconds", type=float, default=60)
    # RssAnon: a leak of 50 bytes per process at 200/s is 10 KiB/s; malloc grows its heap
    # in steps of ~90-270 KiB, one of which in 45 s is ~5 KiB/s of least-squares slope.
    ap.add_argument("--max-slope-kib", type=float, default=10.0)
    ap.add_argument("--no-rss-check", dest="rss_check", action="store_false",
                    help="report the RSS slope without judging it (sanitizer builds, whose "
                         "allocator quarantines freed memory)")
    # The share caught is the share still alive when the daemon, woken by the exec,
    # gets the CPU: on 2 cores at load 10 the exec -> daemon lag was 46 ms median, 88 ms
    # p90 (daemon CPU 5%), and 16-55% were caught. The floor only makes sure the
    # attribution check saw enough processes (5% of 12000 is 600).
    ap.add_argument("--min-caught", type=float, default=0.05)
    ap.add_argument("--delay-ms", type=int, default=100,
                    help="short-lived processes wait this long after exec before allocating")
    ap.add_argument("--phases", default="kills,short-lived,disk-full")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--watchdog-s", type=float, default=0,
                    help="diagnose and fail a hang after this long (below meson's timeout)")
    a = ap.parse_args()
    if a.watchdog_s:
        t.watchdog(a.watchdog_s, "daemon under stress")
    globals()["SLACK_S"] = a.slack_s
    a.short_lived = os.path.abspath(a.short_lived)
    t.require_bpf()
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    random.seed(seed)
    t.log("seed %d" % seed)
    tmp = tempfile.mkdtemp(prefix="check_daemon_stress.")
    fails = []
    for name, fn in (("kills", lambda: phase_kills(a, tmp, fails)),
                     ("short-lived", lambda: phase_short_lived(a, tmp, fails)),
                     ("disk-full", lambda: phase_disk_full(a, tmp, fails))):
        if name not in a.phases.split(","):
            continue
        t0 = time.monotonic()
        try:
            fn()
        except AssertionError as e:
            fails.append("%s: %s" % (name, e))
        except subprocess.TimeoutExpired as e:
            fails.append("%s: %s" % (name, e))
        finally:
            for p in LIVE:
                if p.poll() is None:
                    fails.append("%s: a daemon (pid %d) still ran at the phase's end" % (name, p.pid))
                    p.kill()
                    p.wait()
        t.log("phase %s: %.1f s" % (name, time.monotonic() - t0))
    t.finish(fails, "daemon under stress", tmp)


if __name__ == "__main__":
    sys.exit(main())
