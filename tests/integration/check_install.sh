#!/bin/sh
# `meson install` (into a DESTDIR) installs what a host needs to run the service: the
# memprofd binary, the three systemd units, the default config, the tmpfiles.d entry
# and the nightly export script; the installed binary runs and the installed config
# parses (--check). Needs no BPF and no root (DESTDIR is a temp directory).
# Usage: check_install.sh BUILD_DIR
set -eu
build=$1
command -v meson >/dev/null 2>&1 || { echo "SKIP: no meson on PATH"; exit 77; }
dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT

meson install -C "$build" --destdir "$dest" --no-rebuild --quiet >"$dest.log" 2>&1 ||
	{ cat "$dest.log"; rm -f "$dest.log"; echo "FAIL: meson install"; exit 1; }
rm -f "$dest.log"

fail=0
one() {   # one PATTERN: exactly one installed file matches; prints it
	n=$(find "$dest" -path "$dest$1" | wc -l)
	[ "$n" -eq 1 ] || { echo "FAIL: $n installed files match $1" >&2; return 1; }
	find "$dest" -path "$dest$1"
}
bin=$(one '*/bin/memprofd') || fail=1
for u in memprofd.service memprofd-export.service memprofd-export.timer; do
	one "*/systemd/system/$u" >/dev/null || fail=1
done
conf=$(one '*/etc/memprofd/memprofd.conf') || fail=1
tmpf=$(one '*/tmpfiles.d/memprofd.conf') || fail=1
script=$(one '*/libexec/memprofd/memprofd-nightly-export') || fail=1
[ $fail -eq 0 ] || { find "$dest" -type f | sed "s|^$dest||"; exit 1; }

[ -x "$bin" ] || { echo "FAIL: $bin is not executable"; exit 1; }
[ -x "$script" ] || { echo "FAIL: $script is not executable"; exit 1; }
"$bin" daemon --help >/dev/null || { echo "FAIL: the installed binary does not run"; exit 1; }
"$bin" daemon --check --config "$conf" || { echo "FAIL: the installed config does not parse"; exit 1; }
grep -q '^d /var/lib/memprofd ' "$tmpf" || { echo "FAIL: $tmpf lacks the state directory"; exit 1; }
grep -q '^e /var/lib/memprofd/export .*\.tmp\.' "$tmpf" ||
	{ echo "FAIL: $tmpf does not clean interrupted exports"; exit 1; }
echo "ok: meson install put in place:"
find "$dest" -type f \( -path '*/bin/*' -o -path '*/systemd/*' -o -path '*/etc/*' \
	-o -path '*/tmpfiles.d/*' -o -path '*/libexec/*' \) | sed "s|^$dest|  |" | sort
