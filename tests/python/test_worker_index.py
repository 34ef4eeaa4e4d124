"""One worker per GPU, the Python half: the preload works out the
worker's index and exports it as $SPILLWAY_WORKER_INDEX before the engine
opens, so the config loader picks the worker's device (``device: auto`` or a
list) and ${SPILLWAY_WORKER_INDEX} expands in the config. No GPU needed: the
index is seen through a path that names it, and a gpu tier with a device
list is left out (optional) where there is no GPU."""
import os

import pytest

pytest.importorskip("distributed", reason="python3-distributed is not installed")
pytest.importorskip("click", reason="python3-click is not installed")

from spillway import _dask_dirs  # noqa: E402
from spillway import dask_preload  # noqa: E402

from conftest import fake_worker  # noqa: E402


def test_worker_index_sources():
    env = {}
    assert _dask_dirs.worker_index(0, environ=env) == 0
    assert _dask_dirs.worker_index(3, environ=env) == 3
    assert _dask_dirs.worker_index("w-2", environ=env) == 2
    assert _dask_dirs.worker_index("12", environ=env) == 12
    assert _dask_dirs.worker_index("tcp://10.0.0.1:40123", environ=env) is None
    assert _dask_dirs.worker_index(None, environ=env) is None
    assert _dask_dirs.worker_index(True, environ=env) is None
    # A launcher's variable beats the name; the option beats both.
    assert _dask_dirs.worker_index("w-2", environ={"SPILLWAY_WORKER_INDEX": "5"}) == 5
    assert _dask_dirs.worker_index("w-2", 7, environ={"SPILLWAY_WORKER_INDEX": "5"}) == 7
    with pytest.raises(ValueError, match=r"\$SPILLWAY_WORKER_INDEX='x' is not a worker index"):
        _dask_dirs.worker_index("w-2", environ={"SPILLWAY_WORKER_INDEX": "x"})
    with pytest.raises(ValueError, match="--spillway-worker-index=-1"):
        _dask_dirs.worker_index("w-2", -1, environ={})


@pytest.mark.parametrize("name, index", [("node-a-1", 1), (0, 0)])
def test_preload_exports_the_worker_index_to_the_config(tmp_path, monkeypatch, name, index):
    monkeypatch.delenv("SPILLWAY_WORKER_INDEX", raising=False)
    cfg = tmp_path / "node.yaml"
    cfg.write_text(
        "version: 1\n"
        "defaults: {workers_per_node: 2}\n"
        "tiers:\n"
        "  - {name: gpu, kind: gpu, device: [0, 1], capacity: 1GiB, optional: true}\n"
        "  - {name: host, kind: host, capacity: 4MiB}\n"
        "  - {name: scratch, kind: file, capacity: 64MiB,\n"
        "     path: '${SPILLWAY_WORKER_DIR}/w${SPILLWAY_WORKER_INDEX}'}\n"
    )
    worker = fake_worker(name, tmp_path / "dask-worker-space" / "worker-x")
    store = dask_preload.install(worker, config=str(cfg), log_interval=0)
    try:
        assert os.environ["SPILLWAY_WORKER_INDEX"] == str(index)
        file_tier = [t for t in store.engine.tiers if t["kind"] == "file"][0]
        assert file_tier["paths"][0].endswith(f"/w{index}"), file_tier["paths"]
        assert worker.memory_manager.data is store
    finally:
        dask_preload.dask_teardown(worker)
        store.close()
        os.environ.pop("SPILLWAY_WORKER_INDEX", None)  # install() set it for this process
