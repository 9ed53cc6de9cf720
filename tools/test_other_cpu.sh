#!/usr/bin/env bash
# Runs the CTest suite as on a machine with another x86-64 CPU: every binary the project builds
# (shmapc, the unit tests, every compiled program, under mpirun too) runs on a CPU emulated by
# QEMU's user mode, so LLVM's host detection (--target-cpu=native), oneDNN's and OpenBLAS's
# kernel choice and the start-up CPU check all see that CPU, not this one. The references the
# tests compare with (Python, numpy, JAX) and the tools around them run natively.
#   tools/test_other_cpu.sh                     EPYC-Rome: AMD Zen 2, AVX2, no AVX-512
#   tools/test_other_cpu.sh Haswell -R 'run\.'  another QEMU CPU model, then ctest's arguments
# Needs qemu-user-static (installed here if missing) and Linux >= 6.7 (binfmt_misc in a user
# namespace: the emulation applies to this script's processes only, nothing else on the machine).
# Slow (every process is translated): about an hour for the whole suite on 2 cores.
# One check fails under QEMU for a reason of the emulator, not of the CPU: ir.lit's
# driver_errors.smp (a linker that cannot be started shows as its exit status 127, since QEMU
# starts processes by fork and exec). Tests that look for a program's process find it by its
# executable or, for an emulated one, by QEMU's arguments.
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:-EPYC-Rome}
[ $# -gt 0 ] && shift
BUILD=${BUILD:-build}

tools/setup.sh --deps-only
if ! command -v qemu-x86_64-static >/dev/null; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends qemu-user-static
fi
WORK=$(mktemp -d)
restore() { cmake -S . -B "$BUILD" -DSHMAPC_TEST_TIME_SCALE=1 >/dev/null; rm -rf "$WORK"; }
trap restore EXIT
# Every process is slower under emulation: the tests' time limits are scaled for this run only.
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSHMAPC_TEST_TIME_SCALE=10 >/dev/null
ninja -C "$BUILD" -j "$(nproc)"

# QEMU warns, on every start, about each feature of the model its translator lacks: take them
# out of the model once, so that no test's stderr carries the warnings.
QEMU_CPU="$MODEL"
lacking=$(qemu-x86_64-static -cpu "$MODEL" /bin/true 2>&1 >/dev/null |
          sed -n 's/.*requested feature: .*\.\([A-Za-z0-9_-]*\) \[bit.*/\1/p' | sort -u)
for f in $lacking; do QEMU_CPU+=",-$f"; done
export QEMU_CPU

# Which binaries run emulated: binfmt_misc matches the first bytes of the file. The project's
# binaries are dynamically linked position-independent executables whose ELF header says
# OS/ABI "GNU/Linux" (they use GNU symbol kinds); QEMU itself is static (its first program
# header is not PT_PHDR), and so is never matched, which would loop.
magic='\x7fELF\x02\x01\x01\x03'; mask='\xff\xff\xff\xff\xff\xff\xff\xff'
for _ in $(seq 8 15); do magic+='\x00'; mask+='\x00'; done
magic+='\x03\x00\x3e\x00'; mask+='\xff\xff\xff\xff'           # ET_DYN, x86-64
for _ in $(seq 20 63); do magic+='\x00'; mask+='\x00'; done
magic+='\x06\x00\x00\x00'; mask+='\xff\xff\xff\xff'           # first program header PT_PHDR
# ctest is such a binary too, but QEMU's user mode cannot run how it starts processes: a copy
# whose header says OS/ABI "System V" (the kernel ignores the field) runs natively.
mkdir -p "$WORK/bin" && cp "$(command -v ctest)" "$WORK/bin/ctest"
printf '\x00' | dd of="$WORK/bin/ctest" bs=1 seek=7 conv=notrunc status=none
ln -s /usr/share "$WORK/share"   # where ctest finds its modules, relative to itself

# The proof that the emulation is in effect: a program compiled here for x86-64-v4 (AVX-512)
# must refuse to start there (the model lacks AVX-512), and the same one for x86-64-v3 runs.
printf 'def main() { print("x", exp(iota(f32[4]))); }\n' > "$WORK/probe.smp"
"$BUILD/compiler/shmapc" compile "$WORK/probe.smp" --target-cpu=x86-64-v4 -o "$WORK/probe_v4"
"$BUILD/compiler/shmapc" compile "$WORK/probe.smp" --target-cpu=x86-64-v3 -o "$WORK/probe_v3"

cat > "$WORK/inside.sh" <<EOF
set -eu
mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
echo ":shmapc-other-cpu:M::$magic:$mask:$(command -v qemu-x86_64-static):F" > /proc/sys/fs/binfmt_misc/register
if "$WORK/probe_v4" >/dev/null 2>&1; then
  echo "a program compiled for x86-64-v4 ran: the CPU is not emulated as $MODEL" >&2; exit 2
fi
"$WORK/probe_v3" >/dev/null
echo "== the CTest suite on an emulated $MODEL (QEMU_CPU=\$QEMU_CPU)"
cd "$BUILD" && exec "$WORK/bin/ctest" --output-on-failure -j "$(nproc)" "\$@"
EOF
unshare --user --map-root-user --mount --fork bash "$WORK/inside.sh" "$@"
