#!/usr/bin/env python3
"""accuracy: memprofd against clang-19's own -fmemory-profile, per workload.

For each workload (a C++ source and its arguments; work fixed by the arguments where the
workload allows it) this builds two binaries with the MemProf seed's flags: one with
-fmemory-profile (clang's instrumentation, the ground truth for access counts) and one
without. It runs the instrumented one (raw profile memprof.profraw.<pid>), records the
normal one with `memprofd record --alloc exact --access soft`, exports memprofd's
memprof-raw, and reads both raw profiles back with the same reader, `llvm-profdata-19 show
--memory --profiled-binary`. Contexts are matched by their symbolized call stacks
(function, line offset, column per frame, as MemProf keys them); MIBs of one key are
merged. Both profiles then go through the same classification, memprofd's
compiler_feedback one (reporter/classify.c, transcribed in classify() below and checked
against `memprofd query contexts`' own class for every memprofd context):
  density = TotalAccessCount / TotalSize / max(average lifetime s, 0.001)
  cold: density < 0.05 and average lifetime >= COLD_LIFE; hot: density > 1000; else notcold
with COLD_LIFE = 200 s (MemProf's default) and 1 s (what pgo_e2e passes clang with
-memprof-ave-lifetime-cold-threshold=1, as no test-length run lives 200 s).

Reported per workload:
  (a) share of bytes classified the same way (weighted by clang's bytes per context; a
      clang context memprofd lacks counts as different), for both cold bounds;
  (b) per-context access counts: Spearman rank correlation of accesses per allocation and
      of lifetime access density over the matched contexts, and the ratio memprofd/clang
      of accesses per allocation (geometric mean and range, over contexts holding >= 1% of
      clang's accesses), against clang's mean and against its MinAccessCount: with LLVM
      19's runtime an object allocated again at the same address starts with part of its
      predecessors' counts (observed with print_text: the mean grows linearly with reuse,
      the minimum is the exact count), so the minimum is the reference where every object
      of a context does the same work (as in both workloads);
      plus the class of each context under both sources.
Usage: bench/accuracy.py --memprofd build/cli/memprofd [--json FILE] [--check]
  --check exits 1 unless every workload meets the bounds in CHECK (the meson test
  accuracy_clang runs it with short workloads)."""
import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

try:
    import yaml
except ImportError:
    print('SKIP: python3-yaml (PyYAML) is not installed')
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FLAGS = ['-fno-omit-frame-pointer', '-mno-omit-leaf-frame-pointer',
         '-fno-optimize-sibling-calls', '-fdebug-info-for-profiling', '-gmlt', '-O2',
         '-Wl,-z,noseparate-code', '-Wl,--build-id']
COLD_DENSITY, HOT_DENSITY = 0.05, 1000.0           # reporter/classify.h
COLD_LIFE_S = {'default': 200.0, 'test': 1.0}
WORKLOADS = {
    'pgo_workload': (os.path.join(ROOT, 'tests/workloads/pgo_workload.cc'), ['2']),
    'accuracy_mix': (os.path.join(HERE, 'accuracy_mix.cc'), ['30000']),
}
QUICK_ARGS = {'pgo_workload': ['1'], 'accuracy_mix': ['8000']}
# --check bounds: byte share with the test cold bound, and rank correlation of accesses
# per allocation (measured: see the README's accuracy section).
CHECK = {'share_test': 0.9, 'spearman_acc': 0.6}
CHECK_MIN_CONTEXTS = 4
RATIO_MIN_SHARE = 0.01     # contexts below this share of clang's accesses get no ratio


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        raise RuntimeError('%s: rc %d\n%s%s' % (' '.join(cmd), p.returncode, p.stdout[-2000:],
                                               p.stderr[-2000:]))
    return p


def classify(acc, size, count, life_ms, cold_life_s):
    """reporter/classify.c classify_mib(), from MIB sums (lifetimes in ms)."""
    if not count:
        return 'notcold'
    avg_s = life_ms / count / 1000.0
    d = 0.0 if not acc or not size else acc / size / max(avg_s, 0.001)
    if d < COLD_DENSITY and avg_s >= cold_life_s:
        return 'cold'
    return 'hot' if d > HOT_DENSITY else 'notcold'


def density(m):
    if not m['acc'] or not m['size'] or not m['count']:
        return 0.0
    return m['acc'] / m['size'] / max(m['life_ms'] / m['count'] / 1000.0, 0.001)


def read_profile(raw, binary):
    """{call-stack key: merged MIB} from `llvm-profdata-19 show --memory`."""
    out = run(['llvm-profdata-19', 'show', '--memory', '--profiled-binary=' + binary, raw]).stdout
    doc = yaml.load(out, Loader=getattr(yaml, 'CSafeLoader', yaml.SafeLoader))
    ctxs = {}
    for rec in doc['MemprofProfile'].get('Records') or []:
        for site in rec.get('AllocSites') or []:
            cs = site['Callstack']
            # Each site is listed under every function of its leaf's inline chain: once.
            if cs[0]['Function'] != rec['FunctionGUID']:
                continue
            key = tuple((f['SymbolName'], f['LineOffset'], f['Column']) for f in cs)
            b = site['MemInfoBlock']
            m = ctxs.setdefault(key, {'count': 0, 'acc': 0, 'size': 0, 'life_ms': 0,
                                      'min_acc': b['MinAccessCount']})
            m['min_acc'] = min(m['min_acc'], b['MinAccessCount'])
            m['count'] += b['AllocCount']
            m['acc'] += b['TotalAccessCount']
            m['size'] += b['TotalSize']
            m['life_ms'] += b['TotalLifetime']
    return ctxs


def ranks(v):
    order = sorted(range(len(v)), key=lambda i: v[i])
    r = [0.0] * len(v)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2.0
        i = j + 1
    return r


def spearman(x, y):
    if len(x) < 3:
        return float('nan')
    rx, ry = ranks(x), ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sx = math.sqrt(sum((a - mx) ** 2 for a in rx))
    sy = math.sqrt(sum((b - my) ** 2 for b in ry))
    return sxy / (sx * sy) if sx and sy else float('nan')


def name(key):
    return ' <- '.join(re.sub(r'^_Z\d+', '', f[0]) for f in key[:3])


def check_classifier(memprofd, db):
    """memprofd's own class per context against classify(): the transcription must agree."""
    ctxs = json.loads(run([memprofd, 'query', 'contexts', '--db', db, '--format', 'json',
                           '--limit', '0']).stdout)
    bad = [c for c in ctxs if classify(c['est_accesses'], c['total_size'], c['alloc_count'],
                                       c['total_lifetime_ms'], COLD_LIFE_S['default'])
           != c['class']]
    return len(ctxs), len(bad)


def one(memprofd, wname, src, args, freq, tmp):
    d = os.path.join(tmp, wname)
    os.makedirs(d)
    exe, inst, db, raw = (os.path.join(d, n) for n in ('normal', 'instr', 'db', 'memprofd.raw'))
    cxx = ['clang++-19'] + FLAGS
    run(cxx + [src, '-o', exe])
    run(cxx + ['-fmemory-profile', src, '-o', inst])
    t = time.monotonic()
    run([inst] + args, cwd=d)   # the runtime writes memprof.profraw.<pid> in cwd
    t_inst = time.monotonic() - t
    craw = [os.path.join(d, f) for f in os.listdir(d) if f.startswith('memprof.profraw')]
    if len(craw) != 1:
        raise RuntimeError('%s: want one memprof.profraw.*, found %s' % (wname, craw))
    t = time.monotonic()
    p = subprocess.run([memprofd, 'record', '--db', db, '--alloc', 'exact', '--access', 'soft',
                        '--freq', str(freq), '--', exe] + args, capture_output=True, text=True)
    t_rec = time.monotonic() - t
    if p.returncode != 0:
        if re.search(r'BPF|permission|not permitted|BTF|CAP_', p.stderr, re.I):
            raise PermissionError(p.stderr.strip())
        raise RuntimeError('record: ' + p.stderr)
    t = time.monotonic()
    run([exe] + args)
    t_plain = time.monotonic() - t
    run([memprofd, 'export', 'memprof-raw', '--db', db, '--binary', exe, '-o', raw])
    clang, ours = read_profile(craw[0], inst), read_profile(raw, exe)
    nctx, nbad = check_classifier(memprofd, db)

    res = {'workload': wname, 'args': args, 'contexts_clang': len(clang),
           'contexts_memprofd': len(ours), 'matched': len(set(clang) & set(ours)),
           'seconds': {'plain': round(t_plain, 2), 'instrumented': round(t_inst, 2),
                       'memprofd_record': round(t_rec, 2)},
           'classifier_checked': nctx, 'classifier_mismatches': nbad, 'contexts': []}
    total = sum(m['size'] for m in clang.values()) or 1
    for which, life in COLD_LIFE_S.items():
        same = 0
        for k, m in clang.items():
            o = ours.get(k)
            if o and classify(m['acc'], m['size'], m['count'], m['life_ms'], life) == \
                    classify(o['acc'], o['size'], o['count'], o['life_ms'], life):
                same += m['size']
        res['share_' + which] = same / total
    apa_c, apa_m, den_c, den_m, ratios, ratios_min = [], [], [], [], [], []
    # Share of accesses by MinAccessCount x AllocCount: clang's means are inflated by reuse.
    all_acc = sum(m['min_acc'] * m['count'] for m in clang.values())
    for k in sorted(clang, key=lambda k: -clang[k]['size']):
        m, o = clang[k], ours.get(k)
        row = {'context': name(k), 'bytes_clang': m['size'], 'allocs_clang': m['count'],
               'acc_per_alloc_clang': m['acc'] / m['count'] if m['count'] else 0,
               'min_acc_clang': m['min_acc'],
               'class_clang': {w: classify(m['acc'], m['size'], m['count'], m['life_ms'], l)
                               for w, l in COLD_LIFE_S.items()}}
        if o:
            row.update({'bytes_memprofd': o['size'], 'allocs_memprofd': o['count'],
                        'acc_per_alloc_memprofd': o['acc'] / o['count'] if o['count'] else 0,
                        'class_memprofd': {w: classify(o['acc'], o['size'], o['count'],
                                                       o['life_ms'], l)
                                           for w, l in COLD_LIFE_S.items()},
                        'density_clang': density(m), 'density_memprofd': density(o)})
            apa_c.append(row['acc_per_alloc_clang'])
            apa_m.append(row['acc_per_alloc_memprofd'])
            den_c.append(density(m))
            den_m.append(density(o))
            # Ratios only where the context holds RATIO_MIN_SHARE of clang's accesses: a
            # context with a few hundred accesses gets zero samples or one worth 10^5.
            if m['min_acc'] * m['count'] >= RATIO_MIN_SHARE * all_acc and m['min_acc'] > 0:
                row['ratio'] = row['acc_per_alloc_memprofd'] / row['acc_per_alloc_clang']
                row['ratio_to_min'] = row['acc_per_alloc_memprofd'] / m['min_acc']
                ratios.append(row['ratio'])
                ratios_min.append(row['ratio_to_min'])
        res['contexts'].append(row)
    res['spearman_acc'] = spearman(apa_c, apa_m)
    res['spearman_density'] = spearman(den_c, den_m)
    for tag, v in (('ratio', ratios), ('ratio_to_min', ratios_min)):
        pos = [r for r in v if r > 0]
        res[tag + '_geomean'] = math.exp(sum(map(math.log, pos)) / len(pos)) if pos else 0.0
        res[tag + '_lo'] = min(v) if v else 0.0
        res[tag + '_hi'] = max(v) if v else 0.0
    return res


def report(r):
    print('== %s %s: contexts clang %d, memprofd %d, matched %d; run s: plain %.2f, '
          '-fmemory-profile %.2f, memprofd record %.2f' %
          (r['workload'], ' '.join(r['args']), r['contexts_clang'], r['contexts_memprofd'],
           r['matched'], r['seconds']['plain'], r['seconds']['instrumented'],
           r['seconds']['memprofd_record']))
    print('   (a) bytes classified the same: %.1f%% (cold bound 200 s), %.1f%% (cold bound 1 s)'
          % (100 * r['share_default'], 100 * r['share_test']))
    print('   (b) Spearman over matched contexts: accesses/alloc %.2f, density %.2f' %
          (r['spearman_acc'], r['spearman_density']))
    print('       memprofd accesses/alloc (contexts with >= 1%% of the accesses) over clang\'s '
          'mean: geomean %.3f [%.3f, %.3f]; over clang\'s MinAccessCount: geomean %.2f '
          '[%.2f, %.2f]' % (
              r['ratio_geomean'], r['ratio_lo'], r['ratio_hi'], r['ratio_to_min_geomean'],
              r['ratio_to_min_lo'], r['ratio_to_min_hi']))
    print('   classifier transcription vs memprofd query: %d contexts, %d mismatches' %
          (r['classifier_checked'], r['classifier_mismatches']))
    print('   %-40s %8s %8s %11s %11s %11s %6s %6s  %-15s %-15s' % (
        'context (leaf first)', 'KiB cl', 'KiB mpd', 'acc/al cl', 'min acc cl', 'acc/al mpd',
        'ratio', 'r/min', 'class cl 200|1', 'class mpd 200|1'))
    for c in r['contexts']:
        cc = c['class_clang']
        cm = c.get('class_memprofd')
        print('   %-40.40s %8d %8s %11.0f %11d %11s %6s %6s  %-15s %-15s' % (
            c['context'], c['bytes_clang'] // 1024,
            c['bytes_memprofd'] // 1024 if cm else '-', c['acc_per_alloc_clang'],
            c['min_acc_clang'], '%.0f' % c['acc_per_alloc_memprofd'] if cm else '-',
            '%.3f' % c['ratio'] if 'ratio' in c else '-',
            '%.2f' % c['ratio_to_min'] if 'ratio_to_min' in c else '-',
            '%s|%s' % (cc['default'], cc['test']),
            '%s|%s' % (cm['default'], cm['test']) if cm else 'missing'))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--memprofd', required=True)
    ap.add_argument('--freq', type=int, default=1000)
    ap.add_argument('--workloads', default=','.join(WORKLOADS))
    ap.add_argument('--quick', action='store_true', help='short runs (the meson test)')
    ap.add_argument('--json', help='write the results here')
    ap.add_argument('--check', action='store_true', help='exit 1 below the CHECK bounds')
    a = ap.parse_args()
    for tool in ('clang++-19', 'llvm-profdata-19'):
        if not shutil.which(tool):
            print('SKIP: %s not found' % tool)
            return 77
    if os.geteuid() != 0:
        print('SKIP: memprofd record needs root for BPF')
        return 77
    tmp = tempfile.mkdtemp(prefix='mpd-accuracy-')
    results, errs = [], []
    try:
        for w in a.workloads.split(','):
            src, args = WORKLOADS[w]
            r = one(a.memprofd, w, src, QUICK_ARGS[w] if a.quick else args, a.freq, tmp)
            report(r)
            results.append(r)
            if r['classifier_mismatches']:
                errs.append('%s: classify() disagrees with memprofd on %d contexts' %
                            (w, r['classifier_mismatches']))
            for k, bound in CHECK.items():
                if k.startswith('spearman') and r['matched'] < CHECK_MIN_CONTEXTS:
                    continue           # a rank correlation of two points says nothing
                if a.check and not r[k] >= bound:
                    errs.append('%s: %s %.2f below %.2f' % (w, k, r[k], bound))
    except PermissionError as e:
        print('SKIP: memprofd record: %s' % e)
        return 77
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if a.json:
        with open(a.json, 'w') as f:
            json.dump(results, f, indent=1)
    for e in errs:
        print('FAIL: ' + e)
    return 1 if errs else 0


if __name__ == '__main__':
    sys.exit(main())
