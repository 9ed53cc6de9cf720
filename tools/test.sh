#!/usr/bin/env bash
# Command 2 of the README: builds everything and runs the whole test suite (CTest: unit
# tests, golden run/error tests, IR FileCheck tests, numpy checks of the samples, the JAX twins
# of the differentiable programs (tests/jax; creates a venv from PyPI once)), then the
# runtime's tests again under ThreadSanitizer and AddressSanitizer.
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
  ninja -C "$BUILD-$san" -j "$JOBS" test_runtime
  "$BUILD-$san/tests/test_runtime"
done
echo "== all tests passed"
