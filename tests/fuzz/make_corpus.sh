#!/bin/sh
# Seed corpora for the fuzzers from real files of this host, copied at build/run time (no
# binaries are committed): small system executables and libraries, the DWARF fixtures,
# real /proc/PID/maps texts, and SPE records (the one Linux's perf published with its SPE
# support, commit ffd3d18c20b8; and a user-space load with a context packet). Usage: make_corpus.sh OUTDIR [FIXTURE_DIR]
set -eu
out=$1; fixtures=${2:-}
mkdir -p "$out/elf" "$out/dwarf" "$out/maps" "$out/spe" "$out/config" "$out/store"
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
# SPE: raw AUX bytes, and the same behind 32 bytes of ring heads/tails (fuzz_spe's layout).
pub='\111\000\262\300\073\051\017\000\000\377\377\263\300\353\044\373\000\000\000\200\232\000\000\102\026\260\000\304\025\010\000\000\377\377\230\000\000\161\066\154\041\054\011\000\000\000'
usr='\145\222\020\000\000\111\000\260\064\022\100\000\000\000\000\200\262\170\126\064\022\377\177\000\052\230\170\000\102\006\001'
printf "$pub" > "$out/spe/published"
printf "$usr$pub" > "$out/spe/user_then_published"
printf '\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\060\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000' > "$out/spe/ring_head"
# Config: the shipped file, and rule sections with every key kind.
here=$(cd "$(dirname "$0")" && pwd)
cp "$here/../../deploy/memprofd.conf" "$out/config/shipped.conf"
printf '[store]\ndb = /tmp/x.db\nretention = 14d\n[sampling]\nalloc = sampled\nsample_bytes = 512K\n[governor]\ncpu_budget = 1%%\n[target web]\nexe = /usr/bin/nginx*\ncomm = nginx\ncgroup = /system.slice/*\n[target kv]\nbuild_id = ABCDEF0123456789\n[deny]\nexe = */memprofd\n' > "$out/config/rules.conf"
# Store (fuzz_store.c's layout): byte patches over the file (first byte even) and hostile
# values through SQLite (first byte odd).
printf '\000' > "$out/store/intact"
printf '\000\000\000\000\000\020SQLite format 4\000' > "$out/store/bad_magic"
printf '\000\034\000\000\000\004\377\377\377\377' > "$out/store/page_count"
printf '\000\000\020\000\000\010\015\000\000\000\377\017\377\377' > "$out/store/btree_page"
printf '\001\005\002\000\000\010\000"x\\\n\377\376<\000' > "$out/store/hostile_text"
printf '\001\010\005\000\001\004\000\377\377\377\377' > "$out/store/short_blob"
printf '\001\010\005\000\005\000\000' > "$out/store/huge_blob"
printf '\001\003\003\000\002\001\000\003' > "$out/store/int_min"
# Every older schema version (first byte 2k: k versions before the current one), intact
# and with a hostile text in the first table's second column (2k + 1).
cur=$(sed -n 's/^#define STORE_SCHEMA_VERSION \([0-9]*\).*/\1/p' "$here/../../store/store.h")
k=1
while [ "$k" -lt "$cur" ]; do
  printf "\\$(printf %03o $((2 * k)))" > "$out/store/intact_v$((cur - k))"
  printf "\\$(printf %03o $((2 * k + 1)))\\000\\001\\000\\000\\004\\000'\\\\\\377\"" > "$out/store/hostile_v$((cur - k))"
  k=$((k + 1))
done
# Regression seeds of crashes fuzz_store found.
# html: buckets of a store whose contexts list came back empty: qsort and bsearch over NULL.
printf '\001\377\001\005\000\005\000\000\377\377\005\000\002\001\000\377\377\377\005\000\002\001\000\003' > "$out/store/crash_html_no_classes"
