#!/usr/bin/env python3
"""check_progress: long exports draw a progress bar on stderr when it is a terminal, and
nothing otherwise. On a store made by bench/gen_store with 20000 contexts in one binary
(EXPORT_PROGRESS_MIN_CONTEXTS), `memprofd export folded|pprof|html` runs with stderr on a
real pseudo-terminal (python's pty module): stderr must show the bar ("\\rexport folded
[###...] NN%", percentages rising to 100) and erase it at the end; the same export with
stderr on a pipe must write nothing there, and the two exports must be byte-identical
(the bar never reaches the output). A small store draws no bar even on a terminal.
No BPF. Exits 0 pass, 1 fail."""
import argparse
import gzip
import os
import pty
import re
import shutil
import subprocess
import sys
import tempfile

BIG_CONTEXTS = 20000          # reporter/export.h EXPORT_PROGRESS_MIN_CONTEXTS
BINARY = "9e00000000000000"   # gen_store's first binary
ERASE = b"\r\x1b[K"


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def run(cmd):
    r = subprocess.run(cmd, capture_output=True)
    if r.returncode != 0:
        fail("%s: exit %d: %s" % (" ".join(cmd), r.returncode, r.stderr.decode(errors="replace")))
    return r


def on_pty(cmd):
    """Runs cmd with stderr on a new pseudo-terminal; returns (exit code, bytes read)."""
    master, slave = pty.openpty()
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    got = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:          # EIO: the child closed the terminal's last writer
            break
        if not chunk:
            break
        got += chunk
    os.close(master)
    return p.wait(), got


def check_bar(fmt, got):
    what = ("export %s" % fmt).encode()
    # The terminal turns "\n" into "\r\n"; the bar itself uses "\r" only.
    bars = re.findall(rb"\r" + re.escape(what) + rb" \[([# ]{40})\] +(\d+)%", got)
    if not bars:
        fail("%s on a terminal: no progress bar in %r" % (fmt, got[:200]))
    pcts = [int(p) for _, p in bars]
    if pcts != sorted(pcts) or len(set(pcts)) != len(pcts) or pcts[-1] != 100:
        fail("%s: percentages %r do not rise once each to 100" % (fmt, pcts[:20]))
    for fill, pct in bars:
        if fill.count(b"#") != int(pct) * 40 // 100:
            fail("%s: bar %r at %s%%" % (fmt, fill, pct))
    if not got.endswith(ERASE):
        fail("%s: the bar is not erased at the end: %r" % (fmt, got[-40:]))
    if len(bars) < 10:
        fail("%s: only %d redraws for %d contexts" % (fmt, len(bars), BIG_CONTEXTS))
    return len(bars)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--gen-store", required=True)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="check_progress.")
    try:
        big, small = os.path.join(work, "big.db"), os.path.join(work, "small.db")
        run([a.gen_store, "--db", big, "--contexts", str(BIG_CONTEXTS), "--rows",
             str(BIG_CONTEXTS), "--binaries", "1", "--procs", "2", "--buckets", "10"])
        run([a.gen_store, "--db", small, "--contexts", "300", "--rows", "600", "--binaries", "1",
             "--procs", "2", "--buckets", "10"])
        for fmt in ("folded", "pprof", "html"):
            tty_out, pipe_out = (os.path.join(work, "%s.%s" % (fmt, k)) for k in ("tty", "pipe"))
            base = [a.memprofd, "export", fmt, "--db", big, "--binary", BINARY]
            rc, got = on_pty(base + ["-o", tty_out])
            if rc != 0:
                fail("export %s on a terminal: exit %d: %r" % (fmt, rc, got[-300:]))
            n = check_bar(fmt, got)
            r = run(base + ["-o", pipe_out])
            if r.stderr:
                fail("export %s with stderr on a pipe wrote %r" % (fmt, r.stderr[:200]))
            with open(tty_out, "rb") as f1, open(pipe_out, "rb") as f2:
                t, p = f1.read(), f2.read()
            # Only the export's own clock may differ: pprof's time_nanos (same width),
            # the report's "generated" line.
            if fmt == "pprof":
                t, p = gzip.decompress(t), gzip.decompress(p)
                same = len(t) == len(p)
            else:
                stamp = rb"generated</td><td>[0-9 :-]+UTC"
                same = re.sub(stamp, b"", t) == re.sub(stamp, b"", p)
            if not same or b"\x1b[K" in t:
                fail("export %s differs between the terminal and the pipe run" % fmt)
            print("%s: %d redraws on the terminal, none on a pipe" % (fmt, n))
        rc, got = on_pty([a.memprofd, "export", "folded", "--db", small, "--binary", BINARY,
                          "-o", os.path.join(work, "small.folded")])
        if rc != 0 or got:
            fail("a small export on a terminal: exit %d, stderr %r" % (rc, got[:200]))
        print("small export: no bar")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
