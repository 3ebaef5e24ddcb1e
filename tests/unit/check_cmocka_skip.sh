#!/usr/bin/env bash
# A cmocka run that skipped a case must exit 77 (meson's skip), one that only passed 0.
# Without tests/unit/mpd_cmocka.h the skipping executable exits 0 and counts as passed.
set -u
"$1" >/dev/null 2>&1
rc=$?
if [ "$rc" -ne 77 ]; then
  echo "FAIL: a cmocka run with a skipped case exited $rc, not 77"
  exit 1
fi
echo "ok: a cmocka run with a skipped case exits 77"
