#!/usr/bin/env bash
# `spillway demo`: writes past the first tier and reads everything back
# verified; --read-ahead is a byte budget ("auto": a quarter of the first
# host tier, read in two windows of half of it), 0 reads one Get at a time,
# and a value that is not a size is a usage error (exit 2) that names it.
# $1: the spillway CLI, $2: the source directory.
set -u
cli="$1"
tmp="$(mktemp -d "${SPILLWAY_TEST_DIR:-/var/tmp}/spillway-demo-XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cat >"$tmp/tiers.yaml" <<EOF
version: 1
tiers:
  - {name: host, kind: host, capacity: 32MiB, pinned: false}
  - {name: disk, kind: file, capacity: 1GiB, paths: ["$tmp/disk"], codec: none}
EOF

# auto: 32 MiB / 4 = 8 MiB ahead, windows of 4 MiB = 4 keys of 1 MiB.
out="$("$cli" demo -c "$tmp/tiers.yaml" --multiple 3)" || fail "demo (auto) exited $?: $out"
echo "$out"
grep -q "read-ahead 8 MiB: windows of 4 keys" <<<"$out" || fail "auto read-ahead is not 8 MiB in windows of 4 keys"
grep -q "96 of 96 objects verified" <<<"$out" || fail "not every object verified"
grep -q "demo OK" <<<"$out" || fail "no demo OK"

# A size in bytes: 16 MiB of 256 KiB objects, windows of 32 keys.
out="$("$cli" demo -c "$tmp/tiers.yaml" --multiple 2 --object-bytes 256KiB --read-ahead 16MiB)" ||
  fail "demo --read-ahead 16MiB exited $?: $out"
grep -q "read-ahead 16 MiB: windows of 32 keys" <<<"$out" || fail "16 MiB of 256 KiB objects is not 32 keys a window: $out"
grep -q "demo OK" <<<"$out" || fail "no demo OK with --read-ahead 16MiB"

# 0: one Get at a time.
out="$("$cli" demo -c "$tmp/tiers.yaml" --multiple 2 --read-ahead 0)" || fail "demo --read-ahead 0 exited $?: $out"
grep -q "one Get at a time" <<<"$out" || fail "--read-ahead 0 still reads ahead: $out"
grep -q "demo OK" <<<"$out" || fail "no demo OK with --read-ahead 0"

# Not a size: exit 2, naming the value.
out="$("$cli" demo -c "$tmp/tiers.yaml" --read-ahead lots 2>&1)"
rc=$?
[ "$rc" -eq 2 ] || fail "--read-ahead lots exited $rc, not 2: $out"
grep -q "'lots' is not a size" <<<"$out" || fail "the error does not name the value: $out"
echo "PASS"
