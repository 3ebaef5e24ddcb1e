#!/usr/bin/env bash
# Installs every build and test dependency of memprofd from Debian's archive.
# Idempotent: packages already present are left alone; safe to run on every CI start.
set -euo pipefail

PKGS=(
  build-essential pkg-config meson ninja-build
  clang llvm clang-19 llvm-19 lld-19 libclang-rt-19-dev
  libbpf-dev bpftool libelf-dev libdw-dev libdebuginfod-dev zlib1g-dev
  libsqlite3-dev sqlite3 libcmocka-dev libcapstone-dev libpfm4-dev
  libsystemd-dev libprotobuf-c-dev protobuf-c-compiler protobuf-compiler
  libinih-dev libjemalloc-dev valgrind systemtap-sdt-dev
  binutils elfutils
  python3-yaml
  systemd
  chromium
  libssl-dev libstdc++6-12-dbg libc6-dbg
  heaptrack
  libcurl4-openssl-dev clickhouse-server clickhouse-client
)
# Node.js and npm (for the pprof-format decoder test) come with this kind of machine from
# NodeSource; Debian's npm package conflicts with that nodejs, so install them only where
# neither is there.
if ! command -v npm >/dev/null 2>&1; then
  PKGS+=(nodejs npm)
fi

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
  exit 0
fi
echo "bootstrap: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "bootstrap: done"
