#!/usr/bin/env python3
"""`memprofd record --pid` in the default sampled mode follows the target's children
(issue 18): the sampler's probes are filtered to the target's pid, so a child it forks
(no exec) needs links of its own, made when its fork record is read. The target is
short_watch with the sampler preloaded (MEMPROFD_SAMPLE_BYTES=1: every allocation is
sampled), held at a FIFO until record has started; then it forks and only the child
allocates, one alloc_brief_hot and one alloc_brief_cold object a round, for --seconds.
Asserts each of the two contexts holds >= BOUND of the child's rounds (what the child
allocates before its links exist is not seen: tens of ms), and record exits 0. Without
the children's links it recorded no context at all. Skips (77) where BPF cannot work."""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpdtest as t  # noqa: E402

BOUND = 0.8
SECONDS = "2"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--workload", required=True)
    ap.add_argument("--sampler", required=True)
    a = ap.parse_args()
    t.require_bpf()
    tmp = tempfile.mkdtemp(prefix="check_sampled_pid_children.")
    db, fifo = os.path.join(tmp, "pid.db"), os.path.join(tmp, "gate")
    os.mkfifo(fifo)
    fails = []
    env = dict(os.environ, MEMPROFD_SAMPLE_BYTES="1", LD_PRELOAD=os.path.abspath(a.sampler))
    target = subprocess.Popen([a.workload, "--gate", fifo, "--fork-after-ms", "0",
                               "--seconds", SECONDS, "--life-us", "200"],
                              env=env, stdout=subprocess.PIPE, text=True)
    time.sleep(0.2)   # the target has mapped the sampler and waits at the gate
    rec = subprocess.Popen([a.memprofd, "record", "--db", db, "--pid", str(target.pid),
                            "--duration", "30"], stderr=subprocess.PIPE, text=True)
    end = time.monotonic() + 30
    while time.monotonic() < end and rec.poll() is None and not t.run_started(db):
        time.sleep(0.05)
    alive = rec.poll() is None
    with open(fifo, "w") as f:
        f.write("go\n")
    out = target.communicate(timeout=60)[0]
    err = rec.communicate(timeout=60)[1]
    if not alive:
        t.finish(["record --pid ended before the target was released: rc %s: %s"
                  % (rec.returncode, err)], "record --pid follows the sampler's children", tmp)
    if rec.returncode != 0:
        fails.append("record --pid: rc %d: %s" % (rec.returncode, err))
    try:
        rounds = json.loads(out.strip().splitlines()[-1])["rounds"]
    except (ValueError, IndexError, KeyError):
        t.finish(["short_watch printed %r" % out], "record --pid follows the sampler's children",
                 tmp)
    ctxs = t.query_contexts(a.memprofd, db)
    for fn in ("alloc_brief_hot", "alloc_brief_cold"):
        n = sum(c["alloc_count"] for c in ctxs
                if any(f.get("function") == fn for f in c.get("frames", [])))
        t.log("%s: %d of the child's %d rounds recorded" % (fn, n, rounds))
        if n < BOUND * rounds or n > rounds:
            fails.append("%s: %d allocations recorded of the child's %d (want >= %.0f%%)"
                         % (fn, n, rounds, BOUND * 100))
    t.finish(fails, "record --pid follows the sampler's children", tmp)


if __name__ == "__main__":
    main()
