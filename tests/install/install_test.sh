#!/usr/bin/env bash
# Installs spillway into a scratch prefix and builds examples/embed.cpp as an
# outside project with find_package(spillway), then runs it.
set -euo pipefail
cli="$1"; src="$2"
build="$(dirname "$(dirname "$cli")")"
work="$(mktemp -d /var/tmp/spillway-install-XXXXXX)"
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
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
