"""The fleet sandbox's benchmark client (tests/sandbox/benchmark_client.py): the real sglang of the product's pins, in a
virtualenv on the nodes' interpreter, built once per machine and placed with the stand-ins the nodes mount.

The fleet's releases are simulator builds (no sglang.benchmark); the gate there runs this client
(generation_benchmark_python in inventory/sandbox-fleet). It must be the release's own sglang (the product's pins),
and placing it must never cost a second install.
"""

import json
import os
import pathlib
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "sandbox"))

import benchmark_client  # noqa: E402
import closure  # noqa: E402


def test_the_client_is_the_releases_sglang_on_the_nodes_python(monkeypatch):
    spec = benchmark_client.recipe()
    assert spec["requirement"] == closure.requirements()[0]  # sglang==deployment_sglang_version
    assert spec["closure"] == closure.recipe()
    # a changed pin of the release is a new client
    monkeypatch.setattr(closure, "recipe", lambda: "another")
    assert benchmark_client.recipe_key(benchmark_client.recipe()) != benchmark_client.recipe_key(spec)


def test_the_fleet_runs_the_gate_with_the_client_the_sandbox_places():
    fleet = yaml.safe_load((ROOT / "inventory/sandbox-fleet/group_vars/gpu_nodes/fleet.yml").read_text())
    nodes = yaml.safe_load((ROOT / "tests/sandbox/nodes.yml").read_text())
    placed = "%s/%s/venv/bin/python" % (nodes["sandbox_artifacts_mount"], benchmark_client.NODE_DIR)
    assert fleet["generation_benchmark_python"] == placed
    assert "rolling_redeploy_benchmark_gate" not in fleet  # the product's default: the gate on
    assert "SANDBOX_BENCHMARK_CLIENT=1" in (ROOT / "scripts/sandbox-fleet.sh").read_text()


def _fake_cache(root, version="0.5.23"):
    """A machine cache entry as ensure() leaves it: venv/ (with bin/python a link, as venv makes it) and build.json."""
    final = root / "benchmark-client" / "k1"
    (final / "venv" / "bin").mkdir(parents=True)
    (final / "venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    os.symlink("/usr/bin/python3", final / "venv" / "bin" / "python")
    (final / "build.json").write_text(json.dumps({"sglang": version}) + "\n")
    return final, json.loads((final / "build.json").read_text())


def test_placing_the_client_hardlinks_it_and_keeps_the_interpreter_link(tmp_path, monkeypatch):
    final, info = _fake_cache(tmp_path / "cache")
    monkeypatch.setattr(benchmark_client, "ensure", lambda cache=None: (final, info, False))
    artifacts = tmp_path / "artifacts"
    placed = benchmark_client.build(artifacts)
    venv = artifacts / "benchmark-client" / "venv"
    assert placed["python"] == "benchmark-client/venv/bin/python" and placed["sglang"] == "0.5.23"
    assert os.readlink(venv / "bin" / "python") == "/usr/bin/python3"  # the node's own interpreter
    assert (venv / "pyvenv.cfg").stat().st_ino == (final / "venv" / "pyvenv.cfg").stat().st_ino  # no bytes copied
    # placed again: nothing replaced
    inode = (venv / "pyvenv.cfg").stat().st_ino
    (venv / "marker").write_text("kept")
    benchmark_client.build(artifacts)
    assert (venv / "marker").exists() and (venv / "pyvenv.cfg").stat().st_ino == inode
    # another client in the cache (a new pin): the placed one is replaced, not mixed
    (final / "build.json").write_text(json.dumps({"sglang": "0.5.24"}) + "\n")
    benchmark_client.build(artifacts)
    assert not (venv / "marker").exists()
    assert json.loads((artifacts / "benchmark-client" / "build.json").read_text())["sglang"] == "0.5.24"
