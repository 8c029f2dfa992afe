#!/bin/sh
# The TypeScript SDK's checks, one command: type-check src/, check that the
# committed dist/ is what src/ compiles to, type-check the public API as a
# user sees it (test/types-check.ts against dist/*.d.ts), then the unit
# tests (node --test, a fake cluster on loopback; no real cluster needed),
# the client and do() tests once more over fetch (on Node the client
# sends through node:net by default).
# Needs node >= 18 and tsc (Debian: apt-get install node-typescript).
set -eu
cd "$(dirname "$0")"
echo "== tsc --noEmit (src)"
tsc -p tsconfig.json --noEmit
echo "== check-build"
./check-build.sh
echo "== tsc --noEmit (test/types-check.ts against dist)"
tsc -p test/tsconfig.json
echo "== node --test"
node --test test/*.test.mjs
echo "== node --test (client and do() over fetch)"
INTENTD_TEST_TRANSPORT=fetch node --test test/client.test.mjs test/do.test.mjs
