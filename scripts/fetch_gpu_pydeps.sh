#!/usr/bin/env bash
# Builds the folder that travels to the GPU machine with what its image lacks
# for the Python module and Dask (default: <repo>/pydeps, git-ignored):
#
#   pydeps/site     Debian 13 (trixie) pure-Python dask, distributed, zict and
#                   the pure-Python needs the GPU image does not have (partd,
#                   locket, tblib, tornado). Put it first on PYTHONPATH there.
#   pydeps/native   headers and static libraries the module's CMake build needs
#                   and the GPU image lacks (liburing, xxHash, CLI11,
#                   nlohmann-json), copied from this machine: pass
#                   -DCMAKE_PREFIX_PATH=<pydeps>/native to cmake there.
#   pydeps/MANIFEST what went in, with versions.
#
#   scripts/fetch_gpu_pydeps.sh [DEST]
#
# Why trixie: the GPU image has Python 3.12 and numpy 2.x; Debian 12's dask
# (2022.12) does not import with that numpy, trixie's 2024.12 does. Its
# packages are architecture "all" (pure Python), so they load on any Python 3.
# The compiled needs of distributed (psutil, pyyaml, msgpack) and dask's
# (toolz, cloudpickle, fsspec, click, packaging, jinja2, ...) are NOT taken
# from trixie: its .so files are built for Python 3.13 and would not load on
# 3.12, and the GPU image already has those packages (KINDS.md's list; the GPU
# run prints their versions). tornado is architecture "any" in trixie only for
# an optional C speedup (websocket masking); the .so is dropped and tornado
# falls back to its pure-Python code.
#
# apt runs with its own sources list, lists and cache (under $APT_DIR, default
# /var/tmp/spillway-trixie-apt), so this machine's apt state is untouched and
# no root is needed. Needs apt-get, dpkg-deb and debian-archive-keyring (with
# the trixie keys: bookworm's 2023.3+deb12u1 or later).
set -euo pipefail
cd "$(dirname "$0")/.."
dest="$(realpath -m "${1:-pydeps}")"
apt_dir="${APT_DIR:-/var/tmp/spillway-trixie-apt}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg

# What the GPU image lacks (checked against KINDS.md's package list and by
# the GPU run's import check); dask and distributed pin each other's version.
PKGS=(python3-dask python3-distributed python3-zict python3-partd python3-locket
      python3-tblib python3-tornado)
# EXTRA_PKGS: more trixie packages, e.g. "python3-importlib-metadata python3-zipp"
# for a dry run on Debian 12's Python 3.11 (never needed on the GPU machine).
# shellcheck disable=SC2206
PKGS+=(${EXTRA_PKGS:-})

mkdir -p "$apt_dir"/{lists/partial,cache/archives/partial,debs}
echo "deb [signed-by=$keyring] $mirror trixie main" >"$apt_dir/sources.list"
APT=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
     -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache"
     -o APT::Architecture=amd64 -o Debug::NoLocking=1)
# as root apt would drop to _apt for downloads, which cannot write to $apt_dir
[ "$(id -u)" = 0 ] && APT+=(-o APT::Sandbox::User=root)
apt-get "${APT[@]}" update -qq
rm -f "$apt_dir"/debs/*.deb
(cd "$apt_dir/debs" && apt-get "${APT[@]}" download "${PKGS[@]}")

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
rm -rf "$dest/site" "$dest/native"
mkdir -p "$dest/site" "$dest/native/include" "$dest/native/lib"
{
  echo "# pydeps, made by scripts/fetch_gpu_pydeps.sh on $(date -u +%FT%TZ)"
  echo "# site/: Debian trixie packages (dpkg -x, dist-packages only)"
} >"$dest/MANIFEST"
for deb in "$apt_dir"/debs/*.deb; do
  dpkg-deb -x "$deb" "$stage"
  echo "$(dpkg-deb -f "$deb" Package) $(dpkg-deb -f "$deb" Version) $(dpkg-deb -f "$deb" Architecture)" >>"$dest/MANIFEST"
done
cp -a "$stage"/usr/lib/python3/dist-packages/. "$dest/site/"
# Python 3.13 extension modules would not load on 3.12: drop them (tornado's
# optional speedups is the only one in this set; anything else is an error).
mapfile -t sos < <(find "$dest/site" -name '*.so')
for so in "${sos[@]}"; do
  case "$so" in
    */tornado/speedups.*.so) rm -f "$so" ;;
    *) echo "fetch_gpu_pydeps: unexpected extension module $so" >&2; exit 1 ;;
  esac
done
find "$dest/site" -name __pycache__ -prune -exec rm -rf {} +

# ---- native build inputs the GPU image lacks, from this machine ------------
need() { [ -e "$1" ] || { echo "fetch_gpu_pydeps: $1 missing here (Debian package $2)" >&2; exit 1; }; }
inc=/usr/include
lib=/usr/lib/x86_64-linux-gnu
need "$inc/liburing.h" liburing-dev
need "$lib/liburing.a" liburing-dev
need "$inc/xxhash.h" libxxhash-dev
need "$lib/libxxhash.a" libxxhash-dev
need "$inc/CLI/CLI.hpp" libcli11-dev
need "$inc/nlohmann/json.hpp" nlohmann-json3-dev
cp -a "$inc/liburing.h" "$inc/liburing" "$inc/xxhash.h" "$inc/CLI" "$inc/nlohmann" "$dest/native/include/"
[ -e "$inc/xxh3.h" ] && cp -a "$inc/xxh3.h" "$dest/native/include/"
cp -a "$lib/liburing.a" "$lib/libxxhash.a" "$dest/native/lib/"
{
  echo "# native/: copied from this machine ($(. /etc/os-release; echo "$PRETTY_NAME"))"
  for p in liburing-dev libxxhash-dev libcli11-dev nlohmann-json3-dev; do
    echo "$p $(dpkg-query -W -f '${Version}' "$p" 2>/dev/null || echo '?')"
  done
} >>"$dest/MANIFEST"

cat "$dest/MANIFEST"
du -sh "$dest/site" "$dest/native"
