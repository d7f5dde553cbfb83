"""Small filters: smoke outcomes for the report, and which sandbox containers are stale."""

import importlib.util
import pathlib

from ansible_collections.blackwell.sglang.plugins.filter import smoke


def test_task_outcome_tells_passed_failed_skipped_and_not_run():
    assert smoke.task_outcome({"changed": False, "status": 200}) == "passed"
    assert smoke.task_outcome({"failed": True}) == "failed"
    assert smoke.task_outcome({"skipped": True}) == "skipped"
    assert smoke.task_outcome({}) == "not run"


def _sandbox():
    path = pathlib.Path(__file__).resolve().parents[4] / "tests" / "sandbox" / "plugins" / "filter" / "sandbox.py"
    spec = importlib.util.spec_from_file_location("sandbox_filters", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_sandbox_keeps_only_live_wanted_nodes_on_the_current_image():
    f = _sandbox().sandbox_stale_containers
    ps = [
        {"Names": ["node-a"], "State": "running", "ImageID": "img1"},   # keep
        {"Names": ["node-b"], "State": "running", "ImageID": "img0"},   # outdated image
        {"Names": ["node-c"], "State": "running", "ImageID": "img1"},   # records say Up, systemd dead
        {"Names": ["node-d"], "State": "exited", "ImageID": "img1"},    # stopped
        {"Names": ["old-node"], "State": "running", "ImageID": "img1"}, # no longer in the inventory
    ]
    wanted = ["node-a", "node-b", "node-c", "node-d", "node-e"]
    alive = ["node-a", "node-b", "old-node"]
    assert f(ps, wanted, "sha256:img1", alive=alive) == ["node-b", "node-c", "node-d", "old-node", "node-e"]
    assert f(ps, wanted, "img1", alive=alive, fresh=True) == ["node-a", "node-b", "node-c", "node-d", "old-node", "node-e"]
    assert f(ps, wanted, "img1", alive=alive, destroy=True)[0] == "node-a"
