#!/usr/bin/env python3
"""check_ctor_stacks: one stack per allocation site, run after run (issue 16's follow-up).
tests/workloads/ctor_allocs allocates before main (its own constructor, a global
std::string, libstdc++'s emergency pool) and in main; it keeps frame pointers, so the
recorder walks them unless a stack is cut, and a process's first allocations may be
taken before its unwinding mode is decided. Whichever way each stack was taken, every
run must show each site under exactly one stack (function names, innermost first), the
same in every run, whole (reaching main's caller or the dynamic loader's entry code),
and the recorder's own sites in full: ctor_site under before_main, main_site under main.
Then short-lived processes gone before the reader reads their /proc/PID/maps: a shell
(dash) running expr six times, searched in PATH by the shell's child between its fork
and exec; every context whole or marked truncated, and the same stacks in every run."""
import argparse
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpdtest as t  # noqa: E402
import stackroots  # noqa: E402

RUNS = 6
# (innermost own function, size) -> what its stack must contain
SITES = {4321: ("ctor_site", "before_main"), 1234: ("main_site", "main")}
POOL_MIN = 32768   # libstdc++'s emergency pool: tens of KiB from its initialisation


def where(c):
    """A context's frames as module+offset, and whether it is marked truncated: what a
    failure report needs where names are "?" (a clean clone's CI keeps no store)."""
    return "%s%s" % (" < ".join("%s+%s" % (os.path.basename(f.get("module") or "?"),
                                            f.get("address")) for f in c["frames"]),
                     " (truncated)" if c.get("truncated") else "")


def shapes(memprofd, db, mode, errs, seen_at=None):
    """{key of a site: tuple of frame names} for one run; seen_at[names]: where a stack
    was first seen (the run's db, its frames' modules and addresses)."""
    out = {}
    for c in t.query_contexts(memprofd, db):
        names = tuple(f.get("function") or "?" for f in c["frames"])
        if seen_at is not None:
            seen_at.setdefault(names, "%s: %s" % (os.path.basename(db), where(c)))
        size = c["total_size"] // max(c["alloc_count"], 1)
        if size in SITES:
            key = "size %d" % size
            want = SITES[size]
            if not all(any(n.split("(")[0] == w for n in names) for w in want):
                errs.append("%s: %s lacks %s: %s" % (mode, key, want, list(names)))
        elif size in (3001, 5001) or size >= POOL_MIN:
            key = "size %d" % size
        else:
            continue
        if not stackroots.whole(c):
            errs.append("%s: %s does not reach a root: %s" % (mode, key, list(names)))
        out.setdefault(key, set()).add(names)
    return out


SHELL_SCRIPT = "for i in 1 2 3 4 5 6; do expr $i + 1 >/dev/null; done\n"


def short_lived(a, tmp, errs):
    script = os.path.join(tmp, "expr.sh")
    with open(script, "w") as f:
        f.write(SHELL_SCRIPT)
    runs, stderrs = [], []
    for i in range(3):
        db = os.path.join(tmp, "sh%d.db" % i)
        p = t.record(a.memprofd, db, ["/bin/sh", script], extra=["--access", "off"])
        if p.returncode != 0:
            errs.append("sh run %d: %s" % (i, t.describe(p)))
            continue
        ctxs = t.query_contexts(a.memprofd, db)
        # A stack lost and counted (record's "N objects in the context without frames"
        # line, with its cause) is not a second stack for a site: CI's clean clone lost
        # one of 1,456 objects' stacks in one of three runs. Uncounted, or more than 1%
        # of the objects, it still fails.
        lost = re.search(r"(\d+) objects in the context without frames.*\((.*)\)",
                         p.stderr or "")
        bare = [c for c in ctxs if not c["frames"]]
        nbare = sum(c["alloc_count"] for c in bare)
        nall = sum(c["alloc_count"] for c in ctxs)
        if bare and lost and nbare <= int(lost.group(1)) and nbare * 100 <= nall:
            t.log("sh run %d: %d of %d objects' stacks lost and counted (%s)" %
                  (i, nbare, nall, lost.group(2)))
            ctxs = [c for c in ctxs if c["frames"]]
        short = [c for c in ctxs if not stackroots.whole(c) and not c.get("truncated")]
        if short:
            errs.append("sh run %d: %d of %d contexts stop short of a root unmarked, e.g. %s"
                        % (i, len(short), len(ctxs),
                           [f.get("function") or f.get("address") for f in short[0]["frames"]]))
        runs.append({tuple((f.get("module"), f.get("address")) for f in c["frames"]):
                     "sh%d: %s" % (i, where(c)) for c in ctxs})
        stderrs.append(p.stderr or "")
    t.log("sh running expr x6: %s contexts per run" % [len(r) for r in runs])
    if len(runs) > 1 and any(r.keys() != runs[0].keys() for r in runs[1:]):
        errs.append("sh running expr x6: the stacks differ between runs (%s contexts)"
                    % [len(r) for r in runs])
        for r, err in zip(runs, stderrs):   # the stacks not in every run, and record's word
            odd = [w for k, w in r.items() if any(k not in o for o in runs)]
            for w in odd:
                t.log("  only in some runs: %s" % w)
            if odd:
                t.log("\n".join("    " + ln.strip() for ln in err.splitlines() if "stack" in ln))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--workload", required=True)
    ap.add_argument("--runs", type=int, default=RUNS)
    a = ap.parse_args()
    t.require_bpf()
    errs = []
    tmp = tempfile.mkdtemp(prefix="mpd-ctor-")
    for mode in ("exact", "sampled"):
        seen, seen_at, stderrs = {}, {}, {}
        for i in range(a.runs):
            db = os.path.join(tmp, "%s%d.db" % (mode, i))
            env = {"MEMPROFD_SAMPLE_BYTES": "1"} if mode == "sampled" else None
            p = t.record(a.memprofd, db, [a.workload], extra=["--access", "off"], alloc=mode,
                         env=env)
            if p.returncode != 0:
                errs.append("%s run %d: %s" % (mode, i, t.describe(p)))
                continue
            stderrs[os.path.basename(db)] = p.stderr or ""
            for key, st in shapes(a.memprofd, db, mode, errs, seen_at).items():
                if len(st) > 1:
                    errs.append("%s run %d: %s has %d stacks: %s" % (mode, i, key, len(st),
                                                                    sorted(st)))
                seen.setdefault(key, set()).update(st)
        for key, st in sorted(seen.items()):
            t.log("%s: %s: %d stack(s) over %d runs%s" % (mode, key, len(st), a.runs,
                  "" if len(st) == 1 else ": " + " | ".join(" < ".join(s) for s in sorted(st))))
            if len(st) > 1:
                errs.append("%s: %s shows %d different stacks over %d runs" % (mode, key,
                                                                             len(st), a.runs))
                for names in sorted(st):   # where, and what record said of its stacks
                    t.log("  %s" % seen_at[names])
                    run = seen_at[names].split(":")[0]
                    for line in stderrs.get(run, "").splitlines():
                        if "stack" in line:
                            t.log("    %s" % line.strip())
        missing = [k for k in ("size 4321", "size 1234", "size 3001", "size 5001") if k not in seen]
        if missing:
            errs.append("%s: sites never recorded: %s" % (mode, missing))
    short_lived(a, tmp, errs)
    t.finish(errs, "one stack per site, constructors and main, short-lived processes, "
             "over %d runs" % a.runs, tmp)


if __name__ == "__main__":
    main()
