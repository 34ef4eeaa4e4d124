"""put_array / get_array: store an array and get back the same type.

Engine.put/get deal in bytes. These helpers also record the array's type,
dtype and shape, so a NumPy array comes back as a NumPy array (a read-only,
zero-copy view of the pinned object) and a CuPy / PyTorch / Numba device array
comes back as the same device type (a gpu tier and a CUDA build are needed for
device arrays; the engine raises NotSupportedError otherwise). Device arrays
are stored without a copy: the engine adopts their allocation (spillway.device).

Layout: the data is one object under `key` (host or device memory); the
metadata (JSON) is a small host object under META_PREFIX + key. The two puts
are not atomic: a reader racing a writer of the same key may see a mismatch.
"""
import json

META_PREFIX = b"\x00spillway-array-meta\x00"


def _bytes_key(key):
    return key.encode() if isinstance(key, str) else bytes(key)


def _describe(array):
    module = type(array).__module__.split(".")[0]
    if hasattr(array, "__cuda_array_interface__") and module in ("cupy", "torch", "numba"):
        cai = array.__cuda_array_interface__
        if module == "torch":
            dtype = str(array.dtype).replace("torch.", "")
        else:
            dtype = str(array.dtype)
        return {"type": module, "dtype": dtype, "shape": list(cai["shape"]), "where": "device"}
    return None


def put_array(engine, key, array):
    """Stores `array` (NumPy, anything np.asarray accepts, or a CUDA array) under `key`."""
    meta = _describe(array)
    if meta is not None:
        # No copy: the engine adopts the array's allocation (spillway.device);
        # the record says where the array lies inside it.
        from . import device

        meta["record"] = device.put_value(engine, key, array)
    else:
        import numpy as np

        arr = np.ascontiguousarray(np.asarray(array))
        if arr.dtype.hasobject:
            raise TypeError("arrays of Python objects cannot be stored as bytes; pickle them first")
        meta = {"type": "numpy", "dtype": arr.dtype.str, "shape": list(arr.shape), "where": "host"}
        engine.put(key, arr)
    engine.put(META_PREFIX + _bytes_key(key), json.dumps(meta).encode())


def get_array(engine, key):
    """Returns the array stored by put_array, as the type it was stored as.

    NumPy arrays are read-only views over the pinned object (no copy); copy
    them (arr.copy()) to write, or to unpin the object early.
    """
    meta = json.loads(bytes(engine.get(META_PREFIX + _bytes_key(key), copy=True)))
    shape = tuple(meta["shape"])
    if meta["where"] == "host":
        import numpy as np

        (view,) = engine.get_buffers(key)
        return np.frombuffer(view, dtype=np.dtype(meta["dtype"])).reshape(shape)
    kind = meta["type"]
    if "record" in meta:
        from . import device

        return device.get_value(engine, key, meta["record"])
    # PyTorch refuses a read-only __cuda_array_interface__ (CuPy ignores the flag).
    (buf,) = engine.get_buffers(key, where="device", writable=(kind == "torch"))
    if kind == "cupy":
        import cupy

        return cupy.asarray(buf).view(cupy.dtype(meta["dtype"])).reshape(shape)
    if kind == "torch":
        import torch

        t = torch.as_tensor(buf, device="cuda")
        return t.view(getattr(torch, meta["dtype"])).reshape(shape)
    if kind == "numba":
        import numpy as np
        from numba import cuda as numba_cuda

        return numba_cuda.as_cuda_array(buf).view(np.dtype(meta["dtype"])).reshape(shape)
    raise ValueError(f"unknown array type {kind!r} recorded for key {key!r}")


def erase_array(engine, key):
    """Removes an array stored by put_array (both objects)."""
    engine.erase(key)
    engine.erase(META_PREFIX + _bytes_key(key))
