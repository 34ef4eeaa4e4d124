#!/usr/bin/env bash
# The bash completion (tools/completion/spillway.bash) against the CLI itself:
# `spillway <TAB>` offers every subcommand `spillway --help` lists, each
# subcommand's `--<TAB>` every option its --help lists, and `--profile <TAB>`
# the profiles of the config file given earlier on the line.
# Usage: completion_test.sh SPILLWAY-CLI SOURCE-DIR
set -euo pipefail
cli="$1"; src="$(cd "$2" && pwd)"
script="$src/tools/completion/spillway.bash"
[ -f "$script" ] || { echo "FAIL: $script missing"; exit 1; }
if ! bash --version 2>/dev/null | grep -q "version [4-9]"; then echo "SKIP: bash 4 or later needed"; exit 77; fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# What the completion offers for the words given (the last one is the word
# being completed), one candidate a line. A fresh bash without the user's
# bash-completion, so the script's own fallback is what runs.
complete_words() {
  bash --norc --noprofile -c '
    source "$1"; shift
    COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
    _spillway spillway "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
    printf "%s\n" "${COMPREPLY[@]}"' _ "$script" "$@"
}

# The subcommands and options the CLI's help lists.
subcommands() { "$cli" --help | awk '/^Subcommands:/ { on = 1; next } on && /^  [a-z]/ { print $1 }'; }
options_of() {  # first column of the option lines: -h,--help  --verify,--no-verify{false}
  "$cli" "$1" --help | awk '/^Options:/ { on = 1; next } on && /^  -/ { print $1 }' |
    sed 's/{[^}]*}//g' | tr ',' '\n' | grep -E '^--?[A-Za-z]'
}

fail=0
missing() { echo "FAIL: $1"; fail=1; }

subs="$(subcommands)"
[ -n "$subs" ] || { echo "FAIL: no subcommands parsed from '$cli --help'"; exit 1; }
offered="$(complete_words spillway "")"
for s in $subs; do grep -qx -- "$s" <<<"$offered" || missing "'spillway <TAB>' does not offer '$s'"; done
for s in $offered; do
  case $s in -*|help) continue ;; esac
  grep -qx -- "$s" <<<"$subs" || missing "'spillway <TAB>' offers '$s', which '$cli --help' does not list"
done
echo "ok: spillway <TAB>: $(echo $subs)"

for s in $subs; do
  opts="$(options_of "$s")"
  [ -n "$opts" ] || { missing "no options parsed from '$cli $s --help'"; continue; }
  offered="$(complete_words spillway "$s" -)"
  for o in $opts; do
    grep -qx -- "$o" <<<"$offered" || missing "'spillway $s -<TAB>' does not offer '$o'"
  done
  for o in $offered; do
    grep -qx -- "$o" <<<"$opts" || missing "'spillway $s -<TAB>' offers '$o', which '$cli $s --help' does not list"
  done
  echo "ok: spillway $s --<TAB>: $(complete_words spillway "$s" -- | tr '\n' ' ')"
done
# The brief's case by name: validate's long options.
offered="$(complete_words spillway validate --)"
for o in $(options_of validate | grep '^--'); do
  grep -qx -- "$o" <<<"$offered" || missing "'spillway validate --<TAB>' does not offer '$o'"
done

# --profile <TAB>: the profiles of the file named by --config / -c earlier on the line.
cat >"$work/p.yaml" <<'YAML'
version: 1
tiers:
  - {name: host, kind: host, capacity: 16MiB}
profiles:
  a:
    hostname: "node-a*"
    tiers:
      host: {capacity: 8MiB}
  b: {hostname: "*"}
policy:
  eviction: lru
YAML
for line in "stress --config $work/p.yaml --profile" "stress -c $work/p.yaml --profile" \
            "demo --config $work/p.yaml --profile" "validate $work/p.yaml --profile"; do
  # shellcheck disable=SC2086
  got="$(complete_words spillway $line "" | sort | tr '\n' ' ')"
  [ "$got" = "a b " ] || missing "'spillway $line <TAB>' offers '$got', expected 'a b'"
done
got="$(complete_words spillway stress --config "$work/p.yaml" --profile "" | sort | tr '\n' ' ')"
echo "ok: spillway stress --config p.yaml --profile <TAB>: $got"
# No config, or an unreadable one: nothing offered, and no error.
got="$(complete_words spillway stress --profile "" 2>&1)"
[ -z "$got" ] || missing "'spillway stress --profile <TAB>' without --config printed '$got'"
got="$(complete_words spillway stress --config "$work/none.yaml" --profile "" 2>&1)"
[ -z "$got" ] || missing "'--profile <TAB>' with a missing config printed '$got'"

# File and directory arguments.
mkdir -p "$work/tierdir"; touch "$work/tiers.yaml"
got="$(complete_words spillway inspect "$work/tie")"
[ "$got" = "$work/tierdir" ] || missing "'spillway inspect DIR<TAB>' offers '$got', expected only the directory"
got="$(complete_words spillway validate "$work/tiers.")"
[ "$got" = "$work/tiers.yaml" ] || missing "'spillway validate FILE<TAB>' offers '$got'"
got="$(complete_words spillway bench --out "$work/tie")"
[ "$got" = "$work/tierdir" ] || missing "'spillway bench --out <TAB>' offers '$got', expected the directory"

[ "$fail" = 0 ] || exit 1
echo "completion: ok"
