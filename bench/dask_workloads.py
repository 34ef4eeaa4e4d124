"""Workloads of bench/dask_bench.py. Each takes (client, data_bytes) and returns
({phase: seconds}, check): `check` is a tuple of numbers compared between the
two stores (they must agree)."""
import time

import numpy as np

MiB = 1 << 20


def _timed(times, name, fn):
    t = time.perf_counter()
    out = fn()
    times[name] = time.perf_counter() - t
    return out


def _release(times, client, collections):
    """Cancels the workload's collections, timed as the phase `release`, which
    the benchmark leaves out of the workload's total: distributed's
    Scheduler._cancel_key polls (asyncio.sleep(0.1)) for up to 1 s for a key
    no client wants yet, so the call took 0 or 1.0 s on either side at random
    (seen in the in-memory workload: persist 0.1 s, passes 0.3 s, cancel 1.0
    s on both sides), and it waits for no store's work: the workers free the
    keys afterwards, on their own."""
    _timed(times, "release", lambda: client.cancel(collections))


def _persist(times, name, client, collection):
    from distributed import wait

    def run():
        out = client.persist(collection)
        wait(out)
        return out

    return _timed(times, name, run)


def _square_array(data_bytes, chunk_bytes, seed):
    import dask.array as da

    rows = max(1, int((chunk_bytes / 8) ** 0.5))
    cols = max(1, chunk_bytes // 8 // rows)
    n_chunks = max(4, int(data_bytes // (rows * cols * 8)))
    side = int(n_chunks ** 0.5)
    shape = (side * rows, (n_chunks // side) * cols)
    return da.random.RandomState(seed).random_sample(shape, chunks=(rows, cols))


def array_64mib(client, data_bytes):
    """An array of 64 MiB chunks persisted, reduced, and a derived array persisted and reduced."""
    import dask

    times = {}
    x = _square_array(data_bytes, 64 * MiB, 7)
    x = _persist(times, "persist", client, x)
    total, colsum = _timed(times, "reductions", lambda: dask.compute(x.sum(), x.sum(axis=0)))
    y = _persist(times, "derived", client, x * 2 - 1)
    ymean = _timed(times, "derived mean", lambda: y.mean(axis=1).compute())
    check = (float(total), float(colsum.sum()), float(ymean.sum()), x.nbytes + y.nbytes)
    _release(times, client, [x, y])
    return times, check


def array_64kib(client, data_bytes):
    """Many small values: an array in 64 KiB chunks persisted and reduced twice."""
    import dask
    import dask.array as da

    times = {}
    rows, cols = 8, 1024  # 64 KiB of float64
    n_chunks = max(16, int(data_bytes // (rows * cols * 8)))
    x = da.random.RandomState(11).random_sample((n_chunks * rows, cols), chunks=(rows, cols))
    x = _persist(times, "persist", client, x)
    total, colmax = _timed(times, "reductions", lambda: dask.compute(x.sum(), x.max(axis=0)))
    again = _timed(times, "second pass", lambda: float((x * x).sum().compute()))
    check = (float(total), float(colmax.sum()), again, n_chunks)
    _release(times, client, [x])
    return times, check


def make_partition(i, rows):
    import pandas as pd

    rng = np.random.default_rng(5000 + i)
    return pd.DataFrame({
        "key": rng.integers(0, 1000, rows),
        "x": rng.random(rows),
        "y": rng.standard_normal(rows),
        "z": rng.integers(0, 1 << 40, rows),
    })


def _frame(client, data_bytes, rows=250_000):
    import dask
    import dask.dataframe as dd
    from distributed import wait

    parts = max(4, int(data_bytes // (rows * 32)))  # 32 bytes a row: 7.6 MiB partitions
    ddf = dd.from_delayed([dask.delayed(make_partition)(i, rows) for i in range(parts)], meta=make_partition(0, 0))
    ddf = client.persist(ddf)
    wait(ddf)
    return ddf, parts * rows


def dataframe_shuffle(client, data_bytes):
    """A task-based shuffle of a persisted frame on `key`, persisted, then a per-partition check."""
    from distributed import wait

    times = {}
    ddf, n = _timed(times, "persist", lambda: _frame(client, data_bytes))

    def shuffle():
        s = client.persist(ddf.shuffle("key", shuffle="tasks"))
        wait(s)
        return s

    s = _timed(times, "tasks shuffle", shuffle)
    # Every key in one partition only, and nothing lost.
    keys_per_part = _timed(times, "check", lambda: s.map_partitions(lambda p: p.key.nunique()).compute())
    xsum, rows = float(s.x.sum().compute()), int(s.shape[0].compute())
    check = (xsum, rows, int(keys_per_part.sum()), n)
    _release(times, client, [ddf, s])
    return times, check


def dataframe_groupby(client, data_bytes):
    """Three groupby aggregations over a persisted frame."""
    import dask

    times = {}
    ddf, n = _timed(times, "persist", lambda: _frame(client, data_bytes))
    g1, g2, g3 = _timed(times, "groupbys", lambda: dask.compute(
        ddf.groupby("key").agg({"x": "sum", "y": "mean", "z": "max"}),
        ddf.groupby(ddf.z % 97).x.std(),
        ddf[ddf.y > 0].groupby("key").size()))
    check = (float(g1.x.sum()), float(g1.z.sum()), float(g2.sum()), int(g3.sum()), n)
    _release(times, client, [ddf])
    return times, check


def in_memory(client, data_bytes):
    """Fits in memory (nothing should spill): persist, then several passes."""
    import dask

    times = {}
    x = _square_array(data_bytes, 8 * MiB, 3)
    x = _persist(times, "persist", client, x)
    results = _timed(times, "5 passes", lambda: dask.compute(*[(x * k).sum() for k in range(1, 6)]))
    check = tuple(float(r) for r in results)
    _release(times, client, [x])
    return times, check


# name -> (function, data as a multiple of all workers' memory limits; None: --scale)
WORKLOADS = {
    "array64m": (array_64mib, None),
    "array64k": (array_64kib, None),
    "shuffle": (dataframe_shuffle, None),
    "groupby": (dataframe_groupby, None),
    "inmemory": (in_memory, 0.2),
}
