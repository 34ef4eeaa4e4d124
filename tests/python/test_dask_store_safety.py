"""SpillwayStore keeps the engine's promises: distinct keys never share engine objects,
a failed write leaves the old value, equal keys are one object, per-worker values are
substituted into parsed config values, and a bad config stops a Dask worker."""
import os
import subprocess
import sys
import threading
import warnings

import numpy as np
import pytest

pytest.importorskip("distributed")

import spillway  # noqa: E402
from spillway.dask import SpillwayStore  # noqa: E402

from conftest import MiB, chain, faulty_store  # noqa: E402

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings, strategies as st  # noqa: E402


def engine_objects(store):
    return set(store.engine.keys())


def owned_objects(store):
    """The engine keys the store's entries refer to (a device value's are its table's)."""
    return {k for e in store._keys.values() for k in e.engine_keys()}


def assert_no_orphans(store):
    store.engine.flush()
    assert engine_objects(store) == owned_objects(store)


@pytest.fixture
def store(tmp_path):
    s = SpillwayStore(chain(tmp_path / "disk", host="4MiB", file="256MiB"), log_interval=0)
    yield s
    s.close()


# ---- keys --------------------------------------------------------------------------

def test_a_key_that_spells_another_keys_frame_is_a_key_of_its_own(store):
    big = np.arange(64 * 1024, dtype=np.int64)  # 512 KiB: its frame is an engine object of its own
    other = np.full(64 * 1024, 7, dtype=np.int64)
    store["a"] = big
    store["a\x00f0"] = other  # the old encoding's name of frame 0 of "a"
    store["a.f0"] = b"dotted"
    del store._cache["a"], store._cache["a\x00f0"]  # read from the engine, not the weak cache
    assert np.array_equal(store["a"], big)
    assert np.array_equal(store["a\x00f0"], other)
    del store["a"]
    assert np.array_equal(store["a\x00f0"], other)
    assert store["a.f0"] == b"dotted"
    assert_no_orphans(store)


tricky_keys = st.one_of(
    st.text(alphabet=st.sampled_from("a\x00f0.hv:"), max_size=6),
    st.binary(max_size=6),
    st.tuples(st.sampled_from(["x", "y"]), st.one_of(st.integers(0, 3), st.floats(0, 3), st.booleans())),
)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.lists(st.tuples(tricky_keys, st.sampled_from([0, 1, 70_000])), max_size=12))
def test_distinct_keys_never_share_an_engine_object(tmp_path_factory, items):
    s = SpillwayStore(chain(tmp_path_factory.mktemp("enc"), host="8MiB"), log_interval=0, weak_cache=False)
    try:
        model = {}
        for key, size in items:
            value = np.full(size // 8, hash(key) & 0xFF, dtype=np.uint8) if size else bytes([len(model) % 256])
            s[key] = value
            model[key] = value
        owners = {}
        for key, entry in s._keys.items():
            for ekey in entry.engine_keys():
                assert ekey not in owners, f"{key!r} and {owners[ekey]!r} share {ekey!r}"
                owners[ekey] = key
        assert set(s) == set(model)
        for key, value in model.items():
            got = s[key]
            assert (np.array_equal(got, value) if isinstance(value, np.ndarray) else got == value)
        assert_no_orphans(s)
    finally:
        s.close()


def test_equal_keys_that_pickle_differently_are_one_object(store):
    for i in range(200):
        store[(i, 1)] = b"one"
        store[(i, 1.0)] = b"float"
        store[(i, True)] = b"bool"
    assert len(store) == 200
    assert store[(5, 1)] == b"bool"
    assert len(engine_objects(store)) == 200
    for i in range(200):
        del store[(i, 1.0)]
    assert len(store) == 0
    assert_no_orphans(store)
    assert engine_objects(store) == set()


def test_keys_longer_than_the_engine_takes_are_stored(store):
    long = "k" * 70_000  # over the engine's 64 KiB key limit: user keys never reach the engine
    store[long] = np.ones(32 * 1024)
    store[long] = np.zeros(32 * 1024)  # an overwrite
    del store._cache[long]
    assert np.array_equal(store[long], np.zeros(32 * 1024))
    assert_no_orphans(store)


def test_an_unhashable_key_is_refused_before_anything_changes(store):
    with pytest.raises(TypeError):
        store[["a", "list"]] = b"x"
    assert len(store) == 0 and engine_objects(store) == set()


# ---- failed writes ------------------------------------------------------------------

@pytest.mark.parametrize("value", [b"x" * (3 * MiB), np.arange(3 * MiB // 8)], ids=["bytes", "adopted frames"])
def test_a_failed_overwrite_keeps_the_old_value(tmp_path, value):
    s = faulty_store(tmp_path / "disk", weak_cache=False)
    try:
        old = np.full(3 * MiB // 8, 9.0)  # larger than the host tier: written to the file tier
        s["k"] = old
        s.engine.set_faults("eio_write=1")
        with pytest.raises(OSError):
            s["k"] = value
        s.engine.set_faults("")
        assert "k" in s and len(s) == 1
        assert np.array_equal(s["k"], old)
        assert_no_orphans(s)
        s["k"] = value  # the disk is back: the overwrite goes through
        got = s["k"]
        assert (np.array_equal(got, value) if isinstance(value, np.ndarray) else bytes(got) == value)
        assert_no_orphans(s)
    finally:
        s.close()


def test_a_failed_first_write_leaves_no_key_and_no_object(tmp_path):
    s = faulty_store(tmp_path / "disk")
    try:
        s.engine.set_faults("eio_write=1")
        with pytest.raises(OSError):
            s["new"] = b"y" * (3 * MiB)
        s.engine.set_faults("")
        assert "new" not in s
        assert_no_orphans(s)
    finally:
        s.close()


# ---- configuration ------------------------------------------------------------------

def test_a_store_refuses_a_persistent_tier(tmp_path):
    with pytest.raises(ValueError, match="persistent"):
        SpillwayStore(chain(tmp_path / "disk", persistent=True))
    # Nothing left open: the same directory opens again at once.
    SpillwayStore(chain(tmp_path / "disk2")).close()
    e = spillway.Engine(chain(tmp_path / "disk", persistent=True))
    e.close()


@pytest.mark.parametrize("name", ["w #1", 'w"x: {y: 1}', "w\nz"], ids=["hash", "quote", "newline"])
def test_per_worker_values_are_substituted_into_parsed_values(tmp_path, name):
    wdir = tmp_path / name
    wdir.mkdir()
    cfg = tmp_path / "node.yaml"
    cfg.write_text("version: 1\ntiers:\n  - {name: host, kind: host, capacity: 4MiB}\n"
                   "  - name: disk\n    kind: file\n    capacity: 64MiB\n    paths:\n"
                   "      - ${SPILLWAY_WORKER_DIR}/disk\n")
    with SpillwayStore(str(cfg), worker_local_directory=str(wdir), log_interval=0) as s:
        assert s.engine.tiers[1]["paths"] == [os.path.join(str(wdir), "spillway", "disk")]
        assert [t["name"] for t in s.engine.tiers] == ["host", "disk"]


def test_a_config_path_that_is_a_fifo_fails_at_once(tmp_path):
    fifo = tmp_path / "tiers.yaml"
    os.mkfifo(fifo)
    outcome = []

    def open_store():
        try:
            SpillwayStore(str(fifo), worker_local_directory=str(tmp_path))
        except Exception as e:  # noqa: BLE001
            outcome.append(e)

    t = threading.Thread(target=open_store, daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive(), "opening a store on a FIFO hung"
    assert outcome and "regular file" in str(outcome[0])


def test_scratch_tiers_on_a_fixed_path_get_a_folder_per_worker(tmp_path):
    scratch = tmp_path / "scratch"
    cfg = chain(scratch, host="4MiB")
    a = SpillwayStore(cfg, worker_local_directory=str(tmp_path / "worker-a"), log_interval=0)
    b = SpillwayStore(cfg, worker_local_directory=str(tmp_path / "worker-b"), log_interval=0)
    try:
        assert a.engine.tiers[1]["paths"] == [str(scratch / "worker-a")]
        assert b.engine.tiers[1]["paths"] == [str(scratch / "worker-b")]
        a["x"], b["x"] = b"a" * (2 * MiB), b"b" * (2 * MiB)
        assert bytes(a["x"])[:1] == b"a" and bytes(b["x"])[:1] == b"b"
    finally:
        a.close()
        b.close()
    assert sorted(os.listdir(scratch)) == []  # each worker's folder and lock went with it


def test_two_stores_on_one_scratch_directory_name_it(tmp_path):
    cfg = chain(tmp_path / "shared")
    with SpillwayStore(cfg, log_interval=0):
        with pytest.raises(spillway.BusyError, match=str(tmp_path / "shared")):
            SpillwayStore(cfg, log_interval=0)


def test_the_readme_local_cluster_example_runs_two_workers(tmp_path):
    from distributed import Client, LocalCluster

    cfg = tmp_path / "tiers.yaml"
    scratch = tmp_path / "scratch"
    cfg.write_text(f"version: 1\ntiers:\n  - {{name: host, kind: host, capacity: 8MiB}}\n"
                   f"  - {{name: disk, kind: file, capacity: 256MiB, paths: ['{scratch}']}}\n")
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0",
                      local_directory=str(tmp_path / "dask"), data=(SpillwayStore, {"config": str(cfg)})) as cluster, \
            Client(cluster) as client:
        paths = client.run(lambda dask_worker: dask_worker.data.engine.tiers[1]["paths"][0])
        assert len(set(paths.values())) == 2
        assert all(os.path.dirname(p) == str(scratch) for p in paths.values())
        assert client.submit(sum, [1, 2, 3]).result() == 6


def test_a_bad_config_stops_a_dask_worker_with_the_validators_message(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\ntiers:\n  - {name: host, kind: host, capacty: 16MiB}\n")
    persistent = tmp_path / "persistent.yaml"
    persistent.write_text(f"version: 1\ntiers:\n  - {{name: host, kind: host, capacity: 16MiB}}\n"
                          f"  - {{name: d, kind: file, capacity: 64MiB, persistent: true, paths: ['{tmp_path}/p']}}\n")
    for config, expected in ((bad, "did you mean 'capacity'"), (persistent, "is persistent")):
        # No scheduler listens at port 1: a worker that got past its options would retry for 30 s.
        r = subprocess.run([sys.executable, "-m", "distributed.cli.dask_worker", "tcp://127.0.0.1:1",
                            "--preload", "spillway.dask_preload", "--spillway-config", str(config)],
                           capture_output=True, text=True, timeout=25)
        assert r.returncode == 2, r.stderr[-2000:]
        assert expected in r.stderr


# ---- friction -------------------------------------------------------------------------

def test_the_store_is_reachable_from_the_package_and_typed():
    import spillway.dask

    assert spillway.SpillwayStore is spillway.dask.SpillwayStore
    assert "SpillwayStore" in dir(spillway)
    with pytest.raises(AttributeError):
        spillway.NoSuchThing  # noqa: B018
    pkg = os.path.dirname(spillway.__file__)
    assert os.path.exists(os.path.join(pkg, "py.typed"))
    import ast

    stub = ast.parse(open(os.path.join(pkg, "_spillway.pyi")).read())
    declared = {n.name for n in stub.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    declared |= {t.id for n in stub.body if isinstance(n, (ast.AnnAssign, ast.Assign))
                 for t in ([n.target] if isinstance(n, ast.AnnAssign) else n.targets) if isinstance(t, ast.Name)}
    public = {n for n in dir(spillway._spillway) if not n.startswith("__")}
    assert public <= declared, f"missing from _spillway.pyi: {sorted(public - declared)}"
    engine_stub = next(n for n in stub.body if isinstance(n, ast.ClassDef) and n.name == "Engine")
    methods = {n.name for n in engine_stub.body if isinstance(n, ast.FunctionDef)}
    engine_public = {n for n in dir(spillway.Engine) if not n.startswith("_")}
    assert engine_public <= methods, f"Engine members missing from the stub: {sorted(engine_public - methods)}"


def test_worker_metrics_are_labelled_by_the_worker_not_the_pid(store):
    pytest.importorskip("prometheus_client")
    from spillway._dask_metrics import PrometheusCollector

    samples = [s for fam in PrometheusCollector(store, "w-3").collect() for s in fam.samples]
    assert samples
    assert all(s.labels.get("worker") == "w-3" for s in samples)
    assert not any(s.labels.get("engine", "").split(".")[0] == str(os.getpid()) for s in samples)


def test_a_worker_with_the_store_raises_no_future_warning(tmp_path):
    import asyncio

    from distributed import Scheduler, Worker

    from spillway.dask_preload import install

    cfg = tmp_path / "t.yaml"
    cfg.write_text("version: 1\ntiers:\n  - {name: host, kind: host, capacity: 16MiB}\n")

    async def run():
        async with Scheduler(port=0, dashboard_address=":0") as s:
            async with Worker(s.address, dashboard_address=":0", local_directory=str(tmp_path)) as w:
                with warnings.catch_warnings(record=True) as seen:
                    warnings.simplefilter("always")
                    install(w, config=str(cfg), log_interval=0)
                return [str(x.message) for x in seen if issubclass(x.category, FutureWarning)]

    assert asyncio.run(run()) == []
