#!/usr/bin/env python3
"""record arms the sampler's in-process watches in the processes it records, and only
there (issue 15). While `memprofd record -- sh -c 'short_watch ...; true'` runs (the
default mode, soft samples at 1 Hz), a copy of short_watch outside the recording
preloads the same sampler file:
- the recorded short_watch (a child sh forked, then exec'd) armed watches: a forked
  child of a linked process gets a memprofd:watch link of its own (sh's link, filtered
  on sh, does not reach the child's new address space);
- the unrelated copy armed none: its memprofd:watch semaphore stayed 0;
- a child short_watch forks without exec (--fork-after-ms: after its parent's link was
  made) has its watches reported: its contexts carry watch hits.
On a build that attaches memprofd:watch host-wide (pid -1) the unrelated copy arms
watches and this fails; without per-fork links the exec'd child arms none, and the
forked child arms ~50 (its inherited semaphore) whose reports the parent's link drops
(the BPF link filters on the parent's thread group): no watch hits. Skips (77) where BPF
or the breakpoint PMU is missing."""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpdtest as t  # noqa: E402

SECONDS = "2"


def armed(out):
    try:
        return json.loads(out.strip().splitlines()[-1])["watches_armed"]
    except (ValueError, IndexError, KeyError, AttributeError):
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--workload", required=True, help="tests/workloads/short_watch")
    ap.add_argument("--sampler", required=True)
    a = ap.parse_args()
    t.require_bpf()
    t.require_breakpoints()
    d = tempfile.mkdtemp(prefix="check_record_watch_targets.")
    other, out = d + "/other_watch", d + "/recorded.out"
    shutil.copy(a.workload, other)
    env = dict(os.environ, MEMPROFD_SAMPLE_BYTES="16384", MEMPROFD_SAMPLER=a.sampler)
    fails = []
    # The unrelated copy runs longer than the recording, from before it starts to after.
    oth = subprocess.Popen([other, "--seconds", str(int(SECONDS) + 2), "--life-us", "800"],
                           env=dict(env, LD_PRELOAD=os.path.abspath(a.sampler)),
                           stdout=subprocess.PIPE, text=True)
    try:
        p = t.record(a.memprofd, d + "/m.db",
                     ["sh", "-c", '"$0" --seconds %s --life-us 800 > "$1"; true' % SECONDS,
                      a.workload, out],
                     extra=("--freq", "1"), alloc="sampled", env=env, timeout=90)
        o_out = oth.communicate(timeout=60)[0]
    except subprocess.TimeoutExpired as e:
        oth.kill()
        t.finish([str(e)], "record arms in-process watches in its targets only", d)
    if p.returncode != 0:
        fails.append("record failed: " + t.describe(p))
    with open(out) as f:
        n_rec = armed(f.read())
    n_other = armed(o_out)
    t.log("watches armed: recorded child %r, unrelated process %r" % (n_rec, n_other))
    t.log("\n".join(l for l in p.stderr.splitlines() if "watch" in l))
    db2 = d + "/fork.db"
    p2 = t.record(a.memprofd, db2, [a.workload, "--seconds", SECONDS, "--life-us", "800",
                                   "--fork-after-ms", "200"],
                  extra=("--freq", "1"), alloc="sampled", env=env, timeout=90)
    if p2.returncode != 0:
        fails.append("record of the forking short_watch failed: " + t.describe(p2))
    hits = sum(c.get("watch_hits", 0) for c in t.query_contexts(a.memprofd, db2))
    t.log("forked child (no exec): armed %r, watch hits in its contexts %d"
          % (armed(p2.stdout), hits))
    if not hits:
        fails.append("the forked child's watches were not reported (no watch hits)")
    if n_rec is None or n_other is None:
        fails.append("short_watch did not report its sampler's watches")
    else:
        if n_rec < 4:
            fails.append("the recorded (forked, exec'd) child armed %d in-process watches" % n_rec)
        if n_other != 0:
            fails.append("a process outside the recording armed %d watches" % n_other)
    t.finish(fails, "record arms in-process watches in its targets only", d)


if __name__ == "__main__":
    main()
