#!/usr/bin/env bash
# A binary built outside the source tree (cmake -S . -B /elsewhere) finds the
# files it ships with: `spillway demo`'s default config examples/tiers.yaml
# (and, by the same lookup, bench/zict_peer.py) from any working directory.
# The CLI is copied to a folder with no source tree above it and run from
# another one, which is where such a build's binary stands.
#   $1: the spillway CLI   $2: the source tree (unused: the binary must know it)
set -euo pipefail
cli="$1"
work="$(mktemp -d "${SPILLWAY_TEST_DIR:-/var/tmp}/spillway-oot-XXXXXX")"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/elsewhere/bin" "$work/cwd"
cp "$cli" "$work/elsewhere/bin/spillway"
cd "$work/cwd"
SPILLWAY_DIR="$work/spill" "$work/elsewhere/bin/spillway" demo >"$work/demo.txt" 2>&1 ||
  { cat "$work/demo.txt"; echo "FAIL: demo from an out-of-tree binary"; exit 1; }
grep -q "demo OK" "$work/demo.txt" || { cat "$work/demo.txt"; echo "FAIL: demo did not verify"; exit 1; }
echo "ok: demo from $PWD with the binary in $work/elsewhere/bin"
