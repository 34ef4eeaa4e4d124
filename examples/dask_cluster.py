#!/usr/bin/env python3
"""Dask workers whose data lives in spillway, each loading its node's tier profile.

(From the command line, Dask's own `dask worker` does the same with
`--preload spillway.dask_preload --spillway-config FILE --spillway-profile P`;
see spillway/dask_preload.py. This script starts the workers from Python.)

The cluster-nodes use case: one config file (examples/cluster-nodes.yaml)
describes every node shape as a profile (gpu-node, cpu-node). Each worker
opens a spillway engine with the profile of the node it runs on, chosen by
--profile, else $SPILLWAY_PROFILE, else the hostname rules in the file.

On every node of a cluster, next to a running `dask-scheduler`:

    PYTHONPATH=build/python /usr/bin/python3 examples/dask_cluster.py \\
        --scheduler tcp://head:8786 --workers 2 --memory-limit 16GiB

On one machine, for a try (starts a scheduler, runs a small spilling workload,
prints each worker's spillway statistics, and stops):

    PYTHONPATH=build/python /usr/bin/python3 examples/dask_cluster.py --demo

Each worker gets its own scratch directory: ${SPILLWAY_DIR:-/var/tmp/spillway}
in the config becomes $SPILLWAY_DIR/<worker name> (removed when the worker
stops), and ${SPILLWAY_WORKER_DIR} becomes the worker's local directory.
Capacities given as percentages apply per worker process: with --workers N,
give each a share (see docs/python.md).
"""
import argparse
import asyncio
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def store_spec(args):
    from spillway.dask import SpillwayStore

    return (SpillwayStore, {
        "config": os.path.abspath(args.config),
        "profile": args.profile,  # None: $SPILLWAY_PROFILE, then hostname rules
        "per_worker_vars": ("SPILLWAY_WORKER_DIR", "SPILLWAY_DIR"),
        "log_interval": args.log_interval,
    })


async def run_workers(args):
    """Starts --workers Nanny processes on this node and serves until interrupted."""
    from distributed import Nanny

    nannies = [Nanny(args.scheduler, nthreads=args.threads, memory_limit=args.memory_limit,
                     data=store_spec(args), name=f"{os.uname().nodename}-{i}")
               for i in range(args.workers)]
    await asyncio.gather(*(n.start() for n in nannies))
    print(f"{len(nannies)} spillway workers on {os.uname().nodename} joined {args.scheduler}", flush=True)
    try:
        await asyncio.gather(*(n.finished() for n in nannies))
    finally:
        await asyncio.gather(*(n.close() for n in nannies), return_exceptions=True)


def demo(args):
    """A local cluster, a dask.array workload of --demo-size, statistics."""
    import dask.array as da
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=args.workers, threads_per_worker=args.threads, memory_limit=args.memory_limit,
                      processes=True, dashboard_address=":0", data=store_spec(args)) as cluster, \
            Client(cluster) as client:
        tiers = client.run(lambda dask_worker: (dask_worker.data.engine.profile, dask_worker.data.engine.tiers))
        host_total = 0
        for worker, (profile, chain) in tiers.items():
            print(f"{worker}: profile {profile or '(none)'}: "
                  + " -> ".join(f"{t['name']} ({t['kind']}, {t['capacity_bytes'] / 2**20:.0f} MiB)" for t in chain))
            host = sum(t["capacity_bytes"] for t in chain if t["kind"] == "host")
            limit = client.scheduler_info()["workers"][worker]["memory_limit"]
            if limit and host > limit // 2:
                print(f"  warning: the host tier ({host / 2**20:.0f} MiB) is over half the worker's memory limit "
                      f"({limit / 2**20:.0f} MiB); once it fills, Dask pauses the worker (see docs/python.md)")
            host_total += host
        from dask.utils import parse_bytes

        side = 1024 * max(2, int((parse_bytes(args.demo_size) / 8) ** 0.5) // 1024)
        x = da.random.RandomState(0).random_sample((side, side), chunks=(1024, 1024)).persist()
        print(f"persisted {x.nbytes / 2**30:.2f} GiB, {x.nbytes / host_total:.1f}x the host tiers; "
              f"mean {float(x.mean().compute()):.6f} (expect about 0.5)")
        for worker, line in client.run(lambda dask_worker: dask_worker.data.summary_line()).items():
            print(f"{worker}: {line}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=os.path.join(HERE, "cluster-nodes.yaml"), help="tier config with profiles")
    p.add_argument("--profile", default=None, help="node profile (default: $SPILLWAY_PROFILE, then hostname rules)")
    p.add_argument("--scheduler", help="scheduler address to join (tcp://host:8786)")
    p.add_argument("--demo", action="store_true", help="run a local cluster and a small workload instead")
    p.add_argument("--demo-size", default="2GiB", help="data the demo persists (spills beyond the host tiers)")
    p.add_argument("--workers", type=int, default=2, help="worker processes on this node")
    p.add_argument("--threads", type=int, default=1, help="threads per worker")
    p.add_argument("--memory-limit", default="auto", help="per worker (Dask's memory_limit)")
    p.add_argument("--log-interval", type=float, default=60.0, help="seconds between spillway log lines")
    args = p.parse_args()
    if args.demo == bool(args.scheduler):
        p.error("give either --scheduler ADDRESS or --demo")
    if args.demo:
        demo(args)
    else:
        try:
            asyncio.run(run_workers(args))
        except KeyboardInterrupt:
            print("stopping the workers", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
