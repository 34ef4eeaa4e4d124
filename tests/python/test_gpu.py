"""GPU path of the Python module: CuPy arrays totalling several times the gpu
tier go in as device pointers (PutOptions memory = kDevice), are demoted to
host and file tiers by the engine, and come back correct and as CuPy arrays.

Skips, with the reason, without CuPy, without a CUDA device, or when this
spillway build has no gpu tier support. Needs a GPU machine to run.
"""
import os

import numpy as np
import pytest

import spillway

cupy = pytest.importorskip("cupy", reason="CuPy is not installed (the GPU tests need it)")

MiB = 1 << 20
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


if __name__ == "__main__":
    raise SystemExit(pytest.main([os.path.abspath(__file__), "-v", "-rs"]))
