#!/usr/bin/env bash
# `spillway stress --seconds S` ends its run within S seconds of wall time, the
# final verification included. The engine's
# close comes after the bound (it frees every object and cannot be cut
# short): it is timed and printed, and the whole command must take no more
# than S plus that close plus start-up slack.
# The chain is built so that verifying every key takes far longer than S
# (tens of thousands of keys in a zstd file tier under a tiny host tier):
# without the bound the run overshoots by the whole verification. The run
# must still verify something, report the rest as unverified (never lost),
# and print the phases it spent the time in.
set -euo pipefail
cli="$1"
work="$(mktemp -d /var/tmp/spillway-stress-seconds-XXXXXX)"
trap 'rm -rf "$work"' EXIT
cat > "$work/slow.yaml" <<YAML
version: 1
tiers:
  - {name: host, kind: host, capacity: 2MiB}
  - {name: disk, kind: file, capacity: 8GiB, medium: ssd, codec: {name: zstd, level: 1}, paths: ["$work/disk"],
     io: {segment_size: 16MiB}}
YAML
limit=3
# Slack for what lies outside the command's own clock: exec, dynamic loading,
# exit (generous: CI runs this beside other tests, and under the sanitizers).
slack=2.0
t0=$(date +%s.%N)
out="$("$cli" stress --config "$work/slow.yaml" --threads 2 --seconds "$limit" --seed 5 --keys 60000 \
       --sizes 16KiB:128KiB --json)"
t1=$(date +%s.%N)
/usr/bin/python3 - "$out" "$t0" "$t1" "$limit" "$slack" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
t0, t1, limit, slack = map(float, sys.argv[2:])
outside = t1 - t0
close = r["phases"]["close"]
print("stress --seconds %g: run %.2f s, then close %.2f s; %.2f s measured outside; phases %s; verified %d, "
      "unverified %d, ops %d" % (limit, r["bounded_seconds"], close, outside,
                                 {k: round(v, 2) for k, v in r["phases"].items()}, r["verified"], r["unverified"],
                                 r["ops"]))
assert r["lost"] == 0 and r["corrupt"] == 0, r["first_problem"]
assert r["seconds_limit"] == limit, r["seconds_limit"]
assert set(r["phases"]) == {"open", "clear", "workload", "final flush", "verify", "stats", "close"}, r["phases"]
# The verification stops 3% (at least 50 ms) before the bound; one Get (or a
# workload operation, or the final flush) running late on a busy machine or
# under a sanitizer may still cross it: a quarter of the bound, where the run
# took 13 s for --seconds 3 before the bound existed.
assert r["bounded_seconds"] <= limit * 1.25, "run took %.2f s for --seconds %g" % (r["bounded_seconds"], limit)
assert abs(r["wall_seconds"] - r["bounded_seconds"] - close) < 0.2, r
assert outside <= limit + close + slack, "wall time %.2f s for --seconds %g + close %.2f s (slack %g s)" % (
    outside, limit, close, slack)
assert r["ops"] > 0 and r["verified"] > 0, r
PY
