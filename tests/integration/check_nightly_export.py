#!/usr/bin/env python3
"""deploy/memprofd-nightly-export on a generated store (bench/gen_store; no BPF): every
binary with at least MEMPROFD_MIN_ALLOCS allocations gets EXPORT/BUILD-ID/ with one file
per format and a manifest.json that parses and matches the files (bytes), or names the
format's error; binaries below the threshold get nothing; no temporary file is left.
Exit status: a night where an export fails (memprof-raw cannot be made for the generated
binaries, whose files do not exist) exits 1 with one stderr line per failure and still
publishes every other file; a night where all succeed exits 0; an unreadable database
exits non-zero before writing anything.
Atomicity, made deterministic with a MEMPROFD wrapper that stops half-way through
writing one export until told to go on: meanwhile the published file is still the
previous complete one (byte for byte) and the half-written bytes sit under a temporary
name; after a SIGKILL of the whole run at that moment every published file and manifest
is still complete, and the leftovers match the tmpfiles.d cleanup pattern .*.tmp.*."""
import argparse
import glob
import gzip
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpdtest as t  # noqa: E402

# Stops in `export pprof` of the first binary after writing half of it to -o.
WRAPPER = r"""#!/bin/sh
out=""; fmt="$2"; prev=""
for a in "$@"; do [ "$prev" = "-o" ] && out="$a"; prev="$a"; done
if [ "$1" = export ] && [ "$fmt" = pprof ] && mkdir "$SIGNALS/claimed" 2>/dev/null; then
	"$REAL" "$@" -o "$out.full" || exit $?
	size=$(wc -c < "$out.full")
	head -c $((size / 2)) "$out.full" > "$out"
	echo "$out" > "$SIGNALS/waiting"
	i=0
	while [ ! -e "$SIGNALS/go" ]; do
		sleep 0.05; i=$((i + 1)); [ $i -lt 1200 ] || exit 9
	done
	cat "$out.full" > "$out"; rm -f "$out.full"
	exit 0
fi
exec "$REAL" "$@"
"""


def manifest_problems(d, bid):
    """What is wrong with EXPORT/bid: the manifest must parse and match the files."""
    probs = []
    try:
        with open(os.path.join(d, "manifest.json")) as f:
            m = json.load(f)
    except (OSError, ValueError) as e:
        return ["manifest.json: %s" % e]
    if m.get("build_id") != bid or not isinstance(m.get("files"), list):
        probs.append("manifest header: %r" % {k: m.get(k) for k in ("build_id", "files")})
    for e in m.get("files", []):
        if "error" in e:
            if not e["error"] or "\n" in e["error"]:
                probs.append("error entry: %r" % e)
            continue
        p = os.path.join(d, e.get("file", "?"))
        if not os.path.isfile(p) or os.path.getsize(p) != e.get("bytes"):
            probs.append("%s: %s bytes on disk, manifest says %s" % (
                e.get("file"), os.path.getsize(p) if os.path.exists(p) else "no file", e.get("bytes")))
        elif e["format"] == "pprof":
            try:
                gzip.decompress(open(p, "rb").read())
            except (OSError, EOFError) as ex:
                probs.append("pprof.pb.gz is not a whole gzip stream: %s" % ex)
    return probs


def snapshot(out):
    return {p: open(p, "rb").read() for p in glob.glob(out + "/*/*") if os.path.isfile(p)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--gen-store", required=True)
    ap.add_argument("--script", required=True)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="check_nightly_export.")
    db, out, sig = tmp + "/m.db", tmp + "/export", tmp + "/signals"
    fails = []
    subprocess.run([a.gen_store, "--db", db, "--contexts", "60", "--rows", "400",
                    "--binaries", "3", "--seed", "3"], check=True, capture_output=True)
    # Counts per binary decide which ones pass the threshold: the middle one's.
    p = t.run([a.memprofd, "query", "binaries", "--db", db, "--format", "json"], timeout=60)
    bins = sorted(json.loads(p.stdout), key=lambda b: b["alloc_count"])
    min_allocs = bins[1]["alloc_count"]
    want = sorted(b["build_id"] for b in bins[1:])
    env = dict(os.environ, MEMPROFD=a.memprofd, MEMPROFD_DB=db, MEMPROFD_EXPORT_DIR=out,
               MEMPROFD_MIN_ALLOCS=str(min_allocs))

    # Every default format: memprof-raw fails for each binary (no file to read), the
    # others are published, and the night says it failed.
    r = subprocess.run(["sh", a.script], env=env, capture_output=True, text=True, timeout=300)
    got = sorted(os.listdir(out)) if os.path.isdir(out) else []
    errs = r.stderr.strip().splitlines()
    if r.returncode != 1 or got != want:
        fails.append("first run: rc %d (want 1: memprof-raw fails), dirs %r (want %r); stderr %s" % (
            r.returncode, got, want, r.stderr))
    if len(errs) != len(want) or not all(
            any(e.startswith("memprofd-nightly-export: %s: memprof-raw: " % b) for e in errs)
            for b in want):
        fails.append("first run: want one stderr line per failed export, got %r" % errs)
    for bid in got:
        for pr in manifest_problems(os.path.join(out, bid), bid):
            fails.append("%s: %s" % (bid, pr))
        with open(os.path.join(out, bid, "manifest.json")) as f:
            entries = json.load(f)["files"]
        ok = sorted(e["format"] for e in entries if "file" in e)
        bad = sorted(e["format"] for e in entries if "error" in e)
        if bad != ["memprof-raw"] or len(ok) != 5:
            fails.append("%s: want memprof-raw failed and the 5 others published: %r" % (bid, entries))
    left = [f for f in glob.glob(out + "/**/.*", recursive=True)]
    if left:
        fails.append("temporary files left by a complete run: %r" % left)
    if not fails:
        t.log("ok: %d of 3 binaries exported (threshold %d allocations), manifests match; the "
              "failed memprof-raw exports made the night exit 1" % (len(got), min_allocs))
    # The formats that work: exit 0. The rest of this check uses them.
    env["MEMPROFD_FORMATS"] = "memprof-yaml hints ld-script symbol-order pprof"
    r = subprocess.run(["sh", a.script], env=env, capture_output=True, text=True, timeout=300)
    if r.returncode != 0 or r.stderr.strip():
        fails.append("a night without failures: rc %d (want 0), stderr %r" % (r.returncode, r.stderr))
    else:
        t.log("ok: a night where every export succeeds exits 0")
    # No readable database: nothing to export, and the night fails at once.
    bogus = tmp + "/not-a-db"
    with open(bogus, "w") as f:
        f.write("not sqlite\n" * 100)
    r = subprocess.run(["sh", a.script], env=dict(env, MEMPROFD_DB=bogus,
                       MEMPROFD_EXPORT_DIR=tmp + "/export-bogus"), capture_output=True, text=True,
                       timeout=60)
    if r.returncode == 0 or not r.stderr.startswith("memprofd: ") or \
            glob.glob(tmp + "/export-bogus/*"):
        fails.append("an unreadable database: rc %d, stderr %r" % (r.returncode, r.stderr))

    # A run that stops half-way through one file.
    wrapper = tmp + "/memprofd-wrapper"
    with open(wrapper, "w") as f:
        f.write(WRAPPER)
    os.chmod(wrapper, stat.S_IRWXU)
    for phase in ("finish", "kill"):
        shutil.rmtree(sig, ignore_errors=True)
        os.mkdir(sig)
        before = snapshot(out)
        wenv = dict(env, MEMPROFD=wrapper, REAL=a.memprofd, SIGNALS=sig)
        proc = subprocess.Popen(["sh", a.script], env=wenv, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        end = time.monotonic() + 60
        while not os.path.exists(sig + "/waiting") and time.monotonic() < end:
            time.sleep(0.05)
        if not os.path.exists(sig + "/waiting"):
            proc.kill()
            fails.append("%s: the wrapper never reached its pause: %s" % (phase, proc.communicate()))
            continue
        time.sleep(0.1)
        partial = open(sig + "/waiting").read().strip()
        bid = os.path.basename(os.path.dirname(partial))
        final = os.path.join(out, bid, "pprof.pb.gz")
        name = os.path.basename(partial)
        if not (name.startswith(".") and ".tmp." in name):
            fails.append("%s: the export is written as %s, not under a temporary name" % (
                phase, partial))
        if open(final, "rb").read() != before.get(final):
            fails.append("%s: %s changed while its new version was half written" % (phase, final))
        for b in want:
            for pr in manifest_problems(os.path.join(out, b), b):
                fails.append("%s, mid-run: %s: %s" % (phase, b, pr))
        if phase == "finish":
            open(sig + "/go", "w").close()
            so, se = proc.communicate(timeout=120)
            if proc.returncode != 0:
                fails.append("finish: rc %d: %s" % (proc.returncode, se))
            for b in want:
                for pr in manifest_problems(os.path.join(out, b), b):
                    fails.append("finish: %s: %s" % (b, pr))
            if glob.glob(out + "/**/.*", recursive=True):
                fails.append("finish: temporary files left: %r" % glob.glob(out + "/**/.*",
                                                                           recursive=True))
            if not fails:
                t.log("ok: while pprof.pb.gz was half written as %s, the published file was "
                      "the previous one; the run then completed" % name)
        else:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            for b in want:
                for pr in manifest_problems(os.path.join(out, b), b):
                    fails.append("after SIGKILL: %s: %s" % (b, pr))
            left = [os.path.basename(f) for f in glob.glob(out + "/**/.*", recursive=True)]
            bad = [f for f in left if not (f.startswith(".") and ".tmp." in f)]
            if bad or not left:
                fails.append("after SIGKILL: leftovers %r (want only .*.tmp.* names)" % left)
            else:
                t.log("ok: SIGKILL mid-run: published files and manifests complete; leftovers "
                      "%r match the tmpfiles.d pattern .*.tmp.*" % left)
    t.finish(fails, "nightly export", tmp)


if __name__ == "__main__":
    sys.exit(main())
