#!/usr/bin/env python3
"""The daemon's first flush, whose stacks are symbolized cold, commits its rows within one
flush interval plus slack (the names follow in a transaction of their own), on real BPF:
1. --kills fresh daemons (each one's first look into libc6-dbg's DWARF is cold) watch a
   churn target and are killed -9 FLUSH_MS + --slack-s + KILL_EXTRA_S after churn starts
   allocating: everything churn did FLUSH_MS + --slack-s before the kill is committed, and
   integrity_check is ok. The first commit's latency (polled) is printed.
2. The same for a copy of Debian's python3.11, whose debug file the daemon asks a
   debuginfod for (DEBUGINFOD_URLS: a server in this test that answers 404 after
   DEBUGINFOD_DELAY_S, a slow network): rows committed within the same bound; killed once
   the server saw a lookup (none seen: failed, the check would prove nothing).
3. A daemon stopped by SIGTERM right after its first flush: every frame of churn's
   contexts is named, churn.c's frames have lines, and libc's (with libc6-dbg installed)
   have files, as when symbolization ran inside the flush.
Skips (77) without BPF."""
import argparse
import http.server
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpdtest as t  # noqa: E402
from check_daemon_stress import (BATCH_OBJS, FLUSH_MS, config, exe_rule, read_progress,  # noqa: E402
                                 start, total_allocs, wait_progress)

KILL_EXTRA_S = 0.3       # run past the bound, so the bound is judged on a flushed point
POLL_S = 0.02
DEBUGINFOD_DELAY_S = 4.0  # each lookup's wait: far beyond the bound judged
LOOKUP_WAIT_S = 3.0       # after go, for the daemon's first lookup (then killed)
PY = "/usr/bin/python3.11"
PY_LOOP = ("import os, sys, time, json\n"
           "while not os.path.exists(sys.argv[1]): time.sleep(0.01)\n"
           "keep = []\n"
           "for n in range(10 ** 7):\n"
           "    keep.append(bytearray(4096 + n % 64 * 16)); json.dumps({'a': [n, str(n)]})\n"
           "    if len(keep) > 50: keep.clear()\n")


class SlowDebuginfod(http.server.BaseHTTPRequestHandler):
    hits = 0

    def do_GET(self):
        SlowDebuginfod.hits += 1
        time.sleep(DEBUGINFOD_DELAY_S)
        self.send_error(404)

    def log_message(self, *args):
        pass


def libc_debug():
    """libc6-dbg's file for this libc, or None."""
    bid = t.elf_build_id(os.path.realpath("/lib/x86_64-linux-gnu/libc.so.6")) or ""
    p = "/usr/lib/debug/.build-id/%s/%s.debug" % (bid[:2], bid[2:])
    return p if bid and os.path.exists(p) else None


def churn_start(a, tmp, name):
    prog, gate = "%s/%s.progress" % (tmp, name), "%s/%s.go" % (tmp, name)
    churn = subprocess.Popen([a.churn, "--seconds", "30", "--pdeathsig", "1",
                              "--progress", prog, "--wait-file", gate])
    time.sleep(0.2)   # running (waiting) before the daemon's first scan
    return churn, prog, gate


def one_kill(a, tmp, it, fails):
    db, conf = "%s/kill%d.db" % (tmp, it), "%s/kill%d.conf" % (tmp, it)
    with open(conf, "w") as f:
        f.write(config(db, exe_rule(a.churn)))
    churn, prog, gate = churn_start(a, tmp, "kill%d" % it)
    try:
        d = start(a.memprofd, conf, tmp)
        open(gate, "w").close()
        wait_progress(prog)
        p0 = read_progress(prog)
        go = time.monotonic()
        kill_at = go + FLUSH_MS / 1000 + a.slack_s + KILL_EXTRA_S
        hist, first = [], None
        while time.monotonic() < kill_at:
            hist.append(read_progress(prog))
            if first is None and total_allocs(db) > 0:
                first = time.monotonic() - go
            time.sleep(POLL_S)
        kill_at = time.monotonic()
        d.p.send_signal(signal.SIGKILL)
        d.kill()
    finally:
        churn.kill()
        churn.wait()
    ig, got = t.integrity(db), total_allocs(db)
    due = [h for h in hist if h[0] <= kill_at - FLUSH_MS / 1000 - a.slack_s]
    want = due[-1][1] - p0[1] - BATCH_OBJS if due else 0
    t.log("kill %d: first rows committed %s after churn started; %d objects committed at "
          "the kill, want >= %d (churn's count %.2f s before it)" % (
              it, "%.0f ms" % (first * 1000) if first is not None else "never", got, want,
              FLUSH_MS / 1000 + a.slack_s))
    if ig != "ok":
        fails.append("kill %d: integrity_check: %s" % (it, ig))
    if got < want or got == 0:
        fails.append("kill %d: %d objects committed, want >= %d (and > 0): the first flush "
                     "took longer than %d ms + %.0f ms" % (it, got, want, FLUSH_MS,
                                                          a.slack_s * 1000))


def first_commit(db, go, until):
    """Seconds from go to the first committed allocation, polled until `until`, or None."""
    while time.monotonic() < until:
        if total_allocs(db) > 0:
            return time.monotonic() - go
        time.sleep(POLL_S)
    return None


def slow_debuginfod(a, tmp, fails):
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), SlowDebuginfod)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    py = tmp + "/python3.11"
    shutil.copy2(PY, py)   # the rule names this copy only: no other python3 on the host
    saved = dict(os.environ)
    os.environ.update(DEBUGINFOD_URLS="http://127.0.0.1:%d" % srv.server_address[1],
                      DEBUGINFOD_CACHE_PATH=tmp + "/debuginfod-cache", DEBUGINFOD_TIMEOUT="30")
    try:
        for it in range(2):
            db, conf, gate = "%s/py%d.db" % (tmp, it), "%s/py%d.conf" % (tmp, it), "%s/py%d.go" % (tmp, it)
            with open(conf, "w") as f:
                f.write(config(db, exe_rule(py)))
            shutil.rmtree(tmp + "/debuginfod-cache", ignore_errors=True)   # cold each time
            target = subprocess.Popen([py, "-c", PY_LOOP, gate], env=dict(saved, PYTHONHOME="/usr"))
            try:
                time.sleep(0.3)
                hits0 = SlowDebuginfod.hits
                d = start(a.memprofd, conf, tmp)
                open(gate, "w").close()
                go = time.monotonic()
                bound = FLUSH_MS / 1000 + a.slack_s
                first = first_commit(db, go, go + bound)
                late = None   # past the bound: when the first rows came after all
                # Killed while a lookup is pending (none can end before go + 4 s).
                while SlowDebuginfod.hits == hits0 and time.monotonic() < go + LOOKUP_WAIT_S:
                    if first is None and late is None and total_allocs(db) > 0:
                        late = time.monotonic() - go
                    time.sleep(POLL_S)
                d.p.send_signal(signal.SIGKILL)
                d.kill()
            finally:
                target.kill()
                target.wait()
            ig, got, hits = t.integrity(db), total_allocs(db), SlowDebuginfod.hits - hits0
            when = ("%.0f ms" % (first * 1000) if first is not None else
                    "%.0f ms (past the bound)" % (late * 1000) if late is not None else
                    "not before the kill")
            t.log("python3 (debuginfod answers after %.0f s): first rows committed %s after it "
                  "started; %d allocations committed at the kill; %d debuginfod lookups" % (
                      DEBUGINFOD_DELAY_S, when, got, hits))
            if ig != "ok":
                fails.append("python3 %d: integrity_check: %s" % (it, ig))
            if first is None:
                fails.append("python3 %d: nothing committed within %d ms + %.0f ms: the flush "
                             "waited on symbolization" % (it, FLUSH_MS, a.slack_s * 1000))
            if not hits:
                fails.append("python3 %d: the daemon never asked debuginfod (the check proves "
                             "nothing)" % it)
    finally:
        os.environ.clear()
        os.environ.update(saved)
        srv.shutdown()


def clean_stop(a, tmp, fails):
    db, conf = tmp + "/stop.db", tmp + "/stop.conf"
    with open(conf, "w") as f:
        f.write(config(db, exe_rule(a.churn)))
    churn, prog, gate = churn_start(a, tmp, "stop")
    try:
        d = start(a.memprofd, conf, tmp)
        open(gate, "w").close()
        wait_progress(prog)
        time.sleep(FLUSH_MS / 1000 + 0.05)
        d.p.send_signal(signal.SIGTERM)
        rc = d.p.wait(timeout=20)
        err = d.stderr()
        d.close()
    finally:
        churn.kill()
        churn.wait()
    if rc != 0:
        fails.append("clean stop: daemon rc %s: %s" % (rc, err))
        return
    ctxs = [c for c in t.query_contexts(a.memprofd, db) if c["binary"].endswith("/churn")]
    dbg = libc_debug()
    frames = [f for c in ctxs for f in c["frames"]]
    bare = [f for f in frames if not f.get("function")]
    own = [f for f in frames if f.get("module", "").endswith("/churn")]
    libc = [f for f in frames if "libc.so" in f.get("module", "")]
    t.log("clean stop: %d contexts, %d frames (%d of churn, %d of libc), %d unnamed; "
          "libc6-dbg: %s" % (len(ctxs), len(frames), len(own), len(libc), len(bare), dbg))
    if not ctxs or not own:
        fails.append("clean stop: no churn contexts/frames stored: %s" % err)
    if bare:
        fails.append("clean stop: %d frames left unnamed, e.g. %s" % (len(bare), bare[0]))
    if [f for f in own if not f.get("file") or not f.get("line")]:
        fails.append("clean stop: churn.c frames without lines: %s" % own)
    if dbg and (not libc or [f for f in libc if not f.get("file")]):
        fails.append("clean stop: libc frames without files (libc6-dbg at %s): %s" % (dbg, libc))
    elif not dbg:
        t.log("note: libc6-dbg is not installed: libc's lines not checked")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--churn", required=True)
    ap.add_argument("--kills", type=int, default=3)
    ap.add_argument("--slack-s", type=float, default=0.4,
                    help="commit latency allowed beyond one flush interval")
    a = ap.parse_args()
    t.require_bpf()
    tmp = tempfile.mkdtemp(prefix="check_daemon_first_flush.")
    fails = []
    for it in range(a.kills):
        one_kill(a, tmp, it, fails)
    slow_debuginfod(a, tmp, fails)
    clean_stop(a, tmp, fails)
    t.finish(fails, "daemon first flush: rows before names", tmp)


if __name__ == "__main__":
    sys.exit(main())
