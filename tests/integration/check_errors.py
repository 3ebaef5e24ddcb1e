#!/usr/bin/env python3
"""check_errors: bad input gives exactly one stderr line `memprofd: <what>: <why>` and
exit 2 (bad usage) or 1 (runtime failure), and never damages a database.
Usage errors must not create the --db file; --help exits 0 with text on stdout.
Runtime cases: a command that does not exist, --pid of a dead process, an --db that
cannot be created (/proc, /sys, below a regular file), an --db that is not SQLite (record
and query; the file must stay byte-identical), a missing --db for query (not created),
record --access spe on a host without arm_spe (the message says so), and record
without CAP_BPF (the message names CAP_BPF); query needs no capabilities.
After each failed record on an existing DB: PRAGMA integrity_check is ok and every
context recorded before is still there with the same numbers.
Usage: check_errors.py --memprofd PATH --short-lived PATH"""
import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpdtest as t  # noqa: E402

ERR_LINE = re.compile(r"memprofd: \S.*: \S.*")
DROP_CAPS = ["setpriv", "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all", "--"]


class Checker:
    def __init__(self, memprofd, cwd):
        self.memprofd, self.cwd = memprofd, cwd
        self.errs, self.n = [], 0

    def expect_error(self, label, args, rc, prefix=(), must_mention=None, timeout=60):
        """Runs memprofd args; checks exit code rc and one well-formed stderr line."""
        self.n += 1
        p = t.run([*prefix, self.memprofd, *args], timeout=timeout, cwd=self.cwd)
        lines = p.stderr.splitlines()
        problems = []
        if p.returncode != rc:
            problems.append("exit %d, expected %d" % (p.returncode, rc))
        if len(lines) != 1:
            problems.append("%d stderr lines, expected exactly 1" % len(lines))
        if lines and not lines[0].startswith("memprofd: "):
            problems.append("stderr does not start with 'memprofd: '")
        elif len(lines) == 1 and not ERR_LINE.fullmatch(lines[0]):
            problems.append("stderr is not 'memprofd: <what>: <why>'")
        if must_mention and must_mention not in p.stderr:
            problems.append("stderr does not name %s" % must_mention)
        status = "ok  " if not problems else "FAIL"
        t.log("%s %-34s rc=%-3d %s" % (status, label, p.returncode,
                                      (lines[0] if lines else "(no stderr)")[:110]))
        if problems:
            self.errs.append("%s: %s\n    cmd: %s\n    stderr: %r" % (
                label, "; ".join(problems), " ".join(map(str, p.args)), p.stderr[:600]))
        return p

    def fail(self, msg):
        t.log("FAIL " + msg)
        self.errs.append(msg)


def dead_pid():
    """A pid that belonged to a process that has exited and been reaped."""
    for _ in range(100):
        p = subprocess.Popen(["true"])
        p.wait()
        if not os.path.exists("/proc/%d" % p.pid):
            return p.pid
    raise RuntimeError("could not find a free pid")


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def ctx_key(c):
    return (c["build_id"], tuple((f.get("function"), f.get("address")) for f in c["frames"]))


def ctx_val(c):
    return tuple(c[k] for k in ("alloc_count", "total_size", "min_size", "max_size",
                                "total_lifetime_ms", "min_lifetime_ms", "max_lifetime_ms"))


def drop_caps_prefix():
    if shutil.which("setpriv"):
        return DROP_CAPS
    if shutil.which("capsh"):
        return ["capsh", "--drop=cap_bpf,cap_sys_admin,cap_perfmon", "--", "-c",
                'exec "$0" "$@"']
    return None


def usage_cases(ck, tmp):
    db = os.path.join(tmp, "usage.db")
    # Bare `memprofd` is bad usage (exit 2); printing the usage text there is fine.
    ck.n += 1
    p = t.run([ck.memprofd], timeout=30, cwd=tmp)
    ok = p.returncode == 2 and (p.stderr.startswith("usage:") or
                                (len(p.stderr.splitlines()) == 1 and ERR_LINE.fullmatch(p.stderr.strip())))
    t.log("%s %-34s rc=%-3d" % ("ok  " if ok else "FAIL", "no subcommand", p.returncode))
    if not ok:
        ck.errs.append("no subcommand: expected exit 2 and usage text or one error line on "
                       "stderr: " + t.describe(p))
    cases = [
        ("unknown subcommand", ["frobnicate"]),
        ("record --alloc bogus", ["record", "--db", db, "--alloc", "bogus", "--", "true"]),
        ("record without target", ["record", "--db", db, "--alloc", "exact"]),
        ("record --pid not a number", ["record", "--db", db, "--alloc", "exact", "--pid", "abc"]),
        ("record --pid and a command", ["record", "--db", db, "--alloc", "exact", "--pid", "1",
                                        "--", "true"]),
        ("record unknown option", ["record", "--db", db, "--no-such-option", "--", "true"]),
        ("record --duration not a number", ["record", "--db", db, "--alloc", "exact",
                                            "--duration", "soon", "--", "true"]),
        ("query unknown what", ["query", "nosuch", "--db", db]),
        ("query --format xml", ["query", "contexts", "--db", db, "--format", "xml"]),
        ("query --limit not a number", ["query", "contexts", "--db", db, "--limit", "many"]),
        ("query --sort unknown", ["query", "contexts", "--db", db, "--sort", "nope"]),
    ]
    for label, args in cases:
        ck.expect_error(label, args, 2)
        if os.path.exists(db):
            ck.fail("%s: a usage error created the --db file %s" % (label, db))
            os.unlink(db)
    # Every subcommand has --help: record and query always, and whatever else the
    # top-level --help lists (export and daemon once they exist).
    top = t.run([ck.memprofd, "--help"], timeout=30, cwd=tmp).stdout
    listed = [c for c in ("export", "daemon") if re.search(r"^\s+%s\b" % c, top, re.M)]
    for c in ("export", "daemon"):
        if c not in listed:
            t.log("note memprofd --help does not list '%s' yet: its --help is not checked" % c)
    for args in [[], ["record"], ["query"]] + [[c] for c in listed]:
        ck.n += 1
        p = t.run([ck.memprofd, *args, "--help"], timeout=30, cwd=tmp)
        ok = p.returncode == 0 and p.stdout.strip() and not p.stderr.strip()
        t.log("%s %-34s rc=%-3d" % ("ok  " if ok else "FAIL", " ".join(["memprofd", *args, "--help"]), p.returncode))
        if not ok:
            ck.errs.append("memprofd %s --help: expected exit 0, text on stdout and nothing on "
                           "stderr: %s" % (" ".join(args), t.describe(p)))


def reader_cases(ck, tmp, garbage):
    before = sha(garbage)
    ck.expect_error("query --db not SQLite", ["query", "contexts", "--db", garbage,
                                              "--format", "json"], 1)
    if sha(garbage) != before:
        ck.fail("query --db not SQLite: the file was modified")
    missing = os.path.join(tmp, "missing.db")
    ck.expect_error("query --db missing", ["query", "contexts", "--db", missing,
                                           "--format", "json"], 1)
    if os.path.exists(missing):
        ck.fail("query --db missing: the reader created %s" % missing)


def verify_db(ck, label, db, baseline):
    """The DB recorded before a failed command is intact and still says the same."""
    with open(db, "rb") as f:
        if f.read(16) != b"SQLite format 3\0":
            ck.fail("%s: %s no longer has an SQLite header" % (label, db))
            return
    try:
        ic = t.integrity(db)
    except Exception as e:  # sqlite3.DatabaseError and friends: report, don't crash
        ck.fail("%s: integrity_check could not run: %s" % (label, e))
        return
    if ic != "ok":
        ck.fail("%s: PRAGMA integrity_check says %r" % (label, ic))
    try:
        now = {ctx_key(c): ctx_val(c) for c in t.query_contexts(ck.memprofd, db)}
    except RuntimeError as e:
        ck.fail("%s: the old DB cannot be queried any more: %s" % (label, e))
        return
    lost = [k for k, v in baseline.items() if now.get(k) != v]
    if lost:
        ck.fail("%s: %d of %d earlier contexts are gone or changed, e.g. %s: %s -> %s" % (
            label, len(lost), len(baseline), lost[0][1][:2], baseline[lost[0]], now.get(lost[0])))


def writer_cases(ck, tmp, garbage, short_lived):
    good = os.path.join(tmp, "good.db")
    wl = os.path.abspath(short_lived)
    p = t.record(ck.memprofd, good, [wl], timeout=60)
    if p.returncode != 0 or not os.path.exists(good):
        ck.fail("cannot make the baseline DB: " + t.describe(p))
        return
    try:
        baseline = {ctx_key(c): ctx_val(c) for c in t.query_contexts(ck.memprofd, good)}
    except RuntimeError as e:
        ck.fail("baseline DB cannot be queried: %s" % e)
        return
    if not baseline:
        ck.fail("baseline DB has no contexts after recording short_lived")
    t.log("baseline: %d contexts in %s" % (len(baseline), good))
    rec = ["record", "--alloc", "exact", "--db"]

    ck.expect_error("record -- /nonexistent/cmd", rec + [good, "--", "/nonexistent/cmd"], 1)
    verify_db(ck, "after record -- /nonexistent/cmd", good, baseline)

    dead = dead_pid()
    ck.expect_error("record --pid <dead>", rec + [good, "--duration", "1", "--pid", str(dead)], 1)
    verify_db(ck, "after record --pid <dead>", good, baseline)

    regular = os.path.join(tmp, "regular-file")
    with open(regular, "w") as f:
        f.write("not a directory\n")
    for label, path in (("record --db in /proc", "/proc/nope/x.db"),
                        ("record --db in /sys", "/sys/kernel/nope-memprofd.db"),
                        ("record --db below a file", os.path.join(regular, "x.db"))):
        ck.expect_error(label, rec + [path, "--", wl], 1)

    # An absent PMU source asked for by name: one line that says why (here: no arm_spe).
    pmus = "/sys/bus/event_source/devices"
    if not any(d.startswith("arm_spe_") for d in os.listdir(pmus)):
        ck.expect_error("record --access spe (no arm_spe)", rec + [good, "--access", "spe",
                        "--", wl], 1, must_mention="no arm_spe PMU")
        verify_db(ck, "after record --access spe", good, baseline)

    before = sha(garbage)
    ck.expect_error("record --db not SQLite", rec + [garbage, "--", wl], 1)
    if sha(garbage) != before:
        ck.fail("record --db not SQLite: the file was modified (a recorder must never "
                "overwrite what is not its database)")

    prefix = drop_caps_prefix()
    if prefix is None:
        t.log("SKIP no setpriv/capsh: capability cases not run")
        return
    ck.expect_error("record without CAP_BPF", rec + [good, "--", wl], 1, prefix=prefix,
                    must_mention="CAP_BPF")
    verify_db(ck, "after record without CAP_BPF", good, baseline)
    ck.n += 1
    q = t.run([*prefix, ck.memprofd, "query", "contexts", "--db", good, "--format", "json",
               "--limit", "0"], timeout=60, cwd=tmp)
    ok = q.returncode == 0
    t.log("%s %-34s rc=%-3d" % ("ok  " if ok else "FAIL", "query without capabilities", q.returncode))
    if not ok:
        ck.fail("query without capabilities must work (readers need no privilege): " + t.describe(q))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--short-lived", required=True)
    a = ap.parse_args()
    memprofd = os.path.abspath(a.memprofd)
    tmp = tempfile.mkdtemp(prefix="mpd-errors-")
    t.log("temporary directory: " + tmp)
    garbage = os.path.join(tmp, "garbage.db")
    with open(garbage, "wb") as f:
        f.write(b"this is not SQLite\n" + os.urandom(65536))
    ck = Checker(memprofd, tmp)
    usage_cases(ck, tmp)
    reader_cases(ck, tmp, garbage)
    why = t.bpf_unavailable()
    if why:
        t.log("SKIP record runtime cases: " + why)
    else:
        writer_cases(ck, tmp, garbage, a.short_lived)
    t.finish(ck.errs, "error handling (%d cases%s)" % (ck.n, ", record cases skipped" if why else ""),
             tmp)


if __name__ == "__main__":
    main()
