#!/bin/sh
# Seed corpora for the fuzzers from real files of this host, copied at build/run time (no
# binaries are committed): small system executables and libraries, the DWARF fixtures,
# and real /proc/PID/maps texts. Usage: make_corpus.sh OUTDIR [FIXTURE_DIR]
set -eu
out=$1; fixtures=${2:-}
mkdir -p "$out/elf" "$out/dwarf" "$out/maps"
for f in /bin/true /bin/ls /usr/bin/env /lib/x86_64-linux-gnu/libz.so.1 \
         /lib/x86_64-linux-gnu/libdl.so.2 /lib/x86_64-linux-gnu/libpthread.so.0; do
  [ -r "$f" ] || continue
  size=$(stat -L -c %s "$f")
  [ "$size" -le 1048576 ] || continue        # keep seeds small: libFuzzer's -max_len
  cp -L "$f" "$out/elf/$(basename "$f")"
done
if [ -n "$fixtures" ] && [ -d "$fixtures" ]; then
  for f in "$fixtures"/dwarf_c_gcc "$fixtures"/dwarf_c_clang "$fixtures"/dwarf_cc_gcc \
           "$fixtures"/dwarf_cc_clang "$fixtures"/dwarf_c_gcc.debug; do
    [ -r "$f" ] && cp "$f" "$out/dwarf/" && cp "$f" "$out/elf/"
  done
fi
for p in self 1; do
  cat /proc/$p/maps > "$out/maps/maps_$p" 2>/dev/null || true
done
printf '00400000-00401000 r-xp 00000000 08:01 1234 /bin/x (deleted)\n' > "$out/maps/deleted"
