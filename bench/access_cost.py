#!/usr/bin/env python3
"""access_cost.py: instructions per soft access sample in the recorder's user space,
measured with callgrind on bench/access_cost (only its measured loop is instrumented).
Prints, per phase, instructions per sample and the ratio to the baseline loop that only
copies the record:
  copy    the baseline: copy one ring record
  decode  + decode (capstone through the decode cache, skid predecessor included)
  attrib  attribution alone of decoded accesses (interval tree, regions, data symbols)
  all     decode + attribution, what the recorder pays per sample
Valgrind dies of the SIGTRAP when it runs code a live uprobe patched (a recording in
--alloc exact mode puts int3 into the shared libc), so by default the benchmark runs
against a private copy of libc (another inode, which no uprobe touches).

  python3 bench/access_cost.py --bench build/bench/access_cost [--samples N] [--csv FILE]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

PHASES = ("copy", "decode", "attrib", "all")


def libc_path():
    out = subprocess.run(["ldd", "/bin/true"], capture_output=True, text=True).stdout
    m = re.search(r"libc\.so\.6 => (\S+)", out)
    return m.group(1) if m else None


def collected(stderr):
    m = re.search(r"Collected\s*:\s*(\d+)", stderr)
    return int(m.group(1)) if m else None


def run_phase(bench, phase, samples, env):
    cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--callgrind-out-file=/dev/null",
           bench, "--phase", phase, "--samples", str(samples)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    n = collected(p.stderr)
    if p.returncode != 0 or n is None:
        sys.exit("access_cost.py: %s failed (rc %d):\n%s%s" % (" ".join(cmd), p.returncode,
                                                              p.stdout, p.stderr[-3000:]))
    return n, p.stdout.strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True, help="path to the built bench/access_cost")
    ap.add_argument("--samples", type=int, default=100000)
    ap.add_argument("--shared-libc", action="store_true",
                    help="run against the system libc (fails while exact-mode uprobes are live)")
    ap.add_argument("--csv")
    a = ap.parse_args()
    if not shutil.which("valgrind"):
        sys.exit("access_cost.py: valgrind not found")
    env = dict(os.environ)
    tmp = None
    if not a.shared_libc:
        libc = libc_path()
        if libc:
            tmp = tempfile.mkdtemp(prefix="access_cost.")
            shutil.copy(libc, os.path.join(tmp, "libc.so.6"))
            env["LD_LIBRARY_PATH"] = tmp + (":" + env["LD_LIBRARY_PATH"]
                                            if env.get("LD_LIBRARY_PATH") else "")
    rows = []
    try:
        for ph in PHASES:
            n, out = run_phase(a.bench, ph, a.samples, env)
            rows.append((ph, n / a.samples))
            print("  %s" % out, file=sys.stderr)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    base = rows[0][1]
    print("user-space cost per soft access sample (callgrind, %d samples, instructions)" % a.samples)
    print("%-8s %14s %10s" % ("phase", "insns/sample", "x copy"))
    for ph, v in rows:
        print("%-8s %14.0f %10.1f" % (ph, v, v / base if base else 0))
    if a.csv:
        with open(a.csv, "w") as f:
            f.write("phase,instructions_per_sample,ratio_to_copy\n")
            for ph, v in rows:
                f.write("%s,%.1f,%.2f\n" % (ph, v, v / base if base else 0))


if __name__ == "__main__":
    main()
