"""Values move as live objects until they must become bytes.

A value without buffers (a list, a dict, a pandas frame, any object) goes to
the engine live (Engine.put_external): reads while it is in the host tier
return the very object, it is serialized only when the engine demotes it to
the file tier (once per demotion, counted here by the serializer's calls), and
it round-trips from there, deserialized once and held live again.
"""
import gc
import logging
import threading

import numpy as np
import pytest

pytest.importorskip("distributed", reason="python3-distributed is not installed")
pd = pytest.importorskip("pandas", reason="python3-pandas is not installed")

from dask.sizeof import sizeof  # noqa: E402

from spillway.dask import SpillwayStore  # noqa: E402
import spillway.dask as sdask  # noqa: E402

from conftest import MiB, chain, settle  # noqa: E402


class Counted:
    """Reports a chosen sizeof; counts how often it is pickled (serialized)."""

    pickles = 0
    lock = threading.Lock()

    def __init__(self, size, tag):
        self.size = size
        self.tag = tag

    def __sizeof__(self):
        return self.size

    def __reduce__(self):
        with Counted.lock:
            Counted.pickles += 1
        return (Counted, (self.size, self.tag))


@pytest.fixture
def store(tmp_path):
    s = SpillwayStore(chain(tmp_path / "t", host="1MiB", file="256MiB"), log_interval=0)
    yield s
    s.close()


def lazy(s):
    return s.stats()["store"]


def test_live_value_is_the_same_object_and_never_serialized_in_memory(store):
    Counted.pickles = 0
    values = {"list": [1, 2, {"x": "y"}], "dict": {"a": list(range(10))}, "obj": Counted(1000, "o"),
              "frame": pd.DataFrame({"a": np.arange(100), "b": ["s"] * 100})}
    for k, v in values.items():
        store[k] = v
    store.engine.flush()
    for k, v in values.items():
        assert store[k] is v, k  # the live object, not a deserialized copy
    st = lazy(store)
    assert st["lazy_puts"] == 4 and st["lazy_serializations"] == 0 and Counted.pickles == 0
    assert st["put_bytes"] == 0  # nothing serialized by __setitem__
    assert set(store.fast) == set(values) and not store.slow
    assert store.fast.total_weight == sum(store.fast.weights.values()) > 0
    # held by the engine itself: no weak cache needed (lists and dicts are not weakly referenceable)
    lst = values.pop("list")
    del values
    gc.collect()
    assert store["list"] is lst and store["dict"]["a"] == list(range(10))


def test_serialized_only_when_demoted_and_round_trips(store):
    Counted.pickles = 0
    n = 40
    for i in range(n):  # 40 x 64 KiB of sizeof into a 1 MiB host tier
        store[f"k{i}"] = Counted(64 * 1024, i)
    store.engine.flush()
    spilled = set(store.slow)
    assert spilled and len(spilled) < n
    st = lazy(store)
    # exactly the demoted values were serialized, once each
    assert st["lazy_serializations"] == Counted.pickles == len(spilled)
    assert st["lazy_serialize_failures"] == 0
    assert store.spilled_total[0] == sizeof(Counted(64 * 1024, 0)) * len(spilled)  # Dask's sizeof, as SpillBuffer
    gc.collect()
    k = sorted(spilled, key=lambda x: int(x[1:]))[0]
    v = store[k]  # read back: deserialized once; the weak cache serves it while it lives
    assert isinstance(v, Counted) and v.tag == int(k[1:])
    assert store[k] is v and lazy(store)["relived"] == 0  # (promote_on_read may move its bytes up)
    for key in list(store):  # every value round-trips, wherever it is
        assert store[key].tag == int(key[1:])
    assert lazy(store)["lazy_serializations"] == len(spilled)  # reads wrote nothing


def test_relive_hands_a_value_read_back_to_the_engine_live(tmp_path):
    s = SpillwayStore(chain(tmp_path, host="1MiB", file="256MiB"), log_interval=0, relive=True)
    for i in range(40):
        s[f"k{i}"] = Counted(64 * 1024, i)
    s.engine.flush()
    spilled = set(s.slow)
    assert spilled
    gc.collect()
    k = next(iter(spilled))
    v = s[k]  # read back: deserialized once, held live again (SpillBuffer's move to fast)
    assert lazy(s)["relived"] == 1 and s[k] is v and s.engine.get_external(s._keys[k].ekey) is v
    s.engine.flush()
    assert k not in s.slow or lazy(s)["lazy_serializations"] > len(spilled)  # live again, or demoted again
    s.close()


def test_frames_spill_and_come_back(tmp_path):
    s = SpillwayStore(chain(tmp_path, host="2MiB", file="256MiB"), log_interval=0)
    frames = {f"f{i}": pd.DataFrame({"a": np.arange(20_000) + i, "s": [str(i)] * 20_000}) for i in range(12)}
    for k, f in frames.items():
        s[k] = f.copy()
    s.engine.flush()
    assert s.slow and lazy(s)["lazy_serializations"] == len(s.slow)
    gc.collect()
    for k, f in frames.items():
        pd.testing.assert_frame_equal(s[k], f)
    s.close()


def test_value_that_fails_to_serialize_stays_in_memory(store, caplog):
    lock = threading.Lock()  # Dask cannot serialize a lock
    with caplog.at_level(logging.WARNING, logger="distributed.worker.spillway"):
        store["lock"] = lock
        for i in range(30):
            store[f"k{i}"] = Counted(64 * 1024, i)
        store.engine.flush()
    assert "cannot serialize" in caplog.text
    assert store["lock"] is lock and "lock" in store.fast
    assert lazy(store)["lazy_serialize_failures"] == 1  # not retried
    assert store.slow  # the others spilled past it
    del store["lock"]
    assert "lock" not in store


def test_release_and_overwrite_of_live_and_spilled_values(store):
    for i in range(40):
        store[f"k{i}"] = Counted(64 * 1024, i)
    store.engine.flush()
    spilled, live = set(store.slow), set(store.fast)
    assert spilled and live
    # A demoted value's last reference is dropped by the engine's BufferReleaser thread, which may
    # still be on its way after flush returns; until then the weak cache serves it, and pop returns it.
    assert settle(lambda: all(store._cache.get(k) is None for k in spilled))
    a = next(iter(live))
    v = store[a]
    assert store.pop(a, None) is v  # live: returned without a read
    b = next(iter(spilled))
    before = store.engine.stats()["gets"]
    assert store.pop(b, None) is None  # spilled: released unread
    assert store.engine.stats()["gets"] == before
    c = next(iter(live - {a}))
    store[c] = [1, 2, 3]
    assert store[c] == [1, 2, 3]
    d = next(iter(spilled - {b}))
    store[d] = np.arange(10)  # a buffer value replaces a spilled live one
    np.testing.assert_array_equal(store[d], np.arange(10))
    assert a not in store and b not in store


def test_eager_store_still_serializes_at_setitem(tmp_path):
    s = SpillwayStore(chain(tmp_path, host="1MiB", file="64MiB"), log_interval=0, lazy=False)
    Counted.pickles = 0
    x = Counted(100, 1)
    s["x"] = x
    assert Counted.pickles == 1 and lazy(s)["lazy_puts"] == 0
    assert s["x"] is x  # the weak cache
    s.close()


def test_threads_put_and_read_while_the_engine_spills(store):
    # Writers wait inside the engine for room (GIL released) while the
    # materializer needs the GIL to serialize what it demotes.
    errors = []

    def work(t):
        try:
            for i in range(60):
                k = f"t{t}-{i}"
                store[k] = Counted(32 * 1024, i)
                assert store[k].tag == i
                if i % 3 == 0:
                    del store[k]
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads) and not errors
    store.engine.flush()
    assert store.slow
    for k in store:
        assert store[k].tag == int(k.split("-")[1])


def test_close_with_values_live_and_materializer_idle(tmp_path):
    s = SpillwayStore(chain(tmp_path, host="1MiB", file="64MiB"), log_interval=0)
    for i in range(40):
        s[f"k{i}"] = Counted(64 * 1024, i)
    s.close()  # while the mover may still be demoting: returns, nothing left behind
    assert s.engine.closed and len(s) == 0
    assert sdask.SpillwayStore is SpillwayStore
