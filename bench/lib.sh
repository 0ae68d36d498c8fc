# The setup every GPU session script shares (bench/*_run.sh, scripts/gpu-session.sh). Source it
# from a script in bench/ or scripts/:   . "$(dirname "$0")/../bench/lib.sh"
# It sets `here` (the repository root), exports PYTHONUNBUFFERED=1 and defines:
#   use_debs DIR            unpacks DIR/*.deb (libffi-dev, zlib1g-dev, libgtest-dev,
#                           libbenchmark-dev for an image without those headers) under $DEPS_DIR
#                           (default /tmp/deps; never over /), points the compiler at them and
#                           sets the array deps_prefix to cmake's -DCMAKE_PREFIX_PATH for them;
#                           does nothing for "".
#   release_build SRC BUILD TARGET...
#                           a Release build of SRC in BUILD (deps_prefix applied), TARGETs built
#                           with every core.
#   summary NAME RC LOG     one line: NAME, RC, seconds since $t0 and LOG's last pass/fail line.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export PYTHONUNBUFFERED=1
deps_prefix=()
t0=${t0:-$SECONDS}

use_debs() {
  [ -n "$1" ] || return 0
  local deps=${DEPS_DIR:-/tmp/deps} f
  mkdir -p "$deps" && for f in "$1"/*.deb; do dpkg -x "$f" "$deps"; done
  deps_prefix=(-DCMAKE_PREFIX_PATH="$deps/usr")
  export CPATH=$deps/usr/include LIBRARY_PATH=$deps/usr/lib/x86_64-linux-gnu
}

release_build() {
  local src=$1 build=$2
  shift 2
  cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${deps_prefix[@]}" &&
    ninja -C "$build" -j"$(nproc)" "$@"
}

summary() {
  echo "$1: rc=$2 $((SECONDS - t0))s $(grep -E 'PASSED|FAILED|passed|failed' "$3" | tail -1 | cut -c1-100)"
}
