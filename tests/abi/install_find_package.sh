#!/usr/bin/env bash
# Installs the build into a temporary prefix and builds tests/abi/consumer, a CMake project that
# uses find_package(metile) and metile::metile; also checks the package version rules.
# Usage: install_find_package.sh <build dir> <source dir> <libdir> <version> <generator> <cc>
set -euo pipefail
build=$1 src=$2 libdir=$3 version=$4 generator=$5 cc=$6
major=${version%%.*}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

fail() { echo "FAIL: $*" >&2; exit 1; }

if ! cmake --install "$build" --prefix "$prefix" >"$tmp/install.log"; then
  cat "$tmp/install.log"
  fail "cmake --install"
fi

configure() {  # <binary dir> <wanted version>
  cmake -S "$src/tests/abi/consumer" -B "$1" -G "$generator" -DCMAKE_C_COMPILER="$cc" \
    -DCMAKE_PREFIX_PATH="$prefix" -DMETILE_WANT_VERSION="$2" >"$1.log" 2>&1
}

configure "$tmp/consumer" "$major" || { cat "$tmp/consumer.log"; fail "configuring the consumer"; }
if ! cmake --build "$tmp/consumer" >"$tmp/build.log" 2>&1; then
  cat "$tmp/build.log"
  fail "building the consumer"
fi
out=$("$tmp/consumer/consumer") || { echo "$out"; fail "the consumer exited with $?"; }
echo "$out"
case "$out" in "consumer: metile $version, devices: "*) ;; *) fail "unexpected output" ;; esac

# The package accepts versions of the same major, and no other.
if configure "$tmp/next" "$((major + 1)).0"; then
  fail "find_package(metile $((major + 1)).0) accepted version $version"
fi
grep -q "metileConfig.cmake, version: $version" "$tmp/next.log" ||
  { cat "$tmp/next.log"; fail "find_package did not reject $((major + 1)).0 on the version"; }
echo "PASS: find_package(metile) and metile::metile"
