#!/usr/bin/env bash
# Command 2 of the README: builds everything and runs the whole test suite (CTest: unit
# tests, golden run/error tests, IR FileCheck tests, numpy checks of the samples, the JAX twins
# of the differentiable programs (tests/jax; creates a venv from PyPI once)), then the
# runtime's tests (collectives and .npy/.npz files) again under ThreadSanitizer and
# AddressSanitizer, the golden tests and the runtime's tests under UBSan, and a one-minute
# fuzz run of the front end and half a minute of the .npy/.npz loaders (tools/fuzz.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh --deps-only

BUILD=${BUILD:-build}
JOBS=$(nproc)
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
ninja -C "$BUILD" -j "$JOBS"
(cd "$BUILD" && ctest --output-on-failure -j "$JOBS")

for san in thread address; do
  echo "== runtime tests under -DSHMAPC_SANITIZE=$san"
  cmake -S . -B "$BUILD-$san" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSHMAPC_SANITIZE=$san >/dev/null
  ninja -C "$BUILD-$san" -j "$JOBS" test_runtime test_npy test_safe_write
  "$BUILD-$san/tests/test_runtime"
  "$BUILD-$san/tests/test_npy"
  "$BUILD-$san/tests/test_safe_write"
done
# UBSan aborts at the first undefined behaviour, in shmapc, the runtime or a compiled program;
# the golden tests then fail on the changed output or status.
echo "== golden and runtime tests under -DSHMAPC_SANITIZE=undefined"
cmake -S . -B "$BUILD-undefined" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSHMAPC_SANITIZE=undefined >/dev/null
ninja -C "$BUILD-undefined" -j "$JOBS" shmapc test_runtime
(cd "$BUILD-undefined" && UBSAN_OPTIONS=print_stacktrace=1:abort_on_error=1 \
  ctest --output-on-failure -j "$JOBS" -R '^(run|error|fuzz)\.|^unit\.test_runtime$')

FUZZ_BUILD="$BUILD-fuzz" FUZZ_JOBS="$JOBS" FUZZ_SEED=1 tools/fuzz.sh 60
echo "== all tests passed"
