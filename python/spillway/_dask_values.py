"""How SpillwayStore turns a value into engine objects and remembers it.

A value put into the store becomes one multi-buffer engine object under a
store-made key (b"v<id>": the msgpack'd header, then the frames); frames of
ADOPT_MIN_BYTES or more may be objects of their own (b"v<id>.f<i>"), and a
value with device frames has a companion b"v<id>.h". _Entry is what the store
keeps per Dask key; _Materializer serializes a live value when the engine
demotes it. docs/python.md ("What a worker's data becomes") tells the story.
"""
from __future__ import annotations

import logging
import threading
from time import perf_counter

import msgpack
from distributed.protocol.serialize import serialize

logger = logging.getLogger("distributed.worker.spillway")

# Engine key of a value's companion header (values with device frames).
_HEADER_SUFFIX = b".h"
# Frames at least this large are handed to the engine as their own objects,
# adopted without a copy when they are writable (Engine.put_adopted).
ADOPT_MIN_BYTES = 64 * 1024


def part_key(ekey, i):
    return b"%s.f%d" % (ekey, i)


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


def _exposes_buffer(value):
    try:
        memoryview(value)
    except TypeError:
        return False
    return True


class _Materializer:
    """Turns a live value into its bytes when the engine demotes it (put_external's callback).

    Called by the engine's materializer thread with the GIL held; returns
    [msgpack'd header, *frames], the layout __setitem__ stores for a buffer
    value, so __getitem__ reads both alike. Takes no store lock: a thread of
    the store may hold one while it waits inside the engine for room that this
    very demotion makes. A value Dask cannot serialize raises: the engine keeps
    it in memory and does not try again.
    """

    def __init__(self, serializers):
        self.serializers = serializers
        self.lock = threading.Lock()  # guards the counters only
        self.calls = 0
        self.failures = 0
        self.seconds = 0.0
        self.bytes = 0

    def __call__(self, value):
        t0 = perf_counter()
        try:
            header, frames = serialize(value, serializers=self.serializers, on_error="raise")
            head = msgpack.dumps(header, use_bin_type=True)
        except Exception as e:
            with self.lock:
                self.failures += 1
            logger.warning("spillway: keeping a %s in process memory: cannot serialize it (%s: %s)",
                           type(value).__name__, type(e).__name__, e)
            raise
        nbytes = len(head) + sum(_nbytes(f) for f in frames)
        with self.lock:
            self.calls += 1
            self.bytes += nbytes
            self.seconds += perf_counter() - t0
        return [head, *frames]


class _Entry:
    """What the store knows of one key: the engine has the bytes, or the live value (lazy)."""

    __slots__ = ("ekey", "nbytes", "device", "weight", "overflow", "parts", "lazy", "devval")

    def __init__(self, ekey, nbytes, device, weight, overflow=False, parts=(), lazy=False, devval=False):
        self.ekey = ekey        # engine key (b"v<id>"; the value's other objects derive from it)
        self.nbytes = nbytes    # serialized bytes in the engine (0 for overflow)
        self.device = device    # device frames: a companion header object exists
        self.weight = weight    # dask.sizeof of the value, Dask's measure of it
        self.overflow = overflow  # kept as a live object in self._overflow
        self.parts = parts      # frame indices stored as their own (adopted) objects, largest first
        self.lazy = lazy        # put_external: live in a memory tier until the engine demotes it
        self.devval = devval    # a device array in the store's DeviceValueTable, under ekey

    def engine_keys(self):
        """Every engine object this entry owns (none for overflow; a device value's is the table's)."""
        if self.overflow or self.devval:
            return []
        keys = [self.ekey, *(self.part_key(i) for i in self.parts)]
        if self.device:
            keys.append(self.ekey + _HEADER_SUFFIX)
        return keys

    def part_key(self, i):
        return part_key(self.ekey, i)


def persistent_tier_error(tiers):
    """Why SpillwayStore refuses this chain (a persistent tier), or None.

    A store's values do not outlive it: Dask forgets a worker's keys when the worker
    leaves, and the store keeps no record of its keys in the engine. Over a persistent
    tier, values demoted there before a close would be unreachable after it and never
    reclaimed, filling the tier run after run.
    """
    for t in tiers:
        if t.get("persistent"):
            return (f"SpillwayStore: tier {t['name']!r} ({', '.join(t['paths'])}) is persistent, but a store's "
                    "values do not outlive it (Dask forgets a worker's keys when the worker leaves), so a "
                    "reopened store could never reach or reclaim them. Give the store scratch file tiers "
                    "(persistent: false) or a profile that leaves this tier out; keep data that must persist "
                    "in a spillway.Engine of its own.")
    return None


def _device_table(engine):  # device values (spillway.device)
    from .device import DeviceValueTable

    return DeviceValueTable(engine)


def _is_device_value(value):
    from .device import is_device_array

    return is_device_array(value)
