#!/usr/bin/env bash
# The metrics as a node's collectors see them:
#  1. metrics.listen: `spillway stress` serves /metrics on 127.0.0.1; the
#     scrape must pass `promtool check metrics` (Debian: prometheus).
#  2. two engines (two processes, default labels) write textfiles into one
#     directory; node_exporter's textfile collector (Debian:
#     prometheus-node-exporter) must serve both with no "was collected before"
#     error.
# A missing promtool or node_exporter skips that part visibly (exit 77 when
# both are missing). Bounded: every wait is a loop with a deadline.
# Usage: metrics_scrape_test.sh SPILLWAY_CLI SOURCE_DIR
set -u
cli=$1
python=/usr/bin/python3
tmp=$(mktemp -d "${SPILLWAY_TEST_DIR:-/var/tmp}/spillway-scrape-XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
failures=0
skipped=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
free_port() { "$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# GET http://127.0.0.1:$1$2 into $3; prints the HTTP status (000 when unreachable).
fetch() {
  "$python" - "$1" "$2" "$3" <<'PY'
import sys, urllib.request, urllib.error
port, path, out = sys.argv[1:]
try:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
        open(out, "wb").write(r.read()); print(r.status)
except urllib.error.HTTPError as e:
    open(out, "wb").write(e.read()); print(e.code)
except Exception:
    print("000")
PY
}
config() {  # config NAME [extra metrics lines...]
  local name=$1; shift
  {
    echo "version: 1"
    echo "tiers:"
    echo "  - {name: host, kind: host, capacity: 4MiB}"
    echo "  - {name: disk, kind: file, capacity: 256MiB, medium: ssd, codec: lz4, paths: [\"$tmp/$name-disk\"]}"
    echo "metrics:"
    for l in "$@"; do echo "  $l"; done
  } >"$tmp/$name.yaml"
}

# ---- 1. the pull endpoint, checked by promtool
if ! command -v promtool >/dev/null; then
  echo "SKIP (part 1): promtool not installed (apt-get install prometheus)"
  skipped=$((skipped + 1))
else
  port=$(free_port)
  config http "listen: 127.0.0.1:$port" "labels: {worker: w1}"
  "$cli" stress --config "$tmp/http.yaml" --seconds 8 --threads 1 --sizes 4KiB:256KiB >"$tmp/http.out" 2>&1 &
  pids+=($!)
  status=000
  for _ in $(seq 1 50); do  # at most ~5 s for the engine to open
    sleep 0.1
    status=$(fetch "$port" /metrics "$tmp/scrape.prom")
    [ "$status" = 200 ] && grep -q 'spillway_requests_total{worker="w1",op="put"} [1-9]' "$tmp/scrape.prom" && break
  done
  if [ "$status" != 200 ]; then
    fail "GET /metrics on 127.0.0.1:$port answered $status"; cat "$tmp/http.out"
  else
    grep -q '^spillway_build_info{worker="w1",version="' "$tmp/scrape.prom" || fail "no spillway_build_info with the label"
    if promtool check metrics <"$tmp/scrape.prom" >"$tmp/promtool.txt" 2>&1; then
      echo "ok: /metrics on 127.0.0.1:$port ($(wc -l <"$tmp/scrape.prom") lines) passes promtool check metrics"
    else
      fail "promtool check metrics:"; head -20 "$tmp/promtool.txt"
    fi
    [ "$(fetch "$port" /nothing "$tmp/404.txt")" = 404 ] || fail "GET /nothing is not 404"
  fi
fi

# ---- 2. two engines' textfiles through node_exporter
exporter=$(command -v prometheus-node-exporter || command -v node_exporter || true)
if [ -z "$exporter" ]; then
  echo "SKIP (part 2): prometheus-node-exporter not installed (apt-get install prometheus-node-exporter)"
  skipped=$((skipped + 1))
else
  mkdir -p "$tmp/textfile"
  for w in a b; do
    config "$w" "prometheus_file: $tmp/textfile/$w.prom" "dump_interval_s: 1"
    "$cli" stress --config "$tmp/$w.yaml" --ops 3000 --threads 1 --sizes 4KiB:256KiB >"$tmp/$w.out" 2>&1 ||
      fail "stress for engine $w failed: $(tail -3 "$tmp/$w.out")"
  done
  port=$(free_port)
  "$exporter" --web.listen-address="127.0.0.1:$port" --collector.disable-defaults --collector.textfile \
    --collector.textfile.directory="$tmp/textfile" >"$tmp/exporter.log" 2>&1 &
  pids+=($!)
  status=000
  for _ in $(seq 1 50); do
    sleep 0.1
    status=$(fetch "$port" /metrics "$tmp/node.prom")
    [ "$status" = 200 ] && break
  done
  if [ "$status" != 200 ]; then
    fail "node_exporter on 127.0.0.1:$port answered $status: $(head -c 600 "$tmp/node.prom")"
  elif grep -q "was collected before" "$tmp/node.prom" "$tmp/exporter.log"; then
    fail "node_exporter rejected the two files: $(grep -m3 "was collected before" "$tmp/node.prom" "$tmp/exporter.log")"
  else
    engines=$(grep -o '^spillway_objects{engine="[^"]*"}' "$tmp/node.prom" | sort -u | wc -l)
    errors=$(grep -E '^node_textfile_scrape_error ' "$tmp/node.prom" | awk '{print $2}')
    if [ "$engines" != 2 ] || [ "$errors" != 0 ]; then
      fail "node_exporter served $engines engines' spillway_objects (want 2), node_textfile_scrape_error=$errors"
    else
      echo "ok: node_exporter serves both engines' textfiles (node_textfile_scrape_error 0)"
    fi
  fi
fi

[ "$failures" -eq 0 ] || exit 1
[ "$skipped" -lt 2 ] || exit 77
exit 0
