#!/usr/bin/env python3
"""Dask spilling benchmark: Dask's default worker spilling against spillway.

Runs the same workloads on the same LocalCluster shape twice in one run:
  dask      - the default Worker.data, zict's SpillBuffer: live objects up to
              the memory target (60% of the memory limit), then one pickled
              file per key on disk, written synchronously on the event loop;
  spillway  - spillway.dask.SpillwayStore: every value serialized into one
              multi-buffer object in a host tier, demoted by the engine's
              background mover to a file tier (packed segments, io_uring).
Both use the same worker memory limit and Dask's default thresholds. The
workloads' data is `--scale` times the workers' memory limits together, so
both must spill heavily. Results are checked equal between the two modes.

    PYTHONPATH=build/python /usr/bin/python3 bench/dask_bench.py            # defaults below
    ... --memory-limit 1GiB --scale 2.5 --repeat 2 --workloads array,dataframe

Prints a table and writes bench/results/dask-<date>.md (--out to change).
Ratio = dask seconds / spillway seconds (> 1: spillway faster); target 2x.
"""
import argparse
import datetime
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

MiB = 1 << 20


def parse_bytes(text):
    from dask.utils import parse_bytes as pb

    return pb(text)


# ---- workloads ---------------------------------------------------------------
# Each returns ({phase: seconds}, check) where check is a small value compared
# between modes.

def array_workload(client, data_bytes):
    import dask
    import dask.array as da
    from distributed import wait

    chunk = 1024  # 8 MiB float64 blocks
    n = max(chunk, int((data_bytes / 8) ** 0.5) // chunk * chunk)
    times = {}
    t = time.perf_counter()
    x = da.random.RandomState(7).random_sample((n, n), chunks=(chunk, chunk)).persist()
    wait(x)
    times["persist"] = time.perf_counter() - t
    t = time.perf_counter()
    total, colsum = dask.compute(x.sum(), (x + x.T).sum(axis=0))
    times["x+x.T reductions"] = time.perf_counter() - t
    t = time.perf_counter()
    y = (x * 2 - 1).persist()  # a second array as large as the first
    wait(y)
    ymean = y.mean(axis=1).compute()
    times["derived array"] = time.perf_counter() - t
    check = (float(total), float(colsum.sum()), float(ymean.sum()), x.nbytes + y.nbytes)
    client.cancel([x, y])
    del x, y
    return times, check


def make_partition(i, rows):
    import pandas as pd

    rng = np.random.default_rng(5000 + i)
    return pd.DataFrame({
        "key": rng.integers(0, 1000, rows),
        "x": rng.random(rows),
        "y": rng.standard_normal(rows),
        "z": rng.integers(0, 1 << 40, rows),
    })


def dataframe_workload(client, data_bytes):
    import dask
    import dask.dataframe as dd
    from distributed import wait

    rows = 500_000  # 32 bytes a row: 15 MiB partitions
    parts = max(4, int(data_bytes // (rows * 32)))
    meta = make_partition(0, 0)
    times = {}
    t = time.perf_counter()
    ddf = dd.from_delayed([dask.delayed(make_partition)(i, rows) for i in range(parts)], meta=meta).persist()
    wait(ddf)
    times["persist"] = time.perf_counter() - t
    t = time.perf_counter()
    grouped, positive = dask.compute(ddf.groupby("key").agg({"x": "sum", "y": "mean", "z": "max"}),
                                     ddf[ddf.y > 0].x.mean())
    times["groupby+filter"] = time.perf_counter() - t
    t = time.perf_counter()
    derived = ddf.assign(w=ddf.x * ddf.y + 1).persist()
    wait(derived)
    wsum = derived.w.sum().compute()
    times["derived frame"] = time.perf_counter() - t
    check = (float(grouped.x.sum()), float(grouped.z.sum()), float(positive), float(wsum), parts * rows)
    client.cancel([ddf, derived])
    del ddf, derived
    return times, check


WORKLOADS = {"array": array_workload, "dataframe": dataframe_workload}


# ---- clusters ------------------------------------------------------------------

SPILLWAY_CONFIG = """\
# dask_bench.py: host tier below the worker memory limit over a file tier
# in each worker's directory.
version: 1
tiers:
  - name: host
    kind: host
    capacity: {host}
  - name: disk
    kind: file
    capacity: 64GiB
    paths: ["${{SPILLWAY_WORKER_DIR}}/disk"]
    codec: {codec}
    io: {{direct: {direct}}}
policy:
  promote_on_read: {promote}
"""


def start_cluster(mode, args, workdir):
    from distributed import Client, LocalCluster

    kwargs = dict(n_workers=args.workers, threads_per_worker=args.threads, processes=True,
                  memory_limit=args.memory_limit, dashboard_address=":0",
                  local_directory=os.path.join(workdir, mode))
    if mode == "spillway":
        from spillway.dask import SpillwayStore

        cfg = os.path.join(workdir, "tiers.yaml")
        with open(cfg, "w") as f:
            f.write(SPILLWAY_CONFIG.format(host=args.host_tier_bytes, codec=args.codec,
                                           promote=str(args.promote_on_read).lower(),
                                           direct=str(not args.buffered).lower()))
        kwargs["data"] = (SpillwayStore, {"config": cfg, "log_interval": 0})
    cluster = LocalCluster(**kwargs)
    return cluster, Client(cluster)


def spill_metrics(client):
    def collect(dask_worker):
        data = dask_worker.data
        m = data.get_metrics() if hasattr(data, "get_metrics") else {}
        return {k: m.get(k, 0) for k in ("disk_write_count_total", "disk_write_bytes_total",
                                         "disk_read_count_total", "disk_read_bytes_total")}

    per_worker = client.run(collect)
    out = {}
    for m in per_worker.values():
        for k, v in m.items():
            out[k] = out.get(k, 0) + v
    return out


def peak_rss(client):
    """Largest worker RSS sampled by Dask's system monitor so far (bytes)."""
    return max(client.run(lambda dask_worker: max(dask_worker.monitor.quantities["memory"], default=0)).values())


def run_mode(mode, args, workdir, workloads):
    cluster, client = start_cluster(mode, args, workdir)
    results = {}
    try:
        for name in workloads:
            before = spill_metrics(client)
            t = time.perf_counter()
            phases, check = WORKLOADS[name](client, args.data_bytes)
            total = time.perf_counter() - t
            after = spill_metrics(client)
            spilled = {k: after[k] - before.get(k, 0) for k in after}
            rss = peak_rss(client)
            results[name] = {"phases": phases, "total": total, "check": check, "spill": spilled, "rss": rss}
            print(f"  {mode:9s} {name:10s} {total:7.1f} s  "
                  + "  ".join(f"{p} {s:.1f}s" for p, s in phases.items())
                  + f"  | disk writes {spilled['disk_write_count_total']:.0f}"
                    f" ({spilled['disk_write_bytes_total'] / MiB:.0f} MiB),"
                    f" reads {spilled['disk_read_count_total']:.0f}; peak worker RSS {rss / MiB:.0f} MiB", flush=True)
    finally:
        client.close()
        cluster.close()
    return results


def checks_match(a, b):
    return all(np.isclose(x, y, rtol=1e-6) for x, y in zip(a, b))


# ---- report --------------------------------------------------------------------

def render(args, runs, workloads, load_before, load_after, started):
    def median(mode, wl, key=None):
        vals = [r[mode][wl]["total"] if key is None else r[mode][wl]["phases"][key] for r in runs]
        return statistics.median(vals)

    lines = []
    lines.append("| workload | phase | dask default (s) | spillway (s) | ratio dask/spillway |")
    lines.append("| --- | --- | ---: | ---: | ---: |")
    total_d = total_s = 0.0
    for wl in workloads:
        for phase in runs[0]["dask"][wl]["phases"]:
            d, s = median("dask", wl, phase), median("spillway", wl, phase)
            lines.append(f"| {wl} | {phase} | {d:.2f} | {s:.2f} | {d / s:.2f}x |")
        d, s = median("dask", wl), median("spillway", wl)
        total_d += d
        total_s += s
        lines.append(f"| **{wl}** | **end to end** | **{d:.2f}** | **{s:.2f}** | **{d / s:.2f}x** |")
    ratio = total_d / total_s
    lines.append(f"| **all** | **end to end** | **{total_d:.2f}** | **{total_s:.2f}** | **{ratio:.2f}x** |")
    table = "\n".join(lines)

    spill_lines = ["| workload | mode | disk writes | written | disk reads | read | peak worker RSS |",
                   "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for wl in workloads:
        for mode in ("dask", "spillway"):
            s = runs[-1][mode][wl]["spill"]
            spill_lines.append(f"| {wl} | {mode} | {s['disk_write_count_total']:.0f} | "
                               f"{s['disk_write_bytes_total'] / MiB:.0f} MiB | {s['disk_read_count_total']:.0f} | "
                               f"{s['disk_read_bytes_total'] / MiB:.0f} MiB | "
                               f"{runs[-1][mode][wl]['rss'] / MiB:.0f} MiB |")
    import dask
    import distributed

    verdict = "met" if ratio >= 2.0 else "missed"
    md = f"""# Dask spilling: default (zict SpillBuffer) vs spillway SpillwayStore

Run {started:%Y-%m-%d %H:%M} with `bench/dask_bench.py {' '.join(sys.argv[1:])}`.

- Machine: {platform.node()}, {os.cpu_count()} cores, {_meminfo()}, Linux {platform.release()};
  load average {load_before} before, {load_after} after (the machine is shared: absolute times are noisy,
  the ratio is measured in the same run).
- Python {platform.python_version()}, dask {dask.__version__}, distributed {distributed.__version__}, numpy {np.__version__}.
- Cluster: LocalCluster, {args.workers} worker processes x {args.threads} thread, memory_limit
  {args.memory_limit_bytes / MiB:.0f} MiB each,
  Dask's default thresholds (target 0.6, spill 0.7, pause 0.8). Dask default: SpillBuffer target
  {0.6 * args.memory_limit_bytes / MiB:.0f} MiB of live objects per worker, files in the worker directory.
  spillway: host tier {args.host_tier_bytes / MiB:.0f} MiB per worker over a file tier (codec {args.codec},
  promote_on_read {str(args.promote_on_read).lower()}, {"buffered I/O" if args.buffered else "O_DIRECT"}) in the
  worker directory ({args.dir}).
- Data: {args.data_bytes / MiB:.0f} MiB per workload, {args.scale}x the memory limits of all workers together
  (>= 4x Dask's in-memory targets). Median of {len(runs)} run(s); results checked equal between modes.

{table}

Target: 2x end to end. **{verdict}**: {ratio:.2f}x overall.

Each run, end to end (s):

{per_run_text(runs, workloads)}

Spilling done (last run):

{spill_lines_text(spill_lines)}
"""
    return md, table, ratio, verdict


def per_run_text(runs, workloads):
    lines = ["| run | " + " | ".join(f"{wl} dask | {wl} spillway" for wl in workloads) + " |",
             "| --- |" + " ---: | ---: |" * len(workloads)]
    for i, run in enumerate(runs, 1):
        cells = []
        for wl in workloads:
            cells += [f"{run['dask'][wl]['total']:.1f}", f"{run['spillway'][wl]['total']:.1f}"]
        lines.append(f"| {i} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def spill_lines_text(lines):
    return "\n".join(lines)


def _meminfo():
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
        return f"{kb / (1 << 20):.0f} GiB RAM"
    except OSError:
        return "unknown RAM"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--threads", type=int, default=1, help="threads per worker")
    p.add_argument("--memory-limit", default="768MiB", help="per worker, both modes")
    p.add_argument("--host-tier", default=None,
                   help="spillway host tier per worker (default: a third of the memory limit, so worker RSS stays "
                        "under Dask's pause threshold)")
    p.add_argument("--codec", default="none", help="file tier codec: none, lz4, zstd")
    p.add_argument("--promote-on-read", action="store_true",
                   help="spillway policy.promote_on_read (default off: Dask reads a result a few times, and a promoted "
                        "object is written to disk again when demoted)")
    p.add_argument("--buffered", action="store_true",
                   help="spillway file tier with buffered I/O (io.direct false: the page cache, as Dask's spill "
                        "files use) instead of O_DIRECT")
    p.add_argument("--scale", type=float, default=2.5, help="data per workload / all workers' memory limits")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--workloads", default="array,dataframe")
    p.add_argument("--modes", default="dask,spillway")
    p.add_argument("--dir", default=None, help="where workers spill (default: a temporary folder under /var/tmp)")
    p.add_argument("--out", default=None, help="markdown report (default bench/results/dask-<date>.md)")
    args = p.parse_args()

    args.memory_limit_bytes = parse_bytes(args.memory_limit)
    args.memory_limit = args.memory_limit_bytes
    args.host_tier_bytes = parse_bytes(args.host_tier) if args.host_tier else args.memory_limit_bytes // 3 // MiB * MiB
    args.data_bytes = int(args.scale * args.workers * args.memory_limit_bytes)
    workloads = [w for w in args.workloads.split(",") if w]
    modes = [m for m in args.modes.split(",") if m]
    for w in workloads:
        if w not in WORKLOADS:
            p.error(f"unknown workload {w!r}; choose from {', '.join(WORKLOADS)}")

    created = args.dir is None
    workdir = args.dir or tempfile.mkdtemp(prefix="spillway-dask-bench-", dir="/var/tmp")
    args.dir = workdir
    os.makedirs(workdir, exist_ok=True)
    started = datetime.datetime.now()
    load_before = "%.1f/%.1f/%.1f" % os.getloadavg()
    print(f"dask_bench: {args.workers} workers x {args.memory_limit_bytes / MiB:.0f} MiB, "
          f"{args.data_bytes / MiB:.0f} MiB per workload, spillway host tier {args.host_tier_bytes / MiB:.0f} MiB, "
          f"dir {workdir}", flush=True)
    runs = []
    try:
        for rep in range(args.repeat):
            run = {}
            # Alternate the order so drift on a shared machine hits both modes.
            for mode in modes if rep % 2 == 0 else list(reversed(modes)):
                run[mode] = run_mode(mode, args, workdir, workloads)
            runs.append(run)
    finally:
        shutil.rmtree(workdir if created else os.path.join(workdir, "dask"), ignore_errors=True)
        if not created:
            shutil.rmtree(os.path.join(workdir, "spillway"), ignore_errors=True)
    if set(modes) != {"dask", "spillway"}:
        return 0
    for run in runs:
        for wl in workloads:
            a, b = run["dask"][wl]["check"], run["spillway"][wl]["check"]
            if not checks_match(a, b):
                print(f"dask_bench: RESULTS DIFFER for {wl}: dask {a} spillway {b}", file=sys.stderr)
                return 1
    load_after = "%.1f/%.1f/%.1f" % os.getloadavg()
    md, table, ratio, verdict = render(args, runs, workloads, load_before, load_after, started)
    print()
    print(table)
    print(f"\ntarget 2x end to end: {verdict} ({ratio:.2f}x)")
    out = args.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                   f"dask-{started:%Y-%m-%d}.md")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        f.write(md)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
