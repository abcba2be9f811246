#!/bin/sh
# build.sh ARCH OUTDIR builds the verifyd Debian package of this tree for
# ARCH (amd64 or arm64) into OUTDIR, as "make deb" does.
#
# The binaries are static (CGO_ENABLED=0), position-independent and
# stripped; the files are staged by "make install DESTDIR=…", the one
# list of what goes where; the copyright file names the licence of every
# Go module compiled in (packaging/gencopyright); nfpm, a pinned version
# run from the Go module proxy, writes the .deb (no hand-made ar archive).
#
# DEB_VERSION defaults to 0.0.N, N the commits of HEAD: every commit of
# main has a higher version than the one before, so a package upgrades
# the last. DEB_MAINTAINER names the maintainer.
set -eu

arch=${1:?usage: build.sh ARCH OUTDIR}
out=${2:?usage: build.sh ARCH OUTDIR}
case "$arch" in amd64 | arm64) ;; *) echo "build.sh: ARCH must be amd64 or arm64, not $arch" >&2; exit 2 ;; esac

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
GO=${GO:-go}
NFPM_VERSION=v2.44.0 # v2.46+ need modules of go.digitalxero.dev the module proxy does not serve
version=${DEB_VERSION:-0.0.$(git rev-list --count HEAD)}
commit=$(git rev-parse --short=12 HEAD)
# The package's dates are the commit's: the same tree builds the same
# package, byte for byte.
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct HEAD)}
export SOURCE_DATE_EPOCH

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM
mkdir -p "$work/bin" "$out"

CGO_ENABLED=0 GOOS=linux GOARCH=$arch $GO build -trimpath -buildmode=pie -ldflags='-s -w -buildid=' \
	-o "$work/bin/" ./cmd/verifyd ./cmd/verifyctl

stage=$work/root
make -s -o build install DESTDIR="$stage" BIN="$work/bin" PREFIX=/usr >/dev/null

doc=$stage/usr/share/doc/verifyd
install -m 0644 README.md "$doc/README.md"
for f in docs/*.md; do
	install -m 0644 "$f" "$doc/$(basename "$f")"
done
install -d "$doc/monitoring"
install -m 0644 monitoring/README.md monitoring/verifyd.rules.yml monitoring/grafana-dashboard.json "$doc/monitoring/"
if [ -d docs/dashboard ]; then
	install -d "$doc/dashboard"
	install -m 0644 docs/dashboard/*.png "$doc/dashboard/"
fi
$GO run ./packaging/gencopyright -lists probe/lists/data/LICENSES "$work/bin/verifyd" "$work/bin/verifyctl" >"$doc/copyright"
chmod 0644 "$doc/copyright"
date=$(date -u -d "@$SOURCE_DATE_EPOCH" -R)
maintainer=${DEB_MAINTAINER:-verifyd maintainers <maintainers@verifyd.dev>}
cat >"$work/changelog" <<EOF
verifyd ($version) stable; urgency=medium

  * Built from commit $commit.

 -- $maintainer  $date
EOF
gzip -9n <"$work/changelog" >"$doc/changelog.gz"
install -d "$stage/usr/share/lintian/overrides"
install -m 0644 packaging/deb/lintian-overrides "$stage/usr/share/lintian/overrides/verifyd"
man=$stage/usr/share/man/man8
install -d "$man"
for p in verifyd verifyctl; do
	gzip -9n <"packaging/man/$p.8" >"$man/$p.8.gz"
done
find "$stage" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +

# The variables of nfpm.yaml, filled in here (nfpm expands only some
# fields itself).
sed -e "s|\${DEB_ARCH}|$arch|g" -e "s|\${DEB_VERSION}|$version|g" -e "s|\${DEB_MAINTAINER}|$maintainer|g" \
	-e "s|\${STAGE}|$stage|g" -e "s|\${SCRIPTS}|$root/packaging/deb|g" packaging/deb/nfpm.yaml >"$work/nfpm.yaml"
$GO run github.com/goreleaser/nfpm/v2/cmd/nfpm@$NFPM_VERSION package \
	--config "$work/nfpm.yaml" --packager deb --target "$out/verifyd_${version}_${arch}.deb"
echo "$out/verifyd_${version}_${arch}.deb"
