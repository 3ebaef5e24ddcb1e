#!/usr/bin/env python3
"""check_tables: `query` tables that fit the terminal, on a real recording of the
four-site workload (tests/workloads/four_sites.c, built here with cc):
- on a pipe without COLUMNS nothing is cut: each context's whole stack, leaf first, with
  file:line for every frame `query --format json` has, on the row's line;
- on a pseudo-terminal of 200 and of 80 columns (TIOCSWINSZ, COLUMNS unset) and with
  COLUMNS=100 every line fits and every frame and file:line is still there (wrapped);
- --stacks puts one frame per line;
- the density column has a unit said once (a legend), the status table's STATUS is whole.
Exits 0 pass, 1 fail, 77 skip (no BPF, no cc)."""
import argparse
import fcntl
import os
import re
import shutil
import struct
import subprocess
import tempfile
import termios

import mpdtest


def on_pty(cmd, cols, env):
    """cmd's stdout on a pseudo-terminal of cols columns."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, cols, 0, 0))
    p = subprocess.Popen(cmd, stdout=slave, stderr=subprocess.PIPE, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            b = os.read(master, 65536)
        except OSError:
            break
        if not b:
            break
        chunks.append(b)
    p.wait(timeout=60)
    os.close(master)
    return p.returncode, b"".join(chunks).decode(errors="replace").replace("\r\n", "\n")


def entries(ctx):
    """What the table must show of a context: (function, "file:line") leaf first."""
    out = []
    for f in ctx["frames"]:
        where = "%s:%d" % (os.path.basename(f["file"]), f["line"]) if f["file"] and f["line"] \
            else None
        if f.get("inlined"):     # the table marks a frame inlined into its caller
            where = where + " [inlined]" if where else "[inlined]"
        out.append((f["function"], where))
    return out


def check_whole(errs, label, text, ctxs):
    flat = re.sub(r"\s+", " ", text)
    for c in ctxs:
        for fn, where in entries(c):
            want = "%s %s" % (fn, where) if where else fn
            # A name and its file:line may sit on two lines ("    at file:line").
            if want not in flat and ("%s at %s" % (fn, where)) not in flat:
                errs.append("%s: %r missing" % (label, want))


def check_fits(errs, label, text, cols):
    for line in text.splitlines():
        if len(line) > cols:
            errs.append("%s: a line of %d > %d columns: %r" % (label, len(line), cols, line))
            break


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--source", required=True)
    a = ap.parse_args()
    mpdtest.require_bpf()
    cc = shutil.which("cc")
    if not cc:
        mpdtest.skip("no C compiler (cc) to build the workload")
    tmp = tempfile.mkdtemp(prefix="mpd-tables-")
    m, db, exe = a.memprofd, os.path.join(tmp, "p.db"), os.path.join(tmp, "four_sites")
    subprocess.run([cc, "-g", "-O1", "-fno-omit-frame-pointer", "-o", exe, a.source], check=True)
    p = mpdtest.record(m, db, [exe])
    if p.returncode != 0:
        mpdtest.finish(["record: " + mpdtest.describe(p)], "tables", tmp)
    ctxs = [c for c in mpdtest.query_contexts(m, db) if len(c["frames"]) >= 2]
    errs = []
    if not any(c["frames"][0]["function"] == "site_small" for c in ctxs):
        errs.append("no site_small context with a caller: %r" % ctxs)
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    q = [m, "query", "contexts", "--db", db, "--limit", "0"]

    pipe = subprocess.run(q, capture_output=True, text=True, env=env).stdout
    for c in ctxs:
        row = " < ".join("%s %s" % e if e[1] else e[0] for e in entries(c))
        if not any(line.endswith(" " + row) for line in pipe.splitlines()):
            errs.append("pipe: no row ending in the whole stack %r:\n%s" % (row, pipe))
    if "..." in pipe:
        errs.append("pipe: something was cut:\n" + pipe)
    if "ACC/B/s" not in pipe.splitlines()[0] or "accesses per byte per second" not in pipe:
        errs.append("pipe: the density column has no unit said once:\n" + pipe)

    for cols in (200, 80):
        rc, text = on_pty(q, cols, env)
        if rc:
            errs.append("pty %d: exit %d" % (cols, rc))
        check_fits(errs, "pty %d" % cols, text, cols)
        check_whole(errs, "pty %d" % cols, text, ctxs)
    text = subprocess.run(q, capture_output=True, text=True,
                          env=dict(env, COLUMNS="100")).stdout
    check_fits(errs, "COLUMNS=100", text, 100)
    check_whole(errs, "COLUMNS=100", text, ctxs)

    rc, text = on_pty(q + ["--stacks"], 200, env)
    for c in ctxs:
        for fn, where in entries(c)[1:]:
            want = "%s %s" % (fn, where) if where else fn
            if not any(line.strip() == want for line in text.splitlines()):
                errs.append("--stacks: %r is not on a line of its own" % want)

    rc, text = on_pty([m, "query", "status", "--db", db], 100, env)
    # Issue 18's run status for a command that exited 0 ("exit 0"), never cut.
    if " exit 0 " not in text:
        errs.append("status: STATUS cut:\n" + text)
    check_fits(errs, "status pty 100", text, 100)
    mpdtest.finish(errs, "tables: whole stacks with file:line, fitting the terminal", tmp)


if __name__ == "__main__":
    main()
