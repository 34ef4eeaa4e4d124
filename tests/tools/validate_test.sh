#!/usr/bin/env bash
# Golden tests of `spillway validate`: every example validates; every config
# in tests/config/bad/ is rejected with an error at the line, column and
# message its first line announces ("# expect: LINE:COL message text"; a
# "# expect-cuda:" second line replaces it in builds with CUDA); exit codes,
# stdin and --strict.
# Usage: validate_cli_test.sh SPILLWAY_CLI SOURCE_DIR
set -u
cli=$1
src=$2
python=/usr/bin/python3
[ -x "$python" ] || { echo "SKIP: $python is needed to read the JSON output"; exit 77; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export SPILLWAY_DIR="$tmp/spill"
export SPILLWAY_BAD_FIXTURES="$tmp/fixtures"
unset SPILLWAY_PROFILE
mkdir -p "$SPILLWAY_BAD_FIXTURES/real" "$SPILLWAY_BAD_FIXTURES/open"
ln -s real "$SPILLWAY_BAD_FIXTURES/link"
chmod 0777 "$SPILLWAY_BAD_FIXTURES/open"

failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# Checks that JSON file $1 has an error at line $2, column $3 whose message contains $4.
has_error() {
  "$python" - "$@" <<'PY'
import json, sys
path, line, col, text = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
doc = json.load(open(path))
ok = doc["ok"] is False and any(
    e["line"] == line and e["column"] == col and text in e["message"] for e in doc["errors"])
sys.exit(0 if ok else 1)
PY
}

json_field() {
  "$python" -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"
}

cuda=no
"$cli" version | grep -q "CUDA: yes" && cuda=yes

# Every example validates, in text and in JSON.
examples=0
for f in "$src"/examples/*.yaml; do
  examples=$((examples + 1))
  "$cli" validate "$f" >"$tmp/out" 2>&1 || fail "$f: exit $? (expected 0): $(cat "$tmp/out")"
  "$cli" validate --json "$f" >"$tmp/out.json" 2>/dev/null
  [ "$(json_field "$tmp/out.json" ok)" = "True" ] || fail "$f: --json says not valid"
done
[ "$examples" -ge 3 ] || fail "expected at least 3 examples, found $examples"

# Every bad config is rejected at the announced position.
bad=0
for f in "$src"/tests/config/bad/*.yaml; do
  bad=$((bad + 1))
  expect=$(sed -n '1s/^# expect: //p' "$f")
  if [ "$cuda" = yes ] && sed -n '2p' "$f" | grep -q '^# expect-cuda: '; then
    expect=$(sed -n '2s/^# expect-cuda: //p' "$f")
  fi
  [ -n "$expect" ] || { fail "$f: no '# expect: LINE:COL message' first line"; continue; }
  pos=${expect%% *}
  text=${expect#* }
  line=${pos%%:*}
  col=${pos#*:}
  "$cli" validate --json "$f" >"$tmp/bad.json" 2>/dev/null
  rc=$?
  [ "$rc" -eq 1 ] || fail "$f: exit $rc (expected 1)"
  has_error "$tmp/bad.json" "$line" "$col" "$text" ||
    fail "$f: no error at $line:$col containing '$text'; got: $(grep -A4 '"line"' "$tmp/bad.json" | tr -s ' \n' ' ')"
  "$cli" validate "$f" >"$tmp/bad.txt" 2>&1
  grep -q "^$f:$line:$col: error: " "$tmp/bad.txt" || fail "$f: text output lacks '$f:$line:$col: error:'"
done
[ "$bad" -ge 25 ] || fail "expected at least 25 invalid configs, found $bad"

# Exit 2: a missing file, a directory, bad usage.
"$cli" validate "$tmp/no-such.yaml" >/dev/null 2>&1
[ $? -eq 2 ] || fail "missing file: expected exit 2"
"$cli" validate "$tmp" >/dev/null 2>&1
[ $? -eq 2 ] || fail "directory: expected exit 2"
"$cli" validate >/dev/null 2>&1
[ $? -eq 2 ] || fail "no file argument: expected exit 2"
"$cli" validate --no-such-flag "$src/examples/tiers.yaml" >/dev/null 2>&1
[ $? -eq 2 ] || fail "unknown flag: expected exit 2"

# A FIFO (or any file that is not a regular file) is refused at once, exit 2.
mkfifo "$tmp/fifo.yaml"
timeout 10 "$cli" validate "$tmp/fifo.yaml" >"$tmp/fifo.txt" 2>&1
rc=$?
[ "$rc" -eq 2 ] || fail "FIFO: exit $rc (expected 2; 124 means it hung)"
grep -q "not a regular file" "$tmp/fifo.txt" || fail "FIFO: no 'not a regular file' message: $(cat "$tmp/fifo.txt")"
timeout 10 "$cli" validate /dev/zero >/dev/null 2>&1
[ $? -eq 2 ] || fail "/dev/zero: expected exit 2"

# "-" reads standard input.
"$cli" validate - <"$src/examples/tiers.yaml" >"$tmp/stdin.txt" 2>&1 || fail "stdin: valid example rejected"
grep -q "<stdin>: valid" "$tmp/stdin.txt" || fail "stdin: no '<stdin>: valid' line"
"$cli" validate --json - <"$src/tests/config/bad/unknown_tier_key.yaml" >"$tmp/stdin.json" 2>/dev/null
[ $? -eq 1 ] || fail "stdin: invalid config not rejected"
has_error "$tmp/stdin.json" 7 5 "unknown key 'capactiy'" || fail "stdin: error position"

# --strict turns a warning into an error.
cat >"$tmp/warn.yaml" <<'YAML'
version: 1
tiers:
  - name: host
    kind: host
    capacity: 64MiB
    persistent: true
YAML
"$cli" validate "$tmp/warn.yaml" >"$tmp/warn.txt" 2>&1 || fail "warning-only config: expected exit 0"
grep -q "warning: tiers\[0\].persistent" "$tmp/warn.txt" || fail "warning-only config: no warning printed"
"$cli" validate --strict --json "$tmp/warn.yaml" >"$tmp/strict.json" 2>/dev/null
[ $? -eq 1 ] || fail "--strict: expected exit 1"
has_error "$tmp/strict.json" 6 5 "applies to file tiers" || fail "--strict: warning not listed as an error"

# --profile selects a profile; an unknown one is an error.
"$cli" validate --json --profile gpu-node "$src/examples/cluster-nodes.yaml" >"$tmp/p.json" 2>/dev/null ||
  fail "--profile gpu-node: expected exit 0"
[ "$(json_field "$tmp/p.json" profile)" = "gpu-node" ] || fail "--profile: profile not reported"
"$cli" validate --profile gpu-nod "$src/examples/cluster-nodes.yaml" >"$tmp/p.txt" 2>&1
[ $? -eq 1 ] || fail "unknown --profile: expected exit 1"
grep -q "did you mean 'gpu-node'" "$tmp/p.txt" || fail "unknown --profile: no suggestion"

# The human output ends with the resolved chain.
"$cli" validate "$src/examples/tiers.yaml" >"$tmp/table.txt" 2>&1
grep -q "^NAME  *KIND  *CAPACITY" "$tmp/table.txt" || fail "table header missing"
grep -q "^file0  *file  *8589934592 (8 GiB)" "$tmp/table.txt" || fail "file0 row missing"

echo "examples: $examples, invalid configs: $bad, failures: $failures"
[ "$failures" -eq 0 ]
