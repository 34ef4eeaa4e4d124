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
file tier comes from ``SpillwayStore._spilled_keys()`` (exact when the engine
can say where a key is, see docs/python.md).
"""
from __future__ import annotations

import os
from collections.abc import Mapping


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
