#!/usr/bin/env bash
# The demo: install missing dependencies, build and install metile into build-demo/prefix, then
# on the default device ($METILE_DEVICE, else metal, cuda, cpu) run the seed tutorial's vector
# add from Python, and the C examples built against the install with pkg-config.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
jobs=${METILE_JOBS:-2}
build=$root/build-demo
prefix=$build/prefix

cmake_args=(-G Ninja)
if command -v ccache >/dev/null 2>&1; then
  cmake_args+=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi

bash scripts/install-deps.sh
cmake -S . -B "$build" "${cmake_args[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DMETILE_BUILD_TESTS=OFF -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib
ninja -C "$build" -j"$jobs"
cmake --install "$build" >/dev/null

export PKG_CONFIG_PATH=$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
export LD_LIBRARY_PATH=$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
echo
echo "==> examples/python/vector_add.py (the seed tutorial)"
METILE_LIBRARY=$prefix/lib/libmetile.so /usr/bin/python3 examples/python/vector_add.py 100000
echo
echo "==> examples/c (vector add, softmax, GEMM and hello through the C API)"
make -s -C examples/c run BUILD="$build/examples"
