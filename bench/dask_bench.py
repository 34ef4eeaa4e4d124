#!/usr/bin/env python3
"""Dask spilling benchmark: Dask's default worker store against spillway, under the same memory.

Both sides run the same workloads on the same cluster shape: a scheduler in
this process and --workers `dask worker` processes (no nanny) over TCP:
  dask      - the default Worker.data (zict SpillBuffer): live objects up to
              the memory target, then one pickled file per key, written on
              the event loop;
  spillway  - `--preload spillway.dask_preload`: a SpillwayStore per worker,
              host tier over a file tier (O_DIRECT unless --buffered).

Fairness: each side's workers run inside their own cgroup v1 memory cgroup
(under this process's, in /sys/fs/cgroup/memory) whose memory.limit_in_bytes
is the workers' memory limits together. The cgroup charges the page cache its
processes fill, so Dask's spill files can no longer sit in memory that its
limit does not count. Where the controller is missing or not writable the
side runs unconfined and the report says so.

Runs: --repeat (default 3) rounds, the two sides' order alternating round to
round, a fresh cluster and cgroup each time; the report gives medians, each
run, the load average around each run, peak RSS per worker and the cgroup's
peak usage, and how much of Dask's own time went to spilling (pickle, write,
read, unpickle: SpillBuffer's counters, summed over workers, as a share of the
workers' wall time).

Before the runs, fio measures the disk the workers spill to (1 MiB O_DIRECT: a durable write at depth
32, a read at depth 16; --no-disk-reference skips it); the report gives each workload spillway's disk
floor, the seconds those speeds need for the bytes spillway's workers wrote and read.
--sides spillway (or dask) runs one side only, for diagnosis: no ratio, no report.

    PYTHONPATH=build/python /usr/bin/python3 bench/dask_bench.py                       # full run
    ... --memory-limit 256MiB --scale 1.5 --repeat 1 --workloads array64m,inmemory   # a quick try

Writes bench/results/dask-<date>-<HHMM>.md, a new file per run (--out to choose).
Ratio = dask seconds / spillway seconds (> 1: spillway faster); a workload's seconds leave out its
`release` phase (client.cancel; dask_workloads._release says why).
"""
import argparse
import datetime
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dask_workloads import WORKLOADS  # noqa: E402

MiB = 1 << 20
SIDES = ("dask", "spillway")

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


def load():
    return "%.1f/%.1f/%.1f" % os.getloadavg()


# ---- cgroup v1 -------------------------------------------------------------------

class MemoryCgroup:
    """A child of this process's v1 memory cgroup, limited to `limit` bytes (page cache included)."""

    ROOT = "/sys/fs/cgroup/memory"

    def __init__(self, name, limit):
        self.path = None
        self.why_not = None
        try:
            with open("/proc/self/cgroup") as f:
                mine = next(line.split(":", 2)[2].strip() for line in f if ":memory:" in line)
        except (OSError, StopIteration):
            self.why_not = "no cgroup v1 memory controller for this process (/proc/self/cgroup)"
            return
        path = os.path.join(self.ROOT + mine, name)
        try:
            os.mkdir(path)
            self._write(path, "memory.limit_in_bytes", limit)
            try:
                self._write(path, "memory.swappiness", 0)
            except OSError:
                pass
        except OSError as e:
            self.why_not = f"cannot create {path}: {e}"
            try:
                os.rmdir(path)
            except OSError:
                pass
            return
        self.path = path

    @staticmethod
    def _write(path, name, value):
        with open(os.path.join(path, name), "w") as f:
            f.write(str(value))

    def _read(self, name):
        with open(os.path.join(self.path, name)) as f:
            return int(f.read().split()[0])

    def wrap(self, argv):
        """argv run inside the cgroup (the shell joins it, then execs)."""
        if not self.path:
            return argv
        return ["sh", "-c", f'echo $$ > "{self.path}/cgroup.procs" && exec "$@"', "sh", *argv]

    def peak(self):
        return self._read("memory.max_usage_in_bytes") if self.path else 0

    def failcnt(self):
        return self._read("memory.failcnt") if self.path else 0

    def remove(self):
        if not self.path:
            return
        for _ in range(50):
            try:
                os.rmdir(self.path)
                return
            except OSError:
                time.sleep(0.1)  # exiting processes still charged
        print(f"dask_bench: could not remove {self.path}", file=sys.stderr)


# ---- the disk's ceiling -----------------------------------------------------------

def disk_reference(workdir, size=2 << 30):
    """fio's durable sequential write (1 MiB, depth 32, --end_fsync=1) and read (1 MiB, depth 16) on the
    disk the workers spill to, O_DIRECT: {"write": B/s, "read": B/s, "commands": [...]}, or {"why": ...}.

    With them the report gives each spilling workload a floor: the time the disk alone needs for the bytes
    spillway wrote and read (at these best-case speeds), which no store can beat."""
    import json

    fio = shutil.which("fio")
    if fio is None:
        return {"why": "fio is not installed (apt-get install fio)"}
    path = os.path.join(workdir, "fio-reference.dat")
    out, commands = {}, []
    try:
        for rw, depth in (("write", 32), ("read", 16)):
            argv = [fio, "--name=ref", f"--filename={path}", f"--size={size}", f"--rw={rw}", "--bs=1M",
                    f"--iodepth={depth}", "--ioengine=io_uring", "--direct=1", "--numjobs=1", "--output-format=json"]
            if rw == "write":
                argv.append("--end_fsync=1")
            commands.append(" ".join(["fio"] + argv[1:]))
            r = subprocess.run(argv, capture_output=True, text=True, timeout=300)
            if r.returncode != 0:
                return {"why": f"fio failed: {r.stderr.strip()[-200:]}"}
            out[rw] = float(json.loads(r.stdout)["jobs"][0][rw]["bw_bytes"])
    except (OSError, subprocess.TimeoutExpired, ValueError, KeyError, IndexError) as e:
        return {"why": f"fio failed: {e}"}
    finally:
        try:
            os.remove(path)
        except OSError:
            pass
    out["commands"] = commands
    return out


def disk_floor(spill, ref):
    """Seconds the disk alone needs for a run's bytes (spill: the run's metric deltas), or None."""
    if not ref or "write" not in ref:
        return None
    return spill["disk_write_bytes_total"] / ref["write"] + spill["disk_read_bytes_total"] / ref["read"]


# ---- one side ------------------------------------------------------------------

def dask_command(sub):
    exe = shutil.which("dask")
    return [exe, sub] if exe else [shutil.which(f"dask-{sub}")]


class Side:
    """A scheduler here and args.workers `dask worker` processes in a memory cgroup."""

    def __init__(self, side, args, workdir, rep):
        from distributed import Client, LocalCluster

        self.side = side
        self.limit = args.workers * args.memory_limit_bytes
        self.client = self.scheduler = None
        self.procs = []
        self.scheduler = LocalCluster(n_workers=0, processes=False, dashboard_address=":0", scheduler_port=0,
                                      host="127.0.0.1", protocol="tcp://")
        self.cgroup = MemoryCgroup(f"spillway-bench-{os.getpid()}-{side}-{rep}", self.limit)
        try:
            self._start_workers(args, workdir, rep)
            self.client = Client(self.scheduler.scheduler_address)
            self.client.wait_for_workers(args.workers, timeout=120)
        except BaseException:
            self.close()
            raise

    def _start_workers(self, args, workdir, rep):
        side, address = self.side, self.scheduler.scheduler_address
        local = os.path.join(workdir, side)
        here = os.path.dirname(os.path.abspath(__file__))  # workers unpickle dask_workloads' functions
        pythonpath = os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)
        env = dict(os.environ, PYTHONPATH=pythonpath, **{f"DASK_DISTRIBUTED__WORKER__MEMORY__{k.upper()}": str(v)
                                                         for k, v in (("target", args.target), ("spill", args.spill),
                                                                      ("pause", args.pause), ("terminate", False))})
        argv = dask_command("worker") + [address, "--host", "127.0.0.1", "--no-nanny", "--nthreads",
                                         str(args.threads), "--memory-limit", str(args.memory_limit_bytes),
                                         "--local-directory", local, "--no-dashboard"]
        if side == "spillway":
            cfg = os.path.join(workdir, "tiers.yaml")
            with open(cfg, "w") as f:
                f.write(SPILLWAY_CONFIG.format(host=args.host_tier_bytes, codec=args.codec,
                                               promote=str(args.promote_on_read).lower(),
                                               direct=str(not args.buffered).lower()))
            argv += ["--preload", "spillway.dask_preload", "--spillway-config", cfg, "--spillway-log-interval", "0",
                     "--spillway-read-ahead", args.read_ahead]
        for i in range(args.workers):
            log = open(os.path.join(workdir, f"{side}-{rep}-w{i}.log"), "wb")
            self.procs.append(subprocess.Popen(self.cgroup.wrap(argv + ["--name", f"{side}-w{i}"]), env=env,
                                               stdout=log, stderr=subprocess.STDOUT, start_new_session=True))

    def spill_metrics(self):
        keys = ("disk_write_count_total", "disk_write_bytes_total", "disk_read_count_total", "disk_read_bytes_total",
                "pickle_time_total", "unpickle_time_total", "disk_write_time_total", "disk_read_time_total")

        def collect(dask_worker):
            data = dask_worker.data
            m = data.get_metrics() if hasattr(data, "get_metrics") else {}
            return {k: m.get(k, 0) for k in keys}

        out = dict.fromkeys(keys, 0)
        for m in self.client.run(collect).values():
            for k, v in m.items():
                out[k] += v
        return out

    def store_counters(self):
        """The stores' own counters summed over workers (spillway's side; empty for Dask's)."""
        def collect(dask_worker):
            data = dask_worker.data
            out = dict(getattr(data, "counters", {}))
            engine = getattr(data, "engine", None)
            if engine is not None:
                e = engine.stats()
                out["promotions"] = sum(t["promotions_out"] for t in e["tiers"])
                for k in ("clean_demotions", "sync_demotions"):
                    out[k] = e.get(k, 0)
            return out

        out = {}
        for m in self.client.run(collect).values():
            for k, v in m.items():
                out[k] = out.get(k, 0) + v
        return out

    def peak_rss(self):
        return max(self.client.run(lambda dask_worker: max(dask_worker.monitor.quantities["memory"],
                                                            default=0)).values())

    def alive(self):
        return all(p.poll() is None for p in self.procs)

    def close(self):
        try:
            if self.client is not None:
                self.client.close()
            self.scheduler.close()
        finally:
            for p in self.procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            for p in self.procs:
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait(10)
            self.cgroup.remove()


def _watchdog(side, stop):
    """Interrupts the main thread when a worker process dies (a workload would wait for it forever)."""
    import _thread

    while not stop.wait(1.0):
        if not side.alive():
            print(f"dask_bench: a {side.side} worker process died (the cgroup's OOM killer?): stopping this run",
                  file=sys.stderr, flush=True)
            _thread.interrupt_main()
            return


def run_side(side, args, workdir, workloads, rep):
    """Runs every workload on one side; a workload whose worker dies (the cgroup's OOM killer) is recorded as
    failed, and the next workload gets a fresh cluster."""
    import threading

    results = {"_confined": None, "_why_not": None, "_failcnt": 0}
    s = stop = None

    def close():
        nonlocal s, stop
        if s is None:
            return
        stop.set()
        if results["_confined"] is None:
            results["_confined"] = s.cgroup.path is not None
            results["_why_not"] = s.cgroup.why_not
        results["_failcnt"] += s.cgroup.failcnt() if s.cgroup.path else 0
        s.close()
        s = None

    try:
        for name in workloads:
            fn, scale = WORKLOADS[name]
            if s is None:
                s = Side(side, args, workdir, rep)
                stop = threading.Event()
                threading.Thread(target=_watchdog, args=(s, stop), daemon=True).start()
            data_bytes = int((scale or args.scale) * s.limit)
            before, load_before = s.spill_metrics(), load()
            counters_before = s.store_counters()
            t = time.perf_counter()
            try:
                phases, check = fn(s.client, data_bytes)
                if not s.alive():
                    raise RuntimeError("a worker process died")
            except (KeyboardInterrupt, Exception) as e:  # the watchdog interrupts us when a worker dies
                if s.alive() and not isinstance(e, KeyboardInterrupt):
                    raise
                failcnt = s.cgroup.failcnt() if s.cgroup.path else 0
                why = (f"a worker died after {time.perf_counter() - t:.0f} s (cgroup limit hits {failcnt}: "
                       f"the OOM killer); see {workdir}/{side}-{rep}-w*.log")
                results[name] = {"failed": why, "data_bytes": data_bytes, "load": f"{load_before} -> {load()}"}
                print(f"  run {rep + 1} {side:9s} {name:9s} FAILED: {why}", flush=True)
                close()
                continue
            # The release (client.cancel) is timed but left out: see dask_workloads._release.
            total = time.perf_counter() - t - phases.get("release", 0.0)
            after = s.spill_metrics()
            spill = {k: after[k] - before[k] for k in after}
            counters = {k: v - counters_before.get(k, 0) for k, v in s.store_counters().items()}
            spill_s = sum(spill[k] for k in ("pickle_time_total", "unpickle_time_total", "disk_write_time_total",
                                             "disk_read_time_total"))
            r = {"phases": phases, "total": total, "check": check, "spill": spill, "spill_seconds": spill_s,
                 "rss": s.peak_rss(), "cgroup_peak": s.cgroup.peak(), "load": f"{load_before} -> {load()}",
                 "data_bytes": data_bytes, "store": counters}
            results[name] = r
            print(f"  run {rep + 1} {side:9s} {name:9s} {total:7.1f} s  "
                  + "  ".join(f"{p} {v:.1f}s" for p, v in phases.items())
                  + f" | disk writes {spill['disk_write_count_total']:.0f} "
                    f"({spill['disk_write_bytes_total'] / MiB:.0f} MiB), reads {spill['disk_read_bytes_total'] / MiB:.0f}"
                    f" MiB, spill time {spill_s:.1f} s"
                  # Dask's side reads through the page cache: the floor (O_DIRECT speeds) is spillway's only.
                  + ("" if side != "spillway" or disk_floor(spill, args.disk_ref) is None
                     else f", disk floor {disk_floor(spill, args.disk_ref):.1f} s")
                  + "; "
                    f"peak RSS {r['rss'] / MiB:.0f} MiB, cgroup peak {r['cgroup_peak'] / MiB:.0f} MiB; "
                    f"load {r['load']}", flush=True)
            if counters:
                shown = ("puts", "lazy_puts", "gets", "cache_hits", "live_hits", "relived", "prefetch_hints", "relieve_calls",
                         "promotions", "clean_demotions")
                print("      store: " + ", ".join(f"{k} {counters[k]:.0f}" for k in shown if k in counters)
                      + f", get {counters.get('get_bytes', 0) / MiB:.0f} MiB; seconds summed over workers: "
                      + ", ".join(f"{k[:-8]} {counters[k]:.1f}" for k in
                                  ("put_seconds", "serialize_seconds", "get_seconds", "deserialize_seconds",
                                   "relieve_seconds") if k in counters), flush=True)
    finally:
        close()
    return results


# ---- report ----------------------------------------------------------------------

def render(args, runs, workloads, load_before, load_after, started):
    def med(side, wl, f):
        ok = [v for v in (f(r[side][wl]) for r in runs if "failed" not in r[side][wl]) if v is not None]
        return statistics.median(ok) if ok else None

    def failed(side, wl):
        return sum("failed" in r[side][wl] for r in runs)

    def cell(side, wl, v, fmt):
        if v is None:
            return f"failed {failed(side, wl)}/{len(runs)}"
        return fmt(v) + (f" (failed {failed(side, wl)}/{len(runs)})" if failed(side, wl) else "")

    ref = args.disk_ref
    lines = ["| workload | data | dask (s) | spillway (s) | dask/spillway | Dask's spill time | "
             "spillway's disk floor (s) | peak RSS/worker dask / spillway | cgroup peak dask / spillway |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for wl in workloads:
        d, s = med("dask", wl, lambda r: r["total"]), med("spillway", wl, lambda r: r["total"])
        share = med("dask", wl, lambda r: r["spill_seconds"] / (r["total"] * args.workers))
        rss = [med(side, wl, lambda r: r["rss"]) for side in SIDES]
        cg = [med(side, wl, lambda r: r["cgroup_peak"]) for side in SIDES]
        mib = lambda v: "-" if v is None else f"{v / MiB:.0f}"  # noqa: E731
        data = runs[0]["dask"][wl]["data_bytes"] / MiB
        ratio = f"{d / s:.2f}x" if d is not None and s is not None else "-"
        floor = med("spillway", wl, lambda r: disk_floor(r["spill"], ref))
        lines.append(f"| {wl} | {data:.0f} MiB | {cell('dask', wl, d, lambda v: f'{v:.2f}')} | "
                     f"{cell('spillway', wl, s, lambda v: f'{v:.2f}')} | {ratio} | "
                     f"{'-' if share is None else f'{share:.0%}'} | {'-' if floor is None else f'{floor:.1f}'} | "
                     f"{mib(rss[0])} / {mib(rss[1])} MiB | {mib(cg[0])} / {mib(cg[1])} MiB |")
    table = "\n".join(lines)
    per_run = ["| run | side | " + " | ".join(workloads) + " | load (first workload) |",
               "| --- | --- |" + " ---: |" * len(workloads) + " --- |"]
    for i, run in enumerate(runs, 1):
        for side in SIDES:
            per_run.append(f"| {i} | {side} | " + " | ".join(
                "failed (OOM)" if "failed" in run[side][wl] else f"{run[side][wl]['total']:.1f}" for wl in workloads)
                + f" | {run[side][workloads[0]]['load']} |")
    failures = [f"- run {i} {side} {wl}: {run[side][wl]['failed']}" for i, run in enumerate(runs, 1)
                for side in SIDES for wl in workloads if "failed" in run[side][wl]]
    confinement = []
    for side in SIDES:
        r = runs[0][side]
        confinement.append(f"{side}: " + (f"confined (cgroup v1, limit {args.workers * args.memory_limit_bytes / MiB:.0f}"
                                          f" MiB, limit hits in the last run {runs[-1][side]['_failcnt']})"
                                          if r["_confined"] else f"NOT confined: {r['_why_not']}"))
    import dask
    import distributed

    if ref and "write" in ref:
        disk_line = (f"write {ref['write'] / 1e9:.2f} GB/s, read {ref['read'] / 1e9:.2f} GB/s: "
                     + "; ".join(f"`{c}`" for c in ref["commands"]))
    else:
        disk_line = f"not measured: {(ref or {}).get('why', '--no-disk-reference')}"
    md = f"""# Dask spilling: default store (zict SpillBuffer) vs spillway, same memory including the page cache

Run {started:%Y-%m-%d %H:%M} with `bench/dask_bench.py {' '.join(sys.argv[1:])}`.

- Machine: {platform.node()}, {os.cpu_count()} cores, Linux {platform.release()}; load average {load_before}
  before, {load_after} after. The machine is shared: absolute times are noisy; the ratio is measured in
  the same run, sides interleaved.
- Python {platform.python_version()}, dask {dask.__version__}, distributed {distributed.__version__},
  numpy {np.__version__}.
- Cluster: {args.workers} `dask worker` processes (no nanny) x {args.threads} thread, --memory-limit
  {args.memory_limit_bytes / MiB:.0f} MiB each; thresholds target {args.target}, spill {args.spill},
  pause {args.pause}, terminate off. spillway: host tier {args.host_tier_bytes / MiB:.0f} MiB per worker
  over a file tier (codec {args.codec}, {"buffered" if args.buffered else "O_DIRECT"},
  promote_on_read {str(args.promote_on_read).lower()}).
- Confinement: {'; '.join(confinement)}.
- Data: --scale {args.scale} x all workers' memory limits per spilling workload; `inmemory` 0.2x.
  Medians of {len(runs)} run(s); results checked equal between the sides.
- Each workload's time runs from its first call to its result, less the `release` phase (the
  `client.cancel` of its collections: distributed's scheduler polls up to 1 s for a key to cancel, so
  it took 0 or 1.0 s at random on either side, and no store works during it; printed per run).
- "Dask's spill time": SpillBuffer's pickle + disk write + disk read + unpickle seconds, summed over
  workers, as a share of workers x wall time.
- "spillway's disk floor": the bytes spillway's workers wrote and read in the workload, at the disk's
  speeds measured by fio before the runs ({disk_line}): the seconds the disk alone needs for them.

{table}

Each run, end to end (s):

{chr(10).join(per_run)}
{chr(10) + "Failed runs:" + chr(10) + chr(10) + chr(10).join(failures) + chr(10) if failures else ""}"""
    return md, table


def checks_match(a, b):
    return all(np.isclose(x, y, rtol=1e-6) for x, y in zip(a, b))


def write_report(md, out, started, results=None):
    """Writes the report to `out` (replaced if it exists), or by default to
    a new dask-<date>-<HHMM>[-N].md under bench/results: the day's earlier
    reports, often edited into sections by hand, are never replaced unless
    named. Returns the path written."""
    if out:
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        with open(out, "w") as f:
            f.write(md)
        return out
    results = results or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
    os.makedirs(results, exist_ok=True)
    stem = os.path.join(results, f"dask-{started:%Y-%m-%d-%H%M}")
    path, n = stem + ".md", 1
    while True:
        try:
            with open(path, "x") as f:
                f.write(md)
            return path
        except FileExistsError:
            n += 1
            path = f"{stem}-{n}.md"


def main():
    from dask.utils import parse_bytes

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--threads", type=int, default=1, help="threads per worker")
    p.add_argument("--memory-limit", default="600MiB", help="per worker, both sides")
    p.add_argument("--target", type=float, default=0.5)
    p.add_argument("--spill", type=float, default=0.6)
    p.add_argument("--pause", default="False", help="pause fraction or False")
    p.add_argument("--host-tier", default=None, help="spillway host tier per worker (default: a third of the limit)")
    p.add_argument("--codec", default="none", help="file tier codec: none, lz4, zstd")
    p.add_argument("--promote-on-read", action=argparse.BooleanOptionalAction, default=True,
                   help="spillway's policy.promote_on_read (default on, the engine's default: a Get from the file "
                        "tier moves the value into the host tier, and its record stays as a clean copy, so "
                        "demoting it again writes nothing)")
    p.add_argument("--buffered", action="store_true", help="spillway file tier with buffered I/O")
    p.add_argument("--read-ahead", default="auto",
                   help="spillway workers' --spillway-read-ahead (auto: a quarter of the host tier; 0: off)")
    p.add_argument("--no-disk-reference", action="store_true",
                   help="skip the fio runs that give each workload its disk floor")
    p.add_argument("--sides", default=",".join(SIDES),
                   help="the sides to run (a one-sided run is for diagnosis: it has no ratio and writes no report)")
    p.add_argument("--scale", type=float, default=4.0, help="data per spilling workload / all workers' limits")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--dir", default=None, help="where workers spill (default: a new folder under /var/tmp)")
    p.add_argument("--out", default=None, help="markdown report (default bench/results/dask-<date>-<HHMM>.md; an existing file is never replaced unless named here)")
    args = p.parse_args()
    args.memory_limit_bytes = parse_bytes(args.memory_limit)
    args.pause = False if args.pause.lower() == "false" else float(args.pause)
    args.host_tier_bytes = parse_bytes(args.host_tier) if args.host_tier else args.memory_limit_bytes // 3 // MiB * MiB
    workloads = [w for w in args.workloads.split(",") if w]
    for w in workloads:
        if w not in WORKLOADS:
            p.error(f"unknown workload {w!r}; choose from {', '.join(WORKLOADS)}")
    sides = tuple(x for x in args.sides.split(",") if x)
    if not sides or any(x not in SIDES for x in sides) or len(set(sides)) != len(sides):
        p.error(f"--sides: one or both of {', '.join(SIDES)}")
    workdir = args.dir or tempfile.mkdtemp(prefix="spillway-dask-bench-", dir="/var/tmp")
    os.makedirs(workdir, exist_ok=True)
    started, load_before = datetime.datetime.now(), load()
    print(f"dask_bench: {args.workers} workers x {args.memory_limit_bytes / MiB:.0f} MiB, scale {args.scale}, "
          f"spillway host tier {args.host_tier_bytes / MiB:.0f} MiB, dir {workdir}, load {load_before}", flush=True)
    args.disk_ref = None if args.no_disk_reference else disk_reference(workdir)
    if args.disk_ref and "write" in args.disk_ref:
        print(f"dask_bench: disk (fio, O_DIRECT, 1 MiB): write {args.disk_ref['write'] / 1e9:.2f} GB/s (depth 32, "
              f"--end_fsync=1), read {args.disk_ref['read'] / 1e9:.2f} GB/s (depth 16)", flush=True)
    elif args.disk_ref:
        print(f"dask_bench: no disk reference: {args.disk_ref['why']}", flush=True)
    runs = []
    try:
        for rep in range(args.repeat):
            order = sides if rep % 2 == 0 else sides[::-1]
            runs.append({side: run_side(side, args, workdir, workloads, rep) for side in order})
    finally:
        if args.dir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    if len(sides) < 2:
        print(f"dask_bench: only {sides[0]} ran (--sides): no ratio, no report")
        return 0
    for run in runs:
        for wl in workloads:
            if "failed" in run["dask"][wl] or "failed" in run["spillway"][wl]:
                continue
            a, b = run["dask"][wl]["check"], run["spillway"][wl]["check"]
            if not checks_match(a, b):
                print(f"dask_bench: RESULTS DIFFER for {wl}: dask {a} spillway {b}", file=sys.stderr)
                return 1
    md, table = render(args, runs, workloads, load_before, load(), started)
    print("\n" + table)
    out = write_report(md, args.out, started)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
