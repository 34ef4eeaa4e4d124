"""spillway.Engine from Python: round trips, multi-buffer objects, zero-copy
reads, status codes as exceptions, config from dict and file, statistics."""
import gc
import os
import threading
import tracemalloc

import numpy as np
import pytest

import spillway
from conftest import MiB, chain


def test_round_trip_bytes_and_keys(make_engine):
    e = make_engine()
    e.put("a", b"hello")
    e.put(b"\x00binary\xff", bytearray(b"world"))
    assert bytes(e.get("a")) == b"hello"
    assert e.get(b"a", copy=True) == b"hello"  # str keys are their UTF-8 bytes
    assert e.get(b"\x00binary\xff", copy=True) == b"world"
    assert "a" in e and e.contains("a") and "b" not in e
    e.put("a", b"replaced")
    assert e.get("a", copy=True) == b"replaced"
    e.erase("a")
    assert "a" not in e
    e.put("empty", b"")
    assert e.get("empty", copy=True) == b""


def test_numpy_round_trip_and_multi_buffer(make_engine):
    e = make_engine()
    arr = np.arange(100_000, dtype=np.float64)
    e.put("arr", arr)
    view = e.get("arr")
    assert isinstance(view, memoryview) and view.readonly and view.nbytes == arr.nbytes
    assert np.array_equal(np.frombuffer(view, dtype=np.float64), arr)

    parts = [b"header", np.ones((3, 4), dtype=np.int32), bytearray(b"tail"), memoryview(b"mv")]
    e.put("multi", parts)
    got = e.get("multi")
    assert isinstance(got, list) and len(got) == 4
    assert bytes(got[0]) == b"header"
    assert np.array_equal(np.frombuffer(got[1], dtype=np.int32).reshape(3, 4), parts[1])
    assert bytes(got[2]) == b"tail" and bytes(got[3]) == b"mv"
    assert e.get("multi", copy=True) == [b"header", parts[1].tobytes(), b"tail", b"mv"]
    assert len(e.get_buffers("arr")) == 1
    e.put("tuple", (b"x", b"yz"))
    assert e.get("tuple", copy=True) == [b"x", b"yz"]


def test_non_contiguous_arrays_are_stored_contiguously(make_engine):
    e = make_engine()
    base = np.arange(64, dtype=np.int64).reshape(8, 8)
    strided = base[:, ::2]
    assert not strided.flags.c_contiguous
    e.put("s", strided)
    assert np.array_equal(np.frombuffer(e.get("s"), dtype=np.int64).reshape(8, 4), strided)
    e.put("f", np.asfortranarray(base))  # contiguous, Fortran order: stored as laid out
    assert np.array_equal(np.frombuffer(e.get("f"), dtype=np.int64).reshape(8, 8, order="F"), base)


def test_get_is_zero_copy_and_pins(make_engine):
    e = make_engine(host="64MiB")
    e.put("k", np.full(1 * MiB, 7, dtype=np.uint8))
    a = np.frombuffer(e.get("k"), dtype=np.uint8)
    b = np.frombuffer(e.get("k"), dtype=np.uint8)
    # Two reads of a host-tier object see the same bytes in place: no copy.
    assert a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
    assert not a.flags.writeable
    assert e.stats()["tiers"][0]["pinned_bytes"] >= 1 * MiB
    # Erase and overwrite do not move or free what a reader still holds.
    e.erase("k")
    e.put("k", b"other")
    assert a[0] == 7 and a[-1] == 7 and a.sum() == 7 * MiB
    del a, b
    gc.collect()
    assert e.stats()["tiers"][0]["pinned_bytes"] == 0


def test_writable_views(make_engine):
    e = make_engine()
    e.put("k", b"abc")
    assert e.get("k").readonly
    v = e.get("k", writable=True)
    assert not v.readonly
    v[0:1] = b"X"  # the object is in the host tier: later readers see the write
    assert e.get("k", copy=True) == b"Xbc"


def test_put_reads_numpy_in_place():
    # The Python side makes no copy of a 32 MiB array: tracemalloc sees only
    # small allocations (the engine's own copy is not a Python allocation).
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        e = spillway.Engine(chain(d, host="128MiB"))
        arr = np.random.default_rng(0).integers(0, 255, 32 * MiB, dtype=np.uint8)
        tracemalloc.start()
        e.put("big", arr)
        e.put("big-list", [b"h", arr])
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert peak < 1 * MiB, f"put allocated {peak} bytes on the Python side"
        assert np.array_equal(np.frombuffer(e.get("big"), dtype=np.uint8), arr)
        e.close()


def test_close_waits_for_pinned_views(make_engine):
    e = make_engine()
    e.put("k", b"still here")
    view = e.get("k")
    e.close()
    assert e.closed
    assert bytes(view) == b"still here"  # the engine lives until its last view goes
    with pytest.raises(spillway.EngineClosedError):
        e.get("k")
    with pytest.raises(ValueError):  # EngineClosedError is a ValueError
        e.put("k", b"x")
    del view
    gc.collect()


def test_context_manager(tmp_path):
    with spillway.Engine(chain(tmp_path)) as e:
        e.put("k", b"v")
    assert e.closed


def test_errors_map_to_exceptions(make_engine, tmp_path):
    e = make_engine(host="1MiB", file="4MiB")
    with pytest.raises(KeyError) as info:
        e.get("missing")
    assert isinstance(info.value, spillway.NotFoundError) and info.value.args[0] == "missing"
    with pytest.raises(KeyError):
        e.erase("missing")
    with pytest.raises(MemoryError) as info:
        e.put("huge", np.zeros(16 * MiB, dtype=np.uint8))  # larger than every tier
    assert isinstance(info.value, spillway.NoSpaceError) and isinstance(info.value, spillway.Error)
    with pytest.raises(TypeError, match="buffer-protocol"):
        e.put("k", 12345)
    with pytest.raises(TypeError, match="key must be str or bytes"):
        e.put(3.5, b"x")
    with pytest.raises(ValueError, match="where/memory"):
        e.get("k", where="elsewhere")
    assert issubclass(spillway.StorageIOError, OSError)
    assert issubclass(spillway.InvalidArgumentError, ValueError)
    assert issubclass(spillway.CorruptionError, spillway.Error)


def test_device_buffers_without_gpu_tier(make_engine):
    class FakeCudaArray:  # what CuPy/Numba/PyTorch expose; never dereferenced here
        __cuda_array_interface__ = {"shape": (16,), "typestr": "<f4", "data": (0x10000, False), "version": 3,
                                    "strides": None, "stream": None}

    e = make_engine()
    # The pointer is bogus: without CUDA (or a device) the engine says it cannot
    # read device memory; with one, the copy to the host tier fails.
    with pytest.raises(spillway.Error) as info:
        e.put("dev", FakeCudaArray())
    if isinstance(info.value, spillway.NotSupportedError):
        assert "CUDA" in str(info.value)
    with pytest.raises(ValueError, match="mix host and device"):
        e.put("mixed", [b"host", FakeCudaArray()])
    e.put("host-object", b"bytes")
    with pytest.raises(NotImplementedError, match="gpu tier"):
        e.get("host-object", where="device")


def test_corruption_raises_corruption_error(tmp_path):
    # Demote objects to the file tier, damage their bytes on disk, read back.
    e = spillway.Engine(chain(tmp_path, host="4MiB", file="256MiB"))
    pattern = np.frombuffer(b"SPILLWAY-CORRUPTION-TEST-PATTERN" * (MiB // 32), dtype=np.uint8)
    for i in range(8):
        e.put(f"obj{i}", pattern)
    e.flush()
    assert e.stats()["tiers"][1]["objects"] > 0
    damaged = 0
    for root, _, files in os.walk(tmp_path):
        for name in files:
            path = os.path.join(root, name)
            with open(path, "r+b") as f:
                data = f.read()
                at = data.find(b"CORRUPTION")
                while at >= 0:
                    f.seek(at)
                    f.write(b"corruption")
                    damaged += 1
                    at = data.find(b"CORRUPTION", at + MiB // 2)
                f.flush()
                os.fsync(f.fileno())
    assert damaged > 0, "no record payload found on disk"
    errors = 0
    for i in range(8):
        try:
            view = e.get(f"obj{i}")
            assert np.array_equal(np.frombuffer(view, dtype=np.uint8), pattern), "wrong bytes returned"
            del view
        except spillway.CorruptionError as err:
            assert "checksum" in str(err).lower() or "corrupt" in str(err).lower()
            errors += 1
    assert errors > 0
    assert sum(t["checksum_failures"] for t in e.stats()["tiers"]) > 0
    e.close()


def test_config_from_dict_and_file(tmp_path):
    bad = chain(tmp_path / "a")
    bad["tiers"][0]["capactiy"] = bad["tiers"][0].pop("capacity")
    with pytest.raises(ValueError) as info:
        spillway.Engine(bad)
    assert "capacity" in str(info.value) and "<dict>" in str(info.value)

    path = tmp_path / "tiers.yaml"
    path.write_text(
        "version: 1\n"
        "tiers:\n"
        "  - {name: host, kind: host, capacity: 8MiB}\n"
        f"  - {{name: disk, kind: file, capacity: 64MiB, paths: ['{tmp_path}/${{SPW_TEST_SUB}}']}}\n"
        "profiles:\n"
        "  small: {tiers: {host: {capacity: 2MiB}}}\n"
    )
    os.environ["SPW_TEST_SUB"] = "sub"
    try:
        e = spillway.Engine(path)  # os.PathLike works; ${VAR} expanded by the engine
        assert [t["name"] for t in e.tiers] == ["host", "disk"]
        assert e.tiers[1]["paths"] == [f"{tmp_path}/sub"]
        assert e.source == str(path)
        assert e.tiers[0]["capacity_bytes"] == 8 * MiB
        e.close()
        small = spillway.Engine(str(path), profile="small")
        assert small.profile == "small" and small.tiers[0]["capacity_bytes"] == 2 * MiB
        small.close()
    finally:
        del os.environ["SPW_TEST_SUB"]
    with pytest.raises(ValueError, match="nonexistent"):
        spillway.Engine(tmp_path / "nonexistent.yaml")
    with pytest.raises(TypeError):
        spillway.Engine(42)

    e = spillway.Engine.from_yaml(
        "version: 1\ntiers:\n  - {name: h, kind: host, capacity: 1MiB}\n", source_name="inline.yaml")
    e.put("k", b"v")
    assert e.tiers[0]["capacity_bytes"] == MiB
    e.close()


def test_stats_show_demotions_and_promotions(make_engine):
    e = make_engine(host="8MiB", file="256MiB")
    rng = np.random.default_rng(1)
    arrays = [rng.integers(0, 1 << 30, 128 * 1024, dtype=np.int64) for _ in range(32)]  # 32 MiB: 4x host
    for i, a in enumerate(arrays):
        e.put(f"a{i}", a)
    e.flush()
    for i, a in enumerate(arrays):
        assert np.array_equal(np.frombuffer(e.get(f"a{i}"), dtype=np.int64), a), i
    s = e.stats()
    host, disk = s["tiers"]
    assert host["name"] == "host" and disk["kind"] == "file"
    assert host["demotions_out"] > 0 and disk["demotions_in"] > 0
    assert disk["promotions_out"] > 0 and host["promotions_in"] > 0
    assert s["puts"] == 32 and s["gets"] == 32
    assert any(b["direction"] == "down" for b in s["boundaries"])
    assert "host" in e.stats_table()
    assert "spillway_" in e.stats_prometheus()


def test_concurrent_threads(make_engine):
    e = make_engine(host="8MiB", file="512MiB")
    errors = []

    def worker(t):
        try:
            rng = np.random.default_rng(t)
            for i in range(40):
                a = rng.integers(0, 255, 256 * 1024, dtype=np.uint8)
                e.put(f"{t}/{i}", [b"hdr", a])
                hdr, got = e.get(f"{t}/{i}")
                assert bytes(hdr) == b"hdr" and np.array_equal(np.frombuffer(got, np.uint8), a)
        except Exception as ex:  # surfaced below
            errors.append(ex)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert e.stats()["objects"] == 160


def test_acquire_and_prefetch(make_engine):
    e = make_engine(host="4MiB", file="256MiB")
    blobs = {f"k{i}": bytes([i]) * (1 << 20) for i in range(16)}  # 16 MiB: most go to the file tier
    for k, v in blobs.items():
        e.put(k, [b"h", v])
    e.flush()
    keys = ["k0", "k1", "k15"]
    e.prefetch(keys)  # returns at once; brings them up in the background
    got = e.acquire(keys)  # pinned until released
    assert [bytes(bufs[1]) for bufs in got] == [blobs[k] for k in keys]
    assert all(bytes(bufs[0]) == b"h" for bufs in got)
    with pytest.raises(KeyError):
        e.acquire(["k0", "missing"])
    del got


def test_put_array_get_array(make_engine):
    e = make_engine()
    arr = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    spillway.put_array(e, "arr", arr)
    back = spillway.get_array(e, "arr")
    assert isinstance(back, np.ndarray) and back.dtype == arr.dtype and back.shape == arr.shape
    assert np.array_equal(back, arr) and not back.flags.writeable
    spillway.put_array(e, "f", np.asfortranarray(arr))
    assert np.array_equal(spillway.get_array(e, "f"), arr)
