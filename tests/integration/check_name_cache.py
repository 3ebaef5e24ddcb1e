#!/usr/bin/env python3
"""name_cache (issue 18): record keeps the names DWARF gave (ELF symbol, lines, inline
chains) per build-id under $XDG_CACHE_HOME/memprofd/names, so the next run's final flush
does not open the debug files again. Checks, on one exact-mode workload:
- a run without any cache (no HOME, no XDG_CACHE_HOME) is the reference: every later
  run's `query contexts` frames (names, files, lines, columns, inline flags) equal it;
- the first run with a cache writes its files and hits nothing; the second hits (phase
  trace line `name cache: H hits, M misses, ...`) and writes nothing;
- damaged files are ignored whole and rewritten: a flipped byte (CRC), a file cut short,
  a hostile payload with a valid CRC (a string length past the end, a count past
  the bound), a symlink in place of a file; none changes the answer;
- the directory holds at most NC_DIR_FILES_MAX files: the oldest written go.
Usage: check_name_cache.py --memprofd PATH --workload PATH"""
import argparse
import glob
import json
import os
import re
import shutil
import struct
import sys
import tempfile
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpdtest  # noqa: E402

STATS = re.compile(r"name cache: (\d+) hits, (\d+) misses, (\d+) files read, (\d+) damaged "
                   r"\(ignored\), (\d+) written")
HEAD = 32
DIR_FILES_MAX = 512   # namecache.h NC_DIR_FILES_MAX


def frames(ctxs):
    return sorted(json.dumps([{k: f.get(k) for k in ("function", "file", "line", "column",
                                                    "inlined", "address", "build_id")}
                              for f in c["frames"]]) for c in ctxs)


def run(a, d, n, cache):
    env = dict(os.environ, MEMPROFD_TRACE_PHASES="1")
    env.pop("XDG_CACHE_HOME", None)
    env.pop("HOME", None)
    if cache:
        env["XDG_CACHE_HOME"] = cache
    db = os.path.join(d, "r%d.db" % n)
    cmd = [a.memprofd, "record", "--alloc", "exact", "--access", "off", "--db", db, "--", a.workload]
    p = mpdtest.run(cmd, timeout=120, env=env)
    if p.returncode != 0:
        sys.exit("FAIL: run %d: %s" % (n, mpdtest.describe(p)))
    m = STATS.search(p.stderr)
    st = tuple(int(x) for x in m.groups()) if m else None
    if cache and not st:
        sys.exit("FAIL: run %d printed no name cache line:\n%s" % (n, p.stderr))
    return frames(mpdtest.query_contexts(a.memprofd, db)), st


def hostile(path, how):
    """A payload that passes the CRC but not the parser's checks."""
    b = bytearray(open(path, "rb").read())
    pay = b[HEAD:]
    idlen = struct.unpack_from("<I", pay, 0)[0]
    first = 4 + idlen + 1          # the first entry: u64 offset, then its function name
    if how == "long string":
        struct.pack_into("<I", pay, first + 8, 0x7FFFFFF0)
    else:                          # a count of entries past the bound
        struct.pack_into("<I", b, 8 + 4, 0xFFFFFFFF)
    struct.pack_into("<I", b, 8 + 16, zlib.crc32(bytes(pay)) & 0xFFFFFFFF)
    b[HEAD:] = pay
    open(path, "wb").write(bytes(b))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--workload", required=True)
    a = ap.parse_args()
    mpdtest.require_bpf()
    d = tempfile.mkdtemp(prefix="name_cache.")
    cache = os.path.join(d, "cache")
    names = os.path.join(cache, "memprofd", "names")
    ref, _ = run(a, d, 0, None)
    if not ref:
        sys.exit("FAIL: the reference run stored no context")
    # Stale files of other build-ids beyond the directory's bound (NC_DIR_FILES_MAX):
    # the oldest written go when a run saves.
    os.makedirs(names, mode=0o700)
    for i in range(DIR_FILES_MAX + 8):
        f = os.path.join(names, "%040x" % i)
        open(f, "wb").write(b"stale")
        os.utime(f, (1e9, 1e9))
    n = 1
    got, st = run(a, d, n, cache)
    left = len(os.listdir(names))
    files = sorted(f for f in glob.glob(os.path.join(names, "*")) if os.path.getmtime(f) > 1e9)
    if left > DIR_FILES_MAX:
        sys.exit("FAIL: %d files left in the cache directory (at most %d)" % (left, DIR_FILES_MAX))
    for f in glob.glob(os.path.join(names, "*")):
        if f not in files:
            os.unlink(f)
    errs = []
    if got != ref:
        errs.append("run 1 (filling the cache) differs from the run without one")
    if st[0] or not st[4] or not files:
        errs.append("run 1: expected no hit and files written, got %s, files %s" % (st, files))
    n += 1
    got, st = run(a, d, n, cache)
    if got != ref:
        errs.append("run 2 (from the cache) differs from the run without one")
    if not st[0] or st[4] or st[3]:
        errs.append("run 2: expected hits, nothing written or damaged, got %s" % (st,))
    print("cache: %d files; run 2: %d hits, %d misses" % (len(files), st[0], st[1]))
    big = max(files, key=os.path.getsize)
    for how in ("flipped byte", "cut short", "long string", "huge count", "symlink"):
        for f in files:
            if how == "flipped byte":
                b = bytearray(open(f, "rb").read())
                b[len(b) // 2] ^= 0x40
                open(f, "wb").write(bytes(b))
            elif how == "cut short":
                os.truncate(f, 20)
            elif how == "symlink":
                os.replace(f, f + ".real")
                os.symlink(f + ".real", f)
            else:
                hostile(f, how)
        n += 1
        got, st = run(a, d, n, cache)
        if got != ref:
            errs.append("%s: the answer differs from the run without a cache" % how)
        if st[3] != len(files) or st[0] or st[4] != len(files):
            errs.append("%s: expected %d damaged files ignored and rewritten, no hit; got %s" %
                        (how, len(files), st))
        if how == "symlink" and any(os.path.islink(f) for f in files):
            errs.append("symlink: a symlink was left in place of a cache file")
        for f in glob.glob(os.path.join(names, "*.real")):
            os.unlink(f)
        print("%s: %s" % (how, st))
    if os.path.getsize(big) < HEAD:
        errs.append("the rewritten cache file is empty")
    shutil.rmtree(d)
    if errs:
        sys.exit("FAIL: " + "; ".join(errs))
    print("PASS: the name cache is used, and damaged files are ignored and rewritten")


if __name__ == "__main__":
    main()
