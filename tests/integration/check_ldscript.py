#!/usr/bin/env python3
"""check_ldscript: static data layout end to end. Generates a C program with ~2000 globals
(tests/workloads/gen_globals.py), builds it with -fdata-sections, records it with the soft
source and no allocator probe (--alloc off: a static-data-only recording is what a layout
needs), exports symbol-order and ld-script, relinks with ld.bfd (-T script) and lld-19
(--symbol-ordering-file). Asserts: relinked programs print exactly what the original
prints; the exported hot set is the generator's hot set (nearly); the hot symbols span at
most the minimum number of 4 KiB pages plus one per output section; the ordering file
lists every sampled symbol (hot first), so the generator's hot globals, faint ones
included, span at most that bound after lld too (logged for every linker); a build without
-fdata-sections gets the warning naming the symbols that share a section."""
import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpdtest  # noqa: E402

PAGE = 4096
CFLAGS = ["-fdata-sections", "-O1", "-g", "-fno-omit-frame-pointer"]
MIN_RECALL = 0.5      # share of the generator's hot globals the export must call hot (the
                      # rest got too few samples: a 99% share leaves the faintest out)
MAX_EXTRA = 2         # exported hot symbols the generator did not make hot
SUFFIXES = (".hot", ".unlikely")


def sh(cmd, what, errs, timeout=300, **kw):
    p = mpdtest.run(cmd, timeout=timeout, **kw)
    if p.returncode != 0:
        errs.append("%s failed: %s" % (what, mpdtest.describe(p)))
    return p


def elf_symbols(path):
    """{name: (vaddr, size, output-section kind)} of defined data symbols."""
    secs = {}
    out = subprocess.run(["readelf", "-SW", path], capture_output=True, text=True).stdout
    for m in re.finditer(r"^\s*\[\s*(\d+)\]\s+(\S+)", out, re.M):
        name = m.group(2)
        for suf in SUFFIXES:
            if name.endswith(suf):
                name = name[:-len(suf)]
        secs[m.group(1)] = name
    syms = {}
    out = subprocess.run(["readelf", "-sW", path], capture_output=True, text=True).stdout
    for line in out.splitlines():
        f = line.split()
        if len(f) < 8 or not f[0].endswith(":") or f[3] not in ("OBJECT", "TLS"):
            continue
        if f[6] in secs:
            syms.setdefault(f[7], (int(f[1], 16), int(f[2], 0), secs[f[6]]))
    return syms


def pages(path, hot):
    """(pages spanned by the hot symbols, the bound: per kind minimum + 1, per-kind text)."""
    syms = elf_symbols(path)
    spanned, bytes_by_kind = set(), {}
    for name in hot:
        if name not in syms:
            continue
        a, size, kind = syms[name]
        size = max(size, 1)
        spanned.update(range(a // PAGE, (a + size - 1) // PAGE + 1))
        bytes_by_kind[kind] = bytes_by_kind.get(kind, 0) + size
    bound = sum(math.ceil(b / PAGE) + 1 for b in bytes_by_kind.values())
    minimum = sum(math.ceil(b / PAGE) for b in bytes_by_kind.values())
    return len(spanned), minimum, bound


def hot_list(order_file):
    with open(order_file) as f:
        return [l.strip() for l in f if l.strip() and not l.startswith("#")]


def check_alloc_off(memprofd, db, errs):
    """--alloc off: the run says so, and no allocation context was recorded."""
    st = mpdtest.run([memprofd, "query", "status", "--db", db, "--format", "json"], timeout=60)
    ctxs = mpdtest.query_contexts(memprofd, db)
    runs = json.loads(st.stdout) if st.returncode == 0 else []
    if not runs or runs[0].get("alloc_mode") != "off":
        errs.append("query status: alloc_mode is not 'off': %r" % st.stdout[:300])
    if ctxs:
        errs.append("--alloc off recorded %d allocation contexts" % len(ctxs))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--generator", required=True)
    ap.add_argument("--seconds", default="3")
    ap.add_argument("--freq", default="1000")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    mpdtest.require_bpf()
    gcc = shutil.which("gcc")
    clang = shutil.which("clang-19")
    lld = shutil.which("ld.lld-19") or shutil.which("ld.lld")
    if not gcc or not shutil.which("ld.bfd") or not shutil.which("readelf"):
        mpdtest.skip("gcc, ld.bfd or readelf missing")
    tmp = tempfile.mkdtemp(prefix="check_ldscript.")
    errs = []
    src = os.path.join(tmp, "src")
    if sh([sys.executable, a.generator, "--dir", src], "generator", errs).returncode:
        mpdtest.finish(errs, "ld-script", tmp)
    units = sorted(f for f in os.listdir(src) if f.endswith(".c"))
    want_hot = set(open(os.path.join(src, "hot.txt")).read().split())

    def build(tag, flags):
        objs = []
        for u in units:
            o = os.path.join(tmp, "%s.%s.o" % (tag, u[:-2]))
            sh([gcc, *flags, "-c", os.path.join(src, u), "-o", o], "compiling " + u, errs)
            objs.append(o)
        return objs

    objs = build("ds", CFLAGS)
    prog = os.path.join(tmp, "prog")
    sh([gcc, "-fuse-ld=bfd", *objs, "-o", prog], "linking prog", errs)
    if errs:
        mpdtest.finish(errs, "ld-script", tmp)
    db = os.path.join(tmp, "ld.db")
    p = mpdtest.record(a.memprofd, db, [prog, "--seconds", a.seconds],
                       extra=("--access", "soft", "--freq", a.freq), timeout=120, alloc="off")
    if p.returncode != 0:
        mpdtest.finish(["record failed: " + mpdtest.describe(p)], "ld-script", tmp)
    check_alloc_off(a.memprofd, db, errs)
    order, script = os.path.join(tmp, "order.txt"), os.path.join(tmp, "hot.ld")
    common = ["--db", db, "--binary", prog, "--cold-min-samples", "200"]
    sh([a.memprofd, "export", "symbol-order", *common, "-o", order], "export symbol-order", errs)
    sh([a.memprofd, "export", "ld-script", *common, "-o", script], "export ld-script", errs)
    if errs:
        mpdtest.finish(errs, "ld-script", tmp)

    listed = hot_list(order)
    m = re.search(r"^# hot: (\d+) symbols", open(order).read(), re.M)
    hot = listed[:int(m.group(1))] if m else listed
    mpdtest.log("symbol-order lists %d symbols, %d of them hot; generated hot globals "
                "listed: %d of %d" % (len(listed), len(hot), len(want_hot & set(listed)),
                                      len(want_hot)))
    got = set(hot)
    recall = len(got & want_hot) / max(len(want_hot), 1)
    extra = sorted(got - want_hot)
    mpdtest.log("hot: %d exported, %d generated, recall %.2f, extra %s" %
                (len(hot), len(want_hot), recall, extra))
    if recall < MIN_RECALL:
        errs.append("export calls %.0f%% of the generated hot globals hot (want >= %.0f%%)" %
                    (recall * 100, MIN_RECALL * 100))
    if len(extra) > MAX_EXTRA:
        errs.append("export calls %d globals hot that the program does not loop over: %s" %
                    (len(extra), extra[:10]))
    text = open(script).read()
    m = re.search(r"cold: (\d+) symbols with no sample", text)
    if not m or int(m.group(1)) < 1500:
        errs.append("ld-script header: expected >= 1500 cold symbols, got %s" %
                    (m.group(0) if m else "no cold line"))
    if "hot: %d symbols" % len(hot) not in text:
        errs.append("ld-script header does not state the %d hot symbols" % len(hot))

    links = [("bfd", [gcc, "-fuse-ld=bfd", *objs, "-Wl,-T," + script])]
    if clang and lld:
        links.append(("lld", [clang, "-fuse-ld=lld", *objs]))
        links.append(("lld+order", [clang, "-fuse-ld=lld", *objs,
                                    "-Wl,--symbol-ordering-file=" + order]))
    else:
        mpdtest.log("clang-19 or ld.lld missing: lld relink not checked")
    expect = mpdtest.run([prog, "--seconds", "0.2"], timeout=60)
    before, _, _ = pages(prog, hot)
    mpdtest.log("pages spanned by %d hot symbols: bfd default %d" % (len(hot), before))
    for tag, cmd in links:
        out = os.path.join(tmp, "prog." + tag)
        if sh(cmd + ["-o", out], "relink " + tag, errs).returncode:
            continue
        r = mpdtest.run([out, "--seconds", "0.2"], timeout=60)
        if (r.returncode, r.stdout) != (expect.returncode, expect.stdout):
            errs.append("%s relink prints something else: rc %d vs %d, %r vs %r" %
                        (tag, r.returncode, expect.returncode, r.stdout[:200], expect.stdout[:200]))
        n, minimum, bound = pages(out, hot)
        mpdtest.log("pages spanned by hot symbols: %-9s %d (minimum %d, bound %d)" %
                    (tag, n, minimum, bound))
        if tag != "lld" and n > bound:
            errs.append("%s: hot symbols span %d pages, more than %d" % (tag, n, bound))
        gn, gmin, gbound = pages(out, want_hot)
        mpdtest.log("pages spanned by the %d generated hot globals: %-9s %d (minimum %d)" %
                    (len(want_hot), tag, gn, gmin))
        if tag == "lld+order" and gn > gbound:
            errs.append("lld+order: the generated hot globals span %d pages, more than %d "
                        "(a sampled one left out of the ordering file?)" % (gn, gbound))
    secs = subprocess.run(["readelf", "-SW", os.path.join(tmp, "prog.bfd")],
                          capture_output=True, text=True).stdout
    for s in (".data.hot", ".bss.hot", ".rodata.hot", ".data.unlikely", ".rodata.unlikely"):
        if s not in secs:
            errs.append("bfd relink has no %s output section" % s)

    # Without -fdata-sections the export says which symbols cannot move apart.
    objs2 = build("nods", [f for f in CFLAGS if f != "-fdata-sections"])
    prog2 = os.path.join(tmp, "prog_nods")
    sh([gcc, *objs2, "-o", prog2], "linking prog_nods", errs)
    p = mpdtest.record(a.memprofd, db, [prog2, "--seconds", "1"],
                       extra=("--access", "soft", "--freq", a.freq), timeout=120)
    if p.returncode != 0:
        errs.append("record prog_nods failed: " + mpdtest.describe(p))
    else:
        p = sh([a.memprofd, "export", "ld-script", "--db", db, "--binary", prog2,
                "--cold-min-samples", "1", "-o", os.path.join(tmp, "nods.ld")],
               "export ld-script (no -fdata-sections)", errs)
        warned = [l for l in p.stderr.splitlines() if "built without -fdata-sections" in l]
        mpdtest.log("no -fdata-sections: %d warnings, e.g. %s" %
                    (len(warned), warned[0][:160] if warned else "-"))
        if not warned:
            errs.append("no -fdata-sections warning for prog_nods: %r" % p.stderr[:400])
    if a.keep:
        mpdtest.log("kept " + tmp)
    mpdtest.finish(errs, "ld-script and symbol-order: same output, hot data packed",
                   None if a.keep else tmp)


if __name__ == "__main__":
    main()
