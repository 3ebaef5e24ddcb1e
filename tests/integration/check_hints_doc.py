#!/usr/bin/env python3
"""check_hints_doc: compiler_feedback/hints.md (the hints format's one specification)
against what `memprofd export hints` writes, on a bench/gen_store store (no BPF).

Checks: the text header lines, in order, match the page's header template; every record
line has the page's five TAB-separated fields with a known class and that class's hint
byte; the page's text example is itself well-formed; the page's JSON example parses and
has exactly the keys (top level, contexts[], frames[]) of the real JSON export, whose
class/hint pairs are the page's table."""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

HINTS = {'cold': 1, 'notcold': 128, 'hot': 254, 'ambiguous': 222, 'unknown': 128}


def blocks(md, after):
    """Fenced code blocks that follow the heading `after`, up to the next ## heading."""
    sec = md.split(after, 1)[1].split('\n## ', 1)[0]
    return re.findall(r'```[a-z]*\n(.*?)```', sec, re.S)


def header_patterns(template):
    pats = []
    for line in template.strip('\n').split('\n'):
        parts = re.split(r'<[^>]*>', line)
        pats.append(re.compile('^' + '.*'.join(re.escape(p) for p in parts) + '$'))
    return pats


def check_text(text, pats, what):
    errs = []
    lines = text.rstrip('\n').split('\n')
    head = [line for line in lines if line.startswith('#')]
    if len(head) != len(pats) or lines[:len(head)] != head:
        errs.append('%s: %d header lines, want the page\'s %d first' % (what, len(head), len(pats)))
    for line, pat in zip(head, pats):
        if not pat.match(line):
            errs.append('%s: header line %r does not match the page\'s %r' % (what, line,
                                                                             pat.pattern))
    rows = lines[len(head):]
    if not rows:
        errs.append('%s: no record lines' % what)
    for line in rows:
        f = line.split('\t')
        if len(f) != 5:
            errs.append('%s: %r has %d TAB-separated fields, want 5' % (what, line, len(f)))
        elif f[0] not in HINTS or f[1] != str(HINTS[f[0]]) or not (f[2].isdigit() and
                                                                  f[3].isdigit()) or not f[4]:
            errs.append('%s: bad record %r' % (what, line))
    return errs


def keys_errs(doc, real, what):
    errs = []
    if set(doc) != set(real):
        errs.append('%s keys: page %s, export %s' % (what, sorted(doc), sorted(real)))
    return errs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--memprofd', required=True)
    ap.add_argument('--gen-store', required=True)
    ap.add_argument('--doc', required=True)
    a = ap.parse_args()
    md = open(a.doc).read()
    errs = []
    text_blocks = blocks(md, '## Text format')
    json_blocks = blocks(md, '## JSON format')
    if len(text_blocks) < 3 or not json_blocks:
        print('FAIL: %s: missing the header template, record template, text or JSON example'
              % a.doc)
        return 1
    pats = header_patterns(text_blocks[0])
    with tempfile.TemporaryDirectory(prefix='check_hints_doc.') as tmp:
        db = os.path.join(tmp, 'gen.db')
        subprocess.run([a.gen_store, '--db', db, '--contexts', '200', '--rows', '600',
                        '--binaries', '1', '--seed', '3'], check=True, capture_output=True)
        bid = json.loads(subprocess.run([a.memprofd, 'query', 'binaries', '--db', db,
                                         '--format', 'json'], check=True, capture_output=True,
                                        text=True).stdout)[0]['build_id']
        exp = lambda *f: subprocess.run([a.memprofd, 'export', 'hints', '--db', db,
                                         '--binary', bid, *f], check=True,
                                        capture_output=True, text=True).stdout
        text, js = exp(), json.loads(exp('--format', 'json'))
    errs += check_text(text, pats, 'export')
    errs += check_text(text_blocks[2], pats, 'page example')
    doc = json.loads(json_blocks[0])
    errs += keys_errs(doc, js, 'top-level')
    for k in ('thresholds', 'hints'):
        errs += keys_errs(doc[k], js[k], k)
    if js['hints'] != HINTS or doc['hints'] != HINTS:
        errs.append('hint bytes: page %s, export %s, table %s' % (doc['hints'], js['hints'], HINTS))
    if not js['contexts']:
        errs.append('the JSON export has no contexts')
    else:
        errs += keys_errs(doc['contexts'][0], js['contexts'][0], 'contexts[]')
        errs += keys_errs(doc['contexts'][0]['frames'][0], js['contexts'][0]['frames'][0],
                          'frames[]')
        if any(HINTS.get(c['class']) != c['hint'] for c in js['contexts']):
            errs.append('a JSON context whose hint is not its class\'s')
    if errs:
        print('FAIL: %s and the export disagree:' % a.doc)
        for e in errs[:30]:
            print('  - ' + e)
        return 1
    print('PASS: %s matches the export (%d text lines, %d JSON contexts)' %
          (os.path.basename(a.doc), text.count('\n'), len(js['contexts'])))
    return 0


if __name__ == '__main__':
    sys.exit(main())
