#!/usr/bin/env python3
"""SIGKILL `memprofd merge` at random points, --runs times: the output either does not
exist or is the whole merge (integrity_check ok, the same contexts as an uninterrupted
merge); a half-written database never appears under the output's name, and a merge after
the kills still works. Leftover temporary files (OUT.tmp.PID*) are counted and printed."""
import argparse
import glob
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpdtest as t  # noqa: E402


def contents(a, db):
    ctxs = t.query_contexts(a.memprofd, db)
    return json.dumps(sorted(((c["binary"], [f.get("function") for f in c["frames"]],
                               c["alloc_count"], c["total_size"]) for c in ctxs), key=str))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--gen-store", required=True)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--seed", type=int, default=None)
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    rnd = random.Random(seed)
    t.log("seed %d" % seed)
    tmp = tempfile.mkdtemp(prefix="mpd-kill-merge-")
    ins = []
    for i in range(2):
        ins.append(os.path.join(tmp, "in%d.db" % i))
        subprocess.run([a.gen_store, "--db", ins[-1], "--contexts", "500", "--rows", "1500",
                        "--binaries", "2", "--procs", "3", "--buckets", "4", "--seed", str(i + 1)],
                       check=True, capture_output=True)
    clean_db = os.path.join(tmp, "clean.db")
    start = time.monotonic()
    p = t.run([a.memprofd, "merge", "-o", clean_db] + ins, timeout=300)
    took = time.monotonic() - start
    if p.returncode != 0:
        t.finish(["uninterrupted merge failed: " + t.describe(p)], "merge killed", tmp)
    clean = contents(a, clean_db)
    errs, whole, absent = [], 0, 0
    out = os.path.join(tmp, "out.db")
    for i in range(a.runs):
        for f in glob.glob(out + "*"):
            os.unlink(f)
        m = subprocess.Popen([a.memprofd, "merge", "-o", out] + ins,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rnd.uniform(0, took * 1.1))
        m.kill()
        m.wait()
        if not os.path.exists(out):
            absent += 1
            continue
        if t.integrity(out) != "ok":
            errs.append("run %d: %s exists but fails integrity_check" % (i, out))
        elif contents(a, out) != clean:
            errs.append("run %d: %s exists but differs from the uninterrupted merge" % (i, out))
        else:
            whole += 1
    leftovers = len(glob.glob(out + ".tmp.*"))
    for f in glob.glob(out + "*"):
        os.unlink(f)
    p = t.run([a.memprofd, "merge", "-o", out] + ins, timeout=300)
    if p.returncode != 0 or contents(a, out) != clean:
        errs.append("a merge after the kills: " + t.describe(p))
    t.log("merge (%.2f s uninterrupted) killed %d times: %d left no output, %d the whole "
          "merge, %d a broken one; temporary files left by the last kill: %d"
          % (took, a.runs, absent, whole, a.runs - absent - whole, leftovers))
    t.finish(errs, "SIGKILL at random points of merge", tmp)


if __name__ == "__main__":
    main()
