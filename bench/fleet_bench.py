#!/usr/bin/env python3
"""fleet_bench: memprofd push + fleet export on ClickHouse against memprofd merge, side by side.

Generates --hosts stores with bench/gen_store (one binary; host i has --contexts contexts
starting at i * --stride, so neighbours share contexts - stride - contexts... and the
fleet has about hosts * stride distinct ones; 2 MIB rows per context), starts
deploy/clickhouse/local-cluster.sh (two shards), and times in one run:
  ingest:  every store pushed (`memprofd push`, --jobs at a time)   vs  `memprofd merge` of all
  export:  `export folded|pprof --from URL` of the whole fleet          vs  the same `--db MERGED`
  top 20:  `query contexts --limit 20 --from URL`                    vs  `--db MERGED`
and checks the two exports are the same (pprof less its time stamp). Rows/s of ingest
counts every row push sends (all tables). Stores are kept in --work (reused when there).
usage: python3 bench/fleet_bench.py --build build [--hosts 1000] [--contexts 1100]
       [--stride 1000] [--jobs 2] [--work DIR]"""
import argparse
import gzip
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def run(cmd, **kw):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if p.returncode != 0:
        sys.exit('fleet_bench: %s: %s' % (' '.join(map(str, cmd)), p.stderr.strip()))
    return p


def timed(cmd):
    t = time.monotonic()
    p = run(cmd)
    return time.monotonic() - t, p


def gen(a, i):
    db = os.path.join(a.work, 'hosts', 'h%04d.db' % i)
    if not os.path.exists(db):
        run([a.gen_store, '--db', db + '.tmp', '--contexts', a.contexts, '--rows',
             2 * a.contexts, '--binaries', 1, '--procs', 2, '--buckets', 60, '--seed', i + 1,
             '--first-context', i * a.stride])
        os.rename(db + '.tmp', db)
    return db


def push_rows(out):
    m = re.search(r'(\d+) rows', out)
    return int(m.group(1)) if m else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--build', default='build')
    ap.add_argument('--hosts', type=int, default=1000)
    ap.add_argument('--contexts', type=int, default=1100)
    ap.add_argument('--stride', type=int, default=1000)
    ap.add_argument('--jobs', type=int, default=2)
    ap.add_argument('--work', default=None)
    a = ap.parse_args()
    memprofd = os.path.join(a.build, 'cli', 'memprofd')
    a.gen_store = os.path.join(a.build, 'bench', 'gen_store')
    a.work = a.work or os.path.join(a.build, 'bench', 'fleet-%d' % a.hosts)
    os.makedirs(os.path.join(a.work, 'hosts'), exist_ok=True)
    cluster = os.path.join(ROOT, 'deploy', 'clickhouse', 'local-cluster.sh')

    t = time.monotonic()
    with ThreadPoolExecutor(a.jobs) as ex:
        dbs = list(ex.map(lambda i: gen(a, i), range(a.hosts)))
    print('stores: %d in %s (%.0f s to generate what was missing)' % (len(dbs), a.work,
                                                                     time.monotonic() - t),
          flush=True)
    chdir = os.path.join(a.work, 'ch')
    subprocess.run([cluster, 'stop', chdir], capture_output=True)
    subprocess.run(['rm', '-rf', chdir])
    url = run([cluster, 'start', chdir]).stdout.strip().splitlines()[-1]
    try:
        bench(a, memprofd, dbs, url)
    finally:
        subprocess.run([cluster, 'stop', chdir], capture_output=True)


def bench(a, memprofd, dbs, url):
    t = time.monotonic()
    with ThreadPoolExecutor(a.jobs) as ex:
        outs = list(ex.map(lambda i: run([memprofd, 'push', '--db', dbs[i], '--to', url,
                                          '--host', 'h%04d' % i]).stdout, range(len(dbs))))
    push_s = time.monotonic() - t
    rows = sum(push_rows(o) for o in outs)
    print('pushed: %d rows in %.1f s' % (rows, push_s), flush=True)
    merged = os.path.join(a.work, 'merged.db')
    if os.path.exists(merged):
        os.unlink(merged)
    merge_s, _ = timed([memprofd, 'merge', '-o', merged, *dbs])
    print('merged: %.1f s' % merge_s, flush=True)
    bid = run([memprofd, 'query', 'binaries', '--db', merged, '--format', 'csv']
              ).stdout.splitlines()[1].split(',')[0]
    nctx = run(['sqlite3', merged, 'SELECT count(*) FROM contexts']).stdout.strip()
    res = [('ingest: push (%d rows, %.0f rows/s) / merge' % (rows, rows / push_s), push_s, merge_s)]
    outs = {}
    for fmt in ('folded', 'pprof'):
        for src in ('fleet', 'merge'):
            path = os.path.join(a.work, '%s.%s' % (src, fmt))
            s = ['--from', url] if src == 'fleet' else ['--db', merged]
            outs[src, fmt] = timed([memprofd, 'export', fmt, *s, '--binary', bid, '-o', path])[0]
        res.append(('export %s, %s contexts' % (fmt, nctx), outs['fleet', fmt], outs['merge', fmt]))
    q = ['query', 'contexts', '--limit', '20', '--binary', bid]
    res.append(('query contexts --limit 20', timed([memprofd, *q, '--from', url])[0],
                timed([memprofd, *q, '--db', merged])[0]))
    same = [read(a, 'fleet', f) == read(a, 'merge', f) for f in ('folded', 'pprof')]
    print('%d hosts, %d contexts each (stride %d), push --jobs %d' % (len(dbs), a.contexts,
                                                                       a.stride, a.jobs))
    print('%-52s %10s %10s %8s' % ('', 'fleet s', 'merge s', 'ratio'))
    for name, f, m in res:
        print('%-52s %10.1f %10.1f %7.2fx' % (name, f, m, f / m if m else 0))
    print('exports equal (folded, pprof less time_nanos): %s' % same)


def read(a, src, fmt):
    with open(os.path.join(a.work, '%s.%s' % (src, fmt)), 'rb') as f:
        data = f.read()
    if fmt == 'pprof':
        data = gzip.decompress(data)
        # time_nanos is field 9 (varint): drop it by decoding the top-level fields.
        return strip_field(data, 9)
    return data


def strip_field(buf, field):
    """The top-level protobuf fields of buf, less every occurrence of `field`."""
    out, i = [], 0
    while i < len(buf):
        start = i
        key, i = varint(buf, i)
        wt = key & 7
        if wt == 0:
            _, i = varint(buf, i)
        elif wt == 2:
            n, i = varint(buf, i)
            i += n
        elif wt == 1:
            i += 8
        elif wt == 5:
            i += 4
        if key >> 3 != field:
            out.append(buf[start:i])
    return b''.join(out)


def varint(buf, i):
    v, shift = 0, 0
    while True:
        b = buf[i]
        i += 1
        v |= (b & 0x7f) << shift
        shift += 7
        if not b & 0x80:
            return v, i


if __name__ == '__main__':
    main()
