#!/usr/bin/env bash
# Human-readable output escapes control bytes: a tier path from a ${VAR}
# holding an ESC sequence and a newline shows as \x1b and \x0a in validate's
# table, info's probe lines and inspect's messages, so it can neither drive
# the terminal nor forge a line; a NUL in a YAML key does not cut validate's
# diagnostic short.
# Usage: escape_output_test.sh SPILLWAY-CLI SOURCE-DIR
set -u
cli="$1"
tmp="$(mktemp -d "${SPILLWAY_TEST_DIR:-/var/tmp}/spillway-escape-XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# $1: what ran, $2: file holding its stdout and stderr. No raw ESC, no forged
# line; the escaped form is there.
check_escaped() {
  if grep -q $'\x1b' "$2"; then fail "$1: a raw ESC byte reached the output: $(cat -v "$2")"; fi
  if grep -q '^NAME  forged' "$2"; then fail "$1: the newline in the path forged a line: $(cat -v "$2")"; fi
  grep -qF 'evil\x1b[31mRED\x0aNAME  forged' "$2" || fail "$1: the path is not shown escaped: $(cat -v "$2")"
}

export SPILLWAY_ESCAPE_DIR="$tmp/evil"$'\x1b[31mRED\nNAME  forged'
mkdir -p "$SPILLWAY_ESCAPE_DIR"
cat >"$tmp/tiers.yaml" <<'YAML'
version: 1
tiers:
  - name: host
    kind: host
    capacity: 16MiB
  - name: disk
    kind: file
    capacity: 64MiB
    paths: ["${SPILLWAY_ESCAPE_DIR}"]
YAML

"$cli" validate "$tmp/tiers.yaml" >"$tmp/validate.out" 2>&1 || fail "validate exited $?: $(cat -v "$tmp/validate.out")"
check_escaped validate "$tmp/validate.out"
# One table row per tier below the header: the path did not add one.
rows=$(sed -n '/^NAME /,$p' "$tmp/validate.out" | wc -l)
[ "$rows" -eq 3 ] || fail "validate's table has $rows lines, expected 3: $(cat -v "$tmp/validate.out")"

"$cli" info "$tmp/tiers.yaml" >"$tmp/info.out" 2>&1 || fail "info exited $?: $(cat -v "$tmp/info.out")"
check_escaped info "$tmp/info.out"

# A segment that is not a record: inspect names the directory in its problem line.
head -c 4096 /dev/urandom >"$SPILLWAY_ESCAPE_DIR/seg-00000001.spw"
"$cli" inspect "$SPILLWAY_ESCAPE_DIR" >"$tmp/inspect.out" 2>&1
rc=$?
[ "$rc" -eq 1 ] || fail "inspect of a corrupt segment exited $rc, expected 1: $(cat -v "$tmp/inspect.out")"
grep -q 'offset 0: corrupt' "$tmp/inspect.out" || fail "inspect printed no problem line: $(cat -v "$tmp/inspect.out")"
check_escaped inspect "$tmp/inspect.out"
"$cli" inspect "$SPILLWAY_ESCAPE_DIR/none" >"$tmp/inspect2.out" 2>&1
check_escaped "inspect (missing directory)" "$tmp/inspect2.out"

# A NUL in a YAML key: the whole diagnostic, the key escaped.
printf 'version: 1\ntiers:\n  - name: x\n    kind: host\n    capacity: 1GiB\n    "pin\\0ned": true\n' >"$tmp/nul.yaml"
"$cli" validate "$tmp/nul.yaml" >"$tmp/nul.out" 2>&1
rc=$?
[ "$rc" -eq 1 ] || fail "validate of a NUL key exited $rc, expected 1"
grep -qF "nul.yaml:6:5: error: tiers[0].pin\\x00ned: unknown key 'pin\\x00ned' (did you mean 'pinned'?)" "$tmp/nul.out" ||
  fail "the diagnostic for a NUL key is not whole: $(cat -v "$tmp/nul.out")"
if tr -d '\n' <"$tmp/nul.out" | grep -qaP '\x00'; then fail "a raw NUL reached validate's output"; fi

[ "$failures" -eq 0 ] || exit 1
echo "PASS"
