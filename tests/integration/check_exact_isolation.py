#!/usr/bin/env python3
"""Exact mode's probes trap only their targets (issue 18): while `memprofd record --alloc
exact` records a command (which allocates 10 blocks at blip_site after a pause, all
recorded; it waits for the loop to finish first), an untraced malloc/free loop beside it (bench/malloc_loop, thread CPU time
per iteration, which a uprobe's trap would multiply ~50x) stays within noise of its bare
speed: at most RATIO times, measured just before and during the recording (best of
RUNS each), against the slower of its bare speeds just before and just after (a noisy
neighbour slowed the whole VM for seconds in one clean-clone ASan run: 1.72x and 2.01x
with nothing of ours beside it, 0.97-1.05x in 5 runs right after; a trap per call is
~50x either way). The same for `record --pid` of a running process whose child allocates: the
probes are that process's and its children's alone (they trapped every process mapping
its libc before), the child's 10 allocations are all recorded (a call left open across
its exec made them count as nested in ~1 run of 5), and the target's libc frames, read
through its /proc/PID/root, are named after it exited. Skips (77) where BPF cannot work."""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpdtest as t  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from overhead import private_libc  # noqa: E402

RATIO = 4.0          # a trap per call costs 25-50x here; a busy SMT sibling (2 vCPUs of one
                     # core) slowed the loop 1.66x beside a fuzzer and 2.05x in a clean-clone
                     # ASan run, with nothing trapping it
RUNS = 3
ITERS = "300000"


def loop_ns(pre, loop):
    best = None
    for _ in range(RUNS):
        out = subprocess.run(pre + [loop, "--iters", ITERS], capture_output=True, text=True).stdout
        m = re.search(r"cpu ([0-9.]+) ns/iter", out)
        if not m:
            raise AssertionError("malloc_loop printed %r" % out)
        v = float(m.group(1))
        best = v if best is None else min(best, v)
    return best


def check_pid(a, d, pre, bare, fails):
    """record --pid of a shell that waits on a FIFO, then runs blip in a child."""
    db, fifo = d + "/pid.db", d + "/gate"
    os.mkfifo(fifo)
    # The child sleeps first: probes reach a child when its fork record is read (0.3 s
    # was too short once in 3 runs at load ~14: record read the fork record later).
    target = subprocess.Popen(pre + ["sh", "-c", 'read x < "$1"; sh -c "sleep 1; exec $0 '
                                     '--count 10 --ms 1"; exit 0', os.path.abspath(a.blip), fifo])
    time.sleep(0.3)   # the target runs its shell, with the copy of libc mapped
    rec = subprocess.Popen(pre + [a.memprofd, "record", "--alloc", "exact", "--access", "off",
                                  "--db", db, "--pid", str(target.pid)],
                           stderr=subprocess.PIPE, text=True)
    end = time.monotonic() + 30
    while time.monotonic() < end and rec.poll() is None and not t.run_started(db):
        time.sleep(0.05)
    during = loop_ns(pre, a.loop)
    alive = rec.poll() is None
    with open(fifo, "w") as f:
        f.write("go\n")
    target.wait(timeout=30)
    err = rec.communicate(timeout=60)[1]
    bare = max(bare, loop_ns(pre, a.loop))
    t.log("malloc_loop beside record --alloc exact --pid: %.1f ns/iter (%.2fx)" %
          (during, during / bare))
    if rec.returncode != 0:
        fails.append("record --pid: rc %d: %s" % (rec.returncode, err))
    if not alive:
        fails.append("record --pid ended before the loop ran beside it: %s" % err)
    if during > RATIO * bare:
        fails.append("an untraced loop ran %.2fx slower beside record --pid (bound %.1fx): "
                     "its probes trap other processes" % (during / bare, RATIO))
    ctxs = t.query_contexts(a.memprofd, db)
    n = sum(c["alloc_count"] for c in ctxs if any(f.get("function") == "blip_site" for f in c["frames"]))
    if n != 10:
        fails.append("record --pid: the target's child's blip_site: %d allocations, want 10 "
                     "(record said: %s)" % (n, err.strip()))
    else:
        t.log("ok: record --pid: the target's child's 10 blip_site allocations recorded")
    # The target's libc is named through /proc/PID/root (another mount namespace), a path
    # gone once it exits, before record names its frames: they were all left unnamed.
    libc = [f for c in ctxs for f in c["frames"] if re.search(r"/libc\.so", f.get("module") or "")]
    named = sorted({f["function"] for f in libc if f.get("function")})
    if not named:
        fails.append("record --pid: none of the %d libc frames named (the target's libc is "
                     "read through its root, gone once it exits)" % len(libc))
    else:
        t.log("ok: record --pid: libc frames named: %s" % ", ".join(named))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--blip", required=True)
    ap.add_argument("--loop", required=True)
    a = ap.parse_args()
    t.require_bpf()
    d = tempfile.mkdtemp(prefix="check_exact_isolation.")
    db, fails = d + "/x.db", []
    # The loop and the recording both see one copy of libc at the system's path (a private
    # mount namespace each): other sessions' exact-mode recordings, with uprobes on the
    # real file, trap neither, while a recording that probed "the system's libc" by path
    # would trap the loop.
    pre = private_libc(d, a.loop)
    bare = loop_ns(pre, a.loop)
    gate = d + "/go"
    # The command waits for the loop to be done beside it, then allocates.
    cmd = pre + [a.memprofd, "record", "--alloc", "exact", "--access", "off", "--db", db, "--",
           "sh", "-c", 'while [ ! -e "$1" ]; do sleep 0.1; done; exec "$0" --count 10 --ms 1',
           os.path.abspath(a.blip), gate]
    rec = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    # The run's row is written once the probes are attached and the command released.
    end = time.monotonic() + 30
    while time.monotonic() < end and rec.poll() is None and not t.run_started(db):
        time.sleep(0.05)
    during = loop_ns(pre, a.loop)
    alive = rec.poll() is None
    open(gate, "w").close()
    err = rec.communicate(timeout=60)[1]
    after = loop_ns(pre, a.loop)
    t.log("malloc_loop beside nothing: %.1f ns/iter before, %.1f after; beside record --alloc "
          "exact: %.1f ns/iter (%.2fx the slower)" % (bare, after, during, during / max(bare, after)))
    bare = max(bare, after)
    if rec.returncode != 0:
        fails.append("record: rc %d: %s" % (rec.returncode, err))
    if not alive:
        fails.append("the recording ended before the loop ran beside it")
    if during > RATIO * bare:
        fails.append("an untraced loop ran %.2fx slower beside the recording (bound %.1fx): "
                     "the recording's probes trap other processes" % (during / bare, RATIO))
    ctxs = t.query_contexts(a.memprofd, db)
    n = sum(c["alloc_count"] for c in ctxs if any(f.get("function") == "blip_site" for f in c["frames"]))
    if n != 10:
        fails.append("the recorded command's blip_site: %d allocations, want 10" % n)
    check_pid(a, d, pre, bare, fails)
    t.finish(fails, "exact mode traps only its targets", d)


if __name__ == "__main__":
    main()
