"""GPU path of the Python module: CuPy arrays totalling several times the gpu
tier go in as device pointers (PutOptions memory = kDevice), are demoted to
host and file tiers by the engine, and come back correct and as CuPy arrays.

Skips, with the reason, without CuPy, without a CUDA device, or when this
spillway build has no gpu tier support. Needs a GPU machine to run.
"""
import os
import subprocess
import sys

import numpy as np
import pytest

import spillway

cupy = pytest.importorskip("cupy", reason="CuPy is not installed (the GPU tests need it)")

MiB = 1 << 20
GiB = 1 << 30
GPU_TIER = 256 * MiB


def _no_device_reason():
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # CUDARuntimeError without a driver
        return f"no CUDA device: {e}"
    return None if n > 0 else "no CUDA device"


_reason = _no_device_reason()
if _reason:
    pytest.skip(_reason, allow_module_level=True)


def gpu_chain(directory, gpu="256MiB", host="512MiB"):
    return {
        "version": 1,
        "tiers": [
            {"name": "gpu0", "kind": "gpu", "device": 0, "capacity": gpu},
            {"name": "host", "kind": "host", "capacity": host},
            {"name": "disk", "kind": "file", "capacity": "16GiB", "paths": [str(directory)]},
        ],
    }


@pytest.fixture
def engine(tmp_path):
    try:
        e = spillway.Engine(gpu_chain(tmp_path / "disk"))
    except (spillway.NotSupportedError, spillway.InvalidArgumentError) as err:
        if "without CUDA" in str(err) or "not available in this build" in str(err):
            pytest.skip(f"spillway built without gpu tier support: {err}")
        raise
    yield e
    e.close()


def test_cupy_arrays_several_times_the_gpu_tier(engine):
    elems = 16 * MiB // 4  # 16 MiB float32 arrays
    expected = {}
    for i in range(64):  # 1 GiB in all: 4x the gpu tier, 2x the host tier
        a = cupy.random.default_rng(i).random(elems, dtype=cupy.float32)
        spillway.put_array(engine, f"a{i}", a)
        expected[f"a{i}"] = float(a[:1024].sum()), float(a.sum())
        del a
    engine.flush()
    s = engine.stats()
    gpu = s["tiers"][0]
    assert gpu["kind"] == "gpu" and gpu["demotions_out"] > 0, gpu
    for key, (head, total) in expected.items():
        back = spillway.get_array(engine, key)
        assert isinstance(back, cupy.ndarray) and back.dtype == cupy.float32 and back.shape == (elems,)
        assert float(back[:1024].sum()) == head
        assert float(back.sum()) == pytest.approx(total, rel=1e-6)
        del back
    s = engine.stats()
    assert sum(t["promotions_in"] for t in s["tiers"]) > 0


def test_raw_device_put_get(engine):
    a = cupy.arange(1 << 20, dtype=cupy.int64)
    engine.put("raw", a)
    buf = engine.get("raw", where="device")
    assert isinstance(buf, spillway.DeviceBuffer) and buf.nbytes == a.nbytes
    view = cupy.asarray(buf).view(cupy.int64)  # zero copy: the object stays pinned while `view` lives
    assert bool((view == a).all())
    host = engine.get("raw", where="host")  # the engine copies to the host when asked
    assert np.array_equal(np.frombuffer(host, dtype=np.int64), cupy.asnumpy(a))


def test_strided_device_array_is_refused(engine):
    a = cupy.arange(100, dtype=cupy.float32)[::2]
    with pytest.raises(ValueError, match="C-contiguous"):
        engine.put("strided", a)


def test_torch_tensor_round_trip(engine):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no CUDA device")
    t = torch.arange(4096, dtype=torch.float32, device="cuda").reshape(64, 64)
    spillway.put_array(engine, "t", t)
    back = spillway.get_array(engine, "t")
    assert isinstance(back, torch.Tensor) and back.is_cuda and torch.equal(back, t)


def test_dask_store_with_cupy_values(tmp_path):
    pytest.importorskip("distributed", reason="python3-distributed is not installed")
    from spillway.dask import SpillwayStore

    try:
        store = SpillwayStore(gpu_chain(tmp_path / "disk", gpu="64MiB", host="128MiB"), log_interval=0)
    except (spillway.NotSupportedError, spillway.InvalidArgumentError) as err:
        pytest.skip(f"spillway built without gpu tier support: {err}")
    values = {f"x{i}": cupy.random.default_rng(i).random(2 * MiB, dtype=cupy.float32) for i in range(32)}
    sums = {k: float(v.sum()) for k, v in values.items()}
    for k, v in values.items():
        store[k] = v
    del values, v
    for k, total in sums.items():
        back = store[k]
        assert isinstance(back, cupy.ndarray)
        assert float(back.sum()) == pytest.approx(total, rel=1e-6)
    assert store.stats()["summary"]["demotions"] > 0
    store.close()


# ---- device values: adopted without a copy, views stored once ----


def _store(tmp_path, gpu="256MiB", host="512MiB"):
    pytest.importorskip("distributed", reason="python3-distributed is not installed")
    from spillway.dask import SpillwayStore

    return SpillwayStore(gpu_chain(tmp_path / "disk", gpu=gpu, host=host), log_interval=0)


def test_store_adopts_device_arrays_and_counts_views(tmp_path):
    store = _store(tmp_path)
    a = cupy.arange(1 << 20, dtype=cupy.float32)
    ptr, expected = a.data.ptr, float(a.sum())
    store["whole"] = a
    store["head"] = a[:1000]
    store["strided"] = a[::2]
    gpu = store.engine.stats()["tiers"][0]
    assert gpu["objects"] == 1 and gpu["raw_bytes"] >= a.nbytes, gpu  # one allocation, stored once
    back = store["whole"]
    assert isinstance(back, cupy.ndarray) and back.data.ptr == ptr  # no copy: the engine holds the array's memory
    del back
    del a  # the engine keeps the producer's memory alive
    cupy.get_default_memory_pool().free_all_blocks()
    scribble = cupy.full(1 << 20, -1, dtype=cupy.float32)  # would land on the memory had it been freed
    assert float(store["whole"].sum()) == expected
    assert bool((store["strided"] == cupy.arange(0, 1 << 20, 2, dtype=cupy.float32)).all())
    assert store["head"].shape == (1000,) and float(store["head"][-1]) == 999.0
    del scribble
    del store["whole"], store["head"]
    assert store.engine.stats()["tiers"][0]["objects"] == 1  # "strided" still shares it
    del store["strided"]
    assert store.engine.stats()["tiers"][0]["objects"] == 0
    store.close()


def test_store_device_values_demoted_and_released(tmp_path):
    from spillway import device

    store = _store(tmp_path, gpu="64MiB", host="128MiB")
    before = device._native.release_counts()["dropped"]
    sums = {}
    for i in range(24):  # 24 x 8 MiB: 3x the gpu tier, spilled to host and file
        v = cupy.random.default_rng(i).random(2 * MiB, dtype=cupy.float32)
        store[f"x{i}"] = v
        sums[f"x{i}"] = float(v.sum())
    del v
    store.engine.flush()
    device._native.drain()
    s = store.engine.stats()
    assert s["tiers"][0]["demotions_out"] > 0 and s["tiers"][2]["objects"] > 0, s["tiers"]
    assert device._native.release_counts()["dropped"] > before  # the engine let go of demoted producers
    for k, total in sums.items():
        back = store[k]
        assert isinstance(back, cupy.ndarray) and back.shape == (2 * MiB,)
        assert float(back.sum()) == pytest.approx(total, rel=1e-6)
        del back
    store.close()


def test_store_objects_without_interface_use_cuda_serializers(tmp_path):
    sparse = pytest.importorskip("cupyx.scipy.sparse")
    store = _store(tmp_path)
    m = sparse.random(2000, 2000, density=0.01, format="csr", dtype=cupy.float32, random_state=1)
    store["m"] = m
    assert store.stats()["store"]["overflow_keys"] == 0
    back = store["m"]
    assert bool((back.toarray() == m.toarray()).all())
    store.close()


# ---- allocators: spill on allocation failure ----


def test_cupy_allocator_demotes_on_allocation_failure(tmp_path):
    from spillway import device

    eng = spillway.Engine(gpu_chain(tmp_path / "disk", gpu="2GiB", host="4GiB"))
    old = cupy.cuda.get_allocator()
    hog = 0
    try:
        cupy.cuda.set_allocator(device.cupy_allocator(eng))
        arrays = [cupy.full(64 * MiB // 4, i, dtype=cupy.float32) for i in range(24)]  # 1.5 GiB, engine memory
        for i, a in enumerate(arrays):
            spillway.put_array(eng, f"v{i}", a)  # adopted, no copy
        del arrays, a
        cupy.get_default_memory_pool().free_all_blocks()
        free = cupy.cuda.runtime.memGetInfo()[0]
        hog = cupy.cuda.runtime.malloc(free - GiB)  # memory outside the engine: 1 GiB left free
        big = cupy.empty(1536 * MiB // 4, dtype=cupy.float32)  # does not fit: the engine demotes and retries
        big.fill(7)
        assert float(big[-1]) == 7.0
        assert eng.stats()["tiers"][0]["demotions_out"] > 0
        del big
        cupy.cuda.runtime.free(hog)
        hog = 0
        for i in range(24):
            assert float(spillway.get_array(eng, f"v{i}")[12345]) == float(i)
    finally:
        cupy.cuda.set_allocator(old)
        if hog:
            cupy.cuda.runtime.free(hog)
        eng.close()


def test_torch_pluggable_allocator(tmp_path):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no CUDA device")
    chain = gpu_chain(tmp_path / "disk", gpu="1GiB", host="1GiB")
    code = f"""
import torch, spillway
from spillway import device
eng = spillway.Engine({chain!r})
torch.cuda.memory.change_current_allocator(device.torch_allocator(eng))
n = 1 << 22
x = torch.arange(n, device="cuda")
assert x.sum().item() == n * (n - 1) // 2
c = device._native.torch_counts()
assert c["allocs"] >= 2 and c["live"] >= 1, c
spillway.put_array(eng, "t", x)  # an engine allocation, adopted back by the engine
del x
back = spillway.get_array(eng, "t")
assert back.is_cuda and int(back[-1]) == n - 1
print("TORCH-ALLOCATOR-OK", c)
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    assert r.returncode == 0 and "TORCH-ALLOCATOR-OK" in r.stdout, r.stdout + r.stderr


if __name__ == "__main__":
    raise SystemExit(pytest.main([os.path.abspath(__file__), "-v", "-rs"]))
