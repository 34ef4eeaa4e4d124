"""Device values: CUDA arrays stored without a copy, spilled by the engine.

A CuPy array, or any object with ``__cuda_array_interface__`` (Numba device
arrays, PyTorch CUDA tensors), is stored by handing the engine the ALLOCATION
it lives in (``Engine::PutDeviceAllocation``): no copy. The engine keeps a
reference to the producer's owner object (CuPy's Memory, the tensor's
storage) until it lets go of the memory: on erase, overwrite, or when it
demotes the object device -> pinned host by DMA (and further down to a file
tier under pressure). Reading brings the allocation back to the device when
it is not there (``Get(kDevice)``) and returns a device array of the producer's
type (CuPy by default) viewing the pinned engine memory: no copy, and the
object stays pinned on the device while the array (or a view of it) lives.

Views sharing one allocation (``a``, ``a[:n]``, ``a.T``) are counted and the
allocation is stored once: each value records its offset, shape, strides and
type inside it. Non-contiguous views are fine (the whole allocation is kept).
Deduplication applies while the engine still holds the allocation on the
device; a view stored after the allocation was demoted adopts it afresh
(stored twice, never confused with memory reused for a new array).

Caveat: as with Dask's in-memory values, a writer of the producer's memory
after it was stored changes the stored value while it is on the device.

Allocators (spill on allocation failure): ``cupy_allocator(engine)`` for
``cupy.cuda.set_allocator`` and ``torch_allocator(engine)`` for
``torch.cuda.memory.change_current_allocator``: device memory comes from the
engine's pool (``Engine::AllocateDevice``), and an allocation that does not fit
makes the engine demote objects and retry. Memory taken outside the engine
(other libraries, other processes) is covered by the gpu tier's ``headroom``:
the engine demotes when the device's free memory falls below it.
"""
from __future__ import annotations

import itertools
import threading

from . import _spillway
from ._cuda import synchronize_stream

_native = _spillway.device

_ALLOC_PREFIX = b"\x00spillway-dev\x00"


def is_device_array(value):
    """True for objects stored by address: a __cuda_array_interface__ and no CPU buffer."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return False
    try:
        cai = value.__cuda_array_interface__
    except Exception:  # torch CPU tensors raise; most objects have no such attribute
        return False
    return isinstance(cai, dict) and not cai.get("mask")


def _kind(value):
    module = type(value).__module__.split(".")[0]
    return module if module in ("cupy", "torch", "numba") else "cupy"


def _extent(cai):
    """(lowest byte offset, bytes spanned) of an array described by `cai`, relative to its data pointer."""
    itemsize = int(cai["typestr"][2:])
    shape = tuple(cai["shape"])
    if any(d == 0 for d in shape):
        return 0, 0
    strides = cai.get("strides")
    if strides is None:
        n = itemsize
        for d in shape:
            n *= d
        return 0, n
    lo = hi = 0
    for d, s in zip(shape, strides):
        if s >= 0:
            hi += (d - 1) * s
        else:
            lo += (d - 1) * s
    return lo, hi - lo + itemsize


def _allocation(value, cai):
    """(base pointer, bytes, owner) of the allocation `value` lives in.

    The owner keeps the allocation alive (and nothing more than needed): CuPy's
    Memory object, a torch tensor's untyped storage; other producers: the
    array itself, whose extent is then taken as the allocation.
    """
    ptr = int(cai["data"][0])
    kind = type(value).__module__.split(".")[0]
    if kind == "cupy":
        mem = getattr(getattr(value, "data", None), "mem", None)
        if mem is not None and getattr(mem, "ptr", 0) and getattr(mem, "size", 0):
            return int(mem.ptr), int(mem.size), mem
    if kind == "torch":
        try:
            storage = value.untyped_storage()
            return int(storage.data_ptr()), int(storage.nbytes()), storage
        except Exception:
            pass
    lo, n = _extent(cai)
    return ptr + lo, n, value


class _DeviceView:
    """__cuda_array_interface__ over pinned engine memory; `_pin` keeps it pinned."""

    __slots__ = ("__cuda_array_interface__", "_pin")

    def __init__(self, cai, pin):
        self.__cuda_array_interface__ = cai
        self._pin = pin


def _wrap(rec, pin):
    """The device array `rec` describes, over the pinned allocation `pin`."""
    cai = {
        "shape": tuple(rec["shape"]),
        "typestr": rec["typestr"],
        "data": (pin.ptr + rec["offset"], False),
        "strides": tuple(rec["strides"]) if rec["strides"] is not None else None,
        "version": 3,
        "stream": None,  # the engine's copies are complete when Get returns
    }
    view = _DeviceView(cai, pin)
    kind = rec["kind"]
    if kind == "torch":
        import torch

        return torch.as_tensor(view, device="cuda")
    if kind == "numba":
        from numba import cuda as numba_cuda

        return numba_cuda.as_cuda_array(view)
    import cupy

    return cupy.asarray(view)


def describe(value, cai, base):
    return {
        "kind": _kind(value),
        "shape": list(cai["shape"]),
        "typestr": cai["typestr"],
        "strides": list(cai["strides"]) if cai.get("strides") is not None else None,
        "offset": int(cai["data"][0]) - base,
    }


def put_value(engine, key, value):
    """Adopts `value`'s whole allocation under `key` (no deduplication); returns the record for get_value."""
    cai = value.__cuda_array_interface__
    synchronize_stream(cai.get("stream"))
    base, size, owner = _allocation(value, cai)
    _native.adopt(engine, key, base, size, owner)
    return describe(value, cai, base)


def get_value(engine, key, rec):
    """The device array stored by put_value (brought to the device if it was demoted)."""
    return _wrap(rec, _native.pin(engine, key, "device"))


class _Allocation:
    __slots__ = ("key", "token", "refs", "base", "size")

    def __init__(self, key, token, base, size):
        self.key, self.token, self.refs, self.base, self.size = key, token, 0, base, size


class DeviceValueTable:
    """Device values of one store: key -> (allocation, record); allocations counted.

    Used by spillway.dask.SpillwayStore; thread-safe.
    """

    def __init__(self, engine):
        self.engine = engine
        self._values = {}  # key -> (_Allocation, record)
        self._by_base = {}  # base pointer -> _Allocation, while the engine holds it on the device
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self.counters = {"device_puts": 0, "device_shared": 0, "device_gets": 0, "allocations": 0}

    def __contains__(self, key):
        return key in self._values

    def __len__(self):
        return len(self._values)

    def put(self, key, value):
        """Stores `value` under `key` (replacing a previous device value); returns its nbytes."""
        cai = value.__cuda_array_interface__
        synchronize_stream(cai.get("stream"))
        base, size, owner = _allocation(value, cai)
        rec = describe(value, cai, base)
        nbytes = _extent(cai)[1]
        self.discard(key)
        with self._lock:
            alloc = self._by_base.get(base)
            if alloc is not None and alloc.token.alive and alloc.size == size:
                alloc.refs += 1
                self._values[key] = (alloc, rec)
                self.counters["device_puts"] += 1
                self.counters["device_shared"] += 1
                return nbytes
            akey = _ALLOC_PREFIX + str(next(self._ids)).encode()
        token = _native.adopt(self.engine, akey, base, size, owner)  # NoSpaceError propagates
        with self._lock:
            alloc = _Allocation(akey, token, base, size)
            alloc.refs = 1
            self._by_base[base] = alloc
            self._values[key] = (alloc, rec)
            self.counters["device_puts"] += 1
            self.counters["allocations"] += 1
        return nbytes

    def get(self, key):
        with self._lock:
            alloc, rec = self._values[key]  # KeyError when absent
            self.counters["device_gets"] += 1
        return _wrap(rec, _native.pin(self.engine, alloc.key, "device"))

    def discard(self, key):
        """Forgets `key`; erases its allocation when no other value shares it. False when absent."""
        with self._lock:
            entry = self._values.pop(key, None)
            if entry is None:
                return False
            alloc = entry[0]
            alloc.refs -= 1
            if alloc.refs > 0:
                return True
            if self._by_base.get(alloc.base) is alloc:
                del self._by_base[alloc.base]
        try:
            self.engine.erase(alloc.key)
        except KeyError:
            pass
        return True

    def clear(self):
        for key in list(self._values):
            self.discard(key)

    def stats(self):
        with self._lock:
            return dict(self.counters, values=len(self._values), shared_allocations=len(
                {id(a) for a, _ in self._values.values()}))


# ---- allocators -----------------------------------------------------------------


def cupy_allocator(engine):
    """An allocator for cupy.cuda.set_allocator backed by the engine's device pool.

        cupy.cuda.set_allocator(spillway.device.cupy_allocator(engine))

    An allocation that does not fit makes the engine demote objects (device ->
    host) and retry; spillway.NoSpaceError (a MemoryError) when it still fails.
    """
    import cupy

    def malloc(nbytes):
        stream = cupy.cuda.get_current_stream().ptr
        mem = _native.allocate(engine, nbytes, stream)
        return cupy.cuda.MemoryPointer(cupy.cuda.UnownedMemory(mem.ptr, nbytes, mem), 0)

    return malloc


def torch_allocator(engine):
    """A torch.cuda.memory.CUDAPluggableAllocator backed by the engine's device pool.

        torch.cuda.memory.change_current_allocator(spillway.device.torch_allocator(engine))

    Must be installed before PyTorch allocates CUDA memory (PyTorch's rule).
    The entry points spillway_torch_malloc / spillway_torch_free are exported by
    the spillway native module; one engine per process serves them.
    """
    import torch

    _native.set_torch_engine(engine)
    return torch.cuda.memory.CUDAPluggableAllocator(_spillway.__file__, "spillway_torch_malloc",
                                                    "spillway_torch_free")
