#!/usr/bin/env bash
# The README's first command: installs what is missing to build and run memprofd (not
# the tests' and benchmarks' packages: tests/run.sh adds those), builds, records the
# bundled demo workload (bench/kvcache) under `memprofd record --alloc exact`, and prints
# the top allocation contexts. Run as root from anywhere.
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/bootstrap.sh demo
[ -f build/build.ninja ] || meson setup build >/dev/null
ninja -C build >/dev/null
db=build/demo.db
rm -f "$db" "$db-wal" "$db-shm"
build/cli/memprofd record --alloc exact --db "$db" -- build/bench/kvcache --ops 400000
build/cli/memprofd query contexts --db "$db" --limit 10
