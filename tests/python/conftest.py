"""Shared fixtures for the spillway Python tests: small tier chains in tmp dirs."""
import gc
import os
import time
import types

import pytest

MiB = 1 << 20


def settle(pred, timeout=10.0):
    """Whether `pred()` holds within `timeout` seconds (collecting garbage between tries): for what
    happens on the engine's threads, such as the BufferReleaser dropping the references it was handed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        gc.collect()
        if pred():
            return True
        time.sleep(0.01)
    return pred()


def _export_pythonpath():
    # Dask worker processes must import the same spillway package as this one.
    try:
        import spillway
    except ImportError:
        return
    root = os.path.dirname(os.path.dirname(os.path.abspath(spillway.__file__)))
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if root not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in [root, *paths] if p)


_export_pythonpath()


def chain(directory, host="16MiB", file="1GiB", codec=None, persistent=False, high=0.9, low=0.75):
    """A host tier over a file tier in `directory`, as a config dict."""
    file_tier = {"name": "disk", "kind": "file", "capacity": file, "paths": [str(directory)]}
    if codec:
        file_tier["codec"] = codec
    if persistent:
        file_tier["persistent"] = True
    return {
        "version": 1,
        "defaults": {"watermarks": {"high": high, "low": low}},
        "tiers": [{"name": "host", "kind": "host", "capacity": host}, file_tier],
    }


@pytest.fixture
def make_engine(tmp_path):
    import spillway

    engines = []

    def make(**kw):
        e = spillway.Engine(chain(tmp_path / f"tier{len(engines)}", **kw))
        engines.append(e)
        return e

    yield make
    for e in engines:
        e.close()


def fake_worker(name, local_directory, memory_limit=0, **memory_manager):
    """The parts of a distributed Worker that spillway.dask_preload.install touches.

    `memory_manager` adds attributes of worker.memory_manager (e.g.
    memory_target_fraction, memory_spill_fraction)."""
    mm = types.SimpleNamespace(data={}, memory_limit=memory_limit, memory_pause_fraction=0.8, **memory_manager)
    return types.SimpleNamespace(name=name, local_directory=str(local_directory), memory_manager=mm,
                                 state=types.SimpleNamespace(data=None), plugins={})


def faulty_store(directory, host="1MiB", file="256MiB", **kw):
    """A SpillwayStore whose file tier does its I/O through a fault injector: no faults until
    ``store.engine.set_faults("eio_write=1")`` (the language of ``spillway stress --faults``)."""
    import spillway
    import spillway.dask as sd

    real = spillway.Engine

    def engine(*args, **kwargs):
        return real(*args, faults="eio_write=0", **kwargs)

    saved, sd.Engine = sd.Engine, engine
    try:
        return sd.SpillwayStore(chain(directory, host=host, file=file), log_interval=0, **kw)
    finally:
        sd.Engine = saved
