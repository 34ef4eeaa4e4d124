"""What SpillwayStore reports to Dask, in Dask's own terms.

Dask's worker and dashboard read three things from ``Worker.data``:

- ``spilled_total`` -> ``(memory, disk)``: ``memory`` is the ``sizeof`` of the
  values that are *not* in process memory (the scheduler subtracts it from the
  worker's managed memory, ``sum(sizeof)`` of its keys), ``disk`` the bytes
  they take on disk;
- ``get_metrics()`` -> the SpillBuffer counters that the Prometheus endpoint
  exports (``spill_bytes``, ``spill_count``, ``spill_time``);
- ``len(data.slow)`` -> tasks in memory vs on disk in the ``tasks`` gauge.

The store records each key's ``sizeof`` when it is stored. Which keys sit in a
file tier comes from ``spilled_keys`` (exact when the engine can say where a
key is, see docs/python.md); ``store_stats`` and ``summary_line`` are the
store's stats() and log line.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from time import monotonic


class TierView(Mapping):
    """Read-only view of the store's keys in memory (``fast``) or spilled (``slow``).

    For tools that inspect SpillBuffer's parts: iteration, ``len``, ``in`` and
    item access (which reads the value, as SpillBuffer.slow[k] would).
    ``weights`` gives each key's ``sizeof``, ``total_weight`` their sum, as
    zict's LRU does. Writes go through the store itself.
    """

    def __init__(self, store, spilled):
        self._store = store
        self._spilled = spilled

    def _members(self):
        spilled = self._store._spilled_keys()
        keys = self._store._snapshot()
        return [k for k in keys if (k in spilled) == self._spilled]

    def __contains__(self, key):
        try:
            present = key in self._store._keys
        except TypeError:
            return False
        return present and (key in self._store._spilled_keys()) == self._spilled

    def __getitem__(self, key):
        if key not in self:
            raise KeyError(key)
        return self._store[key]

    def __iter__(self):
        return iter(self._members())

    def __len__(self):
        return len(self._members())

    @property
    def weights(self):
        entries = self._store._keys
        return {k: entries[k].weight for k in self._members() if k in entries}

    @property
    def total_weight(self):
        return sum(self.weights.values())

    def __repr__(self):
        return f"<{'slow' if self._spilled else 'fast'} view of {self._store!r}: {len(self)} keys>"


def file_tiers(engine_stats):
    return [t for t in engine_stats["tiers"] if t["kind"] == "file"]


def spilled_keys(store):
    """The keys whose bytes sit in a file tier (not in process memory).

    Exact with Engine.tiers_of (a key is spilled when its main object is
    in a file tier); with a module that lacks it, an estimate: the oldest
    keys up to the file tiers' raw bytes (the engine demotes the least
    recently used first).
    """
    if store._closed or store.engine.closed:
        return frozenset()
    with store._lock:
        items = [(k, e) for k, e in store._keys.items() if not e.overflow]
    in_file = in_file_tiers(store, [e for _, e in items])
    if in_file is not None:
        return {k for (k, _), f in zip(items, in_file) if f}
    budget = sum(t["raw_bytes"] for t in file_tiers(store.engine.stats()))
    out = set()
    for k, e in items:
        if budget <= 0:
            break
        out.add(k)
        budget -= e.nbytes
    return out


def in_file_tiers(store, entries):
    """For each entry, whether its bytes sit in a file tier (Engine.tiers_of); None when the
    module lacks tiers_of. A value whose large frames are objects of their own is where its
    largest frame is."""
    tiers_of = getattr(store.engine, "tiers_of", None)
    if tiers_of is None:
        return None
    if store._file_tiers is None:
        store._file_tiers = frozenset(i for i, t in enumerate(store.engine.tiers) if t["kind"] == "file")
    where = tiers_of([e.part_key(e.parts[0]) if e.parts else e.ekey for e in entries])
    return [t in store._file_tiers for t in where]


def store_stats(store):
    """{"engine": engine stats (tiers, boundaries, ...), "store": store counters, "summary": totals}.

    Each of engine["tiers"] is the tier's entry in `spillway validate --json` and
    `info --json` (Engine.tiers: name, kind, capacity_bytes, watermarks, codec, ...)
    with the stats export's counters (used_bytes, objects, raw_bytes, ...) added.
    """
    engine = store.engine.stats()
    for t in engine["tiers"]:
        for k, v in store._tier_config.get(t["name"], {}).items():
            t.setdefault(k, v)
    spilled = spilled_keys(store)
    m = store._materializer
    with m.lock:
        lazy = {"lazy_serializations": m.calls, "lazy_serialize_failures": m.failures,
                "lazy_serialized_bytes": m.bytes, "lazy_serialize_seconds": m.seconds}
    with store._lock:
        counters = dict(store.counters, keys=len(store._keys), overflow_keys=len(store._overflow),
                        weight=store._weight, spilled_keys=len(spilled), **lazy)
    # Serializing at demotion is still serializing (Dask's pickle_time_total).
    counters["serialize_seconds"] += lazy["lazy_serialize_seconds"]
    tiers = engine["tiers"]
    summary = {
        "demotions": sum(t["demotions_out"] for t in tiers),
        "promotions": sum(t["promotions_out"] for t in tiers),
        "objects_by_tier": {t["name"]: t["objects"] for t in tiers},
        "bytes_by_tier": {t["name"]: t["raw_bytes"] for t in tiers},
        "spilled_bytes": sum(t["raw_bytes"] for t in tiers if t["kind"] == "file"),
    }
    return {"engine": engine, "store": counters, "summary": summary}


def summary_line(store):
    s = store.stats()
    e, st = s["engine"], s["store"]
    tiers = ", ".join(
        f"{t['name']} {t['objects']} obj {_fmt(t['raw_bytes'])}/{_fmt(t['capacity_bytes'])}" for t in e["tiers"]
    )
    return (f"spillway: {st['keys']} keys; {tiers}; demotions {s['summary']['demotions']}, "
            f"promotions {s['summary']['promotions']}, caller-thread demotions {e['sync_demotions']}, "
            f"overflow {st['overflow_keys']}")


def _fmt(n):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def spilled_total(store):
    """(sizeof of the values in file tiers, bytes they take there), as SpillBuffer reports."""
    from distributed.spill import SpilledSize

    if store._closed:
        return SpilledSize(0, 0)
    spilled = spilled_keys(store)
    with store._lock:
        weight = sum(store._keys[k].weight for k in spilled if k in store._keys)
    disk = sum(t["used_bytes"] for t in file_tiers(store.engine.stats()))
    return SpilledSize(weight, disk)


def new_counters():
    """The store's counters (SpillwayStore.counters), all zero; stats() reports them."""
    return {
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
        "unread_releases": 0,  # pop/discard/del of values never read back
        "adopted_bytes": 0,  # frame bytes the engine adopted without a copy
        "lazy_puts": 0,  # values handed over live (put_external), not serialized by __setitem__
        "live_hits": 0,  # reads served by the engine's live object, no deserialization
        "relived": 0,  # values read back from bytes and handed over live again
        "prefetch_hints": 0,  # engine objects hinted by prefetch() (ReadAhead: the next tasks' inputs)
        "prefetch_bytes": 0,
        "relieve_calls": 0,  # Engine.relieve_memory calls for process_memory_limit (_relieve)
        "relieve_seconds": 0.0,
    }


def maybe_log(store, logger):
    """Logs the store's summary line when log_interval has passed and something happened."""
    if not store.log_interval:
        return
    now = monotonic()
    if now - store._last_log < store.log_interval:
        return
    with store._lock:
        ops = store.counters["puts"] + store.counters["gets"]
        if ops == store._last_logged_ops or now - store._last_log < store.log_interval:
            return
        store._last_log = now
        store._last_logged_ops = ops
    logger.info(store.summary_line())


def get_metrics(store):
    """The keys of distributed.spill.SpillBuffer.get_metrics, from the engine and store counters."""
    s = store.stats()
    e, c = s["engine"], s["store"]
    files = file_tiers(e)
    file_names = {t["name"] for t in files}
    down = [b for b in e["boundaries"] if b["direction"] == "down" and b["to"] in file_names]
    up = [b for b in e["boundaries"] if b["direction"] == "up" and b["from"] in file_names]
    disk_reads = sum(t["hits"] for t in files)
    disk_read_bytes = sum(t["bytes_read"] for t in files)
    spilled_weight, _ = store.spilled_total
    return {
        "memory_count": c["keys"] - c["spilled_keys"],
        "memory_bytes": c["weight"] - spilled_weight,  # sizeof, as SpillBuffer.fast.total_weight
        "disk_count": c["spilled_keys"],
        "disk_bytes": sum(t["used_bytes"] for t in files),
        "memory_read_count_total": c["gets"] + c["cache_hits"] + c.get("live_hits", 0) - disk_reads,
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


class PrometheusCollector:
    """The engine's own metrics (Engine.stats_prometheus) on Dask's Prometheus endpoint.

    Registered in prometheus_client's default registry, which the worker's
    ``/metrics`` route serves; every sample gets a ``worker`` label (the
    worker's name), so the series of several workers scraped into one
    Prometheus stay apart, and a restarted worker's series go on.
    """

    def __init__(self, store, worker_label):
        self._store = store
        self.worker_label = str(worker_label)
        self._pid = str(os.getpid())

    def describe(self):
        # Nothing declared up front: the registry then does not collect at
        # registration, and several workers of one process may each register one.
        return []

    def collect(self):
        from prometheus_client.core import Metric
        from prometheus_client.parser import text_string_to_metric_families

        engine = self._store.engine
        if engine.closed:
            return
        for family in text_string_to_metric_families(engine.stats_prometheus()):
            out = Metric(family.name, family.documentation, family.type, family.unit)
            for sample in family.samples:
                out.add_sample(sample.name, self._labels(sample.labels), sample.value, sample.timestamp,
                               sample.exemplar)
            yield out

    def _labels(self, labels):
        """The sample's labels with worker=<name>. The engine's default label, engine="<pid>"
        (or "<pid>.<n>"), is dropped: a restarted worker keeps its name, not its pid, so its
        series go on instead of starting anew. Labels a config sets (metrics.labels) stay."""
        out = dict(labels, worker=self.worker_label)
        engine = out.get("engine")
        if engine is not None and engine.split(".", 1)[0] == self._pid:
            del out["engine"]
        return out
