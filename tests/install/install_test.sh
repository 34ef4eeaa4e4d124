#!/usr/bin/env bash
# Installs spillway into a scratch prefix and checks what a user of the
# package meets: examples/embed.cpp built as an outside project with
# find_package(spillway) and with pkg-config; `spillway demo` and `spillway
# bench --quick` (the Dask-style peer included) run from another directory;
# the man pages; the Python package from the install rule and from
# `pip install --no-build-isolation .` in a --system-site-packages venv.
# About a minute; bench --quick's section 5 and pip's install are most of it.
set -euo pipefail
cli="$1"; src="$(cd "$2" && pwd)"
build="$(dirname "$(dirname "$cli")")"
work="$(mktemp -d "${SPILLWAY_TEST_DIR:-/var/tmp}/spillway-install-XXXXXX")"
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
# Only the public headers are installed, and they include nothing else of ours.
extra="$(cd "$work/prefix/include" && find . -type f ! -path './spillway/*.h' -o -type f -path './spillway/*/*')"
if [ -n "$extra" ]; then echo "FAIL: internal files installed: $extra"; exit 1; fi
if grep -hE '#include "' "$work/prefix/include/spillway/"*.h | grep -vE '#include "spillway/[a-z_]+\.h"'; then
  echo "FAIL: an installed header includes a non-public header"; exit 1
fi
# Users of the package are asked for no header-only build dependency.
pkgconfig="$(find "$work/prefix" -name spillwayConfig.cmake)"
if ! grep -q "set(SPILLWAY_INSTALLED_PACKAGE ON)" "$pkgconfig"; then
  echo "FAIL: the installed package requires CLI11/nlohmann headers"; exit 1
fi
cmake -S "$src/examples/embed" -B "$work/embed" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/embed" >/dev/null
cat > "$work/tiers.yaml" <<YAML
version: 1
tiers:
  - {name: host, kind: host, capacity: 16MiB}
  - {name: disk, kind: file, capacity: 1GiB, medium: ssd, paths: ["$work/disk"]}
YAML
out="$("$work/embed/embed" "$work/tiers.yaml")"
echo "$out"
grep -q "verified" <<<"$out"
grep -q "disk" <<<"$out"

prefix="$work/prefix"
mkdir -p "$work/elsewhere"
cd "$work/elsewhere"  # nothing of the source tree is here

# pkg-config: the same program, built with what spillway.pc says.
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
flags="$(pkg-config --cflags --libs spillway)"
echo "pkg-config --cflags --libs spillway: $flags"
# shellcheck disable=SC2086
g++ -std=c++20 -O1 -o "$work/embed-pc" "$src/examples/embed.cpp" $flags
grep -q verified <<<"$("$work/embed-pc" "$work/tiers.yaml")"
[ "$(pkg-config --modversion spillway)" = "$("$prefix/bin/spillway" --version | awk '{print $2}')" ] ||
  { echo "FAIL: spillway.pc and --version disagree"; exit 1; }

# demo from another directory: finds <prefix>/share/spillway/examples/tiers.yaml.
export SPILLWAY_DIR="$work/demo-spill"
"$prefix/bin/spillway" demo >"$work/demo.txt" 2>&1 || { cat "$work/demo.txt"; echo "FAIL: demo"; exit 1; }
grep -q "demo OK" "$work/demo.txt"
echo "ok: demo from $PWD"

# bench --quick from another directory: the peer is found in share/spillway/bench,
# the report goes to the current directory by default.
if [ -x /usr/bin/fio ] && /usr/bin/python3 -c "import zict" 2>/dev/null; then
  # Section 5 only (the peer's): bench/bench_quick_test runs every section.
  "$prefix/bin/spillway" bench --quick --sections 5 --dir "$work/bench-scratch" --machine ci \
    >"$work/bench.txt" 2>"$work/bench.err" || true  # exit 1 = a figure not measured: checked below
  if grep -q "zict_peer.py not found" "$work/bench.txt" "$work/bench.err"; then
    echo "FAIL: bench did not find the installed peer"; cat "$work/bench.err"; exit 1
  fi
  ls ./ci-*.md ./ci-*.json >/dev/null || { echo "FAIL: bench wrote no report in the current directory"; exit 1; }
  grep -qE "zict.File peer \(Python\) [0-9.]+ GB/s" ./ci-*.md || { echo "FAIL: the report has no measured peer figure"; exit 1; }
  echo "ok: bench --quick from $PWD, peer included ($(grep -c . ./ci-*.md) report lines)"
else
  echo "SKIP (bench): fio or python3-zict missing"
fi

# man pages and the bash completion
for p in spillway spillway-validate spillway-bench; do
  [ -s "$prefix/share/man/man1/$p.1" ] || { echo "FAIL: man page $p.1 not installed"; exit 1; }
done
if command -v man >/dev/null; then
  for p in "$prefix"/share/man/man1/spillway*.1; do
    man -l "$p" >/dev/null 2>"$work/man.err" && [ ! -s "$work/man.err" ] ||
      { cat "$work/man.err"; echo "FAIL: man -l $p"; exit 1; }
  done
fi
[ -s "$prefix/share/bash-completion/completions/spillway" ] || { echo "FAIL: bash completion not installed"; exit 1; }
echo "ok: man pages and bash completion"

# Python: the install rule (where Debian's python3 looks for this prefix) ...
if ls "$src"/python/CMakeLists.txt >/dev/null && find "$prefix" -name '_spillway*.so' | grep -q .; then
  pkgdir="$(dirname "$(dirname "$(find "$prefix" -name '_spillway*.so' | head -1)")")"
  case "$pkgdir" in
    "$prefix"/lib/python3*/dist-packages) ;;
    *) echo "FAIL: python package installed at $pkgdir"; exit 1 ;;
  esac
  PYTHONPATH="$pkgdir" /usr/bin/python3 -c "import spillway; assert spillway.__version__" ||
    { echo "FAIL: import spillway from $pkgdir"; exit 1; }
  echo "ok: python package at $pkgdir"
  # Its dist-info: what pip lists and uninstalls by (the RECORD names every installed file).
  PYTHONPATH="$pkgdir" /usr/bin/python3 - "$pkgdir" <<'PY' || { echo "FAIL: the installed dist-info"; exit 1; }
import importlib.metadata as md, os, sys, spillway
d = md.distribution("spillway-engine")
assert d.version == spillway.__version__, (d.version, spillway.__version__)
files = {str(f) for f in d.files}
site = sys.argv[1]
installed = {os.path.relpath(os.path.join(r, f), site) for r, _, fs in os.walk(os.path.join(site, "spillway")) for f in fs
             if "__pycache__" not in r}
assert installed and installed <= files, sorted(installed - files)
assert "spillway/py.typed" in files and "spillway/_spillway.pyi" in files
print("ok: dist-info", d.metadata["Name"], d.version, len(files), "files in RECORD")
PY
  if /usr/bin/python3 -m pip --version >/dev/null 2>&1; then  # pip uninstalls it whole (on a copy)
    cp -r "$pkgdir" "$work/uninstall-site"
    PYTHONPATH="$work/uninstall-site" /usr/bin/python3 -m pip uninstall -y --break-system-packages \
      spillway-engine >"$work/uninstall.txt" 2>&1 || { cat "$work/uninstall.txt"; echo "FAIL: pip uninstall"; exit 1; }
    left="$(find "$work/uninstall-site" -mindepth 1 -not -name __pycache__ -not -path '*/__pycache__/*')"
    [ -z "$left" ] || { echo "FAIL: pip uninstall left $left"; exit 1; }
    echo "ok: pip uninstall spillway-engine removes what cmake --install put there"
  fi
  # ... and the distribution: Debian's pip and setuptools, offline. The CMake
  # build is reused (SPILLWAY_BUILD_DIR) so the test stays short; a copy of
  # the tree keeps pip's egg-info out of the source.
  if /usr/bin/python3 -c "import setuptools, wheel, venv" 2>/dev/null; then
    mkdir -p "$work/src"
    (cd "$src" && tar --exclude='./build*' --exclude=./.git -cf - .) | tar -C "$work/src" -xf -
    /usr/bin/python3 -m venv --system-site-packages "$work/venv"
    SPILLWAY_BUILD_DIR="$build" "$work/venv/bin/pip" install --no-build-isolation --no-index "$work/src" \
      >"$work/pip.txt" 2>&1 || { tail -20 "$work/pip.txt"; echo "FAIL: pip install"; exit 1; }
    "$work/venv/bin/python" -c "import spillway, sys; print('venv:', spillway.__file__)" | grep -q "$work/venv"
    "$work/venv/bin/pip" show spillway-engine >"$work/pip-show.txt" && grep -q "^License: Apache-2.0" "$work/pip-show.txt"
    # pip reads the dist-info `cmake --install` wrote: it lists the distribution and its files.
    "$work/venv/bin/pip" list --path "$pkgdir" 2>/dev/null | grep -qE "^spillway-engine +[0-9]" ||
      { echo "FAIL: pip list does not see the dist-info cmake --install wrote"; exit 1; }
    echo "ok: pip install --no-build-isolation . in a --system-site-packages venv"
  else
    echo "SKIP (pip): python3-setuptools / python3-wheel / python3-venv missing"
  fi
fi
