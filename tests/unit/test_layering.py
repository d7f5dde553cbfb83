"""The layering of issue 39, counted by scripts/layering.py and printed (pytest -s shows the figures).

What a node will run is derived once, in the base role (roles/deployment/vars/main.yml), and published by the
inventory check; no role includes another's task file to learn a fact; every entry point a caller runs through
tasks_from has an argument spec (ansible-core validates only the entry point it runs, so a missing spec is never
noticed), and no spec is declared for tasks that do not exist.
"""

import pathlib
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import layering  # noqa: E402


def test_counts_the_issue_asks_for():
    counts = layering.main()
    assert counts["roles the base role includes"] == 0
    assert counts["tasks that work out the SGLang options"] == 1
    assert counts["times deploy.yml runs them per node"] == 1
    assert counts["tasks_from targets without an argument spec"] == 0
    assert counts["argument-spec entry points without a task file"] == 0
    assert counts["cross-role tasks_from edges that only read facts"] == 0


def test_the_counter_sees_what_it_counts(tmp_path, monkeypatch):
    """The counter itself: a fact-only include across roles, a base-role include and a spec-less entry point are
    each found (else the zeros above prove nothing)."""
    roles = tmp_path / "roles"
    for role in ("deployment", "a", "b"):
        (roles / role / "tasks").mkdir(parents=True)
        (roles / role / "meta").mkdir()
    (roles / "b" / "tasks" / "facts.yml").write_text(yaml.safe_dump([
        {"name": "x", "ansible.builtin.set_fact": {"b_x": 1}}]))
    (roles / "a" / "tasks" / "main.yml").write_text(yaml.safe_dump([
        {"name": "read", "ansible.builtin.include_role": {"name": "ns.c.b", "tasks_from": "facts"}}]))
    (roles / "a" / "meta" / "argument_specs.yml").write_text(yaml.safe_dump(
        {"argument_specs": {"main": {"options": {}}, "gone": {"options": {}}}}))
    (roles / "deployment" / "tasks" / "validate.yml").write_text(yaml.safe_dump([
        {"name": "inc", "ansible.builtin.include_role": {"name": "ns.c.a"}}]))
    (roles / "deployment" / "meta" / "argument_specs.yml").write_text(yaml.safe_dump(
        {"argument_specs": {"main": {"options": {}}, "validate": {"options": {}}}}))
    monkeypatch.setattr(layering, "ROOT", tmp_path)
    assert layering.fact_only_edges() == [("roles/a/tasks/main.yml", "b", "facts")]
    assert layering.base_role_includes() == [("roles/deployment/tasks/validate.yml", "a", "main")]
    assert layering.entry_points_without_spec() == ["b:facts"]
    assert layering.specs_without_tasks() == ["a:gone"]


def test_a_nodes_switch_and_rollback_are_entry_points_the_playbooks_call():
    """Issue 39: one node's switch was spread over 14 files in 5 roles, and the rolling redeploy's rescue repeated
    rollback.yml. Now the playbooks call generation's switch_node and rollback_node, which hold every step."""
    edges = layering.includes()
    by_caller = {}
    for caller, role, entry in edges:
        by_caller.setdefault(caller, []).append(f"{role}:{entry}")
    assert "generation:switch_node" in by_caller["playbooks/rolling_redeploy.yml"]
    assert [e for e in by_caller["playbooks/rollback.yml"] if not e.startswith("rollout:")] == [
        "deployment:validate", "generation:rollback_node"]
    # issue 59: every playbook that takes nodes out of rotation takes the fleet's lock, and releases it (roles/rollout)
    for caller in ("rolling_redeploy", "rollback", "remove_node", "benchmark"):
        assert {"rollout:lock", "rollout:unlock"} <= set(by_caller["playbooks/%s.yml" % caller]), caller
    steps = {"sglang_rotation:out", "sglang_rotation:in", "monitoring:silence_node", "monitoring:unsilence_node",
             "smoke_health:main", "smoke_health:report", "generation:switch", "generation:rollback",
             "generation:prune_models"}
    for caller in ("playbooks/rolling_redeploy.yml", "playbooks/rollback.yml"):
        assert not steps & set(by_caller[caller]), (caller, sorted(steps & set(by_caller[caller])))

    for entry in ("switch_node", "rollback_node"):
        tasks = yaml.safe_load((ROOT / "roles" / "generation" / "tasks" / f"{entry}.yml").read_text())
        assert len(tasks) == 1 and "block" in tasks[0] and "always" in tasks[0], entry
        silenced = [t.get("ansible.builtin.include_role", {}).get("tasks_from") for t in tasks[0]["block"]]
        lifted = [t.get("ansible.builtin.include_role", {}).get("tasks_from") for t in tasks[0]["always"]]
        assert "silence_node" in silenced and lifted == ["unsilence_node"], entry
    rescue = yaml.safe_load((ROOT / "roles/generation/tasks/switch_node.yml").read_text())[0]["rescue"]
    included = [t.get("ansible.builtin.include_tasks") for t in rescue]
    # the rescue restores and rejoins with rollback_node's own steps
    assert {"restore.yml", "rejoin.yml"} <= set(included)
    rollback = yaml.safe_load((ROOT / "roles/generation/tasks/rollback_node.yml").read_text())[0]["block"]
    assert {"restore.yml", "rejoin.yml"} <= {t.get("ansible.builtin.include_tasks") for t in rollback}


def test_preparing_a_release_is_an_entry_point_not_a_flag():
    """Issue 39: the rolling redeploy's prepare switched three roles into a second mode with play variables
    (*_activate: false), invisible at the call site. Now each has tasks_from stage, and no caller sets the mode."""
    edges = layering.includes()
    prepare = {f"{r}:{e}" for c, r, e in edges if c == "playbooks/rolling_redeploy.yml"}
    assert {"sglang_build:stage", "model_stage:stage", "sglang_service:stage"} <= prepare
    for role in ("sglang_build", "model_stage", "sglang_service"):
        specs = yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())["argument_specs"]
        assert "stage" in specs and f"{role}_activate" not in specs["main"]["options"], role
        assert f"{role}_activate" not in (yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text()))
    for path in list((ROOT / "playbooks").glob("*.yml")) + list((ROOT / "molecule").rglob("*.yml")):
        assert "_activate:" not in path.read_text(), path


def test_stages_include_only_their_own_tasks_the_base_and_internal_roles():
    """Issue 58: sglang_build included sglang_service's account and probe (a later stage) and preflight included the
    plans of two later stages. The account, the probe and its script are the internal sglang_runtime role's, included
    downward by the build, the service and the rollout; preflight reads the plans the playbook layer works out first
    (playbooks/tasks/preflight.yml); sglang_service's stage is its own entry point, not main with a flag."""
    assert layering.layer_violations() == []
    assert layering.internal_roles() == ["sglang_gateway", "sglang_runtime", "source_build"]
    assert (ROOT / "roles" / "sglang_runtime" / "files" / "release_probe.py").exists()
    assert not list((ROOT / "roles" / "sglang_build" / "files").glob("*.py"))
    edges = {(c, f"{r}:{e}") for c, r, e in layering.includes()}
    for caller in ("roles/sglang_build/tasks/build.yml", "roles/sglang_service/tasks/render.yml",
                   "roles/generation/tasks/switch.yml"):
        assert any(c == caller and t == "sglang_runtime:probe" for c, t in edges), caller
    assert ("playbooks/tasks/preflight.yml", "model_stage:plan") in edges
    stage = (ROOT / "roles" / "sglang_service" / "tasks" / "stage.yml").read_text()
    assert "include_tasks: main.yml" not in stage and "render.yml" in stage
    assert not (ROOT / "roles" / "sglang_service" / "vars" / "main.yml").exists()
    for path in (ROOT / "roles" / "sglang_service" / "tasks").glob("*.yml"):
        assert "sglang_service_activate" not in path.read_text(), path


def test_the_layering_rule_names_each_kind_of_break(tmp_path, monkeypatch):
    """A stage that includes a later stage, an internal role that includes a stage, a playbook that names an internal
    role: each is reported with why."""
    roles = tmp_path / "roles"
    for role in ("deployment", "sglang_build", "sglang_service", "sglang_runtime"):
        (roles / role / "tasks").mkdir(parents=True)
        (roles / role / "meta").mkdir()
        (roles / role / "meta" / "main.yml").write_text(yaml.safe_dump({"galaxy_info": {
            "description": "Internal: below the stages" if role == "sglang_runtime" else "a role"}}))

    def include(role, entry):
        return {"name": "x", "ansible.builtin.include_role": {"name": "blackwell.sglang." + role, "tasks_from": entry}}

    (roles / "sglang_build" / "tasks" / "main.yml").write_text(yaml.safe_dump([
        include("sglang_service", "probe"), include("sglang_runtime", "probe"), include("deployment", "validate")]))
    (roles / "sglang_runtime" / "tasks" / "probe.yml").write_text(yaml.safe_dump([include("sglang_build", "main")]))
    (roles / "sglang_service" / "tasks" / "main.yml").write_text(yaml.safe_dump([include("sglang_build", "main")]))
    (tmp_path / "playbooks").mkdir()
    (tmp_path / "playbooks" / "x.yml").write_text(yaml.safe_dump([{"hosts": "all", "tasks": [
        include("sglang_runtime", "account")]}]))
    monkeypatch.setattr(layering, "ROOT", tmp_path)
    assert layering.internal_roles() == ["sglang_runtime"]
    assert sorted(layering.layer_violations()) == [
        ("playbooks/x.yml", "sglang_runtime:account", "a playbook names an internal role"),
        ("roles/sglang_build/tasks/main.yml", "sglang_service:probe", "a stage includes a later stage"),
        ("roles/sglang_runtime/tasks/probe.yml", "sglang_build:main", "an internal role includes a role above it"),
        ("roles/sglang_service/tasks/main.yml", "sglang_build:main", "a stage includes an earlier stage"),
    ]


def test_the_unit_tests_mirror_the_plugins_by_package():
    """Issue 58: 16 plugin tests sat at the top of tests/unit and tests/unit/plugins/module_utils was flat against six
    packages. Now a plugin's tests live under tests/unit/plugins/<kind>/[<package>/], beside no other kind's, and the
    top of tests/unit holds only the repository-wide checks (layering, docs, collection, inventory check)."""
    unit = ROOT / "tests" / "unit"
    for test in (unit / "plugins").rglob("test_*.py"):
        rel = test.parent.relative_to(unit)
        assert (ROOT / rel).is_dir(), "%s has no %s to mirror" % (test.relative_to(ROOT), rel)
    packages = [p.name for p in (ROOT / "plugins" / "module_utils").iterdir() if (p / "__init__.py").exists()]
    assert sorted(packages) == ["fleet", "health", "host", "http", "perf", "staging"]
    for package in packages:
        assert list((unit / "plugins" / "module_utils" / package).glob("test_*.py")), package
    assert not list((unit / "plugins" / "module_utils").glob("test_*.py"))
    plugins = {p.stem for p in (ROOT / "plugins").rglob("*.py")}
    top = sorted(p.stem.removeprefix("test_") for p in unit.glob("test_*.py"))
    assert not set(top) & plugins, sorted(set(top) & plugins)
    assert len(top) <= 15, top


def test_plugins_stay_a_size_a_reader_holds_in_mind():
    """Issue 58: staging/model_sources.py had grown to 649 lines and sglang_verdict's classify to 166. A plugin file
    stays within 500 lines and a function within 80 (its docstring included), each split by what it does."""
    import ast

    big, long = [], []
    for path in sorted((ROOT / "plugins").rglob("*.py")):
        text = path.read_text()
        if text.count("\n") > 500:
            big.append("%s (%d lines)" % (path.relative_to(ROOT), text.count("\n")))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 80:
                long.append("%s:%s (%d lines)" % (path.relative_to(ROOT), node.name, node.end_lineno - node.lineno + 1))
    assert not big and not long, big + long


def test_private_helpers_are_marked_and_have_one_user():
    """Issue 58: a helper used by one plugin alone is private to it, marked as community.general marks one: its name
    starts with _ (module_utils and plugin_utils), and nothing but that one user imports it."""
    import re

    helpers = sorted(p for d in ("module_utils", "plugin_utils") for p in (ROOT / "plugins" / d).rglob("*.py")
                     if p.name != "__init__.py")
    sources = {p: p.read_text() for d in ("plugins", "benchmarks", "tests/sandbox") for p in (ROOT / d).rglob("*.py")}
    wrong = []
    for helper in helpers:
        dotted = ".".join(helper.relative_to(ROOT / "plugins").with_suffix("").parts)
        package, name = dotted.rsplit(".", 1)
        # imported by its dotted path, from its package, or loaded by name ("health.sglang_observe": crash_to_verdict)
        pattern = re.compile(r"%s\b|%s import [^\n]*\b%s\b|[\"']%s[\"']" % (
            re.escape(dotted), re.escape(package), name, re.escape(dotted.split(".", 1)[1])))
        users = [p for p, text in sources.items() if p != helper and pattern.search(text)]
        if name.startswith("_") and len(users) != 1:
            wrong.append("%s is marked private but has %d users" % (dotted, len(users)))
        if not name.startswith("_") and len(users) == 1:
            wrong.append("%s has one user (%s): mark it private (_%s)" % (dotted, users[0].name, name))
    assert not wrong, wrong
    assert len([h for h in helpers if h.name.startswith("_")]) >= 14
