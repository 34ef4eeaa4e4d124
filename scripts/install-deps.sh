#!/usr/bin/env bash
# Installs every Debian package spillway needs to build, test and benchmark.
# Idempotent; run as root (or with sudo available). Debian 12 (bookworm).
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
PKGS=(
  # toolchain
  cmake ninja-build g++ pkg-config clang libclang-rt-14-dev ccache
  # libraries
  libyaml-cpp-dev liburing-dev libxxhash-dev libzstd-dev liblz4-dev
  doctest-dev libcli11-dev nlohmann-json3-dev
  # benchmarks and reference tools
  fio zstd lz4 gnuplot-nox
  # metrics tests (promtool, node_exporter's textfile collector)
  prometheus prometheus-node-exporter
  # python module and dask integration
  python3 python3-dev python3-pybind11 python3-numpy python3-pandas python3-pytest
  python3-dask python3-distributed python3-prometheus-client python3-hypothesis
)
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${PKGS[@]}" >/dev/null
echo "install-deps: installed ${#PKGS[@]} packages"
