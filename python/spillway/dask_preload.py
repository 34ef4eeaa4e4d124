"""Dask worker preload: the worker keeps its data in a SpillwayStore.

On each node, next to Dask's own scheduler:

    dask scheduler                                   # (Debian 12 also: dask-scheduler)
    dask worker tcp://head:8786 --nworkers 2 --memory-limit 8GiB \\
        --preload spillway.dask_preload \\
        --spillway-config /etc/spillway/cluster-nodes.yaml --spillway-profile cpu-node

Options (after --preload spillway.dask_preload, as Dask passes them on):
  --spillway-config PATH      tier config with the node profiles (required)
  --spillway-profile NAME     profile to apply (default: $SPILLWAY_PROFILE, then the
                              file's hostname rules)
  --spillway-log-interval S   seconds between statistics lines (default 60; 0: never)
  --spillway-per-worker-vars  comma list of variables made per worker (default
                              SPILLWAY_WORKER_DIR,SPILLWAY_DIR; see spillway._dask_dirs)
  --spillway-worker-index N   this worker's index on its node (default:
                              $SPILLWAY_WORKER_INDEX, else the number the worker's
                              name ends in: 0, 1, ... or w-0, w-1, ...)
  --spillway-read-ahead SIZE  bytes of the next ready tasks' spilled inputs read ahead
                              while a task runs (spillway.dask.ReadAhead; default
                              auto: a quarter of the host tiers; 0: off)

One worker per GPU (dask-cuda style: ``dask cuda worker`` / LocalCUDACluster
start each worker with its own CUDA_VISIBLE_DEVICES, its GPU first): the
preload exports the worker index as $SPILLWAY_WORKER_INDEX before the engine
opens, and the config's gpu tier says ``device: auto`` (the first visible
device under CUDA_VISIBLE_DEVICES, else device <index>) or ``device: [0, 1]``
(by index); ``defaults.workers_per_node`` divides the node's host memory and
filesystems among the workers. See docs/config.md, "One worker per GPU".

At setup (after the worker's HTTP server starts, before it registers with the
scheduler, so it holds no data yet) the preload swaps the worker's default
store for a SpillwayStore opened with the worker's local directory, and
registers the engine's metrics on the worker's Prometheus endpoint
(``/metrics``), every sample labelled ``worker="<worker name>"``. At
teardown it closes the store, which removes the worker's scratch folders; the
folders of a worker that was killed are reclaimed by the next worker that
opens a store on the node (Dask's WorkSpace does the same for its own
directories).
"""
from __future__ import annotations

import logging
import os

import click

logger = logging.getLogger("distributed.worker.spillway")

_STATE = "_spillway_preload"


class StoreFailed(BaseException):
    """The preload's store did not open. A BaseException, so that the worker's start fails
    instead of distributed catching it (it catches Exception from preloads) and going on."""


class _SetupCommand(click.Command):
    """dask_setup's command: its options are checked when ``dask worker`` parses them.

    distributed parses a preload's options before the worker starts (its
    validate_preload_argv) but catches what the preload raises once the worker
    runs, and then goes on with Dask's own store. So the config is checked here,
    at parse time, as `spillway validate` checks it: a misspelled key stops the
    worker with the validator's message and exit status 2, as a missing file does.
    """

    def parse_args(self, ctx, args):
        rest = super().parse_args(ctx, args)
        if not ctx.resilient_parsing:
            check_config(ctx.params["spillway_config"], ctx.params.get("spillway_profile"),
                         tuple(v for v in (ctx.params.get("spillway_per_worker_vars") or "").split(",") if v))
        return rest


def check_config(path, profile=None, per_worker_vars=()):
    """Raises click.BadParameter with every error `spillway validate` would print for `path`.

    Per-worker variables stand for a folder under the system's temporary directory
    (their real values are known only once the worker runs); the filesystem is not
    probed, since the worker's own folders do not exist yet.
    """
    import tempfile

    from . import _spillway

    names = frozenset(per_worker_vars)
    stand_in = os.path.join(tempfile.gettempdir(), "spillway-worker")

    def resolve(name, default):
        if name not in names:
            return None
        return os.environ.get(name) or default or stand_in

    result = _spillway.validate_config(path, profile, vars=resolve, check_filesystem=False)
    if not result["ok"]:
        raise click.BadParameter("\n" + "\n".join(result["errors"]), param_hint="--spillway-config")
    from .dask import persistent_tier_error

    refused = persistent_tier_error(result["tiers"])
    if refused:
        raise click.BadParameter(refused, param_hint="--spillway-config")


@click.command(cls=_SetupCommand)
@click.option("--spillway-config", required=True, type=click.Path(exists=True, dir_okay=False),
              help="spillway tier config (YAML) with the node profiles")
@click.option("--spillway-profile", default=None, help="profile (default: $SPILLWAY_PROFILE, then hostname rules)")
@click.option("--spillway-log-interval", default=60.0, type=float, show_default=True,
              help="seconds between spillway statistics lines (0: never)")
@click.option("--spillway-per-worker-vars", default="SPILLWAY_WORKER_DIR,SPILLWAY_DIR", show_default=True,
              help="variables made per worker in the config")
@click.option("--spillway-worker-index", default=None, type=click.IntRange(min=0),
              help="this worker's index on its node (default: $SPILLWAY_WORKER_INDEX, then the worker's name)")
@click.option("--spillway-read-ahead", default="auto", show_default=True,
              help="bytes of the next tasks' spilled inputs read ahead (auto: a quarter of the host tiers; 0: off)")
def dask_setup(worker, spillway_config, spillway_profile, spillway_log_interval, spillway_per_worker_vars,
               spillway_worker_index, spillway_read_ahead):
    try:
        install(worker, config=spillway_config, profile=spillway_profile, log_interval=spillway_log_interval,
                per_worker_vars=tuple(v for v in spillway_per_worker_vars.split(",") if v),
                worker_index=spillway_worker_index, read_ahead=_read_ahead_bytes(spillway_read_ahead))
    except Exception as e:
        # distributed logs what a preload raises and starts the worker anyway, on Dask's own
        # store: a worker that asked for spillway must not join the cluster without it.
        logger.critical("spillway: worker %s stops: its store did not open: %s: %s", worker.name, type(e).__name__, e)
        raise StoreFailed(f"spillway: the store did not open: {type(e).__name__}: {e}") from e


def _read_ahead_bytes(text):
    """None for auto, else bytes (Dask's size syntax: 64MiB, 1e8, 0)."""
    if text is None or str(text).strip().lower() == "auto":
        return None
    from dask.utils import parse_bytes

    try:
        n = parse_bytes(text)
    except ValueError:
        raise click.BadParameter(f"not a size: {text!r} (say 64MiB, 0 or auto)", param_hint="--spillway-read-ahead")
    if n < 0:
        raise click.BadParameter(f"must not be negative: {text!r}", param_hint="--spillway-read-ahead")
    return n


def install(worker, worker_index=None, read_ahead=None, **store_kwargs):
    """Replaces `worker`'s data store with a SpillwayStore (the worker must hold no data yet).

    The worker's index (`worker_index`, else $SPILLWAY_WORKER_INDEX, else its
    name; see spillway._dask_dirs.worker_index) is exported as
    $SPILLWAY_WORKER_INDEX for the config loader, which picks the worker's gpu
    device from it. Each ``dask worker`` process has its own environment; in a
    cluster of threads (``processes=False``) every worker would share one, so
    give such workers a config with a fixed device instead.

    `read_ahead`: bytes of the next ready tasks' spilled inputs hinted while a
    task runs (spillway.dask.ReadAhead); None: a quarter of the host tiers; 0: off.
    """
    import os

    from . import _dask_dirs
    from .dask import SpillwayStore

    old = worker.memory_manager.data
    if len(old):
        raise RuntimeError(f"spillway.dask_preload: worker {worker.name} already holds {len(old)} keys")
    index = _dask_dirs.worker_index(worker.name, worker_index)
    if index is not None:
        os.environ[_dask_dirs.WORKER_INDEX_VAR] = str(index)
    store = SpillwayStore(worker_local_directory=worker.local_directory, **store_kwargs)
    # Worker.data reads memory_manager.data; the state machine keeps its own reference.
    worker.memory_manager.data = store
    worker.state.data = store
    close = getattr(old, "close", None)
    if close is not None:
        close()
    collector = _register_metrics(store, worker.name)
    setattr(worker, _STATE, (store, collector))
    if read_ahead != 0:  # None: auto
        from .dask import ReadAhead

        # The worker's plugins dict is the one its state machine notifies of transitions.
        plugins = getattr(worker, "plugins", None)
        if plugins is None:
            plugins = getattr(worker.state, "plugins", None)
        if plugins is None:
            logger.warning("spillway: this worker has no plugins dict: no read-ahead")
        else:
            plugins[ReadAhead.name] = ReadAhead(worker, store, max_bytes=read_ahead)
    mm = worker.memory_manager
    limit = mm.memory_limit
    host = sum(t["capacity_bytes"] for t in store.engine.tiers if t["kind"] == "host")
    # The host tier yields to the worker's other memory, as Dask's memory manager
    # spills by process memory: demote while the worker's resident memory is above
    # its target fraction (else its spill fraction) of the limit. Without this, a
    # full host tier plus a shuffle's intermediates outgrew the limit (the nanny
    # killed workers at 256-600 MiB). A store given its own limit keeps it.
    frac = getattr(mm, "memory_target_fraction", None) or getattr(mm, "memory_spill_fraction", None)
    if limit and frac and not store.process_memory_limit:
        store.set_process_memory_limit(int(limit * frac))
    pause = mm.memory_pause_fraction
    if limit and pause and host > pause * limit * 0.6:
        logger.warning("spillway: host tier %s is over 60%% of the pause threshold (%s of %s): the worker may "
                       "pause once the tier fills (see docs/python.md, sizing)",
                       _mib(host), f"{pause:.0%}", _mib(limit))
    logger.info("spillway: worker %s (index %s, CUDA_VISIBLE_DEVICES=%s) stores its data in %s (profile %s, pid %d): %s; "
                "host tiers demote above %s of process memory",
                worker.name, "unknown" if index is None else index, os.environ.get("CUDA_VISIBLE_DEVICES", "(unset)"),
                store.engine.source, store.engine.profile or "(none)", os.getpid(),
                " -> ".join(f"{t['name']} ({t['kind']}, {_mib(t['capacity_bytes'])})" for t in store.engine.tiers),
                _mib(store.process_memory_limit) if store.process_memory_limit else "(no limit)")
    return store


def dask_teardown(worker):
    store, collector = getattr(worker, _STATE, (None, None))
    if collector is not None:
        try:
            from prometheus_client import REGISTRY

            REGISTRY.unregister(collector)
        except (ImportError, KeyError):
            pass
    if store is not None:
        store.close()


def _register_metrics(store, worker_name):
    try:
        from prometheus_client import REGISTRY
    except ImportError:
        logger.warning("spillway: prometheus_client is not installed, so the engine's metrics are not on the "
                       "worker's /metrics (Debian: apt-get install python3-prometheus-client)")
        return None
    from ._dask_metrics import PrometheusCollector

    collector = PrometheusCollector(store, worker_name)
    REGISTRY.register(collector)
    return collector


def _mib(n):
    return f"{n / 2**20:.0f} MiB"
