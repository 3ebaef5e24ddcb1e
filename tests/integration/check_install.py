#!/usr/bin/env python3
"""`meson install` is coherent at any prefix. Two prefixes, each into its own DESTDIR:
this build's own (the default, /usr/local: everything installed, as a user would), and a
second configured at a fresh prefix (units, config, tmpfiles entry, script and man pages
installed by tag; the built binary placed where that build would install it). In each:
every path the units and the export script name exists in the DESTDIR (executables
executable), the tmpfiles entry and man pages are there, the installed binary runs and
parses the installed config, and `systemd-analyze verify` passes on the installed units
with the DESTDIR's prefix bind-mounted at the prefix (a private mount namespace). For the
default install also: versioned sonames, and hotcold_links built against the installed
headers and libraries through the installed memprofd-hotcold.pc runs with hints active.
Exits 77 without meson, systemd-analyze, or root (for the mount namespace)."""
import argparse, glob, json, os, re, shutil, subprocess, sys, tempfile


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        sys.exit('FAIL: %s: rc %d\n%s%s' % (' '.join(cmd), p.returncode, p.stdout, p.stderr))
    return p.stdout


def one(dest, pattern):
    hits = glob.glob(dest + pattern, recursive=True)
    if len(hits) != 1:
        sys.exit('FAIL: %d installed files match %s: %s' % (len(hits), pattern, hits))
    return hits[0]


def named_paths(dest, prefix):
    """(unit dir, [absolute paths the units and the script name])."""
    unitdir = os.path.dirname(one(dest, prefix + '/**/systemd/system/memprofd.service'))
    named = []
    for u in ('memprofd.service', 'memprofd-export.service'):
        text = open(os.path.join(unitdir, u)).read()
        named += re.findall(r'^ExecStart=(/\S+)', text, re.M)
        named += re.findall(r'--config (/\S+)', text)
        named += re.findall(r'^Environment=MEMPROFD=(/\S+)', text, re.M)
    script = one(dest, prefix + '/**/libexec/memprofd/memprofd-nightly-export')
    named += re.findall(r'^MEMPROFD=\$\{MEMPROFD:-(/\S+)\}', open(script).read(), re.M)
    return unitdir, named, script


def check_prefix(dest, prefix, tmp):
    unitdir, named, script = named_paths(dest, prefix)
    if len(named) != 5:
        sys.exit('FAIL: expected 5 paths in the units and script, found %s' % named)
    for path in named:
        if not path.startswith(prefix + '/'):
            sys.exit('FAIL: %s names %s, outside the prefix %s' % (unitdir, path, prefix))
        if not os.path.isfile(dest + path):
            sys.exit('FAIL: %s is named by the units or the script but not installed' % path)
        if not path.endswith('.conf') and not os.access(dest + path, os.X_OK):
            sys.exit('FAIL: %s is not executable' % path)
    memprofd = dest + next(p for p in named if p.endswith('/bin/memprofd'))
    conf = dest + next(p for p in named if p.endswith('.conf'))
    tmpf = one(dest, prefix + '/lib/tmpfiles.d/memprofd.conf')
    if not re.search(r'^d /var/lib/memprofd ', open(tmpf).read(), re.M):
        sys.exit('FAIL: %s lacks the state directory' % tmpf)
    for man in ('man1/memprofd.1', 'man5/memprofd.conf.5'):
        one(dest, prefix + '/share/man/' + man)
    run([memprofd, 'daemon', '--check', '--config', conf])
    # verify the units where they were installed for: DESTDIR/PREFIX over PREFIX.
    units = ' '.join(os.path.join(unitdir[len(dest):], u) for u in
                     ('memprofd.service', 'memprofd-export.service', 'memprofd-export.timer'))
    sh = ('set -e; mount --make-rprivate /; mkdir -p %s; mount --bind %s %s; cd %s; '
          'systemd-analyze verify --man=no %s' % (prefix, dest + prefix, prefix, tmp, units))
    p = subprocess.run(['unshare', '-m', 'sh', '-c', sh], capture_output=True, text=True)
    out = p.stdout + p.stderr
    if p.returncode != 0 or re.search(r'memprofd', out):
        sys.exit('FAIL: systemd-analyze verify at prefix %s (rc %d):\n%s' % (prefix, p.returncode, out))
    print('ok: prefix %s: units in %s, %s' % (prefix, unitdir[len(dest):], ', '.join(named)))


def check_libraries(dest, prefix, source_dir, tmp):
    """Versioned sonames, and a program built from the installed .pc, headers and libs."""
    for lib in ('memprofd_hotcold', 'memprofd_sampler'):
        so = one(dest, prefix + '/lib/**/lib%s.so.0' % lib)
        if 'SONAME' not in run(['readelf', '-d', so]) or ('lib%s.so.0]' % lib) not in run(['readelf', '-d', so]):
            sys.exit('FAIL: %s has no versioned SONAME' % so)
    if not shutil.which('clang++-19'):
        print('(clang++-19 missing: installed pkg-config file not exercised)')
        return
    pcdir = os.path.dirname(one(dest, prefix + '/lib/**/pkgconfig/memprofd-hotcold.pc'))
    env = dict(os.environ, PKG_CONFIG_PATH=pcdir, PKG_CONFIG_SYSROOT_DIR=dest)
    flags = run(['pkg-config', '--cflags', '--libs', 'memprofd-hotcold'], env=env).split()
    libdir = next(f[2:] for f in flags if f.startswith('-L'))
    exe = os.path.join(tmp, 'hotcold_links')
    run(['clang++-19', '-O1', os.path.join(source_dir, 'hotcold_links.cc'), '-x', 'c',
         os.path.join(source_dir, 'hotcold_links_c.c'), '-x', 'none', '-o', exe] + flags)
    out = run([exe, '2'], env=dict(os.environ, LD_LIBRARY_PATH=libdir))
    if 'hotcold_links: ok hints=1' not in out:
        sys.exit('FAIL: hotcold_links against the installed runtime:\n' + out)
    print('ok: hotcold_links built from the installed memprofd-hotcold.pc: hints active')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--build', required=True)
    ap.add_argument('--source-root', required=True)
    a = ap.parse_args()
    for tool in ('meson', 'systemd-analyze', 'unshare', 'pkg-config'):
        if not shutil.which(tool):
            print('SKIP: %s not found' % tool)
            return 77
    if os.geteuid() != 0:
        print('SKIP: needs root for the mount namespace')
        return 77
    tmp = tempfile.mkdtemp(prefix='mpd-install-')
    try:
        # 1. This build, at its own prefix, everything.
        intro = json.loads(run(['meson', 'introspect', '--buildoptions', a.build]))
        prefix1 = next(o['value'] for o in intro if o['name'] == 'prefix')
        d1 = os.path.join(tmp, 'dest1')
        run(['meson', 'install', '-C', a.build, '--destdir', d1, '--no-rebuild', '--quiet'])
        check_prefix(d1, prefix1, tmp)
        check_libraries(d1, prefix1, os.path.join(a.source_root, 'tests', 'workloads'), tmp)
        # 2. A second configuration at another prefix: what needs no compiling, by tag,
        # and this build's binary where that configuration installs it.
        prefix2 = os.path.join(tmp, 'opt', 'memprofd')
        b2, d2 = os.path.join(tmp, 'build2'), os.path.join(tmp, 'dest2')
        run(['meson', 'setup', '--prefix', prefix2, b2, a.source_root])
        run(['meson', 'install', '-C', b2, '--destdir', d2, '--no-rebuild', '--quiet',
             '--tags', 'deploy,man'])
        targets = json.loads(run(['meson', 'introspect', '--targets', b2]))
        dst = next(t['install_filename'][0] for t in targets if t['name'] == 'memprofd')
        os.makedirs(os.path.dirname(d2 + dst), exist_ok=True)
        built = json.loads(run(['meson', 'introspect', '--targets', a.build]))
        shutil.copy2(next(t['filename'][0] for t in built if t['name'] == 'memprofd'), d2 + dst)
        check_prefix(d2, prefix2, tmp)
    finally:
        shutil.rmtree(tmp)
    return 0


if __name__ == '__main__':
    sys.exit(main())
