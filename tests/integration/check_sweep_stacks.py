#!/usr/bin/env python3
"""Defects the real-program sweep (bench/stack_sweep.py) found, each on a Debian program,
in exact and default (sampled) mode:
- library constructors: clang-19 --version allocates ~65% of its bytes in libLLVM's and
  libclang's static initializers, called by ld.so's _dl_init from the loader's entry code
  (_start/_dl_start_user, which has no CFI). Those stacks are whole: >= 90% of bytes must
  be in contexts that reach a root (main's caller, a thread's start, the loader's entry)
  and are not marked truncated, and some of them must end in the loader's entry code.
- forked children (python3 os.fork, each child allocates and exits at once): the child is
  gone before its records are read, so its mappings come from its parent's (fork copies
  the address space): every child allocation in a whole stack (0 of 300 before, exact).
- a static-PIE program (gcc -static-pie at test time, exits within a millisecond): its
  modules come from the mappings read at exec; every stack whole in each of 3 runs (about
  half the runs lost every stack before). A stripped static executable (ldconfig) gets a
  warning that its allocations cannot be seen, not a silent empty profile.
- lost stacks: the context of allocations whose stack was lost (dropped near a full ring:
  g++'s cc1plus in exact mode) has no frame and must say `truncated`.
Every run: no context both short of a root and unmarked; a frameless one only when record
counted the lost stacks."""
import argparse
import os
import re
import shutil
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


CHILD_SIZE = 777777
FORK_PROG = """import os
for i in range(%d):
    pid = os.fork()
    if pid == 0:
        b = bytearray(%d)
        os._exit(0)
    os.waitpid(pid, 0)
"""
CHILDREN = 200


def forked_children(memprofd, tmp, errs):
    for alloc in ("exact", "sampled"):
        name = "python3-fork-" + alloc
        ctxs = record(memprofd, tmp, name,
                      ["/usr/bin/python3", "-c", FORK_PROG % (CHILDREN, CHILD_SIZE)], alloc, errs)
        if ctxs is None:
            continue
        # bytearray(n) mallocs n + 1 bytes; a frameless context mixes sizes
        mine = [c for c in ctxs if CHILD_SIZE <= c["min_size"] and c["max_size"] <= CHILD_SIZE + 64]
        n = sum(c["alloc_count"] for c in mine)
        whole = sum(c["alloc_count"] for c in mine if stackroots.whole(c) and not c.get("truncated"))
        mpdtest.log("%s: %d of %d children's allocations stored under their size, %d in whole "
                    "stacks" % (name, n, CHILDREN, whole))
        if whole != CHILDREN:
            errs.append("%s: %d of %d forked children's allocations in whole stacks "
                        "(the child exits before its maps are read)" % (name, whole, CHILDREN))


STATIC_SRC = r"""#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) void *leaf(size_t n) { return malloc(n); }
__attribute__((noinline)) void mid(int i, void **v) { v[i] = leaf(100 + i); }
int main(void)
{
	static void *v[1000];
	for (int i = 0; i < 1000; i++)
		mid(i, v);
	printf("%p\n", v[3]);
	for (int i = 0; i < 1000; i++)
		free(v[i]);
	return 0;
}
"""
STATIC_RUNS = 3


def static_pie(memprofd, tmp, errs):
    cc = shutil.which("gcc") or shutil.which("cc")
    src, exe = os.path.join(tmp, "spie.c"), os.path.join(tmp, "spie")
    with open(src, "w") as f:
        f.write(STATIC_SRC)
    p = mpdtest.run([cc, "-O2", "-g", "-static-pie", "-o", exe, src]) if cc else None
    if p is None or p.returncode != 0:
        errs.append("cannot build a static-PIE program (gcc and libc6-dev's static libc, "
                    "deploy/bootstrap.sh): %s" % (mpdtest.describe(p) if p else "no cc"))
        return
    for i in range(STATIC_RUNS):
        name = "static-pie-exact-%d" % i
        ctxs = record(memprofd, tmp, name, [exe], "exact", errs)
        if ctxs is None:
            continue
        total = sum(c["alloc_count"] for c in ctxs)
        whole = sum(c["alloc_count"] for c in ctxs if stackroots.whole(c) and not c.get("truncated"))
        mpdtest.log("%s: %d of %d objects in whole stacks" % (name, whole, total))
        if total < 1000 or whole != total:
            errs.append("%s: %d of %d objects in whole stacks (want all of >= 1000)" %
                        (name, whole, total))
    for alloc in ("exact", "sampled"):
        db = os.path.join(tmp, "ldconfig-%s.db" % alloc)
        p = mpdtest.record(memprofd, db, ["/usr/sbin/ldconfig", "-p"], extra=["--access", "off"],
                           alloc=alloc)
        if p.returncode != 0 or "/usr/sbin/ldconfig: statically linked and" not in p.stderr:
            errs.append("ldconfig (static, stripped), %s: no warning that its allocations are "
                        "not recorded: %s" % (alloc, mpdtest.describe(p)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    args = ap.parse_args()
    mpdtest.require_bpf()
    for prog in ("/usr/bin/clang-19", "/usr/bin/python3", "/usr/sbin/ldconfig"):
        if not os.access(prog, os.X_OK):
            mpdtest.skip(prog + " is not installed (deploy/bootstrap.sh installs it)")
    tmp = tempfile.mkdtemp(prefix="mpd-sweep-stacks-")
    errs = []
    constructors(args.memprofd, tmp, errs)
    forked_children(args.memprofd, tmp, errs)
    static_pie(args.memprofd, tmp, errs)
    mpdtest.finish(errs, "whole stacks on the sweep's programs", tmp)


if __name__ == "__main__":
    main()
