#!/usr/bin/env bash
# What every subcommand shares (docs/cli.md): usage lines that name the
# program, help without CLI11's type names, one exit-status convention (0
# good, 1 the verdict is bad, 2 usage error or unusable input) and a
# top-level "ok" in every --json object that is true exactly when the exit
# status is 0; and info reporting an invalid config with one "error:" per
# diagnostic.
# Usage: cli_conventions_test.sh SPILLWAY-CLI SOURCE-DIR
set -u
cli="$1"
python=/usr/bin/python3
[ -x "$python" ] || { echo "SKIP: $python is needed to read the JSON output"; exit 77; }
tmp="$(mktemp -d "${SPILLWAY_TEST_DIR:-/var/tmp}/spillway-cli-XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
unset SPILLWAY_PROFILE
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

subs="$("$cli" --help | awk '/^Subcommands:/ { on = 1; next } on && /^  [a-z]/ { print $1 }')"
[ "$(echo $subs | wc -w)" -ge 7 ] || fail "expected at least 7 subcommands in --help, found: $subs"

# Help: usage names the program; no CLI11 type names or flag defaults.
check_help() {  # $1: label, $2: file
  if grep -nE '\{(true|false)\}|\b(TEXT|UINT|INT|FLOAT|BOOLEAN)\b' "$2"; then fail "$1 shows CLI11 type annotations"; fi
}
"$cli" --help >"$tmp/help" 2>&1
grep -q '^Usage: spillway \[OPTIONS\] SUBCOMMAND' "$tmp/help" || fail "spillway --help: usage is '$(grep Usage "$tmp/help")'"
check_help "spillway --help" "$tmp/help"
for s in $subs; do
  "$cli" "$s" --help >"$tmp/help.$s" 2>&1 || fail "spillway $s --help exited $?"
  grep -q "^Usage: spillway $s " "$tmp/help.$s" || fail "spillway $s --help: usage is '$(grep Usage "$tmp/help.$s")'"
  check_help "spillway $s --help" "$tmp/help.$s"
  "$cli" help "$s" >"$tmp/help2.$s" 2>&1
  grep -q "^Usage: spillway $s " "$tmp/help2.$s" || fail "spillway help $s: usage is '$(grep Usage "$tmp/help2.$s")'"
done
grep -q '^Usage: spillway validate \[OPTIONS\] FILE$' "$tmp/help.validate" || fail "validate's usage does not end in FILE"
grep -q '^Usage: spillway inspect \[OPTIONS\] DIR$' "$tmp/help.inspect" || fail "inspect's usage does not end in DIR"
grep -qE '^  --verify,--no-verify +Verify' "$tmp/help.stress" || fail "stress --help: --verify,--no-verify line changed"
grep -qE '^  --sizes MIN:MAX ' "$tmp/help.stress" || fail "stress --help: --sizes shows no MIN:MAX"
grep -qE '^  --object-bytes SIZE' "$tmp/help.demo" || fail "demo --help: --object-bytes shows no SIZE"

# Runs a command; $1: expected exit status, the rest: the arguments. Output in $tmp/out.
expect_rc() {
  local want="$1"; shift
  "$cli" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [ "$rc" -eq "$want" ] || fail "spillway $*: exit $rc, expected $want: $(head -c 600 "$tmp/err")"
}
# The JSON in $tmp/out has "ok" equal to $1 (True/False).
expect_ok() {
  local got
  got="$("$python" -c 'import json,sys; print(json.load(open(sys.argv[1])).get("ok", "missing"))' "$tmp/out" 2>&1)"
  [ "$got" = "$1" ] || fail "$2: --json \"ok\" is '$got', expected $1"
}

cat >"$tmp/good.yaml" <<YAML
version: 1
tiers:
  - {name: host, kind: host, capacity: 16MiB, pinned: false}
  - {name: disk, kind: file, capacity: 64MiB, paths: ["$tmp/disk"], codec: none}
YAML
printf 'version: 1\ntiers:\n  - name: x\n    kind: host\n    capactiy: 1GiB\n' >"$tmp/bad.yaml"

# validate: 0 valid, 1 invalid, 2 unreadable or usage.
expect_rc 0 validate --json "$tmp/good.yaml"; expect_ok True "validate good"
expect_rc 1 validate --json "$tmp/bad.yaml"; expect_ok False "validate bad"
expect_rc 2 validate --json "$tmp/none.yaml"; expect_ok False "validate unreadable"
expect_rc 2 validate --frobnicate "$tmp/good.yaml"

# info: the same, and an invalid config's diagnostics say "error:" once.
expect_rc 0 info --json; expect_ok True "info"
expect_rc 0 info --json "$tmp/good.yaml"; expect_ok True "info good"
expect_rc 1 info --json "$tmp/bad.yaml"; expect_ok False "info bad"
expect_rc 1 info "$tmp/bad.yaml"
grep -q "bad.yaml:5:5: error: tiers\[0\].capactiy: unknown key" "$tmp/out" || fail "info: no diagnostic: $(cat "$tmp/out")"
if grep -E 'error:.*error:' "$tmp/out"; then fail "info prints a doubled 'error:'"; fi
expect_rc 2 info "$tmp/none.yaml"

# inspect: 0 clean, 1 corrupt, 2 not a tier or unreadable.
mkdir -p "$tmp/tier"
: >"$tmp/tier/LOCK"
expect_rc 0 inspect --json "$tmp/tier"; expect_ok True "inspect empty tier"
head -c 4096 /dev/urandom >"$tmp/tier/seg-00000001.spw"
expect_rc 1 inspect --json "$tmp/tier"; expect_ok False "inspect corrupt"
expect_rc 2 inspect --json "$tmp/none"
expect_rc 2 inspect

# stress: 0 nothing lost, 2 an unusable config or option.
expect_rc 0 stress -c "$tmp/good.yaml" --ops 300 --keys 50 --sizes 64:4096 --json; expect_ok True "stress"
expect_rc 2 stress -c "$tmp/bad.yaml" --ops 10
expect_rc 2 stress -c "$tmp/good.yaml" --threads 0

# demo: a config it cannot open is unusable input (2), as for stress.
expect_rc 2 demo -c "$tmp/bad.yaml"
expect_rc 2 demo -c "$tmp/good.yaml" --multiple 0

# bench: usage errors and an unusable --dir are 2 (bench_quick_test checks "ok").
expect_rc 2 bench --sections 9
expect_rc 2 bench --quick --dir /proc/spillway-no --out "$tmp/bench"

# The program: unknown commands and options are usage errors; version is 0.
expect_rc 2 frobnicate
expect_rc 2 --frobnicate
expect_rc 0 version

[ "$failures" -eq 0 ] || exit 1
echo "PASS"
