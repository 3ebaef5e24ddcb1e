#!/usr/bin/env python3
"""check_ledger: the judges judged. The workloads' own --expect accounts, which the exact
checks trust, are compared with what valgrind's allocation tree (--xtree-memory=full) saw
for the same run: per site, allocation count and bytes. Needs no BPF and no memprofd.
valgrind aborts on pvalloc, so those sites are switched off here.
Usage: check_ledger.py --known PATH --unseen PATH [--seeds N]"""
import argparse
import os
import random
import re
import shutil
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpdtest as t  # noqa: E402


def xtree_self_costs(workload, wargs, tmp, tag):
    """{function: (alloc_count, bytes)} for allocations made directly by each function,
    plus the --expect JSON of the same run."""
    kcg, expect = os.path.join(tmp, tag + ".kcg"), os.path.join(tmp, tag + ".json")
    p = t.run(["valgrind", "-q", "--xtree-memory=full", "--xtree-memory-file=" + kcg,
               workload, "--expect", expect, *wargs], timeout=300)
    if p.returncode != 0:
        raise RuntimeError("valgrind run failed: " + t.describe(p))
    ann = t.run(["callgrind_annotate", "--threshold=100", "--inclusive=no", kcg], timeout=120)
    if ann.returncode != 0:
        raise RuntimeError("callgrind_annotate failed: " + t.describe(ann))
    events = None
    out = {}
    for line in ann.stdout.splitlines():
        if line.startswith("Events shown:"):
            events = line.split(":", 1)[1].split()
            continue
        if events is None or ":" not in line:
            continue
        body = re.sub(r"\([ 0-9.]+%\)", "", line)
        parts = body.split(None, len(events))
        if len(parts) <= len(events):
            continue
        try:
            vals = [int(v.replace(",", "")) if v != "." else 0 for v in parts[:len(events)]]
        except ValueError:
            continue
        fn = parts[len(events)].split(":", 1)[1] if ":" in parts[len(events)] else parts[len(events)]
        row = dict(zip(events, vals))
        out[fn.strip()] = (row.get("totBk", 0), row.get("totB", 0))
    return out, t.load_expect(expect)


def compare(label, costs, expect):
    errs = []
    for s in expect["sites"]:
        got = costs.get(s["function"], (0, 0))
        want = (s["alloc_count"], s["total_size"])
        mark = "ok  " if got == want else "FAIL"
        t.log("%s %s %-70s valgrind %s ledger %s" % (mark, label, s["function"][:70], got, want))
        if got != want:
            errs.append("%s: %s: valgrind saw (count, bytes) %s, the ledger says %s" %
                        (label, s["function"], got, want))
    return errs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--known", required=True)
    ap.add_argument("--unseen", required=True)
    ap.add_argument("--seeds", type=int, default=3)
    a = ap.parse_args()
    if not shutil.which("valgrind") or not shutil.which("callgrind_annotate"):
        t.skip("valgrind / callgrind_annotate not installed")
    tmp = tempfile.mkdtemp(prefix="mpd-ledger-")
    errs = []
    try:
        costs, expect = xtree_self_costs(os.path.abspath(a.known),
                                         ["--pvalloc-count", "0", "--lived-ms", "5",
                                          "--exit-delay-ms", "5"], tmp, "known")
        errs += compare("known", costs, expect)
        rnd = random.SystemRandom()
        for _ in range(a.seeds):
            seed = rnd.randrange(1, 1 << 31)
            costs, expect = xtree_self_costs(os.path.abspath(a.unseen),
                                             ["--seed", str(seed), "--exit-delay-ms", "5"],
                                             tmp, "unseen-%d" % seed)
            errs += compare("unseen seed %d" % seed, costs, expect)
    except RuntimeError as e:
        errs.append(str(e))
    t.finish(errs, "workload ledgers agree with valgrind", tmp)


if __name__ == "__main__":
    main()
