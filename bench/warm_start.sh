#!/bin/sh
# Warm first launch of a cpu kernel in a fresh process, with and without the persisted compiler
# probe (issue 16 item 4). Runs tests/cache/cache_driver.c: once to populate a private cache
# directory, then N times warm ("probe kept"), then N times with the probe record removed before
# each run ("probe removed": the process spawns `c++ --version` and the -march=native query as
# before this change). Prints each run's total_ms (device open to first launch finished).
#   bench/warm_start.sh <build dir> [runs]
set -eu
build=$1
runs=${2:-7}
driver=$build/tests/metile_cache_driver
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export METILE_CACHE_DIR=$dir
"$driver" cpu miss >/dev/null
for mode in kept removed; do
  printf '%s:' "$mode"
  i=0
  while [ "$i" -lt "$runs" ]; do
    [ "$mode" = removed ] && rm -rf "$dir/autotune"
    "$driver" cpu hit | tr ' ' '\n' | sed -n 's/^total_ms=//p' | tr '\n' ' '
    i=$((i + 1))
  done
  echo
done
