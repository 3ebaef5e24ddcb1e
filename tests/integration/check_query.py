#!/usr/bin/env python3
"""check_query: `memprofd query` end to end on a store made by bench/gen_store (no BPF),
checked against the database read directly with python's sqlite3:
- filters (--binary, --pid, --since/--until as epoch seconds and as UTC dates, --class,
  --sort, --limit): totals, order and ties equal to sums computed here from the mib rows;
- CSV per RFC 4180 (python's csv module, strict): CRLF records, quoted commas, quotes and
  line breaks in a hostile function name come back exactly, every record the header's
  24 fields, numbers equal to the JSON's;
- tables at most COLUMNS=100 columns with gen_store's long C++ names, human units;
- a writer holding an open transaction does not block the reader, nor is its change
  seen before COMMIT; queries keep succeeding while another process commits in a loop;
- an older schema (v2: no frame_lines, data tables; v1: no ctx_totals) is read and left
  as it was (no migration, same bytes); a newer one is a one-line error, file untouched.
Exits 0 pass, 1 fail."""
import argparse
import csv
import hashlib
import io
import json
import math
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

T0_S = 1700000000              # gen_store's first bucket
MIN_NS = 60 * 10**9
HOSTILE = 'we"ird,\r\nname, with "quotes"'
WRITER = r"""
import os, sqlite3, sys
w = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
n = 0
while not os.path.exists(sys.argv[3]):
    w.execute("BEGIN IMMEDIATE")
    w.execute("UPDATE mib SET alloc_count = alloc_count + 1 WHERE context_id = ?", (int(sys.argv[2]),))
    w.execute("COMMIT")
    n += 1
print(n)
"""
COLD_DENSITY, HOT_DENSITY, COLD_LIFE_NS = 0.05, 1000.0, 200 * 10**9   # reporter/classify.h
MIN_EXPECTED, SAMPLER_MEAN = 3.0, 512 << 10      # reporter/classify.h, sampler/sampler.h
WATCH_GRANULE = 8.0                              # reporter/classify.h CLASSIFY_WATCH_GRANULE
EVIDENCE = {"weight": 0.0, "mean": 0.0}           # the store's, set by load_evidence()


def load_evidence(db):
    """classify_evidence_load(): mean accesses per sample, the sampler's mean if sampled."""
    n, est = db.execute("SELECT coalesce(sum(samples), 0), coalesce(sum(est_accesses), 0)"
                        " FROM access_classes").fetchone()
    EVIDENCE["weight"] = est / n if n else 0.0
    sampled = db.execute("SELECT count(*) FROM runs WHERE alloc_mode = 'sampled'").fetchone()[0]
    EVIDENCE["mean"] = float(SAMPLER_MEAN) if sampled else 0.0


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def run(cmd, rc=0, timeout=60):
    r = subprocess.run(cmd, capture_output=True, timeout=timeout)
    if r.returncode != rc:
        fail("%s: exit %d (want %d): %s" % (" ".join(cmd), r.returncode, rc,
                                           r.stderr.decode(errors="replace")[-1500:]))
    return r


def density(ac, ts, tl, acc):
    if not acc or not ts or not ac:
        return 0.0
    return acc / ts / max(tl / (ac * 1e9), 0.001)


def expected_hot(ac, ts, tl, wns=0):
    w, mean = EVIDENCE["weight"], EVIDENCE["mean"]
    if not ac:
        return 0.0
    traps = HOT_DENSITY * WATCH_GRANULE * wns / 1e9     # the context's own watches
    if w <= 0:
        return traps
    b = float(ts)
    if mean > 0:
        b *= -math.expm1(-(b / ac) / mean)
    return HOT_DENSITY * b * max((tl // ac) / 1e9, 0.001) / w + traps


def classify(ac, ts, tl, acc, wns=0):
    d = density(ac, ts, tl, acc)
    if d > HOT_DENSITY:
        return "hot"
    if not acc and expected_hot(ac, ts, tl, wns) < MIN_EXPECTED:
        return "unknown"
    if d < COLD_DENSITY and ac and tl // ac >= COLD_LIFE_NS:
        return "cold"
    return "notcold"


def reference(db, binary=None, pid=None, since=None, until=None, sort="bytes", limit=20,
              cls=None):
    """Contexts as `query contexts` must list them, from the raw mib rows."""
    where, args = ["m.alloc_count > 0"], []
    if binary:
        where.append("b.build_id = ? OR b.path = ?")
        args += [binary, binary]
    if pid:
        where.append("m.process_id IN (SELECT id FROM processes WHERE pid = ?)")
        args.append(pid)
    if since:
        where.append("m.bucket_start >= ?")
        args.append(since)
    if until:
        where.append("m.bucket_start < ?")
        args.append(until)
    sql = ("SELECT m.context_id, sum(m.alloc_count), sum(m.total_size), sum(m.total_lifetime_ns),"
           " sum(m.total_access_count), sum(m.watch_ns) FROM mib m"
           " JOIN contexts c ON c.id = m.context_id"
           " JOIN binaries b ON b.id = c.binary_id WHERE " +
           " AND ".join("(%s)" % w for w in where) + " GROUP BY m.context_id")
    rows = db.execute(sql, args).fetchall()
    key = {"bytes": lambda r: r[2], "count": lambda r: r[1], "lifetime": lambda r: r[3],
           "accesses": lambda r: r[4], "density": lambda r: density(r[1], r[2], r[3], r[4])}[sort]
    rows = [r for r in rows if cls is None or classify(r[1], r[2], r[3], r[4], r[5]) == cls]
    rows.sort(key=lambda r: (-key(r), r[0]))
    return rows[:limit] if limit else rows


def check_generated(path):
    """gen_store drops mib's triggers and indexes while loading: they must be back, and
    ctx_totals equal to grouping the rows, as the writer keeps it."""
    db = sqlite3.connect("file:%s?mode=ro" % path, uri=True)
    names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE tbl_name = 'mib'")}
    want = {"mib_totals_ins", "mib_totals_del", "mib_totals_upd", "mib_process", "mib_bucket"}
    if not want <= names:
        fail("gen_store: missing on mib: %r" % sorted(want - names))
    diff = db.execute(
        "SELECT count(*) FROM (SELECT context_id, count(*) n, sum(alloc_count) a, sum(total_size)"
        " s, sum(total_lifetime_ns) l, sum(total_access_count) x FROM mib WHERE alloc_count > 0"
        " GROUP BY context_id EXCEPT SELECT context_id, rows, alloc_count, total_size,"
        " total_lifetime_ns, total_access_count FROM ctx_totals)").fetchone()[0]
    if diff:
        fail("gen_store: %d contexts' ctx_totals differ from their rows" % diff)
    db.close()


def check_filters(a, path):
    db = sqlite3.connect("file:%s?mode=ro" % path, uri=True)
    load_evidence(db)
    noon = T0_S + 720 * 60
    cases = [
        ({}, []),
        ({"sort": "count"}, ["--sort", "count"]),
        ({"sort": "density", "limit": 7}, ["--sort", "density", "--limit", "7"]),
        ({"binary": "9e00000000000001"}, ["--binary", "9e00000000000001"]),
        ({"binary": "/srv/gen/app0", "sort": "lifetime"}, ["--binary", "/srv/gen/app0", "--sort",
                                                           "lifetime"]),
        ({"pid": 1003}, ["--pid", "1003"]),
        ({"since": noon * 10**9}, ["--since", str(noon)]),
        ({"until": noon * 10**9, "sort": "accesses"}, ["--until", "2023-11-15T10:13:20Z",
                                                       "--sort", "accesses"]),
        ({"since": noon * 10**9, "until": (noon + 3600) * 10**9, "pid": 1002},
         ["--since", "2023-11-15 10:13:20", "--until", str(noon + 3600), "--pid", "1002"]),
        ({"cls": "hot"}, ["--class", "hot"]),
        ({"cls": "cold", "limit": 5, "since": noon * 10**9}, ["--class", "cold", "--limit", "5",
                                                             "--since", str(noon)]),
        ({"cls": "notcold", "sort": "density", "pid": 1001},
         ["--class", "notcold", "--sort", "density", "--pid", "1001"]),
        ({"cls": "unknown", "limit": 0}, ["--class", "unknown", "--limit", "0"]),
        ({"limit": 0, "binary": "9e00000000000001", "until": (T0_S + 60) * 10**9},
         ["--limit", "0", "--binary", "9e00000000000001", "--until", str(T0_S + 60)]),
    ]
    for ref_args, cli in cases:
        ref_args = dict(ref_args)
        ref_args.setdefault("limit", 20)
        if "--limit" not in cli:
            cli = cli + ["--limit", "20"]
        want = reference(db, **ref_args)
        got = json.loads(run([a.memprofd, "query", "contexts", "--db", path, "--format", "json"]
                             + cli).stdout)
        if len(got) != len(want):
            fail("query %s: %d contexts, the database says %d" % (" ".join(cli), len(got), len(want)))
        for i, (g, w) in enumerate(zip(got, want)):
            if [g["alloc_count"], g["total_size"], g["est_accesses"]] != [w[1], w[2], w[4]]:
                fail("query %s: row %d is %r, the database says %r" % (
                    " ".join(cli), i, [g["alloc_count"], g["total_size"], g["est_accesses"]],
                    [w[1], w[2], w[4]]))
            if g["class"] != classify(w[1], w[2], w[3], w[4], w[5]):
                fail("query %s: row %d class %s" % (" ".join(cli), i, g["class"]))
        if not want and "--pid" not in cli:
            fail("query %s: the case selects nothing; pick another" % " ".join(cli))
    print("filters: %d cases equal to the database's own sums" % len(cases))
    db.close()


def check_csv(a, path):
    w = sqlite3.connect(path)
    # The top context's leaf frame gets a name with every character CSV must quote.
    top = json.loads(run([a.memprofd, "query", "contexts", "--db", path, "--limit", "1",
                          "--format", "json"]).stdout)[0]
    leaf = int(top["frames"][0]["address"], 16)
    n = w.execute("UPDATE frames SET function = ? WHERE offset = ? AND binary_id = (SELECT id"
                  " FROM binaries WHERE build_id = ?)", (HOSTILE, leaf, top["build_id"])).rowcount
    w.commit()
    w.close()
    if n != 1:
        fail("could not rename the leaf frame (%d rows)" % n)
    raw = run([a.memprofd, "query", "contexts", "--db", path, "--limit", "50", "--format",
               "csv"]).stdout.decode()
    js = json.loads(run([a.memprofd, "query", "contexts", "--db", path, "--limit", "50",
                         "--format", "json"]).stdout)
    # RFC 4180: every record ends in CRLF, also the last; a bare LF only inside quotes.
    if not raw.endswith("\r\n"):
        fail("CSV does not end in CRLF")
    recs = list(csv.reader(io.StringIO(raw, newline=""), strict=True))
    header = recs[0]
    # The contract's 14 fields, then issue 21's 10 additive ones (live at exit, evidence).
    if len(header) != 24 or header[:3] != ["build_id", "binary", "frames"] or \
            header[14:16] != ["live_at_exit_count", "live_at_exit_bytes"]:
        fail("CSV header %r" % header)
    if len(recs) != len(js) + 1:
        fail("CSV has %d records, JSON %d contexts" % (len(recs) - 1, len(js)))
    nums = ["alloc_count", "total_size", "min_size", "max_size", "total_lifetime_ms",
            "min_lifetime_ms", "max_lifetime_ms", "access_samples", "est_accesses",
            "est_accesses_lo", "est_accesses_hi"]
    for i, (r, j) in enumerate(zip(recs[1:], js)):
        if len(r) != len(header):
            fail("CSV record %d has %d fields" % (i, len(r)))
        f = dict(zip(header, r))
        if f["build_id"] != j["build_id"] or f["binary"] != j["binary"] or f["class"] != j["class"]:
            fail("CSV record %d: %r vs JSON %r" % (i, r[:2], [j["build_id"], j["binary"]]))
        # An unknown bound is empty in CSV and null in JSON.
        if [int(f[k]) if f[k] != "" else None for k in nums] != [j[k] for k in nums]:
            fail("CSV record %d numbers differ from the JSON's" % i)
        if abs(float(f["lifetime_access_density"]) - j["lifetime_access_density"]) > \
                1e-9 * max(1.0, j["lifetime_access_density"]):
            fail("CSV record %d density differs" % i)
    if recs[1][2].split(";")[0] != HOSTILE:
        fail("CSV: the hostile leaf came back as %r" % recs[1][2].split(";")[0])
    # Commas inside template names are quoted too (gen_store's std::vector<..., ...>).
    if not any("," in r[2] for r in recs[1:]):
        fail("CSV: no frames field with a comma to check")
    print("csv: %d records, RFC 4180 strict parse, equal to the JSON" % (len(recs) - 1))


def run_cols(cmd, cols):
    r = subprocess.run(cmd, capture_output=True, timeout=60, env=dict(os.environ, COLUMNS=cols))
    if r.returncode:
        fail("%s: exit %d: %s" % (" ".join(cmd), r.returncode, r.stderr.decode()[-500:]))
    return r.stdout.decode()


def check_table(a, path):
    for report, extra in (("contexts", ["--limit", "100"]), ("data", ["--limit", "50"]),
                          ("binaries", []), ("processes", []), ("status", [])):
        out = run_cols([a.memprofd, "query", report, "--db", path] + extra, "100")
        for line in out.splitlines():
            if len(line) > 100:
                fail("query %s: a line of %d columns: %r" % (report, len(line), line))
        if report == "contexts":
            if not any(u in out for u in (" GiB ", " MiB ", " KiB ")) or \
                    not any(u in out for u in (" ms ", " s ", " h ")):
                fail("query contexts: no human units in\n" + out[:500])
            if "_realloc_insert<...>" not in out:
                fail("query contexts: long C++ names not collapsed:\n" + out[:800])
    print("tables: every line <= 100 columns")


def check_writer(a, path):
    before = json.loads(run([a.memprofd, "query", "contexts", "--db", path, "--limit", "1",
                             "--format", "json"]).stdout)[0]
    w = sqlite3.connect(path, isolation_level=None, timeout=30)
    w.execute("BEGIN IMMEDIATE")
    # The last context becomes by far the biggest: the triggers update ctx_totals too.
    cid = w.execute("SELECT max(context_id) FROM mib WHERE alloc_count > 0").fetchone()[0]
    w.execute("UPDATE mib SET total_size = total_size + 10000000000000 WHERE context_id = ?", (cid,))
    t = time.monotonic()
    during = json.loads(run([a.memprofd, "query", "contexts", "--db", path, "--limit", "1",
                             "--format", "json"], timeout=20).stdout)[0]
    took = time.monotonic() - t
    if during["total_size"] != before["total_size"]:
        fail("the reader saw an uncommitted change")
    w.execute("COMMIT")
    after = json.loads(run([a.memprofd, "query", "contexts", "--db", path, "--limit", "1",
                            "--format", "json"]).stdout)[0]
    if after["total_size"] < 10000000000000:
        fail("the committed change is not seen: %d" % after["total_size"])
    w.close()
    # Another process commits in a loop while queries run.
    stop = os.path.join(os.path.dirname(path), "stop-writer")
    wp = subprocess.Popen([sys.executable, "-c", WRITER, path, str(cid), stop],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        time.sleep(0.2)
        for i in range(15):
            for fmt in ("json", "table"):
                run([a.memprofd, "query", "contexts", "--db", path, "--limit", "5", "--format",
                     fmt, "--since", str(T0_S + 600)], timeout=30)
    finally:
        open(stop, "w").close()
        out, err = wp.communicate(timeout=60)
    if wp.returncode != 0 or int(out or 0) < 2:
        fail("the writer process: exit %d, %r %r" % (wp.returncode, out, err[-500:]))
    commits = [int(out)]
    print("writer: reader not blocked (%.2f s), snapshot kept; 30 queries beside %d commits" %
          (took, commits[0]))


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def check_schemas(a, src, work):
    for version, sql in ((2, "DROP TABLE frame_lines; DROP TABLE data_access;"
                             " DROP TABLE access_classes; ALTER TABLE runs DROP COLUMN access_source;"
                             " ALTER TABLE runs DROP COLUMN access_reasons;"),
                         (1, "DROP TABLE ctx_totals; DROP TABLE frame_lines;")):
        path = os.path.join(work, "v%d.db" % version)
        shutil.copy(src, path)
        db = sqlite3.connect(path)
        db.executescript(sql + " PRAGMA user_version = %d;" % version)
        db.execute("PRAGMA journal_mode = DELETE")
        db.close()
        h = digest(path)
        js = json.loads(run([a.memprofd, "query", "contexts", "--db", path, "--limit", "3",
                             "--format", "json"]).stdout)
        if len(js) != 3 or js[0]["frames"][0]["file"] is not None:
            fail("schema v%d: %r" % (version, js[:1]))
        for report in ("data", "binaries", "processes", "status"):
            run([a.memprofd, "query", report, "--db", path])
        run([a.memprofd, "query", "contexts", "--db", path, "--since", str(T0_S + 600)])
        run([a.memprofd, "export", "pprof", "--db", path, "--binary", "9e00000000000000", "-o",
             os.path.join(work, "v.pb.gz")])
        db = sqlite3.connect("file:%s?mode=ro" % path, uri=True)
        v = db.execute("PRAGMA user_version").fetchone()[0]
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        db.close()
        if v != version or "frame_lines" in tables or digest(path) != h:
            fail("schema v%d: the reader changed the file (now v%d, tables %r)" %
                 (version, v, sorted(tables)))
    print("older schemas v2, v1: read, not migrated, same bytes")
    path = os.path.join(work, "future.db")
    shutil.copy(src, path)
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version = 99")
    db.execute("PRAGMA journal_mode = DELETE")
    db.close()
    h = digest(path)
    r = run([a.memprofd, "query", "contexts", "--db", path], rc=1)
    err = r.stderr.decode()
    if not err.startswith("memprofd: query contexts: ") or err.count("\n") != 1 or \
            "schema version 99 is newer than this memprofd supports" not in err or r.stdout:
        fail("newer schema: %r" % err)
    if digest(path) != h:
        fail("newer schema: the file was changed")
    print("newer schema: %s" % err.strip())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--gen-store", required=True)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="check_query.")
    try:
        path = os.path.join(work, "m.db")
        run([a.gen_store, "--db", path, "--contexts", "3000", "--rows", "30000", "--binaries",
             "2", "--procs", "4", "--buckets", "1440", "--seed", "5"])
        pristine = os.path.join(work, "pristine.db")
        db = sqlite3.connect(path)
        db.execute("VACUUM INTO ?", (pristine,))
        db.close()
        check_generated(path)
        check_filters(a, path)
        check_table(a, path)
        check_csv(a, path)
        check_writer(a, path)
        check_schemas(a, pristine, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
