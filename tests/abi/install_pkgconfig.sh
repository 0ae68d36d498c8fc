#!/usr/bin/env bash
# Installs the build into a temporary prefix and checks it as a C user meets it: exactly the
# public files, the SONAME and version symlinks, a pkg-config file that describes them, and
# examples/c built with `pkg-config --cflags --libs metile` and run.
# Usage: install_pkgconfig.sh <build dir> <source dir> <libdir> <version>
#
# Checks use here-strings rather than pipes into `grep -q`: under pipefail, a writer killed by
# SIGPIPE after grep's early exit would fail the check at random.
set -euo pipefail
build=$1 src=$2 libdir=$3 version=$4
major=${version%%.*}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
lib=$prefix/$libdir

fail() { echo "FAIL: $*" >&2; exit 1; }
has_word() { case " $1 " in *" $2 "*) return 0 ;; *) return 1 ;; esac; }

if ! cmake --install "$build" --prefix "$prefix" >"$tmp/install.log"; then
  cat "$tmp/install.log"
  fail "cmake --install"
fi

# Exactly the public pieces: no capi/ or src/ headers, no static library, no test binaries.
cmake_dir=$libdir/cmake/metile
while IFS= read -r f; do
  case "$f" in
    include/metile/metile.h | include/metile/metile.cdef | "$libdir"/pkgconfig/metile.pc) ;;
    "$libdir"/libmetile.so | "$libdir/libmetile.so.$major" | "$libdir/libmetile.so.$version") ;;
    "$cmake_dir"/metileConfig.cmake | "$cmake_dir"/metileConfigVersion.cmake) ;;
    "$cmake_dir"/metileTargets.cmake | "$cmake_dir"/metileTargets-*.cmake) ;;
    *) fail "unexpected installed file: $f" ;;
  esac
done < <(cd "$prefix" && find . \( -type f -o -type l \) | sed 's|^\./||' | sort)

real=$lib/libmetile.so.$version
[ -f "$real" ] && [ ! -L "$real" ] || fail "libmetile.so.$version is not a file"
[ "$(readlink "$lib/libmetile.so.$major")" = "libmetile.so.$version" ] ||
  fail "libmetile.so.$major does not link to libmetile.so.$version"
[ "$(readlink "$lib/libmetile.so")" = "libmetile.so.$major" ] ||
  fail "libmetile.so does not link to libmetile.so.$major"
soname=$(objdump -p "$real" | awk '$1 == "SONAME" {print $2}')
[ "$soname" = "libmetile.so.$major" ] || fail "SONAME is '$soname', want libmetile.so.$major"

export PKG_CONFIG_PATH=$lib/pkgconfig
modversion=$(pkg-config --modversion metile)
[ "$modversion" = "$version" ] || fail "pkg-config --modversion says $modversion"
cflags=$(pkg-config --cflags metile)
include_dir=$(sed -n 's/^-I\([^ ]*\).*/\1/p' <<<"$cflags")
[ -f "$include_dir/metile/metile.h" ] || fail "--cflags '$cflags' does not find metile/metile.h"
libs=$(pkg-config --libs metile)
has_word "$libs" -lmetile || fail "--libs '$libs' lacks -lmetile"
private=$(pkg-config --libs --static metile)
for l in -lz -lffi -ldl -lpthread; do
  has_word "$private" "$l" || fail "--libs --static '$private' lacks $l"
done
grep -q '^Requires.private: zlib libffi$' "$lib/pkgconfig/metile.pc" ||
  fail "metile.pc does not name zlib and libffi in Requires.private"
[ -f "$include_dir/metile/metile.cdef" ] || fail "metile.cdef is not installed beside metile.h"

# Build every C example against the installed tree and run hello.
if ! make -s -C "$src/examples/c" BUILD="$tmp/examples" >"$tmp/make.log" 2>&1; then
  cat "$tmp/make.log"
  fail "building examples/c"
fi
export LD_LIBRARY_PATH=$lib
deps=$(ldd "$tmp/examples/hello")
grep -q "$lib/libmetile.so.$major" <<<"$deps" || fail "hello does not load the installed library: $deps"
out=$("$tmp/examples/hello") || { echo "$out"; fail "hello exited with $?"; }
echo "$out"
[ "$(head -1 <<<"$out")" = "metile $version (header $version)" ] ||
  fail "hello's first line is not 'metile $version (header $version)'"
grep -q '^devices: ' <<<"$out" || fail "hello printed no device list"
grep -q '^kernel @scale(%X: ptr<f32>, %Y: ptr<f32>, %alpha: f32, %n: i32)' <<<"$out" ||
  fail "hello printed no scale kernel"
grep -q '^default device: ' <<<"$out" || fail "hello printed nothing about the default device"
if ! grep -q '^default device: none' <<<"$out"; then
  grep -Eq '^(ran scale on 1000 elements .*: results match the host|.* cannot run scale yet: )' \
    <<<"$out" || fail "hello opened a device but did not run the kernel"
fi
echo "PASS: installed tree, pkg-config file and examples/c"
