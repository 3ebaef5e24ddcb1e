#!/usr/bin/env python3
"""core_btf (issue 18): record's BPF load relocates CO-RE against a minimized kernel BTF
cached under $XDG_CACHE_HOME/memprofd/btf (daemon/alloc/core_btf.h) instead of searching
the whole vmlinux BTF. The first run with an empty cache loads as before and leaves a
detached bpftool making the file; the next run uses it (phase trace: `BPF open+load (CO-RE
on the cached minimized BTF)`) and records the same contexts; a damaged file is not
fatal: that run falls back to vmlinux and the file is made again. The soft access
source's object gets its own file the same way (`access source (soft: CO-RE on the
cached minimized BTF)`), and its samples still come. On the warm cache a recording
opens no /sys/kernel/btf/vmlinux at all (strace). Skips where bpftool
is not installed (nothing is cached then) or BPF cannot work.
Usage: check_core_btf.py --memprofd PATH --workload PATH"""
import argparse
import glob
import json
import os
import re
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpdtest  # noqa: E402

MADE_WITHIN_S = 30   # bpftool at nice 19 on a loaded 2-core machine: ~0.2-2 s
USED = "BPF open+load (CO-RE on the cached minimized BTF)"
SOFT_USED = "access source (soft: CO-RE on the cached minimized BTF)"
VMLINUX = "/sys/kernel/btf/vmlinux"


def run(a, d, n, cache, mode):
    # Every allocation sampled (weight 1): sampled mode's contexts are deterministic too.
    env = dict(os.environ, MEMPROFD_TRACE_PHASES="1", XDG_CACHE_HOME=cache,
               MEMPROFD_SAMPLE_BYTES="1")
    db = os.path.join(d, "%s%d.db" % (mode, n))
    cmd = [a.memprofd, "record", "--alloc", mode, "--access", "off", "--db", db, "--", a.workload]
    p = mpdtest.run(cmd, timeout=120, env=env)
    if p.returncode != 0:
        sys.exit("FAIL: run %d: %s" % (n, mpdtest.describe(p)))
    ctxs = mpdtest.query_contexts(a.memprofd, db)
    key = sorted(json.dumps([f.get("function") for f in c["frames"]]) + str(c["alloc_count"])
                 for c in ctxs)
    return USED in p.stderr, key


def run_soft(a, d, n, cache):
    """A soft-access recording: whether its soft source used the minimized BTF, and how
    many samples of the workload it read (record's closing line)."""
    env = dict(os.environ, MEMPROFD_TRACE_PHASES="1", XDG_CACHE_HOME=cache)
    db = os.path.join(d, "soft%d.db" % n)
    cmd = [a.memprofd, "record", "--access", "soft", "--freq", "1000", "--db", db, "--",
           a.workload]
    p = mpdtest.run(cmd, timeout=120, env=env)
    if p.returncode != 0:
        sys.exit("FAIL: soft run %d: %s" % (n, mpdtest.describe(p)))
    m = re.search(r"access: soft: (\d+) samples of the targets", p.stderr)
    return SOFT_USED in p.stderr, int(m.group(1)) if m else -1


def vmlinux_opens(a, d, cache):
    """The openat calls of a default-mode soft-access run on the warm cache (strace -f)
    that name the kernel's BTF: none, since its programs attach as raw tracepoints (a
    tp_btf program's attach id made libbpf read and parse all 5 MB of it) and every
    object relocates against its minimized file."""
    if not shutil.which("strace"):
        sys.exit("FAIL: strace is not installed (deploy/bootstrap.sh installs it)")
    env = dict(os.environ, XDG_CACHE_HOME=cache)
    # LeakSanitizer cannot work under ptrace (it stops the run with a fatal error); every
    # other run of the sanitizer build still checks for leaks.
    env["ASAN_OPTIONS"] = ":".join(o for o in (os.environ.get("ASAN_OPTIONS"),
                                               "detect_leaks=0") if o)
    trace = os.path.join(d, "strace.txt")
    cmd = ["strace", "-f", "-qq", "-e", "trace=openat,open", "-o", trace, a.memprofd,
           "record", "--access", "soft", "--db", os.path.join(d, "strace.db"), "--",
           a.workload]
    p = mpdtest.run(cmd, timeout=120, env=env)
    if p.returncode != 0:
        sys.exit("FAIL: record under strace: %s" % mpdtest.describe(p))
    with open(trace) as f:
        return [ln.strip() for ln in f if VMLINUX in ln]


def wait_files(btf, n, pat="*.btf", min_size=600):
    """min_size: above the 504 bytes of a damaged file (the soft object's file is ~560)."""
    end = time.monotonic() + MADE_WITHIN_S
    while time.monotonic() < end:
        files = [f for f in glob.glob(os.path.join(btf, pat)) if os.path.getsize(f) >= min_size]
        if len(files) >= n:
            return files
        time.sleep(0.1)
    sys.exit("FAIL: no minimized BTF made within %d s in %s: %s" % (
        MADE_WITHIN_S, btf, os.listdir(btf) if os.path.isdir(btf) else "no directory"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--workload", required=True)
    a = ap.parse_args()
    mpdtest.require_bpf()
    if not any(os.access(p, os.X_OK) for p in ("/usr/sbin/bpftool", "/usr/bin/bpftool", "/sbin/bpftool")):
        mpdtest.skip("bpftool is not installed: record keeps no minimized BTF")
    d = tempfile.mkdtemp(prefix="core_btf.")
    cache = os.path.join(d, "cache")
    btf = os.path.join(cache, "memprofd", "btf")
    errs = []
    for mode in ("exact", "sampled"):
        used, ref = run(a, d, 1, cache, mode)
        if used:
            errs.append("%s: the first run used a minimized BTF from an empty cache" % mode)
        files = wait_files(btf, 1 if mode == "exact" else 2)
        used, got = run(a, d, 2, cache, mode)
        if not used:
            errs.append("%s: the second run did not use the minimized BTF (%s)" % (mode, files))
        if got != ref:
            errs.append("%s: contexts differ between the vmlinux and the minimized BTF" % mode)
    for f in glob.glob(os.path.join(btf, "*.btf")):
        open(f, "wb").write(b"\x9f\xeb\x01\x00" + os.urandom(500))   # BTF magic, then noise
    used, got = run(a, d, 3, cache, "sampled")
    if used or got != ref:
        errs.append("damaged file: used %s, same contexts %s" % (used, got == ref))
    wait_files(btf, 1, "sampled-*.btf")
    used, _ = run(a, d, 4, cache, "sampled")
    if not used:
        errs.append("the damaged file was not made again")
    used, samples = run_soft(a, d, 1, cache)
    if used:
        errs.append("soft: the first run used a minimized BTF it had no file for")
    wait_files(btf, 1, "soft-*.btf", 1)
    used, samples = run_soft(a, d, 2, cache)
    if not used:
        errs.append("soft: the second run did not use the minimized BTF")
    if samples <= 0:
        errs.append("soft: the run on the minimized BTF read %d samples" % samples)
    opened = vmlinux_opens(a, d, cache)
    if opened:
        errs.append("a run on the warm cache opened %s: libbpf parsed the whole kernel BTF "
                    "(%s)" % (VMLINUX, opened[0]))
    shutil.rmtree(d)
    if errs:
        sys.exit("FAIL: " + "; ".join(errs))
    print("PASS: CO-RE on the cached minimized BTF, same contexts; a damaged file is remade; "
          "the soft source too (%d samples)" % samples)


if __name__ == "__main__":
    main()
