#!/usr/bin/env python3
"""An allocator inlined into the caller is no frame of the program's (issue 21): ld.so's
allocate_dtv calls calloc through include/rtld-malloc.h's inline wrapper, so the return
address of that call symbolizes as `calloc` (inlined) inside allocate_dtv. Every output
must start the stack at allocate_dtv (dl-tls.c), as for any other allocation site: the
JSON contexts, the folded export and the HTML flame data. Real program: a threaded C
program (tests/workloads/tls_threads.c) built with cc, recorded in exact mode.
Exits 0 pass, 1 fail, 77 skip (no BPF, no cc, no DWARF for ld.so: libc6-dbg)."""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpdtest  # noqa: E402

ALLOCATORS = mpdtest.ALLOCATOR_NAMES


def ldso_has_dwarf():
    """The ld.so this machine runs, and whether its separate DWARF is installed."""
    for p in glob.glob("/lib64/ld-linux-x86-64.so.2") + glob.glob("/lib/ld-linux*.so*"):
        bid = mpdtest.elf_build_id(os.path.realpath(p))
        if bid and os.path.exists("/usr/lib/debug/.build-id/%s/%s.debug" % (bid[:2], bid[2:])):
            return True
    return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--source", required=True)
    a = ap.parse_args()
    cc = shutil.which("cc")
    if not cc:
        mpdtest.skip("no C compiler (cc) to build the workload")
    if not ldso_has_dwarf():
        mpdtest.skip("no DWARF for ld.so under /usr/lib/debug/.build-id (Debian package "
                     "libc6-dbg): no inline chain to trim")
    mpdtest.require_bpf()
    tmp = tempfile.mkdtemp(prefix="mpd-alloctrim-")
    m, db, prog = a.memprofd, os.path.join(tmp, "t.db"), os.path.join(tmp, "tls_threads")
    subprocess.run([cc, "-g", "-O1", "-pthread", "-o", prog, a.source], check=True)
    p = mpdtest.record(m, db, [prog])
    if p.returncode != 0:
        mpdtest.finish(["record: " + mpdtest.describe(p)], "alloc_trim", tmp)
    errs = []
    ctxs = mpdtest.query_contexts(m, db, ["--binary", prog])
    dtv = [c for c in ctxs if c["frames"] and c["frames"][0]["function"] == "allocate_dtv"]
    if not dtv:
        errs.append("no context starts at ld.so's allocate_dtv; leaves: %r" %
                    [[f["function"] for f in c["frames"][:2]] for c in ctxs])
    for c in dtv:
        f = c["frames"][0]
        if f["inlined"] or not re.search(r"dl-tls\.c$", f["file"] or "") or not f["line"] \
                or "ld-linux" not in (f["module"] or ""):
            errs.append("allocate_dtv's frame: %r" % f)
    errs += mpdtest.contract_errors(ctxs)
    for c in ctxs:
        if c["frames"] and c["frames"][0]["function"] in ALLOCATORS:
            errs.append("a stack starts at the allocator: %r" %
                        [(f["function"], f["file"], f["line"]) for f in c["frames"][:3]])
    out = os.path.join(tmp, "f.txt")
    p = mpdtest.run([m, "export", "folded", "--db", db, "--binary", prog, "-o", out])
    folded = open(out).read().splitlines() if p.returncode == 0 else []
    if p.returncode != 0:
        errs.append("export folded: " + mpdtest.describe(p))
    leaves = [ln.rsplit(" ", 1)[0].split(";")[-1] for ln in folded]
    if "allocate_dtv" not in leaves or ALLOCATORS & set(leaves):
        errs.append("folded leaves: %r" % leaves)
    page = os.path.join(tmp, "r.html")
    p = mpdtest.run([m, "export", "html", "--db", db, "--binary", prog, "-o", page])
    if p.returncode != 0:
        errs.append("export html: " + mpdtest.describe(p))
    elif re.search(r'"names": \[[^\]]*"calloc"', open(page, encoding="utf-8").read()):
        errs.append("the HTML flame graph still names calloc")
    mpdtest.log("%d contexts, %d at allocate_dtv; folded leaves %r" % (len(ctxs), len(dtv), leaves))
    mpdtest.finish(errs, "alloc_trim: no allocator inlined into the leaf frame", tmp)


if __name__ == "__main__":
    main()
