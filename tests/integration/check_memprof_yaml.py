#!/usr/bin/env python3
"""check_memprof_yaml: `memprofd export memprof-yaml` against LLVM's MemProf YAML schema.

LLVM 19 (the newest in Debian 12) cannot read MemProf YAML; LLVM >= 20 can. So the schema
that llvm-profdata 20 reads is transcribed here and the export is checked against it with
a real YAML parser (PyYAML, Debian's python3-yaml), on the node graph so that scalar
spellings (hex GUIDs, true/false) are checked as LLVM's YAMLIO reads them.

Transcribed from LLVM 20 (release/20.x), llvm/include/llvm/ProfileData/MemProfYAML.h:
  MappingTraits<AllMemProfData>:        mapRequired("HeapProfileRecords")
  MappingTraits<GUIDMemProfRecordPair>: mapRequired("GUID"), mapRequired("AllocSites"),
                                        mapRequired("CallSites")
      (CallSites is MemProfRecord::CallSites, std::vector<std::vector<Frame>> in LLVM 20;
       LLVM 21 made it a list of {Frames, CalleeGuids} mappings.)
  MappingTraits<AllocationInfo>:        mapRequired("Callstack"), mapRequired("MemInfoBlock")
  MappingTraits<Frame> (flow):          mapRequired("Function") GUIDHex64,
                                        mapRequired("LineOffset") uint32_t,
                                        mapRequired("Column") uint32_t,
                                        mapRequired("IsInlineFrame") bool
  ScalarTraits<GUIDHex64>::input:       all-decimal is refused ("use a hexadecimal GUID or a
                                        function instead"); "0x..." is a hex uint64; anything
                                        else is a function name whose GUID LLVM computes
  CustomMappingTraits<PortableMemInfoBlock>::inputOne: a key must be a MIBEntryDef name
                                        ("Key is not a valid validation event" otherwise),
                                        its value a uint64 scalar cast to the field's type
and the field names and types from llvm/include/llvm/ProfileData/MIBEntryDef.inc (v4).
YAMLIO rejects keys a mapping does not know ("unknown key"). Beyond what LLVM enforces,
memprofd's contract (compiler_feedback/memprof_yaml.c): GUIDs are written as hex, every
MemInfoBlock has all 25 scalar fields with values that fit their types, and neither
AccessHistogramSize nor AccessHistogram appears (AccessHistogram is the runtime's
pointer; a file cannot carry histogram values, and a nonzero size would make llvm-profdata
dereference it).

Run: check_memprof_yaml.py --memprofd BIN --gen-store BIN (a store from bench/gen_store,
no BPF), or --yaml FILE to check one file. It also checks that the validator rejects a
renamed field, a missing field and wrong types, each mutation applied to the real export.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

try:
    import yaml
except ImportError:            # deploy/bootstrap.sh installs python3-yaml
    print('SKIP: python3-yaml (PyYAML) is not installed')
    sys.exit(77)

LLVM_SOURCE = 'LLVM 20 llvm/include/llvm/ProfileData/MemProfYAML.h + MIBEntryDef.inc'

# MIBEntryDef.inc (v4): name -> C type.
MIB_FIELDS = [
    ('AllocCount', 'uint32_t'), ('TotalAccessCount', 'uint64_t'),
    ('MinAccessCount', 'uint64_t'), ('MaxAccessCount', 'uint64_t'),
    ('TotalSize', 'uint64_t'), ('MinSize', 'uint32_t'), ('MaxSize', 'uint32_t'),
    ('AllocTimestamp', 'uint32_t'), ('DeallocTimestamp', 'uint32_t'),
    ('TotalLifetime', 'uint64_t'), ('MinLifetime', 'uint32_t'), ('MaxLifetime', 'uint32_t'),
    ('AllocCpuId', 'uint32_t'), ('DeallocCpuId', 'uint32_t'), ('NumMigratedCpu', 'uint32_t'),
    ('NumLifetimeOverlaps', 'uint32_t'), ('NumSameAllocCpu', 'uint32_t'),
    ('NumSameDeallocCpu', 'uint32_t'), ('DataTypeId', 'uint64_t'),
    ('TotalAccessDensity', 'uint64_t'), ('MinAccessDensity', 'uint32_t'),
    ('MaxAccessDensity', 'uint32_t'), ('TotalLifetimeAccessDensity', 'uint64_t'),
    ('MinLifetimeAccessDensity', 'uint32_t'), ('MaxLifetimeAccessDensity', 'uint32_t'),
    ('AccessHistogramSize', 'uint32_t'), ('AccessHistogram', 'uintptr_t'),
]
MIB_TYPES = dict(MIB_FIELDS)
HISTOGRAM_FIELDS = ('AccessHistogramSize', 'AccessHistogram')
MIB_REQUIRED = [n for n, _ in MIB_FIELDS if n not in HISTOGRAM_FIELDS]   # memprofd's 25
BITS = {'uint32_t': 32, 'uint64_t': 64, 'uintptr_t': 64}

# Mapping keys: name -> (required, kind).
TOP = {'HeapProfileRecords': (True, 'records')}
RECORD = {'GUID': (True, 'guid'), 'AllocSites': (True, 'allocsites'),
          'CallSites': (True, 'callsites')}
ALLOC = {'Callstack': (True, 'frames'), 'MemInfoBlock': (True, 'mib')}
FRAME = {'Function': (True, 'guid'), 'LineOffset': (True, 'uint32_t'),
         'Column': (True, 'uint32_t'), 'IsInlineFrame': (True, 'bool')}

BOOL_WORDS = {'true', 'True', 'TRUE', 'false', 'False', 'FALSE'}


def _unsigned(text):
    """LLVM's getAsUnsignedInteger(S, 0, N): auto radix (0x, 0b, 0o/0 octal, decimal)."""
    t = text.strip()
    for prefix, base in (('0x', 16), ('0X', 16), ('0b', 2), ('0B', 2), ('0o', 8)):
        if t.startswith(prefix):
            return int(t[2:], base) if re.fullmatch(r'[0-9a-fA-F]+', t[2:]) else None
    if re.fullmatch(r'0[0-7]+', t):
        return int(t, 8)
    return int(t) if re.fullmatch(r'[0-9]+', t) else None


class Validator:
    def __init__(self):
        self.errors = []

    def err(self, node, msg):
        mark = node.start_mark if node is not None else None
        where = 'line %d' % (mark.line + 1) if mark else 'document'
        self.errors.append('%s: %s' % (where, msg))

    def scalar(self, node, what):
        if not isinstance(node, yaml.ScalarNode):
            self.err(node, '%s must be a scalar, not a %s' % (what, type(node).__name__))
            return None
        return node.value

    def check_type(self, node, kind, what):
        if kind in BITS:
            v = self.scalar(node, what)
            if v is None:
                return
            n = _unsigned(v)
            if n is None:
                self.err(node, '%s: %r is not an unsigned integer (%s)' % (what, v, kind))
            elif n >= 1 << BITS[kind]:
                self.err(node, '%s: %s does not fit %s' % (what, v, kind))
        elif kind == 'bool':
            v = self.scalar(node, what)
            if v is not None and v not in BOOL_WORDS:
                self.err(node, '%s: %r is not a YAML bool' % (what, v))
        elif kind == 'guid':
            v = self.scalar(node, what)
            if v is None:
                return
            if re.fullmatch(r'[0-9]+', v):
                self.err(node, '%s: decimal GUID %s (LLVM: "use a hexadecimal GUID or a '
                         'function instead")' % (what, v))
            elif not re.fullmatch(r'0[xX][0-9a-fA-F]{1,16}', v):
                self.err(node, '%s: %r is not a hex GUID (memprofd writes 0x...)' % (what, v))
        elif kind == 'records':
            for r in self.seq(node, what):
                self.mapping(r, RECORD, 'HeapProfileRecords entry')
        elif kind == 'allocsites':
            for a in self.seq(node, what):
                self.mapping(a, ALLOC, 'AllocSites entry')
        elif kind == 'callsites':
            for cs in self.seq(node, what):
                self.check_type(cs, 'frames', 'CallSites entry')
        elif kind == 'frames':
            frames = self.seq(node, what)
            if not frames and isinstance(node, yaml.SequenceNode):
                self.err(node, '%s: empty call stack' % what)
            for f in frames:
                self.mapping(f, FRAME, 'Frame')
        elif kind == 'mib':
            self.mib(node)
        else:
            raise AssertionError(kind)

    def seq(self, node, what):
        if not isinstance(node, yaml.SequenceNode):
            self.err(node, '%s must be a sequence, not a %s' % (what, type(node).__name__))
            return []
        return node.value

    def mapping(self, node, schema, what):
        if not isinstance(node, yaml.MappingNode):
            self.err(node, '%s must be a mapping, not a %s' % (what, type(node).__name__))
            return
        seen = {}
        for k, v in node.value:
            key = self.scalar(k, '%s key' % what)
            if key is None:
                continue
            if key in seen:
                self.err(k, '%s: duplicate key %s' % (what, key))
            seen[key] = v
            if key not in schema:
                self.err(k, '%s: unknown key %r (known: %s)' % (what, key,
                                                               ', '.join(schema)))
                continue
            self.check_type(v, schema[key][1], '%s.%s' % (what, key))
        for key, (required, _) in schema.items():
            if required and key not in seen:
                self.err(node, '%s: missing required key %s' % (what, key))

    def mib(self, node):
        if not isinstance(node, yaml.MappingNode):
            self.err(node, 'MemInfoBlock must be a mapping, not a %s' % type(node).__name__)
            return
        seen = set()
        for k, v in node.value:
            key = self.scalar(k, 'MemInfoBlock key')
            if key is None:
                continue
            if key not in MIB_TYPES:
                self.err(k, 'MemInfoBlock: %r is not a MIBEntryDef field (LLVM: "Key is not '
                         'a valid validation event")' % key)
                continue
            if key in seen:
                self.err(k, 'MemInfoBlock: duplicate key %s' % key)
            seen.add(key)
            if key in HISTOGRAM_FIELDS:
                self.err(k, 'MemInfoBlock: %s is the runtime histogram; a YAML profile '
                         'cannot carry its values' % key)
            self.check_type(v, MIB_TYPES[key], 'MemInfoBlock.' + key)
        for key in MIB_REQUIRED:
            if key not in seen:
                self.err(node, 'MemInfoBlock: missing field %s' % key)


def validate(text):
    """Schema errors of a memprof-yaml document (empty list: valid)."""
    v = Validator()
    try:
        docs = list(yaml.compose_all(text, Loader=getattr(yaml, 'CSafeLoader', yaml.SafeLoader)))
    except yaml.YAMLError as e:
        return ['not YAML: %s' % e]
    docs = [d for d in docs if d is not None]
    if len(docs) != 1:
        return ['want exactly one YAML document, got %d' % len(docs)]
    v.mapping(docs[0], TOP, 'document')
    return v.errors


# Mutations of a valid export that the validator must reject: (what, pattern, replacement).
MUTATIONS = [
    ('renamed frame field', r'LineOffset:', 'LineOfset:'),
    ('renamed MemInfoBlock field', r'TotalSize:', 'TotalSizes:'),
    ('renamed record key', r'AllocSites:', 'AllocationSites:'),
    ('missing GUID', r'\n  - GUID: 0x[0-9a-f]+\n    ', '\n  - '),
    ('missing Column', r', Column: \d+', ''),
    ('missing MemInfoBlock field', r'\n +MaxSize: \d+', ''),
    ('decimal GUID', r'GUID: 0x[0-9a-f]+', 'GUID: 12345'),
    ('string Column', r'Column: \d+', 'Column: abc'),
    ('int IsInlineFrame', r'IsInlineFrame: false', 'IsInlineFrame: 7'),
    ('negative AllocCount', r'AllocCount: \d+', 'AllocCount: -1'),
    ('MinSize over uint32', r'MinSize: \d+', 'MinSize: 4294967296'),
    ('Callstack as a scalar', r'(- Callstack:)\n(?: +- \{[^\n]*\n)+', r'\1 notalist\n'),
    ('Frame as a sequence', r'\{ Function: (0x[0-9a-f]+), [^}]*\}', r'[ \1, 0, 0, false ]'),
    ('a histogram pointer', r'(\n +)AllocCount:', r'\1AccessHistogram: 94000000\1AllocCount:'),
]


def self_test(text):
    """Errors if the validator accepts a mutation of the valid text (or a mutation does
    not apply)."""
    errs = []
    for what, pat, rep in MUTATIONS:
        bad, n = re.subn(pat, rep, text, count=1)
        if not n:
            errs.append('mutation %r does not apply to the export' % what)
        else:
            found = validate(bad)
            if not found:
                errs.append('validator accepts the export with a %s' % what)
            elif all(e.startswith('not YAML') for e in found):
                errs.append('mutation %r makes invalid YAML, not a schema error' % what)
    return errs


def export_gen_store(memprofd, gen_store, tmp):
    db = os.path.join(tmp, 'gen.db')
    subprocess.run([gen_store, '--db', db, '--contexts', '30', '--rows', '150', '--binaries',
                    '2', '--seed', '7'], check=True, capture_output=True)
    bins = json.loads(subprocess.run([memprofd, 'query', 'binaries', '--db', db, '--format',
                                      'json'], check=True, capture_output=True,
                                     text=True).stdout)
    p = subprocess.run([memprofd, 'export', 'memprof-yaml', '--db', db, '--binary',
                        bins[0]['build_id']], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError('export memprof-yaml: ' + p.stderr)
    return p.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--memprofd')
    ap.add_argument('--gen-store')
    ap.add_argument('--yaml', help='check this file instead of a generated export')
    a = ap.parse_args()
    if a.yaml:
        with open(a.yaml) as f:
            text = f.read()
    else:
        with tempfile.TemporaryDirectory(prefix='check_memprof_yaml.') as tmp:
            text = export_gen_store(a.memprofd, a.gen_store, tmp)
    errs = validate(text)
    if not re.search(r'AllocSites:\n +- Callstack:', text):
        errs.append('the export has no AllocSites to check')
    errs += self_test(text)
    if errs:
        print('FAIL: memprof-yaml against %s:' % LLVM_SOURCE)
        for e in errs[:40]:
            print('  - ' + e)
        return 1
    print('PASS: memprof-yaml matches %s (%d records); %d mutations rejected' %
          (LLVM_SOURCE, text.count('- GUID:'), len(MUTATIONS)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
