#!/usr/bin/env bash
# `spillway stress --faults ... --verify --reopen` over several seeds on a
# chain of three persistent file tiers: each seed runs with faults, then
# clears them, verifies every key, closes the engine cleanly, reopens it and
# verifies every key again; every seed must end with lost 0 and corrupt 0
# (after the reopen: 0 lost, 0 stale, 0 resurrected, 0 corrupt). Each seed
# starts on fresh directories. By default it runs SPILLWAY_STRESS_SEEDS (10)
# seeds of SPILLWAY_STRESS_OPS (10000) ops; CTest runs the same seeds 1-10 as
# five entries of two seeds each (tests.cmake). The long mode (docs/reliability.md) is
#   SPILLWAY_STRESS_SEEDS=100 bash tests/reliability/stress_faults_test.sh build/bin/spillway .
# $1 = spillway CLI, $2 = source dir.
set -uo pipefail
cli="$1"
seeds="${SPILLWAY_STRESS_SEEDS:-10}"
first="${SPILLWAY_STRESS_FIRST_SEED:-1}"
ops="${SPILLWAY_STRESS_OPS:-10000}"
faults="${SPILLWAY_STRESS_FAULTS:-eio=0.01,enospc=0.001,short=0.01,torn=0.001}"
work="$(mktemp -d "${SPILLWAY_TEST_DIR:-/var/tmp}/spillway-stress-faults-XXXXXX")"
trap 'rm -rf "$work"' EXIT

write_chain() {  # $1 = directory for the tiers
  cat > "$work/chain.yaml" <<EOF
version: 1
tiers:
  - name: nvme
    kind: file
    paths: [$1/nvme]
    capacity: 8MiB
    persistent: true
    io: {segment_size: 2MiB}
  - name: ssd
    kind: file
    paths: [$1/ssd]
    capacity: 16MiB
    persistent: true
    codec: lz4
    io: {segment_size: 4MiB}
  - name: nfs
    kind: file
    paths: [$1/nfs]
    capacity: 1GiB
    persistent: true
    codec: zstd
EOF
}
write_chain "$work/seed0"
if ! "$cli" validate "$work/chain.yaml" > "$work/validate.txt" 2>&1; then
  echo "the test chain does not validate:"; cat "$work/validate.txt"; exit 1
fi

failed=0
for ((seed = first; seed < first + seeds; seed++)); do
  rm -rf "$work/seed"*
  write_chain "$work/seed$seed"
  rc=0
  out="$("$cli" stress --config "$work/chain.yaml" --ops "$ops" --seed "$seed" --threads 4 \
         --keys 800 --sizes 64:262144 --faults "$faults" --verify --reopen --json 2> "$work/stderr.txt")" || rc=$?
  lost="$(grep -o '"lost":[0-9]*' <<< "$out" | head -n1 | cut -d: -f2)"
  corrupt="$(grep -o '"corrupt":[0-9]*' <<< "$out" | head -n1 | cut -d: -f2)"
  injected="$(grep -o '"faults_injected":[0-9]*' <<< "$out" | head -n1 | cut -d: -f2)"
  verified="$(grep -o '"verified":[0-9]*' <<< "$out" | tail -n1 | cut -d: -f2)"  # the last: top level, after "reopen"
  reopen="$(grep -o '"reopen":{[^}]*}' <<< "$out" | head -n1)"
  echo "seed $seed: exit $rc, lost ${lost:-?} corrupt ${corrupt:-?}, verified ${verified:-?}, faults injected ${injected:-?}, ${reopen:-reopen: ?}"
  if [ "$rc" != 0 ] || [ "${lost:-x}" != 0 ] || [ "${corrupt:-x}" != 0 ]; then
    failed=$((failed + 1))
    grep -o '"first_problem":"[^"]*"' <<< "$out" || true
    tail -n 5 "$work/stderr.txt"
    echo "replay: $cli stress --config CHAIN --ops $ops --seed $seed --threads 4 --keys 800 --sizes 64:262144 --faults '$faults' --verify --reopen"
  fi
  if [ -z "$reopen" ]; then
    echo "seed $seed: no verification after reopen"; failed=$((failed + 1))
  fi
  if [ "${injected:-0}" = 0 ]; then
    echo "seed $seed: no fault was injected; the test proves nothing"; failed=$((failed + 1))
  fi
done
echo "$seeds seeds, $failed failed"
[ "$failed" = 0 ]
