#!/usr/bin/env python3
"""Dask-style spiller: the peer `spillway bench` compares host -> file spilling with.

Dask's worker spills through zict: Func(serialize_bytelist, deserialize_bytes,
File(dir)). Each value is pickled (protocol 5, numpy buffers out of band, as
distributed.protocol.serialize_bytelist does) and zict.File writes the frames
to one file per key with open/writelines/close: no fsync, no checksum, on the
calling thread. This script does exactly that, with zict.File itself when it
is importable and otherwise with a model of zict.File's write and read path
(the output's "impl" says which).

    /usr/bin/python3 bench/zict_peer.py --dir /var/tmp/spillway-bench/peer \
        --size 1048576 --count 512 [--reps 1]

Objects are numpy uint8 arrays (views into one random pool, a different
offset per key). Writes every object (spill), then reads every one back and
checks it against its source (unspill), removes the files, and prints one JSON
object per repetition: seconds and bytes per second for both directions.
"""
import argparse
import json
import os
import pickle
import shutil
import sys
import time

import numpy as np

try:
    import zict  # noqa: F401
    from zict import File as ZictFile

    IMPL = "zict.File " + getattr(zict, "__version__", "?")
except ImportError:  # pragma: no cover - depends on the machine
    ZictFile = None
    IMPL = "model of zict.File"


class ModelFile:
    """zict.File's data path: one file per key, writelines, no fsync."""

    def __init__(self, directory):
        self.directory = directory
        self.keys = set()
        os.makedirs(directory, exist_ok=True)

    def _path(self, key):
        return os.path.join(self.directory, key.replace("/", "-"))

    def __setitem__(self, key, value):
        with open(self._path(key), "wb") as fh:
            if isinstance(value, (tuple, list)):
                fh.writelines(value)
            else:
                fh.write(value)
        self.keys.add(key)

    def __getitem__(self, key):
        with open(self._path(key), "rb") as fh:
            return fh.read()


def serialize_bytelist(value):
    """Pickle protocol 5 with out-of-band buffers: a length-prefixed header
    frame followed by the raw buffers (what distributed writes per key)."""
    buffers = []
    header = pickle.dumps(value, protocol=5, buffer_callback=buffers.append)
    lengths = [len(header)] + [b.raw().nbytes for b in buffers]
    prefix = np.asarray([len(lengths)] + lengths, dtype=np.uint64).tobytes()
    return [prefix, header] + [b.raw() for b in buffers]


def deserialize_bytes(data):
    mv = memoryview(data)
    n = int(np.frombuffer(mv[:8], dtype=np.uint64)[0])
    lengths = np.frombuffer(mv[8:8 + 8 * n], dtype=np.uint64).tolist()
    off = 8 + 8 * n
    header = mv[off:off + lengths[0]]
    off += lengths[0]
    bufs = []
    for ln in lengths[1:]:
        bufs.append(mv[off:off + ln])
        off += ln
    return pickle.loads(header, buffers=bufs)


def run_once(directory, size, count, pool):
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory, exist_ok=True)
    store = ZictFile(directory) if ZictFile is not None else ModelFile(directory)
    span = len(pool) - size
    offsets = [(i * 7919 * 64) % (span + 1) if span > 0 else 0 for i in range(count)]
    keys = ["obj-%d" % i for i in range(count)]

    t0 = time.perf_counter()
    for key, off in zip(keys, offsets):
        store[key] = serialize_bytelist(pool[off:off + size])
    write_s = time.perf_counter() - t0

    bad = 0
    t0 = time.perf_counter()
    for key, off in zip(keys, offsets):
        value = deserialize_bytes(store[key])
        if value.nbytes != size or not np.array_equal(value, pool[off:off + size]):
            bad += 1
    read_s = time.perf_counter() - t0
    shutil.rmtree(directory, ignore_errors=True)
    total = size * count
    return {
        "impl": IMPL,
        "size": size,
        "count": count,
        "bytes": total,
        "write_s": write_s,
        "read_s": read_s,
        "write_bytes_per_s": total / write_s if write_s > 0 else 0.0,
        "read_bytes_per_s": total / read_s if read_s > 0 else 0.0,
        "bad": bad,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", required=True, help="scratch directory (emptied, then removed)")
    ap.add_argument("--size", type=int, required=True, help="bytes per object")
    ap.add_argument("--count", type=int, required=True, help="objects")
    ap.add_argument("--reps", type=int, default=1)
    args = ap.parse_args()
    if args.size <= 0 or args.count <= 0:
        print("zict_peer: --size and --count must be positive", file=sys.stderr)
        return 2
    rng = np.random.default_rng(42)
    pool = rng.integers(0, 256, size=max(2 * args.size, 64 << 20), dtype=np.uint8)
    rc = 0
    for _ in range(args.reps):
        r = run_once(args.dir, args.size, args.count, pool)
        print(json.dumps(r), flush=True)
        if r["bad"]:
            rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
