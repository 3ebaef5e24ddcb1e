#!/bin/sh
# The systemd units deploy/ generates (BUILD/deploy) pass `systemd-analyze verify` (PID 1
# need not be systemd), with ExecStart pointed at the built binary and script, and the main service's
# `systemd-analyze security --offline=yes` exposure stays at or below MAX_EXPOSURE.
# A deliberately broken copy must fail verification, so the check can fail at all.
# Usage: check_units.sh GENERATED_DIR DEPLOY_SRC_DIR MEMPROFD_BINARY [MAX_EXPOSURE]
set -eu
deploy=$1
src=$2
memprofd=$3
max=${4:-2.0}

command -v systemd-analyze >/dev/null 2>&1 || { echo "SKIP: no systemd-analyze (Debian package systemd)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for u in memprofd.service memprofd-export.service memprofd-export.timer memprofd-push.service; do
	f=$deploy/$u
	[ -f "$f" ] || f=$src/$u
	sed -e "s|^ExecStart=[^ ]*/memprofd |ExecStart=$memprofd |" \
	    -e "s|^ExecStart=[^ ]*/memprofd-nightly-export\$|ExecStart=$deploy/memprofd-nightly-export|" \
	    -e "s|^Environment=MEMPROFD=.*|Environment=MEMPROFD=$memprofd|" \
	    "$f" > "$tmp/$u"
done

fail=0
# verify prints nothing for a clean unit; any line (unknown key, bad value) is a failure.
out=$(cd "$tmp" && systemd-analyze verify --man=no ./memprofd.service ./memprofd-export.service \
	./memprofd-export.timer ./memprofd-push.service 2>&1) || fail=1
# Lines about units outside ours (the host's own dependencies) are not ours to fix.
ours=$(printf '%s\n' "$out" | grep -E 'memprofd' || true)
if [ -n "$ours" ] || [ $fail -ne 0 ]; then
	printf 'FAIL: systemd-analyze verify:\n%s\n' "$out"
	exit 1
fi
echo "ok: systemd-analyze verify (4 units)"

# The check must be able to fail: an unknown directive is reported.
sed 's/^NoNewPrivileges=yes/NoNewPrivilegez=yes/' "$tmp/memprofd.service" > "$tmp/broken.service"
if (cd "$tmp" && systemd-analyze verify --man=no ./broken.service 2>&1) | grep -q NoNewPrivilegez; then
	echo "ok: a broken unit is reported"
else
	echo "FAIL: systemd-analyze verify did not report an unknown directive"
	exit 1
fi

# Required properties of the main unit.
for want in 'Type=notify' 'WatchdogSec=' 'NoNewPrivileges=yes' 'ProtectSystem=strict' \
	    'StateDirectory=memprofd' 'PrivateTmp=yes' 'RestrictAddressFamilies=AF_UNIX' \
	    'CapabilityBoundingSet=CAP_BPF CAP_PERFMON CAP_SYS_RESOURCE CAP_SYS_PTRACE CAP_DAC_READ_SEARCH' \
	    'ExecReload=/bin/kill -HUP $MAINPID'; do
	grep -qF -- "$want" "$tmp/memprofd.service" || { echo "FAIL: memprofd.service lacks $want"; exit 1; }
done
grep -q '^Persistent=true' "$tmp/memprofd-export.timer" || { echo "FAIL: timer not Persistent"; exit 1; }
echo "ok: required directives present"

sec=$(cd "$tmp" && systemd-analyze security --offline=yes --no-pager ./memprofd.service 2>&1) || true
score=$(printf '%s\n' "$sec" | sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
[ -n "$score" ] || { printf 'FAIL: no exposure score:\n%s\n' "$sec" | tail -5; exit 1; }
echo "memprofd.service exposure: $score (max $max)"
awk -v s="$score" -v m="$max" 'BEGIN { exit !(s <= m) }' || { echo "FAIL: exposure $score > $max"; exit 1; }
esc=$(cd "$tmp" && systemd-analyze security --offline=yes --no-pager ./memprofd-export.service 2>&1 |
	sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p') || true
echo "memprofd-export.service exposure: ${esc:-?}"
