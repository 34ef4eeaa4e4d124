"""SpillwayStore: a spillway engine as a Dask worker's ``data`` mapping.

    from distributed import LocalCluster
    from spillway.dask import SpillwayStore
    cluster = LocalCluster(n_workers=2, data=(SpillwayStore, {"config": "tiers.yaml"}))

Each value is serialized with Dask's own serialization (``serialize`` with the
"dask" then "pickle" serializers; "cuda" first when the chain has a gpu tier)
into a header and frames, and stored as ONE multi-buffer spillway object: the
msgpack'd header first, then the frames, read in place (NumPy data is not
copied on the Python side). The engine places it in the first tier with room
and moves it down the chain under pressure: spilling is the engine's job, so
the store does not implement Dask's manual ``evict()`` protocol and the worker's
memory monitor leaves it alone (it still pauses the worker at the pause
threshold). Size the host tier below the worker's memory limit.

Reading deserializes straight from the pinned object: the frames are writable
views of the engine's bytes (``writable_views``), so Dask's deserializers
build writeable arrays on them without a copy. As with Dask's in-memory
values, a task that writes into its input changes the stored value while the
object is in a memory tier. Values that are still alive are served from a
weak cache, as Dask's own SpillBuffer does.

Per-worker directories: ``${SPILLWAY_WORKER_DIR}`` in the config (a path or a
dict) becomes ``<worker local directory>/spillway``, so one config serves
every worker of a node; ``per_worker_vars`` makes other variables per-worker
too (``${SPILLWAY_DIR}`` -> ``$SPILLWAY_DIR/<worker name>``). Other ``${VAR}``s
are expanded by the engine from the environment.

Statistics: ``store.stats()`` (engine tiers and boundaries plus the store's
own counters), a summary line on the ``distributed.worker.spillway`` logger
every ``log_interval`` seconds of activity, and Dask's ``spilled_total`` /
``get_metrics()`` so the dashboard and Prometheus endpoint report spilling.
"""
from __future__ import annotations

import copy
import logging
import os
import pickle
import re
import shutil
import tempfile
import threading
import weakref
from collections.abc import MutableMapping
from time import monotonic, perf_counter

import msgpack
from distributed.protocol.serialize import deserialize, serialize

from . import Engine, NoSpaceError

logger = logging.getLogger("distributed.worker.spillway")

WORKER_DIR_VAR = "SPILLWAY_WORKER_DIR"
# Companion object of a value with device frames: [header, layout, *host frames].
_HEADER_SUFFIX = b"\x00hdr"


def _per_worker_value(name, default, worker_dir, created):
    """What ${NAME} / ${NAME:-default} becomes for the worker whose directory is worker_dir().

    Folders made here (outside the worker directory) are added to `created`,
    to be removed when the store goes away: each worker has a new name, so
    nothing would reuse them.
    """
    if name == WORKER_DIR_VAR:
        return worker_dir()
    base = os.environ.get(name) or default
    if not base:
        raise ValueError(f"${{{name}}} is listed in per_worker_vars but is unset and has no default")
    path = os.path.join(base, os.path.basename(os.path.dirname(worker_dir())))
    if not os.path.exists(path):
        created.add(path)
    return path


def _remove_dirs(paths):
    for p in paths:
        shutil.rmtree(p, ignore_errors=True)


def _expand_per_worker(text, names, value):
    if not names:
        return text
    pattern = re.compile(r"\$\{(" + "|".join(re.escape(n) for n in names) + r")(?::-([^}$]*))?\}")
    return pattern.sub(lambda m: value(m.group(1), m.group(2)), text)


def _substitute(obj, fn):
    if isinstance(obj, str):
        return fn(obj)
    if isinstance(obj, dict):
        return {k: _substitute(v, fn) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_substitute(v, fn) for v in obj]
    return obj


def _open_engine(config, profile, names, value):
    """Opens the engine after replacing the per-worker variables `names`."""
    expand = lambda text: _expand_per_worker(text, names, value)  # noqa: E731
    if isinstance(config, dict):
        return Engine(_substitute(copy.deepcopy(config), expand), profile=profile)
    path = os.fspath(config)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    expanded = expand(text)
    if expanded == text:
        return Engine(path, profile=profile)
    # Same line count, so the loader's file:line:column messages stay right.
    return Engine.from_yaml(expanded, source_name=path, profile=profile)


def _device_table(engine):  # issue 15: device values (spillway.device)
    from .device import DeviceValueTable

    return DeviceValueTable(engine)


def _is_device_value(value):  # issue 15
    from .device import is_device_array

    return is_device_array(value)


def _is_device(frame):
    return hasattr(frame, "__cuda_array_interface__") and not isinstance(frame, (bytes, bytearray, memoryview))


def _nbytes(frame):
    if isinstance(frame, (bytes, bytearray)):
        return len(frame)
    try:
        return memoryview(frame).nbytes
    except TypeError:
        cai = frame.__cuda_array_interface__
        n = int(cai["typestr"][2:])
        for d in cai["shape"]:
            n *= d
        return n


class SpillwayStore(MutableMapping):
    """A MutableMapping from Dask keys to values, kept in a spillway engine.

    Parameters
    ----------
    config: path of a tier YAML file, or a dict of the same structure.
    profile: tier profile to apply (default: $SPILLWAY_PROFILE, then hostname rules).
    worker_local_directory: filled in by the Dask worker; gives each worker
        its own tier directories (see per_worker_vars). Without it a fresh
        temporary directory stands in.
    per_worker_vars: variables made different for each worker before the
        engine expands the rest: ${SPILLWAY_WORKER_DIR} becomes
        <worker_local_directory>/spillway; any other listed ${NAME} (or
        ${NAME:-default}) becomes <$NAME or default>/<worker directory name>,
        e.g. ("SPILLWAY_WORKER_DIR", "SPILLWAY_DIR") for a node config whose
        scratch tier sits under ${SPILLWAY_DIR:-/var/tmp/spillway}. Workers on
        one node must never share a scratch directory: it is wiped at open.
    log_interval: seconds between statistics lines on the
        ``distributed.worker.spillway`` logger (0 or None: never).
    serializers: Dask serializer families to try, in order. Default
        ("dask", "pickle"), with "cuda" first when the chain has a gpu tier.
    weak_cache: serve values that are still alive elsewhere without
        deserializing them again.
    writable_views: hand deserializers writable views of the engine's bytes
        (no copy). False gives read-only views: Dask's deserializers then copy
        every writeable array once on each read.
    """

    def __init__(
        self,
        config,
        *,
        profile=None,
        worker_local_directory=None,
        per_worker_vars=(WORKER_DIR_VAR,),
        log_interval=30.0,
        serializers=None,
        weak_cache=True,
        writable_views=True,
    ):
        self._tmpdir = None

        def worker_dir():  # <worker directory>/spillway
            if worker_local_directory:
                return os.path.join(os.path.normpath(os.fspath(worker_local_directory)), "spillway")
            if self._tmpdir is None:
                self._tmpdir = tempfile.TemporaryDirectory(prefix="spillway-store-")
            return os.path.join(self._tmpdir.name, "spillway")

        created = set()

        def value(name, default):
            return _per_worker_value(name, default, worker_dir, created)

        self.engine = _open_engine(config, profile, tuple(per_worker_vars), value)
        # Scratch folders made for this worker go with it (at close, collection or exit);
        # a persistent tier's folder stays.
        persistent = [p for t in self.engine.tiers if t.get("persistent") for p in t["paths"]]
        created = {c for c in created if not any(p == c or p.startswith(c + os.sep) for p in persistent)}
        self._cleanup = weakref.finalize(self, _remove_dirs, sorted(created))
        has_gpu = any(t["kind"] == "gpu" for t in self.engine.tiers)
        if serializers is None:
            serializers = ("cuda", "dask", "pickle") if has_gpu else ("dask", "pickle")
        self.serializers = tuple(serializers)
        self.deserializers = tuple(dict.fromkeys(self.serializers + ("dask", "pickle")))
        # ---- issue 15: device values (spillway.device) ----
        self._device = _device_table(self.engine) if has_gpu else None
        self.log_interval = log_interval
        self.writable_views = bool(writable_views)
        self._keys = {}  # key -> (engine key, raw bytes, has device frames); the engine cannot list keys
        self._overflow = {}  # values no tier could hold, kept as live objects (NoSpace)
        self._cache = weakref.WeakValueDictionary() if weak_cache else None
        self._lock = threading.RLock()  # guards the dicts above and the counters
        self._last_log = monotonic()
        self._last_logged_ops = 0
        self.counters = {
            "puts": 0,
            "gets": 0,
            "cache_hits": 0,
            "put_bytes": 0,
            "get_bytes": 0,
            "serialize_seconds": 0.0,
            "put_seconds": 0.0,
            "get_seconds": 0.0,
            "deserialize_seconds": 0.0,
            "overflow_puts": 0,
        }

    # ---- keys -------------------------------------------------------------
    @staticmethod
    def _engine_key(key):
        # Injective across key types: Dask keys are str here, tuples in newer versions.
        if isinstance(key, str):
            return b"s" + key.encode("utf-8", "surrogatepass")
        if isinstance(key, bytes):
            return b"b" + key
        return b"p" + pickle.dumps(key, protocol=4)

    # ---- MutableMapping ---------------------------------------------------
    def __setitem__(self, key, value):
        ekey = self._engine_key(key)
        t0 = perf_counter()
        with self._lock:
            old = self._keys.pop(key, None)
            self._overflow.pop(key, None)
            self._forget(key)
        # ---- issue 15: device arrays are adopted without a copy (spillway.device) ----
        if self._device is not None:
            self._device.discard(key)  # a previous device value of this key
        if self._device is not None and _is_device_value(value):
            if old is not None:
                self._erase_engine(ekey, old[2])
            try:
                nbytes = self._device.put(key, value)
            except NoSpaceError as e:
                self._keep_in_memory(key, ekey, None, value, 0, f"no tier has room ({e})")
                return
            with self._lock:
                self._keys[key] = (ekey, nbytes, False)
                self.counters["puts"] += 1
                self.counters["put_bytes"] += nbytes
                self.counters["put_seconds"] += perf_counter() - t0
            self._maybe_log()
            return
        try:
            header, frames = serialize(value, serializers=self.serializers, on_error="raise")
            head = msgpack.dumps(header, use_bin_type=True)
        except Exception as e:  # not serializable: Dask's own buffer would keep it in memory too
            self._keep_in_memory(key, ekey, old, value, 0, f"cannot serialize it ({type(e).__name__}: {e})")
            return
        t1 = perf_counter()
        device = any(_is_device(f) for f in frames)
        nbytes = len(head) + sum(_nbytes(f) for f in frames)
        try:
            if device:
                self._put_device(ekey, head, frames)
            else:
                self.engine.put(ekey, [head, *frames])
        except NoSpaceError as e:
            self._keep_in_memory(key, ekey, old, value, nbytes, f"no tier has room ({e})")
            return
        if old is not None and old[2] and not device:
            self._erase_quiet(ekey + _HEADER_SUFFIX)
        t2 = perf_counter()
        with self._lock:
            self._keys[key] = (ekey, nbytes, device)
            c = self.counters
            c["puts"] += 1
            c["put_bytes"] += nbytes
            c["serialize_seconds"] += t1 - t0
            c["put_seconds"] += t2 - t1
        self._maybe_log()

    def _keep_in_memory(self, key, ekey, old, value, nbytes, why):
        if old is not None:  # the previous value may be in the engine
            self._erase_engine(ekey, old[2])
        with self._lock:
            self._overflow[key] = value
            self._keys[key] = (ekey, nbytes, False)
            self.counters["overflow_puts"] += 1
        logger.warning("spillway: keeping %r in process memory: %s", key, why)

    def _put_device(self, ekey, head, frames):
        # One engine object holds one memory kind: device frames go under the
        # key itself, the header and any host frames into a companion object.
        layout = "".join("d" if _is_device(f) else "h" for f in frames)
        self.engine.put(ekey, [f for f in frames if _is_device(f)], memory="device")
        self.engine.put(ekey + _HEADER_SUFFIX, [head, layout.encode(), *[f for f in frames if not _is_device(f)]])

    def __getitem__(self, key):
        with self._lock:
            if key in self._overflow:
                return self._overflow[key]
            entry = self._keys.get(key)
            if entry is None:
                raise KeyError(key)
            if self._cache is not None:
                value = self._cache.get(key)
                if value is not None:
                    self.counters["cache_hits"] += 1
                    return value
        if self._device is not None and key in self._device:  # issue 15: device values
            try:
                value = self._device.get(key)
            except KeyError:
                raise KeyError(key) from None
            with self._lock:
                self.counters["gets"] += 1
                self.counters["get_bytes"] += entry[1]
            return value
        ekey, nbytes, device = entry
        t0 = perf_counter()
        try:
            if device:
                head, frames = self._get_device(ekey)
            else:
                bufs = self.engine.get_buffers(ekey, writable=self.writable_views)
                head, frames = bufs[0], bufs[1:]
        except KeyError:
            raise KeyError(key) from None  # erased concurrently
        t1 = perf_counter()
        header = msgpack.loads(head, raw=False, use_list=False)
        value = deserialize(header, frames, deserializers=self.deserializers)
        t2 = perf_counter()
        with self._lock:
            if self._cache is not None:
                try:
                    self._cache[key] = value
                except TypeError:
                    pass  # not weakly referenceable (int, tuple, ...)
            c = self.counters
            c["gets"] += 1
            c["get_bytes"] += nbytes
            c["get_seconds"] += t1 - t0
            c["deserialize_seconds"] += t2 - t1
        self._maybe_log()
        return value

    def _get_device(self, ekey):
        host = self.engine.get_buffers(ekey + _HEADER_SUFFIX, writable=self.writable_views)
        head, layout, host_frames = host[0], bytes(host[1]).decode(), iter(host[2:])
        device_frames = iter(self.engine.get_buffers(ekey, where="device"))
        return head, [next(device_frames) if c == "d" else next(host_frames) for c in layout]

    def __delitem__(self, key):
        with self._lock:
            entry = self._keys.pop(key)  # KeyError when absent
            in_overflow = self._overflow.pop(key, None) is not None
            self._forget(key)
        if self._device is not None and self._device.discard(key):  # issue 15: device values
            return
        if not in_overflow:
            self._erase_engine(entry[0], entry[2])

    def _forget(self, key):
        # REQUIRES: self._lock held.
        if self._cache is not None:
            self._cache.pop(key, None)

    def _erase_engine(self, ekey, device):
        self._erase_quiet(ekey)
        if device:
            self._erase_quiet(ekey + _HEADER_SUFFIX)

    def _erase_quiet(self, ekey):
        try:
            self.engine.erase(ekey)
        except KeyError:
            pass

    def __contains__(self, key):
        return key in self._keys

    def __iter__(self):
        with self._lock:
            return iter(list(self._keys))

    def __len__(self):
        return len(self._keys)

    def __repr__(self):
        return f"<SpillwayStore: {len(self)} keys, config {self.engine.source!r}>"

    def close(self):
        """Closes the engine (after values read from it are released)."""
        with self._lock:
            self._keys.clear()
            self._overflow.clear()
        if self._device is not None and not self.engine.closed:  # issue 15: device values
            self._device.clear()
        if not self.engine.closed:
            self.engine.close()
        self._cleanup()
        if self._tmpdir is not None:
            self._tmpdir.cleanup()
            self._tmpdir = None

    # ---- statistics -------------------------------------------------------
    def stats(self):
        """{"engine": engine stats (tiers, boundaries, ...), "store": store counters, "summary": totals}."""
        engine = self.engine.stats()
        with self._lock:
            store = dict(self.counters, keys=len(self._keys), overflow_keys=len(self._overflow))
        tiers = engine["tiers"]
        summary = {
            "demotions": sum(t["demotions_out"] for t in tiers),
            "promotions": sum(t["promotions_out"] for t in tiers),
            "objects_by_tier": {t["name"]: t["objects"] for t in tiers},
            "bytes_by_tier": {t["name"]: t["raw_bytes"] for t in tiers},
            "spilled_bytes": sum(t["raw_bytes"] for t in tiers if t["kind"] == "file"),
        }
        return {"engine": engine, "store": store, "summary": summary}

    def summary_line(self):
        s = self.stats()
        e, st = s["engine"], s["store"]
        tiers = ", ".join(
            f"{t['name']} {t['objects']} obj {_fmt(t['raw_bytes'])}/{_fmt(t['capacity_bytes'])}" for t in e["tiers"]
        )
        return (f"spillway: {st['keys']} keys; {tiers}; demotions {s['summary']['demotions']}, "
                f"promotions {s['summary']['promotions']}, caller-thread demotions {e['sync_demotions']}, "
                f"overflow {st['overflow_keys']}")

    def _maybe_log(self):
        if not self.log_interval:
            return
        now = monotonic()
        if now - self._last_log < self.log_interval:
            return
        with self._lock:
            ops = self.counters["puts"] + self.counters["gets"]
            if ops == self._last_logged_ops or now - self._last_log < self.log_interval:
                return
            self._last_log = now
            self._last_logged_ops = ops
        logger.info(self.summary_line())

    # Dask's metrics protocol (what SpillBuffer offers): the worker reports
    # spilled_total to the scheduler and get_metrics() to Prometheus.
    @property
    def spilled_total(self):
        from distributed.spill import SpilledSize

        tiers = self.engine.stats()["tiers"]
        files = [t for t in tiers if t["kind"] == "file"]
        return SpilledSize(sum(t["raw_bytes"] for t in files), sum(t["used_bytes"] for t in files))

    def get_metrics(self):
        s = self.stats()
        e, c = s["engine"], s["store"]
        mem = [t for t in e["tiers"] if t["kind"] != "file"]
        files = [t for t in e["tiers"] if t["kind"] == "file"]
        file_names = {t["name"] for t in files}
        down = [b for b in e["boundaries"] if b["direction"] == "down" and b["to"] in file_names]
        up = [b for b in e["boundaries"] if b["direction"] == "up" and b["from"] in file_names]
        disk_reads = sum(t["hits"] for t in files)
        disk_read_bytes = sum(t["bytes_read"] for t in files)
        return {
            "memory_count": sum(t["objects"] for t in mem),
            "memory_bytes": sum(t["raw_bytes"] for t in mem),
            "disk_count": sum(t["objects"] for t in files),
            "disk_bytes": sum(t["used_bytes"] for t in files),
            "memory_read_count_total": sum(t["hits"] for t in mem) + c["cache_hits"],
            "memory_read_bytes_total": max(0, c["get_bytes"] - disk_read_bytes),
            "disk_read_count_total": disk_reads,
            "disk_read_bytes_total": disk_read_bytes,
            "disk_read_time_total": sum(b["seconds"] for b in up),
            "disk_write_count_total": sum(b["objects"] for b in down),
            "disk_write_bytes_total": sum(b["stored_bytes"] for b in down),
            "disk_write_time_total": sum(b["seconds"] for b in down),
            "pickle_time_total": c["serialize_seconds"],
            "unpickle_time_total": c["deserialize_seconds"],
        }


def _fmt(n):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
