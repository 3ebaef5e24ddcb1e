#!/usr/bin/env python3
"""check_stacks: exact mode's frame-pointer walk gets whole stacks (tests/workloads/
stack_shapes.cc): through frames larger than the walk's copy chunk, in threads with nested
operator new -> malloc, on a makecontext stack and on main's stack again after it. Per
site: the exact allocation count and size, and every context's frames starting with the
site's chain (function names, arguments stripped); no drops.
Usage: check_stacks.py --memprofd PATH --workload PATH [--depth N --threads T --count C]"""
import argparse
import os
import re
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpdtest as t  # noqa: E402

DROPS_RE = re.compile(r"drops: ringbuf (\d+), live-map (\d+), thread-map (\d+), stack (\d+)")


def name(frame):
    return (frame.get("function") or "?").split("(")[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--workload", required=True)
    ap.add_argument("--depth", type=int, default=40)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--count", type=int, default=50)
    a = ap.parse_args()

    t.require_bpf()
    tmp = tempfile.mkdtemp(prefix="mpd-stacks-")
    db = os.path.join(tmp, "stacks.db")
    argv = [os.path.abspath(a.workload), "--depth", str(a.depth), "--threads", str(a.threads),
            "--count", str(a.count)]
    # site -> (allocations, size, the chain its frames must start with)
    want = {
        "big_frames_leaf": (a.count, 24, ["big_frames_leaf"] + ["big_frame"] * a.depth + ["main"]),
        "thread_new_leaf": (a.count * a.threads, 56, ["thread_new_leaf", "thread_body"]),
        "coro_leaf": (a.count, 40, ["coro_leaf", "coro_body"]),
        "main_leaf": (2 * a.count, 72, ["main_leaf", "main"]),
    }
    p = t.record(a.memprofd, db, argv)
    errs = []
    if p.returncode != 0:
        errs.append("memprofd record failed: " + t.describe(p))
        t.finish(errs, "whole stacks", tmp)
    m = DROPS_RE.search(p.stderr)
    if not m:
        errs.append("memprofd record printed no drop counts: " + p.stderr.strip()[-300:])
    elif any(int(x) for x in m.groups()):
        errs.append("drops while recording: " + m.group(0))
    ctxs = t.query_contexts(a.memprofd, db)
    for site, (count, size, chain) in want.items():
        group = [c for c in ctxs if c["frames"] and name(c["frames"][0]) == site]
        got = sum(c["alloc_count"] for c in group)
        t.log("%-16s %6d allocations (want %d) in %d contexts" % (site, got, count, len(group)))
        if got != count:
            errs.append("site %s: %d allocations, the workload made %d" % (site, got, count))
        for c in group:
            names = [name(f) for f in c["frames"]]
            if names[:len(chain)] != chain:
                errs.append("site %s: frames %s, want them to start with %s" % (
                    site, names[:len(chain) + 2], chain))
            if c["min_size"] != size or c["max_size"] != size:
                errs.append("site %s: sizes %d..%d, want %d" % (site, c["min_size"],
                                                               c["max_size"], size))
    t.finish(errs, "whole stacks: %d sites, %d frames deep through %d-byte frames" % (
        len(want), a.depth + 2, 1500), tmp)


if __name__ == "__main__":
    main()
