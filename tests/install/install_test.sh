#!/usr/bin/env bash
# Installs spillway into a scratch prefix and builds examples/embed.cpp as an
# outside project with find_package(spillway), then runs it.
set -euo pipefail
cli="$1"; src="$2"
build="$(dirname "$(dirname "$cli")")"
work="$(mktemp -d /var/tmp/spillway-install-XXXXXX)"
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
