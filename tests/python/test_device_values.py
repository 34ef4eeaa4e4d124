"""spillway.device bookkeeping without a GPU: views of one allocation are stored
once and counted, an allocation the engine let go of is never reused for a new
array at the same address, and records place each view inside its allocation.
The native calls (adopt, pin) and the array wrapping are replaced by fakes; the
GPU tests (test_gpu.py) run the real ones.
"""
import pytest

import spillway
from spillway import device


class _Token:
    def __init__(self):
        self.alive = True


class _Pin:
    def __init__(self, key, ptr):
        self.key, self.ptr = key, ptr


class FakeNative:
    def __init__(self):
        self.adopted = {}  # engine key -> (ptr, nbytes, owner, token)

    def adopt(self, engine, key, ptr, nbytes, owner, buffer_sizes=()):
        tok = _Token()
        self.adopted[key] = (ptr, nbytes, owner, tok)
        return tok

    def pin(self, engine, key, where="device"):
        assert where == "device"
        return _Pin(key, self.adopted[key][0])


class FakeEngine:
    def __init__(self):
        self.erased = []

    def erase(self, key):
        self.erased.append(key)


class _Mem:
    def __init__(self, ptr, size):
        self.ptr, self.size = ptr, size


class _MemPtr:
    def __init__(self, mem, ptr):
        self.mem, self.ptr = mem, ptr


class FakeCupyArray:
    """Looks like a CuPy array to spillway.device: data.mem is the allocation."""

    def __init__(self, mem, offset, shape, typestr="<f4", strides=None):
        self.data = _MemPtr(mem, mem.ptr + offset)
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (mem.ptr + offset, False),
                                         "strides": strides, "version": 3, "stream": None}


FakeCupyArray.__module__ = "cupy._core.core"


@pytest.fixture
def table(monkeypatch):
    native = FakeNative()
    monkeypatch.setattr(device, "_native", native)
    monkeypatch.setattr(device, "_wrap", lambda rec, pin: (rec, pin))
    t = device.DeviceValueTable(FakeEngine())
    t.native = native
    return t


def test_views_of_one_allocation_are_stored_once(table):
    mem = _Mem(0x10000, 4096)
    whole = FakeCupyArray(mem, 0, (1024,))
    tail = FakeCupyArray(mem, 2048, (512,))
    strided = FakeCupyArray(mem, 4, (512,), strides=(8,))
    for k, v in (("whole", whole), ("tail", tail), ("strided", strided)):
        table.put(k, v)
    assert len(table.native.adopted) == 1
    (akey, (ptr, nbytes, owner, _)) = next(iter(table.native.adopted.items()))
    assert (ptr, nbytes) == (0x10000, 4096) and owner is mem  # the allocation, owned by its Memory
    rec, pin = table.get("tail")
    assert pin.key == akey and rec["offset"] == 2048 and rec["shape"] == [512]
    rec, _ = table.get("strided")
    assert rec["offset"] == 4 and rec["strides"] == [8]
    table.discard("whole")
    table.discard("tail")
    assert table.engine.erased == []  # "strided" still uses it
    table.discard("strided")
    assert table.engine.erased == [akey]
    assert table.stats()["device_shared"] == 2


def test_released_allocation_is_not_shared_with_a_new_array(table):
    mem = _Mem(0x20000, 1024)
    table.put("a", FakeCupyArray(mem, 0, (256,)))
    first = next(iter(table.native.adopted.values()))[3]
    first.alive = False  # the engine demoted it and let go: the address may be reused
    reused = _Mem(0x20000, 1024)
    table.put("b", FakeCupyArray(reused, 0, (256,)))
    assert len(table.native.adopted) == 2  # adopted afresh, not counted against the old one
    keys = list(table.native.adopted)
    table.discard("a")
    assert table.engine.erased == [keys[0]]
    assert table.get("b")[1].key == keys[1]


def test_overwrite_drops_the_previous_reference(table):
    m1, m2 = _Mem(0x30000, 512), _Mem(0x40000, 512)
    table.put("k", FakeCupyArray(m1, 0, (128,)))
    table.put("k", FakeCupyArray(m2, 0, (128,)))
    k1, k2 = list(table.native.adopted)
    assert table.engine.erased == [k1] and "k" in table and len(table) == 1
    assert table.get("k")[1].key == k2
    table.clear()
    assert table.engine.erased == [k1, k2]
    with pytest.raises(KeyError):
        table.get("k")


def test_generic_interface_uses_the_array_extent():
    class Numbaish:
        __cuda_array_interface__ = {"shape": (4, 3), "typestr": "<f8", "data": (0x5000, False),
                                    "strides": (-24, 8), "version": 2}

    v = Numbaish()
    base, size, owner = device._allocation(v, v.__cuda_array_interface__)
    # rows run backwards: the lowest byte is 3 rows (72 bytes) below the data pointer
    assert (base, size, owner) == (0x5000 - 72, 96, v)
    assert device.describe(v, v.__cuda_array_interface__, base)["offset"] == 72


def test_is_device_array():
    class Cpu:
        @property
        def __cuda_array_interface__(self):
            raise AttributeError("CPU tensor")

    assert not device.is_device_array(b"x") and not device.is_device_array(memoryview(b"x"))
    assert not device.is_device_array(Cpu()) and not device.is_device_array(3)
    assert device.is_device_array(FakeCupyArray(_Mem(0x1000, 64), 0, (16,)))


def test_native_device_calls_refuse_an_engine_without_gpu_tier(tmp_path):
    eng = spillway.Engine({"version": 1, "tiers": [{"name": "h", "kind": "host", "capacity": "16MiB"}]})
    owner = object()
    with pytest.raises(spillway.NotSupportedError):
        spillway._spillway.device.adopt(eng, "k", 0x1000, 64, owner)
    with pytest.raises(spillway.NotSupportedError):
        spillway._spillway.device.allocate(eng, 64)
    assert spillway._spillway.device.release_counts()["queued"] == 0
    import sys

    assert sys.getrefcount(owner) == 2  # the refused adoption dropped its reference
    eng.close()
