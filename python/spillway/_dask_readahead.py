"""ReadAhead: a worker plugin that hints a task's inputs to SpillwayStore.prefetch
before the task starts, so their reads overlap the running task."""
from __future__ import annotations

import logging

logger = logging.getLogger("distributed.worker.spillway")


def hint_inputs(store, keys, max_bytes=None):
    """SpillwayStore.prefetch: hints the values of `keys` held in a file tier to
    Engine.prefetch, in order, while their bytes stay within `max_bytes`; returns
    the bytes hinted."""
    if store._closed or store.engine.closed:
        return 0
    with store._lock:
        entries = [e for e in (store._keys.get(k) for k in keys)
                   if e is not None and not e.overflow and not e.device]
    if not entries:
        return 0
    in_file = store._in_file_tiers(entries)
    if in_file is not None:
        entries = [e for e, f in zip(entries, in_file) if f]
    ekeys, total = [], 0
    for e in entries:
        if max_bytes is not None and total + e.nbytes > max_bytes:
            break
        total += e.nbytes
        ekeys.append(e.ekey)
        ekeys.extend(e.part_key(i) for i in e.parts)
    if ekeys:
        store.engine.prefetch(ekeys, "host")
        with store._lock:
            store.counters["prefetch_hints"] += len(ekeys)
            store.counters["prefetch_bytes"] += total
    return total


def next_ready(ready, n):
    """The next `n` tasks of a worker's ready queue (a distributed HeapSet), cheaply.

    HeapSet.peekn(n) with n > 1 sorts the whole heap whenever it changed, and
    ReadAhead asks on every task start: with tens of thousands of ready tasks
    (an array of small chunks) that is a sort of all of them per task. The n
    smallest entries of a binary heap lie in its first 2**n - 1 slots, so only
    those are sorted (n at most 6: 63 slots). Entries of tasks that left the
    set stay in the heap until popped and are skipped, so the answer may hold
    fewer than n tasks: it is a hint. Where the heap's layout is not the known
    one, only the next task (HeapSet.peek, O(1)).
    """
    if n <= 0 or not ready:
        return []
    heap = getattr(ready, "_heap", None)
    if n > 1 and isinstance(heap, list):
        try:
            n = min(n, 6)
            out = []
            # Only the first n of them are surely the heap's n smallest.
            for _, _, ref in sorted(heap[:min((1 << n) - 1, len(heap))], key=lambda x: x[:2])[:n]:
                ts = ref()
                if ts is not None and ts in ready:
                    out.append(ts)
            return out
        except (TypeError, ValueError):
            pass  # another layout
    try:
        return [ready.peek()]
    except KeyError:
        return []


class ReadAhead:
    """Worker plugin: the read-ahead hint for a task's inputs (SpillwayStore.prefetch).

    Each time a task starts executing, the inputs of the next `tasks` tasks in
    the worker's ready queue (its priority heap: what runs next; next_ready) that sit in a
    file tier are hinted, at most `max_bytes` of them counting what the tasks
    ahead were hinted already. Their reads then overlap the running task
    instead of blocking the worker's event loop when the task starts
    (distributed reads a task's inputs from ``Worker.data`` on the event
    loop). Each ready task is hinted once. The hinted values are promoted into
    the host tier, so they take its room (and the process memory) until the
    task has run: the budget bounds that. docs/python.md has the figures.

    spillway.dask_preload installs it (``--spillway-read-ahead``); with another
    setup: ``worker.plugins[ReadAhead.name] = ReadAhead(worker, store)``.
    It runs on the event loop with the GIL, and only looks up keys and queues
    an Engine.prefetch per task, which returns at once.
    """

    name = "spillway-read-ahead"

    def __init__(self, worker, store, tasks=None, max_bytes=None):
        self.state = getattr(worker, "state", worker)
        self.store = store
        # The state machine's own count first: Worker.nthreads warns (FutureWarning) in newer Dask.
        nthreads = getattr(self.state, "nthreads", None) or getattr(worker, "nthreads", None) or 1
        self.tasks = int(tasks) if tasks else 2 * nthreads
        if max_bytes is None:  # a quarter of the host tiers: room for the hinted values beside the rest
            host = sum(t["capacity_bytes"] for t in store.engine.tiers if t["kind"] == "host")
            max_bytes = host // 4
        self.max_bytes = int(max_bytes)
        self._hinted = {}  # task key -> bytes hinted for it; insertion-ordered, bounded
        self.errors = 0

    def transition(self, key, start, finish, **kwargs):
        if finish != "executing" or self.store._closed:
            return
        ready = getattr(self.state, "ready", None)
        if not ready:
            return
        budget = self.max_bytes  # less what the tasks ahead were hinted already (still being read, or in memory)
        try:
            for ts in next_ready(ready, self.tasks):
                got = self._hinted.get(ts.key)
                if got is None:
                    if budget <= 0:
                        break  # left for a later transition
                    keys = [dep.key for dep in ts.dependencies if dep.state == "memory"]
                    got = self.store.prefetch(keys, budget) if keys else 0
                    self._hinted[ts.key] = got
                budget -= got
            while len(self._hinted) > 4096:
                del self._hinted[next(iter(self._hinted))]
        except Exception:  # a hint: never fail the worker's transition
            self.errors += 1
            if self.errors == 1:
                logger.warning("spillway: read-ahead hint failed", exc_info=True)
