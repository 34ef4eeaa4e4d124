#!/usr/bin/env bash
# `spillway stress` run twice on the same persistent tier:
# the second run finds the first run's objects under its keys and must not
# call them corruption. The tool erases what an earlier run left under
# stress/0 .. stress/K-1 before it starts and says how many ("cleared").
# $1 = spillway CLI, $2 = source dir.
set -uo pipefail
cli="$1"
work="$(mktemp -d "${SPILLWAY_TEST_DIR:-/var/tmp}/spillway-stress-rerun-XXXXXX")"
trap 'rm -rf "$work"' EXIT
cat > "$work/chain.yaml" <<EOF2
version: 1
tiers:
  - name: disk
    kind: file
    paths: [$work/disk]
    capacity: 64MiB
    persistent: true
    io: {segment_size: 4MiB}
EOF2
failed=0
for run in 1 2; do
  rc=0
  out="$("$cli" stress --config "$work/chain.yaml" --ops 3000 --seed "$run" --threads 2 --keys 300 \
         --sizes 64:16384 --verify --json 2> "$work/stderr.txt")" || rc=$?
  lost="$(grep -o '"lost":[0-9]*' <<< "$out" | head -n1 | cut -d: -f2)"
  corrupt="$(grep -o '"corrupt":[0-9]*' <<< "$out" | head -n1 | cut -d: -f2)"
  cleared="$(grep -o '"cleared":[0-9]*' <<< "$out" | head -n1 | cut -d: -f2)"
  echo "run $run: exit $rc, lost ${lost:-?} corrupt ${corrupt:-?}, cleared ${cleared:-?}"
  if [ "$rc" != 0 ] || [ "${lost:-x}" != 0 ] || [ "${corrupt:-x}" != 0 ]; then
    failed=$((failed + 1))
    grep -o '"first_problem":"[^"]*"' <<< "$out" || true
    tail -n 5 "$work/stderr.txt"
  fi
done
if [ "${cleared:-0}" = 0 ]; then
  echo "the second run found nothing of the first run's: the test proves nothing"; failed=$((failed + 1))
fi
[ "$failed" = 0 ]
