#!/usr/bin/env python3
"""check_export_values: `memprofd export folded --weight bytes|objects|accesses` and the
four pprof sample types against the database itself (python's sqlite3 over the mib,
stacks, frames and frame_lines tables of a bench/gen_store store), not against another
memprofd output: each folded line's value is its context's summed bytes, objects or
estimated accesses, in the export's order (bytes descending, then context id), contexts
worth 0 left out, with one folded frame per inline function of each return address; each
pprof sample's alloc_objects, alloc_space, accesses and lifetime (ms) values are the
context's sums, its locations the frames' offsets leaf first, each location's lines the
frame's DWARF lines (line numbers included). No BPF. Exits 0 pass, 1 fail, 77 skip (no
protoc for the pprof part, after the folded part passed)."""
import argparse
import gzip
import os
import shutil
import sqlite3
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_pprof import parse_text_format  # noqa: E402

SKIP = 77
BINARY = "9e00000000000000"


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, **kw)
    if r.returncode != 0:
        fail("%s: exit %d: %s" % (" ".join(cmd), r.returncode, r.stderr.decode(errors="replace")))
    return r.stdout


def contexts_from_db(path):
    """The binary's contexts in export order, each with its sums and its frames."""
    db = sqlite3.connect("file:%s?mode=ro" % path, uri=True)
    rows = db.execute(
        "SELECT m.context_id, sum(m.alloc_count), sum(m.total_size), sum(m.total_access_count),"
        " sum(m.total_lifetime_ns), s.frames FROM mib m JOIN contexts c ON c.id = m.context_id"
        " JOIN binaries b ON b.id = c.binary_id JOIN stacks s ON s.id = c.stack_id"
        " WHERE m.alloc_count > 0 AND b.build_id = ? GROUP BY m.context_id", (BINARY,)).fetchall()
    rows.sort(key=lambda r: (-r[2], r[0]))
    out = []
    for cid, objects, size, accesses, life_ns, blob in rows:
        frames = []
        for (fid,) in struct.iter_unpack("<q", blob):
            offset, func = db.execute("SELECT offset, function FROM frames WHERE id = ?",
                                      (fid,)).fetchone()
            lines = db.execute("SELECT function, line FROM frame_lines WHERE frame_id = ?"
                               " ORDER BY depth", (fid,)).fetchall()
            frames.append({"offset": offset, "function": func, "lines": lines})
        out.append({"id": cid, "objects": objects, "bytes": size, "accesses": accesses,
                    "lifetime_ms": life_ns // 10**6, "frames": frames})
    db.close()
    if len(out) < 100:
        fail("the store has only %d contexts for %s" % (len(out), BINARY))
    return out


def check_folded(a, path, ctxs):
    for weight in ("bytes", "objects", "accesses"):
        text = run([a.memprofd, "export", "folded", "--db", path, "--binary", BINARY,
                    "--weight", weight]).decode()
        lines = text.splitlines()
        want = [c for c in ctxs if c[weight]]
        if len(lines) != len(want):
            fail("folded --weight %s: %d lines, the database has %d contexts worth > 0" % (
                weight, len(lines), len(want)))
        for i, (line, c) in enumerate(zip(lines, want)):
            stack, _, value = line.rpartition(" ")
            if int(value) != c[weight]:
                fail("folded --weight %s: line %d value %s, the database says %d" % (
                    weight, i, value, c[weight]))
            nframes = sum(max(1, len(f["lines"])) for f in c["frames"])
            if len(stack.split(";")) != nframes:
                fail("folded: line %d has %d frames, the database %d (inline expanded)" % (
                    i, len(stack.split(";")), nframes))
            if stack.split(";")[0] != "main":
                fail("folded: line %d does not start at the root: %r" % (i, stack[:60]))
        if weight == "accesses" and len(want) == len(ctxs):
            fail("folded: no context without accesses to leave out")
        print("folded --weight %s: %d lines equal to the database" % (weight, len(lines)))


def check_pprof(a, path, ctxs, work):
    if not shutil.which("protoc"):
        print("SKIP: protoc not installed (Debian package protobuf-compiler)")
        sys.exit(SKIP)
    gz = os.path.join(work, "p.pb.gz")
    run([a.memprofd, "export", "pprof", "--db", path, "--binary", BINARY, "-o", gz])
    with open(gz, "rb") as f:
        raw = gzip.decompress(f.read())
    proto_dir, proto_name = os.path.split(os.path.abspath(a.proto))
    p = parse_text_format(run(["protoc", "--proto_path=" + proto_dir, "--decode",
                               "perftools.profiles.Profile", proto_name], input=raw).decode())
    st = p["string_table"]
    types = [(st[t.get("type", [0])[0]], st[t.get("unit", [0])[0]]) for t in p["sample_type"]]
    if types != [("alloc_objects", "count"), ("alloc_space", "bytes"), ("accesses", "count"),
                 ("lifetime", "milliseconds")]:
        fail("pprof sample types %r" % types)
    locs = {l["id"][0]: l for l in p["location"]}
    funcs = {f["id"][0]: st[f.get("name", [0])[0]] for f in p["function"]}
    samples = p["sample"]
    if len(samples) != len(ctxs):
        fail("pprof: %d samples, the database has %d contexts" % (len(samples), len(ctxs)))
    nlines = 0
    for i, (s, c) in enumerate(zip(samples, ctxs)):
        vals = s["value"] + [0] * (4 - len(s["value"]))
        want = [c["objects"], c["bytes"], c["accesses"], c["lifetime_ms"]]
        if vals != want:
            fail("pprof sample %d values %r, the database says %r" % (i, vals, want))
        ids = s.get("location_id", [])
        if [locs[x].get("address", [0])[0] for x in ids] != [f["offset"] for f in c["frames"]]:
            fail("pprof sample %d: location addresses differ from the frames' offsets" % i)
        for x, f in zip(ids, c["frames"]):
            lines = locs[x].get("line", [])
            got = [(funcs[l["function_id"][0]], l.get("line", [0])[0]) for l in lines]
            want_lines = [(fn, ln) for fn, ln in f["lines"]] if f["lines"] else \
                ([(f["function"], 0)] if f["function"] else [])
            if got != want_lines:
                fail("pprof sample %d location %#x: lines %r, the database %r" % (
                    i, f["offset"], got, want_lines))
            nlines += len(lines)
    print("pprof: %d samples, 4 values each, %d lines equal to the database" % (len(samples),
                                                                                  nlines))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--gen-store", required=True)
    ap.add_argument("--proto", required=True)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="check_export_values.")
    try:
        path = os.path.join(work, "m.db")
        run([a.gen_store, "--db", path, "--contexts", "600", "--rows", "4000", "--binaries", "2",
             "--procs", "4", "--buckets", "60", "--seed", "9"])
        ctxs = contexts_from_db(path)
        check_folded(a, path, ctxs)
        check_pprof(a, path, ctxs, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
