#!/usr/bin/env python3
"""deploy/build-deb.sh builds the Debian packages (with MEMPROFD_PREBUILT: this meson
build's files, so no second compile), `dpkg -i` installs them on this machine, and then:
every file is where Debian puts it (binary, libexec script, conffile, units under
/lib/systemd/system, tmpfiles.d, compressed man pages, versioned libraries, headers,
pkg-config files), `memprofd daemon --check` passes on the installed config,
systemd-analyze verify passes on the installed units, and a program built with
`pkg-config memprofd-hotcold` against the installed -dev package runs with hints active.
The packages are purged at the end, whatever happened, and must leave nothing behind.
Exits 77 without root or debhelper, or when a memprofd package is already installed
(it is not ours to replace)."""
import argparse, glob, os, shutil, subprocess, sys, tempfile, time

PKGS = ['memprofd', 'libmemprofd0', 'libmemprofd-dev']
MULTIARCH = '/usr/lib/x86_64-linux-gnu'
FILES = {
    'memprofd': ['/usr/bin/memprofd', '/usr/libexec/memprofd/memprofd-nightly-export',
                 '/etc/memprofd/memprofd.conf', '/lib/systemd/system/memprofd.service',
                 '/lib/systemd/system/memprofd-export.service',
                 '/lib/systemd/system/memprofd-export.timer', '/usr/lib/tmpfiles.d/memprofd.conf',
                 '/usr/share/man/man1/memprofd.1.gz', '/usr/share/man/man5/memprofd.conf.5.gz'],
    'libmemprofd0': [MULTIARCH + '/libmemprofd_hotcold.so.0', MULTIARCH + '/libmemprofd_sampler.so.0'],
    'libmemprofd-dev': ['/usr/include/memprofd/hotcold.h', '/usr/include/memprofd/sampler.h',
                        MULTIARCH + '/libmemprofd_hotcold.so', MULTIARCH + '/libmemprofd_hotcold.a',
                        MULTIARCH + '/pkgconfig/memprofd-hotcold.pc',
                        MULTIARCH + '/pkgconfig/memprofd-sampler.pc'],
}


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        raise RuntimeError('%s: rc %d\n%s%s' % (' '.join(cmd), p.returncode, p.stdout[-3000:], p.stderr[-3000:]))
    return p.stdout


def dpkg(*args):
    """dpkg, waiting up to a minute for another process's dpkg lock."""
    for _ in range(30):
        p = subprocess.run(['dpkg'] + list(args), capture_output=True, text=True)
        if p.returncode == 0 or 'lock' not in p.stderr:
            return p
        time.sleep(2)
    return p


def installed(pkg):
    p = subprocess.run(['dpkg-query', '-W', '-f=${Status}', pkg], capture_output=True, text=True)
    return 'installed' in p.stdout


def check_installed(source_dir, tmp):
    for pkg, paths in FILES.items():
        listed = set(run(['dpkg', '-L', pkg]).split())
        for path in paths:
            if path not in listed or not os.path.lexists(path):
                raise RuntimeError('%s does not install %s' % (pkg, path))
    conffiles = run(['dpkg-query', '-W', '-f=${Conffiles}', 'memprofd'])
    if '/etc/memprofd/memprofd.conf' not in conffiles:
        raise RuntimeError('/etc/memprofd/memprofd.conf is not a conffile')
    print(run(['/usr/bin/memprofd', 'daemon', '--check', '--config', '/etc/memprofd/memprofd.conf']).strip()
          or 'ok: memprofd daemon --check on /etc/memprofd/memprofd.conf')
    out = subprocess.run(['systemd-analyze', 'verify', '--man=no', '/lib/systemd/system/memprofd.service',
                          '/lib/systemd/system/memprofd-export.service',
                          '/lib/systemd/system/memprofd-export.timer'],
                         capture_output=True, text=True, cwd=tmp)
    if out.returncode != 0 or 'memprofd' in out.stdout + out.stderr:
        raise RuntimeError('systemd-analyze verify of the installed units:\n' + out.stdout + out.stderr)
    print('ok: systemd-analyze verify of the installed units')
    if shutil.which('clang++-19'):
        flags = run(['pkg-config', '--cflags', '--libs', 'memprofd-hotcold']).split()
        exe = os.path.join(tmp, 'hotcold_links')
        run(['clang++-19', '-O1', os.path.join(source_dir, 'hotcold_links.cc'), '-x', 'c',
             os.path.join(source_dir, 'hotcold_links_c.c'), '-x', 'none', '-o', exe] + flags)
        # meson test puts the build's own library folders in LD_LIBRARY_PATH: not here.
        env = {k: v for k, v in os.environ.items() if k != 'LD_LIBRARY_PATH'}
        out = run([exe, '2'], env=env)
        ldd = run(['ldd', exe], env=env)
        lib = next((l.split()[2] for l in ldd.splitlines() if 'libmemprofd_hotcold.so.0 =>' in l), '')
        if 'hotcold_links: ok hints=1' not in out or \
                os.path.realpath(lib) != os.path.realpath(MULTIARCH + '/libmemprofd_hotcold.so.0'):
            raise RuntimeError('hotcold_links against the installed package:\n' + out + ldd)
        print('ok: hotcold_links built with pkg-config memprofd-hotcold from the package: hints active')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--build', required=True, help='this meson build (packaged as is)')
    ap.add_argument('--source-root', required=True)
    a = ap.parse_args()
    if os.geteuid() != 0:
        print('SKIP: dpkg -i needs root')
        return 77
    for tool in ('dpkg-buildpackage', 'dh', 'fakeroot'):
        if not shutil.which(tool):
            print('SKIP: %s not found (Debian packages dpkg-dev, debhelper, fakeroot)' % tool)
            return 77
    already = [p for p in PKGS if installed(p)]
    if already:
        print('SKIP: already installed, not ours to replace: %s' % ' '.join(already))
        return 77
    tmp = tempfile.mkdtemp(prefix='mpd-deb-')
    fail = None
    try:
        t0 = time.time()
        out = run(['sh', os.path.join(a.source_root, 'deploy', 'build-deb.sh'), os.path.join(tmp, 'deb')],
                  env=dict(os.environ, MEMPROFD_PREBUILT=os.path.abspath(a.build)))
        debs = [d for d in out.split() if d.endswith('.deb') and '-dbgsym_' not in d]
        print('built in %.0f s: %s' % (time.time() - t0, ' '.join(os.path.basename(d) for d in debs)))
        if sorted(os.path.basename(d).split('_')[0] for d in debs) != sorted(PKGS):
            raise RuntimeError('expected packages %s, got %s' % (PKGS, debs))
        p = dpkg('-i', *debs)
        if p.returncode != 0:
            raise RuntimeError('dpkg -i: rc %d\n%s%s' % (p.returncode, p.stdout, p.stderr))
        check_installed(os.path.join(a.source_root, 'tests', 'workloads'), tmp)
    except RuntimeError as e:
        fail = str(e)
    finally:
        p = dpkg('--purge', *PKGS)
        left = [f for fs in FILES.values() for f in fs if os.path.lexists(f)] + \
               [d for d in ('/etc/memprofd', '/usr/libexec/memprofd',
                             '/etc/systemd/system/timers.target.wants/memprofd-export.timer')
                if os.path.lexists(d)]
        if p.returncode != 0 or left:
            fail = (fail or '') + '\ndpkg --purge: rc %d %s; left behind: %s' % (p.returncode, p.stderr, left)
        shutil.rmtree(tmp, ignore_errors=True)
    if fail:
        print('FAIL: ' + fail.strip())
        return 1
    print('ok: installed, checked and purged ' + ' '.join(PKGS))
    return 0


if __name__ == '__main__':
    sys.exit(main())
