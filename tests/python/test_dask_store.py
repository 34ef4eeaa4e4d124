"""spillway.dask.SpillwayStore as a mapping, in this process (no cluster):
Dask serialization round trips, key types, the weak cache, NoSpace overflow,
per-worker directories, and the metrics Dask's worker reads."""
import gc
import logging

import numpy as np
import pytest

pytest.importorskip("distributed", reason="python3-distributed is not installed")
pd = pytest.importorskip("pandas", reason="python3-pandas is not installed")

from spillway.dask import SpillwayStore  # noqa: E402

from conftest import MiB, chain  # noqa: E402


@pytest.fixture
def store(tmp_path):
    s = SpillwayStore(chain(tmp_path / "t", host="8MiB", file="512MiB"), log_interval=0)
    yield s
    s.close()


def test_values_round_trip(store):
    arr = np.random.default_rng(0).random((256, 256))
    df = pd.DataFrame({"a": np.arange(1000), "b": np.random.default_rng(1).random(1000), "c": ["x", "y"] * 500})
    values = {
        "array": arr,
        "frame": df,
        "series": df["b"],
        "int": 42,
        "dict": {"nested": [1, 2, (3, "four")]},
        "bytes": b"raw bytes",
        ("tuple-key", 0, 1): "tuple keys work too",
        "empty": np.empty((0, 3)),
    }
    for k, v in values.items():
        store[k] = v
    assert len(store) == len(values) and set(store) == set(values)
    del arr, df
    gc.collect()  # drop the originals: reads below deserialize from the engine
    for k, v in values.items():
        got = store[k]
        if isinstance(v, np.ndarray):
            np.testing.assert_array_equal(got, v)
        elif isinstance(v, pd.DataFrame):
            pd.testing.assert_frame_equal(got, v)
        elif isinstance(v, pd.Series):
            pd.testing.assert_series_equal(got, v)
        else:
            assert got == v
    assert "int" in store and "nope" not in store
    with pytest.raises(KeyError):
        store["nope"]


def test_written_arrays_stay_writeable(store):
    store["w"] = np.zeros(10)
    got = store["w"]
    got[0] = 1.0  # Dask tasks may write into their inputs' copies
    ro = np.zeros(10)
    ro.flags.writeable = False
    store["ro"] = ro
    assert not store["ro"].flags.writeable


@pytest.mark.parametrize("writable_views", [True, False])
def test_reads_deserialize_in_place(tmp_path, writable_views):
    s = SpillwayStore(chain(tmp_path, host="64MiB"), log_interval=0, weak_cache=False,
                      writable_views=writable_views)
    s["a"] = np.arange(1 << 20, dtype=np.float64)
    s["f"] = pd.DataFrame({"x": np.arange(1 << 16, dtype=np.float64)})
    a1, a2 = s["a"], s["a"]
    f1, f2 = s["f"], s["f"]
    assert a1.flags.writeable and a2.flags.writeable
    same = a1.ctypes.data == a2.ctypes.data and np.shares_memory(f1["x"].values, f2["x"].values)
    # Writable views: both reads are the stored bytes themselves (no copy);
    # read-only views: Dask's deserializers copy each time.
    assert same == writable_views
    del a1, a2, f1, f2
    s.close()


def test_overwrite_delete_and_weak_cache(store):
    store["k"] = np.arange(10)
    a = store["k"]
    assert store["k"] is a  # alive: served from the weak cache, not deserialized again
    assert store.stats()["store"]["cache_hits"] == 1
    store["k"] = np.arange(5)
    assert len(store["k"]) == 5
    del store["k"]
    assert "k" not in store and len(store) == 0
    with pytest.raises(KeyError):
        del store["k"]
    del a  # it pins the first object (a zero-copy view of it)
    gc.collect()
    assert store.engine.stats()["objects"] == 0


def test_spilling_and_stats(store):
    rng = np.random.default_rng(2)
    arrays = {f"x-{i}": rng.random(128 * 1024) for i in range(32)}  # 32 MiB into an 8 MiB host tier
    for k, v in arrays.items():
        store[k] = v.copy()  # the stored object dies: reads below go to the engine, not the weak cache
    store.engine.flush()
    for k, v in arrays.items():
        np.testing.assert_array_equal(store[k], v)
    s = store.stats()
    assert s["summary"]["demotions"] > 0 and s["summary"]["promotions"] > 0
    assert s["store"]["puts"] == 32 and s["store"]["keys"] == 32
    mem, disk = store.spilled_total
    assert mem > 0 and disk > 0
    metrics = store.get_metrics()
    # Every key Dask's Prometheus collector reads.
    for k in ("memory_read", "disk_read", "disk_write"):
        assert f"{k}_bytes_total" in metrics and f"{k}_count_total" in metrics
    for k in ("pickle", "disk_write", "disk_read", "unpickle"):
        assert f"{k}_time_total" in metrics
    assert metrics["disk_write_count_total"] > 0
    assert "demotions" in store.summary_line()


def test_no_space_keeps_value_in_memory(tmp_path, caplog):
    s = SpillwayStore(chain(tmp_path, host="1MiB", file="2MiB"), log_interval=0)
    big = np.ones(4 * MiB, dtype=np.uint8)
    with caplog.at_level(logging.WARNING, logger="distributed.worker.spillway"):
        s["big"] = big
    assert "no tier has room" in caplog.text
    assert s["big"] is big and "big" in s
    assert s.stats()["store"]["overflow_keys"] == 1
    del s["big"]
    assert "big" not in s
    # Values Dask cannot serialize stay in memory too, as in Dask's own buffer.
    import threading

    # The lock is held live; the failure shows when the engine demotes it
    # (the arrays below push the host tier over its high watermark).
    lock = threading.Lock()
    with caplog.at_level(logging.WARNING, logger="distributed.worker.spillway"):
        s["lock"] = lock
        for i in range(3):
            s[f"fill{i}"] = np.full(50_000, i, dtype=np.float64)
        s.engine.flush()
    assert s["lock"] is lock and "cannot serialize" in caplog.text
    assert "lock" in s.fast
    s.close()


def test_worker_directory_substitution(tmp_path):
    cfg = tmp_path / "tiers.yaml"
    cfg.write_text(
        "version: 1\n"
        "tiers:\n"
        "  - {name: host, kind: host, capacity: 4MiB}\n"
        "  - {name: disk, kind: file, capacity: 64MiB, paths: ['${SPILLWAY_WORKER_DIR}/disk']}\n"
    )
    w1, w2 = tmp_path / "worker-1", tmp_path / "worker-2"
    s1 = SpillwayStore(str(cfg), worker_local_directory=str(w1), log_interval=0)
    s2 = SpillwayStore(str(cfg), worker_local_directory=str(w2), log_interval=0)
    assert s1.engine.tiers[1]["paths"] == [f"{w1}/spillway/disk"]
    assert s2.engine.tiers[1]["paths"] == [f"{w2}/spillway/disk"]
    s1.close()
    s2.close()
    # Without a worker (plain use), a temporary directory stands in.
    s3 = SpillwayStore(str(cfg), log_interval=0)
    s3["k"] = 1
    assert s3["k"] == 1
    s3.close()


def test_per_worker_vars_and_cleanup(tmp_path, monkeypatch):
    # A node config whose scratch tier sits under ${SPILLWAY_DIR:-...}: each
    # worker gets its own subfolder, removed when the store closes.
    cfg = tmp_path / "node.yaml"
    cfg.write_text(
        "version: 1\n"
        "tiers:\n"
        "  - {name: host, kind: host, capacity: 4MiB}\n"
        "  - {name: scratch, kind: file, capacity: 64MiB, path: '${SPILLWAY_DIR:-/nonexistent}/scratch'}\n"
    )
    monkeypatch.setenv("SPILLWAY_DIR", str(tmp_path / "ssd"))
    s = SpillwayStore(str(cfg), worker_local_directory=str(tmp_path / "worker-abc"),
                      per_worker_vars=("SPILLWAY_WORKER_DIR", "SPILLWAY_DIR"), log_interval=0)
    assert s.engine.tiers[1]["paths"] == [f"{tmp_path}/ssd/worker-abc/scratch"]
    s["k"] = np.arange(1000)
    assert (tmp_path / "ssd" / "worker-abc").exists()
    s.close()
    assert not (tmp_path / "ssd" / "worker-abc").exists()
    assert (tmp_path / "ssd").exists()


def test_periodic_log_line(tmp_path, caplog):
    s = SpillwayStore(chain(tmp_path), log_interval=1e-9)
    with caplog.at_level(logging.INFO, logger="distributed.worker.spillway"):
        s["a"] = 1
        s["b"] = 2
    assert "spillway:" in caplog.text and "demotions" in caplog.text
    s.close()


def test_in_process_worker(tmp_path):
    # A real Worker in this process builds the store from (class, kwargs) and
    # passes its local directory.
    from distributed import Client, LocalCluster

    cfg = chain("${SPILLWAY_WORKER_DIR}", host="8MiB", file="256MiB")
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0",
                      local_directory=str(tmp_path), data=(SpillwayStore, {"config": cfg})) as cluster, \
            Client(cluster):
        import dask.array as da

        # 32 MiB of random data (da.ones would serialize to a few bytes a chunk).
        x = da.random.RandomState(0).random_sample((2048, 2048), chunks=(256, 256)).persist()
        assert np.isclose(float(x.sum().compute()), x.compute().sum())
        worker = next(iter(cluster.workers.values()))
        assert isinstance(worker.data, SpillwayStore)
        assert worker.data.engine.tiers[1]["paths"][0].startswith(str(tmp_path))
        assert worker.data.stats()["summary"]["demotions"] > 0
        del x
