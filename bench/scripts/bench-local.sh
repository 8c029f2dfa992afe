#!/usr/bin/env bash
# Starts a fresh local 3-node cluster, runs intent-bench against it, stops it.
# Extra arguments go to intent-bench (e.g. --clients 1,16 --duration 5s).
set -euo pipefail
cd "$(dirname "$0")/../.."
export INTENTD_RUN_DIR=$(mktemp -d "${TMPDIR:-/tmp}/intentd-bench.XXXXXX")
./scripts/run-local.sh --then bin/intent-bench "$@"
