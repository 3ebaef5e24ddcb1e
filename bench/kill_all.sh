#!/bin/sh
# SIGKILL, KILLS times each (default 100), of `memprofd record`, the daemon and `memprofd
# push` at random points, with the checks the short tests make (crash: 20 record kills,
# daemon_stress: 50 daemon kills, kill_push: 4 push kills) after every kill. Long: about
# 40 minutes on 2 loaded cores. README (Reliability) quotes its figures.
# Usage: bench/kill_all.sh [BUILD_DIR] [KILLS]
set -eu
build=$(cd "${1:-build}" && pwd); kills=${2:-100}
here=$(cd "$(dirname "$0")" && pwd); it="$here/../tests/integration"
status=0
echo "== record: $kills kills"
python3 "$it/check_crash.py" --memprofd "$build/cli/memprofd" \
  --churn "$build/tests/workloads/churn" --iterations "$kills" || status=1
echo "== daemon: $kills kills"
python3 "$it/check_daemon_stress.py" --memprofd "$build/cli/memprofd" \
  --churn "$build/tests/workloads/churn" --short-lived "$build/tests/workloads/short_lived" \
  --phases kills --kills "$kills" || status=1
echo "== push: $kills kills"
python3 "$here/kill_push.py" --memprofd "$build/cli/memprofd" \
  --gen-store "$build/bench/gen_store" --kills "$kills" || status=1
exit $status
