#!/bin/bash
# Writes every view of the compiler that a refactoring must leave unchanged (--emit=ir and
# --emit=llvm of each sample and run test that compiles, --emit=comm of each sample) into
# OUTDIR, one file per program and view, so that two compilers' outputs can be compared:
#   tools/emit-all.sh /tmp/before build/compiler/shmapc   # (on the old revision)
#   tools/emit-all.sh /tmp/after build/compiler/shmapc    # (on the new one)
#   diff -r /tmp/before /tmp/after
# A program the compiler refuses (an error test) has its diagnostics written instead.
set -u
out=${1:?usage: tools/emit-all.sh OUTDIR [SHMAPC]}
shmapc=${2:-build/compiler/shmapc}
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
for src in "$root"/samples/*.smp "$root"/tests/run/*.smp; do
  name=$(basename "$(dirname "$src")")_$(basename "$src" .smp)
  for view in ir llvm comm; do
    [ "$view" = comm ] && [ "${src#"$root"/samples/}" = "$src" ] && continue
    "$shmapc" compile "$src" --emit=$view -o "$out/$name.$view" >/dev/null 2>"$out/$name.$view.err" ||
      true
    [ -s "$out/$name.$view.err" ] || rm -f "$out/$name.$view.err"
  done
done
