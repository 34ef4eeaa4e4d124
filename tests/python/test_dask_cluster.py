"""A Dask LocalCluster of 2 worker processes, each keeping its data in a
SpillwayStore: a 64 MiB host tier over a file tier in the worker's own
directory. A dask.array and a dask.dataframe workload, each with a working set
of at least 4x the two host tiers together, must compute the same results as
NumPy/pandas, and the stores' statistics must show demotions and promotions."""
import numpy as np
import pytest

pytest.importorskip("distributed", reason="python3-distributed is not installed")
pytest.importorskip("dask.dataframe", reason="python3-dask with pandas is needed")
pd = pytest.importorskip("pandas", reason="python3-pandas is not installed")

import dask  # noqa: E402
import dask.array as da  # noqa: E402
import dask.dataframe as dd  # noqa: E402
from distributed import Client, LocalCluster, wait  # noqa: E402

from spillway.dask import SpillwayStore  # noqa: E402

MiB = 1 << 20
HOST_TIER = 64 * MiB
WORKERS = 2

CONFIG = """\
# Test chain: a small host tier over a file tier in each worker's directory.
version: 1
defaults:
  watermarks: {high: 0.90, low: 0.75}
tiers:
  - name: host
    kind: host
    capacity: 64MiB
  - name: disk
    kind: file
    capacity: 8GiB
    paths: ["${SPILLWAY_WORKER_DIR}/disk"]
"""


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    root = tmp_path_factory.mktemp("cluster")
    cfg = root / "tiers.yaml"
    cfg.write_text(CONFIG)
    with dask.config.set({"distributed.worker.memory.pause": 0.95}), LocalCluster(
        n_workers=WORKERS,
        threads_per_worker=1,
        processes=True,
        memory_limit="2GiB",
        dashboard_address=":0",
        local_directory=str(root),
        data=(SpillwayStore, {"config": str(cfg), "log_interval": 5}),
    ) as cluster, Client(cluster) as c:
        yield c


def store_summaries(client):
    return client.run(lambda dask_worker: (type(dask_worker.data).__name__,
                                           dask_worker.data.engine.tiers[1]["paths"][0],
                                           dask_worker.data.stats()["summary"]))


def reset_counters(client):
    return {w: s for w, (_, _, s) in store_summaries(client).items()}


def assert_spilled_both_ways(client, before):
    after = store_summaries(client)
    assert len(after) == WORKERS
    assert {name for name, _, _ in after.values()} == {"SpillwayStore"}
    assert len({path for _, path, _ in after.values()}) == WORKERS, "workers must not share a file tier directory"
    for w, (_, _, s) in after.items():
        demoted = s["demotions"] - before[w]["demotions"]
        promoted = s["promotions"] - before[w]["promotions"]
        assert demoted > 0, f"worker {w}: no demotions ({s})"
        assert promoted > 0, f"worker {w}: no promotions ({s})"


def test_array_workload(client):
    before = reset_counters(client)
    n, chunk = 8192, 1024  # 512 MiB of float64 = 4x the two 64 MiB host tiers
    x = da.random.RandomState(42).random_sample((n, n), chunks=(chunk, chunk)).persist()
    wait(x)
    assert x.nbytes >= 4 * WORKERS * HOST_TIER
    total, colsum, rowmax = dask.compute(x.sum(), (x + x.T).sum(axis=0), x.max(axis=1))
    xn = x.compute()  # every chunk read back again
    np.testing.assert_allclose(total, xn.sum(), rtol=1e-9)
    np.testing.assert_allclose(colsum, (xn + xn.T).sum(axis=0), rtol=1e-9)
    np.testing.assert_array_equal(rowmax, xn.max(axis=1))
    del x, xn
    assert_spilled_both_ways(client, before)


def make_partition(i, rows):
    rng = np.random.default_rng(1000 + i)
    return pd.DataFrame({
        "key": rng.integers(0, 64, rows),
        "x": rng.random(rows),
        "y": rng.standard_normal(rows),
        "z": rng.integers(0, 1 << 40, rows),
    })


def test_dataframe_workload(client):
    before = reset_counters(client)
    parts, rows = 32, 560_000  # 32 bytes a row: 547 MiB >= 4x the host tiers
    meta = make_partition(0, 0)
    ddf = dd.from_delayed([dask.delayed(make_partition)(i, rows) for i in range(parts)], meta=meta).persist()
    wait(ddf)
    assert parts * rows * 32 >= 4 * WORKERS * HOST_TIER
    grouped = ddf.groupby("key").agg({"x": "sum", "y": "mean", "z": "max"})
    positive = ddf[ddf.y > 0].x.mean()
    got_grouped, got_positive, got_len = dask.compute(grouped, positive, ddf.shape[0])

    # The same from pandas, one partition at a time.
    sums, counts, ysum, zmax, pos_sum, pos_n = None, None, None, None, 0.0, 0
    for i in range(parts):
        p = make_partition(i, rows)
        g = p.groupby("key")
        sums = g.x.sum() if sums is None else sums.add(g.x.sum(), fill_value=0)
        counts = g.y.count() if counts is None else counts.add(g.y.count(), fill_value=0)
        ysum = g.y.sum() if ysum is None else ysum.add(g.y.sum(), fill_value=0)
        zmax = g.z.max() if zmax is None else np.maximum(zmax, g.z.max())
        pos_sum += p.x[p.y > 0].sum()
        pos_n += int((p.y > 0).sum())
    got_grouped = got_grouped.sort_index()
    np.testing.assert_allclose(got_grouped.x.values, sums.sort_index().values, rtol=1e-9)
    np.testing.assert_allclose(got_grouped.y.values, (ysum / counts).sort_index().values, rtol=1e-9)
    np.testing.assert_array_equal(got_grouped.z.values, zmax.sort_index().values)
    np.testing.assert_allclose(got_positive, pos_sum / pos_n, rtol=1e-9)
    assert got_len == parts * rows
    del ddf
    assert_spilled_both_ways(client, before)


def test_worker_metrics_report_spilling(client):
    # What the scheduler and dashboard see (Worker.get_metrics -> spilled_total).
    spilled = client.run(lambda dask_worker: tuple(dask_worker.data.spilled_total))
    metrics = client.run(lambda dask_worker: dask_worker.data.get_metrics())
    for w, m in metrics.items():
        assert m["disk_write_count_total"] > 0 and m["disk_read_count_total"] > 0, (w, m)
    assert all(len(v) == 2 for v in spilled.values())
