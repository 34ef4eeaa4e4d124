"""The host tier yields to the process's resident memory (Engine.set_process_memory_limit):
what SpillwayStore's process_memory_limit and spillway.dask_preload use so that memory a Dask
worker holds outside the store shrinks what the store keeps in memory."""
import numpy as np
import pytest

pytest.importorskip("distributed", reason="python3-distributed is not installed")

from spillway import _spillway, dask_preload  # noqa: E402
from spillway.dask import SpillwayStore  # noqa: E402

from conftest import MiB, chain, fake_worker, settle  # noqa: E402


def resident_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def host_tier(store):
    return next(t for t in store.stats()["engine"]["tiers"] if t["kind"] == "host")


def test_a_limit_demotes_below_the_watermarks_and_zero_turns_it_off(tmp_path):
    with SpillwayStore(chain(tmp_path / "t", host="512MiB", file="1GiB"), log_interval=0) as s:
        base = resident_bytes()
        for i in range(32):
            s[f"x{i}"] = np.full(MiB // 8 * 2, i, dtype=np.float64)  # 2 MiB each, adopted: no copy
        s.engine.flush()
        assert host_tier(s)["used_bytes"] >= 60 * MiB
        assert s.stats()["summary"]["demotions"] == 0  # 64 MiB of 512: below the high watermark
        assert s.stats()["engine"]["process_memory_limit"] == 0

        s.set_process_memory_limit(base + 16 * MiB)
        s.engine.flush()  # the mover acts on the excess; flush waits for it
        st = s.stats()
        assert st["engine"]["process_memory_limit"] == base + 16 * MiB
        assert st["engine"]["process_resident_bytes"] > 0
        assert st["summary"]["demotions"] >= 20
        assert host_tier(s)["used_bytes"] <= 24 * MiB
        for i in range(32):
            assert (s[f"x{i}"] == i).all()

        s.set_process_memory_limit(0)
        s.engine.flush()
        before = s.stats()["summary"]["demotions"]
        for i in range(8):
            s[f"y{i}"] = np.full(MiB // 8, i, dtype=np.float64)
        s.engine.flush()
        assert s.stats()["summary"]["demotions"] == before
        with pytest.raises(ValueError, match="must be positive"):
            s.set_process_memory_limit(-1)


def test_the_store_takes_a_limit_at_construction(tmp_path):
    with SpillwayStore(chain(tmp_path / "t"), log_interval=0, process_memory_limit=3 << 30) as s:
        assert s.process_memory_limit == 3 << 30
        assert s.stats()["engine"]["process_memory_limit"] == 3 << 30


@pytest.mark.parametrize("limit, target, spill, want", [
    (1 << 30, 0.6, 0.7, int((1 << 30) * 0.6)),   # Dask's defaults: its target fraction
    (1 << 30, False, 0.7, int((1 << 30) * 0.7)),  # target off: the spill fraction
    (1 << 30, False, False, 0),                   # neither: no limit, as Dask would not spill
    (0, 0.6, 0.7, 0),                             # no memory limit
])
def test_the_preload_sets_the_limit_from_the_workers_thresholds(tmp_path, monkeypatch, limit, target, spill, want):
    monkeypatch.delenv("SPILLWAY_WORKER_INDEX", raising=False)
    cfg = tmp_path / "node.yaml"
    cfg.write_text("version: 1\ntiers:\n  - {name: host, kind: host, capacity: 64MiB}\n"
                   "  - {name: scratch, kind: file, capacity: 256MiB, path: '${SPILLWAY_WORKER_DIR}'}\n")
    worker = fake_worker("w-0", tmp_path / "worker", limit, memory_target_fraction=target,
                         memory_spill_fraction=spill)
    store = dask_preload.install(worker, config=str(cfg), log_interval=0)
    try:
        assert store.process_memory_limit == want
        assert store.stats()["engine"]["process_memory_limit"] == want
    finally:
        dask_preload.dask_teardown(worker)
        store.close()


def test_setitem_starts_demotions_and_a_spilled_read_waits_for_room(tmp_path):
    # SpillBuffer evicts inside __setitem__ and before it moves a value from slow to fast;
    # the store acts at the same points through Engine.relieve_memory instead of leaving the
    # limit to the mover's next 100 ms tick: __setitem__ starts the demotions, a read of a
    # spilled value waits until its bytes fit.
    with SpillwayStore(chain(tmp_path / "t", host="512MiB", file="1GiB"), log_interval=0) as s:
        for i in range(16):
            s[f"x{i}"] = np.full(MiB // 8 * 2, i, dtype=np.float64)  # 2 MiB each, adopted
        s.engine.flush()
        assert s.stats()["store"]["relieve_calls"] == 0  # no limit: never asked
        assert s.stats()["summary"]["demotions"] == 0
        s.set_process_memory_limit(resident_bytes() - 8 * MiB)
        s["y"] = np.full(MiB // 8 * 2, 99, dtype=np.float64)
        assert s.stats()["store"]["relieve_calls"] == 1
        s.engine.flush()
        assert s.stats()["summary"]["demotions"] >= 4  # the 8 MiB over the limit
        spilled = sorted(k for k in s.slow if k.startswith("x"))
        assert spilled
        key = spilled[0]
        # Values the read can push out, whatever the demotions above took (all of them where the
        # adopted arrays were released late: on a loaded machine); no limit meanwhile.
        s.set_process_memory_limit(0)
        for i in range(4):
            s[f"z{i}"] = np.full(MiB // 8 * 2, 100 + i, dtype=np.float64)
        s.engine.flush()
        assert settle(lambda: _spillway._pending_releases() == 0)
        # Setting a limit frees the idle I/O buffers the demotions left (else the read's check
        # above the limit might free them instead of demoting): set one out of reach first, so
        # that the resident set measured next is what the tiers hold. The process fits under the
        # new limit, so the mover has nothing to do on its own, but not with the 2 MiB about to
        # be read.
        s.set_process_memory_limit(1 << 50)
        s.set_process_memory_limit(resident_bytes() + MiB)
        before = s.stats()
        value = s[key]
        after = s.stats()
        assert (value == int(key[1:])).all()
        assert after["store"]["relieve_calls"] == before["store"]["relieve_calls"] + 1
        assert after["summary"]["demotions"] >= before["summary"]["demotions"] + 1  # before the read returned
        assert (s["y"] == 99).all()
        assert all((s[f"z{i}"] == 100 + i).all() for i in range(4))
