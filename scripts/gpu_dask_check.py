#!/usr/bin/env python3
"""GPU machine check for the carried Dask: versions, then a LocalCluster of two
worker processes sums a CuPy array and hands a CuPy block back.

    PYTHONPATH=pydeps/site python3 scripts/gpu_dask_check.py

Exit status 0 only when the sum is exact and the block comes back as a CuPy
array. (A file, not a heredoc: Dask's spawned workers re-import the main module.)
"""
import importlib.metadata as md
import platform
import sys

NEEDS = ("dask", "distributed", "zict", "tornado", "partd", "locket", "tblib", "toolz", "cloudpickle",
         "fsspec", "click", "packaging", "pyyaml", "msgpack", "psutil", "sortedcontainers", "jinja2",
         "urllib3", "numpy", "cupy-cuda13x", "numba", "numba-cuda", "cuda-bindings")


def main():
    print("python", platform.python_version(), sys.executable)
    for name in NEEDS:
        try:
            print(f"  {name} {md.version(name)}")
        except md.PackageNotFoundError:
            print(f"  {name} -")
    import cupy
    import dask
    import dask.array as da
    import distributed
    from distributed import Client, LocalCluster

    print("dask", dask.__version__, dask.__file__)
    print("distributed", distributed.__version__, distributed.__file__)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        n = 1 << 22
        x = da.from_array(cupy.arange(n, dtype=cupy.float64), chunks=n // 8, asarray=False)
        total = float((x * 2).sum().compute())
        want = float(n * (n - 1))
        block = x.blocks[0].compute()
        workers = len(client.scheduler_info()["workers"])
    ok = total == want and isinstance(block, cupy.ndarray)
    print(f"LocalCluster ({workers} worker processes): CuPy sum {total} expected {want}; a block comes back as "
          f"{type(block).__module__}.{type(block).__name__}: {'OK' if ok else 'WRONG'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
