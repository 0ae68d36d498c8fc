#!/usr/bin/env bash
# Rewrites capi/metile.exports from the symbols a built libmetile.so exports. Run it only when
# the ABI changes on purpose, and review the diff: the list is what tests/abi checks against.
# Usage: scripts/update-exports.sh [build dir (default: build)]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
lib=${1:-$root/build}/libmetile.so
[ -e "$lib" ] || { echo "update-exports: $lib not found; build the library first" >&2; exit 1; }
nm -D --defined-only "$lib" | awk '{sub(/@.*/, "", $3); print $3}' | LC_ALL=C sort -u >"$root/capi/metile.exports"
git -C "$root" diff --stat -- capi/metile.exports || true
