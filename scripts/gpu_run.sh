#!/usr/bin/env bash
# Builds the GPU tests and benchmark here, runs them on a machine with an
# NVIDIA GPU, in one go; and there builds the Python module for the GPU
# machine's own Python and runs the Python GPU tests and the Dask benchmark.
#
#   scripts/gpu_run.sh build    on the development machine (needs nvcc, no GPU):
#                               a statically linked build in build-gpu, the two
#                               programs copied (debug info stripped) to
#                               build-gpu/dist, the folder that travels.
#                               Run scripts/fetch_gpu_pydeps.sh too (pydeps/).
#   scripts/gpu_run.sh remote   on the GPU machine, from the repository root:
#                               runs build-gpu/dist/* and writes the logs and
#                               the benchmark's markdown to $OUT (default
#                               ./gpu-out); then, when pydeps/ is there, the
#                               Python part below.
#   scripts/gpu_run.sh remote-python
#                               only the Python part, on the GPU machine:
#                               1. dask, distributed and zict from pydeps/site
#                                  import, and a LocalCluster sums a CuPy array;
#                               2. the module is built for that machine's
#                                  python3 (its cmake, g++, pybind11, CUDA;
#                                  liburing, xxHash, CLI11 and nlohmann from
#                                  pydeps/native) in build-py;
#                               3. tests/python/test_gpu.py runs (pytest);
#                               4. bench/dask_gpu_bench.py writes
#                                  $OUT/dask-gpu.md.
#                               Each step logs to $OUT/py-*.log; a failed step
#                               does not stop the later ones (the bench skips
#                               SpillwayStore by itself when the module is not
#                               there).
#
# In this workplace the C++ step is the device tool's `run` with
# carry ["build-gpu/dist", "pydeps"] and command "bash scripts/gpu_run.sh remote";
# then bench/results/gpu-<date>.md is written from $OUT/gpu-bench.md and
# $OUT/tests.log, and bench/results/dask-gpu-<date>.md from $OUT/dask-gpu.md.
# Elsewhere copy those folders and the checkout to the GPU machine and run the
# remote step there. The C++ build is static (libstdc++, cudart, yaml-cpp,
# liburing, zstd, lz4, xxhash) because the GPU machine may lack those
# libraries; only glibc and the NVIDIA driver are needed there. The Python
# module cannot be carried (it must match the GPU machine's Python), so it is
# built there, in about a minute.
#
# Time: the C++ part takes up to about 9 minutes (its timeouts), the Python
# part an estimated 5 at the default benchmark size (not yet run at that
# size), so with a 10-minute limit per
# command run them as two calls: `GPU_RUN_PYTHON=0 ... remote`, then
# `remote-python`.
#
# Settings for the Python part (environment): PYTHON (python3), PYDEPS
# (<repo>/pydeps), SPILLWAY_SRC (the source tree to build, <repo>),
# SPILLWAY_PY_BUILD=0 (skip the module build), GPU_RUN_PYTHON=0 (`remote`
# without the Python part), GPU_BENCH_ARGS (default
# "--budget 8GiB --scale 3"), GPU_TEST_TIMEOUT / GPU_BENCH_TIMEOUT (seconds),
# GPU_RUN_DASK_BENCH=0 (no Dask benchmark), GPU_DASK_CHECK=0 (no LocalCluster check). C++ part: GPU_STRESS_ARGS (stress
# --device options, default "--threads 8 --keys 400 --ops 40000"),
# GPU_CPP_BENCH_ARGS (gpu_bench options, e.g. --engine-only), GPU_DEMO=0 (no
# demo run; GPU_DEMO_ARGS its options), GPU_TESTS=0
# (skip spillway_test_gpu), SPILLWAY_SANITIZE=0.
set -uo pipefail
cd "$(dirname "$0")/.."
mode="${1:-}"
dist=build-gpu/dist

# ---- the Python part (on the GPU machine) -----------------------------------
remote_python() {
  local out="${OUT:-$PWD/gpu-out}" py="${PYTHON:-python3}" repo="$PWD"
  local pydeps src build="$PWD/build-py" prc=0 rc
  pydeps="$(realpath "${PYDEPS:-pydeps}")"
  src="$(realpath "${SPILLWAY_SRC:-.}")"
  mkdir -p "$out"
  export PYTHONPATH="$pydeps/site:$build/python${PYTHONPATH:+:$PYTHONPATH}"
  export SPILLWAY_TEST_DIR="${SPILLWAY_TEST_DIR:-/var/tmp}"

  if [ "${GPU_DASK_CHECK:-1}" != 0 ]; then
    echo "== Python: imports and a LocalCluster CuPy sum"
    timeout 120 "$py" scripts/gpu_dask_check.py 2>&1 | tee "$out/py-dask.log"
    rc=${PIPESTATUS[0]}
    echo "== dask check exit code $rc" | tee -a "$out/py-dask.log"
    [ "$rc" -ne 0 ] && prc=1
  fi

  if [ "${SPILLWAY_PY_BUILD:-1}" != 0 ]; then
    echo "== Python: building the module for $("$py" -V 2>&1) in $build"
    local gen=()
    command -v ninja >/dev/null && gen=(-G Ninja)
    {
      cmake -S "$src" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DSPILLWAY_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DSPILLWAY_BUILD_TESTS=OFF \
        -DPython3_EXECUTABLE="$(command -v "$py")" -DCMAKE_PREFIX_PATH="$pydeps/native" &&
      cmake --build "$build" -j "$(nproc)" --target spillway_python &&
      (cd /tmp && "$py" -c "import spillway, sys; print('import spillway OK:', spillway.__file__)")
    } >"$out/py-build.log" 2>&1
    rc=$?
    tail -15 "$out/py-build.log"
    echo "== module build exit code $rc" | tee -a "$out/py-build.log"
    [ "$rc" -ne 0 ] && prc=1
  fi

  echo "== Python GPU tests"
  if ! (cd /tmp && "$py" -c "import spillway" >/dev/null 2>&1); then
    echo "== test_gpu.py NOT RUN: the spillway module does not import here (see py-build.log)" |
      tee "$out/py-tests.log"
    prc=1
  else
    (cd "$repo" && timeout "${GPU_TEST_TIMEOUT:-200}" "$py" -m pytest -v -rs -p no:cacheprovider \
      tests/python/test_gpu.py) 2>&1 | tee "$out/py-tests.log"
    rc=${PIPESTATUS[0]}
    echo "== test_gpu.py exit code $rc" | tee -a "$out/py-tests.log"
    [ "$rc" -ne 0 ] && prc=1
  fi

  if [ "${GPU_RUN_DASK_BENCH:-1}" = 0 ]; then
    echo "== Dask GPU benchmark skipped (GPU_RUN_DASK_BENCH=0)"
    return $prc
  fi
  echo "== Dask GPU benchmark"
  # shellcheck disable=SC2086  # GPU_BENCH_ARGS is a list of options
  timeout "${GPU_BENCH_TIMEOUT:-400}" "$py" bench/dask_gpu_bench.py ${GPU_BENCH_ARGS:---budget 8GiB --scale 3} \
    --out "$out/dask-gpu.md" 2>&1 | tee "$out/py-bench.log"
  rc=${PIPESTATUS[0]}
  echo "== dask_gpu_bench exit code $rc" | tee -a "$out/py-bench.log"
  [ "$rc" -ne 0 ] && prc=1
  return $prc
}

case "$mode" in
build)
  set -e
  cmake -S . -B build-gpu -G Ninja -DSPILLWAY_STATIC_DEPS=ON -DSPILLWAY_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DSPILLWAY_BUILD_PYTHON=OFF \
    -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  ninja -C build-gpu -j "${SPILLWAY_JOBS:-$(nproc)}" spillway_test_gpu gpu_bench spillway_cli
  rm -rf "$dist"
  mkdir -p "$dist"
  strip --strip-debug -o "$dist/spillway_test_gpu" build-gpu/tests/spillway_test_gpu
  strip --strip-debug -o "$dist/gpu_bench" build-gpu/bench/gpu/gpu_bench
  strip --strip-debug -o "$dist/spillway" build-gpu/bin/spillway
  echo "== shared libraries the programs need (expect only glibc's):"
  ldd "$dist/spillway_test_gpu" || true
  du -sh "$dist"
  ;;
remote-python)
  remote_python
  exit $?
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
  # The CLI travels too: the GPU tests run `spillway validate` and `info` on
  # this machine's devices.
  export SPILLWAY_CLI_BIN="$PWD/$dist/spillway"
  echo "== spillway info / validate of a required gpu tier"
  "$dist/spillway" info 2>&1 | head -20 | tee "$out/info.log"
  if [ "${GPU_TESTS:-1}" = 0 ]; then
    echo "== spillway_test_gpu skipped (GPU_TESTS=0)" | tee "$out/tests.log"
    trc=0
  else
    timeout 200 "$dist/spillway_test_gpu" --duration=true 2>&1 | tee "$out/tests.log"
    trc=${PIPESTATUS[0]}
  fi
  echo "== spillway_test_gpu exit code $trc" | tee -a "$out/tests.log"
  [ "$trc" -ne 0 ] && rc=1
  if command -v compute-sanitizer >/dev/null && [ "${SPILLWAY_SANITIZE:-1}" = 1 ]; then
    echo "== compute-sanitizer memcheck: gather kernel"
    timeout 90 compute-sanitizer --tool memcheck --print-limit 20 "$dist/spillway_test_gpu" \
      -tc="cuda: the gather kernel*" 2>&1 | tail -25 | tee "$out/sanitizer.log"
  fi
  echo "== spillway stress --device (device objects, every byte verified on copy-back)"
  sdir="${SPILLWAY_TEST_DIR}/spillway-stress-device-$$"
  mkdir -p "$sdir"
  cat >"$sdir/tiers.yaml" <<YAML
version: 1
tiers:
  - {name: gpu0, kind: gpu, device: 0, capacity: 128MiB}
  - {name: host, kind: host, capacity: 192MiB}
  - {name: disk, kind: file, capacity: 8GiB, paths: ["$sdir/disk"]}
YAML
  # shellcheck disable=SC2086  # GPU_STRESS_ARGS is a list of options
  timeout 240 "$dist/spillway" stress --device -c "$sdir/tiers.yaml" ${GPU_STRESS_ARGS:---threads 8 --keys 400 --ops 40000} \
    2>&1 | tee "$out/stress-device.log"
  strc=${PIPESTATUS[0]}
  echo "== stress --device exit code $strc" | tee -a "$out/stress-device.log"
  [ "$strc" -ne 0 ] && rc=1
  rm -rf "$sdir"
  if [ "${GPU_DEMO:-1}" != 0 ]; then
    # Issue 13: the demo's read-back rate against its write rate through a
    # gpu -> pinned host -> file chain on this machine's disk.
    echo "== spillway demo on a gpu -> host -> file chain"
    ddir="${SPILLWAY_TEST_DIR}/spillway-demo-gpu-$$"
    mkdir -p "$ddir"
    cat >"$ddir/tiers.yaml" <<YAML
version: 1
tiers:
  - {name: gpu0, kind: gpu, device: 0, capacity: 2GiB}
  - {name: host, kind: host, capacity: 2GiB, pin_at_open: 100%}
  - {name: disk, kind: file, capacity: 40GiB, paths: ["$ddir/disk"]}
YAML
    # shellcheck disable=SC2086  # GPU_DEMO_ARGS is a list of options
    timeout 180 "$dist/spillway" demo -c "$ddir/tiers.yaml" ${GPU_DEMO_ARGS:---multiple 8 --object-bytes 8MiB} \
      2>&1 | tee "$out/demo.log"
    drc=${PIPESTATUS[0]}
    echo "== demo exit code $drc" | tee -a "$out/demo.log"
    [ "$drc" -ne 0 ] && rc=1
    rm -rf "$ddir"
  fi
  echo "== gpu_bench"
  # shellcheck disable=SC2086  # GPU_CPP_BENCH_ARGS is a list of options
  timeout 240 "$dist/gpu_bench" ${GPU_CPP_BENCH_ARGS:-} --out "$out/gpu-bench.md" 2>&1 | tee "$out/bench.log"
  brc=${PIPESTATUS[0]}
  echo "== gpu_bench exit code $brc"
  [ "$brc" -ne 0 ] && rc=1
  if [ "${GPU_RUN_PYTHON:-1}" = 0 ]; then
    echo "== Python part skipped (GPU_RUN_PYTHON=0)"
  elif [ -d "${PYDEPS:-pydeps}/site" ]; then
    remote_python || rc=1
  else
    echo "== Python part skipped: no ${PYDEPS:-pydeps}/site (run scripts/fetch_gpu_pydeps.sh here first)"
  fi
  exit $rc
  ;;
*)
  echo "usage: scripts/gpu_run.sh build|remote|remote-python" >&2
  exit 2
  ;;
esac
