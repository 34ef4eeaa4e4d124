#!/usr/bin/env bash
# README command two: the whole test suite.
#   1. build and run every CTest test (unit, engine, reliability, CLI, stress seeds)
#   2. the same suite under AddressSanitizer + UndefinedBehaviorSanitizer, built
#      -O1 -g1 to keep CI short (without the benchmark smoke test, the Python
#      tests, which load an unsanitized interpreter, and the install test,
#      whose outside project does not link the sanitizer runtimes)
#   3. the concurrency tests under ThreadSanitizer (built -O1 -g1 too)
#   4. each libFuzzer target for about $SPILLWAY_FUZZ_SECONDS (default 20) seconds of one core, side by side
# Set SPILLWAY_QUICK=1 to run only stage 1.
set -euo pipefail
cd "$(dirname "$0")/.."
export SPILLWAY_TEST_DIR="${SPILLWAY_TEST_DIR:-/var/tmp}"
# Each stage's wall time, so a slow CI run shows where the time went.
stage_start=$SECONDS
stage_done() { echo "== $1 took $((SECONDS - stage_start)) s (total $SECONDS s)"; stage_start=$SECONDS; }
# Twice as many tests as cores: many of them wait on fsync and child
# processes, and at one per core the CPUs sat half idle (measured: 141 CPU
# seconds in 145 s of wall time on 2 cores; at -j 4, 113 s of wall time).
ctest_jobs="${SPILLWAY_CTEST_JOBS:-$((2 * $(nproc)))}"

echo "== stage 1: build and run the test suite"
bash scripts/build.sh build
ctest --test-dir build --output-on-failure -j "$ctest_jobs" --timeout 900
stage_done "stage 1"
[ "${SPILLWAY_QUICK:-0}" = 1 ] && exit 0

echo "== stage 2: the suite under AddressSanitizer + UndefinedBehaviorSanitizer"
bash scripts/build.sh build-asan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" \
  -DSPILLWAY_SANITIZE=address,undefined -DSPILLWAY_CUDA=OFF -DSPILLWAY_BUILD_PYTHON=OFF
ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1" \
UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
  ctest --test-dir build-asan --output-on-failure -j "$ctest_jobs" --timeout 900 -E "^(bench/bench_quick_test|python/|install/)"
stage_done "stage 2"

echo "== stage 3: concurrency tests under ThreadSanitizer"
SPILLWAY_TARGETS="spillway_cli spillway_test_engine spillway_test_tiers spillway_test_codecs spillway_test_base" \
  bash scripts/build.sh build-tsan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" \
  -DSPILLWAY_SANITIZE=thread -DSPILLWAY_CUDA=OFF -DSPILLWAY_BUILD_PYTHON=OFF
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
ctest --test-dir build-tsan --output-on-failure -R "^(engine|tiers|codecs|base)/.*(concurren|thread|[Pp]arallel|ThreadPool|TaskGroup)" --timeout 900
# the stress tool under TSan: 4 threads racing on a spilling chain
tsan_dir="$(mktemp -d /var/tmp/spillway-tsan-XXXXXX)"
cat > "$tsan_dir/chain.yaml" <<YAML
version: 1
tiers:
  - {name: host, kind: host, capacity: 4MiB}
  - {name: disk, kind: file, capacity: 1GiB, medium: ssd, codec: lz4, paths: ["$tsan_dir/disk"], io: {segment_size: 8MiB}}
YAML
build-tsan/bin/spillway stress --config "$tsan_dir/chain.yaml" --threads 4 --ops 20000 --keys 1000 --sizes 64:65536 --seed 7
rm -rf "$tsan_dir"
stage_done "stage 3"

echo "== stage 4: fuzzers"
SPILLWAY_TARGETS="config_loader_fuzz record_decode_fuzz cli_options_fuzz" CC=clang CXX=clang++ bash scripts/build.sh build-fuzz -DSPILLWAY_BUILD_FUZZERS=ON -DSPILLWAY_CUDA=OFF \
  -DSPILLWAY_BUILD_PYTHON=OFF -DSPILLWAY_BUILD_TESTS=ON
secs="${SPILLWAY_FUZZ_SECONDS:-20}"
# The fuzzers run side by side, each into its own log. With more fuzzers than
# cores each runs longer, so that it still gets about $secs s of one core and
# the stage takes no longer than packing them onto the cores would (3 x 20 s
# on 2 cores: 30 s).
fuzzers=(build-fuzz/tests/*_fuzz)
cores="$(nproc)"
wall=$(( (secs * ${#fuzzers[@]} + cores - 1) / cores ))
[ "$wall" -ge "$secs" ] || wall="$secs"
fuzz_logs="$(mktemp -d)"
pids=()
for fuzzer in "${fuzzers[@]}"; do
  name="$(basename "$fuzzer" _fuzz)"
  corpus="tests/fuzz/corpus/${name%%_*}"
  work="$fuzz_logs/$name.corpus"
  mkdir -p "$work"
  [ -d "$corpus" ] && cp -r "$corpus"/. "$work"/
  echo "-- fuzzing $name for ${wall}s"
  "$fuzzer" -max_total_time="$wall" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 "$work" \
    > "$fuzz_logs/$name.log" 2>&1 &
  pids+=("$!:$name")
done
fuzz_failed=0
for entry in "${pids[@]}"; do
  pid="${entry%%:*}" name="${entry#*:}"
  rc=0; wait "$pid" || rc=$?
  echo "-- $name (exit $rc)"; tail -n "$([ "$rc" = 0 ] && echo 12 || echo 80)" "$fuzz_logs/$name.log"
  [ "$rc" = 0 ] || fuzz_failed=1
done
rm -rf "$fuzz_logs"
[ "$fuzz_failed" = 0 ] || { echo "a fuzzer failed (its output is above)"; exit 1; }
stage_done "stage 4"
echo "all test stages passed"
