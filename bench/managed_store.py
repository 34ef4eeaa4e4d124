"""The other peer for the GPU Dask benchmark: CUDA managed memory (UVM).

What the RMM maintainers proposed instead of explicit spilling: allocate every
device array in managed memory and let the driver move pages. Driver-paged
oversubscription is not allowed on the benchmark machine (asking for more
managed memory than the card has free can hang the GPU), so the device budget
is enforced by this store, not by the card:

- `install_managed_pool(cap)` makes CuPy allocate from a MemoryPool over
  `cupy.cuda.malloc_managed` whose limit is `cap` bytes: the process can never
  ask for more managed memory than that (the caller keeps cap well below the
  card's free memory). Every task output is then managed memory.
- `ManagedMemoryStore` (the Worker.data mapping) keeps the values themselves
  and an LRU of the allocations they live in that are resident on the device.
  Past `device_memory_limit` it evicts the least recently used allocation with
  cudaMemPrefetchAsync to the host (the pages leave the device; the pointer
  stays valid). On a read of an evicted value it either prefetches it back to
  the device first (prefetch_back=True) or hands it out as is and lets the
  GPU fault the pages back in on first touch (prefetch_back=False); both count
  it resident again and evict others to stay in budget.

Prefetches go on the legacy default stream (0), so they are ordered after the
kernels that wrote the data and before the kernels that read it. Views that
share one allocation are counted once.

CuPy 14.2 on CUDA 13 cannot prefetch to the host itself: its
runtime.memPrefetchAsync builds a *device* cudaMemLocation from the id, so the
old cudaCpuDeviceId (-1) means no device at all (cupy_backends/cuda/api/
runtime.pyx at v14.2.0). `prefetch_to_host` therefore calls CUDA 13's
cudaMemPrefetchAsync with a host location through cuda.bindings, or the
driver's cuMemPrefetchAsync_v2 through ctypes, whichever is there.
"""
from __future__ import annotations

import ctypes
import threading
from collections import OrderedDict
from collections.abc import MutableMapping
from time import perf_counter

import cupy

_rt = cupy.cuda.runtime
_MANAGED = 3  # cudaMemoryTypeManaged
_LOCATION_HOST = 2  # cudaMemLocationTypeHost == CU_MEM_LOCATION_TYPE_HOST
_CPU_DEVICE_ID = -1  # cudaCpuDeviceId (pre-CUDA-13 prefetch target for the host)


# ---- allocation ------------------------------------------------------------------
def install_managed_pool(cap_bytes):
    """Makes CuPy allocate managed memory, never more than cap_bytes in all. Returns the pool."""
    pool = cupy.cuda.MemoryPool(cupy.cuda.malloc_managed)
    pool.set_limit(size=int(cap_bytes))
    cupy.cuda.set_allocator(pool.malloc)
    return pool


def restore_default_pool(pool):
    cupy.cuda.set_allocator(cupy.get_default_memory_pool().malloc)
    if pool is not None:
        pool.free_all_blocks()


# ---- prefetch --------------------------------------------------------------------
class _MemLocation(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class Prefetcher:
    """cudaMemPrefetchAsync to the device and to the host on whatever this machine offers.

    Each way to reach the host is tried on a small managed buffer first; the
    first that works is used (`method` names it).
    """

    def __init__(self, device=0):
        self.device = device
        self.cuda_version = _rt.runtimeGetVersion()
        self.method, self._to_host, self.rejected = None, None, []
        for name, make in self._candidates():
            try:
                fn = make()
                probe = cupy.cuda.malloc_managed(2 << 20)
                cupy.cuda.runtime.memset(probe.ptr, 1, 2 << 20)
                fn(probe.ptr, 2 << 20, 0)
                cupy.cuda.Device().synchronize()
                del probe
            except Exception as e:  # missing package, another signature, refused
                self.rejected.append(f"{name}: {type(e).__name__}: {e}")
                continue
            self.method, self._to_host = name, fn
            return
        raise RuntimeError("no way to prefetch managed memory to the host: " + "; ".join(self.rejected))

    def _candidates(self):
        if self.cuda_version < 13000:
            yield ("cupy runtime.memPrefetchAsync(cudaCpuDeviceId)",
                   lambda: lambda ptr, n, s: _rt.memPrefetchAsync(ptr, n, _CPU_DEVICE_ID, s))
        yield "cuda.bindings cudaMemPrefetchAsync(host location)", self._cuda_bindings
        yield "libcuda cuMemPrefetchAsync_v2(host location)", self._libcuda

    @staticmethod
    def _cuda_bindings():
        from cuda.bindings import runtime as cudart

        loc = cudart.cudaMemLocation()
        loc.type = cudart.cudaMemLocationType.cudaMemLocationTypeHost
        loc.id = 0

        def to_host(ptr, n, s):
            (err,) = cudart.cudaMemPrefetchAsync(ptr, n, loc, 0, s)
            if err != cudart.cudaError_t.cudaSuccess:
                raise RuntimeError(f"cudaMemPrefetchAsync(host) failed: {err}")

        return to_host

    @staticmethod
    def _libcuda():
        fn = ctypes.CDLL("libcuda.so.1").cuMemPrefetchAsync_v2
        fn.argtypes = [ctypes.c_uint64, ctypes.c_size_t, _MemLocation, ctypes.c_uint, ctypes.c_void_p]
        fn.restype = ctypes.c_int
        _rt.free(0)  # makes the runtime's primary context current on this thread

        def to_host(ptr, n, s):
            rc = fn(ptr, n, _MemLocation(_LOCATION_HOST, 0), 0, s or None)
            if rc != 0:
                raise RuntimeError(f"cuMemPrefetchAsync_v2(host) returned CUresult {rc}")

        return to_host

    def to_host(self, ptr, nbytes, stream=0):
        self._to_host(ptr, nbytes, stream)

    def to_device(self, ptr, nbytes, stream=0):
        _rt.memPrefetchAsync(ptr, nbytes, self.device, stream)


def self_test(prefetcher, nbytes=64 << 20):
    """Round-trips one managed buffer device -> host -> device; returns what was seen.

    cudaMemGetInfo did not show any device memory freed by a host prefetch on
    the H200 (0 MiB gained after 64 MiB went to the host; presumably the UVM
    driver keeps its chunks), so the evidence that the pages left the device
    is the time a GPU read takes right after it (it faults them back) against
    a read of resident pages.
    """
    mem = cupy.cuda.malloc_managed(nbytes)
    a = cupy.ndarray((nbytes // 4,), dtype=cupy.float32, memptr=mem)
    a[...] = cupy.arange(a.size, dtype=cupy.float32)
    expect = float(a.sum(dtype=cupy.float64))

    def timed_read_ms(a=a):
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        total = a.sum(dtype=cupy.float64)
        end.record()
        end.synchronize()
        return cupy.cuda.get_elapsed_time(start, end), float(total)

    prefetcher.to_device(mem.ptr, nbytes)
    resident_ms, _ = timed_read_ms()
    free0 = _rt.memGetInfo()[0]
    prefetcher.to_host(mem.ptr, nbytes)
    cupy.cuda.Device().synchronize()
    free1 = _rt.memGetInfo()[0]
    faulting_ms, got_faulted = timed_read_ms()  # the pages come back on touch
    prefetcher.to_host(mem.ptr, nbytes)
    prefetcher.to_device(mem.ptr, nbytes)
    got = float(a.sum(dtype=cupy.float64))
    out = {"method": prefetcher.method, "rejected": prefetcher.rejected,
           "ok": got == expect and got_faulted == expect,
           f"gpu_read_{nbytes >> 20}MiB_resident_ms": round(resident_ms, 3),
           f"gpu_read_{nbytes >> 20}MiB_after_host_prefetch_ms": round(faulting_ms, 3),
           "device_free_gain_mib_after_host_prefetch": (free1 - free0) / 2**20}
    # What CuPy's own call does with cudaCpuDeviceId on this CUDA (see module docstring).
    try:
        _rt.memPrefetchAsync(mem.ptr, nbytes, _CPU_DEVICE_ID, 0)
        cupy.cuda.Device().synchronize()
        out["cupy_prefetch_cpu_device_id"] = "accepted"
    except Exception as e:
        out["cupy_prefetch_cpu_device_id"] = f"{type(e).__name__}: {e}"
    del a, mem
    return out


# ---- the store -------------------------------------------------------------------
def _allocations(obj, out):
    """(base pointer, bytes) of the managed allocations that obj's device arrays live in."""
    if isinstance(obj, (list, tuple, set, frozenset)):
        for o in obj:
            _allocations(o, out)
        return out
    if isinstance(obj, dict):
        for o in obj.values():
            _allocations(o, out)
        return out
    if isinstance(obj, cupy.ndarray):
        mem = obj.data.mem  # the pool chunk the array (or view) sits in
        if mem is not None and mem.ptr and mem.size:
            out.append((mem.ptr, mem.size))
        return out
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None and cai["data"][0]:
        n = int(cai["typestr"][2:])
        for d in cai["shape"]:
            n *= d
        out.append((cai["data"][0], n))  # contiguous assumed for foreign arrays
    return out


class ManagedMemoryStore(MutableMapping):
    """Worker.data mapping over managed memory with a store-enforced device budget."""

    def __init__(self, *, device_memory_limit, prefetch_back, device=0, prefetcher=None):
        self.limit = int(device_memory_limit)
        self.prefetch_back = bool(prefetch_back)
        self.prefetcher = prefetcher or Prefetcher(device)
        self._values = {}
        self._allocs = {}  # key -> [(ptr, size)] of managed allocations
        self._refs = {}  # ptr -> number of keys whose value lives in it
        self._size = {}  # ptr -> bytes
        self._resident = OrderedDict()  # ptr -> None, least recently used first
        self._resident_bytes = 0
        self._lock = threading.RLock()
        self.counters = {"evictions": 0, "evicted_bytes": 0, "evict_seconds": 0.0,
                         "prefetch_backs": 0, "prefetch_back_bytes": 0, "prefetch_back_seconds": 0.0,
                         "fault_backs": 0, "fault_back_bytes": 0, "unmanaged_values": 0,
                         "max_resident_bytes": 0}

    def _managed(self, allocs):
        kept = []
        for ptr, size in allocs:
            if ptr in self._size:
                kept.append((ptr, size))
                continue
            try:
                if _rt.pointerGetAttributes(ptr).type == _MANAGED:
                    kept.append((ptr, size))
                    continue
            except Exception:
                pass
            self.counters["unmanaged_values"] += 1  # cannot be evicted: counted nowhere
        return kept

    def _touch(self, ptrs, reading):
        # REQUIRES: self._lock held.
        c = self.counters
        for ptr in ptrs:
            if ptr in self._resident:
                self._resident.move_to_end(ptr)
                continue
            size = self._size[ptr]
            if reading:  # an evicted value comes back
                if self.prefetch_back:
                    t = perf_counter()
                    self.prefetcher.to_device(ptr, size)
                    c["prefetch_backs"] += 1
                    c["prefetch_back_bytes"] += size
                    c["prefetch_back_seconds"] += perf_counter() - t
                else:
                    c["fault_backs"] += 1
                    c["fault_back_bytes"] += size
            self._resident[ptr] = None
            self._resident_bytes += size
        self._evict(protect=set(ptrs))
        c["max_resident_bytes"] = max(c["max_resident_bytes"], self._resident_bytes)

    def _evict(self, protect):
        # REQUIRES: self._lock held.
        c = self.counters
        while self._resident_bytes > self.limit:
            victim = next((p for p in self._resident if p not in protect), None)
            if victim is None:
                return  # the value just used is larger than the budget by itself
            del self._resident[victim]
            size = self._size[victim]
            self._resident_bytes -= size
            t = perf_counter()
            self.prefetcher.to_host(victim, size)
            c["evictions"] += 1
            c["evicted_bytes"] += size
            c["evict_seconds"] += perf_counter() - t

    def __setitem__(self, key, value):
        with self._lock:
            if key in self._values:
                del self[key]
            allocs = self._managed(_allocations(value, []))
            self._values[key] = value
            self._allocs[key] = allocs
            for ptr, size in allocs:
                self._refs[ptr] = self._refs.get(ptr, 0) + 1
                self._size.setdefault(ptr, size)
            self._touch([p for p, _ in allocs], reading=False)

    def __getitem__(self, key):
        with self._lock:
            value = self._values[key]
            self._touch([p for p, _ in self._allocs[key]], reading=True)
            return value

    def __delitem__(self, key):
        with self._lock:
            del self._values[key]
            for ptr, _ in self._allocs.pop(key):
                self._refs[ptr] -= 1
                if self._refs[ptr] == 0:
                    del self._refs[ptr]
                    size = self._size.pop(ptr)
                    if self._resident.pop(ptr, 0) is None:
                        self._resident_bytes -= size

    def __contains__(self, key):
        return key in self._values

    def __iter__(self):
        with self._lock:
            return iter(list(self._values))

    def __len__(self):
        return len(self._values)

    def stats(self):
        with self._lock:
            return dict(self.counters, keys=len(self._values), resident_bytes=self._resident_bytes,
                        allocations=len(self._size), prefetch_method=self.prefetcher.method)
