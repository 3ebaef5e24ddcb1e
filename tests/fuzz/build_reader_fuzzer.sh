#!/bin/sh
# Builds a libFuzzer target over the store and every reader (query, exports, merge): the
# readers and what they stand on (base, store, symbolizer, reporter, compiler_feedback,
# linker_script_gen, fleet's store source for query/export --fleet, and cli/'s export
# dispatch) compiled with the fuzzer's instrumentation, by folder, so files that move
# between these folders need no change here. The daemon and `push` are never part of it.
# Usage: build_reader_fuzzer.sh CLANGXX SRCROOT BUILDROOT INPUT.c OUTPUT
set -eu
cxx=$1 src=$2 build=$3 input=$4 output=$5
flags="-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -D_GNU_SOURCE -I$src -I$build -I$build/store"
csrcs=""
for d in base store symbolizer reporter compiler_feedback linker_script_gen fleet; do
  [ -d "$src/$d" ] || continue
  for f in "$src/$d"/*.c; do
    case $f in */fleet/cmd_push.c) continue ;; esac   # push: a writer, and the daemon's config
    case $f in */store/schema_gen.c) continue ;; esac   # a build-time program (its own main)
    [ -e "$f" ] && csrcs="$csrcs $f"
  done
done
# The export dispatch lives with the command line (cli/cmd_export.c); main.c stays out.
csrcs="$csrcs $src/cli/cmd_export.c"
# shellcheck disable=SC2086
exec "$cxx" $flags -x c "$input" $csrcs "$build/reporter/profile.pb-c.c" \
  -x c++ "$src/symbolizer/demangle.cc" -o "$output" \
  -lsqlite3 -lprotobuf-c -lcurl -lz -lelf -ldw -lcapstone -ldebuginfod -lcrypto -lm -lpthread
