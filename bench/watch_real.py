#!/usr/bin/env python3
"""watch_real: the default mode's access densities (sampled allocations + the watch) on two
real programs built from Debian source packages, against exact mode with the soft source
at 1 kHz, recorded one after the other on the same inputs:
- lua5.4 running bench/watch_real/tables.lua (a table/string-heavy script);
- leveldb's db_bench (C++), fillrandom then readrandom.
The sources come from `apt-get source` through a private sources dir (deb-src of the
Debian release in /etc/os-release), nothing changed on the system; they are built with
frame pointers under WORKDIR. Per program, over the contexts holding 90% of the default
mode's bytes (matched to exact mode's by their frames):
  est%     share of those bytes in contexts with a density estimate from accesses seen
  watched% share in contexts with accesses seen or watched (watch_ns > 0: a density of 0
           with an upper bound is an estimate too)
  decided% share in contexts whose class is not unknown
  spearman rank correlation of the default mode's densities with exact mode's
  agree%   share of bytes whose class is exact mode's
  logerr   bytes-weighted mean |log10(default density / exact density)| over the matched
           contexts where both are > 0 (a rank over 4-6 contexts moves in steps; this
           says how far the densities are, and exact mode at 1 kHz ranks itself >= 0.8
           in only about half of pairs of its own runs)
and the watch's own counts (windows, traps, trap cost; the sampler's in-process watches
and their traps) from record's stderr.
With --dhat, the same contexts are also ranked against valgrind DHAT's (the reference
for access counts; matched by their first DHAT_KEY_FRAMES functions and lines; lua runs
as many rounds under DHAT as a plain run does in --seconds, so that lifetimes compare): DHAT's
density is accessed bytes / bytes / average lifetime in instructions; the default mode's
Spearman against it is given, and exact mode's for comparison.
Usage: bench/watch_real.py --build BUILDDIR [--workdir DIR] [--seconds 5] [--csv FILE]
                           [--sampler-watch-ppm N] [--details] [--dhat [--dhat-rounds N]]"""
import argparse
import csv
import json
import math
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BYTES_SHARE = 0.9
WATCH_RE = re.compile(r"watch: (\d+) windows on (\d+) objects, (\d+) traps \(([\d.]+) us each")
INPROC_RE = re.compile(r"watch: in-process: (\d+) watches, (\d+) traps")


def sh(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit("watch_real: %s: exit %d: %s" % (" ".join(cmd), r.returncode, r.stderr[-2000:]))
    return r


def fetch(work, pkg):
    """apt-get source PKG into work/src through a private deb-src list."""
    apt, src = os.path.join(work, "apt"), os.path.join(work, "src")
    os.makedirs(os.path.join(apt, "lists", "partial"), exist_ok=True)
    os.makedirs(src, exist_ok=True)
    code = "bookworm"
    for line in open("/etc/os-release"):
        if line.startswith("VERSION_CODENAME="):
            code = line.split("=", 1)[1].strip().strip('"')
    with open(os.path.join(apt, "debsrc.list"), "w") as f:
        f.write("deb-src http://deb.debian.org/debian %s main\n" % code)
    opts = ["-o", "Dir::Etc::SourceList=/dev/null", "-o", "Dir::Etc::SourceParts=" + apt,
            "-o", "Dir::State::Lists=" + os.path.join(apt, "lists")]
    if not os.listdir(os.path.join(apt, "lists")) or len(os.listdir(os.path.join(apt, "lists"))) < 2:
        sh(["apt-get", "-q", *opts, "update"])
    if not any(n.startswith(pkg + "_") and n.endswith(".orig.tar.gz") for n in os.listdir(src)):
        sh(["apt-get", "-q", *opts, "source", "--download-only", pkg], cwd=src)
    orig = next(n for n in os.listdir(src) if n.startswith(pkg + "_") and ".orig.tar" in n)
    sh(["tar", "xf", orig], cwd=src)
    top = sh(["tar", "tf", orig], cwd=src).stdout.split("\n", 1)[0].split("/", 1)[0]
    return os.path.join(src, top)


def build_lua(work):
    d = fetch(work, "lua5.4")
    exe = os.path.join(d, "src", "lua")
    if not os.path.exists(exe):
        sh(["make", "-C", "src", "posix", "MYCFLAGS=-g -fno-omit-frame-pointer"], cwd=d)
    return exe


def build_leveldb(work):
    d = fetch(work, "leveldb")
    b = os.path.join(d, "b")
    exe = os.path.join(b, "db_bench")
    if not os.path.exists(exe):
        os.makedirs(b, exist_ok=True)
        sh(["cmake", "..", "-DCMAKE_BUILD_TYPE=Release", "-DLEVELDB_BUILD_TESTS=OFF",
            "-DLEVELDB_BUILD_BENCHMARKS=ON", "-DCMAKE_CXX_FLAGS=-g -fno-omit-frame-pointer",
            "-DCMAKE_C_FLAGS=-g -fno-omit-frame-pointer"], cwd=b)
        sh(["make", "-j2", "db_bench"], cwd=b)
    return exe


def record(mpd, db, argv, extra, env=None):
    if os.path.exists(db):
        os.remove(db)
    r = sh([mpd, "record", "--db", db, *extra, "--", *argv], timeout=900, env=env)
    m, i = WATCH_RE.search(r.stderr), INPROC_RE.search(r.stderr)
    ctxs = json.loads(sh([mpd, "query", "contexts", "--db", db, "--format", "json",
                          "--limit", "0"]).stdout)
    return ctxs, (m.groups() if m else ("-",) * 4) + (i.groups() if i else ("-",) * 2)


def key(c):
    return tuple((f.get("function") or "", f.get("address") or "") for f in c["frames"])


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
    sxx = sum((a - mx) ** 2 for a in rx) ** 0.5
    syy = sum((b - my) ** 2 for b in ry) ** 0.5
    return sxy / (sxx * syy) if sxx and syy else float("nan")


DHAT_KEY_FRAMES = 4      # contexts matched with DHAT's by this many (function, line)
DHAT_LOC = re.compile(r"^0x[0-9A-Fa-f]+: (.*) \((?:in )?([^()]*)\)$")
ALLOCATORS = {"malloc", "calloc", "realloc", "free", "reallocarray", "memalign",
              "posix_memalign", "aligned_alloc", "operator new", "operator new[]"}


def fname(f):
    """A function's name without its arguments (C++ demanglers differ in those)."""
    return (f or "").split("(", 1)[0].strip()


def dhat_profile(work, tag, argv):
    """valgrind --tool=dhat on argv (once per workdir: its JSON is kept), per context key:
    [accessed bytes (reads + writes), bytes, lifetime (instructions, summed), blocks]."""
    out = os.path.join(work, "dhat-%s.json" % tag)
    if not os.path.exists(out):
        sh(["valgrind", "--tool=dhat", "--read-inline-info=yes", "--dhat-out-file=" + out + ".tmp",
            *argv], timeout=1800)
        os.rename(out + ".tmp", out)
    j = json.load(open(out))
    names = []
    for f in j["ftbl"]:
        m = DHAT_LOC.match(f)
        names.append((fname(m.group(1)), m.group(2)) if m else (f, ""))
    line = lambda loc: loc.rsplit(":", 1)[1] if ":" in loc else ""  # noqa: E731
    prof = {}
    for pp in j["pps"]:
        fs = [names[i] for i in pp["fs"]]
        while fs and (fs[0][0] in ALLOCATORS or "vgpreload" in fs[0][1]):
            fs.pop(0)
        k = tuple((n, line(loc)) for n, loc in fs[:DHAT_KEY_FRAMES])
        v = prof.setdefault(k, [0, 0, 0, 0])
        v[0] += pp.get("rb", 0) + pp.get("wb", 0)
        v[1] += pp["tb"]
        v[2] += pp["tl"]
        v[3] += pp["tbk"]
    return prof


def dhat_key(c):
    return tuple((fname(f.get("function")), str(f.get("line") or "")) for f in c["frames"]
                 if f.get("function"))[:DHAT_KEY_FRAMES]


def dhat_density(v):
    """Accessed bytes per byte per unit of average lifetime, as MemProf's density."""
    return v[0] / v[1] / (v[2] / v[3]) if v[1] and v[2] and v[3] else 0.0


def leaf(c, n=3):
    """The first n named frames, leaf first, short: what tells lua's contexts apart."""
    fs = ["%s:%s" % (fname(f["function"]).split("::")[-1], f.get("line") or "?")
          for f in c["frames"] if f.get("function")]
    return "<".join(fs[:n]) or "?"


def details(default, exact, dhat=None):
    """The contexts holding BYTES_SHARE of the bytes, one line each: what the ranking rests on."""
    ex = {key(c): c for c in exact}
    total = sum(c["total_size"] for c in default) or 1
    acc = 0
    print("  %6s %-52s %10s %10s %10s %6s %6s %9s %8s %8s" % (
        "bytes%", "leaf", "density", "exact", "dhat", "hits", "smpl", "watch_ms", "class", "exact"))
    for c in sorted(default, key=lambda c: -c["total_size"]):
        if acc >= BYTES_SHARE * total:
            break
        acc += c["total_size"]
        e = ex.get(key(c))
        v = (dhat or {}).get(dhat_key(c))
        print("  %5.1f%% %-52.52s %10.4g %10s %10s %6d %6d %9.2f %8s %8s" % (
            100.0 * c["total_size"] / total, leaf(c), c["lifetime_access_density"],
            "%.4g" % e["lifetime_access_density"] if e else "-",
            "%.4g" % dhat_density(v) if v else "-", c.get("watch_hits", 0),
            c["access_samples"], c.get("watch_ns", 0) / 1e6, c["class"],
            e["class"] if e else "-"))


def compare(default, exact, dhat=None):
    ex = {key(c): c for c in exact}
    total = sum(c["total_size"] for c in default)
    top, acc = [], 0
    for c in sorted(default, key=lambda c: -c["total_size"]):
        if acc >= BYTES_SHARE * total:
            break
        top.append(c)
        acc += c["total_size"]
    est = sum(c["total_size"] for c in top if c["access_samples"] > 0)
    watched = sum(c["total_size"] for c in top if c["access_samples"] > 0 or c.get("watch_ns", 0) > 0)
    decided = sum(c["total_size"] for c in top if c["class"] != "unknown")
    pairs = [(c, ex[key(c)]) for c in top if key(c) in ex]
    agree = sum(c["total_size"] for c, e in pairs if c["class"] == e["class"])
    rho = spearman([c["lifetime_access_density"] for c, _ in pairs],
                   [e["lifetime_access_density"] for _, e in pairs])
    both = [(c, e) for c, e in pairs
            if c["lifetime_access_density"] > 0 and e["lifetime_access_density"] > 0]
    wb = sum(c["total_size"] for c, _ in both)
    logerr = sum(c["total_size"] * abs(math.log10(c["lifetime_access_density"] /
                                                  e["lifetime_access_density"]))
                 for c, e in both) / wb if wb else float("nan")
    r = {"logerr": logerr}
    if dhat is not None:   # the valgrind reference: the default mode's ranking, and exact's
        dp = [(c, dhat[dhat_key(c)]) for c in top if dhat_key(c) in dhat]
        r["dhat_matched"] = len(dp)
        r["rho_dhat"] = spearman([c["lifetime_access_density"] for c, _ in dp],
                                 [dhat_density(v) for _, v in dp])
        ep = [(ex[key(c)], v) for c, v in dp if key(c) in ex]
        r["exact_rho_dhat"] = spearman([e["lifetime_access_density"] for e, _ in ep],
                                       [dhat_density(v) for _, v in ep])
    return dict(r, **{"contexts": len(top), "matched": len(pairs), "est": est / acc if acc else 0,
            "watched": watched / acc if acc else 0,
            "decided": decided / acc if acc else 0, "spearman": rho,
            "agree": agree / acc if acc else 0})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--workdir", default="/tmp/memprofd-watch-real")
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--csv")
    ap.add_argument("--details", action="store_true", help="per context: densities, traps, classes")
    ap.add_argument("--dhat", action="store_true", help="also rank against valgrind DHAT's "
                    "per-context accesses (run once per workdir, kept; lua for --dhat-seconds)")
    ap.add_argument("--dhat-rounds", type=int, help="lua's rounds under DHAT (default: what a "
                    "plain run does in --seconds, measured once)")
    ap.add_argument("--only", choices=("lua5.4", "leveldb"), help="one program only")
    ap.add_argument("--sampler-watch-ppm", help="MEMPROFD_SAMPLER_WATCH_PPM of the default-mode "
                    "runs (the sampler's in-process watches; 0: off)")
    a = ap.parse_args()
    env = dict(os.environ)
    if a.sampler_watch_ppm is not None:
        env["MEMPROFD_SAMPLER_WATCH_PPM"] = a.sampler_watch_ppm
    mpd = os.path.join(a.build, "cli", "memprofd")
    os.makedirs(a.workdir, exist_ok=True)
    lua = build_lua(a.workdir)
    dbb = build_leveldb(a.workdir)
    ldb = os.path.join(a.workdir, "leveldb-data")
    lua_argv = [lua, os.path.join(HERE, "watch_real", "tables.lua"), "200000"]
    dbb_argv = [dbb, "--benchmarks=fillrandom,readrandom", "--num=100000", "--db=" + ldb]
    rounds = a.dhat_rounds
    if a.dhat and not rounds and not os.path.exists(os.path.join(a.workdir, "dhat-lua5.4.json")):
        rounds = int(sh(lua_argv + [str(a.seconds)]).stdout.split()[-1])
    progs = [("lua5.4 tables.lua", lua_argv + [str(a.seconds)], lua_argv + ["0", str(rounds)]),
             ("leveldb db_bench", dbb_argv, dbb_argv)]
    rows = []
    for name, argv, dargv in progs:
        if a.only and not name.startswith(a.only):
            continue
        dh = dhat_profile(a.workdir, name.split()[0], dargv) if a.dhat else None
        tag = name.split()[0]
        d, w = record(mpd, os.path.join(a.workdir, "default-%s.db" % tag), argv, [], env)
        e, _ = record(mpd, os.path.join(a.workdir, "exact-%s.db" % tag), argv,
                      ["--alloc", "exact", "--access", "soft", "--freq", "1000"])
        r = compare(d, e, dh)
        if a.details:
            print(name)
            details(d, e, dh)
        r.update(program=name, windows=w[0], objects=w[1], traps=w[2], trap_us=w[3],
                 inproc=w[4], inproc_traps=w[5])
        rows.append(r)
    print("%-18s %5s %5s %6s %8s %8s %8s %7s %6s %8s %8s %6s %7s %7s %7s" % (
        "program", "ctx90", "match", "est%", "watched%", "decided%", "spearman", "agree%", "logerr",
        "windows", "objects", "traps", "trap_us", "inproc", "itraps"))
    for r in rows:
        if "rho_dhat" in r:
            print("%-18s vs DHAT: %d matched, spearman default %.3f, exact %.3f" % (
                r["program"], r["dhat_matched"], r["rho_dhat"], r["exact_rho_dhat"]))
    for r in rows:
        print("%-18s %5d %5d %5.1f%% %7.1f%% %7.1f%% %8.3f %6.1f%% %6.2f %8s %8s %6s %7s %7s %7s" % (
            r["program"], r["contexts"], r["matched"], 100 * r["est"], 100 * r["watched"],
            100 * r["decided"],
            r["spearman"], 100 * r["agree"], r["logerr"], r["windows"], r["objects"], r["traps"], r["trap_us"],
            r["inproc"], r["inproc_traps"]))
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()
