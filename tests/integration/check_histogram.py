#!/usr/bin/env python3
"""check_histogram: the MemProf v4 AccessHistogram end to end, read back by LLVM.

Builds tests/workloads/hist_lines.c with clang-19 and the MemProf seed's flags, records it
with `memprofd record --alloc exact --access soft` (flags passed explicitly), exports
memprof-raw and reads it with `llvm-profdata-19 show --memory --profiled-binary`:
the alloc_lines context's MemInfoBlock must carry AccessHistogramSize 64 (4096-byte
objects, 64-byte granules) and AccessHistogramValues equal to what memprofd stored (the
context's access_hist blobs combined as MemInfoBlock::Merge combines them), with at least
HOT_SHARE of the counts in entry 0: only the objects' first cache line is ever accessed.
Exits 77 (skip) without root/BPF or without the clang-19 tools."""
import argparse
import os
import re
import shutil
import sqlite3
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpdtest  # noqa: E402

FLAGS = ['-fno-omit-frame-pointer', '-mno-omit-leaf-frame-pointer',
         '-fno-optimize-sibling-calls', '-fdebug-info-for-profiling', '-gmlt', '-O2',
         '-Wl,-z,noseparate-code', '-Wl,--build-id']
GRANULES = 4096 // 64      # hist_lines.c's OBJ_BYTES / ATTRIB_GRANULE
HOT_SHARE = 0.9            # of the histogram's counts in entry 0
MIN_SAMPLES = 20           # soft samples on the context (1 kHz per CPU for 2 s gives hundreds)


def stored_histogram(db):
    """The histogram of the contexts whose leaf frame is alloc_lines, as memprofd stored
    it: rows summed elementwise, the longer kept (MemInfoBlock::Merge); and their access
    sample count."""
    con = sqlite3.connect(db)
    leaf = {r[0] for r in con.execute("SELECT id FROM frames WHERE function = 'alloc_lines'")}
    wanted = {cid for cid, blob in con.execute(
        "SELECT c.id, s.frames FROM contexts c JOIN stacks s ON s.id = c.stack_id")
        if len(blob) >= 8 and struct.unpack_from('<q', blob)[0] in leaf}
    hist, samples = [], 0
    for blob, n, cid in con.execute(
            "SELECT access_hist, access_samples, context_id FROM mib WHERE alloc_count > 0"):
        if cid not in wanted:
            continue
        samples += n
        v = struct.unpack('<%dQ' % (len(blob) // 8), blob) if blob else ()
        hist += [0] * max(0, len(v) - len(hist))
        for i, x in enumerate(v):
            hist[i] += x
    con.close()
    return hist, samples


def shown_histograms(text):
    """(symbol names of the call stack, AccessHistogramSize, values) per MIB of
    `llvm-profdata show --memory`."""
    out = []
    for block in re.split(r'\n\s*-\s*\n\s*Callstack:', text):
        names = re.findall(r'SymbolName: (\S+)', block.split('MemInfoBlock:')[0])
        size = re.search(r'AccessHistogramSize: (\d+)', block)
        vals = re.search(r'AccessHistogramValues:((?: -?\d+)+)', block)
        if size:
            out.append((names, int(size.group(1)),
                        [abs(int(x)) for x in vals.group(1).split()] if vals else []))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--memprofd', required=True)
    ap.add_argument('--source', required=True)
    ap.add_argument('--seconds', default='2')
    a = ap.parse_args()
    for tool in ('clang-19', 'llvm-profdata-19'):
        if not shutil.which(tool):
            mpdtest.skip('%s not found' % tool)
    mpdtest.require_bpf()
    tmp = tempfile.mkdtemp(prefix='check_histogram.')
    exe, db, raw = (os.path.join(tmp, n) for n in ('hl', 'hl.db', 'hl.raw'))
    errs = []
    p = subprocess.run(['clang-19'] + FLAGS + [a.source, '-o', exe], capture_output=True,
                       text=True)
    if p.returncode != 0:
        mpdtest.finish(['clang-19: ' + p.stderr], 'access histogram', tmp)
    p = mpdtest.record(a.memprofd, db, [exe, a.seconds],
                       extra=('--access', 'soft', '--freq', '1000'), timeout=120)
    if p.returncode != 0:
        mpdtest.finish(['record failed: ' + mpdtest.describe(p)], 'access histogram', tmp)
    hist, samples = stored_histogram(db)
    mpdtest.log('stored: %d samples, histogram of %d: %s...' % (samples, len(hist), hist[:4]))
    p = mpdtest.run([a.memprofd, 'export', 'memprof-raw', '--db', db, '--binary', exe,
                     '-o', raw])
    if p.returncode != 0:
        mpdtest.finish(['export memprof-raw: ' + mpdtest.describe(p)], 'access histogram', tmp)
    p = mpdtest.run(['llvm-profdata-19', 'show', '--memory', '--profiled-binary=' + exe, raw])
    if p.returncode != 0:
        mpdtest.finish(['llvm-profdata-19 show: ' + mpdtest.describe(p)], 'access histogram',
                       tmp)
    shown = [s for s in shown_histograms(p.stdout) if s[0] and s[0][0] == 'alloc_lines']
    if samples < MIN_SAMPLES:
        errs.append('only %d access samples on alloc_lines (want >= %d)' % (samples, MIN_SAMPLES))
    if len(hist) != GRANULES:
        errs.append('stored histogram has %d entries, want %d' % (len(hist), GRANULES))
    if len(shown) != 1:
        errs.append('llvm-profdata show has %d alloc_lines MIBs, want 1:\n%s' % (len(shown),
                                                                                  p.stdout))
    else:
        _, size, vals = shown[0]
        mpdtest.log('llvm-profdata-19 show: AccessHistogramSize %d, values %s...' %
                    (size, vals[:4]))
        if size != GRANULES or vals != hist:
            errs.append('llvm-profdata shows size %d values %s, memprofd stored %s' %
                        (size, vals, hist))
    total = sum(hist)
    if not total or hist[0] < HOT_SHARE * total:
        errs.append('entry 0 holds %d of %d counts (want >= %.0f%%)' %
                    (hist[0] if hist else 0, total, 100 * HOT_SHARE))
    mpdtest.finish(errs, 'access histogram (%d samples, entry 0 %d of %d)' %
                   (samples, hist[0] if hist else 0, total), tmp)


if __name__ == '__main__':
    main()
