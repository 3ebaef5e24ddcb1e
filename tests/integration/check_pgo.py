#!/usr/bin/env python3
"""End to end with clang-19: memprofd's MemProf profile changes what the compiler does.

Builds tests/workloads/pgo_workload.cc with the seed's flags, records it with
`memprofd record --alloc exact --access soft`, exports memprof-raw, indexes it with
llvm-profdata-19, rebuilds with -fmemory-profile-use (cold context matched as cold, hot as
hot/notcold), checks the memprof-yaml export of the same recording against LLVM 20's
schema (check_memprof_yaml.py), then with ThinLTO + lld-19 + context disambiguation +
hot/cold new against libmemprofd_hotcold (linked alone, as any library is): the cold clone of alloc_buf calls an __hot_cold_t operator new with
hint 1, the output matches, and the cold bytes sit in the cold jemalloc arena.
Exits 77 (skip) without root/BPF or without the clang-19 toolchain."""
import argparse, os, re, shutil, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_memprof_yaml  # noqa: E402
import mpdtest  # noqa: E402

FLAGS = ['-fno-omit-frame-pointer', '-mno-omit-leaf-frame-pointer',
         '-fno-optimize-sibling-calls', '-fdebug-info-for-profiling', '-gmlt', '-O2',
         '-Wl,-z,noseparate-code', '-Wl,--build-id']


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        sys.exit('FAIL: %s: rc %d\n%s%s' % (' '.join(cmd), p.returncode, p.stdout, p.stderr))
    return p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--memprofd', required=True)
    ap.add_argument('--source', required=True)
    ap.add_argument('--hotcold-dir', required=True)
    ap.add_argument('--seconds', default='3')
    a = ap.parse_args()
    for tool in ('clang++-19', 'llvm-profdata-19', 'ld.lld-19', 'llvm-objdump-19'):
        if not shutil.which(tool):
            print('SKIP: %s not found' % tool)
            return 77
    why = mpdtest.bpf_unavailable()
    if why:
        print('SKIP: ' + why)
        return 77
    d = tempfile.mkdtemp(prefix='mpd-pgo-')
    exe, db, raw, prof = (os.path.join(d, n) for n in ('w', 'db', 'w.raw', 'w.memprofdata'))
    run(['clang++-19'] + FLAGS + [a.source, '-o', exe])
    base = run([exe, '0.5']).stdout.splitlines()[0]
    rec = subprocess.run([a.memprofd, 'record', '--db', db, '--alloc', 'exact', '--access',
                          'soft', '--freq', '1000', '--', exe, a.seconds],
                         capture_output=True, text=True)
    if rec.returncode != 0:
        sys.exit('FAIL: record: ' + rec.stderr)
    run([a.memprofd, 'export', 'memprof-raw', '--db', db, '--binary', exe, '-o', raw])
    show = run(['llvm-profdata-19', 'show', '--memory', '--profiled-binary=' + exe, raw]).stdout
    for fn in ('_Z9alloc_bufm', '_Z9make_coldv', '_Z8make_hotv'):
        if fn not in show:
            sys.exit('FAIL: llvm-profdata show lacks %s:\n%s' % (fn, show))
    run(['llvm-profdata-19', 'merge', '--profiled-binary=' + exe, raw, '-o', prof])
    # The YAML export of the same recording (real DWARF lines) against LLVM 20's schema:
    # LLVM 19 cannot read it, check_memprof_yaml.py's validator can.
    yml = run([a.memprofd, 'export', 'memprof-yaml', '--db', db, '--binary', exe]).stdout
    errs = check_memprof_yaml.validate(yml)
    if errs or '_Z9make_coldv' not in yml:
        sys.exit('FAIL: memprof-yaml of the recording: %s\n%s' % (errs[:5], yml[:2000]))

    use = ['-fmemory-profile-use=' + prof, '-mllvm', '-memprof-ave-lifetime-cold-threshold=1']
    p = run(['clang++-19'] + FLAGS + use + ['-mllvm', '-memprof-print-match-info', a.source,
                                           '-o', os.path.join(d, 'w2')])
    m = p.stdout + p.stderr
    kinds = re.findall(r'MemProf (\w+) context with id \d+ has total profiled size (\d+) '
                       r'is matched', m)
    print('match info:', kinds)
    if ('cold', '1048576') not in kinds:
        sys.exit('FAIL: cold context not matched as cold:\n' + m)
    if not any(k in ('notcold', 'hot') and int(s) > 1048576 for k, s in kinds):
        sys.exit('FAIL: hot context not matched as hot/notcold:\n' + m)

    lto = os.path.join(d, 'w3')
    run(['clang++-19'] + FLAGS + use + [
        '-flto=thin', '-fuse-ld=lld', '-Wl,-mllvm,-enable-memprof-context-disambiguation',
        '-Wl,-mllvm,-optimize-hot-cold-new', '-Wl,-mllvm,-supports-hot-cold-new', a.source,
        '-o', lto, '-L' + a.hotcold_dir, '-Wl,-rpath,' + a.hotcold_dir, '-lmemprofd_hotcold'])
    dis = run(['llvm-objdump-19', '-d', '--no-show-raw-insn', '-C', lto]).stdout
    clone = re.search(r'<alloc_buf\(unsigned long\) \(\.memprof\.\d+\)>:\n(.*?)\n\n', dis, re.S)
    if not clone:
        sys.exit('FAIL: no memprof clone of alloc_buf in the ThinLTO binary')
    body = clone.group(1)
    print(body)
    if not re.search(r'movl\s+\$0x1, %esi\n.*callq.*<_Znam12__hot_cold_t@plt>', body):
        sys.exit('FAIL: the cold clone does not call operator new[](size_t, __hot_cold_t 1)')
    if 'libmemprofd_hotcold' not in run(['ldd', lto]).stdout:
        sys.exit('FAIL: not linked against libmemprofd_hotcold')
    out = run([lto, '0.5']).stdout
    print(out)
    if out.splitlines()[0] != base:
        sys.exit('FAIL: output differs: %r vs %r' % (out.splitlines()[0], base))
    st = re.search(r'cold arena \d+: calls=(\d+) requested=(\d+) allocated=(\d+)', out)
    if not st or int(st.group(3)) < 1048576:
        sys.exit('FAIL: cold bytes not in the cold arena: ' + out)
    shutil.rmtree(d)
    print('ok: cold matched, cold clone hints 1, %s cold-arena bytes' % st.group(3))
    return 0


if __name__ == '__main__':
    sys.exit(main())
