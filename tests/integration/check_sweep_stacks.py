#!/usr/bin/env python3
"""Defects the real-program sweep (bench/stack_sweep.py) found, each on a Debian program,
in exact and default (sampled) mode:
- library constructors: clang-19 --version allocates ~65% of its bytes in libLLVM's and
  libclang's static initializers, called by ld.so's _dl_init from the loader's entry code
  (_start/_dl_start_user, which has no CFI). Those stacks are whole: >= 90% of bytes must
  be in contexts that reach a root (main's caller, a thread's start, the loader's entry)
  and are not marked truncated, and some of them must end in the loader's entry code.
- lost stacks: the context of allocations whose stack was lost (dropped near a full ring:
  g++'s cc1plus in exact mode) has no frame and must say `truncated`.
Every run: no context both short of a root and unmarked; a frameless one only when record
counted the lost stacks."""
import argparse
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpdtest  # noqa: E402
import stackroots  # noqa: E402

MIN_SHARE = 0.90
MIN_LOADER_SHARE = 0.10    # of bytes allocated under the loader's entry (constructors)
ENV_SAMPLED = {"MEMPROFD_SAMPLE_BYTES": "4096"}


def lost_counted(p):
    m = re.search(r"drops: ringbuf (\d+), live-map \d+, thread-map \d+, stack (\d+)", p.stderr or "")
    m2 = re.search(r"(\d+) objects in the context without frames", p.stderr or "")
    return (int(m.group(1)) + int(m.group(2)) if m else 0) + (int(m2.group(1)) if m2 else 0)


def record(memprofd, tmp, name, argv, alloc, errs):
    db = os.path.join(tmp, name + ".db")
    p = mpdtest.record(memprofd, db, argv, extra=["--access", "off"], alloc=alloc, timeout=120,
                       env=ENV_SAMPLED if alloc == "sampled" else None)
    if p.returncode != 0:
        errs.append("%s: record failed: %s" % (name, mpdtest.describe(p)))
        return None
    ctxs = mpdtest.query_contexts(memprofd, db)
    lost = lost_counted(p)
    for c in ctxs:
        if not c["frames"] and not lost:
            errs.append("%s: a context without frames, but record counted no lost stack" % name)
        if not c.get("truncated") and not stackroots.whole(c):
            errs.append("%s: a context short of any root is not marked truncated: %s" %
                        (name, [(f.get("function"), f["address"], f.get("module"))
                                for f in c["frames"][-3:]]))
            break
    return ctxs


def shares(ctxs):
    total = sum(c["total_size"] for c in ctxs) or 1
    whole = sum(c["total_size"] for c in ctxs if stackroots.whole(c) and not c.get("truncated"))
    loader = sum(c["total_size"] for c in ctxs if not c.get("truncated") and
                 any(stackroots.in_loader_entry(f) for f in c["frames"]))
    return whole / total, loader / total


def constructors(memprofd, tmp, errs):
    for alloc in ("exact", "sampled"):
        name = "clang-19-version-" + alloc
        ctxs = record(memprofd, tmp, name, ["/usr/bin/clang-19", "--version"], alloc, errs)
        if ctxs is None:
            continue
        whole, loader = shares(ctxs)
        mpdtest.log("%s: %d contexts, %.1f%% of bytes in whole unmarked stacks, %.1f%% under "
                    "the loader's entry (constructors)" % (name, len(ctxs), 100 * whole, 100 * loader))
        if whole < MIN_SHARE:
            errs.append("%s: %.1f%% of bytes in whole stacks not marked truncated (want >= %d%%)"
                        % (name, 100 * whole, 100 * MIN_SHARE))
        if loader < MIN_LOADER_SHARE:
            errs.append("%s: %.1f%% of bytes in whole stacks from the loader's entry code "
                        "(libraries' constructors; want >= %d%%)" %
                        (name, 100 * loader, 100 * MIN_LOADER_SHARE))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    args = ap.parse_args()
    mpdtest.require_bpf()
    if not os.access("/usr/bin/clang-19", os.X_OK):
        mpdtest.skip("/usr/bin/clang-19 is not installed (deploy/bootstrap.sh installs it)")
    tmp = tempfile.mkdtemp(prefix="mpd-sweep-stacks-")
    errs = []
    constructors(args.memprofd, tmp, errs)
    mpdtest.finish(errs, "whole stacks on the sweep's programs", tmp)


if __name__ == "__main__":
    main()
