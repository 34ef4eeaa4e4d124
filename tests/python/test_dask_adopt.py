"""Live NumPy/pandas memory adopted by the engine (Engine.put_adopted ->
Engine::PutHostAllocation): no copy into the host tier, bytes accounted,
the value kept alive until the engine lets go (erase, replace, demotion),
released on the releaser thread (never on the mover's while it waits for the GIL)."""
import gc
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import spillway
from spillway import _spillway

from conftest import MiB, chain, settle

pytest.importorskip("distributed", reason="python3-distributed is not installed")
pd = pytest.importorskip("pandas", reason="python3-pandas is not installed")

from spillway.dask import SpillwayStore  # noqa: E402


def test_engine_adopts_without_copy_and_releases(tmp_path):
    eng = spillway.Engine(chain(tmp_path, host="16MiB"))
    a = np.arange(1 << 18, dtype=np.float64)  # 2 MiB
    alive = weakref.ref(a)
    assert eng.put_adopted("a", a) is True
    address, nbytes = a.ctypes.data, a.nbytes
    del a
    gc.collect()
    assert alive() is not None  # the engine keeps the array alive
    host = next(t for t in eng.stats()["tiers"] if t["name"] == "host")
    assert host["used_bytes"] == nbytes  # and accounts its bytes
    v = eng.get("a")
    assert np.frombuffer(v, dtype=np.uint8).ctypes.data == address  # the array's own memory: no copy
    eng.erase("a")
    assert not settle(lambda: alive() is None, timeout=0.2)  # still pinned by v
    del v
    assert settle(lambda: alive() is None and _spillway._pending_releases() == 0)
    assert eng.put_adopted("ro", b"read-only bytes" * 10000) is False  # not writable: nothing stored
    assert "ro" not in eng
    eng.close()


@pytest.mark.parametrize("background", [False, True])
def test_engine_releases_after_demotion(tmp_path, background):
    eng = spillway.Engine(chain(tmp_path, host="2MiB", file="256MiB"), background_mover=background)
    refs = []
    for i in range(32):  # 8 MiB into a 2 MiB host tier
        a = np.full(256 * 1024 // 8, i, dtype=np.int64)
        refs.append(weakref.ref(a))
        assert eng.put_adopted(f"k{i}", a)
    del a
    eng.flush()
    disk = next(t for t in eng.stats()["tiers"] if t["name"] == "disk")["objects"]
    assert disk >= 16
    # Exactly the demoted arrays are let go, once the demotion committed.
    assert settle(lambda: sum(r() is None for r in refs) == disk)
    for i in range(32):
        got = np.frombuffer(eng.get(f"k{i}", copy=True), dtype=np.int64)
        assert got.shape == (256 * 1024 // 8,) and (got == i).all()
    eng.close()
    assert settle(lambda: all(r() is None for r in refs))


def test_store_adopts_numpy_and_pandas_frames(tmp_path):
    # lazy=False: a pandas frame is serialized at once and its frames adopted
    # (by default it goes to the engine live: test_dask_lazy.py).
    s = SpillwayStore(chain(tmp_path, host="64MiB"), log_interval=0, weak_cache=False, lazy=False)
    a = np.random.default_rng(0).random(1 << 20)  # 8 MiB
    df = pd.DataFrame({"x": np.arange(1 << 17, dtype=np.float64), "k": np.arange(1 << 17)})
    s["a"] = a
    s["df"] = df
    st = s.stats()
    assert st["store"]["adopted_bytes"] >= a.nbytes + 2 * (1 << 17) * 8
    host = next(t for t in st["engine"]["tiers"] if t["name"] == "host")
    assert host["raw_bytes"] < a.nbytes + df.memory_usage().sum() + 64 * 1024  # one copy in the process: the value's
    got = s["a"]
    assert np.shares_memory(got, a)  # no copy anywhere
    pd.testing.assert_frame_equal(s["df"], df)
    del got
    s["a"] = np.zeros(10)  # replaced: the old array's memory is let go
    np.testing.assert_array_equal(s["a"], np.zeros(10))
    s.close()


def test_store_values_spill_and_come_back(tmp_path):
    s = SpillwayStore(chain(tmp_path, host="4MiB", file="512MiB"), log_interval=0)
    rng = np.random.default_rng(1)
    values = {f"v{i}": rng.random(MiB // 8) for i in range(24)}  # 24 MiB into 4 MiB
    for k, v in values.items():
        s[k] = v.copy()
    s.engine.flush()
    assert s.stats()["summary"]["bytes_by_tier"]["disk"] >= 16 * MiB
    for k, v in values.items():
        np.testing.assert_array_equal(s[k], v)
    for k in list(values)[::2]:
        s.discard(k)
    s.close()


def test_store_threads_with_the_background_mover(tmp_path):
    s = SpillwayStore(chain(tmp_path, host="2MiB", file="512MiB"), log_interval=0)
    errors = []

    def work(t):
        rng = np.random.default_rng(t)
        for i in range(40):
            k = f"t{t}-{i % 8}"
            v = np.full(64 * 1024 // 8 + rng.integers(0, 1000), t * 1000 + i, dtype=np.int64)
            s[k] = v
            got = s[k]
            if not (got.shape == v.shape and got[0] == v[0]):
                errors.append((k, got[:2], v[:2]))
            if i % 3 == 0:
                del s[k]

    with ThreadPoolExecutor(4) as ex:
        list(ex.map(work, range(4)))
    assert not errors
    n = len(s)
    s.engine.flush()
    gc.collect()
    assert s.engine.stats()["objects"] == 2 * n  # header object + one adopted frame per key
    s.close()
    assert settle(lambda: _spillway._pending_releases() == 0)
    assert threading.active_count() < 50


def test_fast_slow_follow_the_engine(tmp_path):
    # fast/slow and spilled_total come from where the engine holds each value
    # (Engine.tiers_of): a read that promotes a spilled value moves it to fast.
    from dask.sizeof import sizeof

    s = SpillwayStore(chain(tmp_path, host="4MiB", file="512MiB"), log_interval=0)
    rng = np.random.default_rng(2)
    for i in range(24):
        s[f"v{i}"] = rng.random(MiB // 8)  # 1 MiB each, adopted
    s.engine.flush()
    slow, fast = set(s.slow), set(s.fast)
    assert len(slow) >= 16 and fast and not slow & fast
    assert len(fast) * MiB <= 4 * MiB  # what fast lists fits in the host tier
    assert s.spilled_total[0] == sum(sizeof(np.empty(MiB // 8)) for _ in slow)
    k = sorted(slow)[0]
    # A read promotes only into room the host tier has now (it never demotes on
    # the reader's thread), and the flush may leave the tier without 1 MiB free
    # (3 of the 4 MiB at the low watermark): free one value's room first.
    del s[sorted(fast)[0]]
    _ = s[k]  # promote_on_read (the default): back to the host tier
    assert k in s.fast and k not in s.slow
    s.close()
