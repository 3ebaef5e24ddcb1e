#!/usr/bin/env python3
"""check_html: `memprofd export html` opened in headless Chromium (Debian's chromium):
the rendered DOM must show the top context (by bytes, from `memprofd query contexts`) in
the first row of the top-contexts table, the summary and the hot and cold data symbol
tables must be there, the viewer script must have run (flame graph frames, heap map
cells, data-ready), a view link (#sort=) must sort the table by the clicked column, and
nothing may be fetched from the network. The
screenshot is saved into the meson test log folder. Store from bench/gen_store, no BPF.
Exits 0 pass, 1 fail, 77 skip (no chromium)."""
import argparse
import html
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile

SKIP = 77
CHROMIUM_TIMEOUT_S = 120
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync"]


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, timeout=CHROMIUM_TIMEOUT_S, **kw)
    if r.returncode != 0:
        fail("%s: exit %d: %s" % (" ".join(map(str, cmd)), r.returncode,
                                  r.stderr.decode(errors="replace")[-2000:]))
    return r.stdout


def chromium(exe, work, extra):
    profile = tempfile.mkdtemp(prefix="profile.", dir=work)
    return run([exe] + CHROMIUM_FLAGS + ["--user-data-dir=" + profile] + extra)


def short_name(name):
    """The report's display name: no parameter list, no C++ return type
    (reporter/format.c fmt_func_short, for the names gen_store makes)."""
    for q in (" const", " &&", " &", " noexcept"):
        if name.endswith(q):
            name = name[:-len(q)]
    if not name.endswith(")"):
        return name
    depth = 0
    for i in range(len(name) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(name[i], 0)
        if depth == 0:
            name = name[:i] if i else name
            break
    depth, start = 0, 0
    for i, c in enumerate(name):
        if name.startswith("operator", i) and not depth:
            break
        depth += 1 if c in "<([{" else -1 if c in ">)]}" and depth else 0
        if c == " " and not depth:
            start = i + 1
    return name[start:]


def heap_live(src, db, binary):
    """The heap chart shows bytes live, not bytes ended: its bytes x seconds are the
    store's sum over (bucket, context) of bytes x mean lifetime, and objects living longer
    than a bucket show before the bucket they ended in."""
    d = json.loads(re.search(r'id="mpd-data">(.*?)</script>', src, re.S).group(1))
    con = sqlite3.connect(db)
    rows = con.execute(
        "SELECT m.bucket_start, sum(m.alloc_count), sum(m.total_size), sum(m.total_lifetime_ns)"
        " FROM mib m JOIN contexts c ON c.id = m.context_id JOIN binaries b ON b.id = c.binary_id"
        " WHERE b.build_id = ? AND m.alloc_count > 0 GROUP BY m.bucket_start, m.context_id",
        (binary,)).fetchall()
    con.close()
    want = sum(s * (life // n) for _, n, s, life in rows) / 1e9
    got = sum(sum(b[1:]) for b in d["buckets"]) * d["bucket_s"]
    if not rows or abs(got - want) > 0.005 * want:
        fail("heap chart: %.4g byte-seconds, the store's bytes x lifetimes give %.4g" % (got, want))
    first_end = min(r[0] for r in rows)
    longest = max(life // n for _, n, _, life in rows)
    if longest > 60e9 and not d["buckets"][0][0] < first_end:
        fail("heap chart starts at %d, not before the first bucket %d whose objects lived "
             "up to %.0f s" % (d["buckets"][0][0], first_end, longest / 1e9))
    print("heap chart: %.4g byte-seconds (store: %.4g) in %d bars of %d s" %
          (got, want, len(d["buckets"]), d["bucket_s"]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--gen-store", required=True)
    ap.add_argument("--log-dir", required=True)
    a = ap.parse_args()
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        print("SKIP: chromium not installed (Debian package chromium; deploy/bootstrap.sh)")
        return SKIP
    work = tempfile.mkdtemp(prefix="check_html.")
    try:
        db = os.path.join(work, "m.db")
        run([a.gen_store, "--db", db, "--contexts", "3000", "--rows", "20000", "--binaries", "2",
             "--seed", "11"])
        binary = "9e00000000000000"
        top = json.loads(run([a.memprofd, "query", "contexts", "--db", db, "--binary", binary,
                              "--limit", "1", "--format", "json"]))[0]
        page = os.path.join(work, "report.html")
        run([a.memprofd, "export", "html", "--db", db, "--binary", binary, "-o", page])
        with open(page, encoding="utf-8") as f:
            src = f.read()
        if re.search(r'(src|href)\s*=\s*"(https?:)?//', src):
            fail("the report references a network resource")

        heap_live(src, db, binary)

        dom = chromium(exe, work, ["--virtual-time-budget=10000", "--dump-dom",
                                   "file://" + page]).decode("utf-8", errors="replace")
        if 'data-ready="1"' not in dom:
            fail("the viewer script did not finish (no data-ready on <body>)")
        m = re.search(r'<table id="ctx-table"[^>]*>.*?<tbody>\s*<tr[^>]*>(.*?)</tr>', dom, re.S)
        if not m:
            fail("no top-contexts table rows in the DOM")
        row = html.unescape(re.sub(r"<[^>]+>", " ", m.group(1)))
        leaf = short_name(top["frames"][0]["function"])
        if leaf not in row:
            fail("first row %r does not show the top context's leaf %r" % (row[:300], leaf))
        if ('data-v="%d"' % top["total_size"]) not in m.group(1):
            fail("first row does not carry the top context's %d bytes" % top["total_size"])
        if '<section id="summary">' not in dom or "allocation contexts" not in dom:
            fail("no summary section")
        # Hot and cold static data symbols (gen_store makes a tenth of them hot).
        for cls in ("hot", "cold"):
            t = re.search(r'<table id="data-%s"[^>]*>.*?<tbody>(.*?)</tbody>' % cls, dom, re.S)
            if not t or len(re.findall(r"<tr", t.group(1))) < 3:
                fail("no %s data symbols table with rows" % cls)
        nframes = len(re.findall(r'class="fr"', dom))
        ncells = len(re.findall(r'<rect[^>]*class="cell', dom))
        if nframes < 3:
            fail("flame graph drew %d frames" % nframes)
        if ncells < 3:
            fail("heap map drew %d cells" % ncells)
        # Flame tooltips: every named frame says where it is (gen_store gives each a
        # file:line), and frames of the sites' inline chains say they were inlined.
        titles = [html.unescape(t) for t in re.findall(r'<div class="fr"[^>]*title="([^"]*)"', dom)]
        named = [t for t in titles if not t.startswith(("all ", "(other contexts)"))]
        where = re.compile(r"\n\S+\.(c|cc|h):\d+( \[inlined\])?(\n|$)")
        bare = [t for t in named if not where.search(t)]
        if not named or bare:
            fail("flame tooltips without file:line: %d of %d, e.g. %r" %
                 (len(bare), len(named), bare[:2]))
        if not any("[inlined]" in t for t in named):
            fail("no flame tooltip marks an inlined frame: %r" % named[:3])

        # Sortable: a view link (#sort=TABLE:COLUMN:asc) clicks the header on load; the
        # objects column (3: after #, bytes and its ±) must then ascend, and its
        # header say so.
        dom = chromium(exe, work, ["--virtual-time-budget=10000", "--dump-dom",
                                   "file://" + page + "#sort=ctx-table:3:asc"]).decode(
                                       "utf-8", errors="replace")
        m = re.search(r'<table id="ctx-table"[^>]*>.*?<tbody>(.*?)</tbody>', dom, re.S)
        rows = re.findall(r"<tr[^>]*>(.*?)</tr>", m.group(1) if m else "", re.S)
        allocs = [int(re.findall(r'data-v="([^"]+)"', r)[3]) for r in rows]
        if len(allocs) < 3 or allocs != sorted(allocs) or allocs == sorted(allocs, reverse=True):
            fail("sorting by allocs: %r" % allocs[:10])
        if not re.search(r'<th class="asc">objects', dom):
            fail("the allocs header is not marked ascending after sorting")

        os.makedirs(a.log_dir, exist_ok=True)
        shot = os.path.join(os.path.abspath(a.log_dir), "check_html.png")
        chromium(exe, work, ["--virtual-time-budget=10000", "--screenshot=" + shot,
                             "--window-size=1280,900", "file://" + page])
        if not os.path.exists(shot) or os.path.getsize(shot) < 1000:
            fail("no screenshot at " + shot)
        print("DOM: top context %s (%d bytes) first; %d flame frames, %d heap-map cells; "
              "screenshot %s" % (leaf, top["total_size"], nframes, ncells, shot))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
