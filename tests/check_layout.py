#!/usr/bin/env python3
"""The layout rules of ARCHITECTURE.md, checked on the sources (stdlib only, < 1 s):
includes go one way between top-level folders (ALLOWED below), no cycle between
folders, no function longer than MAX_FUNC_LINES, no folder with more than
MAX_FOLDER_SOURCES source files. Prints one line per violation; exit 1 if any.
First it checks itself on a made-up tree with one violation of each kind, so a checker
that stopped seeing them fails too."""
import os
import re
import sys
import tempfile

# A function body (from its opening '{' line to its closing '}' line) may not exceed this.
MAX_FUNC_LINES = 150
# A folder (not counting subfolders) holds at most this many .c/.cc files.
MAX_FOLDER_SOURCES = 25
# Top-level folders of the product and the folders each may include from. A folder not
# listed here (tests, bench, workloads) is not checked.
ALLOWED = {
    'base': set(),
    'bpf': {'base'},
    'sampler': {'base'},
    'store': {'base'},
    'symbolizer': {'base'},
    'reporter': {'base', 'store', 'symbolizer', 'fleet'},
    # issue 20: the fleet's ClickHouse as a store (a reader layer under reporter/), and
    # `memprofd push`, which reads the daemon's config ([store] db, [fleet] url).
    'fleet': {'base', 'store', 'symbolizer', 'daemon'},
    'compiler_feedback': {'base', 'store', 'symbolizer', 'reporter'},
    'linker_script_gen': {'base', 'store', 'symbolizer', 'reporter'},
    'daemon': {'base', 'bpf', 'sampler', 'store', 'symbolizer'},
    'cli': {'base', 'store', 'symbolizer', 'reporter', 'compiler_feedback',
            'linker_script_gen', 'daemon', 'fleet'},
}
SOURCE_EXT = ('.c', '.cc', '.h')
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
FUNC_OPEN = re.compile(r'^[A-Za-z_].*\)\s*$')   # a definition's last header line


def sources(root, top):
    for d, _, files in os.walk(os.path.join(root, top)):
        for f in sorted(files):
            if f.endswith(SOURCE_EXT):
                yield os.path.join(d, f)


def check_includes(root, errors):
    edges = {}
    for top in ALLOWED:
        for path in sources(root, top):
            with open(path, encoding='utf-8', errors='replace') as fh:
                for n, line in enumerate(fh, 1):
                    m = INCLUDE.match(line)
                    if not m or '/' not in m.group(1):
                        continue
                    dep = m.group(1).split('/')[0]
                    if dep == top or dep not in ALLOWED:
                        continue
                    edges.setdefault(top, set()).add(dep)
                    if dep not in ALLOWED[top]:
                        errors.append(f'{os.path.relpath(path, root)}:{n}: {top}/ may not '
                                      f'include {m.group(1)} (see ARCHITECTURE.md)')
    return edges


def check_cycles(edges, errors):
    state = {}

    def visit(node, stack):
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                cyc = stack[stack.index(nxt):] + [nxt]
                errors.append('folder cycle: ' + ' -> '.join(cyc))
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])


def check_functions(root, errors):
    for top in ALLOWED:
        for path in sources(root, top):
            if not path.endswith(('.c', '.cc')):
                continue
            with open(path, encoding='utf-8', errors='replace') as fh:
                lines = fh.read().split('\n')
            start = name = None
            for i, line in enumerate(lines):
                if start is None:
                    if line == '{' and i and FUNC_OPEN.match(lines[i - 1]):
                        start, name = i, lines[i - 1]
                elif line.startswith('}'):
                    length = i - start + 1
                    if length > MAX_FUNC_LINES:
                        fn = re.search(r'(\w+)\s*\(', name)
                        errors.append(f'{os.path.relpath(path, root)}:{start}: function '
                                      f'{fn.group(1) if fn else name} is {length} lines '
                                      f'(max {MAX_FUNC_LINES})')
                    start = None


def check_folders(root, errors):
    for top in ALLOWED:
        for d, _, files in os.walk(os.path.join(root, top)):
            n = sum(f.endswith(('.c', '.cc')) for f in files)
            if n > MAX_FOLDER_SOURCES:
                errors.append(f'{os.path.relpath(d, root)}/: {n} source files '
                              f'(max {MAX_FOLDER_SOURCES})')


def check_unit_cmocka(root, errors):
    """Unit tests include tests/unit/mpd_cmocka.h, never <cmocka.h> itself: with cmocka's
    own skip() a skipped case exits 0 and meson counts it as passed."""
    d = os.path.join(root, 'tests', 'unit')
    if not os.path.isdir(d):
        return
    for f in sorted(os.listdir(d)):
        if not f.endswith('.c'):
            continue
        with open(os.path.join(d, f), errors='replace') as fh:
            for n, line in enumerate(fh, 1):
                if re.match(r'\s*#\s*include\s*<cmocka\.h>', line):
                    errors.append(f'tests/unit/{f}:{n}: includes <cmocka.h>, not '
                                  'tests/unit/mpd_cmocka.h (its skips would pass)')


def check_tree(root):
    errors = []
    check_cycles(check_includes(root, errors), errors)
    check_functions(root, errors)
    check_folders(root, errors)
    check_unit_cmocka(root, errors)
    return errors


def self_test():
    """One violation of each kind in a scratch tree; each must be reported."""
    files = {
        'store/bad.c': '#include "daemon/record/recorder.h"\n',        # against the rule
        'reporter/a.h': '#include "compiler_feedback/b.h"\n',          # with the next: a cycle
        'compiler_feedback/b.h': '#include "reporter/a.h"\n',
        'base/long.c': 'int f(void)\n{\n' + '\tg();\n' * MAX_FUNC_LINES + '}\n',
    }
    files.update({f'symbolizer/s{i}.c': '' for i in range(MAX_FOLDER_SOURCES + 1)})
    files['tests/unit/test_x.c'] = '#include <cmocka.h>\n'
    want = ['store/ may not include daemon/', 'folder cycle: ',
            f'function f is {MAX_FUNC_LINES + 2} lines', f'{MAX_FOLDER_SOURCES + 1} source files',
            'tests/unit/test_x.c:1: includes <cmocka.h>']
    with tempfile.TemporaryDirectory() as root:
        for path, text in files.items():
            os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
            with open(os.path.join(root, path), 'w') as fh:
                fh.write(text)
        errors = check_tree(root)
    missed = [w for w in want if not any(w in e for e in errors)]
    for w in missed:
        print(f'check_layout self-test: no error matching {w!r} in {errors}')
    return not missed


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), '..')
    if not self_test():
        return 1
    errors = check_tree(root)
    for e in errors:
        print(e)
    return 1 if errors else 0


if __name__ == '__main__':
    sys.exit(main())
