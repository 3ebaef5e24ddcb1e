#!/bin/sh
# Runs each fuzz target for SECONDS (default 60) on a fresh seed corpus; exits non-zero on
# the first crash, leaving the reproducer (crash-*) in the work dir it names.
# Usage: run_fuzzers.sh SECONDS [BUILD_DIR]   (BUILD_DIR: the meson build, default ./build)
set -eu
secs=${1:-60}; build=$(cd "${2:-build}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/memprofd-fuzz.XXXXXX)
"$here/make_corpus.sh" "$work/corpus" "$build/tests/unit/fixtures_dwarf"
export LSAN_OPTIONS="suppressions=$here/../lsan.supp"
status=0
# fuzz_store damages copies of a small store made by the store's own writer.
"$build/bench/gen_store" --db "$work/template.db" --contexts 8 --rows 16 --binaries 1 \
  --procs 2 --buckets 2 >/dev/null
export MEMPROFD_FUZZ_STORE="$work/template.db"
for t in fuzz_elf fuzz_dwarf fuzz_maps fuzz_spe fuzz_config fuzz_store; do
  exe="$build/tests/fuzz/$t"
  [ -x "$exe" ] || { echo "run_fuzzers: $exe not built (ninja -C $build $t)" >&2; exit 1; }
  case $t in fuzz_maps) seeds=$work/corpus/maps ;; fuzz_dwarf) seeds=$work/corpus/dwarf ;;
             fuzz_spe) seeds=$work/corpus/spe ;;
             fuzz_config) seeds=$work/corpus/config ;;
             fuzz_store) seeds=$work/corpus/store ;; *) seeds=$work/corpus/elf ;; esac
  mkdir -p "$work/$t"
  echo "run_fuzzers: $t for ${secs}s"
  (cd "$work/$t" && "$exe" -max_total_time="$secs" -max_len=1048576 -rss_limit_mb=4096 \
      -print_final_stats=1 . "$seeds" > log 2>&1) || { status=1; echo "run_fuzzers: $t CRASHED, see $work/$t" >&2; tail -40 "$work/$t/log" >&2; }
done
[ $status -eq 0 ] && echo "run_fuzzers: no crashes ($work)"
exit $status
