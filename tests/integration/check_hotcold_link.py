#!/usr/bin/env python3
"""libmemprofd_hotcold is correct however a program links it.

Builds tests/workloads/hotcold_links.cc (every __hot_cold_t new form, freed with plain,
sized, aligned and nothrow delete) and its C side (glibc malloc/free) once, links them
in each style a user might, and runs each: the .so by path, -lmemprofd_hotcold alone,
with -ljemalloc after and before it, `pkg-config --libs memprofd-hotcold`, the static
archive with `pkg-config --static --libs`: hints active, the live cold MiB in the cold
arena, exit 0. With libstdc++ linked ahead of the runtime, or the memprofd sampler
preloaded (each defines operator delete and wins symbol lookup), hints must be ignored,
with the reason printed, and the program still exit 0. Before this runtime defined every
delete form, the first styles aborted with `free(): invalid pointer`.
Exits 77 without clang-19 or pkg-config."""
import argparse, os, shlex, shutil, subprocess, sys, tempfile


def run(cmd, env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit('FAIL: %s: rc %d\n%s%s' % (' '.join(cmd), p.returncode, p.stdout, p.stderr))
    return p.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--source-dir', required=True, help='tests/workloads')
    ap.add_argument('--lib-dir', required=True, help='the folder holding libmemprofd_hotcold.*')
    ap.add_argument('--pc-dir', help="meson-uninstalled (memprofd-hotcold-uninstalled.pc)")
    ap.add_argument('--sampler', help='libmemprofd_sampler.so, preloaded in one style')
    a = ap.parse_args()
    for tool in ('clang++-19', 'clang-19', 'pkg-config'):
        if not shutil.which(tool):
            print('SKIP: %s not found' % tool)
            return 77
    d = tempfile.mkdtemp(prefix='mpd-hclink-')
    env = dict(os.environ)
    pc_name = 'memprofd-hotcold'
    if a.pc_dir:
        env['PKG_CONFIG_PATH'] = a.pc_dir
        pc_name = 'memprofd-hotcold-uninstalled'

    def pc(*args):
        return shlex.split(run(['pkg-config'] + list(args) + [pc_name], env))

    lib = os.path.abspath(a.lib_dir)
    main_o, c_o = os.path.join(d, 'main.o'), os.path.join(d, 'c.o')
    run(['clang++-19', '-O1', '-g', '-c', os.path.join(a.source_dir, 'hotcold_links.cc'),
         '-o', main_o] + pc('--cflags'))
    run(['clang-19', '-O1', '-c', os.path.join(a.source_dir, 'hotcold_links_c.c'), '-o', c_o])
    static_libs = ['-l:libmemprofd_hotcold.a' if f == '-lmemprofd_hotcold' else f
                   for f in pc('--static', '--libs')]
    rpath = ['-Wl,-rpath,' + lib]
    styles = [
        # name, link flags after the objects, hints expected, extra environment
        ('so-by-path', [os.path.join(lib, 'libmemprofd_hotcold.so')] + rpath, 1, {}),
        ('l-alone', ['-L' + lib, '-lmemprofd_hotcold'] + rpath, 1, {}),
        ('l-then-jemalloc', ['-L' + lib, '-lmemprofd_hotcold', '-ljemalloc'] + rpath, 1, {}),
        ('jemalloc-then-l', ['-L' + lib, '-ljemalloc', '-lmemprofd_hotcold'] + rpath, 1, {}),
        ('pkg-config', pc('--libs') + rpath, 1, {}),
        ('pkg-config-static', static_libs, 1, {}),
        ('libstdc++-ahead', ['-L' + lib, '-lstdc++', '-lmemprofd_hotcold'] + rpath, 0, {}),
    ]
    if a.sampler:
        styles.append(('sampler-preloaded', ['-L' + lib, '-lmemprofd_hotcold'] + rpath, 0,
                       {'LD_PRELOAD': os.path.abspath(a.sampler)}))
    fails = []
    for name, flags, want, extra in styles:
        exe = os.path.join(d, name)
        run(['clang++-19', main_o, c_o, '-o', exe] + flags)
        needed = run(['readelf', '-d', exe])
        if name == 'pkg-config-static' and 'libmemprofd_hotcold' in needed:
            fails.append('%s: links the shared runtime' % name)
        p = subprocess.run([exe, '10'], capture_output=True, text=True,
                           env=dict(os.environ, **extra))
        out = p.stdout + p.stderr
        last = [l for l in p.stdout.splitlines() if l.startswith('hotcold_links:')]
        print('--- %s (%s): rc %d' % (name, ' '.join(flags), p.returncode))
        print(out.strip())
        if p.returncode != 0:
            fails.append('%s: rc %d: %s' % (name, p.returncode, out.strip().splitlines()[-1:]))
        elif not last or ('hints=%d' % want) not in last[0]:
            fails.append('%s: expected hints=%d: %s' % (name, want, last))
        elif not want and 'hints ignored' not in out:
            fails.append('%s: hints ignored without saying why' % name)
    shutil.rmtree(d)
    if fails:
        print('FAIL:\n  ' + '\n  '.join(fails))
        return 1
    print('ok: %d link styles' % len(styles))
    return 0


if __name__ == '__main__':
    sys.exit(main())
