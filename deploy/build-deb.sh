#!/bin/sh
# Builds memprofd's Debian packages (memprofd, libmemprofd0, libmemprofd-dev) with
# dpkg-buildpackage and debhelper from a copy of this tree (deploy/debian as debian/):
#   sh deploy/build-deb.sh [OUTDIR]          # OUTDIR default: ./deb; a full compile
# With MEMPROFD_PREBUILT=BUILD_DIR (tests) the files of that meson build of the same tree
# are packaged instead of compiling again (deploy/debian/use-prebuilt.py).
# Needs the Build-Depends of deploy/debian/control (deploy/bootstrap.sh installs them).
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
out=$(mkdir -p "${1:-deb}" && cd "${1:-deb}" && pwd)
version=$(sed -n '1s/^memprofd (\([^)]*\)).*/\1/p' "$src/deploy/debian/changelog")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tree=$work/memprofd-${version%-*}

mkdir -p "$tree"
# The tree as it is (tracked and new files, uncommitted edits included), never build dirs.
if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
	(cd "$src" && git ls-files -z --cached --others --exclude-standard | xargs -0 -r \
		sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh |
		tar --null -T - -cf -) | tar -xf - -C "$tree"
else
	(cd "$src" && tar --exclude='./build*' --exclude='./deb' -cf - .) | tar -xf - -C "$tree"
fi
cp -r "$src/deploy/debian" "$tree/debian"
[ -z "${MEMPROFD_PREBUILT:-}" ] || MEMPROFD_PREBUILT=$(cd "$MEMPROFD_PREBUILT" && pwd)
export MEMPROFD_PREBUILT
(cd "$tree" && dpkg-buildpackage -b -us -uc) > "$work/build.log" 2>&1 ||
	{ tail -40 "$work/build.log"; echo "memprofd: build-deb: dpkg-buildpackage failed (log above)" >&2; exit 1; }
for f in "$work"/*.deb; do
	cp "$f" "$out/"
	echo "$out/$(basename "$f")"
done
