"""Per-worker configuration and scratch directories for spillway.dask.

A node config names its scratch tier once (``${SPILLWAY_DIR:-/var/tmp/spillway}/...``
or ``${SPILLWAY_WORKER_DIR}``); each worker of the node must get its own copy,
because a scratch tier is wiped when an engine opens. This module resolves
those variables per worker (the config loader substitutes them into parsed
values, never into the YAML text), opens the engine, and keeps the bookkeeping
that lets a later worker reclaim the directory of one that was SIGKILLed:

- ``${SPILLWAY_WORKER_DIR}`` becomes ``<worker local directory>/spillway``:
  inside Dask's own worker directory, which Dask's WorkSpace purges when the
  worker dies (its ``.dirlock`` is free) and the next worker starts.
- any other listed ``${NAME}`` becomes ``<$NAME or default>/<worker dir name>``,
  outside Dask's workspace. Each such folder gets a sibling ``<folder>.dirlock``
  held with ``flock`` for the store's lifetime. The kernel drops the lock when
  the process dies, however it dies; a store opening on the node removes every
  sibling folder whose lock it can take (its owner is gone).
- a scratch tier path that names no per-worker variable (``/var/tmp/scratch``)
  gets the worker's own folder appended (``/var/tmp/scratch/<worker dir name>``),
  with the same sibling lock: workers of a node never share a scratch directory,
  as Dask's own spilling never asks them to arrange.
"""
from __future__ import annotations

import copy
import fcntl
import glob
import logging
import os
import re
import shutil
import tempfile

logger = logging.getLogger("distributed.worker.spillway")

WORKER_DIR_VAR = "SPILLWAY_WORKER_DIR"
WORKER_INDEX_VAR = "SPILLWAY_WORKER_INDEX"
LOCK_SUFFIX = ".dirlock"


def worker_index(name, explicit=None, environ=os.environ):
    """The worker's index among the engines on its node, or None.

    In order: `explicit` (--spillway-worker-index), $SPILLWAY_WORKER_INDEX
    (a launcher's), then the worker's name: an int (LocalCluster and
    dask-cuda's LocalCUDACluster name workers 0, 1, ...) or a str ending in
    "-<n>" or made of digits (``dask worker --nworkers N --name w`` gives
    w-0, w-1, ...). The config loader reads $SPILLWAY_WORKER_INDEX to pick the
    worker's gpu device (``device: auto`` or ``device: [list]``;
    docs/config.md, "One worker per GPU").
    """
    for value, what in ((explicit, "--spillway-worker-index"), (environ.get(WORKER_INDEX_VAR) or None,
                                                                "$" + WORKER_INDEX_VAR)):
        if value is None:
            continue
        try:
            index = int(value)
        except (TypeError, ValueError):
            raise ValueError(f"{what}={value!r} is not a worker index (a whole number from 0)") from None
        if index < 0:
            raise ValueError(f"{what}={value!r} is not a worker index (a whole number from 0)")
        return index
    if isinstance(name, int) and not isinstance(name, bool) and name >= 0:
        return name
    if isinstance(name, str):
        m = re.fullmatch(r"(?:.*-)?(\d+)", name)
        if m:
            return int(m.group(1))
    return None


def per_worker_value(name, default, worker_dir, created):
    """What ${NAME} / ${NAME:-default} becomes for the worker whose directory is worker_dir().

    Folders made here (outside the worker directory) are added to `created`.
    """
    if name == WORKER_DIR_VAR:
        return worker_dir()
    base = os.environ.get(name) or default
    if not base:
        raise ValueError(f"${{{name}}} is listed in per_worker_vars but is unset and has no default")
    path = os.path.join(base, os.path.basename(os.path.dirname(worker_dir())))
    if not os.path.exists(path):
        created.add(path)
    return path


def open_engine(engine_cls, config, profile, names, value, scratch_path=None):
    """Opens the engine with the per-worker variables `names` resolved by `value(name, default)`.

    The loader substitutes them into parsed values (``Engine(vars=...)``), never into the
    YAML text, so a value holding ``#``, ``"`` or a newline stays one string.
    `scratch_path`: the loader's hook for every scratch tier path (``Engine(scratch_path=...)``).
    """
    names = frozenset(names)

    def resolve(name, default):
        return value(name, default) if name in names else None

    if isinstance(config, dict):
        config = copy.deepcopy(config)
    else:
        config = os.fspath(config)
    return engine_cls(config, profile=profile, vars=resolve, scratch_path=scratch_path)


def open_worker_engine(engine_cls, config, profile, per_worker_vars, worker_local_directory, per_worker_scratch,
                       refuse):
    """Opens a store's engine with this worker's own directories.

    Per-worker variables (`per_worker_vars`) resolve under
    <worker_local_directory>/spillway, or a fresh temporary directory outside a
    worker; with `per_worker_scratch` (inside a worker) a scratch tier on a fixed
    path gets the worker's folder under it. `refuse(tiers)` returns why the chain
    cannot serve (ValueError, nothing left behind) or None. Every folder made for
    this worker is locked (DirLock), and a killed worker's are reclaimed first.
    Returns (engine, folders made, their locks, the temporary directory or None).
    """
    tmpdir = []

    def worker_dir():  # <worker directory>/spillway
        if worker_local_directory:
            return os.path.join(os.path.normpath(os.fspath(worker_local_directory)), "spillway")
        if not tmpdir:
            tmpdir.append(tempfile.TemporaryDirectory(prefix="spillway-store-"))
        return os.path.join(tmpdir[0].name, "spillway")

    created = set()  # per-worker folders made for this store, outside the worker directory
    roots = []  # what per-worker variables resolved to: paths already this worker's own

    def value(name, default):
        v = per_worker_value(name, default, worker_dir, created)
        roots.append(os.path.normpath(v))
        return v

    def own_scratch(path):
        norm = os.path.normpath(path)
        if any(norm == r or norm.startswith(r.rstrip(os.sep) + os.sep) for r in roots):
            return path
        mine = os.path.join(norm, os.path.basename(os.path.dirname(worker_dir())))
        created.add(mine)
        return mine

    scratch = own_scratch if worker_local_directory and per_worker_scratch else None
    engine = open_engine(engine_cls, config, profile, tuple(per_worker_vars), value, scratch)
    refused = refuse(engine.tiers)
    if refused:
        engine.close()
        remove_dirs(sorted(created), [])
        raise ValueError(refused)
    created = sorted(created)
    locks = []
    for c in created:
        reclaim_stale(os.path.dirname(c))
        locks.append(DirLock(c))
    return engine, created, locks, (tmpdir[0] if tmpdir else None)


class DirLock:
    """An flock on ``<folder>.dirlock``: held while a store uses ``folder``."""

    def __init__(self, folder):
        self.path = folder.rstrip(os.sep) + LOCK_SUFFIX
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError: another store has it

    def release(self, remove_file=True):
        if self._fd is None:
            return
        if remove_file:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
        os.close(self._fd)
        self._fd = None


def reclaim_stale(parent):
    """Removes folders under `parent` left by stores that died (their .dirlock is free).

    Returns the folders removed. A lock held by a live store is skipped.
    """
    removed = []
    for lock_path in glob.glob(os.path.join(glob.escape(parent), "*" + LOCK_SUFFIX)):
        folder = lock_path[: -len(LOCK_SUFFIX)]
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # its store is alive
            shutil.rmtree(folder, ignore_errors=True)
            os.unlink(lock_path)
            removed.append(folder)
        finally:
            os.close(fd)
    if removed:
        logger.info("spillway: reclaimed %d scratch folder(s) of dead workers under %s: %s",
                    len(removed), parent, ", ".join(os.path.basename(r) for r in removed))
    return removed


def remove_dirs(paths, locks):
    """Finalizer: the store's scratch folders, then their locks."""
    for p in paths:
        shutil.rmtree(p, ignore_errors=True)
    for lock in locks:
        lock.release()
