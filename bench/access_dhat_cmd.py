#!/usr/bin/env python3
"""access_dhat_cmd: memprofd's per-context access estimates for any program against
valgrind DHAT. The program's work must grow linearly with one argument: memprofd records
`CMD... BIG` (`record --alloc exact --access soft --freq FREQ`), DHAT runs `CMD... SMALL`
and `CMD... 2*SMALL`, and each context's DHAT count is extrapolated to BIG from the two
(fixed + per-unit work; --dhat-cache keeps both outputs for the next run). Contexts are matched by the names of their
first --depth functions (allocator frames left out on both sides; contexts of one key
merged). The unit (--unit): bytes read + written, which DHAT counts and memprofd estimates
as est_access_bytes (each sampled access weighted by its operand's width), or accesses:
memprofd's est_accesses (memory operands, MemProf's unit) against DHAT's bytes / 8.
Over the DHAT contexts holding --share of DHAT's total, it prints: Spearman rank
correlation of memprofd's estimate with DHAT's, and of access density (the unit / bytes
allocated / mean lifetime; DHAT's lifetime is in instructions, a unit proportional to
time for one program), the geometric mean and range of est/DHAT, and the
share of those contexts' bytes that memprofd's samples reached at all, and class
agreement: the share of those bytes whose memprofd class (hot/notcold/cold/unknown) is the
one DHAT's accesses per byte give with memprofd's measured mean lifetime (DHAT's is in
instructions) under MemProf's thresholds (reporter/classify.h); beside it, each group's
class from memprofd's contexts under its function names merged (as DHAT's are), which
leaves out the classes memprofd gives each call site apart (`unknown` where a small one
drew no sample).
--arg-template formats the size argument ('--num={}' for leveldb's db_bench). The fit
holds only if SMALL and 2*SMALL do the work BIG does: db_bench's 4 MB write buffer fills
at ~35,000 keys, so below that no log is rotated, no table written or read, and a fit
from 15,000 keys puts the writes on the first log's buffer (idle at 300,000) and leaves
out the table and compaction contexts (6 DHAT contexts hold 90% at --small 15000, 23 at
--small 60000). Diagnostics beside the criterion: the Spearman of accesses per byte
allocated (no lifetime) and of density with memprofd's lifetimes on both sides, which
tell an estimate's error from a lifetime's (exact mode's probes lengthen short lives).
Without --small, DHAT runs --big itself and nothing is fitted: at 300,000 keys db_bench
makes 0.29M iterators for its Gets, where the fit from 60,000 and 120,000 (more level-0
tables per Get there) put 1.04M. Even at --big the two runs need not do the same work
where it depends on timing: how many level-0 tables a Get consults is what db_bench's
background compaction has left, and valgrind changes its pace (an Intel host: DHAT
1.18M `NewIterator` objects, memprofd 0.29M). The bench prints, per selected context,
whether the allocation counts differ by more than 10% and est/DHAT per object (each
side's total over its own count); `--benchmarks=fillrandom,compact,readrandom` makes the
reads consult compacted tables only, and every count of the reads then matches.
Usage: bench/access_dhat_cmd.py --memprofd build/cli/memprofd --big 100 --small 4
       -- /path/lua bench.lua
       bench/access_dhat_cmd.py --memprofd build/cli/memprofd --big 300000 --small 60000
       --arg-template=--num={} -- /path/db_bench --benchmarks=fillrandom,compact,readrandom
       (db_bench built by bench/watch_real.py's build_leveldb, or bench/access_dhat_cmd.py
       --build-leveldb WORKDIR, which prints its path)"""
import argparse
import json
import math
import os
import subprocess
import tempfile
import time

HOT_DENSITY, COLD_DENSITY, COLD_MIN_LIFE_S = 1000.0, 0.05, 200.0   # reporter/classify.h
ALLOCATORS = {"malloc", "calloc", "realloc", "free", "operator new", "operator new[]",
              "reallocarray", "posix_memalign", "aligned_alloc", "memalign"}


def ranks(v):
    order = sorted(range(len(v)), key=lambda i: v[i])
    r = [0.0] * len(v)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2.0
        i = j + 1
    return r


def spearman(x, y):
    if len(x) < 3:
        return float("nan")
    rx, ry = ranks(x), ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sx = math.sqrt(sum((a - mx) ** 2 for a in rx))
    sy = math.sqrt(sum((b - my) ** 2 for b in ry))
    return sxy / (sx * sy) if sx and sy else float("nan")


def short_name(n):
    """C++ names as both sides spell them differently (DHAT: 'AllocateNewBlock' for an
    inlined frame, memprofd 'leveldb::Arena::AllocateNewBlock'): no parameters, no
    clone suffix, last scope component only; 'operator new[](unsigned long)' ->
    'operator new[]'."""
    n = n.split(" [clone")[0].replace("(anonymous namespace)::", "")
    if n.startswith("operator"):
        return n.split("(")[0]
    return n.split("(")[0].rsplit("::", 1)[-1]


def key_of(names, depth):
    """The first depth names, allocators left out, nothing past main (DHAT stops there)."""
    names = [short_name(n) for n in names]
    names = [n for n in names if n not in ALLOCATORS and n != "[root]"]
    if "main" in names:
        names = names[:names.index("main") + 1]
    return tuple(names[:depth])


def fn_of(frame):
    """'0x1234: luaH_resize (ltable.c:512)' -> 'luaH_resize'."""
    f = frame.split(": ", 1)[1] if ": " in frame else frame
    return f.split(" (")[0].strip()


def dhat_class(density, life_s):
    """MemProf's class of a density (accesses per byte per second) and mean lifetime."""
    if density > HOT_DENSITY:
        return "hot"
    if density < COLD_DENSITY and life_s >= COLD_MIN_LIFE_S:
        return "cold"
    return "notcold"


def realloc_shim(tmp):
    """bench/realloc_split.c built into tmp: realloc as malloc + copy + free."""
    so = os.path.join(tmp, "librealloc_split.so")
    subprocess.run(["cc", "-O2", "-g", "-fPIC", "-shared", "-o", so,
                    os.path.join(os.path.dirname(os.path.abspath(__file__)), "realloc_split.c")],
                   check=True)
    return so


def dhat_contexts(cmd, small, depth, tmp, cache=None, split=True, unit="bytes", info=None):
    """cache: DHAT's JSON of an earlier run of the same command (written when absent).
    split: every realloc's result under the realloc's own stack (MemProf's and memprofd's
    rule) through bench/realloc_split.c; DHAT itself keeps a grown or shrunk block under
    its first allocation's stack (dh_main.c renew_block keeps the Block and its ec)."""
    out = cache or os.path.join(tmp, "dhat.json")
    if not (cache and os.path.exists(cache)):
        env, opts = dict(os.environ), []
        if split:
            # valgrind replaces every realloc it finds by default, the shim's included.
            env["LD_PRELOAD"] = realloc_shim(tmp)
            opts = ["--soname-synonyms=somalloc=no-such-library"]
        subprocess.run(["valgrind", "--tool=dhat", *opts, "--dhat-out-file=" +
                        os.path.abspath(out), *cmd, small], check=True, capture_output=True,
                       cwd=tmp, env=env)
    d = json.load(open(out))
    if info is not None:
        info["te"] = d["te"]   # instructions the whole run executed
    got = {}
    for p in d["pps"]:
        key = key_of([fn_of(d["ftbl"][i]) for i in p["fs"]], depth)
        g = got.setdefault(key, {"acc": 0.0, "bytes": 0, "blocks": 0, "life": 0})
        g["acc"] += (p["rb"] + p["wb"]) / (1.0 if unit == "bytes" else 8.0)
        g["bytes"] += p["tb"]
        g["blocks"] += p["tbk"]
        g["life"] += p["tl"]
    return got


def native_seconds(cmd, big, tmp):
    """Wall seconds of one run of the command alone: with DHAT's instruction count at the
    same size, the rate that turns DHAT's lifetimes (instructions) into time."""
    t0 = time.monotonic()
    subprocess.run([*cmd, big], check=True, capture_output=True, cwd=tmp)
    return time.monotonic() - t0


def memprofd_contexts(memprofd, cmd, big, freq, depth, tmp, unit, alloc="exact"):
    db = os.path.join(tmp, "m.db")
    p = subprocess.run([memprofd, "record", "--db", db, "--alloc", alloc, "--access", "soft",
                        "--freq", str(freq), "--", *cmd, big], capture_output=True,
                       text=True, cwd=tmp)
    if p.returncode != 0:
        raise RuntimeError("record: " + p.stderr)
    print("db: " + db)
    return memprofd_read(memprofd, db, depth, unit), p.stderr.strip().splitlines()


def memprofd_read(memprofd, db, depth, unit):
    field = "est_access_bytes" if unit == "bytes" else "est_accesses"
    ctxs = json.loads(subprocess.run([memprofd, "query", "contexts", "--db", db, "--format",
                                      "json", "--limit", "0"], check=True, capture_output=True,
                                     text=True).stdout)
    got = {}
    for c in ctxs:
        key = key_of([f.get("function") or "?" for f in c["frames"]], depth)
        g = got.setdefault(key, {"est": 0, "samples": 0, "bytes": 0, "count": 0, "life_ms": 0,
                                 "cls": {}, "acc": 0, "acc_lo": 0, "acc_hi": 0})
        # est_accesses' 95% interval, for the interval-aware rank (main())
        g["acc"] += c["est_accesses"]
        g["acc_lo"] += c.get("est_accesses_lo") or 0
        g["acc_hi"] += c.get("est_accesses_hi") or c["est_accesses"]
        g["cls"][c.get("class")] = g["cls"].get(c.get("class"), 0) + c["total_size"]
        if c.get(field) is None:
            raise SystemExit("access_dhat_cmd: %s: no %s (a store before schema 17, or "
                             "--alloc sampled)" % (db, field))
        g["est"] += c[field]
        g["samples"] += c["access_samples"]
        g["bytes"] += c["total_size"]
        g["count"] += c["alloc_count"]
        g["life_ms"] += c["total_lifetime_ms"]
    return got


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--big", type=int, required=True)
    ap.add_argument("--small", type=int, default=0,
                    help="DHAT runs SMALL and 2*SMALL, fitted to BIG; 0: DHAT runs BIG itself "
                    "(no fit: the ground truth where a program's work per unit changes with "
                    "its size, at valgrind's cost)")
    ap.add_argument("--freq", type=int, default=1000)
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--share", type=float, default=0.9)
    ap.add_argument("--arg-template", default="{}")
    ap.add_argument("--alloc", choices=("exact", "sampled"), default="exact",
                    help="memprofd's allocation mode: sampled (the default mode) estimates "
                    "each context's objects from its samples and has no est_access_bytes "
                    "(use --unit accesses)")
    ap.add_argument("--unit", choices=("bytes", "accesses"), default="bytes",
                    help="bytes: est_access_bytes vs DHAT's bytes read+written; accesses: "
                    "est_accesses (MemProf's unit) vs DHAT's bytes / 8")
    ap.add_argument("--build-leveldb", metavar="WORKDIR")
    ap.add_argument("--reuse-db", metavar="DB", help="read an earlier recording, record nothing")
    ap.add_argument("--native-seconds", type=float, help="the command's wall time at --big "
                    "(measured by one run without instrumentation when not given)")
    ap.add_argument("--dhat-cache", metavar="JSON", help="reuse (or keep) DHAT's output "
                    "(JSON.split and JSON.split.2x with --dhat-realloc split)")
    ap.add_argument("--dhat-realloc", choices=("split", "native"), default="split",
                    help="split: DHAT files each realloc's result under the realloc's stack, "
                    "as memprofd and MemProf do (bench/realloc_split.c); native: under the "
                    "block's first allocation, DHAT's own rule")
    ap.add_argument("cmd", nargs="*")
    a = ap.parse_args()
    if a.build_leveldb:
        import watch_real   # bench/: apt-get source through a private sources dir
        print(watch_real.build_leveldb(a.build_leveldb))
        return
    tmp = tempfile.mkdtemp(prefix="access_dhat_cmd.")
    split = a.dhat_realloc == "split"
    cache = a.dhat_cache and a.dhat_cache + (".split" if split else "")
    info, info2 = {}, {}
    if a.small:
        dh = dhat_contexts(a.cmd, a.arg_template.format(a.small), a.depth, tmp, cache, split,
                           a.unit, info)
        # A second DHAT run at twice the size: each context's accesses are fitted as
        # fixed + per-unit work (a lexer's buffers are filled once, whatever the size),
        # then extrapolated to --big; linear scaling would put start-up work among the
        # hot.
        dh2 = dhat_contexts(a.cmd, a.arg_template.format(2 * a.small), a.depth, tmp,
                            cache and cache + ".2x", split, a.unit, info2)
        # Bytes, blocks and lifetimes too: a cache sized once holds the same bytes at
        # every size while its accesses grow, so its density at --big is not the small
        # run's.
        for k, d in dh.items():
            d2 = dh2.get(k, {f: 0 for f in d})
            d["big"], d["bytes"], d["blocks"], d["life"] = (
                max(d[f] + (d2[f] - d[f]) / a.small * (a.big - a.small), 0.0)
                for f in ("acc", "bytes", "blocks", "life"))
        te_big = info["te"] + (info2["te"] - info["te"]) / a.small * (a.big - a.small)
    else:   # DHAT at --big itself: what it counted, no fit
        dh = dhat_contexts(a.cmd, a.arg_template.format(a.big), a.depth, tmp,
                           cache and cache + ".big", split, a.unit, info)
        for d in dh.values():
            d["big"] = d["acc"]
        te_big = info["te"]
    # DHAT's lifetimes are in instructions: in seconds at the program's own rate (its
    # instructions at --big, fitted as above, over its native wall time), so that both
    # densities take MemProf's 1 ms lifetime floor alike (memprofd's lifetimes are ns).
    native_s = a.native_seconds or native_seconds(a.cmd, a.arg_template.format(a.big), tmp)
    s_per_instr = native_s / max(te_big, 1)
    print("DHAT lifetimes: %.3g instructions at --big over %.2f s native: %.2f instructions "
          "per ns" % (te_big, native_s, te_big / native_s / 1e9))
    if a.reuse_db:
        mp, log = memprofd_read(os.path.abspath(a.memprofd), a.reuse_db, a.depth, a.unit), []
    else:
        mp, log = memprofd_contexts(os.path.abspath(a.memprofd), a.cmd,
                                    a.arg_template.format(a.big), a.freq, a.depth, tmp, a.unit,
                                    a.alloc)
    total = sum(g["big"] for g in dh.values()) or 1
    keys = sorted(dh, key=lambda k: -dh[k]["big"])
    sel, acc = [], 0.0
    for k in keys:
        if acc >= a.share * total:
            break
        sel.append(k)
        acc += dh[k]["big"]
    est, tru, dm, dt, ratios, reached, sel_bytes, agree = [], [], [], [], [], 0, 0, 0
    agree_group = 0
    obj_ratios, count_off, count_off_bytes = [], [], 0   # per object; counts that differ
    pbm, pbt, dt_ml, dt_in = [], [], [], []   # per byte; DHAT's density on memprofd's
    # lifetimes; DHAT's density on its lifetimes in instructions (no floor)
    unit = "bytes read+written" if a.unit == "bytes" else "accesses (DHAT: bytes / 8)"
    print("unit: %s; DHAT groups reallocs %s" % (unit, "as memprofd does (realloc_split.c)"
                                                 if split else "under the block's first stack"))
    print("| context (first %d functions) | DHAT (fitted) | memprofd %s | samples | "
          "density DHAT | density memprofd | class DHAT | class memprofd |" % (a.depth, "est_access_bytes" if a.unit == "bytes"
                                                 else "est_accesses"))
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- | --- |")
    for k in sel:
        d, m = dh[k], mp.get(k, {"est": 0, "samples": 0, "bytes": 0, "count": 0, "life_ms": 0,
                                 "cls": {}})
        t = d["big"]
        est.append(m["est"])
        tru.append(t)
        sel_bytes += d["bytes"]
        if m["samples"]:
            reached += d["bytes"]
        if m["est"] and t:
            ratios.append(m["est"] / t)
            if m["count"] and d["blocks"]:
                obj_ratios.append(m["est"] / m["count"] / (t / d["blocks"]))
        # The two runs' work: a program whose work depends on timing (db_bench's reads
        # consult as many level-0 tables as its background compaction has left, which
        # valgrind's pace changes) allocates a context's objects a different number of
        # times under DHAT than under memprofd; totals then differ before any estimate.
        if d["blocks"] and abs(m["count"] - d["blocks"]) > 0.1 * d["blocks"]:
            count_off.append((m["count"] / d["blocks"], k))
            count_off_bytes += d["bytes"]
        life_d = d["life"] / max(d["blocks"], 1)
        dt.append(t / max(d["bytes"], 1) / max(life_d * s_per_instr, 0.001))
        dt_in.append(t / max(d["bytes"], 1) / max(life_d, 1))
        life_m = m["life_ms"] / max(m["count"], 1) / 1000.0
        dm.append(m["est"] / max(m["bytes"], 1) / max(life_m, 0.001) if m["count"] else 0)
        pbm.append(m["est"] / max(m["bytes"], 1))
        pbt.append(t / max(d["bytes"], 1))
        dt_ml.append(pbt[-1] / max(life_m, 0.001))
        # MemProf's thresholds are in accesses: DHAT's bytes / 8 (a word per access).
        t_acc = t / 8.0 if a.unit == "bytes" else t
        truth = dhat_class(t_acc / max(d["bytes"], 1) / max(life_m, 0.001), life_m)
        if m["bytes"]:
            agree += d["bytes"] * m["cls"].get(truth, 0) / m["bytes"]
        # The class of the group as DHAT's is taken: memprofd's contexts under these
        # function names merged (its density dm[-1], in accesses as t_acc), not each alone.
        if m["samples"] and dhat_class(dm[-1] / 8.0 if a.unit == "bytes" else dm[-1],
                                       life_m) == truth:
            agree_group += d["bytes"]
        mcls = max(m["cls"], key=m["cls"].get) if m["cls"] else "-"
        print("| %s | %.3g | %.3g | %d | %.3g | %.3g | %s | %s |" % (
            " <- ".join(k), t, m["est"], m["samples"], dt[-1], dm[-1], truth, mcls))
    gm = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else float("nan")
    # Interval-aware: pairs the two tools order differently, and how many of them lie
    # within memprofd's 95% intervals (est_accesses_lo/hi scaled to the density).
    lo_hi = []
    for k, d_m in zip(sel, dm):
        m = mp.get(k, {})
        f = d_m / m["acc"] if m.get("acc") else 0.0
        lo_hi.append((m.get("acc_lo", 0) * f, m.get("acc_hi", 0) * f))
    disc = within = 0
    for i in range(len(sel)):
        for j in range(i + 1, len(sel)):
            if (dm[i] - dm[j]) * (dt[i] - dt[j]) < 0:
                disc += 1
                if lo_hi[i][0] <= lo_hi[j][1] and lo_hi[j][0] <= lo_hi[i][1]:
                    within += 1
    print("\n%d DHAT contexts hold %.0f%% of its total; matched with samples: %d" %
          (len(sel), 100 * acc / total, len(ratios)))
    print("Spearman est vs DHAT: %.2f; density: %.2f" %
          (spearman(est, tru), spearman(dm, dt)))
    # Where the two densities part: the estimate per byte, or the lifetimes (DHAT's in
    # instructions under valgrind; memprofd's in ns, which exact mode's probes lengthen).
    print("  diagnostics: Spearman per byte allocated (no lifetime): %.2f; density with "
          "memprofd's lifetimes on both sides: %.2f; with DHAT's in instructions, unfloored: "
          "%.2f" % (spearman(pbm, pbt), spearman(dm, dt_ml), spearman(dm, dt_in)))
    print("  pairs ordered differently: %d of %d, %d of them within memprofd's intervals"
          % (disc, len(sel) * (len(sel) - 1) // 2, within))
    print("est/DHAT geomean %.2f [%.2f, %.2f]; bytes of those contexts with any sample: %.0f%%"
          % (gm, min(ratios or [float("nan")]), max(ratios or [float("nan")]),
             100 * reached / max(sel_bytes, 1)))
    gmo = (math.exp(sum(map(math.log, obj_ratios)) / len(obj_ratios)) if obj_ratios
           else float("nan"))
    print("  per object (each side's total over its own allocation count): geomean %.2f" % gmo)
    if count_off:
        worst = max(count_off, key=lambda c: abs(math.log(c[0])) if c[0] else float("inf"))
        print("  allocation counts differ from DHAT's by > 10%% in %d of %d contexts (%.0f%% of "
              "their bytes; the widest %s: %.2fx): the two runs did different work there"
              % (len(count_off), len(sel), 100 * count_off_bytes / max(sel_bytes, 1),
                 " <- ".join(worst[1]), worst[0]))
    else:
        print("  allocation counts within 10%% of DHAT's in all %d contexts" % len(sel))
    print("class agreement with DHAT's: %.0f%% of those contexts' bytes"
          % (100 * agree / max(sel_bytes, 1)))
    print("  diagnostics: with memprofd's contexts merged as DHAT's are (by the same function "
          "names), each group's class from its summed estimate: %.0f%%"
          % (100 * agree_group / max(sel_bytes, 1)))
    for line in log:
        if any(w in line for w in ("access: soft", "recorded", "without frames", "DWARF CFI")):
            print(line)


if __name__ == "__main__":
    main()
