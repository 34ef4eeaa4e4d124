"""The read-ahead hint for a task's inputs.

SpillwayStore.prefetch brings values held in a file tier up into the host
tier in the background; spillway.dask.ReadAhead, the worker plugin the preload
installs, calls it with the inputs of the next tasks in the worker's ready
queue each time a task starts executing.
"""
import operator
import time
import types

import numpy as np
import pytest

pytest.importorskip("distributed", reason="python3-distributed is not installed")

from distributed.collections import HeapSet  # noqa: E402

from spillway import dask_preload  # noqa: E402
from spillway.dask import ReadAhead, SpillwayStore, next_ready  # noqa: E402

from conftest import chain, fake_worker  # noqa: E402

VALUE = 256 * 1024


@pytest.fixture
def store(tmp_path):
    cfg = chain(tmp_path / "t", host="4MiB", file="256MiB")
    cfg["policy"] = {"promote_on_read": False}  # the Dask benchmark's setting: only a prefetch promotes
    s = SpillwayStore(cfg, log_interval=0)
    for i in range(40):
        s[f"k{i}"] = np.full(VALUE // 8, i, dtype=np.int64)
    s.engine.flush()
    yield s
    s.close()


def nbytes(s, *keys):
    """The store's bytes of these values (Dask's header and the frames): what prefetch counts."""
    return sum(s._keys[k].nbytes for k in keys)


def spilled_in_order(s):
    return sorted(s.slow, key=lambda k: int(k[1:]))


def eventually_in_memory(s, keys, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        fast = set(s.fast)
        if all(k in fast for k in keys):
            return True
        time.sleep(0.01)
    return False


def test_prefetch_brings_spilled_values_up(store):
    keys = spilled_in_order(store)[:3]
    assert len(keys) == 3
    assert VALUE <= nbytes(store, keys[0]) < VALUE + 4096
    assert store.prefetch(keys) == nbytes(store, *keys)
    assert eventually_in_memory(store, keys)
    for k in keys:
        assert int(store[k][0]) == int(k[1:])
    st = store.stats()["store"]
    # two engine objects a value: its header and its one large frame (adopted as an object of its own)
    assert st["prefetch_bytes"] == nbytes(store, *keys) and st["prefetch_hints"] == 2 * 3


def test_prefetch_skips_what_needs_no_read_and_keeps_within_its_budget(store):
    in_memory = [k for k in store if k not in set(store.slow)]
    assert in_memory
    assert store.prefetch(in_memory) == 0  # nothing to read
    assert store.prefetch(["no such key"]) == 0
    a, b, c = spilled_in_order(store)[:3]
    two = nbytes(store, a, b)
    assert store.prefetch([a, b, c], max_bytes=two) == two  # c would pass the budget
    assert store.prefetch([c], max_bytes=nbytes(store, c) - 1) == 0  # a value over the budget is not read ahead
    assert eventually_in_memory(store, [a, b])
    assert c in set(store.slow)


class Fake:
    """The attributes of a distributed TaskState that ReadAhead reads; hashed by identity, as TaskState."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


def _task(key, priority, deps):
    return Fake(key=key, priority=(priority,), dependencies=deps)


def _dep(key, state="memory"):
    return Fake(key=key, state=state)


def test_read_ahead_hints_the_inputs_of_the_next_ready_tasks_once(store):
    spilled = spilled_in_order(store)
    state = types.SimpleNamespace(ready=HeapSet(key=operator.attrgetter("priority")))
    worker = types.SimpleNamespace(state=state, nthreads=1)  # 2 tasks ahead
    plugin = ReadAhead(worker, store, max_bytes=nbytes(store, *spilled[:4]) - 1)
    t1 = _task("t1", 1, {_dep(spilled[0]), _dep(spilled[1])})
    t2 = _task("t2", 2, {_dep(spilled[2]), _dep("fetching elsewhere", state="fetch")})
    t3 = _task("t3", 3, {_dep(spilled[3])})  # third in line: beyond `tasks`
    for t in (t1, t2, t3):
        state.ready.add(t)
    plugin.transition("t0", "ready", "executing")
    three = nbytes(store, *spilled[:3])
    assert store.stats()["store"]["prefetch_bytes"] == three
    assert eventually_in_memory(store, spilled[:3])
    assert spilled[3] in set(store.slow)
    plugin.transition("t0", "executing", "memory")  # not a start: nothing
    plugin.transition("t9", "ready", "executing")  # t1, t2 hinted already
    assert store.stats()["store"]["prefetch_bytes"] == three
    assert state.ready.pop() is t1  # t1 starts (the worker pops it): t3 comes within reach, and t2's bytes leave room
    plugin.transition("t1", "ready", "executing")
    assert store.stats()["store"]["prefetch_bytes"] == three + nbytes(store, spilled[3])
    assert eventually_in_memory(store, [spilled[3]])


def test_next_ready_is_the_heaps_order_without_sorting_all_of_it():
    ready = HeapSet(key=operator.attrgetter("priority"))
    rng = np.random.default_rng(3)
    tasks = [_task(f"t{i}", int(p), set()) for i, p in enumerate(rng.permutation(50_000))]
    for t in tasks:
        ready.add(t)
    want = sorted(tasks, key=lambda t: t.priority)
    for n in (1, 2, 4, 6):
        assert [t.key for t in next_ready(ready, n)] == [t.key for t in want[:n]]
    ready.pop()
    ready.discard(want[1])  # left the set: its heap entry stays until popped
    got = next_ready(ready, 4)  # the heap's 4 smallest entries: want[1]'s (stale), want[2..4]
    assert [t.key for t in got] == [t.key for t in want[2:5]]
    assert next_ready(HeapSet(key=operator.attrgetter("priority")), 3) == []


def test_read_ahead_never_fails_the_transition(store):
    state = types.SimpleNamespace(ready=HeapSet(key=operator.attrgetter("priority")))
    state.ready.add(Fake(key="bad", priority=(1,), dependencies=None))  # not iterable
    plugin = ReadAhead(types.SimpleNamespace(state=state), store)
    plugin.transition("t0", "ready", "executing")
    assert plugin.errors == 1


@pytest.mark.parametrize("option, installed, budget", [
    (None, True, 16 << 20),  # auto: a quarter of the 64 MiB host tier
    (8 << 20, True, 8 << 20),
    (0, False, None),
])
def test_the_preload_installs_the_read_ahead(tmp_path, monkeypatch, option, installed, budget):
    monkeypatch.delenv("SPILLWAY_WORKER_INDEX", raising=False)
    cfg = tmp_path / "node.yaml"
    cfg.write_text("version: 1\ntiers:\n  - {name: host, kind: host, capacity: 64MiB}\n"
                   "  - {name: scratch, kind: file, capacity: 256MiB, path: '${SPILLWAY_WORKER_DIR}'}\n")
    worker = fake_worker("w-0", tmp_path / "worker")
    store = dask_preload.install(worker, config=str(cfg), log_interval=0, read_ahead=option)
    try:
        plugin = worker.plugins.get(ReadAhead.name)
        assert (plugin is not None) == installed
        if installed:
            assert plugin.store is store and plugin.max_bytes == budget
    finally:
        dask_preload.dask_teardown(worker)
        store.close()


def test_the_read_ahead_option_parses_sizes():
    import click

    assert dask_preload._read_ahead_bytes("auto") is None
    assert dask_preload._read_ahead_bytes("64MiB") == 64 << 20
    assert dask_preload._read_ahead_bytes("0") == 0
    with pytest.raises(click.BadParameter, match="not a size"):
        dask_preload._read_ahead_bytes("lots")
