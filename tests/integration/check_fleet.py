#!/usr/bin/env python3
"""check_fleet: fleet aggregation on a two-shard ClickHouse (deploy/clickhouse/).

Records tests/workloads/hot_cold.c (built with clang-19 and the MemProf seed's flags) twice
into stores A and B, starts deploy/clickhouse/local-cluster.sh, pushes both (hosts hostA,
hostB) and compares every fleet reader with the same reader on `memprofd merge -o M A B`:
`query contexts|data|binaries --format json` byte for byte (sort keys and classes too),
and `export FORMAT --from` for every format byte for byte (pprof and html less their
export timestamp); memprof-raw also read by `llvm-profdata-19 show --memory`. Then: both
shards hold rows; a second push sends nothing and changes no table; a push cut short by
killing both shards (a generated store, bench/gen_store) exits 1 with one line, leaves
the fleet's answers as they were, and the next push completes with the fleet equal to
merge of all three; a store whose only change is an access-class row, or a stack marked
cut, is pushed again (once); one stack cut on one host under one binary and whole on
another under another binary reads cut for both, as merge keeps it (one flag per stack);
a cluster schema newer than memprofd is refused with one line.
Exits 77 (skip) only when clickhouse-server is not installed."""
import argparse
import gzip
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpdtest  # noqa: E402

FLAGS = ['-fno-omit-frame-pointer', '-mno-omit-leaf-frame-pointer',
         '-fno-optimize-sibling-calls', '-fdebug-info-for-profiling', '-gmlt', '-O2',
         '-Wl,-z,noseparate-code', '-Wl,--build-id']
SERVERS = ['/usr/bin/clickhouse-server', '/usr/sbin/clickhouse-server', '/usr/bin/clickhouse']
FORMATS = ['memprof-raw', 'memprof-yaml', 'hints', 'ld-script', 'symbol-order',
           'section-prefixes', 'pprof', 'folded', 'html']
TABLES = ['pushes', 'runs', 'binaries', 'processes', 'contexts', 'frames', 'mib', 'data']
GEN = ['--contexts', '10000', '--rows', '100000', '--binaries', '2', '--procs', '2',
       '--buckets', '30', '--seed', '7']
HTML_TIME = re.compile(rb'\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC')

errors = []


def check(ok, what):
    mpdtest.log(('ok: ' if ok else 'FAIL: ') + what)
    if not ok:
        errors.append(what)
    return ok


def run(cmd, timeout=180, **kw):
    p = mpdtest.run([str(c) for c in cmd], timeout=timeout, **kw)
    return p


def must(cmd, what, timeout=180):
    p = run(cmd, timeout)
    if p.returncode != 0:
        raise RuntimeError('%s: %s' % (what, mpdtest.describe(p)))
    return p


def sql(url, q):
    p = run(['curl', '-sS', '--fail-with-body', '--max-time', '60', url, '--data-binary', q])
    if p.returncode != 0:
        raise RuntimeError('ClickHouse: %s: %s' % (q, p.stdout + p.stderr))
    return p.stdout.strip()


def counts(url):
    return {t: int(sql(url, 'SELECT count() FROM memprofd.%s' % t)) for t in TABLES}


class Cluster:
    def __init__(self, script, d):
        self.script, self.dir, self.url = script, d, None

    def start(self):
        p = must([self.script, 'start', self.dir], 'local-cluster.sh start', timeout=120)
        self.url = p.stdout.strip().splitlines()[-1]
        return self.url

    def shard_url(self, i):
        with open(os.path.join(self.dir, 'shard%d' % i, 'url')) as f:
            return f.read().strip()

    def kill(self):
        for i in (1, 2):
            with open(os.path.join(self.dir, 'shard%d' % i, 'pid')) as f:
                os.kill(int(f.read()), signal.SIGKILL)

    def stop(self):
        run([self.script, 'stop', self.dir], timeout=120)


def reader_outputs(memprofd, src, bid, out_dir):
    """Every reader's output for src (['--db', M] or ['--from', URL]), by name."""
    os.makedirs(out_dir, exist_ok=True)
    outs = {}
    for rep, extra in [('contexts', ['--limit', '0']), ('data', ['--limit', '0']),
                       ('binaries', [])]:
        outs['query ' + rep] = must([memprofd, 'query', rep, *src, '--format', 'json', *extra],
                                    'query ' + rep).stdout.encode()
    for key in ('density', 'count', 'lifetime', 'accesses'):
        outs['query contexts --sort ' + key] = must(
            [memprofd, 'query', 'contexts', *src, '--format', 'csv', '--sort', key],
            'query contexts').stdout.encode()
    for cls in ('hot', 'cold', 'notcold'):
        outs['query data --class ' + cls] = must(
            [memprofd, 'query', 'data', *src, '--format', 'json', '--class', cls],
            'query data').stdout.encode()
    for fmt in FORMATS:
        path = os.path.join(out_dir, fmt)
        must([memprofd, 'export', fmt, *src, '--binary', bid, '-o', path], 'export ' + fmt)
        with open(path, 'rb') as f:
            data = f.read()
        if fmt == 'pprof':    # time_nanos is the export's own clock
            data = re.sub(rb'time_nanos: \d+', b'time_nanos: T', pprof_text(data))
        if fmt == 'html':
            data = HTML_TIME.sub(b'T', data)
        outs['export ' + fmt] = data
    must([memprofd, 'export', 'hints', *src, '--binary', bid, '--format', 'json', '-o',
          os.path.join(out_dir, 'hints.json')], 'export hints json')
    with open(os.path.join(out_dir, 'hints.json'), 'rb') as f:
        outs['export hints --format json'] = f.read()
    return outs


PROTO = None


def pprof_text(data):
    p = subprocess.run(['protoc', '--decode=perftools.profiles.Profile',
                        '--proto_path=' + os.path.dirname(PROTO), PROTO],
                       input=gzip.decompress(data), capture_output=True)
    if p.returncode != 0:
        raise RuntimeError('protoc --decode: ' + p.stderr.decode())
    return p.stdout


def compare_readers(memprofd, merged, url, bid, tmp, label):
    local = reader_outputs(memprofd, ['--db', merged], bid, os.path.join(tmp, 'l'))
    fleet = reader_outputs(memprofd, ['--from', url], bid, os.path.join(tmp, 'f'))
    for k in local:
        same = local[k] == fleet[k]
        check(same, '%s: %s from the fleet equals merge (%d bytes)' % (label, k, len(local[k])))
        if not same:
            at = next((i for i, (x, y) in enumerate(zip(local[k], fleet[k])) if x != y),
                      min(len(local[k]), len(fleet[k])))
            mpdtest.log('  first difference at byte %d:\n  merge: %r\n  fleet: %r' % (
                at, local[k][max(0, at - 150):at + 150], fleet[k][max(0, at - 150):at + 150]))
    return local


def build_workload(src, tmp):
    exe = os.path.join(tmp, 'hot_cold')
    must(['clang-19', *FLAGS, '-o', exe, src], 'building hot_cold')
    return exe


def record(memprofd, db, exe, args):
    p = mpdtest.record(memprofd, db, [exe, *args], extra=['--access', 'soft', '--freq', '1000'])
    if p.returncode != 0:
        raise RuntimeError('record: ' + mpdtest.describe(p))


def push(memprofd, db, url, host, timeout=180):
    return run([memprofd, 'push', '--db', db, '--to', url, '--host', host], timeout)


def main():
    global PROTO
    ap = argparse.ArgumentParser()
    ap.add_argument('--memprofd', required=True)
    ap.add_argument('--workload-source', required=True, help='tests/workloads/hot_cold.c')
    ap.add_argument('--gen-store', required=True)
    ap.add_argument('--cluster', required=True, help='deploy/clickhouse/local-cluster.sh')
    ap.add_argument('--proto', required=True, help='reporter/profile.proto')
    a = ap.parse_args()
    PROTO = os.path.abspath(a.proto)
    if not any(os.access(s, os.X_OK) for s in SERVERS):
        mpdtest.skip('clickhouse-server not installed (Debian package clickhouse-server)')
    tmp = tempfile.mkdtemp(prefix='check_fleet.')
    cl = Cluster(a.cluster, os.path.join(tmp, 'ch'))
    try:
        run_checks(a, tmp, cl)
    except RuntimeError as e:
        check(False, str(e))
    finally:
        cl.stop()
    mpdtest.finish(errors, 'check_fleet', tmp)


def run_checks(a, tmp, cl):
    m = a.memprofd
    exe = build_workload(a.workload_source, tmp)
    A, B, G = (os.path.join(tmp, n) for n in ('a.db', 'b.db', 'g.db'))
    record(m, A, exe, ['--seconds', '1'])
    record(m, B, exe, ['--seconds', '1', '--pieces', '4'])
    must([a.gen_store, '--db', G, *GEN], 'gen_store')
    bid = mpdtest.elf_build_id(exe)
    # issue 16: one stack of B cut before its outermost frame (as the daemon marks it):
    # the fleet must say "truncated" for that context as merge does.
    con = sqlite3.connect(B)
    con.execute("UPDATE stacks SET truncated = 1 WHERE id = (SELECT min(id) FROM stacks)")
    con.commit()
    con.close()
    url = cl.start()

    for db, host in ((A, 'hostA'), (B, 'hostB')):
        p = push(m, db, url, host)
        check(p.returncode == 0 and 'runs sent' in p.stdout, 'push %s: %s' % (host, p.stdout.strip()
                                                                            or p.stderr.strip()))
    merged = os.path.join(tmp, 'ab.db')
    must([m, 'merge', '-o', merged, A, B], 'merge')
    local = compare_readers(m, merged, url, bid, tmp, 'A+B')
    check(re.search(rb'"truncated": ?true', local['query contexts']) is not None,
          'merge (and so the fleet) names a truncated context')

    # memprof-raw of the fleet read back by LLVM, the same as the merged store's.
    show = run(['llvm-profdata-19', 'show', '--memory', '--profiled-binary', exe,
                os.path.join(tmp, 'f', 'memprof-raw')])
    check(show.returncode == 0 and 'MemInfoBlock' in show.stdout,
          'llvm-profdata-19 show reads the fleet memprof-raw (%s)' % show.stderr.strip()[:200])
    check('hot_global' in local['query data'].decode(), 'the stores have data symbols')
    check(b'alloc_hot' in local['export memprof-yaml'], 'the stores have the alloc_hot context')

    # Both shards hold data. A small store's few contexts may all hash to one shard (the
    # MIB rows follow their context), so the rows of every sharded table are counted; the
    # byte-for-byte equality with merge above is what shows that the shards combine right.
    data = ('contexts_local', 'frames_local', 'mib_local', 'data_local')
    rows = [sum(int(sql(cl.shard_url(i), 'SELECT count() FROM memprofd.%s' % tb)) for tb in data)
            for i in (1, 2)]
    mib = [int(sql(cl.shard_url(i), 'SELECT count() FROM memprofd.mib_local')) for i in (1, 2)]
    mpdtest.log('rows per shard (contexts, frames, MIB, data): %s; MIB rows alone: %s' % (rows, mib))
    check(all(rows), 'both shards hold rows: %s' % rows)

    before = counts(url)
    p = push(m, A, url, 'hostA')
    check(p.returncode == 0 and 'nothing new' in p.stdout, 'a second push sends nothing: '
          + (p.stdout.strip() or p.stderr.strip()))
    check(counts(url) == before, 'a second push changes no table: %s' % before)

    interrupted_push(m, a, tmp, cl, A, B, G, bid, local)
    hostile_text(m, tmp, cl, A)
    access_and_truncated(m, tmp, cl, A)
    newer_schema(m, cl, A)


def interrupted_push(m, a, tmp, cl, A, B, G, bid, local_ab):
    url = cl.url
    proc = subprocess.Popen([m, 'push', '--db', G, '--to', url, '--host', 'hostG'],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline and proc.poll() is None:
        if int(sql(url, "SELECT count() FROM memprofd.frames WHERE host = 'hostG'") or 0):
            break
        time.sleep(0.02)
    cut = proc.poll() is None
    cl.kill()
    out, err = proc.communicate(timeout=120)
    check(cut, 'the cluster was killed while the push ran')
    lines = err.strip().splitlines()
    check(proc.returncode == 1 and len(lines) == 1 and lines[0].startswith('memprofd: push: '),
          'a push cut short exits 1 with one line: rc=%s %r' % (proc.returncode, err.strip()))
    cl.stop()
    url = cl.start()
    q = [m, 'query', 'contexts', '--from', url, '--format', 'json', '--limit', '0']
    check(must(q, 'query').stdout.encode() == local_ab['query contexts'],
          'after the cut push the fleet still answers as merge of A and B')
    p = push(m, G, url, 'hostG')
    check(p.returncode == 0 and 'runs sent' in p.stdout, 'the next push completes: '
          + (p.stdout.strip() or p.stderr.strip()))
    check(sql(url, "SELECT count() FROM memprofd.pushes WHERE host = 'hostG'") == '1',
          'one ledger row for hostG')
    merged = os.path.join(tmp, 'abg.db')
    must([m, 'merge', '-o', merged, A, B, G], 'merge')
    for rep in ('contexts', 'data', 'binaries'):
        extra = [] if rep == 'binaries' else ['--limit', '0']
        l = must([m, 'query', rep, '--db', merged, '--format', 'json', *extra], 'query').stdout
        f = must([m, 'query', rep, '--from', url, '--format', 'json', *extra], 'query').stdout
        check(l == f, 'after the repush: query %s from the fleet equals merge of A, B, G' % rep)
    # gen_store's buckets: one a minute from GEN_T0 (1700000000 s) for 30 minutes; its run
    # starts at GEN_T0 (data rows are selected by their run's start).
    for rep, window in (('contexts', ['--since', '1700000600', '--until', '1700001200']),
                        ('data', ['--since', '1699999999', '--until', '1700000001'])):
        l = must([m, 'query', rep, '--db', merged, *window, '--format', 'json', '--limit', '0'],
                 'query').stdout
        f = must([m, 'query', rep, '--from', url, *window, '--format', 'json', '--limit', '0'],
                 'query').stdout
        check(l == f and len(l) > 10, 'query %s --since --until from the fleet equals merge' % rep)
    f = must([m, 'query', 'contexts', '--from', url, '--host', 'host[AB]', '--format', 'json',
              '--limit', '0'], 'query --host').stdout.encode()
    check(f == local_ab['query contexts'], '--host host[AB] answers as merge of A and B')


EVIL = "evil\t'name'\n\\[x],y"


def hostile_text(m, tmp, cl, A):
    """Names with tabs, newlines, quotes, backslashes and brackets survive the trip."""
    E = os.path.join(tmp, 'e.db')
    shutil.copy(A, E)
    con = sqlite3.connect(E)
    con.execute('UPDATE frames SET function = ? WHERE id = (SELECT min(id) FROM frames)', (EVIL,))
    con.execute('UPDATE frame_lines SET file = ?', (EVIL + '.c',))
    con.execute('UPDATE data_access SET symbol = symbol || ?', (EVIL,))
    con.commit()
    con.close()
    p = push(m, E, cl.url, 'hostE')
    check(p.returncode == 0, 'push of a store with hostile names: ' + (p.stdout + p.stderr).strip())
    merged = os.path.join(tmp, 'e-merged.db')
    must([m, 'merge', '-o', merged, E], 'merge')
    for rep in ('contexts', 'data'):
        l = must([m, 'query', rep, '--db', merged, '--format', 'json', '--limit', '0'], 'q').stdout
        f = must([m, 'query', rep, '--from', cl.url, '--host', 'hostE', '--format', 'json',
                  '--limit', '0'], 'q').stdout
        check(l == f and 'evil' in f, 'hostile names: query %s from the fleet equals merge' % rep)


def access_and_truncated(m, tmp, cl, A):
    """Access-class rows are part of a run's change mark; a stack's truncated flag is the
    stack's on the fleet as in merge, whichever binary's context carries it."""
    C = os.path.join(tmp, 'c.db')
    shutil.copy(A, C)
    check(push(m, C, cl.url, 'hostC').returncode == 0, 'push hostC')
    con = sqlite3.connect(C)
    con.execute("INSERT INTO access_classes SELECT min(id), 'issue20-new', 7, 70 FROM runs")
    con.commit()
    con.close()
    p = push(m, C, cl.url, 'hostC')
    n = sql(cl.url, "SELECT count() FROM memprofd.access_classes WHERE host = 'hostC' AND"
            " class = 'issue20-new'")
    check(p.returncode == 0 and 'runs sent' in p.stdout and n == '1',
          'a store whose only change is an access-class row is pushed again: %s (rows %s)'
          % ((p.stdout + p.stderr).strip(), n))
    p = push(m, C, cl.url, 'hostC')
    check('nothing new' in p.stdout, 'and then not again: ' + (p.stdout + p.stderr).strip())
    # A stack the daemon marks cut after its rows were pushed changes its runs' marks.
    con = sqlite3.connect(C)
    con.execute("UPDATE stacks SET truncated = 1")
    con.commit()
    con.close()
    p = push(m, C, cl.url, 'hostC')
    f = must([m, 'query', 'contexts', '--from', cl.url, '--host', 'hostC', '--format', 'json',
              '--limit', '0'], 'q').stdout
    check('runs sent' in p.stdout and all(c['truncated'] for c in json.loads(f)),
          'a stack cut after the push is pushed again and read cut: ' + p.stdout.strip())

    # One stack under two binaries on two hosts: cut on hostT1 under A's binary, whole on
    # hostT2 under another. merge keeps one truncated flag per stack, so must the fleet.
    T1, T2 = os.path.join(tmp, 't1.db'), os.path.join(tmp, 't2.db')
    for t in (T1, T2):
        shutil.copy(A, t)
    con = sqlite3.connect(T1)
    h = con.execute("SELECT s.hash FROM stacks s JOIN contexts c ON c.stack_id = s.id"
                    " ORDER BY s.id DESC LIMIT 1").fetchone()[0]
    con.execute("UPDATE stacks SET truncated = 1 WHERE hash = ?", (h,))
    con.commit()
    con.close()
    con = sqlite3.connect(T2)
    con.execute("UPDATE stacks SET truncated = 0")
    con.execute("INSERT INTO binaries (build_id, path) VALUES ('0123456789abcdef', '/issue20/other')")
    con.execute("UPDATE contexts SET binary_id = (SELECT id FROM binaries WHERE path ="
                " '/issue20/other') WHERE stack_id = (SELECT id FROM stacks WHERE hash = ?)", (h,))
    con.commit()
    con.close()
    for t, host in ((T1, 'hostT1'), (T2, 'hostT2')):
        check(push(m, t, cl.url, host).returncode == 0, 'push ' + host)
    merged = os.path.join(tmp, 't-merged.db')
    must([m, 'merge', '-o', merged, T1, T2], 'merge')
    l = must([m, 'query', 'contexts', '--db', merged, '--format', 'json', '--limit', '0'],
             'q').stdout
    f = must([m, 'query', 'contexts', '--from', cl.url, '--host', 'hostT?', '--format', 'json',
              '--limit', '0'], 'q').stdout
    other = [c for c in json.loads(l) if c['binary'] == '/issue20/other']
    check(l == f and len(other) == 1 and other[0]['truncated'],
          'truncated per stack: the fleet equals merge, the other binary\'s context cut: %r'
          % [c['truncated'] for c in other])


def newer_schema(m, cl, A):
    sql(cl.shard_url(2), "INSERT INTO memprofd.meta_local VALUES ('schema_version', 99)")
    for cmd in ([m, 'push', '--db', A, '--to', cl.url, '--host', 'hostN'],
                [m, 'query', 'contexts', '--from', cl.url]):
        p = run(cmd)
        lines = p.stderr.strip().splitlines()
        check(p.returncode == 1 and len(lines) == 1 and 'newer than this memprofd' in lines[0],
              '%s refuses a newer cluster schema: %r' % (cmd[1], p.stderr.strip()))


if __name__ == '__main__':
    main()
