#!/usr/bin/env python3
"""unwind_cost: what DWARF unwinding (issue 16) costs against the frame-pointer walk, on
Debian's python3 (built without frame pointers), side by side in one run: variants are
interleaved run by run so drift hits all alike. Variants: python3 alone; `memprofd
record` in the default mode (sampled) and --alloc exact, each with the unwinding mode
memprofd picks for python3 (DWARF: BPF copies the stack top and registers, user space
unwinds with libdwfl) and forced to the frame-pointer walk (MEMPROFD_UNWIND=fp: the cost
of the fast path on the same program; its stacks are wrong there, which is the point of
DWARF). Per variant, medians of: the workload's wall time and its CPU time (the
children's rusage less memprofd's own) as ratios to python3 alone; memprofd's own CPU per
stack record (its rusage over the records it handled); stacks unwound from DWARF.
Usage: bench/unwind_cost.py --build BUILDDIR [--runs 5] [--n 300000]"""
import argparse
import os
import re
import resource
import statistics
import subprocess
import tempfile
import time

PROG = "d = {}\nfor i in range(%d): d[i] = [i] * 10\ns = sorted(d.items(), key=lambda kv: -kv[0])\n"
CPU_RE = re.compile(r"\((\d+) events; .*memprofd cpu (\d+) ms")
UST_RE = re.compile(r"(\d+) stacks unwound from DWARF CFI")


def run(argv, env):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.run(argv, env=env, capture_output=True, text=True)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if p.returncode != 0:
        raise SystemExit("failed: %s\n%s" % (" ".join(argv[:4]), p.stderr[-600:]))
    m, u = CPU_RE.search(p.stderr), UST_RE.search(p.stderr)
    own = int(m.group(2)) / 1e3 if m else 0.0
    return {"wall": wall, "cpu": cpu - own, "own": own, "events": int(m.group(1)) if m else 0,
            "ustacks": int(u.group(1)) if u else 0}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--n", type=int, default=300000)
    a = ap.parse_args()
    memprofd = os.path.join(a.build, "cli", "memprofd")
    py = ["/usr/bin/python3", "-c", PROG % a.n]
    tmp = tempfile.mkdtemp(prefix="mpd-unwind-cost-")
    db = os.path.join(tmp, "b.db")
    variants = [("python3 alone", None, None)]
    for alloc in ("sampled", "exact"):
        for mode in ("dwarf", "fp"):
            variants.append(("record --alloc %s, %s" % (alloc, "DWARF" if mode == "dwarf"
                                                        else "FP forced"), alloc, mode))
    res = {v[0]: [] for v in variants}
    for _ in range(a.runs):
        for name, alloc, mode in variants:
            env = dict(os.environ)
            if alloc is None:
                res[name].append(run(py, env))
                continue
            if mode == "fp":
                env["MEMPROFD_UNWIND"] = "fp"
            if os.path.exists(db):
                os.unlink(db)
            res[name].append(run([memprofd, "record", "--alloc", alloc, "--access", "off",
                                  "--db", db, "--"] + py, env))
    med = lambda name, k: statistics.median(r[k] for r in res[name])
    base_wall, base_cpu = med("python3 alone", "wall"), med("python3 alone", "cpu")
    print("| variant | wall | workload CPU | memprofd CPU per record | records | DWARF stacks |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, alloc, _ in variants:
        ev = med(name, "events")
        per = "%.0f us" % (1e6 * med(name, "own") / ev) if alloc and ev else "-"
        print("| %s | %.2fx | %.2fx | %s | %d | %d |" % (
            name, med(name, "wall") / base_wall, med(name, "cpu") / base_cpu, per, ev,
            med(name, "ustacks")))


if __name__ == "__main__":
    main()
