#!/usr/bin/env python3
"""check_readme: the README's Synopsis against each command's --help, so neither goes
stale alone: the same commands, for each the same options (each --help's usage and
option lines), the same choices where both list them (a|b|c), the same query reports and
export formats; a figure --help quotes (an overhead like 1.061x) is one the README has;
and the demo's dependencies (deploy/bootstrap.sh demo) leave out what only tests and
benchmarks use. No BPF. Exits 0 pass, 1 fail."""
import argparse
import re
import subprocess
import sys

TEST_ONLY = {"chromium", "valgrind", "heaptrack", "nodejs", "npm", "llvm-19", "lld-19",
             "python3-yaml", "libc6-dbg"}


def synopsis(readme):
    m = re.search(r"^## Synopsis\n+```\n(.*?)```", readme, re.S | re.M)
    if not m:
        sys.exit("FAIL: the README has no Synopsis section with a code block")
    cmds, cur = {}, None
    for line in m.group(1).splitlines():
        w = re.match(r"memprofd (\w+)\s*(.*)", line)
        if w:
            cur = w.group(1)
            cmds[cur] = w.group(2)
        elif cur:
            cmds[cur] += " " + line.strip()
    return cmds


def options(text):
    """{--opt: choices or None} of a usage/help text."""
    out = {}
    for m in re.finditer(r"(?<![\w-])(--[a-z][a-z-]*)(?:[ =]([a-z][\w-]*(?:\|[a-z][\w-]*)+))?",
                         text):
        opt, alts = m.group(1), m.group(2)
        if opt == "--help":
            continue
        if alts and out.get(opt) is None:
            out[opt] = set(alts.split("|"))
        else:
            out.setdefault(opt, None)
    return out


def first_alts(text):
    m = re.search(r"^\s*([a-z][\w-]*(?:\|[a-z][\w-]*)+)", text)
    return set(m.group(1).split("|")) if m else set()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--readme", required=True)
    ap.add_argument("--bootstrap", required=True)
    a = ap.parse_args()
    errs = []
    with open(a.readme, encoding="utf-8") as f:
        readme = f.read()
    syn = synopsis(readme)
    top = subprocess.run([a.memprofd, "--help"], capture_output=True, text=True).stdout
    listed = set(re.findall(r"^  (\w+)  ", top, re.M))
    if set(syn) != listed:
        errs.append("commands: README %s, memprofd --help %s" % (sorted(syn), sorted(listed)))
    for cmd, line in syn.items():
        p = subprocess.run([a.memprofd, cmd, "--help"], capture_output=True, text=True)
        if p.returncode != 0:
            errs.append("memprofd %s --help: exit %d" % (cmd, p.returncode))
            continue
        help_text = p.stdout
        usage = help_text.split("\n\n")[0].replace("usage: memprofd %s" % cmd, "")
        usage = re.sub(r"\|\s+", "|", usage)   # a list of choices wrapped onto two lines
        # Options: those of the usage lines and of the option list ("  --opt ...").
        opt_lines = "\n".join(l for l in help_text.splitlines() if re.match(r"\s+(-\w, )?--", l))
        have = options(usage + "\n" + opt_lines)
        want = options(line)
        if re.search(r"(^|[\s[])-o ", line):
            want["--output"] = None   # "-o FILE" is "-o, --output FILE"
        if set(have) != set(want):
            errs.append("%s: options differ: README only %s, --help only %s" % (
                cmd, sorted(set(want) - set(have)), sorted(set(have) - set(want))))
        for opt in set(have) & set(want):
            if have[opt] and want[opt] and have[opt] != want[opt]:
                errs.append("%s %s: README %s, --help %s" % (cmd, opt, sorted(want[opt]),
                                                             sorted(have[opt])))
        if first_alts(line) != first_alts(usage):
            errs.append("%s: reports/formats differ: README %s, --help %s" % (
                cmd, sorted(first_alts(line)), sorted(first_alts(usage))))
        for fig in re.findall(r"\b\d+\.\d+x\b|\b\d+(?:\.\d+)?% overhead", help_text):
            if fig not in readme:
                errs.append("%s --help quotes %r, which the README does not" % (cmd, fig))
    with open(a.bootstrap, encoding="utf-8") as f:
        boot = f.read()
    demo = re.search(r"DEMO_PKGS=\((.*?)\)", boot, re.S)
    pkgs = set(demo.group(1).split()) if demo else set()
    if not pkgs or pkgs & TEST_ONLY:
        errs.append("bootstrap demo installs test-only packages: %s" % sorted(pkgs & TEST_ONLY))
    if errs:
        print("FAIL: README synopsis vs --help: %d problem(s):" % len(errs))
        for e in errs:
            print("  - " + e)
        return 1
    print("PASS: README synopsis agrees with --help for %s; demo installs %d packages" %
          (", ".join(sorted(syn)), len(pkgs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
