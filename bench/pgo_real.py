#!/usr/bin/env python3
"""Heap PGO on a real program from Debian: memprofd's profile against clang's own.

Fetches the Debian source package libjsoncpp with `apt-get source` (a deb-src entry in a
private folder given to apt with -o options: nothing on the system changes), builds it
with its own CMake build and clang-19, and profiles its jsontestrunner on a generated
JSON document (parse, print the value tree, rewrite, parse the rewrite) twice: recorded
by memprofd (default sampled mode with soft access sampling) and exported as memprof-raw,
and by clang's -fmemory-profile instrumentation. Each profile is indexed by
llvm-profdata-19 and used in a ThinLTO rebuild with hot/cold operator new linked against
libmemprofd_hotcold; a third ThinLTO build without a profile, on the same runtime, is
the baseline. For each: memprof contexts clang matched (by class), hinted call sites in
the binary, the program's own test suite (ctest) on the result, and the workload's wall
time, peak RSS and page faults (interleaved runs, medians). Prints a Markdown table.

  python3 bench/pgo_real.py --memprofd build/cli/memprofd --build build [--mb 40] [--runs 5]
  (--quick: a 4 MB document and 2 runs, for a check that it all works; about 3 min)
Needs root (BPF), clang-19, lld-19, llvm-profdata-19, cmake, ninja, dpkg-dev and
Debian's archive."""
import argparse, json, os, random, re, shutil, statistics, subprocess, sys, tempfile, time

PACKAGE = 'libjsoncpp'
DEB_SRC = ('Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: bookworm\n'
           'Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n')
BASE = ['-O2', '-gmlt', '-fdebug-info-for-profiling', '-fno-omit-frame-pointer',
        '-mno-omit-leaf-frame-pointer', '-fno-optimize-sibling-calls']
# GNU ld for the profiled builds: memprof-raw wants the executable segment at file offset
# 0, which -z noseparate-code gives with ld.bfd and not with lld's layout.
BASE_LD = ['-Wl,--build-id', '-Wl,-z,noseparate-code']
# Lifetimes in a run of seconds: the default cold bound (200 s) would leave nothing cold.
USE = ['-mllvm', '-memprof-ave-lifetime-cold-threshold=1', '-mllvm', '-memprof-print-match-info',
       '-mllvm', '-memprof-report-hinted-sizes']
LTO = ['-flto=thin']
LTO_LD = ['-fuse-ld=lld', '-flto=thin', '-Wl,-mllvm,-enable-memprof-context-disambiguation',
          '-Wl,-mllvm,-optimize-hot-cold-new', '-Wl,-mllvm,-supports-hot-cold-new',
          '-Wl,-mllvm,-memprof-report-hinted-sizes']
HINT_NAMES = {1: 'cold', 128: 'notcold', 222: 'ambiguous', 254: 'hot'}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        sys.exit('memprofd: pgo_real: %s: rc %d\n%s%s' % (' '.join(map(str, cmd)), p.returncode,
                                                          p.stdout[-4000:], p.stderr[-4000:]))
    return p


def fetch_source(work):
    """apt-get source PACKAGE into work/src through private apt state; the source dir."""
    srcdir = os.path.join(work, 'src')
    found = [d for d in (os.listdir(srcdir) if os.path.isdir(srcdir) else [])
             if d.startswith(PACKAGE + '-') and os.path.isdir(os.path.join(srcdir, d))]
    if found:
        return os.path.join(srcdir, found[0])
    apt = os.path.join(work, 'apt')
    for d in ('parts', 'lists/partial', 'cache/archives/partial'):
        os.makedirs(os.path.join(apt, d), exist_ok=True)
    with open(os.path.join(apt, 'parts', 'memprofd-bench.sources'), 'w') as f:
        f.write(DEB_SRC)
    opts = ['-o', 'Dir::Etc::SourceList=/dev/null', '-o', 'Dir::Etc::SourceParts=' + apt + '/parts',
            '-o', 'Dir::State::Lists=' + apt + '/lists', '-o', 'Dir::Cache=' + apt + '/cache',
            '-o', 'Debug::NoLocking=1']
    run(['apt-get', '-qq'] + opts + ['update'])
    os.makedirs(srcdir, exist_ok=True)
    run(['apt-get', '-qq'] + opts + ['source', PACKAGE], cwd=srcdir)
    return fetch_source(work)


def gen_input(path, mb):
    """A deterministic JSON document of about mb MiB: records with nested objects,
    arrays, strings and numbers."""
    rng = random.Random(19)
    words = ['alpha', 'beta', 'gamma', 'delta', 'epsilon', 'zeta', 'eta', 'theta', 'iota']
    recs, size = [], 0
    while size < mb << 20:
        r = {'id': len(recs), 'name': ' '.join(rng.choice(words) for _ in range(4)),
             'score': rng.random() * 1000, 'tags': [rng.choice(words) for _ in range(rng.randint(1, 6))],
             'geo': {'lat': rng.uniform(-90, 90), 'lon': rng.uniform(-180, 180),
                     'alt': rng.randint(0, 9000)},
             'history': [{'t': rng.randint(0, 1 << 31), 'v': rng.random()} for _ in range(rng.randint(0, 5))],
             'active': rng.random() < 0.5, 'note': None}
        s = json.dumps(r)
        size += len(s) + 2
        recs.append(s)
    with open(path, 'w') as f:
        f.write('[\n' + ',\n'.join(recs) + '\n]\n')


def cmake_build(src, bdir, cxxflags, ldflags):
    """Configures and builds jsoncpp (static library, its tests and jsontestrunner) with
    clang-19; returns the build's output (clang's -memprof-print-match-info lines). A build
    of the same flags (and profile file) from an earlier run is reused."""
    stamp, logf = os.path.join(bdir, 'pgo_real.flags'), os.path.join(bdir, 'pgo_real.log')
    key = json.dumps([cxxflags, ldflags] + [os.path.getmtime(f.split('=', 1)[1])
                                            for f in cxxflags if f.startswith('-fmemory-profile-use=')])
    if os.path.exists(stamp) and open(stamp).read() == key and os.path.exists(exe_of(bdir)):
        return open(logf).read()
    shutil.rmtree(bdir, ignore_errors=True)
    run(['cmake', '-S', src, '-B', bdir, '-G', 'Ninja', '-DCMAKE_BUILD_TYPE=None',
         '-DCMAKE_C_COMPILER=clang-19', '-DCMAKE_CXX_COMPILER=clang++-19',
         '-DBUILD_SHARED_LIBS=OFF', '-DBUILD_STATIC_LIBS=ON', '-DBUILD_OBJECT_LIBS=OFF',
         '-DJSONCPP_WITH_POST_BUILD_UNITTEST=OFF', '-DJSONCPP_WITH_PKGCONFIG_SUPPORT=OFF',
         '-DJSONCPP_WITH_CMAKE_PACKAGE=OFF', '-DCMAKE_CXX_FLAGS=' + ' '.join(cxxflags),
         '-DCMAKE_EXE_LINKER_FLAGS=' + ' '.join(ldflags)])
    p = run(['nice', 'cmake', '--build', bdir, '--', '-j2', '-v'])
    with open(logf, 'w') as f:
        f.write(p.stdout + p.stderr)
    with open(stamp, 'w') as f:
        f.write(key)
    return p.stdout + p.stderr


def exe_of(bdir):
    return os.path.join(bdir, 'bin', 'jsontestrunner_exe')


def workload(exe, doc, env=None):
    """One run: (wall s, peak RSS KiB, minor+major faults); the outputs removed."""
    t0 = time.monotonic()
    p = subprocess.Popen([exe, doc], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    err = p.stderr.read().decode(errors='replace')
    p.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit('memprofd: pgo_real: %s %s failed:\n%s' % (exe, doc, err[-2000:]))
    base = doc[:-len('.json')]
    for ext in ('.actual', '.rewrite', '.actual-rewrite'):
        if os.path.exists(base + ext):
            os.unlink(base + ext)
    return wall, ru.ru_maxrss, ru.ru_minflt + ru.ru_majflt, err


def profile_memprofd(a, exe, doc, out):
    db, raw = out + '.db', out + '.raw'
    for f in (db, db + '-wal', db + '-shm'):
        if os.path.exists(f):
            os.unlink(f)
    env = dict(os.environ, MEMPROFD_SAMPLE_BYTES=str(a.sample_bytes))
    rec = run([a.memprofd, 'record', '--db', db, '--access', 'soft', '--freq', '1000', '--', exe, doc], env=env)
    log(rec.stderr.strip().splitlines()[-1] if rec.stderr.strip() else 'recorded')
    workload_cleanup(doc)
    run([a.memprofd, 'export', 'memprof-raw', '--db', db, '--binary', exe, '-o', raw])
    run(['llvm-profdata-19', 'merge', '--profiled-binary=' + exe, raw, '-o', out])
    return out


def workload_cleanup(doc):
    base = doc[:-len('.json')]
    for ext in ('.actual', '.rewrite', '.actual-rewrite'):
        if os.path.exists(base + ext):
            os.unlink(base + ext)


def profile_clang(exe, doc, out):
    d = os.path.dirname(out)
    for f in os.listdir(d):
        if f.startswith('clang.profraw'):
            os.unlink(os.path.join(d, f))
    env = dict(os.environ, MEMPROF_OPTIONS='log_path=' + os.path.join(d, 'clang.profraw'))
    run([exe, doc], env=env)
    workload_cleanup(doc)
    raws = [os.path.join(d, f) for f in os.listdir(d) if f.startswith('clang.profraw')]
    run(['llvm-profdata-19', 'merge', '--profiled-binary=' + exe] + raws + ['-o', out])
    return out


def matched(build_log):
    """{class: contexts} from -memprof-print-match-info, each context id once."""
    seen = {}
    for kind, cid in re.findall(r'MemProf (\w+) context with id (\d+) has total profiled size \d+ is matched',
                                build_log):
        seen[cid] = kind
    out = {}
    for kind in seen.values():
        out[kind] = out.get(kind, 0) + 1
    return out


def contexts_hinted(build_log):
    """{class: contexts} clang reported hinting (-memprof-report-hinted-sizes), each
    full-context hash once."""
    seen = {}
    for h, kind in re.findall(r'MemProf hinting: Total size for full allocation context hash (\d+) and '
                              r'[\w ]*?alloc type (\w+)', build_log):
        seen[h] = kind
    out = {}
    for kind in seen.values():
        out[kind] = out.get(kind, 0) + 1
    return out


def hinted(exe):
    """{hint class: call sites} of the __hot_cold_t operator new forms in exe."""
    dis = run(['llvm-objdump-19', '-d', '--no-show-raw-insn', exe]).stdout.splitlines()
    out = {}
    for i, line in enumerate(dis):
        if not re.search(r'call.*<_Zn[wa]m.*12__hot_cold_t', line):
            continue
        hint = None
        for prev in reversed(dis[max(0, i - 8):i]):
            m = re.search(r'mov[lb]?\s+\$0x([0-9a-f]+), %(esi|sil|edx|dl|ecx|cl)\b', prev)
            if m:
                hint = int(m.group(1), 16)
                break
        name = HINT_NAMES.get(hint, 'other')
        out[name] = out.get(name, 0) + 1
    return out


def ctest(bdir):
    p = subprocess.run(['ctest', '--test-dir', bdir, '--output-on-failure'], capture_output=True, text=True)
    m = re.search(r'(\d+)% tests passed, (\d+) tests failed out of (\d+)', p.stdout)
    if not m:
        return 'no result (rc %d)' % p.returncode
    total, failed = int(m.group(3)), int(m.group(2))
    return '%d/%d passed' % (total - failed, total)


def fmt(d):
    return ', '.join('%s %d' % (k, v) for k, v in sorted(d.items())) or '0'


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--memprofd', required=True)
    ap.add_argument('--build', required=True, help="memprofd's meson build (libmemprofd_hotcold)")
    ap.add_argument('--work', help='work folder (default BUILD/bench/pgo_real)')
    ap.add_argument('--mb', type=int, default=40, help='size of the JSON document in MiB')
    ap.add_argument('--runs', type=int, default=5)
    ap.add_argument('--sample-bytes', type=int, default=64 << 10, help='MEMPROFD_SAMPLE_BYTES')
    ap.add_argument('--quick', action='store_true')
    a = ap.parse_args()
    if a.quick:
        a.mb, a.runs = 4, 2
    for tool in ('clang++-19', 'ld.lld-19', 'llvm-profdata-19', 'llvm-objdump-19', 'cmake', 'ninja',
                 'apt-get', 'dpkg-source'):
        if not shutil.which(tool):
            print('SKIP: %s not found' % tool)
            return 77
    if os.geteuid() != 0:
        print('SKIP: memprofd record needs root for BPF')
        return 77
    build = os.path.abspath(a.build)
    work = os.path.abspath(a.work or os.path.join(build, 'bench', 'pgo_real'))
    os.makedirs(work, exist_ok=True)
    src = fetch_source(work)
    log('source: ' + src)
    doc = os.path.join(work, 'doc.json')
    gen_input(doc, a.mb)
    pc = run(['pkg-config', '--libs', 'memprofd-hotcold-uninstalled'],
             env=dict(os.environ, PKG_CONFIG_PATH=os.path.join(build, 'meson-uninstalled'))).stdout.split()
    hotcold = pc + ['-Wl,-rpath,' + os.path.join(build, 'compiler_feedback')]
    report = os.path.join(work, 'hotcold_report.so')
    run(['cc', '-shared', '-fPIC', '-O2', '-o', report,
         os.path.join(os.path.dirname(os.path.abspath(__file__)), 'hotcold_report.c')])

    t0 = time.monotonic()
    log('building the profiling builds')
    plain, instr = os.path.join(work, 'b-plain'), os.path.join(work, 'b-instr')
    cmake_build(src, plain, BASE, BASE_LD)
    cmake_build(src, instr, BASE + ['-fmemory-profile'], BASE_LD + ['-fmemory-profile'])
    log('profiling: memprofd record, then clang -fmemory-profile')
    profs = {'memprofd': profile_memprofd(a, exe_of(plain), doc, os.path.join(work, 'memprofd.memprofdata')),
             'clang': profile_clang(exe_of(instr), doc, os.path.join(work, 'clang.memprofdata'))}
    variants = {}
    for name, prof in [('no profile', None)] + list(profs.items()):
        log('ThinLTO build: ' + name)
        bdir = os.path.join(work, 'b-' + name.replace(' ', '-'))
        use = ['-fmemory-profile-use=' + prof] + USE if prof else []
        blog = cmake_build(src, bdir, BASE + LTO + use, BASE_LD + LTO_LD + hotcold)
        variants[name] = {'exe': exe_of(bdir), 'matched': matched(blog) if prof else {},
                          'ctx_hinted': contexts_hinted(blog) if prof else {},
                          'hinted': hinted(exe_of(bdir)), 'tests': ctest(bdir)}
    log('measuring (%d interleaved runs each)' % a.runs)
    samples = {n: [] for n in variants}
    env = dict(os.environ, LD_PRELOAD=report)
    for _ in range(a.runs):
        for n, v in variants.items():
            samples[n].append(workload(v['exe'], doc, env))
    base = statistics.median(s[0] for s in samples['no profile'])
    print('\nlibjsoncpp %s, jsontestrunner on a %d MiB document, %d runs (medians); %.0f s in all\n'
          % (os.path.basename(src).split('-', 1)[1], a.mb, a.runs, time.monotonic() - t0))
    print('| build | contexts matched | contexts hinted | hot/cold new call sites | ctest | wall s | vs none | peak RSS MiB | page faults |')
    print('| --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: |')
    for n, v in variants.items():
        s = samples[n]
        wall = statistics.median(x[0] for x in s)
        print('| %s | %s | %s | %s | %s | %.3f | %.3fx | %.1f | %d |' % (
            n, fmt(v['matched']), fmt(v['ctx_hinted']), fmt(v['hinted']), v['tests'], wall, wall / base,
            statistics.median(x[1] for x in s) / 1024, statistics.median(x[2] for x in s)))
    for n in variants:
        last = [l for l in samples[n][-1][3].splitlines() if l.startswith('memprofd_hotcold')]
        print('\n%s: %s' % (n, '; '.join(last)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
