#!/usr/bin/env bash
# Installs the Debian 12 packages metile needs to build, test and run its demo and bindings.
# Installs only what is missing, so it is quick to re-run; needs root when something is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config  # the C/C++ build
  libffi-dev zlib1g-dev                         # library dependencies
  libgtest-dev libbenchmark-dev                 # tests and benchmarks
  python3-numpy python3-pytest python3-pytest-xdist  # Python binding and its tests (xdist: on all cores)
  python3-cffi                                  # the cffi declarations' test
  clang-19 libclang-rt-19-dev                   # metal-sim device, libFuzzer targets
  golang-go                                     # Go binding
)
# The Rust binding needs cargo; a rustup toolchain on PATH serves as well as Debian's.
command -v cargo >/dev/null 2>&1 || packages+=(cargo)

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "install-deps: no dpkg-query here; this script supports Debian 12 (apt). Install the" \
       "equivalents of: ${packages[*]}" >&2
  exit 1
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages are installed"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages: ${missing[*]}" >&2
  echo "install-deps: run this script as root, or install them yourself:" >&2
  echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y "${missing[@]}"
