"""generation_record: one deployment record per switch, and the one rollback, on a throw-away release/model tree."""

import json
import os

import pytest

from ansible_collections.blackwell.sglang.plugins.modules import generation_record


@pytest.fixture
def node(tmp_path):
    root = tmp_path
    for d in ("opt/releases/aaaa", "opt/releases/bbbb", "models/Kimi/r1", "models/Kimi/r2", "etc", "staged"):
        (root / d).mkdir(parents=True)
    os.symlink(str(root / "opt/releases/aaaa"), str(root / "opt/current"))
    os.symlink("r1", str(root / "models/Kimi/current"))
    (root / "etc/unit.service").write_text("[Service]\nExecStart=old\n")
    (root / "etc/kimi.env").write_text("HF_TOKEN=x\n")
    (root / "staged/unit.service").write_text("[Service]\nExecStart=new\n")
    return root


def params(root, **kw):
    base = {"dir": str(root / "gen"), "release_link": str(root / "opt/current"),
            "previous_release_link": str(root / "opt/previous"), "model_link": str(root / "models/Kimi/current"),
            "files": [str(root / "etc/unit.service"), str(root / "etc/kimi.env")], "state": "recorded", "keep": 10,
            "reason": "", "target": None}
    base.update(kw)
    return base


def target(root):
    return {"release": str(root / "opt/releases/bbbb"), "model": "r2",
            "files": {str(root / "etc/unit.service"): str(root / "staged/unit.service")}}


def test_record_is_idempotent_and_a_switch_records_both_generations(node, module_runner):
    kind, first = module_runner(generation_record, params(node))
    assert kind == "exit" and first["changed"] and first["current"]["generation"] == 1
    kind, again = module_runner(generation_record, params(node))
    assert not again["changed"] and again["current"]["generation"] == 1

    kind, plan = module_runner(generation_record, params(node, state="switched", target=target(node)), check_mode=True)
    assert plan["changed"] and len(plan["differences"]) == 3
    assert os.readlink(str(node / "opt/current")).endswith("aaaa")  # check mode changed nothing

    kind, switched = module_runner(generation_record, params(node, state="switched", target=target(node),
                                                             reason="rolling redeploy"))
    assert kind == "exit", switched
    assert switched["current"]["generation"] == 2 and switched["previous"]["generation"] == 1
    assert os.readlink(str(node / "opt/current")).endswith("bbbb")
    assert os.readlink(str(node / "opt/previous")).endswith("aaaa")
    assert os.readlink(str(node / "models/Kimi/current")) == "r2"
    assert "ExecStart=new" in (node / "etc/unit.service").read_text()
    assert (node / "etc/kimi.env").read_text() == "HF_TOKEN=x\n"  # not in target.files: kept
    kind, nothing = module_runner(generation_record, params(node, state="switched", target=target(node)),
                                  check_mode=True)
    assert not nothing["changed"]  # a node with nothing to switch


def test_restore_brings_release_model_and_unit_back_and_a_second_restore_rolls_forward(node, module_runner):
    module_runner(generation_record, params(node))
    module_runner(generation_record, params(node, state="switched", target=target(node)))
    kind, back = module_runner(generation_record, params(node, state="restored", reason="rollback"))
    assert kind == "exit", back
    assert back["changed"] and back["restored_generation"] == 1 and back["current"]["generation"] == 3
    assert os.readlink(str(node / "opt/current")).endswith("aaaa")
    assert os.readlink(str(node / "models/Kimi/current")) == "r1"
    assert "ExecStart=old" in (node / "etc/unit.service").read_text()
    kind, forward = module_runner(generation_record, params(node, state="restored"))
    assert forward["restored_generation"] == 2 and os.readlink(str(node / "models/Kimi/current")) == "r2"


def test_a_restored_generation_keeps_the_benchmark_figures_of_the_one_it_restores(node, module_runner):
    """The rollout's gate compares with the previous generation's figures: after a rollback the live generation is a
    new one (3), serving what 1 served, so it carries 1's figures and not the failed 2's."""
    module_runner(generation_record, params(node))
    (node / "gen/1/benchmark-gate.json").write_text('{"label": "gate", "results": [1]}\n')
    module_runner(generation_record, params(node, state="switched", target=target(node)))
    (node / "gen/2/benchmark-gate.json").write_text('{"label": "gate", "results": [2]}\n')
    kind, back = module_runner(generation_record, params(node, state="restored", reason="rollback"))
    assert kind == "exit" and back["current"]["generation"] == 3
    assert json.loads((node / "gen/current/benchmark-gate.json").read_text())["results"] == [1]
    assert os.readlink(str(node / "gen/current")) == "3"


def test_restore_after_a_switch_that_failed_half_way_goes_to_the_last_record(node, module_runner):
    """Links flipped but nothing recorded (the switch died): the rollback target is the current record."""
    module_runner(generation_record, params(node))
    os.unlink(str(node / "models/Kimi/current"))
    os.symlink("r2", str(node / "models/Kimi/current"))
    kind, back = module_runner(generation_record, params(node, state="restored"))
    assert back["restored_generation"] == 1 and os.readlink(str(node / "models/Kimi/current")) == "r1"
    # The drifted state was recorded first (generation 2): a second rollback rolls forward to it, as after a switch.
    assert back["current"]["generation"] == 3 and back["previous"]["generation"] == 2
    kind, forward = module_runner(generation_record, params(node, state="restored"))
    assert forward["restored_generation"] == 2 and os.readlink(str(node / "models/Kimi/current")) == "r2"


def test_no_previous_generation_is_a_clear_error_and_a_missing_target_changes_nothing(node, module_runner):
    module_runner(generation_record, params(node))
    kind, result = module_runner(generation_record, params(node, state="restored"))
    assert kind == "fail" and "nothing to roll back to" in result["msg"]
    bad = dict(target(node), release=str(node / "opt/releases/cccc"))
    kind, result = module_runner(generation_record, params(node, state="switched", target=bad))
    assert kind == "fail" and "does not exist: nothing was changed" in result["msg"]
    assert os.readlink(str(node / "opt/current")).endswith("aaaa")


def without_time(entries):
    """Diff entries with each record.json's recording time left out (check mode and the real run differ in it)."""
    out = []
    for entry in entries:
        if entry["after_header"].endswith("record.json"):
            entry = dict(entry, after=dict(json.loads(entry["after"]), recorded=None))
        out.append(entry)
    return out


def test_diff_of_a_record_is_its_record_json_and_a_no_op_has_none(node, module_runner):
    kind, plan = module_runner(generation_record, params(node, _ansible_diff=True), check_mode=True)
    assert kind == "exit" and plan["changed"] and not (node / "gen").exists()
    kind, first = module_runner(generation_record, params(node, _ansible_diff=True))
    path = str(node / "gen/1/record.json")
    assert [(d["before_header"], d["after_header"], d["before"]) for d in first["diff"]] == [(path, path, "")]
    assert first["diff"][0]["after"] == (node / "gen/1/record.json").read_text()
    assert json.loads(first["diff"][0]["after"]) == first["current"]
    assert without_time(plan["diff"]) == without_time(first["diff"])
    kind, again = module_runner(generation_record, params(node, _ansible_diff=True))
    assert kind == "exit" and not again["changed"] and "diff" not in again
    kind, again = module_runner(generation_record, params(node, _ansible_diff=True), check_mode=True)
    assert not again["changed"] and "diff" not in again


def test_diff_of_a_switch_shows_links_unit_and_records_and_check_mode_says_the_same(node, module_runner):
    kind, plan = module_runner(generation_record, params(node, state="switched", target=target(node),
                                                         _ansible_diff=True), check_mode=True)
    assert kind == "exit" and plan["changed"] and not (node / "gen").exists()
    assert "ExecStart=old" in (node / "etc/unit.service").read_text()  # check mode changed nothing
    unit = str(node / "etc/unit.service")
    headers = [d["after_header"] for d in plan["diff"]]
    assert headers == [str(node / "gen/1/record.json"), str(node / "opt/previous"), str(node / "opt/current"),
                       str(node / "models/Kimi/current"), unit, str(node / "gen/2/record.json")]
    by_path = dict((d["after_header"], d) for d in plan["diff"])
    assert by_path[unit]["before"] == "[Service]\nExecStart=old\n"
    assert by_path[unit]["after"] == "[Service]\nExecStart=new\n"
    assert by_path[str(node / "opt/current")]["before"] == {"path": str(node / "opt/current"),
                                                             "src": str(node / "opt/releases/aaaa")}
    assert by_path[str(node / "opt/current")]["after"]["src"] == str(node / "opt/releases/bbbb")
    assert by_path[str(node / "opt/previous")]["before"] == {"path": str(node / "opt/previous"), "state": "absent"}
    assert by_path[str(node / "models/Kimi/current")]["before"]["src"] == "r1"
    assert by_path[str(node / "models/Kimi/current")]["after"]["src"] == "r2"
    assert json.loads(by_path[str(node / "gen/2/record.json")]["after"])["model"] == str(node / "models/Kimi/r2")

    kind, switched = module_runner(generation_record, params(node, state="switched", target=target(node),
                                                             _ansible_diff=True))
    assert kind == "exit" and switched["changed"]
    assert without_time(switched["diff"]) == without_time(plan["diff"])
    assert json.loads(switched["diff"][-1]["after"]) == switched["current"]
    kind, nothing = module_runner(generation_record, params(node, state="switched", target=target(node),
                                                            _ansible_diff=True))
    assert kind == "exit" and not nothing["changed"] and "diff" not in nothing


def test_diff_of_a_restore_puts_the_old_unit_back_and_hides_a_root_only_file(node, module_runner):
    env = node / "etc/kimi.env"
    env.chmod(0o600)
    (node / "staged/kimi.env").write_text("HF_TOKEN=new\n")
    (node / "staged/kimi.env").chmod(0o600)
    switch = dict(target(node), files={str(node / "etc/unit.service"): str(node / "staged/unit.service"),
                                       str(env): str(node / "staged/kimi.env")})
    digests = [generation_record.sha256(str(f)) for f in (env, node / "staged/kimi.env")]
    module_runner(generation_record, params(node))
    kind, switched = module_runner(generation_record, params(node, state="switched", target=switch,
                                                             _ansible_diff=True))
    secret = [d for d in switched["diff"] if d["after_header"] == str(env)][0]
    assert [secret["before"], secret["after"]] == ["%s (not readable by others: content not shown)\n" % digest
                                                   for digest in digests]

    kind, plan = module_runner(generation_record, params(node, state="restored", _ansible_diff=True), check_mode=True)
    assert kind == "exit" and plan["changed"] and "ExecStart=new" in (node / "etc/unit.service").read_text()
    unit = [d for d in plan["diff"] if d["after_header"] == str(node / "etc/unit.service")][0]
    assert (unit["before"], unit["after"]) == ("[Service]\nExecStart=new\n", "[Service]\nExecStart=old\n")
    model = [d for d in plan["diff"] if d["after_header"] == str(node / "models/Kimi/current")][0]
    assert (model["before"]["src"], model["after"]["src"]) == ("r2", "r1")
    kind, back = module_runner(generation_record, params(node, state="restored", _ansible_diff=True))
    assert without_time(back["diff"]) == without_time(plan["diff"])
    assert back["diff"][-1]["after_header"] == str(node / "gen/3/record.json")
