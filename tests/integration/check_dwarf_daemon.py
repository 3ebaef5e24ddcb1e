#!/usr/bin/env python3
"""The daemon on Debian binaries built without frame pointers (issue 16): copies of
/usr/bin/python3.11 and /usr/bin/sqlite3 (the same files, under a path that only this
test runs, so the [target] rules select no other process on the host) and the
inline_sites workload, traced by `memprofd daemon` in its default mode (alloc = sampled,
the sampler preloaded). The daemon must put
>= 90% of each program's bytes in contexts >= 5 frames deep that reach main (their
stack holds __libc_start_call_main), name every frame's module, and symbolize as record
does: libc frames carry file:line (libc6-dbg), inline_sites' leaf an inline chain."""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpdtest as t  # noqa: E402
from check_daemon import Notify  # noqa: E402

PY_PROG = "d = {}\nfor i in range(200000): d[i] = [i] * 10\n"
SQL = ("create table t(a, b); with recursive c(x) as (select 1 union all select x + 1 "
       "from c where x < 100000) insert into t select x, printf('%0100d', x) from c; "
       "create index ti on t(b); select count(*) from t;")
MIN_DEPTH, MIN_SHARE, MAIN_CALLER = 5, 0.90, "__libc_start_call_main"
SAMPLE_BYTES = 65536      # python3 and sqlite3: hundreds of samples each
INLINE_SAMPLE_BYTES = 64  # inline_sites allocates 25 x 96 bytes: every one sampled


def config(db, exes):
    rules = "".join("[target t%d]\nexe = %s\n" % (i, e) for i, e in enumerate(exes))
    return ("[store]\ndb = %s\nflush_interval = 200ms\nretention = 1d\ncompact = off\n"
            "[sampling]\nalloc = sampled\nsample_bytes = %d\naccess = off\n"
            "[targets]\nrescan_interval = 1s\n%s"
            % (db, SAMPLE_BYTES, rules))


def check_program(memprofd, db, exe, errs):
    ctxs = [c for c in t.query_contexts(memprofd, db) if c["binary"] == exe]
    total = sum(c["total_size"] for c in ctxs)
    good = sum(c["total_size"] for c in ctxs if len(c["frames"]) >= MIN_DEPTH and
               any(f["function"] == MAIN_CALLER for f in c["frames"]))
    share = good / total if total else 0
    t.log("%s: %d contexts, %.1f%% of %d bytes in contexts >= %d frames reaching main" %
          (os.path.basename(exe), len(ctxs), 100 * share, total, MIN_DEPTH))
    if share < MIN_SHARE:
        errs.append("%s: %.1f%% of bytes in whole stacks (want >= %d%%)" %
                    (exe, 100 * share, 100 * MIN_SHARE))
    if any(not f["module"] for c in ctxs for f in c["frames"]):
        errs.append("%s: a frame names no module" % exe)
    return ctxs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--inline-sites", required=True)
    ap.add_argument("--sampler", required=True)
    a = ap.parse_args()
    t.require_bpf()
    for prog in ("/usr/bin/python3.11", "/usr/bin/sqlite3"):
        if not os.access(prog, os.X_OK):
            t.skip(prog + " is not installed (deploy/bootstrap.sh installs it)")
    d = tempfile.mkdtemp(prefix="mpd-dwarf-daemon-")
    py, sq, inl = d + "/python3.11", d + "/sqlite3", d + "/inline_sites"
    for src, dst in (("/usr/bin/python3.11", py), ("/usr/bin/sqlite3", sq), (a.inline_sites, inl)):
        shutil.copy2(src, dst)
    db, conf, sockp = d + "/m.db", d + "/m.conf", d + "/notify.sock"
    with open(conf, "w") as f:
        f.write(config(db, [py, sq, inl]))
    notify = Notify(sockp)
    env = dict(os.environ, NOTIFY_SOCKET=sockp)
    env.pop("WATCHDOG_USEC", None)
    dmn = subprocess.Popen([a.memprofd, "daemon", "--config", conf], env=env,
                           stderr=subprocess.PIPE, text=True)
    errs = []
    try:
        notify.ready(dmn, 20)
        notify.drain()
        sampler = os.path.abspath(a.sampler)
        env = dict(os.environ, LD_PRELOAD=sampler, MEMPROFD_SAMPLE_BYTES=str(SAMPLE_BYTES),
                   PYTHONHOME="/usr")   # the python3 copy finds Debian's standard library
        for argv in ([py, "-c", PY_PROG], [sq, ":memory:", SQL]):
            p = t.run(argv, timeout=60, env=env)
            if p.returncode != 0:
                errs.append("%s failed: %s" % (argv[0], t.describe(p)))
        # inline_sites ends in microseconds, before the daemon could add it: it is exec'd
        # by a python3 that the daemon has recorded already (a target: it stays one).
        gate = d + "/go"
        exec_inl = ("import os, time\nwhile not os.path.exists(%r): time.sleep(0.05)\n"
                    "os.execve(%r, [%r], dict(os.environ, MEMPROFD_SAMPLE_BYTES='%d'))\n" %
                    (gate, inl, inl, INLINE_SAMPLE_BYTES))
        parent = subprocess.Popen([py, "-c", exec_inl], env=env)
        end = time.monotonic() + 30
        while time.monotonic() < end and not any(
                p.get("pid") == parent.pid for p in t.json.loads(t.run(
                    [a.memprofd, "query", "processes", "--db", db, "--format", "json"]).stdout
                    or "[]")):
            time.sleep(0.3)
        open(gate, "w").close()
        if parent.wait(timeout=60) != 0:
            errs.append("inline_sites (exec'd by python3) failed: %s" % parent.returncode)
        time.sleep(1.5)   # several flush intervals
    finally:
        dmn.send_signal(signal.SIGTERM)
        err = dmn.communicate(timeout=30)[1]
    if dmn.returncode != 0:
        errs.append("daemon exit %s: %s" % (dmn.returncode, err.strip()[-400:]))
    a_ = check_program(a.memprofd, db, py, errs)
    check_program(a.memprofd, db, sq, errs)
    libc = [f for c in a_ for f in c["frames"] if (f["module"] or "").endswith("/libc.so.6")
            and f["function"] == MAIN_CALLER]
    if not libc or not all(f["file"] and f["line"] for f in libc):
        errs.append("daemon: libc's %s frames have no file:line: %s" % (MAIN_CALLER, libc[:1]))
    inl_ctx = [c for c in t.query_contexts(a.memprofd, db) if c["binary"] == inl]
    if not any(f["inlined"] and f["file"] and f["line"] for c in inl_ctx for f in c["frames"]):
        errs.append("daemon: inline_sites has no inlined frame with file:line: %s" %
                    [[(f["function"], f["inlined"], f["line"]) for f in c["frames"]]
                     for c in inl_ctx[:2]])
    t.finish(errs, "daemon: whole, symbolized stacks on python3, sqlite3 and inline_sites", d)


if __name__ == "__main__":
    main()
