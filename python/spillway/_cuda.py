"""CUDA helpers for spillway's device path, without a hard CUDA dependency.

Version 3 of __cuda_array_interface__ names the stream the producer last wrote
on; a consumer must synchronize with it before reading. The native module calls
synchronize_stream() before it hands a device pointer to the engine. Whichever
CUDA library is present does the work: CuPy, Numba, PyTorch, or libcudart via
ctypes.
"""
import ctypes
import ctypes.util


def synchronize_stream(stream):
    """Blocks until all work queued on `stream` (a cudaStream_t as an int) is done."""
    if stream is None:
        return
    stream = int(stream)
    if stream == 0:
        raise ValueError("__cuda_array_interface__ 'stream' must not be 0 (see the CUDA Array Interface v3)")
    try:
        import cupy

        cupy.cuda.ExternalStream(stream).synchronize()
        return
    except ImportError:
        pass
    try:
        from numba import cuda as numba_cuda

        numba_cuda.external_stream(stream).synchronize()
        return
    except ImportError:
        pass
    try:
        import torch

        torch.cuda.synchronize()  # device-wide: coarser, but correct
        return
    except ImportError:
        pass
    _cudart().cudaStreamSynchronize(ctypes.c_void_p(stream))


_CUDART = None


def _cudart():
    global _CUDART
    if _CUDART is None:
        name = ctypes.util.find_library("cudart")
        if name is None:
            from ._spillway import NotSupportedError

            raise NotSupportedError(
                "cannot synchronize the producer's CUDA stream: none of cupy, numba, torch or libcudart is available"
            )
        _CUDART = ctypes.CDLL(name)
    return _CUDART
