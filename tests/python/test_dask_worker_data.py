"""Worker.data overrides with SpillwayStore, adapted from distributed 2022.12's
distributed/tests/test_worker_memory.py.

The originals use distributed.utils_test.gen_cluster, whose leak checks fail
on any store that owns threads and is never closed by the Worker (2022.12's
Worker does not close its data); these run the same scenarios with plain
Scheduler/Worker/Nanny objects on asyncio. Adapted:
- test_worker_data_callable_local_directory_kwargs: (SpillwayStore, kwargs)
  gets worker_local_directory, and the tier folders land inside it;
- test_override_data_worker / test_override_data_nanny: an instance, and a
  Nanny's worker process;
- test_override_data_vs_memory_monitor: with process memory over the spill
  and pause thresholds, the monitor pauses the worker and never tries to
  evict from the store (no traceback), data stays a SpillwayStore;
- test_fail_to_pickle_execute_2: a result that cannot be pickled is kept in
  store.fast and the worker stays usable.
Not applicable: test_dict_data_if_no_spill_to_disk (the default store's
choice), test_manual_evict_proto (SpillwayStore deliberately offers no
evict(): the engine's watermarks decide what spills), the spill-threshold
tests (they test SpillBuffer's evict loop).
"""
import asyncio
import logging
import os

import pytest

pytest.importorskip("distributed", reason="python3-distributed is not installed")

import dask  # noqa: E402
from distributed import Client, Nanny, Scheduler, Worker, wait  # noqa: E402
from distributed.core import Status  # noqa: E402

from spillway.dask import SpillwayStore  # noqa: E402

from conftest import chain  # noqa: E402


def inc(x):
    return x + 1


def run(coro, timeout=60):
    return asyncio.run(asyncio.wait_for(coro, timeout))


def spec(tmp=None):
    return (SpillwayStore, {"config": chain("${SPILLWAY_WORKER_DIR}/disk", host="1MiB", file="256MiB"),
                            "log_interval": 0})


def test_data_callable_local_directory_kwargs(tmp_path):
    async def main():
        async with Scheduler(dashboard_address=":0") as s, \
                Worker(s.address, data=spec(), local_directory=str(tmp_path), dashboard_address=":0") as w:
            assert type(w.memory_manager.data) is SpillwayStore and w.data is w.state.data
            paths = w.data.engine.tiers[1]["paths"]
            assert paths[0].startswith(w.local_directory), (paths, w.local_directory)
            async with Client(s.address, asynchronous=True) as c:
                assert await c.submit(inc, 1) == 2
            w.data.close()

    run(main())


def test_override_data_instance(tmp_path):
    store = SpillwayStore(chain(tmp_path / "disk", host="1MiB", file="64MiB"), log_interval=0)

    async def main():
        async with Scheduler(dashboard_address=":0") as s, \
                Worker(s.address, data=store, dashboard_address=":0") as w:
            assert w.data is store
            async with Client(s.address, asynchronous=True) as c:
                x = c.submit(inc, 1, key="x")
                assert await x == 2
                assert "x" in store

    run(main())
    store.close()


def test_override_data_nanny(tmp_path):
    async def main():
        async with Scheduler(dashboard_address=":0") as s, \
                Nanny(s.address, data=spec(), local_directory=str(tmp_path), dashboard_address=":0",
                      nthreads=1), \
                Client(s.address, asynchronous=True) as c:
            kinds = await c.run(lambda dask_worker: type(dask_worker.data).__name__)
            assert list(kinds.values()) == ["SpillwayStore"]
            assert await c.submit(inc, 41) == 42

    run(main(), timeout=120)


class Big:
    def __sizeof__(self):
        return 8_100_000_000


def test_override_data_vs_memory_monitor(tmp_path):
    async def main():
        with dask.config.set({"distributed.worker.memory.monitor-interval": "10ms"}):
            async with Scheduler(dashboard_address=":0") as s, \
                    Worker(s.address, data=spec(), memory_limit="10 GB", local_directory=str(tmp_path),
                           dashboard_address=":0") as a, \
                    Client(s.address, asynchronous=True) as c:
                a.monitor.get_process_memory = lambda: 8_100_000_000 if a.data else 0
                assert "memory_monitor" in a.periodic_callbacks
                logs = logging.getLogger("distributed.utils")
                records = []
                handler = logging.Handler()
                handler.emit = records.append
                logs.addHandler(handler)
                try:
                    x = c.submit(Big)
                    await wait(x)
                    while a.status != Status.paused:
                        await asyncio.sleep(0.01)
                    await asyncio.sleep(0.05)
                finally:
                    logs.removeHandler(handler)
                assert not any("Traceback" in (r.exc_text or "") or r.exc_info for r in records)
                assert type(a.data) is SpillwayStore and set(a.data) == {x.key}
                # Dask's managed memory is the store's sizeof figure.
                assert a.state.nbytes == a.data.fast.total_weight >= 8_100_000_000
                assert a.data.spilled_total[0] == 0
                a.data.close()

    run(main())


class FailToPickle:
    def __init__(self, *, reported_size=0):
        self.reported_size = int(reported_size)

    def __getstate__(self):
        raise RuntimeError("no pickling")

    def __sizeof__(self):
        return self.reported_size


def test_fail_to_pickle_execute(tmp_path):
    async def main():
        async with Scheduler(dashboard_address=":0") as s, \
                Worker(s.address, data=spec(), local_directory=str(tmp_path), dashboard_address=":0") as a, \
                Client(s.address, asynchronous=True) as c:
            x = c.submit(FailToPickle, reported_size=256, key="x")
            await wait(x)
            assert x.status == "finished"
            assert set(a.data.fast) == {"x"} and not a.data.slow
            y = c.submit(lambda: "y" * 256, key="y")
            await wait(y)
            assert set(a.data) == {"x", "y"}
            assert await c.gather(c.map(inc, range(10))) == list(range(1, 11))
            a.data.close()

    run(main())
