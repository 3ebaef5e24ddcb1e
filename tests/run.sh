#!/usr/bin/env bash
# The README's second command: the whole test suite, in a plain build and in an
# ASan/UBSan build (run as root: the integration tests load real BPF programs).
# Prints one closing line "N passed, N failed, N skipped" over both builds.
set -uo pipefail
cd "$(dirname "$0")/.."
bash deploy/bootstrap.sh test || exit 1   # the demo's packages and the tests'
pass=0 fail=0 skip=0 rc=0
for variant in plain asan; do
  dir=build-test-$variant
  opts=()
  [ $variant = asan ] && opts=(-Db_sanitize=address,undefined -Db_lundef=false)
  if [ ! -f $dir/build.ninja ]; then
    meson setup $dir "${opts[@]}" >/dev/null || { echo "meson setup ($variant) failed"; exit 1; }
  fi
  ninja -C $dir >/dev/null || { ninja -C $dir | tail -30; echo "build ($variant) failed"; exit 1; }
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  export LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp
  meson test -C $dir --print-errorlogs --num-processes 2 || rc=1
  log=$dir/meson-logs/testlog.json
  if [ -f "$log" ]; then
    read -r p f s < <(python3 - "$log" <<'PY'
import json, sys
p = f = s = 0
for line in open(sys.argv[1]):
    r = json.loads(line).get("result", "")
    if r in ("OK", "EXPECTEDFAIL"): p += 1
    elif r == "SKIP": s += 1
    else: f += 1
print(p, f, s)
PY
)
    pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + s))
  fi
done
echo "tests: $pass passed, $fail failed, $skip skipped"
exit $rc
