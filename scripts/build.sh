#!/usr/bin/env bash
# Configures and builds spillway into DIR (default: build) with Ninja.
# Extra arguments go to cmake, e.g. scripts/build.sh build-tsan -DSPILLWAY_SANITIZE=thread
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-build}"
shift || true
jobs="${SPILLWAY_JOBS:-$(nproc)}"
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
# SPILLWAY_TARGETS: build only these targets (space separated)
ninja -C "$dir" -j "$jobs" ${SPILLWAY_TARGETS:-}
