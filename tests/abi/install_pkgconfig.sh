#!/usr/bin/env bash
# Installs the build into a temporary prefix and checks it as a C user meets it: exactly the
# public files, the SONAME and version symlinks, a pkg-config file that describes them, and
# examples/c built with `pkg-config --cflags --libs metile` and run.
# Usage: install_pkgconfig.sh <build dir> <source dir> <libdir> <version>
set -euo pipefail
build=$1 src=$2 libdir=$3 version=$4
major=${version%%.*}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; fail "cmake --install"; }

# Exactly the public pieces: no capi/ or src/ headers, no static library, no test binaries.
while IFS= read -r f; do
  case "$f" in
    include/metile/metile.h | "$libdir"/libmetile.so | "$libdir/libmetile.so.$major" | \
      "$libdir/libmetile.so.$version" | "$libdir"/pkgconfig/metile.pc | \
      "$libdir"/cmake/metile/metileConfig.cmake | "$libdir"/cmake/metile/metileConfigVersion.cmake | \
      "$libdir"/cmake/metile/metileTargets.cmake | "$libdir"/cmake/metile/metileTargets-*.cmake) ;;
    *) fail "unexpected installed file: $f" ;;
  esac
done < <(cd "$prefix" && find . \( -type f -o -type l \) | sed 's|^\./||' | sort)

lib=$prefix/$libdir
[ -f "$lib/libmetile.so.$version" ] && [ ! -L "$lib/libmetile.so.$version" ] || fail "libmetile.so.$version is not a file"
[ "$(readlink "$lib/libmetile.so.$major")" = "libmetile.so.$version" ] || fail "libmetile.so.$major does not link to libmetile.so.$version"
[ "$(readlink "$lib/libmetile.so")" = "libmetile.so.$major" ] || fail "libmetile.so does not link to libmetile.so.$major"
soname=$(objdump -p "$lib/libmetile.so.$version" | awk '$1 == "SONAME" {print $2}')
[ "$soname" = "libmetile.so.$major" ] || fail "SONAME is '$soname', want libmetile.so.$major"

export PKG_CONFIG_PATH=$lib/pkgconfig
[ "$(pkg-config --modversion metile)" = "$version" ] || fail "pkg-config --modversion: $(pkg-config --modversion metile)"
cflags=$(pkg-config --cflags metile)
libs=$(pkg-config --libs metile)
[ -f "$(echo "$cflags" | sed -n 's/^-I\([^ ]*\).*/\1/p')/metile/metile.h" ] || fail "--cflags '$cflags' does not find metile/metile.h"
case " $libs " in *" -lmetile "*) ;; *) fail "--libs '$libs' lacks -lmetile" ;; esac
private=$(pkg-config --libs --static metile)
for l in -lz -lffi -ldl -lpthread; do
  case " $private " in *" $l "*) ;; *) fail "--libs --static '$private' lacks $l" ;; esac
done

# Build every C example against the installed tree and run hello.
make -s -C "$src/examples/c" BUILD="$tmp/examples" >"$tmp/make.log" 2>&1 || { cat "$tmp/make.log"; fail "building examples/c"; }
export LD_LIBRARY_PATH=$lib
# Here-strings rather than pipes into `grep -q`: with pipefail, a writer killed by SIGPIPE after
# grep's early exit would fail the check.
deps=$(ldd "$tmp/examples/hello")
grep -q "$lib/libmetile.so.$major" <<<"$deps" || fail "hello does not load the installed libmetile: $deps"
out=$("$tmp/examples/hello") || { echo "$out"; fail "hello exited with $?"; }
echo "$out"
[ "$(head -1 <<<"$out")" = "metile $version (header $version)" ] || fail "hello's first line is not 'metile $version (header $version)'"
grep -q '^devices: ' <<<"$out" || fail "hello printed no device list"
grep -q '^kernel @scale(%X: ptr<f32>, %Y: ptr<f32>, %alpha: f32, %n: i32)' <<<"$out" || fail "hello printed no scale kernel"
grep -q '^default device: ' <<<"$out" || fail "hello printed nothing about the default device"
if ! grep -q '^default device: none' <<<"$out"; then
  grep -Eq '^(ran scale on 1000 elements .*: results match the host|.* cannot run scale yet: )' <<<"$out" ||
    fail "hello opened a device but did not run the kernel"
fi
echo "PASS: installed tree, pkg-config file and examples/c"
