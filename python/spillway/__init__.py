"""spillway: tiered object storage (GPU -> host -> file tiers) for Python.

    import spillway
    eng = spillway.Engine("tiers.yaml")            # or a dict with the same keys
    eng.put("k", numpy_array)                      # read in place, copied once into the tier
    eng.put("multi", [header_bytes, payload])      # one object made of several buffers
    view = eng.get("k")                            # read-only memoryview, pinned while alive
    arr = numpy.frombuffer(view, dtype=numpy.float32)
    data = eng.get("k", copy=True)                 # bytes; unpinned at once
    eng.stats()["tiers"][0]["demotions_out"]

Errors are spillway.Error subclasses that are also the matching built-in
exception: NotFoundError (KeyError), NoSpaceError (MemoryError),
StorageIOError (OSError), InvalidArgumentError (ValueError),
NotSupportedError (NotImplementedError), CorruptionError (checksum mismatch).

The Dask worker store is spillway.SpillwayStore (from spillway.dask, imported
on first use, so the core module does not need dask). See docs/python.md.
"""
from ._spillway import (  # noqa: F401  (re-exported API)
    BusyError,
    CorruptionError,
    DeviceBuffer,
    Engine,
    EngineClosedError,
    Error,
    HostBuffer,
    InvalidArgumentError,
    NoSpaceError,
    NotFoundError,
    NotSupportedError,
    StorageIOError,
    format_bytes,
    validate_config,
)
from .arrays import get_array, put_array  # noqa: F401

from ._spillway import __version__  # noqa: F401  (CMakeLists.txt project() is the one source)

__all__ = [
    "BusyError",
    "CorruptionError",
    "DeviceBuffer",
    "Engine",
    "EngineClosedError",
    "Error",
    "HostBuffer",
    "InvalidArgumentError",
    "NoSpaceError",
    "NotFoundError",
    "NotSupportedError",
    "StorageIOError",
    "format_bytes",
    "get_array",
    "put_array",
    "validate_config",
    "SpillwayStore",
    "ReadAhead",
]

_LAZY = {"SpillwayStore": "dask", "ReadAhead": "dask"}  # need dask and distributed: imported on first use


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'spillway' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
