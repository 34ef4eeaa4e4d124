#!/usr/bin/env bash
# A CUDA build starts on a node without CUDA: the CLI (and the Python module
# beside it) need no libcudart at load time (the runtime is linked
# statically and loads the driver itself when first called), and the CLI
# runs with every libcudart on this machine hidden (a tmpfs mounted over its
# folders in a private mount namespace, root only).
#   $1: the spillway CLI   $2: the source tree
set -uo pipefail
cli="$1"; src="$2"
if ! "$cli" --version | grep -q "CUDA: yes"; then
  echo "SKIP: this build has no CUDA (the CUDA toolkit was not found at configure time)"
  exit 77
fi
mods=("$cli")
pymod="$(find "$(dirname "$(dirname "$cli")")/python" -name '_spillway*.so' 2>/dev/null | head -1)"
[ -n "$pymod" ] && mods+=("$pymod")
for m in "${mods[@]}"; do
  if ldd "$m" | grep -E "libcudart|libcuda\.so"; then
    echo "FAIL: $m needs the CUDA runtime at load time (above)"; exit 1
  fi
done
echo "ok: no libcudart at load time: ${mods[*]}"

dirs="$(ldconfig -p | awk '/libcudart/ {print $NF}' | xargs -r -n1 readlink -f | xargs -r -n1 dirname | sort -u)"
if [ "$(id -u)" != 0 ] || ! command -v unshare >/dev/null || ! unshare -m true 2>/dev/null; then
  echo "SKIP: cannot hide the CUDA runtime here (needs root and unshare -m); the load-time check above passed"
  exit 77
fi
out="$(unshare -m bash -c '
  for d in '"$(printf '%q ' $dirs)"'; do mount -t tmpfs tmpfs "$d" || exit 3; done
  if ldconfig -p | awk "/libcudart/ {print \$NF}" | xargs -r ls 2>/dev/null | grep -q .; then exit 4; fi
  "$0" --version && "$0" validate "$1/examples/tiers.yaml"
' "$cli" "$src" 2>&1)"
rc=$?
echo "$out" | tail -5
case $rc in
  0) echo "ok: the CLI runs with libcudart hidden (${dirs:-none found})" ;;
  3) echo "SKIP: mounting over the CUDA folders failed"; exit 77 ;;
  4) echo "FAIL: libcudart still visible after hiding ${dirs}"; exit 1 ;;
  *) echo "FAIL: the CLI did not run with the CUDA runtime hidden (exit $rc)"; exit 1 ;;
esac
