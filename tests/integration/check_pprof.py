#!/usr/bin/env python3
"""check_pprof: `memprofd export pprof` decoded by two independent decoders, protoc
(`protoc --decode perftools.profiles.Profile reporter/profile.proto`) and the npm package
pprof-format (installed under a test-local folder), each compared sample by sample with
`memprofd query contexts --format json` on a store made by bench/gen_store (no BPF).
Exits 0 pass, 1 fail, 77 skip (npm registry unreachable, after the protoc part passed)."""
import argparse
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
# Where deploy/bootstrap.sh installs the pprof-format decoder (npm registry, pinned major).
NODE_PREFIX = os.environ.get("MEMPROFD_TEST_NODE_PREFIX", "/usr/local/lib/memprofd-test")


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, **kw)
    if r.returncode != 0:
        fail("%s: exit %d: %s" % (" ".join(map(str, cmd)), r.returncode,
                                  r.stderr.decode(errors="replace")[-2000:]))
    return r.stdout


def parse_text_format(text):
    """protoc's text format -> nested dicts of lists (every field is a list)."""
    root, stack = {}, []
    cur = root
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if line.endswith("{"):
            child = {}
            cur.setdefault(line[:-1].strip(), []).append(child)
            stack.append(cur)
            cur = child
        elif line == "}":
            cur = stack.pop()
        else:
            k, v = line.split(":", 1)
            v = v.strip()
            if v.startswith('"'):
                v = json.loads(v) if "\\" not in v else v.strip('"')
            elif v in ("true", "false"):
                v = v == "true"
            else:
                v = int(v)
            cur.setdefault(k.strip(), []).append(v)
    return root


def expected(ctx):
    return [ctx["alloc_count"], ctx["total_size"], ctx["est_accesses"], ctx["total_lifetime_ms"]]


def locations_of(ctx):
    """`query contexts` JSON frames grouped by return address: each address is one entry
    per function of its inline chain, leaf first, the inlined ones flagged (the last,
    the function the address is in, is not), so a group ends at inlined: false."""
    groups, cur = [], []
    for fr in ctx["frames"]:
        cur.append(fr)
        if not fr["inlined"]:
            groups.append(cur)
            cur = []
    if cur:
        fail("query: frames end inside an inline chain: %r" % cur)
    return groups


def check_protoc(raw, proto, contexts):
    proto_dir, proto_name = os.path.split(os.path.abspath(proto))
    text = run(["protoc", "--proto_path=" + proto_dir, "--decode", "perftools.profiles.Profile",
                proto_name], input=raw).decode()
    p = parse_text_format(text)
    strings = p.get("string_table", [])
    if not strings or strings[0] != "":
        # protoc omits nothing from repeated strings; the first must be "".
        fail("string_table[0] is not empty: %r" % strings[:1])
    types = [(strings[v.get("type", [0])[0]], strings[v.get("unit", [0])[0]])
             for v in p.get("sample_type", [])]
    want_types = [("alloc_objects", "count"), ("alloc_space", "bytes"), ("accesses", "count"),
                  ("lifetime", "milliseconds")]
    if types != want_types:
        fail("protoc: sample types %r, want %r" % (types, want_types))
    samples = p.get("sample", [])
    if len(samples) != len(contexts):
        fail("protoc: %d samples, query says %d contexts" % (len(samples), len(contexts)))
    locs = {l["id"][0]: l for l in p.get("location", [])}
    funcs = {f["id"][0]: strings[f.get("name", [0])[0]] for f in p.get("function", [])}
    maps = {m["id"][0]: m for m in p.get("mapping", [])}
    for m in maps.values():
        if not strings[m.get("build_id", [0])[0]]:
            fail("protoc: mapping %d has no build-id" % m["id"][0])
    inlined_locs = 0
    for i, (s, ctx) in enumerate(zip(samples, contexts)):
        vals = s.get("value", [])
        vals += [0] * (4 - len(vals))
        if vals != expected(ctx):
            fail("protoc: sample %d values %r, query says %r" % (i, vals, expected(ctx)))
        ids = s.get("location_id", [])
        groups = locations_of(ctx)
        if len(ids) != len(groups):
            fail("protoc: sample %d has %d locations, %d return addresses" % (i, len(ids), len(groups)))
        for lid, grp in zip(ids, groups):     # both leaf first
            loc = locs[lid]
            if hex(loc.get("address", [0])[0]) != grp[0]["address"]:
                fail("protoc: sample %d location %#x, frame %s" % (i, loc.get("address", [0])[0],
                                                                  grp[0]["address"]))
            lines = loc.get("line", [])
            names = [funcs[l.get("function_id", [0])[0]] for l in lines]
            if grp[0]["file"] is None:      # no DWARF: at most the ELF symbol
                if grp[0]["function"] is not None and names[-1:] != [grp[0]["function"]]:
                    fail("protoc: sample %d frame %s: lines %r, function %r" % (
                        i, grp[0]["address"], names, grp[0]["function"]))
                continue
            # An inline chain: one Line per function, innermost first, caller last.
            if names != [fr["function"] for fr in grp]:
                fail("protoc: sample %d location %s: lines %r, query says %r" % (
                    i, grp[0]["address"], names, [fr["function"] for fr in grp]))
            if [l.get("line", [0])[0] for l in lines] != [fr["line"] or 0 for fr in grp]:
                fail("protoc: sample %d location %s: line numbers differ" % (i, grp[0]["address"]))
            inlined_locs += len(grp) > 1
    if not inlined_locs:
        fail("protoc: no location with inline lines (the store has inline chains)")
    print("protoc: %d samples, %d locations, %d functions, %d mappings match the store" % (
        len(samples), len(locs), len(funcs), len(maps)))


NODE_SCRIPT = r"""
const fs = require('fs'), zlib = require('zlib');
const { Profile } = require('pprof-format');
const p = Profile.decode(zlib.gunzipSync(fs.readFileSync(process.argv[2])));
const st = Array.isArray(p.stringTable) ? p.stringTable : p.stringTable.strings;
const n = v => (typeof v === 'bigint' ? v.toString() : String(v));
process.stdout.write(JSON.stringify({
  types: p.sampleType.map(t => [st[Number(t.type)], st[Number(t.unit)]]),
  samples: p.sample.map(s => ({ values: s.value.map(n), locs: s.locationId.map(n) })),
  locations: p.location.map(l => ({ id: n(l.id), address: n(l.address) })),
  mappings: p.mapping.map(m => ({ id: n(m.id), build_id: st[Number(m.buildId)] })),
}));
"""


def check_pprof_format(gz_path, contexts, workdir):
    npm, node = shutil.which("npm"), shutil.which("node")
    if not npm or not node:
        print("SKIP: npm/node not installed (pprof-format part)")
        sys.exit(SKIP)
    modules = os.path.join(NODE_PREFIX, "node_modules")
    if not os.path.isdir(os.path.join(modules, "pprof-format")):
        print("SKIP: %s/pprof-format missing (deploy/bootstrap.sh installs it)" % modules)
        sys.exit(SKIP)
    script = os.path.join(workdir, "decode.js")
    with open(script, "w") as f:
        f.write(NODE_SCRIPT)
    env = dict(os.environ, NODE_PATH=modules)
    out = json.loads(run([node, script, gz_path], env=env, cwd=workdir))
    if [tuple(t) for t in out["types"]] != [("alloc_objects", "count"), ("alloc_space", "bytes"),
                                            ("accesses", "count"), ("lifetime", "milliseconds")]:
        fail("pprof-format: sample types %r" % out["types"])
    if len(out["samples"]) != len(contexts):
        fail("pprof-format: %d samples, %d contexts" % (len(out["samples"]), len(contexts)))
    addr = {l["id"]: int(l["address"]) for l in out["locations"]}
    for i, (s, ctx) in enumerate(zip(out["samples"], contexts)):
        vals = [int(v) for v in s["values"]]
        if vals != expected(ctx):
            fail("pprof-format: sample %d values %r, query says %r" % (i, vals, expected(ctx)))
        got = [hex(addr[l]) for l in s["locs"]]
        if got != [g[0]["address"] for g in locations_of(ctx)]:
            fail("pprof-format: sample %d addresses %r" % (i, got))
    if not out["mappings"] or not all(m["build_id"] for m in out["mappings"]):
        fail("pprof-format: mappings without build-ids: %r" % out["mappings"])
    print("pprof-format: %d samples match the store" % len(out["samples"]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--gen-store", required=True)
    ap.add_argument("--proto", required=True)
    a = ap.parse_args()
    if not shutil.which("protoc"):
        print("SKIP: protoc not installed (Debian package protobuf-compiler)")
        return SKIP
    work = tempfile.mkdtemp(prefix="check_pprof.")
    try:
        db = os.path.join(work, "m.db")
        run([a.gen_store, "--db", db, "--contexts", "400", "--rows", "2000", "--binaries", "2",
             "--seed", "7"])
        binary = "9e00000000000001"
        contexts = json.loads(run([a.memprofd, "query", "contexts", "--db", db, "--binary",
                                   binary, "--limit", "0", "--format", "json"]))
        if len(contexts) != 200:
            fail("query: %d contexts for %s, generated 200" % (len(contexts), binary))
        for cls in ("hot", "notcold", "cold"):
            only = json.loads(run([a.memprofd, "query", "contexts", "--db", db, "--binary", binary,
                                   "--limit", "0", "--class", cls, "--format", "json"]))
            want = [c for c in contexts if c["class"] == cls]
            if only != want:
                fail("query --class %s: %d rows, %d in the full list" % (cls, len(only), len(want)))
        gz = os.path.join(work, "profile.pb.gz")
        run([a.memprofd, "export", "pprof", "--db", db, "--binary", binary, "-o", gz])
        with open(gz, "rb") as f:
            data = f.read()
        if data[:2] != b"\x1f\x8b":
            fail("export pprof: not gzip (starts %r)" % data[:2])
        check_protoc(gzip.decompress(data), a.proto, contexts)
        check_pprof_format(gz, contexts, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
