#!/usr/bin/env bash
# Every numeric CLI option and config value refuses NaN, infinities,
# negatives, overflow and trailing garbage as a usage error: exit 2 and a
# message naming the option (or key) and the value. Each command runs under
# a timeout, since a value that wraps (stress --ops -1) would run forever.
# $1: the spillway CLI, $2: the source directory.
set -u
cli="$1"
tmp="$(mktemp -d "${SPILLWAY_TEST_DIR:-/var/tmp}/spillway-values-XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

cat >"$tmp/host.yaml" <<YAML
version: 1
tiers:
  - {name: host, kind: host, capacity: 16MiB, pinned: false}
YAML

# refuse TEXT... -- ARGS: `spillway ARGS` exits 2 and its stderr holds every TEXT.
refuse() {
  local texts=()
  while [ "$1" != "--" ]; do texts+=("$1"); shift; done
  shift
  local rc=0
  timeout 30 "$cli" "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
  if [ "$rc" != 2 ]; then
    fail "spillway $* exited $rc, not 2: $(head -c 400 "$tmp/err")"
    return
  fi
  for t in "${texts[@]}"; do
    grep -qF -- "$t" "$tmp/err" || fail "spillway $*: stderr does not name '$t': $(head -c 400 "$tmp/err")"
  done
}

stress=(stress -c "$tmp/host.yaml" --keys 10)
# The issue's reproductions.
refuse --sizes 1PiB:1PiB "memory" -- "${stress[@]}" --ops 10 --sizes 1PiB:1PiB
# The device stress checks its sizes before it looks for a gpu tier.
refuse --sizes 1PiB:1PiB "memory" -- "${stress[@]}" --device --seconds 1 --sizes 1PiB:1PiB
refuse --ops "'-1'" -- "${stress[@]}" --ops -1
refuse --multiple "'nan'" -- demo -c "$tmp/host.yaml" --multiple nan
# Whole numbers: no sign, no fraction or exponent, no overflow, nothing after.
for v in -1 99999999999999999999 18446744073709551616 12abc 1e3 0.5 nan inf " 5"; do
  refuse --ops "'$v'" -- "${stress[@]}" --ops "$v"
done
for v in -1 99999999999999999999 nan; do
  refuse --seed "'$v'" -- "${stress[@]}" --ops 10 --seed "$v"
done
for v in 0 257 -0.5 1e2 nan 4294967297; do
  refuse --threads "'$v'" -- "${stress[@]}" --ops 10 --threads "$v"
done
for v in 0 -1 99999999999999999999 inf; do
  refuse --keys "'$v'" -- stress -c "$tmp/host.yaml" --ops 10 --keys "$v"
done
# Real numbers: finite, in range, nothing after.
for v in nan -nan inf -inf infinity 1e400 0 -0 -0.5 1e300 5s 0x10; do
  refuse --seconds "'$v'" -- "${stress[@]}" --seconds "$v"
done
for v in nan inf -inf -0.5 0 1e400 1001 2x; do
  refuse --multiple "'$v'" -- demo -c "$tmp/host.yaml" --multiple "$v"
done
# Sizes: no sign, no NaN, below 2^64.
for v in -1 nan inf 1e400 99999999999999999999 64KiBx 20000PiB; do
  refuse --object-bytes "'$v'" -- demo -c "$tmp/host.yaml" --object-bytes "$v"
done
for v in -1:64 64:-1 nan:64 64:inf 1:99999999999999999999 64:1e400 16PiB:17PiB; do
  refuse --sizes "'$v'" -- "${stress[@]}" --ops 10 --sizes "$v"
done
for v in -1 4096 nan 99999999999999999999; do
  refuse --worker "'$v'" -- validate --worker "$v" "$tmp/host.yaml"
done
for v in 0 21 -1 nan 1e1 99999999999999999999; do
  refuse --reps "'$v'" -- bench --reps "$v"
done
for v in 1,-2 1,99999999999999999999 1,nan; do
  refuse --sections -- bench --sections "$v"
done

# Still accepted: plain numbers, a leading zero (decimal, not octal), the largest seed.
out="$(timeout 60 "$cli" stress -c "$tmp/host.yaml" --keys 010 --ops 100 --threads 02 \
       --seed 18446744073709551615 --sizes 64:1KiB --json 2>&1)" || fail "stress with valid values exited $?: $out"
/usr/bin/python3 -c '
import json, sys
r = json.loads(sys.argv[1])
assert r["ops"] == 100 and r["threads"] == 2 and r["seed"] == 18446744073709551615, r
assert r["verified"] <= 10, r' "$out" || fail "stress did not read --keys 010 as 10 and --threads 02 as 2: $out"

# A config value the space check cannot honour: min_free beyond any
# filesystem. stress refuses to open (exit 2); validate reports the error
# (exit 1, its status for an invalid config), naming the key and the value.
cat >"$tmp/reserve.yaml" <<YAML
version: 1
tiers:
  - {name: disk, kind: file, capacity: 64MiB, paths: ["$tmp/disk"], min_free: 18446744073709551615}
YAML
refuse "tiers[0].min_free" "18446744073709551615" -- stress -c "$tmp/reserve.yaml" --ops 10 --keys 10
rc=0
"$cli" validate "$tmp/reserve.yaml" >"$tmp/out" 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "validate of min_free: 18446744073709551615 exited $rc, not 1: $(cat "$tmp/out")"
grep -q "min_free" "$tmp/out" && grep -q "18446744073709551615" "$tmp/out" ||
  fail "validate does not name min_free and its value: $(cat "$tmp/out")"
# A dump interval the clock cannot hold, and values that are no number.
cat >"$tmp/interval.yaml" <<YAML
version: 1
metrics: {prometheus_file: "$tmp/m.prom", dump_interval_s: 1e300}
tiers:
  - {name: host, kind: host, capacity: 16MiB, pinned: false}
YAML
refuse "metrics.dump_interval_s" "1e+300" -- stress -c "$tmp/interval.yaml" --ops 10 --keys 10
for v in nan .inf -1 1e400; do
  sed "s/1e300/$v/" "$tmp/interval.yaml" >"$tmp/interval2.yaml"
  refuse "dump_interval_s" -- stress -c "$tmp/interval2.yaml" --ops 10 --keys 10
done

[ "$failures" = 0 ] || { echo "$failures failures"; exit 1; }
echo "every bad value refused"
