"""The peer for the GPU Dask benchmark: dask-cuda's DeviceHostFile design.

Written here (not imported: dask-cuda is not installed on the GPU machine and
pulls in RMM and pynvml) from the design of rapidsai/dask-cuda,
dask_cuda/device_host_file.py (read at commit 63a1ea9712fe, 2026-08-07):

    Worker.data = DeviceHostFile
      device_buffer = zict.Buffer(fast = {} of live device objects,
                                  slow = Func(device_to_host, host_to_device, host_buffer),
                                  n = device_memory_limit, weight = safe_sizeof)
      host_buffer   = zict.Buffer(fast = {} of DeviceSerialized / host objects,
                                  slow = Func(serialize_bytelist, deserialize_bytes,
                                              AnyKeyFile(<local dir>/storage)),
                                  n = memory_limit, weight = safe_sizeof)
                      (a plain dict when memory_limit is None or 0: no disk)

What carries over as upstream has it, on purpose:
- device -> host is Dask's serialization with the ("dask", "pickle") families.
  For a CuPy array the "dask" serializer is distributed/protocol/cupy.py's: a
  `cupy.asnumpy` copy into pageable memory. host -> device is Dask's
  deserialization: without RMM, distributed/protocol/numba.py's
  `numba.cuda.to_device` of the pageable frame (numba allocates outside
  CuPy's pool). The host object is a DeviceSerialized (header + host frames).
- both LRUs are zict.Buffer, so eviction runs inside __setitem__ / __getitem__,
  i.e. on the worker's event loop, one key at a time, synchronously.
- the disk level is zict's File under Func(serialize_bytelist with the
  configured spill compression, deserialize_bytes), one file per key.
- a device object is one with __cuda_array_interface__, or a list/tuple/set/
  dict holding one (dask_cuda/is_device_object.py).
- no __contains__ of its own (upstream inherits MutableMapping's, which calls
  __getitem__): the worker's `key in data` when it releases a key therefore
  unspills a spilled value first, as it does under dask-cuda.
Left out: cuDF's own spilling (`is_spillable_object`, no cuDF here) and the
logging buffer (LoggedBuffer); spill counters and timers are added instead
(device<->host: the copies alone; host<->disk: serialization and file I/O).
"""
from __future__ import annotations

import itertools
import os
import threading
from time import perf_counter

import numpy

import dask
from distributed.protocol import (
    dask_deserialize,
    dask_serialize,
    deserialize,
    deserialize_bytes,
    serialize,
    serialize_bytelist,
)
from distributed.sizeof import safe_sizeof
from distributed.spill import AnyKeyFile
from distributed.utils import nbytes
from zict import Buffer, Func
from zict.common import ZictBase


def is_device_object(obj):
    """dask-cuda's test: a CUDA array interface, or a container holding one."""
    if isinstance(obj, (list, tuple, set, frozenset)):
        return any(is_device_object(o) for o in obj)
    if isinstance(obj, dict):
        return any(is_device_object(o) for o in obj.items())
    return hasattr(obj, "__cuda_array_interface__")


class DeviceSerialized:
    """A device object moved to the host: Dask's header plus its host frames."""

    def __init__(self, header, frames):
        self.header = header
        self.frames = frames

    def __sizeof__(self):  # what the host LRU weighs (safe_sizeof -> sys.getsizeof)
        return sum(map(nbytes, self.frames))

    def __reduce_ex__(self, protocol):
        header, frames = _dask_serialize_device_serialized(self)
        # pickle cannot take memoryviews; numpy arrays over them are zero-copy
        frames = [numpy.asarray(f) if isinstance(f, memoryview) else f for f in frames]
        return _dask_deserialize_device_serialized, (header, frames)


@dask_serialize.register(DeviceSerialized)
def _dask_serialize_device_serialized(obj):
    return {"obj-header": obj.header}, obj.frames


@dask_deserialize.register(DeviceSerialized)
def _dask_deserialize_device_serialized(header, frames):
    return DeviceSerialized(header["obj-header"], frames)


class SpillCounters:
    """Objects, bytes and seconds per direction (added for the benchmark)."""

    def __init__(self):
        self._lock = threading.Lock()
        self.data = {}

    def add(self, name, nbytes_, seconds):
        with self._lock:
            n, b, s = self.data.get(name, (0, 0, 0.0))
            self.data[name] = (n + 1, b + nbytes_, s + seconds)

    def snapshot(self):
        with self._lock:
            return {k: {"objects": n, "bytes": b, "seconds": s} for k, (n, b, s) in self.data.items()}


class _TimedFunc(Func):
    """zict.Func whose moves are timed whole: serialize + file write, file read + deserialize."""

    def __init__(self, counters, dump, load, d):
        super().__init__(dump, load, d)
        self._counters = counters

    def __setitem__(self, key, value):
        t = perf_counter()
        super().__setitem__(key, value)
        self._counters.add("host->disk", safe_sizeof(value), perf_counter() - t)

    def __getitem__(self, key):
        t = perf_counter()
        value = super().__getitem__(key)
        self._counters.add("disk->host", safe_sizeof(value), perf_counter() - t)
        return value


class DeviceHostFile(ZictBase):
    """Worker.data mapping: device LRU -> host LRU -> zict File (see module docstring).

    Parameters (as upstream): worker_local_directory (filled in by the Dask
    worker), device_memory_limit and memory_limit in bytes (None or 0: that
    level is unbounded and nothing goes below it).
    """

    def __init__(self, worker_local_directory, *, device_memory_limit=None, memory_limit=None,
                 host_to_device_fn=None):
        super().__init__()
        self.disk_func_path = os.path.join(worker_local_directory, "storage")
        os.makedirs(self.disk_func_path, exist_ok=True)
        self.counters = SpillCounters()
        # For a machine without numba's CUDA: the benchmark may pass an
        # equivalent pageable host -> device copy; None keeps Dask's own path.
        self._host_to_device_fn = host_to_device_fn
        memory_limit = memory_limit or None
        device_memory_limit = device_memory_limit or None

        self.host_func = dict()
        compression = dask.config.get("distributed.worker.memory.spill-compression")
        self.disk_func = _TimedFunc(
            self.counters,
            lambda x: serialize_bytelist(x, compression=compression, on_error="raise"),
            deserialize_bytes,
            AnyKeyFile(self.disk_func_path),  # tuple keys -> str for file names
        )
        if memory_limit is None:
            self.host_buffer = self.host_func
        else:
            self.host_buffer = Buffer(self.host_func, self.disk_func, memory_limit,
                                      weight=lambda k, v: safe_sizeof(v))

        self.device_keys = set()
        self.device_func = dict()
        self.device_host_func = Func(self._timed("device->host", self.device_to_host),
                                     self._timed("host->device", self.host_to_device, size_of_result=True),
                                     self.host_buffer)
        if device_memory_limit is None:
            self.device_buffer = self.device_func
        else:
            self.device_buffer = Buffer(self.device_func, self.device_host_func, device_memory_limit,
                                        weight=lambda k, v: safe_sizeof(v))

        self.device = self.device_buffer if device_memory_limit is None else self.device_buffer.fast.d
        self.host = self.host_buffer if memory_limit is None else self.host_buffer.fast.d
        self.disk = None if memory_limit is None else self.host_buffer.slow.d
        # The Worker's memory manager looks for `fast` (host memory) and evict().
        self.fast = self.host_buffer if memory_limit is None else self.host_buffer.fast

    # ---- the two moves, as upstream -----------------------------------------
    @staticmethod
    def device_to_host(obj):
        header, frames = serialize(obj, serializers=("dask", "pickle"), on_error="raise")
        return DeviceSerialized(header, frames)

    def host_to_device(self, s):
        if self._host_to_device_fn is not None:
            return self._host_to_device_fn(s.header, s.frames)
        return deserialize(s.header, s.frames)

    def _timed(self, name, fn, size_of_result=False):
        def wrapped(x):
            t = perf_counter()
            y = fn(x)
            n = safe_sizeof(y if size_of_result else x)
            self.counters.add(name, n, perf_counter() - t)
            return y

        return wrapped

    # ---- MutableMapping -------------------------------------------------------
    def __setitem__(self, key, value):
        if key in self.device_buffer:
            del self[key]  # a re-put must drop the old copy wherever it is
        if is_device_object(value):
            self.device_keys.add(key)
            self.device_buffer[key] = value
        else:
            self.host_buffer[key] = value

    def __getitem__(self, key):
        if key in self.device_keys:
            return self.device_buffer[key]
        if key in self.host_buffer:
            return self.host_buffer[key]
        raise KeyError(key)

    def __len__(self):
        return len(self.device_buffer)

    def __iter__(self):
        # Host-only keys are listed too: device_buffer's slow side is a Func
        # over host_buffer, so iterating it covers both.
        return itertools.chain(self.device_buffer)

    def __delitem__(self, key):
        self.device_keys.discard(key)
        if isinstance(self.device_buffer, dict) and key not in self.device_buffer:
            del self.host_buffer[key]
        else:
            del self.device_buffer[key]

    def evict(self):
        """Worker's ManualEvictProto: spill the least recently used host value."""
        try:
            _, _, weight = self.host_buffer.fast.evict()
            return weight
        except Exception:
            return -1

    # ---- benchmark statistics -------------------------------------------------
    def stats(self):
        return {
            "device_keys": len(self.device),
            "host_keys": len(self.host),
            "disk_keys": 0 if self.disk is None else len(self.disk),
            "moves": self.counters.snapshot(),
        }
