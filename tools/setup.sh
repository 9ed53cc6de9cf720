#!/usr/bin/env bash
# Command 1 of the README: installs what shmapc needs from Debian's packages, builds it, and
# compiles and runs a sample. Run as root on Debian 12 (or with sudo available).
#   tools/setup.sh             install, build, run samples/collective_matmul.smp
#   tools/setup.sh --deps-only install only
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES="cmake ninja-build g++ python3 python3-numpy python3-venv llvm-19-dev libzstd-dev libcli11-dev catch2 libopenblas-dev libeigen3-dev clang-19 libclang-rt-19-dev zlib1g-dev libdnnl-dev libjemalloc-dev openmpi-bin libopenmpi-dev"

missing=""
for p in $PACKAGES; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  echo "== installing:$missing"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends $missing
fi
[ "${1:-}" = "--deps-only" ] && exit 0

BUILD=${BUILD:-build}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
ninja -C "$BUILD" shmapc
echo "== compiling and running samples/collective_matmul.smp"
"$BUILD/compiler/shmapc" compile samples/collective_matmul.smp -o "$BUILD/collective_matmul"
"$BUILD/collective_matmul" --stats
