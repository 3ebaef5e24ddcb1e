#!/usr/bin/env python3
"""The man pages against the program: memprofd(1) against every `memprofd CMD --help`,
memprofd.conf(5) against the config parser's key table.

memprofd.1: each subcommand of `memprofd --help` has a `.SS memprofd CMD` section; each
report/format a command's help lists, and each option of its usage line and option list,
is in that section (options as .TP headings); a .TP option the help no longer has is
stale. memprofd.conf.5: each key of the parser (the `keys[]` table and rule_key's names
in the config source) is a `.B key = value` entry of its section, none is extra, and a
file made of those entries passes `memprofd daemon --check` (a misspelled copy must not).
Every failure names the page, the command or section and the option or key, one per line."""
import argparse, glob, os, re, subprocess, sys, tempfile

OPT = re.compile(r'(?<![\w-])(--[a-z][a-z0-9-]*)')


def help_of(memprofd, cmd):
    p = subprocess.run([memprofd] + ([cmd] if cmd else []) + ['--help'], capture_output=True,
                       text=True)
    if p.returncode != 0:
        sys.exit('FAIL: memprofd %s --help: rc %d %s' % (cmd, p.returncode, p.stderr))
    return p.stdout


def help_parts(text):
    """(options, reports) of one command's --help: options from the usage lines and the
    option list, reports/formats from two-space-indented word lines."""
    opts, reports, usage = set(), set(), True
    for line in text.splitlines():
        if usage and line.strip() == '':
            usage = False
        if usage:
            opts.update(OPT.findall(line))
            continue
        m = re.match(r'^ {1,4}(?:-\w, )?(--[a-z][a-z0-9-]*)', line)
        if m:
            opts.add(m.group(1))
        m = re.match(r'^  ([a-z][a-z-]*[a-z])(\s|$)', line)
        if m:
            reports.add(m.group(1))
    opts.discard('--help')
    return opts, reports


def roff_text(s):
    return s.replace('\\-', '-').replace('\\&', '').replace('\\fI', '').replace('\\fR', '').replace('\\fB', '')


def man1_sections(page):
    secs, cur = {}, None
    for line in open(page, encoding='utf-8'):
        m = re.match(r'^\.S[SH] (?:"?)memprofd (\w+)', line)
        if m:
            cur = m.group(1)
            secs[cur] = []
            continue
        if line.startswith('.SH'):
            cur = None
        if cur:
            secs[cur].append(line.rstrip('\n'))
    return secs


def check_man1(memprofd, page):
    errs = []
    top = help_of(memprofd, None)
    cmds = re.findall(r'^  (\w+)\s', top.split('commands:', 1)[-1], re.M)
    secs = man1_sections(page)
    for cmd in cmds:
        if cmd not in secs:
            errs.append('memprofd.1: command "%s" has no section (.SS memprofd %s)' % (cmd, cmd))
            continue
        lines = secs[cmd]
        text = roff_text('\n'.join(lines))
        headings = set()
        for i, l in enumerate(lines):
            if l == '.TP' and i + 1 < len(lines):
                headings.update(OPT.findall(roff_text(lines[i + 1])))
        opts, reports = help_parts(help_of(memprofd, cmd))
        for o in sorted(opts - headings):
            errs.append('memprofd.1: "memprofd %s %s" (in --help) is not documented '
                        '(a .TP entry in .SS memprofd %s)' % (cmd, o, cmd))
        for o in sorted(headings - opts - {'--help'}):
            errs.append('memprofd.1: "memprofd %s %s" is documented but gone from --help' % (cmd, o))
        for r in sorted(reports):
            if not re.search(r'(?<![\w-])%s(?![\w-])' % re.escape(r), text):
                errs.append('memprofd.1: "memprofd %s %s" (in --help) is not documented' % (cmd, r))
    for cmd in sorted(set(secs) - set(cmds)):
        errs.append('memprofd.1: section "memprofd %s" names a command gone from --help' % cmd)
    return errs, len(cmds)


def parser_keys(source_root):
    """{section: {key}} from the config parser's source, found by its key table."""
    for path in glob.glob(os.path.join(source_root, '**', 'config.c'), recursive=True):
        src = open(path, encoding='utf-8').read()
        if 'static const struct key keys[]' not in src:
            continue
        keys = {}
        for sec, name in re.findall(r'\{\s*"(\w+)",\s*"(\w+)",\s*K_\w+', src):
            keys.setdefault(sec, set()).add(name)
        body = re.search(r'static int rule_key\(.*?\n\}', src, re.S)
        rule = set(re.findall(r'strcmp\(name, "(\w+)"\)', body.group(0))) if body else set()
        if len(keys) < 3 or not rule:
            sys.exit('FAIL: %s: the key table or rule_key no longer parse here; update '
                     'check_man.py' % path)
        keys['target NAME'] = rule
        keys['deny'] = set(rule)
        return path, keys
    sys.exit('FAIL: no config.c with the key table under ' + source_root)


def man5_entries(page):
    """({section: {key: value}}, {section: text}) of memprofd.conf.5."""
    entries, texts, cur, prev = {}, {}, None, ''
    for line in open(page, encoding='utf-8'):
        line = line.rstrip('\n')
        m = re.match(r'^\.SH "\[(.+)\]"', line)
        if m:
            cur = m.group(1)
            entries[cur], texts[cur] = {}, ''
        elif line.startswith('.SH'):
            cur = None
        elif cur:
            texts[cur] += roff_text(line) + '\n'
            m = re.match(r'^\.B (\w+) = (.+)$', line)
            if m and prev == '.TP':
                entries[cur][m.group(1)] = roff_text(m.group(2))
        prev = line
    return entries, texts


def check_man5(memprofd, page, source_root):
    errs = []
    src, keys = parser_keys(source_root)
    entries, texts = man5_entries(page)
    for sec in sorted(keys):
        if sec not in entries:
            errs.append('memprofd.conf.5: section [%s] (%s) is not documented' % (sec, src))
            continue
        for k in sorted(keys[sec]):
            if k not in entries[sec] and not (sec == 'deny' and re.search(r'\b%s\b' % k, texts[sec])):
                errs.append('memprofd.conf.5: [%s] key "%s" (%s) is not documented '
                            '(a ".B %s = DEFAULT" entry)' % (sec, k, src, k))
        for k in sorted(set(entries[sec]) - keys[sec]):
            errs.append('memprofd.conf.5: [%s] key "%s" is documented but the parser has none' % (sec, k))
    for sec in sorted(set(entries) - set(keys)):
        errs.append('memprofd.conf.5: section [%s] is documented but the parser has none' % sec)
    # The documented entries, as a file, must be a valid config; a misspelled one not.
    conf = ''.join('[%s]\n' % (s.replace('NAME', 'man')) +
                   ''.join('%s = %s\n' % kv for kv in entries[s].items())
                   for s in entries if entries[s])
    with tempfile.TemporaryDirectory() as d:
        # The documented db path's directory exists only once the package is installed
        # (test install): --check opens the db for writing, so it goes to d here.
        if entries.get('store', {}).get('db'):
            conf = conf.replace('db = %s\n' % entries['store']['db'],
                                'db = %s\n' % os.path.join(d, 'memprofd.db'))
        good, bad = os.path.join(d, 'good.conf'), os.path.join(d, 'bad.conf')
        open(good, 'w').write(conf)
        open(bad, 'w').write(conf.replace('flush_interval', 'flush_intervall'))
        p = subprocess.run([memprofd, 'daemon', '--check', '--config', good], capture_output=True, text=True)
        if p.returncode != 0:
            errs.append('memprofd.conf.5: its entries are not a valid config (rc %d): %s'
                        % (p.returncode, p.stderr.strip()))
        p = subprocess.run([memprofd, 'daemon', '--check', '--config', bad], capture_output=True, text=True)
        if p.returncode != 2 or 'flush_intervall' not in p.stderr:
            errs.append('daemon --check accepted a misspelled key (rc %d): the check cannot fail'
                        % p.returncode)
    return errs, sum(len(v) for v in keys.values())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--memprofd', required=True)
    ap.add_argument('--man1', required=True)
    ap.add_argument('--man5', required=True)
    ap.add_argument('--source-root', required=True)
    a = ap.parse_args()
    e1, ncmd = check_man1(a.memprofd, a.man1)
    e5, nkeys = check_man5(a.memprofd, a.man5, a.source_root)
    for e in e1 + e5:
        print('FAIL: ' + e)
    if e1 or e5:
        return 1
    print('ok: memprofd.1 covers %d commands and their options, memprofd.conf.5 %d keys' % (ncmd, nkeys))
    return 0


if __name__ == '__main__':
    sys.exit(main())
