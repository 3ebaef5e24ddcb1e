#!/usr/bin/env python3
"""debian/rules with MEMPROFD_PREBUILT=DIR (tests): puts the installed targets' built
files of DIR, an existing meson build of the same tree, where the package's own build
directory OBJ would have built them, so that `meson install --no-rebuild` in OBJ installs
them at OBJ's prefix. Fails when DIR lacks one of them.
Usage: use-prebuilt.py DIR OBJ"""
import json, os, shutil, subprocess, sys


def targets(build):
    out = subprocess.run(['meson', 'introspect', '--targets', build], check=True,
                         capture_output=True, text=True).stdout
    return {t['id']: t for t in json.loads(out) if t['installed']}


def main():
    pre, obj = (os.path.abspath(d) for d in sys.argv[1:3])
    have = targets(pre)
    n = 0
    for tid, t in targets(obj).items():
        for f in t['filename']:
            rel = os.path.relpath(f, obj)
            src = os.path.join(pre, rel)
            if tid not in have or not os.path.isfile(src):
                sys.exit('use-prebuilt: %s: not built in %s' % (rel, pre))
            os.makedirs(os.path.dirname(f), exist_ok=True)
            shutil.copy2(src, f)
            n += 1
    print('use-prebuilt: %d files from %s' % (n, pre))


if __name__ == '__main__':
    main()
