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
    "$asan_build/$t" || { echo "FAILED under sanitizers: $t"; rc=1; }
  done
  exit $rc
)

STEPS=(
  "deps        step_deps"
  "configure   step_configure   deps"
  "build       step_build       configure"
  "ctest       step_ctest       build"
  "asan-build  step_asan_build  deps"
  "asan-test   step_asan_test   asan-build"
)

declare -A result
summary=()
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
  if "$fn"; then
    result[$name]=ok
  else
    result[$name]=failed
    failed=$((failed + 1))
  fi
  summary+=("$name: ${result[$name]} ($((SECONDS - t0)) s)")
done

echo
echo "==> summary"
printf '  %s\n' "${summary[@]}"
if [ "$failed" -eq 0 ]; then
  echo "test.sh: PASS (${#STEPS[@]} steps in $((SECONDS - start_all)) s)"
else
  echo "test.sh: FAIL ($failed of ${#STEPS[@]} steps failed, $((SECONDS - start_all)) s)"
  exit 1
fi
