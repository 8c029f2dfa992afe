#!/bin/sh
# Fails when the committed dist/ is not exactly what src/ compiles to (run
# ./build.sh and commit the result), or when src/printable.ts is not what
# scripts/gen-printable.go writes (checked when go is on the PATH).
set -eu
cd "$(dirname "$0")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tsc -p tsconfig.json --outDir "$tmp/dist"
if ! diff -r "$tmp/dist" dist >"$tmp/diff"; then
	cat "$tmp/diff"
	echo "check-build: dist/ is out of date with src/: run sdk/typescript/build.sh" >&2
	exit 1
fi
if command -v go >/dev/null 2>&1; then
	(cd ../.. && go run sdk/typescript/scripts/gen-printable.go) >"$tmp/printable.ts"
	if ! cmp -s "$tmp/printable.ts" src/printable.ts; then
		echo "check-build: src/printable.ts differs from Go's unicode.IsPrint: run" >&2
		echo "  go run sdk/typescript/scripts/gen-printable.go > sdk/typescript/src/printable.ts && sdk/typescript/build.sh" >&2
		exit 1
	fi
fi
echo "check-build: dist/ is up to date"
