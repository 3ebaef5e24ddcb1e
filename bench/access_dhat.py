#!/usr/bin/env python3
"""access_dhat: the soft source's per-context access estimates against valgrind DHAT on
tests/workloads/access_patterns (one hot and one cold heap buffer per pattern: static+heap
loop, pointer chase, SIMD, libc string functions, rep movs/stos, spilled pointers).

The workload's work is fixed by --passes, so DHAT runs a short copy (--dhat-passes) and
its counts are scaled by passes / dhat-passes (each pass does the same accesses). DHAT
counts bytes read and written per allocation context; its access count is given here in
8-byte words (bytes / 8), the unit of a scalar load, so a 16- or 32-byte vector access
counts 2 or 4 and a rep movsb byte 1/8. Printed per hot context: memprofd's samples,
est_accesses and its interval, DHAT's words, and est / DHAT; then the geometric mean of
that ratio and the Spearman rank correlation of est with DHAT over the hot contexts; and
est_access_bytes over DHAT's bytes (issue 17: both in bytes, a vector access its width).
Usage: bench/access_dhat.py --build build [--passes 60] [--freq 1000]"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

PATTERNS = ("static_heap", "chase", "simd", "string", "rep", "spill")


def ranks(v):
    order = sorted(range(len(v)), key=lambda i: v[i])
    r = [0.0] * len(v)
    for pos, i in enumerate(order):
        r[i] = float(pos)
    return r


def spearman(x, y):
    rx, ry = ranks(x), ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sx = math.sqrt(sum((a - mx) ** 2 for a in rx))
    sy = math.sqrt(sum((b - my) ** 2 for b in ry))
    return sxy / (sx * sy) if sx and sy else float("nan")


def dhat_words(exe, passes, tmp):
    out = os.path.join(tmp, "dhat.json")
    subprocess.run(["valgrind", "--tool=dhat", "--dhat-out-file=" + out, exe,
                    "--passes", str(passes)], check=True, capture_output=True)
    d = json.load(open(out))
    got = {}
    for p in d["pps"]:
        for i in p["fs"]:
            f = d["ftbl"][i]
            for pat in PATTERNS:
                for kind in ("hot_", "cold_"):
                    if ": %s%s " % (kind, pat) in f:
                        got[kind + pat] = (p["rb"] + p["wb"]) / 8.0
    return got


def one(memprofd, exe, passes, dpasses, freq, tmp):
    db = os.path.join(tmp, os.path.basename(exe) + ".db")
    subprocess.run([memprofd, "record", "--db", db, "--alloc", "exact", "--access", "soft",
                    "--freq", str(freq), "--", exe, "--passes", str(passes)],
                   check=True, capture_output=True)
    ctxs = json.loads(subprocess.run([memprofd, "query", "contexts", "--db", db, "--format",
                                      "json", "--limit", "0"], check=True,
                                     capture_output=True, text=True).stdout)
    dh = dhat_words(exe, dpasses, tmp)
    scale = passes / dpasses
    rows = []
    for pat in PATTERNS:
        fn = "hot_" + pat
        cs = [c for c in ctxs if any(f.get("function") == fn for f in c["frames"])]
        s = sum(c["access_samples"] for c in cs)
        e = sum(c["est_accesses"] for c in cs)
        lo = sum(c.get("est_accesses_lo", 0) for c in cs)
        hi = sum(c.get("est_accesses_hi", 0) for c in cs)
        eb = sum(c.get("est_access_bytes") or 0 for c in cs)   # issue 17: DHAT's unit
        truth = dh.get(fn, 0) * scale
        rows.append((pat, s, e, lo, hi, truth, eb))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--passes", type=int, default=60)
    ap.add_argument("--dhat-passes", type=int, default=2)
    ap.add_argument("--freq", type=int, default=1000)
    a = ap.parse_args()
    memprofd = os.path.join(a.build, "cli", "memprofd")
    tmp = tempfile.mkdtemp(prefix="access_dhat.")
    print("| binary | pattern | samples | est_accesses [lo, hi] | DHAT words | est/DHAT | "
          "est_access_bytes / DHAT bytes |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for opt in ("O1", "O2"):
        exe = os.path.join(a.build, "tests", "workloads", "access_patterns_" + opt)
        rows = one(memprofd, exe, a.passes, a.dhat_passes, a.freq, tmp)
        for pat, s, e, lo, hi, t, eb in rows:
            print("| %s | %s | %d | %.3g [%.3g, %.3g] | %.3g | %.2f | %.2f |" %
                  (opt, pat, s, e, lo, hi, t, e / t if t else float("nan"),
                   eb / (8 * t) if t else float("nan")))
        ok = [(e, t) for _, _, e, _, _, t, _ in rows if e and t]
        okb = [(eb, 8 * t) for _, _, _, _, _, t, eb in rows if eb and t]
        gmb = math.exp(sum(math.log(e / t) for e, t in okb) / len(okb)) if okb else float("nan")
        gm = math.exp(sum(math.log(e / t) for e, t in ok) / len(ok)) if ok else float("nan")
        rho = spearman([e for e, _ in ok], [t for _, t in ok]) if len(ok) > 2 else float("nan")
        print("| %s | geomean est/DHAT %.2f, Spearman %.2f over %d hot contexts; in bytes: "
              "geomean %.2f | | | | | |" % (opt, gm, rho, len(ok), gmb))
    print("\n%s: --passes %d (DHAT: --passes %d, scaled), --freq %d" %
          (os.path.basename(sys.argv[0]), a.passes, a.dhat_passes, a.freq))


if __name__ == "__main__":
    main()
