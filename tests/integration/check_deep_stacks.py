#!/usr/bin/env python3
"""Whole stacks through deep recursion without frame pointers (issue 16's deep C++ stacks:
clang's recursive-descent parser). A C program built at test time with
-fomit-frame-pointer recurses DEPTH frames, each with LOCALS bytes of locals (~90 KiB of
stack, past the usual 24 KiB copy and the old 64-frame cap), and allocates at the
bottom. In exact and sampled mode: >= 90% of the bytes are in contexts that reach main's
caller and are not marked truncated, at least DEPTH frames deep; a context short of a
root says `truncated`. Then clang-19 -fsyntax-only on a small C++ file in the default
mode: the share of its bytes in whole stacks is logged, not asserted (28-99% run to run;
9% before: its parser's stacks ran past the copy and 64 frames, and half its samples were
lost at a 16 MiB ring). ~25 s."""
import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpdtest  # noqa: E402
import stackroots  # noqa: E402

DEPTH = 150
LOCALS = 600
ALLOCS = 400
SIZE = 5000   # not a size stdio allocates
MIN_SHARE = 0.90
CLANG = "/usr/bin/clang-19"
CXX_SRC = ("#include <map>\n#include <string>\n#include <vector>\n#include <iostream>\n"
           "template <int N> struct F { static const int v = N * F<N - 1>::v; };\n"
           "template <> struct F<0> { static const int v = 1; };\n"
           "int main() { std::map<std::string, std::vector<int>> m; m[\"a\"].push_back(F<5>::v);"
           " std::cout << m.size(); }\n")
ENV_SAMPLED = {"MEMPROFD_SAMPLE_BYTES": "4096"}

SRC = r"""#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#define DEPTH %d
#define LOCALS %d
#define ALLOCS %d
#define SIZE %d
static void *keep[ALLOCS];
/* LOCALS bytes of locals per frame, read after the call (no tail call). */
__attribute__((noinline)) void *descend(int d, int i)
{
	volatile char pad[LOCALS];
	void *p;

	pad[d %% LOCALS] = (char)d;
	p = d ? descend(d - 1, i) : malloc(SIZE + i %% 8);
	return (char *)p + pad[d %% LOCALS] * 0;
}
int main(void)
{
	struct timespec ms = { 0, 1000000 };   /* work between allocations */

	for (int i = 0; i < ALLOCS; i++) {
		keep[i] = descend(DEPTH, i);
		nanosleep(&ms, NULL);
	}
	printf("%%p\n", keep[ALLOCS / 2]);
	for (int i = 0; i < ALLOCS; i++)
		free(keep[i]);
	return 0;
}
"""


def build(tmp):
    src = os.path.join(tmp, "deep.c")
    exe = os.path.join(tmp, "deep")
    with open(src, "w") as f:
        f.write(SRC % (DEPTH, LOCALS, ALLOCS, SIZE))
    subprocess.run(["gcc", "-O1", "-g", "-fomit-frame-pointer", "-fasynchronous-unwind-tables",
                    "-o", exe, src], check=True)
    return exe


def check(memprofd, tmp, exe, alloc, errs):
    db = os.path.join(tmp, "deep-%s.db" % alloc)
    p = mpdtest.record(memprofd, db, [exe], extra=["--access", "off"], alloc=alloc, timeout=120,
                       env=ENV_SAMPLED if alloc == "sampled" else None)
    if p.returncode != 0:
        errs.append("%s: record failed: %s" % (alloc, mpdtest.describe(p)))
        return
    ctxs = mpdtest.query_contexts(memprofd, db)
    mine = [c for c in ctxs if SIZE <= c["min_size"] and c["max_size"] < SIZE + 8]
    total = sum(c["total_size"] for c in mine) or 1
    whole = [c for c in mine if stackroots.whole(c) and not c.get("truncated")]
    share = sum(c["total_size"] for c in whole) / total
    depth = min((len(c["frames"]) for c in whole), default=0)
    stops = [ln for ln in p.stderr.splitlines() if "stacks unwound from DWARF" in ln]
    mpdtest.log("%s: %d contexts, %.1f%% of %d bytes in whole stacks, whole ones >= %d frames; %s"
                % (alloc, len(mine), 100 * share, total, depth, stops[0] if stops else ""))
    if share < MIN_SHARE:
        errs.append("%s: %.1f%% of bytes in whole unmarked stacks (want >= %d%%)" %
                    (alloc, 100 * share, 100 * MIN_SHARE))
    if whole and depth < DEPTH:
        errs.append("%s: a whole stack of %d frames (the recursion alone is %d)" % (alloc, depth, DEPTH))
    for c in ctxs:
        if not c.get("truncated") and c["frames"] and not stackroots.whole(c):
            errs.append("%s: a context short of any root is not marked truncated (%d frames)" %
                        (alloc, len(c["frames"])))
            break


def clang(memprofd, tmp, errs):
    cxx = os.path.join(tmp, "m.cc")
    with open(cxx, "w") as f:
        f.write(CXX_SRC)
    db = os.path.join(tmp, "clang.db")
    p = mpdtest.record(memprofd, db, [CLANG, "-fsyntax-only", cxx], extra=["--access", "off"],
                       alloc="sampled", timeout=120, env=ENV_SAMPLED)
    if p.returncode != 0:
        errs.append("clang-19: record failed: %s" % mpdtest.describe(p))
        return
    ctxs = mpdtest.query_contexts(memprofd, db)
    total = sum(c["total_size"] for c in ctxs) or 1
    share = sum(c["total_size"] for c in ctxs
                if stackroots.whole(c) and not c.get("truncated")) / total
    stops = [ln for ln in p.stderr.splitlines() if "drops:" in ln or "unwound from DWARF" in ln]
    mpdtest.log("clang-19 -fsyntax-only, sampled: %d contexts, %.1f%% of bytes in whole stacks, "
                "max depth %d; %s" % (len(ctxs), 100 * share,
                                      max((len(c["frames"]) for c in ctxs), default=0), stops))
    # Measured, not asserted: on this 2-core VM the share moved between 28% and 99% from
    # run to run (main's code: ~14%); the synthetic recursion above is the assertion.
    if not ctxs:
        errs.append("clang-19 -fsyntax-only, sampled: no context recorded")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    args = ap.parse_args()
    mpdtest.require_bpf()
    for prog in ("/usr/bin/gcc", CLANG):
        if not os.access(prog, os.X_OK):
            mpdtest.skip(prog + " is not installed (deploy/bootstrap.sh installs it)")
    tmp = tempfile.mkdtemp(prefix="mpd-deep-stacks-")
    errs = []
    exe = build(tmp)
    for alloc in ("exact", "sampled"):
        check(args.memprofd, tmp, exe, alloc, errs)
    clang(args.memprofd, tmp, errs)
    mpdtest.finish(errs, "whole stacks through deep recursion", tmp)


if __name__ == "__main__":
    main()
