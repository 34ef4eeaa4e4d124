"""One tier JSON schema: Engine.tiers and SpillwayStore.stats()["engine"]["tiers"]
describe a tier with the fields `spillway validate --json` and `info --json` use."""
import json
import os
import subprocess

import pytest

spillway = pytest.importorskip("spillway")

from conftest import chain  # noqa: E402


def _cli():
    # build/python/spillway/__init__.py -> build/bin/spillway
    build = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(spillway.__file__))))
    path = os.path.join(build, "bin", "spillway")
    return path if os.access(path, os.X_OK) else None


def _yaml(tmp_path):
    cfg = tmp_path / "tiers.yaml"
    cfg.write_text(json.dumps(chain(tmp_path / "d", host="8MiB", file="64MiB", codec="lz4")))  # JSON is YAML
    return cfg


def test_engine_tiers_match_validate_json(tmp_path):
    cli = _cli()
    if cli is None:
        pytest.skip("the spillway CLI is not built (ninja spillway_cli)")
    cfg = _yaml(tmp_path)
    out = subprocess.run([cli, "validate", "--json", str(cfg)], capture_output=True, text=True, check=True).stdout
    cli_tiers = json.loads(out)["tiers"]
    with spillway.Engine(str(cfg)) as eng:
        mine = eng.tiers
    assert [t["name"] for t in mine] == [t["name"] for t in cli_tiers]
    for a, b in zip(mine, cli_tiers):
        assert list(a) == list(b), (a, b)  # the same fields in the same order
        for k in a:
            if k in ("filesystem", "path_info"):  # the CLI probes the filesystems; the module does not
                continue
            assert a[k] == b[k], (k, a[k], b[k])


def test_engine_tiers_shape(tmp_path):
    with spillway.Engine(str(_yaml(tmp_path))) as eng:
        host, disk = eng.tiers
    assert host["kind"] == "host" and host["capacity_bytes"] == 8 << 20 and "pinned" in host
    assert disk["codec"]["name"] == "lz4" and disk["persistent"] is False and disk["io"]["segment_bytes"] > 0
    assert set(disk["watermarks"]) == {"high", "low"} and disk["paths"] == [str(tmp_path / "d")]


def test_store_stats_tiers_carry_the_schema_and_the_counters(tmp_path):
    pytest.importorskip("distributed")
    from spillway.dask import SpillwayStore

    with SpillwayStore(chain(tmp_path, host="8MiB", file="64MiB"), log_interval=0) as s:
        s["x"] = [1, 2, 3]
        tiers = s.stats()["engine"]["tiers"]
        schema = s.engine.tiers
        for t, c in zip(tiers, schema):
            for k, v in c.items():
                assert t[k] == v, k
            assert "used_bytes" in t and "objects" in t
