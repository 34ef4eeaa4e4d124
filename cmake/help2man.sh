#!/usr/bin/env bash
# help2man wrapper: a man page for `spillway` or one subcommand. help2man runs
# a program with --help and --version, so a subcommand gets a two-line shim.
# Usage: help2man.sh HELP2MAN SPILLWAY VERSION SUBCOMMAND|"" OUTPUT
set -euo pipefail
help2man=$1 cli=$2 version=$3 sub=$4 out=$5
shim_dir=$(mktemp -d)
trap 'rm -rf "$shim_dir"' EXIT
if [ -z "$sub" ]; then
  name="tiered storage engine for GPU memory, host memory and disks"
  prog=spillway
else
  name="spillway $sub"
  prog=spillway-$sub
fi
# The shim is named like the page, so help2man's NAME section reads right.
cat >"$shim_dir/$prog" <<SH
#!/bin/sh
if [ "\$1" = --version ]; then echo "spillway $version"; exit 0; fi
exec "$cli" $sub --help
SH
chmod +x "$shim_dir/$prog"
if [ -n "$sub" ]; then name=$("$cli" help | awk -v s="$sub" '$1 == s { $1 = ""; sub(/^ +/, ""); print }'); fi
"$help2man" --no-info --no-discard-stderr --name="$name" --version-string="$version" \
  --source="spillway $version" --section=1 -o "$out" "$shim_dir/$prog"
