#!/usr/bin/env bash
# Fuzzes the front end (everything `shmapc check` runs) with libFuzzer, ASan and UBSan.
#   tools/fuzz.sh SECONDS     (0: only build the target and run the regressions)
# Builds tests/fuzz/fuzz_check.cpp with clang-19 in build-fuzz/ (-DSHMAPC_FUZZ=ON) if needed,
# runs tests/fuzz/regressions/ through it, then fuzzes for SECONDS from the corpus in
# build-fuzz/corpus (kept between runs) plus seeds copied from samples/, tests/ and stdlib/.
# On a crash, hang or out-of-memory the input is copied to tests/fuzz/regressions/ and the
# status is 1. Environment: FUZZ_BUILD (folder), FUZZ_SEED (libFuzzer -seed; fixed = a
# repeatable run), FUZZ_JOBS (ninja -j, default 2).
set -euo pipefail
cd "$(dirname "$0")/.."
TIME=${1:?usage: tools/fuzz.sh SECONDS}
BUILD=${FUZZ_BUILD:-build-fuzz}
FUZZER=$BUILD/tests/fuzz/shmapc_fuzz
REGRESSIONS=tests/fuzz/regressions
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}  # the frames of a UBSan report

if [ ! -f "$BUILD/build.ninja" ]; then
  CC=clang-19 CXX=clang++-19 cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DSHMAPC_FUZZ=ON >/dev/null
fi
ninja -C "$BUILD" -j "${FUZZ_JOBS:-2}" shmapc_fuzz

# The known crashes first (each input run once).
shopt -s nullglob
regressions=("$REGRESSIONS"/*.smp)
if [ ${#regressions[@]} -gt 0 ]; then
  echo "== fuzz regressions (${#regressions[@]})"
  "$FUZZER" -timeout=10 -rss_limit_mb=4096 "${regressions[@]}" >"$BUILD/regressions.log" 2>&1 ||
    { tail -n 40 "$BUILD/regressions.log"; echo "fuzz: a regression fails (log: $BUILD/regressions.log)"; exit 1; }
fi

[ "$TIME" = 0 ] && exit 0

# Seeds: every program of the repository.
rm -rf "$BUILD/seeds" "$BUILD/artifacts"
mkdir -p "$BUILD/seeds" "$BUILD/corpus" "$BUILD/artifacts"
while IFS= read -r f; do cp "$f" "$BUILD/seeds/${f//\//_}"; done < <(
  find samples tests stdlib -type f -name '*.smp' -not -path '*/Output/*')

echo "== fuzzing the front end for ${TIME}s (log: $BUILD/fuzz.log)"
status=0
"$FUZZER" -dict=tests/fuzz/shmap.dict -timeout=10 -rss_limit_mb=4096 -max_total_time="$TIME" \
  -seed="${FUZZ_SEED:-0}" -artifact_prefix="$BUILD/artifacts/" -print_final_stats=1 \
  "$BUILD/corpus" "$BUILD/seeds" >"$BUILD/fuzz.log" 2>&1 || status=$?
grep -E '^(stat::number_of_executed_units|stat::new_units_added|Done )' "$BUILD/fuzz.log" || true

found=("$BUILD"/artifacts/*)
if [ "$status" -ne 0 ] || [ ${#found[@]} -gt 0 ]; then
  # The first report and its stack.
  grep -E -m1 -A 30 'runtime error|==[0-9]+==.*ERROR|fuzz_check:|ALARM|out-of-memory|deadly signal' \
    "$BUILD/fuzz.log" || tail -n 30 "$BUILD/fuzz.log"
  mkdir -p "$REGRESSIONS"
  for a in "${found[@]}"; do
    cp "$a" "$REGRESSIONS/$(basename "$a").smp"
    echo "fuzz: saved $REGRESSIONS/$(basename "$a").smp"
  done
  echo "fuzz: failed (status $status; full log: $BUILD/fuzz.log)"
  exit 1
fi
echo "== fuzzing found nothing"
