#!/usr/bin/env bash
# Fuzzes the front end (everything `shmapc check` runs) with libFuzzer, ASan and UBSan, then
# the runtime's .npy / .npz loaders.
#   tools/fuzz.sh SECONDS [--run]   (0: only build the targets and run the regressions)
# Builds tests/fuzz/fuzz_check.cpp with clang-19 in build-fuzz/ (-DSHMAPC_FUZZ=ON) if needed,
# runs tests/fuzz/regressions/ through it, then fuzzes for SECONDS from the corpus in
# build-fuzz/corpus (kept between runs) plus seeds copied from samples/, tests/ and stdlib/.
# Then tests/fuzz/fuzz_load.cpp likewise: tests/fuzz/load_regressions/, then SECONDS / 2 from
# build-fuzz/load_corpus plus the files tests/fuzz/make_load_seeds.py writes.
# On a crash, hang or out-of-memory the input is copied to tests/fuzz/regressions/ (or
# load_regressions/) and the status is 1. The front end's mutations are token-level half the
# time (tests/fuzz/grammar_mutator.cpp).
# --run adds the run mode (not part of CI's run: it compiles and runs programs, too slow for its
# budget): tests/fuzz/run_fuzz.py mutates the run programs, compiles the ones `shmapc check`
# accepts, runs them on threads and under mpirun for SECONDS and compares the outputs, with
# the normal build's compiler (FUZZ_SHMAPC, default build/compiler/shmapc, built beforehand);
# its finds go to $BUILD/run_finds/ (the program and a note of what differed), status 1.
# Environment: FUZZ_BUILD (folder), FUZZ_SEED (libFuzzer -seed, and run_fuzz.py's --seed;
# fixed = a repeatable run), FUZZ_JOBS (ninja -j, default 2).
set -euo pipefail
cd "$(dirname "$0")/.."
TIME=${1:?usage: tools/fuzz.sh SECONDS [--run]}
RUN_MODE=0
case "${2:-}" in
  "") ;;
  --run) RUN_MODE=1 ;;
  *) echo "usage: tools/fuzz.sh SECONDS [--run]" >&2; exit 2 ;;
esac
RUN_SHMAPC=${FUZZ_SHMAPC:-build/compiler/shmapc}
if [ "$RUN_MODE" = 1 ] && [ ! -x "$RUN_SHMAPC" ]; then
  echo "fuzz: --run needs a built compiler at $RUN_SHMAPC (build the normal build first, or set FUZZ_SHMAPC)" >&2
  exit 2
fi
BUILD=${FUZZ_BUILD:-build-fuzz}
FUZZER=$BUILD/tests/fuzz/shmapc_fuzz
REGRESSIONS=tests/fuzz/regressions
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}  # the frames of a UBSan report

if [ ! -f "$BUILD/build.ninja" ]; then
  CC=clang-19 CXX=clang++-19 cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DSHMAPC_FUZZ=ON >/dev/null
fi
ninja -C "$BUILD" -j "${FUZZ_JOBS:-2}" shmapc_fuzz shmap_load_fuzz
LOAD_FUZZER=$BUILD/tests/fuzz/shmap_load_fuzz
LOAD_REGRESSIONS=tests/fuzz/load_regressions

# The known crashes first (each input run once).
shopt -s nullglob
regressions=("$REGRESSIONS"/*.smp)
if [ ${#regressions[@]} -gt 0 ]; then
  echo "== fuzz regressions (${#regressions[@]})"
  "$FUZZER" -timeout=10 -rss_limit_mb=4096 "${regressions[@]}" >"$BUILD/regressions.log" 2>&1 ||
    { tail -n 40 "$BUILD/regressions.log"; echo "fuzz: a regression fails (log: $BUILD/regressions.log)"; exit 1; }
fi

loads=("$LOAD_REGRESSIONS"/*)
if [ ${#loads[@]} -gt 0 ]; then
  echo "== loader fuzz regressions (${#loads[@]})"
  "$LOAD_FUZZER" -timeout=10 -rss_limit_mb=2048 "${loads[@]}" >"$BUILD/load_regressions.log" 2>&1 ||
    { tail -n 40 "$BUILD/load_regressions.log"; echo "fuzz: a loader regression fails (log: $BUILD/load_regressions.log)"; exit 1; }
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
echo "== fuzzing the front end found nothing"

# The loaders: seeds are valid files of every kind numpy writes, behind their load requests.
rm -rf "$BUILD/load_seeds" "$BUILD/load_artifacts"
mkdir -p "$BUILD/load_corpus" "$BUILD/load_artifacts"
/usr/bin/python3 tests/fuzz/make_load_seeds.py "$BUILD/load_seeds" >/dev/null
LOAD_TIME=$(( (TIME + 1) / 2 ))
echo "== fuzzing the .npy / .npz loaders for ${LOAD_TIME}s (log: $BUILD/load_fuzz.log)"
status=0
# (-close_fd_mask=2: the refused files' runtime errors are the expected outcome, not noise to keep)
"$LOAD_FUZZER" -timeout=10 -rss_limit_mb=2048 -max_total_time="$LOAD_TIME" -seed="${FUZZ_SEED:-0}" \
  -close_fd_mask=2 -artifact_prefix="$BUILD/load_artifacts/" -print_final_stats=1 \
  "$BUILD/load_corpus" "$BUILD/load_seeds" >"$BUILD/load_fuzz.log" 2>&1 || status=$?
grep -E '^(stat::number_of_executed_units|stat::new_units_added|Done )' "$BUILD/load_fuzz.log" || true
found=("$BUILD"/load_artifacts/*)
if [ "$status" -ne 0 ] || [ ${#found[@]} -gt 0 ]; then
  tail -n 30 "$BUILD/load_fuzz.log"
  mkdir -p "$LOAD_REGRESSIONS"
  for a in "${found[@]}"; do
    cp "$a" "$LOAD_REGRESSIONS/$(basename "$a")"
    echo "fuzz: saved $LOAD_REGRESSIONS/$(basename "$a")"
  done
  echo "fuzz: the loaders failed (status $status; rerun the input with $LOAD_FUZZER FILE without -close_fd_mask)"
  exit 1
fi
echo "== fuzzing the loaders found nothing"

[ "$RUN_MODE" = 1 ] || exit 0
# The run mode: mutated programs compiled and run, threads against mpirun.
rm -rf "$BUILD/run_finds"
echo "== running mutated programs for ${TIME}s (log: $BUILD/run_fuzz.log)"
status=0
/usr/bin/python3 tests/fuzz/run_fuzz.py --shmapc "$RUN_SHMAPC" --seconds "$TIME" --seed "${FUZZ_SEED:-0}" \
  --keep "$BUILD/run_finds" >"$BUILD/run_fuzz.log" 2>&1 || status=$?
tail -n 1 "$BUILD/run_fuzz.log"
if [ "$status" -ne 0 ]; then
  grep -A 3 '^FIND' "$BUILD/run_fuzz.log" || tail -n 30 "$BUILD/run_fuzz.log"
  echo "fuzz: the run mode found something (status $status; the programs and notes: $BUILD/run_finds/)"
  exit 1
fi
echo "== running mutated programs found nothing"
