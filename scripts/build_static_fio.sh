#!/usr/bin/env bash
# Builds a statically linked fio from Debian 12's source package into
# build-gpu/fio/fio, for machines without fio (the H200 machine: carry
# build-gpu/fio and put it first on PATH before `spillway bench`).
# Needs network access to the Debian mirrors and a C toolchain; about two
# minutes on two cores.
set -euo pipefail
cd "$(dirname "$0")/.."
out="$PWD/build-gpu/fio"
work="$(mktemp -d /var/tmp/fio-src-XXXXXX)"
trap 'rm -rf "$work"' EXIT
# A deb-src list for bookworm, used only by this script's apt calls.
cat > "$work/src.sources" <<SRC
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
mkdir -p "$work/lists/partial"
apt_opts=(-o Dir::Etc::SourceList="$work/src.sources" -o Dir::Etc::SourceParts=/dev/null
          -o Dir::State::Lists="$work/lists")
apt-get "${apt_opts[@]}" update -qq
(cd "$work" && apt-get "${apt_opts[@]}" source --download-only fio >/dev/null)
tar xzf "$work"/fio_*.orig.tar.gz -C "$work"
src="$(find "$work" -mindepth 1 -maxdepth 1 -type d -name 'fio-*' | head -n 1)"
# --disable-native: the binary runs on another machine's CPU.
(cd "$src" && ./configure --build-static --disable-native >/dev/null && make -j "$(nproc)" fio >/dev/null)
mkdir -p "$out"
cp "$src/fio" "$out/fio"
strip "$out/fio"
"$out/fio" --version
