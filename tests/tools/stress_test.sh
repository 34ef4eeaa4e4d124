#!/usr/bin/env bash
# spillway stress over several seeds: on examples/tiers.yaml (a host tier over
# an lz4 file tier) and on a chain of three file tiers with mixed codecs and a
# small host tier, 4 threads, 100,000 ops each. Every run must report
# lost 0 and corrupt 0 (the command exits non-zero otherwise).
set -euo pipefail
cli="$1"; src="$2"
work="$(mktemp -d /var/tmp/spillway-stress-XXXXXX)"
trap 'rm -rf "$work"' EXIT
seeds="${SPILLWAY_STRESS_SEEDS:-1 2}"
cat > "$work/three.yaml" <<YAML
version: 1
tiers:
  - {name: host, kind: host, capacity: 8MiB}
  - {name: nvme, kind: file, capacity: 24MiB, medium: ssd, codec: lz4, paths: ["$work/nvme"], io: {segment_size: 4MiB}}
  - {name: ssd, kind: file, capacity: 16MiB, medium: ssd, codec: {name: zstd, level: 1}, paths: ["$work/ssd"], io: {segment_size: 4MiB}}
  - {name: nfs, kind: file, capacity: 4GiB, medium: ssd, paths: ["$work/nfs-a", "$work/nfs-b"], io: {segment_size: 16MiB}}
YAML
check() {
  local json="$1"
  /usr/bin/python3 - "$json" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
tiers = r["stats"]["tiers"]
assert r["lost"] == 0 and r["corrupt"] == 0, r
assert r["ops"] >= 100000, r["ops"]
print("seed %d: %d ops, %.0f ops/s, lost %d corrupt %d, verified %d; objects per tier %s" % (
    r["seed"], r["ops"], r["ops_per_s"], r["lost"], r["corrupt"], r["verified"],
    [t["objects"] for t in tiers]))
PY
}
for seed in $seeds; do
  out="$(SPILLWAY_DIR="$work/ex" "$cli" stress --config "$src/examples/tiers.yaml" --threads 4 --ops 100000 \
         --seed "$seed" --keys 4000 --sizes 512:262144 --json)"
  check "$out"
  out="$("$cli" stress --config "$work/three.yaml" --threads 4 --ops 100000 --seed "$seed" --keys 3000 \
         --sizes 64:131072 --json)"
  check "$out"
  # the three-tier run must actually have spilled into every tier
  /usr/bin/python3 -c "
import json,sys; t=json.loads(sys.argv[1])['stats']['tiers']
assert all(x['bytes_written'] > 0 for x in t), [x['bytes_written'] for x in t]" "$out"
done
