#!/usr/bin/env bash
# Builds the GPU tests and benchmark here, runs them on a machine with an
# NVIDIA GPU, in one go.
#
#   scripts/gpu_run.sh build    on the development machine (needs nvcc, no GPU):
#                               a statically linked build in build-gpu, the two
#                               programs copied (debug info stripped) to
#                               build-gpu/dist, the folder that travels.
#   scripts/gpu_run.sh remote   on the GPU machine, from the repository root:
#                               runs build-gpu/dist/* and writes the logs and
#                               the benchmark's markdown to $OUT (default
#                               ./gpu-out).
#
# In this workplace the second step is the device tool's `run` with
# carry ["build-gpu/dist"] and command "bash scripts/gpu_run.sh remote"; then
# bench/results/gpu-<date>.md is written from $OUT/gpu-bench.md and
# $OUT/tests.log. Elsewhere copy build-gpu/dist and this script to the GPU
# machine and run the remote step there. The build is static (libstdc++,
# cudart, yaml-cpp, liburing, zstd, lz4, xxhash) because the GPU machine may
# lack those libraries; only glibc and the NVIDIA driver are needed there.
set -uo pipefail
cd "$(dirname "$0")/.."
mode="${1:-}"
dist=build-gpu/dist

case "$mode" in
build)
  set -e
  cmake -S . -B build-gpu -G Ninja -DSPILLWAY_STATIC_DEPS=ON -DSPILLWAY_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DSPILLWAY_BUILD_PYTHON=OFF \
    -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  ninja -C build-gpu -j "${SPILLWAY_JOBS:-$(nproc)}" spillway_test_gpu gpu_bench
  rm -rf "$dist"
  mkdir -p "$dist"
  strip --strip-debug -o "$dist/spillway_test_gpu" build-gpu/tests/spillway_test_gpu
  strip --strip-debug -o "$dist/gpu_bench" build-gpu/bench/gpu/gpu_bench
  echo "== shared libraries the programs need (expect only glibc's):"
  ldd "$dist/spillway_test_gpu" || true
  du -sh "$dist"
  ;;
remote)
  out="${OUT:-$PWD/gpu-out}"
  mkdir -p "$out"
  export SPILLWAY_TEST_DIR="${SPILLWAY_TEST_DIR:-/var/tmp}"
  {
    echo "== $(date -u +%FT%TZ) $(uname -r)"
    nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,pcie.link.gen.current,pcie.link.width.current \
      --format=csv 2>&1
    nproc
    free -g | head -2
  } >"$out/machine.txt" 2>&1
  cat "$out/machine.txt"
  rc=0
  echo "== GPU tests"
  timeout 200 "$dist/spillway_test_gpu" --duration=true 2>&1 | tee "$out/tests.log"
  trc=${PIPESTATUS[0]}
  echo "== spillway_test_gpu exit code $trc" | tee -a "$out/tests.log"
  [ "$trc" -ne 0 ] && rc=1
  if command -v compute-sanitizer >/dev/null && [ "${SPILLWAY_SANITIZE:-1}" = 1 ]; then
    echo "== compute-sanitizer memcheck: gather kernel"
    timeout 90 compute-sanitizer --tool memcheck --print-limit 20 "$dist/spillway_test_gpu" \
      -tc="cuda: the gather kernel*" 2>&1 | tail -25 | tee "$out/sanitizer.log"
  fi
  echo "== gpu_bench"
  timeout 240 "$dist/gpu_bench" --out "$out/gpu-bench.md" 2>&1 | tee "$out/bench.log"
  brc=${PIPESTATUS[0]}
  echo "== gpu_bench exit code $brc"
  [ "$brc" -ne 0 ] && rc=1
  exit $rc
  ;;
*)
  echo "usage: scripts/gpu_run.sh build|remote" >&2
  exit 2
  ;;
esac
