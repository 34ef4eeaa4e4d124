#!/usr/bin/env bash
# README command one: install dependencies, build, run the demo on the
# default tier chain (examples/tiers.yaml).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh build
./build/bin/spillway validate examples/tiers.yaml
./build/bin/spillway demo --config examples/tiers.yaml
