#!/usr/bin/env python3
"""kill_push: SIGKILL `memprofd push` at random points, --kills times (default 100),
against the two-shard local ClickHouse (deploy/clickhouse/local-cluster.sh). The store is
bench/gen_store's, sized so one push takes about a second. After every kill: the store's
integrity_check is ok, and the fleet's answer for the host (`query contexts --from URL
--host H`) is either what it was before that push (empty) or, when the push had finished,
exactly the store's own answer (`query contexts --db`): a cut push never shows through.
When a push finishes before its kill, the next kills push as a new host. At the end a
push of every host completes (or says nothing new), and for every host the fleet's
contexts, data and binaries equal the store's byte for byte (nothing missing, nothing
twice), with one ledger row per run of the store.
Prints the figures (kills, kills that cut a push and how many of those left rows in the
cluster that no ledger row owns, kill points, checks) on its last lines. A reader that
counted such rows fails it (tried: fleet/src.c's facts without max(push_id), 8 kills).
Exits 77 only when clickhouse-server is not installed.
Usage: kill_push.py --memprofd PATH --gen-store PATH [--kills N] [--seed N] [--cluster SCRIPT]"""
import argparse
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(HERE, '..', 'tests', 'integration'))
import mpdtest  # noqa: E402
from check_fleet import SERVERS, TABLES, Cluster, sql  # noqa: E402

GEN = ['--contexts', '3000', '--rows', '30000', '--binaries', '2', '--procs', '2',
       '--buckets', '10', '--seed', '11']
KILL_SPREAD = 1.2          # kill points are uniform over [0, KILL_SPREAD x a full push]
READERS = (('contexts', ['--limit', '0']), ('data', ['--limit', '0']), ('binaries', []))


def must(cmd, what, timeout=300):
    p = mpdtest.run([str(c) for c in cmd], timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError('%s: %s' % (what, mpdtest.describe(p)))
    return p.stdout


def local(m, db, rep, extra):
    return must([m, 'query', rep, '--db', db, '--format', 'json', *extra], 'query --db')


def fleet(m, url, host, rep, extra):
    return must([m, 'query', rep, '--from', url, '--host', host, '--format', 'json', *extra],
                'query --from')


def orphans(url, host):
    """Rows of host that no ledger row owns: what cut pushes left in the cluster."""
    return sum(int(sql(url, "SELECT count() FROM memprofd.%s WHERE host = '%s' AND push_id "
                            "GLOBAL NOT IN (SELECT push_id FROM memprofd.pushes WHERE host = '%s')"
                       % (t, host, host))) for t in TABLES if t != 'pushes')


def push(m, db, url, host):
    return mpdtest.run([m, 'push', '--db', db, '--to', url, '--host', host], timeout=300)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--memprofd', required=True)
    ap.add_argument('--gen-store', required=True)
    ap.add_argument('--kills', type=int, default=100)
    ap.add_argument('--seed', type=int)
    ap.add_argument('--cluster', default=os.path.join(HERE, '..', 'deploy', 'clickhouse',
                                                      'local-cluster.sh'))
    a = ap.parse_args()
    if not any(os.access(s, os.X_OK) for s in SERVERS):
        mpdtest.skip('clickhouse-server not installed (Debian package clickhouse-server)')
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    random.seed(seed)
    mpdtest.log('seed %d' % seed)
    tmp = tempfile.mkdtemp(prefix='kill_push.')
    cl = Cluster(os.path.abspath(a.cluster), os.path.join(tmp, 'ch'))
    errors = []
    try:
        run(a, tmp, cl, errors)
    except RuntimeError as e:
        errors.append(str(e))
    finally:
        cl.stop()
    for e in errors:
        mpdtest.log('FAIL: ' + e)
    if not errors:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if errors else 0


def run(a, tmp, cl, errors):
    m, db = a.memprofd, os.path.join(tmp, 'g.db')
    must([a.gen_store, '--db', db, *GEN], 'gen_store')
    with sqlite3.connect(db) as con:
        nruns = con.execute('SELECT count(*) FROM runs').fetchone()[0]
    url = cl.start()
    want = {rep: local(m, db, rep, extra) for rep, extra in READERS}
    for warm in (1, 2):      # the second, warm one times a whole push
        t0 = time.monotonic()
        p = push(m, db, url, 'calibrate%d' % warm)
        full_s = time.monotonic() - t0
        if p.returncode != 0:
            raise RuntimeError('a whole push failed: ' + mpdtest.describe(p))
    mpdtest.log('one whole push: %.2f s' % full_s)
    empty = fleet(m, url, 'none', 'contexts', ['--limit', '0'])
    hosts, host, cut, finished, points, left = [], None, 0, 0, [], 0
    for i in range(a.kills):
        if host is None:
            host = 'k%03d' % i
            hosts.append(host)
        proc = subprocess.Popen([m, 'push', '--db', db, '--to', url, '--host', host],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        at = random.uniform(0, KILL_SPREAD * full_s)
        time.sleep(at)
        proc.send_signal(signal.SIGKILL)
        rc = proc.wait()
        points.append(at / full_s)
        ig = mpdtest.integrity(db)
        got = fleet(m, url, host, 'contexts', ['--limit', '0'])
        done = got == want['contexts']
        if ig != 'ok':
            errors.append('kill %d: integrity_check %s' % (i, ig))
        if not done and got != empty:
            errors.append('kill %d (%.2f s into the push, rc %s): host %s shows a partial '
                          'push (%d bytes of contexts, want %d or %d)' % (
                              i, at, rc, host, len(got), len(empty), len(want['contexts'])))
        if rc == -signal.SIGKILL and not done:
            cut += 1
            left += orphans(url, host) > 0
        if done:
            finished += 1
            host = None      # this host is complete: the next kills cut a new one
    checks = final_checks(m, db, url, hosts, want, nruns, errors)
    points.sort()
    mpdtest.log('kills %d: %d cut a push short (after %d of them the cluster held rows of '
                'the cut push), %d came after it had finished; kill points (fraction of a '
                'whole push) min %.2f median %.2f max %.2f; %d hosts' % (
                    a.kills, cut, left, finished, points[0], points[len(points) // 2],
                    points[-1], len(hosts)))
    mpdtest.log('checked after every kill: integrity_check, the host shows nothing or all; '
                'at the end %d reader outputs equal the store\'s and %d ledgers hold %d rows '
                'each' % (checks, len(hosts), nruns))


def final_checks(m, db, url, hosts, want, nruns, errors):
    checks = 0
    for h in hosts:
        p = push(m, db, url, h)
        if p.returncode != 0:
            errors.append('the last push of %s failed: %s' % (h, mpdtest.describe(p)))
            continue
        for rep, extra in READERS:
            checks += 1
            if fleet(m, url, h, rep, extra) != want[rep]:
                errors.append('host %s: query %s from the fleet differs from the store' % (h, rep))
        n = int(sql(url, "SELECT count() FROM memprofd.pushes WHERE host = '%s'" % h))
        if n != nruns:
            errors.append('host %s: %d ledger rows, want %d (one per run)' % (h, n, nruns))
    return checks


if __name__ == '__main__':
    sys.exit(main())
