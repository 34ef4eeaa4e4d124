#!/usr/bin/env bash
# `spillway bench --quick` end to end: runs every section at CI size and checks
# that every figure was produced (a value for each expected row, the markdown,
# the JSON and, when gnuplot is installed, the PNG). Missed targets do not fail
# this test: it checks that the benchmark measures, not what it measures.
#   $1: the spillway CLI   $2: the source tree (for bench/zict_peer.py)
# Exit 77 (skip) when fio, python3 or /usr/bin/python3's numpy is missing.
set -u
cli=${1:?usage: bench_quick_test.sh SPILLWAY_CLI SOURCE_DIR}
src=${2:?usage: bench_quick_test.sh SPILLWAY_CLI SOURCE_DIR}

if ! command -v fio >/dev/null; then
  echo "SKIP: fio is not installed (scripts/install-deps.sh installs it); the host -> file references need it"
  exit 77
fi
if ! command -v python3 >/dev/null; then
  echo "SKIP: python3 is not installed; the results check and the zict.File peer need it"
  exit 77
fi

if ! /usr/bin/python3 -c "import numpy" 2>/dev/null; then
  echo "SKIP: /usr/bin/python3 has no numpy (python3-numpy); the zict.File peer (bench/zict_peer.py) needs it"
  exit 77
fi

out=$(mktemp -d)
scratch=$(mktemp -d /var/tmp/spillway-bench-test.XXXXXX)
trap 'rm -rf "$out" "$scratch"' EXIT

cd "$src" || exit 1
start=$(date +%s)
SPILLWAY_BENCH_PLOT_SCRIPT="$out/plot.gp" \
  "$cli" bench --quick --json --out "$out" --dir "$scratch" --machine ci >"$out/stdout.json" 2>"$out/stderr.txt"
rc=$?
elapsed=$(( $(date +%s) - start ))
echo "spillway bench --quick: exit $rc in ${elapsed}s"
if [ "$rc" -ne 0 ]; then
  echo "FAIL: spillway bench exited $rc"
  tail -n 30 "$out/stderr.txt"
  exit 1
fi

want_png=0
command -v gnuplot >/dev/null && want_png=1
python3 - "$out" "$want_png" <<'PY'
import glob, json, math, os, re, subprocess, sys

out, want_png = sys.argv[1], sys.argv[2] == "1"
problems = []
mds = glob.glob(os.path.join(out, "ci-*.md"))
jsons = glob.glob(os.path.join(out, "ci-*.json"))
pngs = glob.glob(os.path.join(out, "ci-*.png"))
if len(mds) != 1 or os.path.getsize(mds[0]) == 0:
    problems.append("no markdown report ci-<date>.md")
if len(jsons) != 1:
    problems.append("no JSON report ci-<date>.json")
if want_png and (len(pngs) != 1 or os.path.getsize(pngs[0]) < 1000):
    problems.append("gnuplot is installed but no PNG ci-<date>.png was drawn")
if want_png:
    # The plot shows only what was measured, sizes as "4 KiB", and the build's revision in its title.
    gp = open(os.path.join(out, "plot.gp")).read() if os.path.exists(os.path.join(out, "plot.gp")) else ""
    if not gp:
        problems.append("SPILLWAY_BENCH_PLOT_SCRIPT kept no gnuplot script")
    elif "not measured" in gp:
        problems.append("the plot draws a panel that was not measured")
    elif not re.search(r"set xtics \('[0-9.]+ (B|KiB|MiB|GiB)'", gp):
        problems.append("the plot's size axes have no '4 KiB'-style ticks")
    elif not re.search(r"multiplot layout .* title 'spillway bench: ci, [^']*, [0-9a-f]{7,}", gp):
        problems.append("the plot's title names no machine, date and revision")
doc = json.load(open(jsons[0])) if jsons else {}
printed = json.load(open(os.path.join(out, "stdout.json")))
if printed.get("rows") != doc.get("rows"):
    problems.append("--json output differs from the JSON file")
# The verdict every --json output carries (docs/cli.md): true, as the exit status was 0.
if printed.get("ok") is not True or doc.get("ok") is not True:
    problems.append("--json output and the JSON file lack \"ok\": true after exit 0")
rows = {r["id"]: r for r in doc.get("rows", [])}

sizes = ["4KiB", "64KiB", "1MiB", "64MiB"]
expected = ["spill.fio.uring_write", "spill.fio.psync_write", "spill.fio.uring_read"]
expected += ["spill.write." + s for s in sizes] + ["spill.read." + s for s in sizes]
expected += ["spill.read1." + s for s in sizes]
expected += ["spill.fio.randread.4KiB", "spill.fio.randread.64KiB"]
expected += ["spill.fio.psync_read." + s for s in ("4KiB", "64KiB", "1MiB")]
expected += ["spill.fio.psync_read_jobs." + s for s in ("4KiB", "64KiB", "1MiB")]
expected += ["spill.diag.read_jobs." + s for s in sizes]
expected += ["spill.diag.get1_wait_window." + s for s in ("4KiB", "64KiB", "1MiB")]
expected += ["spill.diag.read1_raw." + s for s in sizes]
expected += ["spill.fileio.write_huge"] + ["spill.diag.write_huge." + s for s in sizes]
expected += ["spill.diag.touch1." + s for s in sizes]
expected += ["peer.write." + s for s in sizes]
for d in ["float32", "int64", "text"]:
    for c in ["zstd1", "zstd3", "lz4"]:
        expected += ["codec.%s.%s.compress" % (d, c), "codec.%s.%s.decompress" % (d, c)]
for c in ["zstd1", "zstd3", "lz4"]:
    expected += ["codec.incompressible.%s.%d" % (c, n) for n in (65536, 1048576, 16777216)]
for size in (100, 1024, 4096):
    for t in (1, 2):
        expected += ["small.put.%d.%dt" % (size, t), "small.get.%d.%dt" % (size, t)]
expected += ["memory.marginal", "scaling.count.exponent", "scaling.bytes.exponent"]

for rid in expected:
    r = rows.get(rid)
    if r is None:
        problems.append("missing figure " + rid)
        continue
    v = r.get("value")
    if v is None or not math.isfinite(v):
        problems.append("figure %s has no value (%s)" % (rid, r.get("note", "")))
    elif r.get("reference") and r.get("ratio") is None:
        problems.append("figure %s has no ratio to %s (%s)" % (rid, r["reference"], r.get("note", "")))
    if r.get("target") is not None and r.get("verdict") not in ("MET", "MISSED"):
        problems.append("figure %s has no verdict" % rid)
gpu = rows.get("gpu")
if gpu is None or not (gpu.get("skipped") or gpu.get("value") is not None):
    problems.append("no GPU row (measured or skipped with a note)")
for r in doc.get("rows", []):
    if r.get("verdict") == "NOT MEASURED":
        problems.append("not measured: %s (%s)" % (r["id"], r.get("note", "")))

# The revision the binary was built from (cmake/build_revision.cmake), named
# in the markdown; a checkout at another revision is named beside it.
details = doc.get("details", {})
rev = details.get("source_revision", "")
if not re.fullmatch(r"[0-9A-Za-z._/-]+", rev or ""):
    problems.append("no build revision in the JSON details: %r" % rev)
md = open(mds[0]).read() if mds else ""
if rev and ("- source: `%s`" % rev) not in md:
    problems.append("the markdown does not name the build revision %r" % rev)
checkout = details.get("checkout_revision")
if checkout is not None:
    if checkout == rev:
        problems.append("checkout revision reported although it equals the build's (%s)" % rev)
    if ("run in a checkout at `%s`" % checkout) not in md:
        problems.append("the markdown does not name the checkout revision %r" % checkout)
git = subprocess.run(["git", "describe", "--always", "--dirty", "--abbrev=12"], capture_output=True, text=True)
if git.returncode == 0 and rev not in ("", "unknown") and checkout is None and git.stdout.strip() != rev:
    problems.append("checkout at %s but the report names only the build's %s" % (git.stdout.strip(), rev))

met = sum(r.get("verdict") == "MET" for r in rows.values())
missed = sum(r.get("verdict") == "MISSED" for r in rows.values())
print("%d figures, %d targets met, %d missed" % (len(rows), met, missed))
if problems:
    print("FAIL:\n  " + "\n  ".join(problems))
    sys.exit(1)
print("PASS: every figure was produced")
PY
