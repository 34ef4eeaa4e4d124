"""SpillwayStore: a spillway engine as a Dask worker's ``data`` mapping.

    from distributed import LocalCluster
    from spillway.dask import SpillwayStore
    cluster = LocalCluster(n_workers=2, data=(SpillwayStore, {"config": "tiers.yaml"}))
    # or from the command line: dask worker ADDRESS --preload spillway.dask_preload \
    #     --spillway-config nodes.yaml --spillway-profile cpu-node   (see spillway.dask_preload)

Values move as live objects until they must become bytes: the engine holds a
value that exposes no buffer as the object itself (Engine.put_external) and
serializes it only when it demotes it to a file tier; buffer values are
serialized at once with Dask's serialization and their large frames adopted
without a copy (spillway._dask_values). Spilling is the engine's job: the
store does not implement Dask's evict() protocol. What the mapping guarantees
(overwrites, pops that read nothing, fast/slow views, Dask's metrics) is in
docs/python.md, "What the store guarantees" and "What a worker's data
becomes"; per-worker directories in spillway._dask_dirs; the read-ahead
plugin in spillway._dask_readahead.
"""
from __future__ import annotations

import itertools
import logging
import os
import threading
import weakref
from collections.abc import MutableMapping
from time import monotonic, perf_counter

import msgpack
from dask.sizeof import sizeof
from distributed.protocol.serialize import deserialize, serialize

from . import Engine, NoSpaceError
from . import _dask_dirs as dirs
from . import _dask_metrics as metrics
from ._dask_metrics import TierView
from ._dask_readahead import ReadAhead, hint_inputs, next_ready  # noqa: F401  (public here)
from ._dask_values import (  # noqa: F401  (ADOPT_MIN_BYTES and persistent_tier_error are public here)
    _HEADER_SUFFIX,
    ADOPT_MIN_BYTES,
    _device_table,
    _Entry,
    _exposes_buffer,
    _is_device,
    _is_device_value,
    _Materializer,
    _nbytes,
    part_key,
    persistent_tier_error,
)

__all__ = ["SpillwayStore", "ReadAhead", "next_ready", "persistent_tier_error", "part_key", "ADOPT_MIN_BYTES",
           "RELIEVE_MIN_BYTES", "WORKER_DIR_VAR"]

logger = logging.getLogger("distributed.worker.spillway")

WORKER_DIR_VAR = dirs.WORKER_DIR_VAR
# Engine keys. Every put of a value gets a fresh id, and the engine keys of that
# value are b"v<id hex>" (the value: its header and frames), b"v<id>.f<i>" (frame
# i, stored as an object of its own) and b"v<id>.h" (the companion of a value
# with device frames: [header, layout, *host frames]). User keys never reach the
# engine, so no two keys can share an object whatever their bytes or length, two
# equal keys (1 and 1.0, True) are one entry, and an overwrite writes the new
# value beside the old one, which stays readable until the new one is in.
_ID_PREFIX = b"v"
_MISSING = object()
_KEY_LOCKS = 64  # stripes serializing set/del/pop of one key (puts of different keys run in parallel)
# Values smaller than this leave the process memory limit to the mover's tick (_relieve):
# one of them moves the resident set by little, and a relief per value thrashed
# (docs/python.md, "What a worker's data becomes", has the measurement).
RELIEVE_MIN_BYTES = 1 << 20

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
        Values are substituted into the parsed config, never into its text.
    per_worker_scratch: with worker_local_directory (inside a Dask worker), a
        scratch file tier whose path names no per-worker variable gets the
        worker's own folder under it: ``/var/tmp/scratch`` becomes
        ``/var/tmp/scratch/<worker directory name>``, removed at close (and
        reclaimed by the next store on the node if the worker was killed).
        A chain with a persistent tier is refused (ValueError): the store's
        values do not outlive it.
    log_interval: seconds between statistics lines on the
        ``distributed.worker.spillway`` logger (0 or None: never).
    serializers: Dask serializer families to try, in order. Default
        ("dask", "pickle"), with "cuda" first when the chain has a gpu tier.
    weak_cache: serve values that are still alive elsewhere without
        deserializing them again.
    writable_views: hand deserializers writable views of the engine's bytes
        (no copy). False gives read-only views: Dask's deserializers then copy
        every writeable array once on each read.
    pop_reads: pop(key, default) of a value held only as bytes reads it back
        (the MutableMapping contract) instead of returning `default`.
    adopt: hand frames of at least ADOPT_MIN_BYTES (NumPy and pandas data)
        to the engine without a copy (Engine.put_adopted): the engine
        accounts their bytes and keeps the value's memory alive while the
        object is in the host tier; only a demotion copies them, to the
        file tier. False: every frame is copied into the host tier.
    lazy: hand values that expose no buffer (pandas frames, lists, dicts,
        objects) to the engine as live objects (Engine.put_external),
        serialized only when the engine demotes them to the file tier.
        False: every value is serialized by __setitem__. Default: on, unless
        $SPILLWAY_DASK_LAZY is 0 (for comparisons).
    relive: a live value read back from the file tier is handed to the
        engine live again (SpillBuffer moves it back to fast): later reads
        deserialize nothing, but it takes host-tier room again, pushing
        other values out (serialized then), and is serialized again if it is
        demoted again. Off by default: the read value stays bytes in the
        engine and the weak cache serves it while the task holds it
        (reading a spilled data set once costs one deserialization per key,
        no writes).
    process_memory_limit: bytes of resident memory above which the host
        tiers demote, whatever their watermarks (Engine.set_process_memory_limit):
        memory the worker holds outside the store (task intermediates, Dask's
        own buffers) then shrinks what the store keeps in memory, as Dask's
        memory manager spills by process memory. None: off, unless
        spillway.dask_preload sets it from the worker's memory limit.
    relieve: with a process memory limit, for values of RELIEVE_MIN_BYTES or
        more, __setitem__ starts the demotions of what the process holds above
        it at once, and a read of a value held in a file tier waits until the
        value's bytes fit (Engine.relieve_memory), where SpillBuffer evicts;
        without, only the mover's 100 ms tick acts on the limit. Default: on,
        unless $SPILLWAY_DASK_RELIEVE is 0 (for comparisons).
    """

    def __init__(
        self,
        config,
        *,
        profile=None,
        worker_local_directory=None,
        per_worker_vars=(WORKER_DIR_VAR,),
        per_worker_scratch=True,
        log_interval=30.0,
        serializers=None,
        weak_cache=True,
        writable_views=True,
        pop_reads=False,
        adopt=True,
        lazy=None,
        relive=False,
        process_memory_limit=None,
        relieve=None,
    ):
        self._tmpdir = None
        self._closed = False
        self.engine, created, locks, self._tmpdir = dirs.open_worker_engine(
            Engine, config, profile, per_worker_vars, worker_local_directory, per_worker_scratch,
            persistent_tier_error)
        self.scratch_dirs = created
        self._cleanup = weakref.finalize(self, dirs.remove_dirs, created, locks)
        # Each tier in the schema of `spillway validate --json` / `info --json`.
        self._tier_config = {t["name"]: t for t in self.engine.tiers}
        has_gpu = any(t["kind"] == "gpu" for t in self.engine.tiers)
        # ---- device values (spillway.device) ----
        self._device = _device_table(self.engine) if has_gpu else None
        if serializers is None:
            serializers = ("cuda", "dask", "pickle") if has_gpu else ("dask", "pickle")
        self.serializers = tuple(serializers)
        self.deserializers = tuple(dict.fromkeys(self.serializers + ("dask", "pickle")))
        self.log_interval = log_interval
        self.writable_views = bool(writable_views)
        self.pop_reads = bool(pop_reads)
        self.adopt = bool(adopt) and hasattr(self.engine, "put_adopted")
        if lazy is None:  # SPILLWAY_DASK_LAZY=0: the eager store, for A/B comparisons (bench/dask_bench.py)
            lazy = os.environ.get("SPILLWAY_DASK_LAZY", "1") not in ("0", "false", "no")
        self.lazy = bool(lazy) and hasattr(self.engine, "put_external")
        self._materializer = _Materializer(self.serializers)
        self.relive = bool(relive)
        if relieve is None:  # SPILLWAY_DASK_RELIEVE=0: the tick alone, for A/B comparisons
            relieve = os.environ.get("SPILLWAY_DASK_RELIEVE", "1") not in ("0", "false", "no")
        self._relieve_memory = getattr(self.engine, "relieve_memory", None) if relieve else None
        self.process_memory_limit = 0
        if process_memory_limit:
            self.set_process_memory_limit(process_memory_limit)
        self._keys = {}  # key -> _Entry, insertion-ordered; the engine cannot list keys
        self._ids = itertools.count(1)  # engine ids of values (_new_ekey)
        self._orphans = set()  # engine keys an erase failed for (_erase_keys retries them)
        self._overflow = {}  # values no tier could hold, kept as live objects (NoSpace, unserializable)
        self._cache = weakref.WeakValueDictionary() if weak_cache else None
        self._lock = threading.RLock()  # guards the dicts above and the counters
        self._key_locks = [threading.Lock() for _ in range(_KEY_LOCKS)]
        self._weight = 0  # sum of _Entry.weight
        self._file_tiers = None  # indices of file tiers in engine.tiers
        self._last_log = monotonic()
        self._last_logged_ops = 0
        self.counters = metrics.new_counters()
        self.fast = self.memory = TierView(self, spilled=False)
        self.slow = self.disk = TierView(self, spilled=True)

    # ---- keys -------------------------------------------------------------
    def _new_ekey(self):
        return b"%s%x" % (_ID_PREFIX, next(self._ids))  # next() of a count is atomic under the GIL

    def _key_lock(self, key):
        return self._key_locks[hash(key) % _KEY_LOCKS]

    def _snapshot(self):
        with self._lock:
            return list(self._keys)

    # ---- MutableMapping ---------------------------------------------------
    def __setitem__(self, key, value):
        self._check_open()
        hash(key)  # an unhashable key fails here, before anything changes
        self._set(key, value)
        # A large value is in: what the process holds above its memory limit starts moving
        # now, not at the mover's next 100 ms tick (without waiting for it: see _relieve).
        entry = self._keys.get(key)
        if self._relieves(entry):
            self._relieve(0, wait=False)

    def _set(self, key, value):
        """Stores `value` under `key`. The new value goes to the engine under fresh engine keys
        while the old one stays readable; only once the engine has taken all of it does the key
        switch over and the old objects go. Any failure erases what was written of the new
        value and leaves the old one in place (NoSpace keeps the new value in process memory,
        as Dask's own buffer would)."""
        weight = sizeof(value)
        with self._key_lock(key):
            t0 = perf_counter()
            with self._lock:
                old = self._keys.get(key)
            ekey = self._new_ekey()
            # ---- device arrays are adopted without a copy (spillway.device) ----
            if self._device is not None and _is_device_value(value):
                self._put_device_value(key, ekey, old, value, weight, t0)
                return
            if self.lazy and not _exposes_buffer(value) and self._put_lazy(key, ekey, old, value, weight, t0):
                return
            try:
                header, frames = serialize(value, serializers=self.serializers, on_error="raise")
                head = msgpack.dumps(header, use_bin_type=True)
            except Exception as e:  # not serializable: Dask's own buffer would keep it in memory too
                self._keep_in_memory(key, ekey, old, value, weight, f"cannot serialize it ({type(e).__name__}: {e})")
                return
            t1 = perf_counter()
            device = any(_is_device(f) for f in frames)
            sizes = [_nbytes(f) for f in frames]
            nbytes = len(head) + sum(sizes)
            parts = () if device or not self.adopt else tuple(i for i, n in enumerate(sizes) if n >= ADOPT_MIN_BYTES)
            parts = tuple(sorted(parts, key=lambda i: -sizes[i]))  # largest first: where the value counts as being
            entry = _Entry(ekey, nbytes, device, weight, parts=parts)
            adopted = 0
            try:
                if device:
                    self._put_device(ekey, head, frames)
                elif parts:
                    adopted = self._put_parts(ekey, head, frames, parts, sizes)
                else:
                    self.engine.put(ekey, [head, *frames])
            except NoSpaceError as e:
                self._erase_keys(entry.engine_keys())
                self._keep_in_memory(key, ekey, old, value, weight, f"no tier has room ({e})")
                return
            except BaseException:
                self._erase_keys(entry.engine_keys())  # the old value stays
                raise
            t2 = perf_counter()
            self._replace(key, old, entry, value)
            with self._lock:
                c = self.counters
                c["puts"] += 1
                c["put_bytes"] += nbytes
                c["adopted_bytes"] += adopted
                c["serialize_seconds"] += t1 - t0
                c["put_seconds"] += t2 - t1
        self._maybe_log()

    def _put_lazy(self, key, ekey, old, value, weight, t0):
        """The live value to the engine (put_external); False when no host tier has room (then serialized).

        REQUIRES: the key's lock.
        """
        try:
            self.engine.put_external(ekey, weight, value, self._materializer)
        except NoSpaceError:
            return False
        except BaseException:
            self._erase_keys([ekey])
            raise
        self._replace(key, old, _Entry(ekey, 0, False, weight, lazy=True), value)
        with self._lock:
            c = self.counters
            c["puts"] += 1
            c["lazy_puts"] += 1
            c["put_seconds"] += perf_counter() - t0
        self._maybe_log()
        return True

    def _put_device_value(self, key, ekey, old, value, weight, t0):
        try:
            nbytes = self._device.put(ekey, value)
        except NoSpaceError as e:
            self._keep_in_memory(key, ekey, old, value, weight, f"no tier has room ({e})")
            return
        self._replace(key, old, _Entry(ekey, nbytes, False, weight, devval=True), value)
        with self._lock:
            c = self.counters
            c["puts"] += 1
            c["put_bytes"] += nbytes
            c["put_seconds"] += perf_counter() - t0
        self._maybe_log()

    def _replace(self, key, old, entry, value):
        """Switches `key` from `old` (None: new key) to `entry`, then erases what `old` held.

        REQUIRES: the key's lock; the engine holds all of `entry` already.
        """
        with self._lock:
            if self._keys.get(key) is old:
                self._keys.pop(key, None)
                self._overflow.pop(key, None)
                if old is not None:
                    self._weight -= old.weight
            if self._cache is not None:
                self._cache.pop(key, None)
            self._keys[key] = entry
            self._weight += entry.weight
            if entry.overflow:
                self._overflow[key] = value
            elif self._cache is not None:
                try:
                    self._cache[key] = value  # the task's result, alive: no second copy on read
                except TypeError:
                    pass  # not weakly referenceable (int, tuple, ...)
        if old is not None:
            self._erase_engine(old)

    def _detach(self, key):
        """Drops the store's record of `key` (not the engine's objects); returns the old entry."""
        with self._lock:
            old = self._keys.pop(key, None)
            if old is not None:
                self._weight -= old.weight
            self._overflow.pop(key, None)
            if self._cache is not None:
                self._cache.pop(key, None)
        return old

    def _keep_in_memory(self, key, ekey, old, value, weight, why):
        self._replace(key, old, _Entry(ekey, 0, False, weight, overflow=True), value)
        with self._lock:
            self.counters["overflow_puts"] += 1
        logger.warning("spillway: keeping %r in process memory: %s", key, why)

    def _put_parts(self, ekey, head, frames, parts, sizes):
        """The large frames as objects of their own (adopted when writable), the rest with the header.

        Returns the bytes adopted without a copy. On failure the caller erases what went in.
        """
        adopted = 0
        for i in parts:
            if self.engine.put_adopted(part_key(ekey, i), frames[i]):
                adopted += sizes[i]
            else:
                self.engine.put(part_key(ekey, i), frames[i])  # read-only: one copy
        self.engine.put(ekey, [head, *(b"" if i in parts else f for i, f in enumerate(frames))])
        return adopted

    def _put_device(self, ekey, head, frames):
        # One engine object holds one memory kind: device frames go under the
        # key itself, the header and any host frames into a companion object.
        layout = "".join("d" if _is_device(f) else "h" for f in frames)
        self.engine.put(ekey, [f for f in frames if _is_device(f)], memory="device")
        self.engine.put(ekey + _HEADER_SUFFIX, [head, layout.encode(), *[f for f in frames if not _is_device(f)]])

    def _live(self, key):
        """The value if it is at hand without a read (overflow or weak cache), else _MISSING.

        REQUIRES: self._lock held.
        """
        if key in self._overflow:
            return self._overflow[key]
        if self._cache is not None:
            value = self._cache.get(key)
            if value is not None:
                return value
        return _MISSING

    def __getitem__(self, key):
        return self._read(key, relive=self.relive)

    def _read(self, key, relive):
        """The value of `key`; `relive`: a lazy value read back from bytes goes to the engine live again.

        REQUIRES: not holding the key's lock when `relive`.
        """
        with self._lock:
            entry = self._keys.get(key)
            if entry is None:
                raise KeyError(key)
            value = self._live(key)
            if value is not _MISSING:
                if not entry.overflow:
                    self.counters["cache_hits"] += 1
                return value
        if entry.devval:  # a device value
            try:
                value = self._device.get(entry.ekey)
            except KeyError:
                raise KeyError(key) from None
            with self._lock:
                self.counters["gets"] += 1
                self.counters["get_bytes"] += entry.nbytes
            return value
        if entry.lazy:
            try:
                value = self.engine.get_external(entry.ekey)
            except KeyError:
                raise KeyError(key) from None  # erased concurrently
            if value is not None:  # still live in a memory tier: the object itself
                with self._lock:
                    self.counters["live_hits"] += 1
                return value
        if self._relieves(entry) and not entry.device:
            in_file = self._in_file_tiers([entry])
            if in_file is None or in_file[0]:
                # Reading it back adds its bytes to the process: room first, as SpillBuffer
                # evicts before it moves a value from slow to fast.
                self._relieve(entry.nbytes or entry.weight, wait=True)
        t0 = perf_counter()
        try:
            if entry.device:
                head, frames = self._get_device(entry.ekey)
            else:
                bufs = self.engine.get_buffers(entry.ekey, writable=self.writable_views)
                if not bufs and entry.lazy:  # relived by another reader since get_external
                    value = self.engine.get_external(entry.ekey)
                    if value is not None:
                        return value
                    raise KeyError(key)
                head, frames = bufs[0], bufs[1:]
                for i in entry.parts:
                    frames[i] = self.engine.get_buffers(entry.part_key(i), writable=self.writable_views)[0]
        except KeyError:
            raise KeyError(key) from None  # erased concurrently
        t1 = perf_counter()
        header = msgpack.loads(head, raw=False, use_list=False)
        value = deserialize(header, frames, deserializers=self.deserializers)
        t2 = perf_counter()
        with self._lock:
            if self._cache is not None and self._keys.get(key) is entry:
                try:
                    self._cache[key] = value
                except TypeError:
                    pass
            c = self.counters
            c["gets"] += 1
            c["get_bytes"] += entry.nbytes
            c["get_seconds"] += t1 - t0
            c["deserialize_seconds"] += t2 - t1
        if entry.lazy and relive:
            self._relive(key, entry, value)
        self._maybe_log()
        return value

    def _relive(self, key, entry, value):
        """A lazy value just deserialized from bytes goes back to the engine live (as SpillBuffer
        moves a value read from slow into fast): later reads are no deserialization, and the
        engine serializes it again only if it demotes it again."""
        with self._key_lock(key):
            if self._keys.get(key) is not entry:
                return  # replaced or released meanwhile
            try:
                self.engine.put_external(entry.ekey, entry.weight, value, self._materializer)
            except NoSpaceError:
                return  # stays as bytes
            with self._lock:
                self.counters["relived"] += 1

    def _get_device(self, ekey):
        host = self.engine.get_buffers(ekey + _HEADER_SUFFIX, writable=self.writable_views)
        head, layout, host_frames = host[0], bytes(host[1]).decode(), iter(host[2:])
        device_frames = iter(self.engine.get_buffers(ekey, where="device"))
        return head, [next(device_frames) if c == "d" else next(host_frames) for c in layout]

    def __delitem__(self, key):
        with self._key_lock(key):
            old = self._detach(key)
            if old is None:
                raise KeyError(key)
            self._release(old, key)

    def discard(self, key):
        """Removes `key` if present, never reading its value (zict 3.0's discard)."""
        try:
            del self[key]
        except KeyError:
            pass

    def pop(self, key, default=_MISSING):
        """Removes `key` and returns its value; see the module docstring for when it is not read."""
        with self._key_lock(key):
            with self._lock:
                entry = self._keys.get(key)
                value = _MISSING if entry is None else self._live(key)
            if entry is None:
                if default is _MISSING:
                    raise KeyError(key)
                return default
            if value is _MISSING and entry.lazy:
                try:
                    value = self.engine.get_external(entry.ekey)  # live: at hand without a read
                except KeyError:
                    value = None
                if value is None:
                    value = _MISSING
            if value is _MISSING and (default is _MISSING or self.pop_reads):
                value = self._read(key, relive=False)  # the caller wants the value: read it
            old = self._detach(key)
            if old is not None:
                self._release(old, key)
        return default if value is _MISSING else value

    def _release(self, entry, key):
        self._erase_engine(entry)
        if not entry.overflow and not entry.devval:
            with self._lock:
                self.counters["unread_releases"] += 1

    def _erase_engine(self, entry):
        if entry.devval:  # a device value
            self._device.discard(entry.ekey)
            return
        self._erase_keys(entry.engine_keys())

    def _erase_keys(self, ekeys):
        """Erases engine objects the store no longer refers to. One the engine fails to erase
        (an I/O error) is remembered and tried again at the next put or close, so no object
        is left behind unowned."""
        with self._lock:
            if self._orphans:
                ekeys = [*ekeys, *self._orphans]
                self._orphans.clear()
        failed = []
        for ekey in ekeys:
            try:
                self.engine.erase(ekey)
            except KeyError:
                pass
            except Exception as e:  # noqa: BLE001 - kept for a retry, never raised from a cleanup
                failed.append(ekey)
                logger.warning("spillway: cannot erase %r yet (%s: %s); will retry", ekey, type(e).__name__, e)
        if failed:
            with self._lock:
                self._orphans.update(failed)

    def __contains__(self, key):
        try:
            return key in self._keys
        except TypeError:  # unhashable: never a key
            return False

    def __iter__(self):
        return iter(self._snapshot())

    def __len__(self):
        return len(self._keys)

    def __repr__(self):
        state = "closed" if self._closed else f"config {self.engine.source!r}"
        return f"<SpillwayStore: {len(self)} keys, {state}>"

    # ---- lifetime ---------------------------------------------------------
    def _check_open(self):
        if self._closed:
            raise ValueError("the SpillwayStore is closed")

    def close(self):
        """Drops every key, closes the engine (after values read from it are released)
        and removes this worker's scratch folders. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._device is not None and not self.engine.closed:  # a device value
                self._device.clear()
            self._orphans.clear()
            self._keys.clear()
            self._overflow.clear()
            self._weight = 0
            if self._cache is not None:
                self._cache.clear()
        if not self.engine.closed:
            self.engine.close()
        self._cleanup()
        if self._tmpdir is not None:
            self._tmpdir.cleanup()
            self._tmpdir = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- where keys are -----------------------------------------------------
    def _spilled_keys(self):
        """The keys whose bytes sit in a file tier (not in process memory)."""
        return metrics.spilled_keys(self)

    def _in_file_tiers(self, entries):
        """For each entry, whether its bytes sit in a file tier; None when the module cannot say."""
        return metrics.in_file_tiers(self, entries)

    # ---- read-ahead -------------------------------------------------------
    def prefetch(self, keys, max_bytes=None):
        """Read-ahead hint for values about to be read (a task's inputs; see ReadAhead).

        Of `keys`, in order, the values held as bytes in a file tier start coming up
        into the host tier in the background (Engine.prefetch: batched io_uring
        reads, room made by the mover, nothing demoted on this thread), and the call
        returns at once. Values in memory, overflow values and unknown keys are
        skipped. With `max_bytes`, keys are taken while their bytes stay within it
        (a value larger than it is not read ahead: the budget bounds the memory
        the hint adds). Returns the bytes hinted.
        """
        return hint_inputs(self, keys, max_bytes)

    def set_process_memory_limit(self, nbytes):
        """The host tiers demote while this process's resident memory is above `nbytes` (0: off)."""
        nbytes = int(nbytes or 0)
        if nbytes < 0:
            raise ValueError(f"process_memory_limit must be positive, got {nbytes}")
        setter = getattr(self.engine, "set_process_memory_limit", None)
        if setter is None:
            raise RuntimeError("this spillway module has no Engine.set_process_memory_limit (rebuild it)")
        setter(nbytes)
        self.process_memory_limit = nbytes

    def _relieves(self, entry):
        """Whether `entry` is a value the process memory limit is relieved for (_relieve):
        a limit is set, the relief is on, and the value has RELIEVE_MIN_BYTES or more."""
        return bool(entry is not None and self.process_memory_limit and self._relieve_memory is not None
                and max(entry.nbytes, entry.weight) >= RELIEVE_MIN_BYTES)

    def _relieve(self, incoming, wait):
        """With a process memory limit: the engine starts demoting what the process, plus
        `incoming` bytes, holds above it (Engine.relieve_memory; the GIL is released); with
        `wait`, until that has moved.

        Only for values of RELIEVE_MIN_BYTES or more; smaller ones are left to the tick.
        __setitem__ does not wait: with live values (pandas frames) the victims are serialized
        by the mover's materializer, and waiting for that on the event loop made a persisted
        frame 1.6x slower to build (groupby at 4x: persist 9.1 s against 5.8 s). A read waits:
        its bytes are about to be added. REQUIRES: none of the store's locks held (the mover's
        materializer may need them through the values it serializes). Callers check
        _relieves first."""
        if self._closed:
            return
        t0 = perf_counter()
        self._relieve_memory(int(incoming), wait)
        dt = perf_counter() - t0
        with self._lock:
            self.counters["relieve_calls"] += 1
            self.counters["relieve_seconds"] += dt

    # ---- statistics -------------------------------------------------------
    def stats(self):
        """{"engine": engine stats (tiers, boundaries, ...), "store": store counters, "summary": totals}.

        Each of engine["tiers"] is the tier's entry in `spillway validate --json` and
        `info --json` (Engine.tiers: name, kind, capacity_bytes, watermarks, codec, ...)
        with the stats export's counters (used_bytes, objects, raw_bytes, ...) added.
        """
        return metrics.store_stats(self)

    def summary_line(self):
        return metrics.summary_line(self)

    def _maybe_log(self):
        metrics.maybe_log(self, logger)

    # Dask's metrics protocol (what SpillBuffer offers): the worker reports
    # spilled_total to the scheduler and get_metrics() to Prometheus.
    @property
    def spilled_total(self):
        """(sizeof of the values in file tiers, bytes they take there), as SpillBuffer reports."""
        return metrics.spilled_total(self)

    def get_metrics(self):
        return metrics.get_metrics(self)
