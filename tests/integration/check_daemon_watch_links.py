#!/usr/bin/env python3
"""The daemon arms the sampler's in-process watches in the processes its rules select,
and only there (issue 15). Two copies of short_watch (sampler preloaded, a sample every
16 KiB), one under a path the rules select and one under a path they do not, run at the
same time under a daemon (alloc = sampled, access = soft at 1 Hz, so that the soft
source cannot give the contexts their evidence):
- the selected copy's sampler armed watches (its own count, memprofd_sampler_get_stats),
  and its contexts in the store carry watch evidence (watch_hits: the daemon's own
  windows watch these 0.8 ms objects for ~20 ms in all, and trap on none of them);
- the other copy's sampler armed none: its memprofd:watch semaphore stayed 0 although
  the same sampler file is probed for the selected one.
The selected copy does its work in a child it forks without exec 300 ms in (after its
own link was made): the child gets a link of its own (wlinks_add_child), so its watches
are reported; without it the child arms watches through its copy of the parent's
semaphore and the parent's link drops their reports (no watch evidence: this fails; the
daemon's /proc walk would link the child later, so it runs at rescan_interval = 1h).
Without the daemon's per-process memprofd:watch links the selected copy arms none and
this fails. Skips (77) where BPF or the breakpoint PMU is missing."""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpdtest as t  # noqa: E402
from check_daemon import Notify  # noqa: E402

SECONDS = "2"


def config(db, exe):
    return ("[store]\ndb = %s\nflush_interval = 200ms\nretention = 1d\ncompact = off\n"
            "[sampling]\nalloc = sampled\naccess = soft\naccess_freq = 1\n"
            "[governor]\ninterval = 1s\ncpu_budget = 6400%%\n"
            "[targets]\nrescan_interval = 1h\n[target w]\nexe = %s\n" % (db, exe))


def armed(out):
    try:
        return json.loads(out.strip().splitlines()[-1])["watches_armed"]
    except (ValueError, IndexError, KeyError):
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--workload", required=True, help="tests/workloads/short_watch")
    ap.add_argument("--sampler", required=True)
    a = ap.parse_args()
    t.require_bpf()
    t.require_breakpoints()
    d = tempfile.mkdtemp(prefix="check_daemon_watch_links.")
    sel, other = d + "/selected_watch", d + "/other_watch"
    shutil.copy(a.workload, sel)
    shutil.copy(a.workload, other)
    db, conf = d + "/m.db", d + "/m.conf"
    with open(conf, "w") as f:
        f.write(config(db, sel))
    fails = []
    notify = Notify(d + "/notify.sock")
    dmn = subprocess.Popen([a.memprofd, "daemon", "--config", conf],
                           env=dict(os.environ, NOTIFY_SOCKET=d + "/notify.sock"),
                           stderr=subprocess.PIPE, text=True)
    env = dict(os.environ, LD_PRELOAD=os.path.abspath(a.sampler), MEMPROFD_SAMPLE_BYTES="16384")
    try:
        notify.ready(dmn, 30)
        runs = [subprocess.Popen([exe, "--seconds", SECONDS, "--life-us", "800"] +
                                 (["--fork-after-ms", "300"] if exe == sel else []), env=env,
                                 stdout=subprocess.PIPE, text=True) for exe in (sel, other)]
        outs = [p.communicate(timeout=60)[0] for p in runs]
        n_sel, n_other = armed(outs[0]), armed(outs[1])
        t.log("watches armed: selected %r, not selected %r" % (n_sel, n_other))
        if n_sel is None or n_other is None:
            fails.append("short_watch did not report its sampler's watches: %r" % outs)
        else:
            if n_sel < 4:
                fails.append("the selected process armed %d in-process watches" % n_sel)
            if n_other != 0:
                fails.append("the process the rules did not select armed %d watches" % n_other)
    except (AssertionError, subprocess.TimeoutExpired) as e:
        fails.append(str(e))
    finally:
        dmn.terminate()
        try:
            _, err = dmn.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            dmn.kill()
            _, err = dmn.communicate()
    if dmn.returncode != 0:
        fails.append("daemon exited %r: %s" % (dmn.returncode, err[-2000:]))
    else:
        ctxs = [c for c in t.query_contexts(a.memprofd, db)
                if c.get("binary", "").endswith("/selected_watch")]
        others = [c for c in t.query_contexts(a.memprofd, db)
                  if c.get("binary", "").endswith("/other_watch")]
        hits = sum(c.get("watch_hits", 0) for c in ctxs)
        ns = sum(c.get("watch_ns", 0) for c in ctxs)
        t.log("selected: %d contexts, %d watch hits over %d ns; not selected: %d contexts"
              % (len(ctxs), hits, ns, len(others)))
        if not ctxs or not hits:
            fails.append("the selected process's contexts carry no watch evidence "
                         "(%d contexts)" % len(ctxs))
        if others:
            fails.append("the process the rules did not select was recorded")
    t.finish(fails, "the daemon arms in-process watches in the processes it selects only", d)


if __name__ == "__main__":
    main()
