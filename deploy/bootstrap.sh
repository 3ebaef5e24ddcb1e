#!/usr/bin/env bash
# Installs memprofd's dependencies from Debian's archive: `bootstrap.sh demo` what building
# and running memprofd needs (deploy/demo.sh), `bootstrap.sh` (or `test`) that and what
# the tests and benchmarks need too (tests/run.sh, .ci/run).
# Idempotent: packages already present are left alone; safe to run on every CI start.
set -euo pipefail

# Build and run: compilers and the libraries meson.build requires (clang-19 also builds
# the DWARF fixtures meson sets up), bpftool for the skeletons, USDT headers.
DEMO_PKGS=(
  build-essential pkg-config meson ninja-build python3
  clang llvm clang-19
  libbpf-dev bpftool libelf-dev libdw-dev libdebuginfod-dev zlib1g-dev libssl-dev
  libsqlite3-dev libcmocka-dev libcapstone-dev libpfm4-dev
  libsystemd-dev libprotobuf-c-dev protobuf-c-compiler
  libinih-dev libjemalloc-dev systemtap-sdt-dev libcurl4-openssl-dev
  binutils elfutils
)
# Tests and benchmarks only: the PGO toolchain, reference profilers (valgrind, heaptrack),
# clickhouse-server for the fleet test and benchmark,
# protoc and sqlite3 to read outputs, strace (core_btf: which files a load opens), git (a Debian binary for dwarf_stacks), Chromium for the HTML report, debug symbols for
# the symbolization checks, systemd for the unit checks, PyYAML.
TEST_PKGS=(
  llvm-19 lld-19 libclang-rt-19-dev
  sqlite3 protobuf-compiler valgrind heaptrack git strace
  python3-yaml
  systemd
  chromium
  libstdc++6-12-dbg libc6-dbg
  clickhouse-server clickhouse-client
  debhelper dpkg-dev fakeroot
)
case "${1:-test}" in
  demo) PKGS=("${DEMO_PKGS[@]}") ;;
  test) PKGS=("${DEMO_PKGS[@]}" "${TEST_PKGS[@]}")
    # Node.js and npm (for the pprof-format decoder test) come with this kind of machine
    # from NodeSource; Debian's npm package conflicts with that nodejs, so install them
    # only where neither is there.
    if ! command -v npm >/dev/null 2>&1; then
      PKGS+=(nodejs npm)
    fi ;;
  *) echo "usage: bootstrap.sh [demo|test]" >&2; exit 2 ;;
esac

if [ "$(id -u)" -ne 0 ]; then
  echo "bootstrap: must run as root (apt-get install)" >&2
  exit 1
fi

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "bootstrap: all ${#PKGS[@]} packages present"
else
  echo "bootstrap: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "bootstrap: done"
fi

# The pprof-format decoder that tests/integration/check_pprof.py runs (npm registry; a
# failure here fails the bootstrap, so the test never skips for want of it).
NODE_PREFIX=/usr/local/lib/memprofd-test
if [ ! -d "$NODE_PREFIX/node_modules/pprof-format" ]; then
  npm install --prefix "$NODE_PREFIX" --no-audit --no-fund --loglevel=error pprof-format@2 >/dev/null
  echo "bootstrap: pprof-format installed in $NODE_PREFIX"
fi
