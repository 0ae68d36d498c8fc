#!/usr/bin/env bash
# The full test suite, as CI runs it (.ci/run): install missing dependencies, configure and build
# a fresh RelWithDebInfo tree, run every ctest, then rebuild the unit and C API tests with
# AddressSanitizer + UndefinedBehaviorSanitizer and run them.
#
# Each step is a shell function plus one line in STEPS ("name function [prerequisite]"); a step
# whose prerequisite failed is skipped. To add a suite (pytest, cargo test, go test, fuzz smoke
# runs), write a step_* function and append a line. Every step runs even after a failure; the
# last line is a one-line summary and the exit status is non-zero if any step failed.
#
# Environment: METILE_JOBS (parallel jobs, default 2), METILE_TEST_DIR (build dirs, default
# build-test and build-test-asan under the repository).
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
jobs=${METILE_JOBS:-2}
build=${METILE_TEST_DIR:-$root/build-test}
asan_build=$build-asan
# Compiled kernels go to a cache inside the build tree: a run starts cold and leaves $HOME alone.
export METILE_CACHE_DIR=${METILE_CACHE_DIR:-$build/cache}

cmake_args=(-G Ninja)
if command -v ccache >/dev/null 2>&1; then
  cmake_args+=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi

step_deps() { bash scripts/install-deps.sh; }

step_configure() {
  rm -rf "$build"
  cmake -S . -B "$build" "${cmake_args[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo
}

step_build() { ninja -C "$build" -j"$jobs"; }

step_ctest() { ctest --test-dir "$build" --output-on-failure -j"$jobs"; }

# -O1 keeps sanitized code fast enough to test without the compile time of -O2.
asan_targets=(metile_unit metile_capi_test metile_header_c metile_header_cpp)
step_asan_build() {
  rm -rf "$asan_build"
  cmake -S . -B "$asan_build" "${cmake_args[@]}" -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_C_FLAGS=-O1 -DCMAKE_CXX_FLAGS=-O1 -DMETILE_SANITIZE=address,undefined &&
    ninja -C "$asan_build" -j"$jobs" "${asan_targets[@]}"
}

step_asan_test() (
  rc=0
  export ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  for t in tests/metile_unit tests/capi/metile_capi_test tests/capi/metile_header_c \
           tests/capi/metile_header_cpp; do
    echo "--- $t"
    # metile_unit: LeakSanitizer's exit-time scan crashes in that process (signal 11 in its
    # tracer, seen since the metal-sim fiber and stand-in tests joined it; not yet understood),
    # so it runs with ASan+UBSan but without the leak check; the C API tests keep it.
    leaks=1
    [ "$t" = tests/metile_unit ] && leaks=0
    ASAN_OPTIONS=$ASAN_OPTIONS:detect_leaks=$leaks LSAN_OPTIONS=suppressions=$root/tests/lsan.supp \
      "$asan_build/$t" || { echo "FAILED under sanitizers: $t"; rc=1; }
  done
  exit $rc
)

# The bindings run against an installed copy of the main build (as users get it).
prefix=$build/prefix
step_install() { rm -rf "$prefix" && cmake --install "$build" --prefix "$prefix" >/dev/null; }

step_bindings_sync() {
  python3 bindings/rust/regen.py --check && python3 bindings/go/metile/regen.py --check &&
    python3 bindings/python/regen.py --check && python3 bindings/cffi/regen.py --check
}

step_pytest() (
  export METILE_LIBRARY=$prefix/lib/libmetile.so
  /usr/bin/python3 -m pytest bindings/python/tests -q -p no:cacheprovider
)

# The Python suite on the `metal` device, which on Linux opens the stand-in Objective-C runtime and
# Metal.framework built under tests/metal_standin (x86-64 only); ctest already runs the kernel
# suite and the metal unit tests on it (metal_standin_unit, metal_standin_metallib).
step_pytest_metal() (
  standin=$build/tests/metal_standin
  [ -e "$standin/libmetile_standin_metal.so" ] || { echo "no stand-in Metal.framework (not x86-64)"; exit 0; }
  export METILE_LIBRARY=$prefix/lib/libmetile.so
  export METILE_OBJC_LIBRARY=$standin/libmetile_standin_objc.so
  export METILE_METAL_FRAMEWORK=$standin/libmetile_standin_metal.so
  /usr/bin/python3 -m pytest bindings/python/tests -q -p no:cacheprovider -k "metal and not sim"
)

step_rust() (
  cd bindings/rust && METILE_LIB_DIR=$prefix/lib CARGO_TARGET_DIR=$build/cargo cargo test --offline
)

step_go() (
  export PKG_CONFIG_PATH=$prefix/lib/pkgconfig LD_LIBRARY_PATH=$prefix/lib
  export GOCACHE=$build/gocache
  cd bindings/go/metile && go vet ./... && go test -count=1 ./...
)

step_c_examples() (
  export PKG_CONFIG_PATH=$prefix/lib/pkgconfig LD_LIBRARY_PATH=$prefix/lib
  make -s -C examples/c run BUILD="$build/examples"
)

# libFuzzer (ASan + UBSan) on the Tile IR parser and on the builder C API, 60 s each, and on the
# GPU IR parser for 30 s, seeded from the kernel suite (as Tile IR and lowered to GPU IR) and
# from tests/fuzz/builder_corpus.
fuzz_build=$build-fuzz
step_fuzz() {
  local clang=""
  for c in clang++-19 clang++; do command -v "$c" >/dev/null 2>&1 && { clang=$c; break; }; done
  [ -n "$clang" ] || { echo "no clang++ for libFuzzer"; return 1; }
  rm -rf "$fuzz_build" && mkdir -p "$fuzz_build/run/work" "$fuzz_build/run/crashes" \
      "$fuzz_build/run/builder_work" "$fuzz_build/run/gpu_work" &&
    "$build/tests/fuzz/parse_fuzz_corpus" "$fuzz_build/run" &&
    CXX=$clang CC=${clang/++/} cmake -S . -B "$fuzz_build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DMETILE_BUILD_FUZZ=ON >/dev/null &&
    ninja -C "$fuzz_build" -j"$jobs" parse_fuzz builder_fuzz gpu_parse_fuzz &&
    (cd "$fuzz_build/run" && "$fuzz_build/tests/fuzz/parse_fuzz" -max_total_time=60 -max_len=16384 \
      -dict=tile_ir.dict -artifact_prefix=crashes/ -print_final_stats=1 work corpus) &&
    (cd "$fuzz_build/run" && "$fuzz_build/tests/fuzz/gpu_parse_fuzz" -max_total_time=30 -max_len=16384 \
      -dict=gpu_ir.dict -artifact_prefix=crashes/ -print_final_stats=1 gpu_work gpu_corpus) &&
    (cd "$fuzz_build/run" && "$fuzz_build/tests/fuzz/builder_fuzz" -max_total_time=60 -max_len=4096 \
      -artifact_prefix=crashes/ -print_final_stats=1 builder_work "$root/tests/fuzz/builder_corpus")
}

# The differential fuzzer (tests/fuzz/README.md) for 90 s from a seed that changes every run
# (the seeded ctest diff_fuzz_seeded always runs the same programs); findings go to
# $build/diff_findings and print with the seed that reproduces them.
step_diff_fuzz() {
  local seed=${METILE_DIFF_SEED:-$(( $(date +%s) % 1000000 * 1000 ))}
  mkdir -p "$build/diff_findings" &&
    "$build/tests/fuzz/diff_fuzz" --seed "$seed" --seconds "${METILE_DIFF_SECONDS:-90}" \
      --save "$build/diff_findings"
  # Exploration from a time-based seed: its findings are printed and saved for triage, not a
  # failure (a red CI must mean a regression); the seeded ctest diff_fuzz_seeded is the gate.
  # METILE_DIFF_STRICT=1 makes findings fail the step.
  local rc=$?
  [ "${METILE_DIFF_STRICT:-0}" = 1 ] && return $rc
  [ $rc -ne 0 ] && echo "diff-fuzz: findings saved under $build/diff_findings (not fatal)"
  return 0
}

# ThreadSanitizer on the tests that run threads (metal-sim's fibers are left out: TSan does not
# follow hand-made stack switches).
tsan_build=$build-tsan
tsan_filter='CpuDevice.*:CacheProcesses.ThreadsCompilingAtOnceAgree:LastError.*'
step_tsan() (
  rm -rf "$tsan_build" &&
    cmake -S . -B "$tsan_build" "${cmake_args[@]}" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS=-O1 \
      -DCMAKE_CXX_FLAGS="-O1 -g0" -DMETILE_SANITIZE=thread >/dev/null &&
    ninja -C "$tsan_build" -j"$jobs" metile_threads_test metile_capi_test || exit 1
  export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
  rc=0
  "$tsan_build/tests/metile_threads_test" --gtest_filter="$tsan_filter" || rc=1
  "$tsan_build/tests/capi/metile_capi_test" --gtest_filter="$tsan_filter" || rc=1
  exit $rc
)

STEPS=(
  "deps          step_deps"
  "configure     step_configure     deps"
  "build         step_build         configure"
  "ctest         step_ctest         build"
  "install       step_install       build"
  "bindings-sync step_bindings_sync deps"
  "pytest        step_pytest        install"
  "pytest-metal  step_pytest_metal  install"
  "rust          step_rust          install"
  "go            step_go            install"
  "c-examples    step_c_examples    install"
  "fuzz          step_fuzz          build"
  "diff-fuzz     step_diff_fuzz     build"
  "tsan          step_tsan          deps"
  "asan-build    step_asan_build    deps"
  "asan-test     step_asan_test     asan-build"
)

declare -A result
summary=()
logs=$(mktemp -d)
failed=0
start_all=$SECONDS
for line in "${STEPS[@]}"; do
  read -r name fn needs <<<"$line"
  if [ -n "${needs:-}" ] && [ "${result[$needs]:-}" != ok ]; then
    result[$name]=skipped
    summary+=("$name: skipped ($needs did not pass)")
    continue
  fi
  echo
  echo "==> [$name]"
  t0=$SECONDS
  "$fn" 2>&1 | tee "$logs/$name.log"
  if [ "${PIPESTATUS[0]}" -eq 0 ]; then
    result[$name]=ok
  else
    result[$name]=failed
    failed=$((failed + 1))
  fi
  summary+=("$name: ${result[$name]} ($((SECONDS - t0)) s)")
done

# A CI report may keep only the end of a long log: repeat what each failed step printed last.
for line in "${STEPS[@]}"; do
  read -r name _ <<<"$line"
  [ "${result[$name]}" = failed ] || continue
  echo
  echo "==> [$name] failed; its last 80 lines:"
  tail -n 80 "$logs/$name.log"
done
rm -rf "$logs"

echo
echo "==> summary"
printf '  %s\n' "${summary[@]}"
passed=0
for name in "${!result[@]}"; do [ "${result[$name]}" = ok ] && passed=$((passed + 1)); done
skipped=$((${#STEPS[@]} - passed - failed))
echo "test.sh: $((SECONDS - start_all)) s for ${#STEPS[@]} steps"
# The closing line in the plain form CI reads: steps, not individual tests.
echo "steps: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
