#!/usr/bin/env python3
"""GPU Dask benchmark: one workload on CuPy chunks, three ways to hold it.

The same device budget for every mode, a working set `--scale` times it:
  spillway          (a) spillway.dask.SpillwayStore, chain gpu (budget) -> host -> file;
  dask-cuda         (b) dask-cuda's DeviceHostFile design (bench/device_host_file.py):
                        device LRU -> Dask "dask" serialization (cupy.asnumpy) ->
                        host LRU -> zict File;
  managed           (c) CUDA managed memory: CuPy's managed allocator, the store
                        evicts cold allocations by cudaMemPrefetchAsync to the host
                        and lets the GPU fault them back (bench/managed_store.py);
  managed-prefetch  (c) the same, prefetching evicted values back before use.
Workload (float32, `--chunk`-square blocks): persist x; x.sum() and x.sum(axis=0);
(x + x.T).sum(axis=0); re-read x.sum(axis=1) and x.max(). Every result is checked
against a reference computed block by block without Dask.

Each mode runs on its own LocalCluster (one worker, in-process, no memory limit:
the stores enforce the budgets). Managed memory is capped by a CuPy pool limit
below half the card's free memory (driver-paged oversubscription can hang the GPU).
Mode (a) is skipped, with the reason, when the module is missing or the store does
not keep CuPy values on the device.

    PYTHONPATH=pydeps/site:build-py/python python3 bench/dask_gpu_bench.py \
        --budget 8GiB --scale 3 --out bench/results/dask-gpu-$(date +%F).md
    python3 bench/dask_gpu_bench.py --cpu-dry-run --out /tmp/r.md   # plumbing, no GPU
"""
from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import platform
import shutil
import sys
import tempfile
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

GiB = 1 << 30
MiB = 1 << 20
MODES = ("spillway", "dask-cuda", "managed", "managed-prefetch")
PHASES = ("persist", "reduce", "transpose-add", "re-read")


def parse_size(text):
    from dask.utils import parse_bytes

    return None if text in (None, "none", "0") else int(parse_bytes(text))


def fmt_bytes(n):
    if n >= GiB:
        return f"{n / GiB:.2f} GiB"
    return f"{n / MiB:.0f} MiB" if n >= MiB else f"{n / 1024:.0f} KiB"


class Xp:
    """numpy or cupy, so the plumbing runs without a GPU (--cpu-dry-run)."""

    def __init__(self, name):
        self.name = name
        self.xp = __import__(name)

    def to_numpy(self, a):
        return a.get() if self.name == "cupy" and hasattr(a, "get") else np.asarray(a)

    def sync(self):
        if self.name == "cupy":
            self.xp.cuda.Device().synchronize()

    def free_pools(self):
        gc.collect()
        if self.name != "cupy":
            return
        self.sync()
        self.xp.get_default_memory_pool().free_all_blocks()
        self.xp.get_default_pinned_memory_pool().free_all_blocks()
        if "numba" in sys.modules:  # dask-cuda's unspill allocates through numba
            try:
                from numba import cuda as ncuda

                ncuda.current_context().memory_manager.deallocations.clear()
            except Exception:
                pass

    def device_used(self):
        if self.name != "cupy":
            return 0
        free, total = self.xp.cuda.runtime.memGetInfo()
        return total - free


def make_block(i, j, chunk, seed, xpname):
    xp = __import__(xpname)
    rng = xp.random.default_rng(seed * 1_000_003 + i * 1009 + j)
    return rng.random((chunk, chunk), dtype=xp.float32)


def build_array(nb, chunk, seed, xp):
    import dask.array as da

    name = f"gen-{seed}-{nb}-{chunk}"
    dsk = {(name, i, j): (make_block, i, j, chunk, seed, xp.name) for i in range(nb) for j in range(nb)}
    meta = xp.xp.empty((0, 0), dtype=xp.xp.float32)
    return da.Array(dsk, name, chunks=((chunk,) * nb, (chunk,) * nb), dtype=np.float32, meta=meta)


def reference(nb, chunk, seed, xp):
    """Sums, column and row sums and the max, block by block, no Dask."""
    n = nb * chunk
    col, row, total, mx = np.zeros(n), np.zeros(n), 0.0, -np.inf
    for i in range(nb):
        for j in range(nb):
            b = make_block(i, j, chunk, seed, xp.name)
            total += float(b.sum(dtype=np.float64))
            col[j * chunk:(j + 1) * chunk] += xp.to_numpy(b.sum(axis=0, dtype=np.float64))
            row[i * chunk:(i + 1) * chunk] += xp.to_numpy(b.sum(axis=1, dtype=np.float64))
            mx = max(mx, float(b.max()))
            del b
    xp.free_pools()
    return {"total": total, "col": col, "row": row, "max": mx}


def run_workload(client, nb, chunk, seed, xp, after_persist=None, at_end=None):
    """The four timed phases; `after_persist` and `at_end` (untimed, e.g. the
    multi-GPU bench's placement probes) run after the persist and after the
    last phase, while the data is still held."""
    import dask
    from distributed import wait

    x = build_array(nb, chunk, seed, xp)
    times, out = {}, {}
    t = time.perf_counter()
    x = x.persist()
    wait(x)
    times["persist"] = time.perf_counter() - t
    if after_persist is not None:
        after_persist()
    t = time.perf_counter()
    total, col = dask.compute(x.sum(dtype=np.float64), x.sum(axis=0, dtype=np.float64))
    out["total"], out["col"] = float(total), xp.to_numpy(col)
    times["reduce"] = time.perf_counter() - t
    t = time.perf_counter()
    out["tadd"] = xp.to_numpy((x + x.T).sum(axis=0, dtype=np.float64).compute())
    times["transpose-add"] = time.perf_counter() - t
    t = time.perf_counter()
    row, mx = dask.compute(x.sum(axis=1, dtype=np.float64), x.max())
    out["row"], out["max"] = xp.to_numpy(row), float(mx)
    times["re-read"] = time.perf_counter() - t
    if at_end is not None:
        at_end()
    client.cancel(x)
    del x
    return times, out


def check(out, ref):
    """Names of the results that differ from the reference (empty: correct)."""
    bad = []
    tol = dict(rtol=1e-9, atol=1e-6)
    if not np.isclose(out["total"], ref["total"], **tol):
        bad.append(f"total {out['total']!r} != {ref['total']!r}")
    # x + x.T is added in float32 before the float64 sum: a rounding of 2**-24 per element
    loose = dict(rtol=1e-6, atol=1e-6)
    for name, want, t in (("col", ref["col"], tol), ("row", ref["row"], tol),
                          ("tadd", ref["col"] + ref["row"], loose)):
        got = out[name]
        if got.shape != want.shape or not np.allclose(got, want, **t):
            bad.append(f"{name}: max abs diff {np.max(np.abs(got - want)) if got.shape == want.shape else got.shape}")
    if out["max"] != ref["max"]:
        bad.append(f"max {out['max']!r} != {ref['max']!r}")
    return bad


class DeviceSampler:
    """Peak device memory in use (cudaMemGetInfo) while a mode runs."""

    def __init__(self, xp, interval=0.02):
        self.xp, self.interval, self.peak = xp, interval, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self.xp.device_used())
            self._stop.wait(self.interval)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


# ---- the stores ----------------------------------------------------------------
def spillway_store(args, xp, workdir):
    """(class, kwargs) for (a), or raises SkipMode with the reason."""
    try:
        import spillway
        from spillway.dask import SpillwayStore
    except Exception as e:
        raise SkipMode(f"spillway module not importable here: {type(e).__name__}: {e}")
    if args.spillway_config:
        config = args.spillway_config
    else:
        host = args.host_budget or (args.data_bytes + args.budget)
        config = {"version": 1, "tiers": [
            {"name": "gpu0", "kind": "gpu", "device": 0, "capacity": args.budget},
            {"name": "host", "kind": "host", "capacity": host, "pin_at_open": args.pin_at_open},
            {"name": "disk", "kind": "file", "capacity": max(2 * args.data_bytes, 4 * GiB),
             "paths": ["${SPILLWAY_WORKER_DIR}"]},
        ]}
    # Does the store keep a CuPy value on the device? (The device-value support
    # is being built; until it lands this is where (a) stops.)
    probe_dir = tempfile.mkdtemp(prefix="spw-probe-", dir=workdir)
    try:
        store = SpillwayStore(config=config, worker_local_directory=probe_dir, log_interval=0)
    except Exception as e:
        raise SkipMode(f"SpillwayStore refused the gpu chain: {type(e).__name__}: {e}")
    try:
        a = xp.xp.arange(1 << 20, dtype=xp.xp.float32)
        store["probe"] = a
        back = store["probe"]
        on_gpu = store.stats()["summary"]["bytes_by_tier"].get("gpu0", 0)
        if not hasattr(back, "__cuda_array_interface__") or not bool((back == a).all()) or on_gpu == 0:
            raise SkipMode(f"SpillwayStore does not keep CuPy values on the device yet "
                           f"(read back {type(back).__name__}, {on_gpu} bytes in the gpu tier)")
    except SkipMode:
        raise
    except Exception as e:
        raise SkipMode(f"SpillwayStore refused a device value: {type(e).__name__}: {e}")
    finally:
        store.close()
        shutil.rmtree(probe_dir, ignore_errors=True)
    return SpillwayStore, {"config": config, "log_interval": 0}, spillway.__file__


class SkipMode(Exception):
    pass


def dask_cuda_store(args, xp):
    from device_host_file import DeviceHostFile

    kwargs = {"device_memory_limit": args.budget, "memory_limit": args.host_budget}
    note = "Dask's deserialization (numba.cuda.to_device) for host -> device"
    if xp.name == "cupy":
        try:  # without RMM, Dask's CuPy deserializer needs numba's CUDA
            from distributed.protocol import deserialize, serialize

            a = xp.xp.arange(1000, dtype=xp.xp.float32)
            back = deserialize(*serialize(a, serializers=("dask",), on_error="raise"))
            assert bool((xp.xp.asarray(back) == a).all())
        except Exception as e:
            kwargs["host_to_device_fn"] = _cupy_host_to_device
            note = (f"Dask's CuPy deserializer failed here ({type(e).__name__}: {e}); "
                    "host -> device by cupy.asarray of the pageable frame instead")
    return DeviceHostFile, kwargs, note


def _cupy_host_to_device(header, frames):
    import cupy

    (frame,) = frames
    flat = cupy.asarray(np.frombuffer(frame, dtype=np.uint8))
    return cupy.ndarray(shape=header["shape"], dtype=header["typestr"], memptr=flat.data,
                        strides=header["strides"])


# ---- one mode ------------------------------------------------------------------
def run_mode(mode, args, xp, ref, workdir):
    from distributed import Client, LocalCluster

    res = {"mode": mode}
    pool = None
    try:
        if mode == "spillway":
            cls, kwargs, res["note"] = spillway_store(args, xp, workdir)
        elif mode == "dask-cuda":
            cls, kwargs, res["note"] = dask_cuda_store(args, xp)
        else:
            if xp.name != "cupy":
                raise SkipMode("managed memory needs CuPy and a GPU")
            import managed_store as ms

            xp.free_pools()
            free = xp.xp.cuda.runtime.memGetInfo()[0]
            cap = min(args.managed_cap or (2 * args.data_bytes + 4 * GiB), free // 2)
            need = args.data_bytes + 2 * args.budget
            if need > cap:
                raise SkipMode(f"managed memory cap {fmt_bytes(cap)} (below half of {fmt_bytes(free)} free) "
                               f"is less than the {fmt_bytes(need)} this size needs")
            pool = ms.install_managed_pool(cap)
            res["self_test"] = ms.self_test(ms.Prefetcher())
            if not res["self_test"]["ok"]:
                raise SkipMode(f"managed prefetch self-test failed: {res['self_test']}")
            cls = ms.ManagedMemoryStore
            kwargs = {"device_memory_limit": args.budget, "prefetch_back": mode == "managed-prefetch"}
            res["note"] = f"managed pool capped at {fmt_bytes(cap)} of {fmt_bytes(free)} free"
    except Exception as e:  # SkipMode: a reason to skip; anything else: the setup itself failed
        if pool is not None:
            import managed_store as ms

            ms.restore_default_pool(pool)
        if isinstance(e, SkipMode):
            res["skipped"] = str(e)
        else:
            logging.exception("mode %s: setup failed", mode)
            res["failed"] = f"setup: {type(e).__name__}: {e}"
        return res

    base = xp.device_used()
    mode_dir = tempfile.mkdtemp(prefix=f"{mode}-", dir=workdir)
    try:
        t_start = time.perf_counter()
        with LocalCluster(n_workers=1, threads_per_worker=args.threads, processes=False, memory_limit=0,
                          dashboard_address=None, local_directory=mode_dir,
                          data=(cls, kwargs)) as cluster, Client(cluster) as client, DeviceSampler(xp) as sampler:
            t0 = time.perf_counter()
            res["startup"] = t0 - t_start  # the cluster and its store (spillway: pin_at_open), untimed
            times, out = run_workload(client, args.nb, args.chunk, args.seed, xp)
            res["total"] = time.perf_counter() - t0
            res["times"] = times
            worker = next(iter(cluster.workers.values()))
            data = worker.data
            res["store"] = data.stats() if hasattr(data, "stats") else {}
        res["peak_device_over_start"] = max(0, sampler.peak - base)
        if pool is not None:
            res["managed_pool_bytes"] = pool.total_bytes()
        res["errors"] = check(out, ref)
    except Exception as e:
        logging.exception("mode %s failed", mode)
        res["failed"] = f"{type(e).__name__}: {e}"
    finally:
        if pool is not None:
            import managed_store as ms

            ms.restore_default_pool(pool)
        xp.free_pools()
        shutil.rmtree(mode_dir, ignore_errors=True)
    return res


def warm_up(args, xp, workdir):
    """A tiny run with Dask's plain dict store first: CuPy compiles its kernels
    (and Dask imports its code paths) once, outside every mode's timing."""
    from distributed import Client, LocalCluster

    t = time.perf_counter()
    nb, chunk = 3, 256
    with LocalCluster(n_workers=1, threads_per_worker=args.threads, processes=False, memory_limit=0,
                      dashboard_address=None, local_directory=workdir, data=dict) as cluster, \
            Client(cluster) as client:
        _, out = run_workload(client, nb, chunk, args.seed + 1, xp)
    bad = check(out, reference(nb, chunk, args.seed + 1, xp))
    if bad:
        raise SystemExit(f"warm-up run is wrong: {bad}")
    xp.free_pools()
    print(f"warm-up in {time.perf_counter() - t:.1f} s", flush=True)


# ---- report --------------------------------------------------------------------
def environment(xp):
    import dask
    import distributed
    import zict

    env = {"host": platform.node(), "python": platform.python_version(), "numpy": np.__version__,
           "dask": dask.__version__, "distributed": distributed.__version__, "zict": zict.__version__,
           "load": " ".join(f"{x:.2f}" for x in os.getloadavg()), "cpus": os.cpu_count()}
    if xp.name == "cupy":
        cp = xp.xp
        props = cp.cuda.runtime.getDeviceProperties(0)
        free, total = cp.cuda.runtime.memGetInfo()
        env.update(gpu=props["name"].decode(), cupy=cp.__version__,
                   cuda_runtime=cp.cuda.runtime.runtimeGetVersion(), cuda_driver=cp.cuda.runtime.driverGetVersion(),
                   device_free=fmt_bytes(free), device_total=fmt_bytes(total))
    return env


def write_report(path, args, env, results, quiet=False):
    done = {r["mode"]: r for r in results if "total" in r and not r.get("errors")}
    lines = [f"# GPU Dask benchmark ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})", "",
             "Machine: " + ", ".join(f"{k} {v}" for k, v in env.items()), "",
             f"Device budget {fmt_bytes(args.budget)} for every mode; working set {fmt_bytes(args.data_bytes)} "
             f"({args.data_bytes / args.budget:.2f}x the budget) in {args.nb}x{args.nb} float32 blocks of "
             f"{args.chunk}x{args.chunk} ({fmt_bytes(args.chunk * args.chunk * 4)}); host budget "
             f"{fmt_bytes(args.host_budget) if args.host_budget else 'unbounded'} for (a) and (b); "
             f"{args.threads} worker thread(s); one in-process worker, no worker memory limit.", "",
             "| mode | " + " | ".join(PHASES) + " | total s | correct | peak device over start | startup s (untimed) |",
             "| --- |" + " ---: |" * (len(PHASES) + 1) + " --- | ---: | ---: |"]
    for r in results:
        if "total" in r:
            ok = "yes" if not r["errors"] else "NO: " + "; ".join(r["errors"])
            lines.append(f"| {r['mode']} | " + " | ".join(f"{r['times'][p]:.2f}" for p in PHASES)
                         + f" | {r['total']:.2f} | {ok} | {fmt_bytes(r['peak_device_over_start'])} "
                         + f"| {r.get('startup', 0):.1f} |")
        else:
            why = r.get("skipped") or r.get("failed")
            lines.append(f"| {r['mode']} | {'skipped' if 'skipped' in r else 'FAILED'}: {why} |")
    for r in results:
        eng = (r.get("store") or {}).get("engine") or {}
        if "pinned_fallback_bytes" in eng:
            lines += ["", f"{r['mode']}: host tier page-locked {fmt_bytes(eng['pinned_pool_bytes'])} at the end; "
                          f"{fmt_bytes(eng['pinned_fallback_bytes'])} of host allocations fell back to plain "
                          f"(pageable) memory because the pinned pool had not grown far enough yet."]
    lines += ["", "Peak device over start: the highest cudaMemGetInfo use while the mode ran, less its use at "
              "the start. It is not the resident set: for dask-cuda it includes CuPy's pool cache, numba's "
              "allocations awaiting their deferred free and evicted values a task still holds; for the managed "
              "modes cudaMemGetInfo showed no memory freed by a host prefetch (the self-test's "
              "device_free_gain; its GPU read timings after a host prefetch are the evidence that the "
              "pages left). The stores' own counts are in the details below "
              "(max_resident_bytes for managed)."]
    lines += ["", "Ratios, end to end (the slower mode's seconds / the faster one's):", ""]
    for a in MODES:
        for b in MODES:
            if a in done and b in done and MODES.index(a) < MODES.index(b):
                fast, slow = sorted((a, b), key=lambda m: done[m]["total"])
                lines.append(f"- {fast} is {done[slow]['total'] / done[fast]['total']:.2f}x faster than {slow}")
    lines += ["", "Targets: (a) spillway >= 3x dask-cuda and >= 2x managed memory (each variant), "
              "end to end."]
    if "spillway" in done:
        for peer, want in (("dask-cuda", 3.0), ("managed", 2.0), ("managed-prefetch", 2.0)):
            if peer in done:
                got = done[peer]["total"] / done["spillway"]["total"]
                lines.append(f"- vs {peer}: {got:.2f}x, {'met' if got >= want else f'missed by {want / got:.2f}x'}")
    else:
        lines.append("- not measured: (a) did not run (see its row).")
    lines += ["", "## Per-mode details", ""]
    for r in results:
        lines.append(f"- **{r['mode']}**: " + json.dumps({k: v for k, v in r.items() if k not in ("mode",)},
                                                         default=str))
    lines += ["", f"Command: `{' '.join(sys.argv)}`", ""]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    if not quiet:
        print("\n".join(lines))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="markdown report to write")
    p.add_argument("--budget", default="8GiB", help="device budget of every store")
    p.add_argument("--scale", type=float, default=3.0, help="working set / budget (2-4)")
    p.add_argument("--chunk", type=int, default=0, help="block side in elements (default: 10x10 blocks)")
    p.add_argument("--host-budget", default="none", help="host level of (a) and (b); none: unbounded")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--managed-cap", default=None, help="cap on managed memory (default 2x data + 4 GiB, "
                                                       "never above half the free device memory)")
    p.add_argument("--pin-at-open", default="100%",
                   help="(a)'s host tier pin_at_open: page-locked at worker start (0: pinned in the background, "
                        "copies beyond what is pinned so far go through plain memory)")
    p.add_argument("--spillway-config", default=None, help="tier YAML for (a) instead of the built-in chain")
    p.add_argument("--workdir", default=os.environ.get("SPILLWAY_TEST_DIR", "/var/tmp"))
    p.add_argument("--pretouch", type=float, default=1.0, help="host GiB to touch first, per GiB of data "
                                                               "(machines whose RAM grows on first use)")
    p.add_argument("--cpu-dry-run", action="store_true", help="numpy blocks, tiny sizes: tests the plumbing")
    p.add_argument("--verbose", action="store_true")
    args = p.parse_args()
    import distributed  # noqa: F401  (configures its loggers on import; set the levels after)

    logging.basicConfig(level=logging.INFO if args.verbose else logging.ERROR)
    for name in ("distributed", "tornado"):
        logging.getLogger(name).setLevel(logging.INFO if args.verbose else logging.ERROR)

    xp = Xp("numpy" if args.cpu_dry_run else "cupy")
    if args.cpu_dry_run and args.budget == "8GiB":
        args.budget = "16MiB"
    args.budget = parse_size(args.budget)
    args.host_budget = parse_size(args.host_budget)
    args.managed_cap = parse_size(args.managed_cap)
    want = args.budget * args.scale
    args.chunk = args.chunk or max(256, int((want / 4) ** 0.5) // 10 // 256 * 256)
    args.nb = max(2, round((want / 4) ** 0.5 / args.chunk))
    args.data_bytes = args.nb * args.nb * args.chunk * args.chunk * 4
    modes = [m for m in args.modes.split(",") if m]
    for m in modes:
        if m not in MODES:
            p.error(f"unknown mode {m!r}; modes are {', '.join(MODES)}")
    if xp.name == "cupy":
        free = xp.xp.cuda.runtime.memGetInfo()[0]
        if args.data_bytes + 2 * args.budget > free * 0.8:
            p.error(f"working set {fmt_bytes(args.data_bytes)} does not fit the {fmt_bytes(free)} free on the device")
    os.makedirs(args.workdir, exist_ok=True)
    workdir = tempfile.mkdtemp(prefix="dask-gpu-bench-", dir=args.workdir)
    try:
        if args.pretouch > 0 and not args.cpu_dry_run:
            t = time.perf_counter()
            buf = np.ones(int(args.pretouch * args.data_bytes), dtype=np.uint8)
            del buf
            print(f"pretouched {fmt_bytes(int(args.pretouch * args.data_bytes))} of host memory "
                  f"in {time.perf_counter() - t:.1f} s", flush=True)
        env = environment(xp)
        print(f"working set {fmt_bytes(args.data_bytes)}, budget {fmt_bytes(args.budget)}, "
              f"{args.nb}x{args.nb} blocks of {args.chunk}; reference...", flush=True)
        t = time.perf_counter()
        ref = reference(args.nb, args.chunk, args.seed, xp)
        print(f"reference in {time.perf_counter() - t:.1f} s", flush=True)
        warm_up(args, xp, workdir)
        results = []
        for m in modes:
            print(f"== {m}", flush=True)
            r = run_mode(m, args, xp, ref, workdir)
            print(json.dumps(r, default=str), flush=True)
            results.append(r)
            write_report(args.out, args, env, results, quiet=m != modes[-1])  # partial results survive a timeout
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    bad = [r for r in results if r.get("failed") or r.get("errors")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
