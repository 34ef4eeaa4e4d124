#!/usr/bin/env bash
# `spillway info`: runs without a file, prints io_uring status, the pinned
# limit and CUDA; with a config prints every tier with filesystem, free space
# and O_DIRECT; --json is one parseable object; it creates nothing; exit 2 on
# an unreadable file, 1 on an invalid one.
# $1: the spillway CLI, $2: the source directory.
set -u
cli="$1"
src="$2"
tmp="$(mktemp -d "${SPILLWAY_TEST_DIR:-/var/tmp}/spillway-info-XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

out="$("$cli" info)" || fail "info without a file exited $?"
echo "$out"
grep -q "io_uring" <<<"$out" || fail "no io_uring line"
grep -Eq "io_uring +(available|not available: .+)" <<<"$out" || fail "io_uring line has no status"
grep -q "pinned limit" <<<"$out" || fail "no pinned-memory limit"
grep -q "CUDA" <<<"$out" || fail "no CUDA line"
grep -q "memory .* total" <<<"$out" || fail "no physical memory"
grep -Eq "checksum +xxh3-64 \((avx2|generic)\)" <<<"$out" || fail "no checksum line naming its implementation"
if grep -q avx2 /proc/cpuinfo 2>/dev/null && [ "$(uname -m)" = x86_64 ]; then
  grep -q "checksum .*(avx2)" <<<"$out" || fail "this CPU has AVX2 but the checksum is not the AVX2 build"
fi

# Objects' 2 MiB pages: the environment decides when it says so, else
# whether a virtio balloon reports free pages (feature bit 5).
grep -Eq "huge pages +(yes|no) for objects: .+" <<<"$out" || fail "no huge-page line"
reporting=no
for d in /sys/bus/virtio/devices/*; do
  [ "$(cat "$d/device" 2>/dev/null)" = 0x0005 ] && [ "$(cut -c6 "$d/features" 2>/dev/null)" = 1 ] && reporting=yes
done
if [ "$reporting" = yes ]; then
  grep -q "huge pages   no for objects: virtio balloon .* reports free pages" <<<"$out" ||
    fail "a balloon here reports free pages, but objects still get huge pages"
else
  grep -q "huge pages   yes for objects: no free page reporting found" <<<"$out" ||
    fail "no balloon reports free pages here, but objects do not get huge pages"
fi
SPILLWAY_HUGE_PAGES=always "$cli" info | grep -q "huge pages   yes for objects: SPILLWAY_HUGE_PAGES=always" ||
  fail "SPILLWAY_HUGE_PAGES=always not honoured"
SPILLWAY_HUGE_PAGES=never "$cli" info | grep -q "huge pages   no for objects: SPILLWAY_HUGE_PAGES=never" ||
  fail "SPILLWAY_HUGE_PAGES=never not honoured"
SPILLWAY_HUGE_PAGES=sometimes "$cli" info | grep -q "for objects: SPILLWAY_HUGE_PAGES='sometimes' ignored" ||
  fail "a bad SPILLWAY_HUGE_PAGES is not named"

cat >"$tmp/tiers.yaml" <<EOF
version: 1
tiers:
  - name: host
    kind: host
    capacity: 64MiB
    pinned: false
  - name: scratch
    kind: file
    medium: ssd
    paths: ["$tmp/scratch-a", "$tmp/scratch-b"]
    capacity: 256MiB
    codec: lz4
EOF
mkdir "$tmp/scratch-a"
out="$("$cli" info "$tmp/tiers.yaml")" || fail "info FILE exited $?"
echo "$out"
grep -q "tier host" <<<"$out" || fail "tier host missing"
grep -q "tier scratch" <<<"$out" || fail "tier scratch missing"
grep -Eq "$tmp/scratch-a: [^,]+, .* free of .*, O_DIRECT (yes|no)" <<<"$out" || fail "no probe for scratch-a"
grep -q "$tmp/scratch-b (missing; parent probed)" <<<"$out" || fail "missing dir not reported"
[ ! -e "$tmp/scratch-b" ] || fail "info created a tier directory"

json="$("$cli" info "$tmp/tiers.yaml" --json)" || fail "info --json exited $?"
if command -v jq >/dev/null; then
  jq -e '.machine.io_uring.available | type == "boolean"' <<<"$json" >/dev/null || fail "json: io_uring"
  jq -e '.machine.memory_total_bytes > 0' <<<"$json" >/dev/null || fail "json: memory"
  jq -e '.machine.memlock_soft != null' <<<"$json" >/dev/null || fail "json: memlock"
  jq -e '.machine.huge_pages.objects | type == "boolean"' <<<"$json" >/dev/null || fail "json: huge pages"
  jq -e '.machine.checksum.implementation | test("^(avx2|generic)$")' <<<"$json" >/dev/null || fail "json: checksum implementation"
  jq -e '.config.tiers | length == 2' <<<"$json" >/dev/null || fail "json: tiers"
  jq -e '.config.tiers[1].path_info[0].fs_free_bytes > 0' <<<"$json" >/dev/null || fail "json: free space"
  jq -e '.config.tiers[1].path_info[0].direct_io | type == "boolean"' <<<"$json" >/dev/null || fail "json: direct"
  # One tier schema: info --json and validate --json describe a tier with the same fields.
  vjson="$("$cli" validate "$tmp/tiers.yaml" --json)"
  [ "$(jq -c '[.config.tiers[] | keys]' <<<"$json")" = "$(jq -c '[.tiers[] | keys]' <<<"$vjson")" ] ||
    fail "info --json and validate --json tier fields differ"
elif command -v python3 >/dev/null; then
  python3 -c 'import json,sys; d=json.load(sys.stdin); assert len(d["config"]["tiers"]) == 2' <<<"$json" ||
    fail "json does not parse"
fi

if [ -f "$src/examples/tiers.yaml" ]; then
  "$cli" info "$src/examples/tiers.yaml" >/dev/null
  rc=$?
  [ "$rc" -le 1 ] || fail "info examples/tiers.yaml exited $rc"
fi

"$cli" info "$tmp/does-not-exist.yaml" >/dev/null 2>&1
[ $? -eq 2 ] || fail "unreadable file should exit 2"
printf 'version: 1\ntiers:\n  - name: x\n    kind: host\n    capactiy: 1GiB\n' >"$tmp/bad.yaml"
"$cli" info "$tmp/bad.yaml" >/dev/null 2>&1
[ $? -eq 1 ] || fail "invalid file should exit 1"
echo "PASS"
