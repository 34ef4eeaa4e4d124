#!/usr/bin/env python3
"""One Dask worker per GPU, each spilling its own device.

Runs the GPU Dask workload of bench/dask_gpu_bench.py (CuPy blocks: persist x;
x.sum() and x.sum(axis=0); (x + x.T).sum(axis=0); re-read x.sum(axis=1) and
x.max(); every result checked against a block-by-block reference) with a
SpillwayStore in each worker, chain gpu (--budget) -> host -> file:

  1x1   one worker on one GPU, working set W = --scale x --budget
  2x2   two workers, each on its own GPU, working set 2W (each worker holds W)
  1x2   one worker on one GPU, working set 2W (--no-single-2x leaves it out)

Workers are started as dask-cuda does: one Nanny process each, its
CUDA_VISIBLE_DEVICES listing its own GPU first, so every worker sees its GPU
as device 0; the config says `device: auto` and the worker's index reaches
the loader as $SPILLWAY_WORKER_INDEX (docs/config.md, "One worker per GPU").
After persist and at the end, every worker checks every object in its gpu
tier (Engine.check_devices: the device recorded for the object and the device
cudaPointerGetAttributes reports for its memory, compared by UUID) and the
bench checks that each worker's tier is on that worker's own GPU and that no
two workers share one. Peak memory in use on every GPU is sampled too.

    PYTHONPATH=pydeps/site:build-py/python python3 bench/dask_multigpu_bench.py \\
        --budget 8GiB --scale 3 --out bench/results/dask-multigpu-$(date +%F).md

Exit status: 0 all runs correct and every object on its worker's GPU; 1 a run
failed, gave wrong results or found an object elsewhere; 2 fewer than two
GPUs visible ("needs 2 GPUs, found N") or bad options.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
import threading
import time


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

GiB = 1 << 30
MiB = 1 << 20


def gpu_count():
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount(), ""
    except Exception as e:  # no CuPy, no driver, no device
        return 0, f"{type(e).__name__}: {e}"


def uuid_of(device):
    """The device's UUID as nvidia-smi -L prints it (GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)."""
    import cupy

    raw = cupy.cuda.runtime.getDeviceProperties(device)["uuid"]
    h = bytes(raw).hex() if not isinstance(raw, str) else raw.encode("latin-1").hex()
    return f"GPU-{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def worker_config(args, workers, data_per_worker):
    return {
        "version": 1,
        "defaults": {"workers_per_node": workers},
        "tiers": [
            {"name": "gpu", "kind": "gpu", "device": "auto", "capacity": args.budget},
            {"name": "host", "kind": "host", "capacity": args.host_budget or (data_per_worker + args.budget)},
            {"name": "disk", "kind": "file", "capacity": max(2 * data_per_worker, 4 * GiB),
             "paths": ["${SPILLWAY_WORKER_DIR}"]},
        ],
    }


def probe_worker(dask_worker):
    """Runs in each worker (client.run): who it is, which GPU it sees first, and
    the engine's device check over every stored object."""
    import os as _os

    out = {"name": str(dask_worker.name), "pid": _os.getpid(),
           "cuda_visible_devices": _os.environ.get("CUDA_VISIBLE_DEVICES"),
           "worker_index": _os.environ.get("SPILLWAY_WORKER_INDEX")}
    try:
        out["own_uuid"] = uuid_of(0)
    except Exception as e:
        out["own_uuid"] = None
        out["error"] = f"uuid: {type(e).__name__}: {e}"
    engine = getattr(dask_worker.data, "engine", None)
    check = getattr(engine, "check_devices", None)
    if check is None:
        out["error"] = ("the spillway module has no Engine.check_devices (the binding of C++ "
                        "Engine::CheckDevices; see docs/python.md)")
        return out
    out["check"] = check()
    return out


def judge(probes):
    """Problems with the placement (empty: every object on its worker's own GPU)."""
    bad, seen = [], {}
    for p in probes:
        if p.get("error"):
            bad.append(f"{p['name']}: {p['error']}")
            continue
        for t in p["check"]["tiers"]:
            if t["uuid"] != p["own_uuid"]:
                bad.append(f"{p['name']}: tier {t['tier']} is on {t['uuid']}, the worker's GPU is {p['own_uuid']}")
            if t["misplaced"]:
                bad.append(f"{p['name']}: {t['misplaced']} of {t['objects']} objects off the device: "
                           f"{p['check'].get('first_problem', '')}")
            if t["uuid"] in seen and seen[t["uuid"]] != p["name"]:
                bad.append(f"{p['name']} and {seen[t['uuid']]} share {t['uuid']}")
            seen[t["uuid"]] = p["name"]
    return bad


class GpuSampler:
    """Peak memory in use on every visible GPU (cudaMemGetInfo from this process)."""

    def __init__(self, devices, interval=0.05):
        self.devices, self.interval = devices, interval
        self.peak = {d: 0 for d in devices}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _used(self, d):
        import cupy

        with cupy.cuda.Device(d):
            free, total = cupy.cuda.runtime.memGetInfo()
        return total - free

    def _run(self):
        while not self._stop.is_set():
            for d in self.devices:
                self.peak[d] = max(self.peak[d], self._used(d))
            self._stop.wait(self.interval)

    def __enter__(self):
        self.base = {d: self._used(d) for d in self.devices}
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def start_cluster(n_workers, args, config, workdir, gpus):
    from distributed import Nanny, Scheduler, SpecCluster
    from spillway.dask import SpillwayStore

    visible = [str(g) for g in gpus]
    workers = {}
    for i in range(n_workers):
        order = visible[i:] + visible[:i]  # dask-cuda's order: the worker's own GPU first
        workers[f"gpu-worker-{i}"] = {
            "cls": Nanny,
            "options": {"nthreads": args.threads, "memory_limit": 0, "name": i,
                        "local_directory": os.path.join(workdir, f"w{i}"),
                        "env": {"CUDA_VISIBLE_DEVICES": ",".join(order), "SPILLWAY_WORKER_INDEX": str(i)},
                        "data": (SpillwayStore, {"config": config, "log_interval": 0})},
        }
    return SpecCluster(scheduler={"cls": Scheduler, "options": {"dashboard_address": None}}, workers=workers)


def run(label, n_workers, n_gpus, nb, args, ref, workdir, g):
    from distributed import Client

    data = nb * nb * args.chunk * args.chunk * 4
    res = {"run": label, "workers": n_workers, "gpus": n_gpus, "data_bytes": data, "blocks": nb}
    config = worker_config(args, n_workers, data // n_workers)
    run_dir = tempfile.mkdtemp(prefix=f"{label}-", dir=workdir)
    xp = g.Xp("cupy")
    try:
        with start_cluster(n_workers, args, config, run_dir, list(range(n_gpus))) as cluster, \
                Client(cluster) as client, GpuSampler(list(range(args.gpus_visible))) as sampler:
            client.wait_for_workers(n_workers)
            probe = lambda name: res.__setitem__(name, list(client.run(probe_worker).values()))  # noqa: E731
            t0 = time.perf_counter()
            times, out = g.run_workload(client, nb, args.chunk, args.seed, xp,
                                        after_persist=lambda: probe("probe_after_persist"),
                                        at_end=lambda: probe("probe_at_end"))
            res["wall"] = time.perf_counter() - t0
            res["total"] = sum(times.values())  # the probes are not timed
            res["times"] = times
        res["peak_gpu_over_start"] = {d: max(0, sampler.peak[d] - sampler.base[d]) for d in sampler.peak}
        res["errors"] = g.check(out, ref)
        res["placement"] = judge(res["probe_after_persist"]) + judge(res["probe_at_end"])
    except Exception as e:
        logging.exception("run %s failed", label)
        res["failed"] = f"{type(e).__name__}: {e}"
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    return res


def write_report(path, args, env, results, uuids):
    g_fmt = lambda n: f"{n / GiB:.2f} GiB"  # noqa: E731
    lines = [f"# Dask, one worker per GPU ({time.strftime('%Y-%m-%d')})", "",
             "bench/dask_multigpu_bench.py: the GPU Dask workload with a SpillwayStore per worker, "
             f"gpu tier {g_fmt(args.budget)} per worker (`device: auto`), working set W = {args.scale:g} x budget "
             "per worker; every object in every gpu tier checked against its worker's own GPU by UUID.", "",
             "Environment: " + ", ".join(f"{k} {v}" for k, v in env.items()), "",
             "GPUs: " + ", ".join(f"{d}: {u}" for d, u in enumerate(uuids)), "",
             "| run | workers x GPUs | data | total s | persist | reduce | transpose-add | re-read | results "
             "| placement | peak per GPU |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        if r.get("failed"):
            lines.append(f"| {r['run']} | {r['workers']} x {r['gpus']} | {g_fmt(r['data_bytes'])} | failed: "
                         f"{r['failed']} | | | | | | | |")
            continue
        t = r["times"]
        peaks = ", ".join(f"{d}: {g_fmt(v)}" for d, v in r["peak_gpu_over_start"].items())
        lines.append(f"| {r['run']} | {r['workers']} x {r['gpus']} | {g_fmt(r['data_bytes'])} | {r['total']:.2f} | "
                     f"{t['persist']:.2f} | {t['reduce']:.2f} | {t['transpose-add']:.2f} | {t['re-read']:.2f} | "
                     f"{'correct' if not r['errors'] else '; '.join(r['errors'])} | "
                     f"{'every object on its own GPU' if not r['placement'] else '; '.join(r['placement'])} | "
                     f"{peaks} |")
    lines += ["", "Objects checked (after persist, at the end), per worker: " + "; ".join(
        f"{r['run']}: " + ", ".join(f"{p['name']} on {p.get('own_uuid')} "
                                    f"{[t['objects'] for t in p.get('check', {}).get('tiers', [])]}"
                                    for p in r.get("probe_after_persist", []))
        for r in results if not r.get("failed")), ""]
    by = {r["run"]: r for r in results if not r.get("failed")}
    if "1x1" in by and "2x2" in by:
        lines.append(f"2 workers on 2 GPUs with twice the data take {by['2x2']['total'] / by['1x1']['total']:.2f}x "
                     "the time of 1 worker on 1 GPU (1.00x: perfect weak scaling).")
    if "1x2" in by and "2x2" in by:
        lines.append(f"The same 2W on one GPU takes {by['1x2']['total'] / by['2x2']['total']:.2f}x the time of "
                     "two workers on two GPUs.")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="markdown report to write")
    p.add_argument("--budget", default="8GiB", help="gpu tier of each worker")
    p.add_argument("--scale", type=float, default=3.0, help="working set per worker / budget")
    p.add_argument("--chunk", type=int, default=0, help="block side in elements (default: about 10x10 blocks for W)")
    p.add_argument("--host-budget", default="none", help="host tier of each worker (none: its data + budget)")
    p.add_argument("--threads", type=int, default=2, help="threads per worker")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--no-single-2x", action="store_true", help="leave out 1x2 (one GPU, twice the data)")
    p.add_argument("--workdir", default=os.environ.get("SPILLWAY_TEST_DIR", "/var/tmp"))
    p.add_argument("--verbose", action="store_true")
    args = p.parse_args()

    n, why = gpu_count()
    if n < 2:
        print(f"dask_multigpu_bench: needs 2 GPUs, found {n}" + (f" ({why})" if why else ""), file=sys.stderr)
        return 2
    args.gpus_visible = n

    import distributed  # noqa: F401  (configures its loggers on import; set the levels after)

    import dask_gpu_bench as g

    logging.basicConfig(level=logging.INFO if args.verbose else logging.ERROR)
    for name in ("distributed", "tornado"):
        logging.getLogger(name).setLevel(logging.INFO if args.verbose else logging.ERROR)
    args.budget = g.parse_size(args.budget)
    args.host_budget = g.parse_size(args.host_budget)
    want = args.budget * args.scale
    args.chunk = args.chunk or max(256, int((want / 4) ** 0.5) // 10 // 256 * 256)
    nb1 = max(2, round((want / 4) ** 0.5 / args.chunk))
    nb2 = max(nb1 + 1, round(nb1 * 2 ** 0.5))  # about twice the blocks
    xp = g.Xp("cupy")
    uuids = [uuid_of(d) for d in range(n)]
    env = g.environment(xp)
    env["gpus"] = n
    os.makedirs(args.workdir, exist_ok=True)
    workdir = tempfile.mkdtemp(prefix="dask-multigpu-bench-", dir=args.workdir)
    results = []
    try:
        refs = {}
        for nb in {nb1, nb2}:
            t = time.perf_counter()
            refs[nb] = g.reference(nb, args.chunk, args.seed, xp)
            print(f"reference {nb}x{nb} blocks of {args.chunk} in {time.perf_counter() - t:.1f} s", flush=True)
        plan = [("1x1", 1, 1, nb1), ("2x2", 2, 2, nb2)] + ([] if args.no_single_2x else [("1x2", 1, 1, nb2)])
        for label, workers, gpus, nb in plan:
            print(f"== {label}: {workers} worker(s) on {gpus} GPU(s), {nb}x{nb} blocks", flush=True)
            r = run(label, workers, gpus, nb, args, refs[nb], workdir, g)
            print(json.dumps(r, default=str), flush=True)
            results.append(r)
            write_report(args.out, args, env, results, uuids)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    bad = [r for r in results if r.get("failed") or r.get("errors") or r.get("placement")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
