#!/usr/bin/env python3
"""check_binary_select: one resolution of --binary for query and export, one name per
function, one line per error. A four-site workload (tests/workloads/four_sites.c) is
built here with cc, recorded (--alloc exact), then:
- a binary not in the store (/bin/ls) is the same one-line error, exit 1, for query
  contexts/processes/data and every export;
- the workload rebuilt (-DVARIANT=1: another build-id) at the recorded path is refused
  the same way by query and every export, naming both build-ids; the old build's copy
  and the stored build-id are still accepted;
- glibc's stdio buffer site has one name in query JSON, the table, folded, pprof and
  hints: the public _IO_file_doallocate, never the asm label __GI__IO_file_doallocate;
- every error above is exactly one line on stderr.
Exits 0 pass, 1 fail, 77 skip (no BPF, no cc)."""
import argparse
import gzip
import os
import shutil
import subprocess
import sys
import tempfile

import mpdtest

EXPORTS = ["folded", "pprof", "html", "hints", "memprof-raw", "memprof-yaml", "ld-script",
           "symbol-order", "section-prefixes"]
PUBLIC, ALIAS = "_IO_file_doallocate", "__GI__IO_file_doallocate"


def build(src, out, variant):
    cc = shutil.which("cc")
    if not cc:
        mpdtest.skip("no C compiler (cc) to build the workload")
    subprocess.run([cc, "-g", "-O1", "-fno-omit-frame-pointer", "-DVARIANT=%d" % variant,
                    "-o", out, src], check=True)


def one_line_error(errs, label, p, *needles):
    lines = p.stderr.splitlines()
    if p.returncode != 1:
        errs.append("%s: exit %d, want 1 (%s)" % (label, p.returncode, p.stderr.strip()))
    elif len(lines) != 1 or not lines[0].startswith("memprofd: "):
        errs.append("%s: stderr is not one 'memprofd: ' line: %r" % (label, p.stderr))
    else:
        for n in needles:
            if n not in lines[0]:
                errs.append("%s: %r does not say %r" % (label, lines[0], n))
    return lines[0].split(": ", 2)[-1] if lines else ""


def commands(m, db, binary, tmp):
    yield "query contexts", [m, "query", "contexts", "--db", db, "--binary", binary]
    yield "query processes", [m, "query", "processes", "--db", db, "--binary", binary]
    yield "query data", [m, "query", "data", "--db", db, "--binary", binary]
    for e in EXPORTS:
        yield "export " + e, [m, "export", e, "--db", db, "--binary", binary, "-o",
                              os.path.join(tmp, "out." + e)]


def check_refusals(errs, m, db, binary, tmp, needles):
    """The same reason, word for word, from every reader."""
    whys = set()
    for label, cmd in commands(m, db, binary, tmp):
        p = mpdtest.run(cmd)
        whys.add(one_line_error(errs, "%s --binary %s" % (label, binary), p, *needles))
    if len(whys) != 1:
        errs.append("--binary %s: the readers give different reasons: %s" % (binary, whys))


def names_everywhere(errs, m, db, exe, tmp):
    j = mpdtest.query_contexts(m, db, ["--binary", exe])
    json_names = {f["function"] for c in j for f in c["frames"]}
    table = mpdtest.run([m, "query", "contexts", "--db", db, "--binary", exe, "--limit", "0"],
                        env=dict(os.environ, COLUMNS="400")).stdout
    folded = mpdtest.run([m, "export", "folded", "--db", db, "--binary", exe]).stdout
    hints = mpdtest.run([m, "export", "hints", "--db", db, "--binary", exe]).stdout
    gz = os.path.join(tmp, "p.pb.gz")
    mpdtest.run([m, "export", "pprof", "--db", db, "--binary", exe, "-o", gz])
    with gzip.open(gz) as f:
        pprof = f.read().decode("latin-1")
    outputs = {"query json": " ".join(n or "" for n in json_names), "table": table,
               "folded": folded, "hints": hints, "pprof": pprof}
    if PUBLIC not in json_names:
        errs.append("query json: no %s frame (libc6-dbg lines?): %s" % (PUBLIC, json_names))
    for what, text in outputs.items():
        if ALIAS in text:
            errs.append("%s names %s (the public name is %s)" % (what, ALIAS, PUBLIC))
        elif PUBLIC not in text:
            errs.append("%s does not name %s" % (what, PUBLIC))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--source", required=True)
    a = ap.parse_args()
    mpdtest.require_bpf()
    tmp = tempfile.mkdtemp(prefix="mpd-binsel-")
    m, db = a.memprofd, os.path.join(tmp, "p.db")
    exe, old = os.path.join(tmp, "app"), os.path.join(tmp, "app.old")
    build(a.source, exe, 0)
    p = mpdtest.record(m, db, [exe])
    if p.returncode != 0:
        mpdtest.finish(["record: " + mpdtest.describe(p)], "binary_select", tmp)
    errs = []
    names_everywhere(errs, m, db, exe, tmp)
    old_id = mpdtest.elf_build_id(exe)
    check_refusals(errs, m, db, "/bin/ls", tmp, ["/bin/ls", "is not in", db])

    shutil.copy(exe, old)
    build(a.source, exe, 1)
    new_id = mpdtest.elf_build_id(exe)
    if new_id == old_id:
        mpdtest.finish(["the rebuild kept build-id " + old_id], "binary_select", tmp)
    check_refusals(errs, m, db, exe, tmp, [new_id, old_id, "rebuilt"])
    for arg in (old, old_id):
        for label in ("query contexts", "export folded"):
            cmd = dict(commands(m, db, arg, tmp))[label]
            p = mpdtest.run(cmd)
            if p.returncode != 0 or p.stderr.strip():
                errs.append("%s --binary %s: %s" % (label, arg, mpdtest.describe(p)))
    mpdtest.finish(errs, "binary_select: one --binary resolution, one name, one line", tmp)


if __name__ == "__main__":
    main()
