#!/bin/sh
# Compiles src/ into dist/ (ESM JavaScript + .d.ts), which is committed:
# the package has no build step for its users. check-build.sh verifies
# that dist/ is what src/ compiles to.
set -eu
cd "$(dirname "$0")"
rm -rf dist
tsc -p tsconfig.json
