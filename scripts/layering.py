#!/usr/bin/env python3
"""The collection's layering, counted (issue 39): what includes what, and which contracts are declared.

    python scripts/layering.py

Prints, from the YAML of roles/, playbooks/ and molecule/:
- every ``include_role``/``import_role`` with ``tasks_from`` (caller -> role:entry point), and those that cross roles
  only to read facts (a target whose tasks are all set_fact/assert/debug/fail);
- the roles the base role (deployment) includes;
- the entry points run through ``tasks_from`` that have no argument spec (ansible-core validates only the entry point
  it runs, so a missing one is never noticed), and the argument-spec entry points with no task file;
- how many tasks work out the SGLang options (sglang_service_effective_options) and how often deploy.yml runs them.
tests/unit/test_layering.py asserts the counts the issue asks for.
"""

import pathlib
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
INCLUDES = ("ansible.builtin.include_role", "ansible.builtin.import_role", "include_role", "import_role")
FACT_ONLY = {"ansible.builtin.set_fact", "ansible.builtin.assert", "ansible.builtin.debug", "ansible.builtin.fail"}
NOT_MODULES = {"name", "when", "vars", "tags", "loop", "loop_control", "register", "block", "rescue", "always",
               "changed_when", "failed_when", "check_mode", "no_log", "delegate_to", "run_once", "become",
               "become_user", "environment", "listen", "notify", "until", "retries", "delay", "ignore_errors",
               "any_errors_fatal", "throttle", "args", "module_defaults", "timeout", "diff", "delegate_facts"}


def _tasks(node):
    """Every task of a task list, blocks flattened."""
    for task in node or []:
        if not isinstance(task, dict):
            continue
        yield task
        for key in ("block", "rescue", "always", "tasks", "pre_tasks", "post_tasks", "handlers"):
            yield from _tasks(task.get(key))


def _yaml_files():
    for pattern in ("roles/*/tasks/*.yml", "roles/*/handlers/*.yml", "playbooks/*.yml", "playbooks/tasks/*.yml",
                    "deploy.yml", "molecule/*/*.yml", "molecule/*/tasks/*.yml", "tests/sandbox/playbooks/*.yml"):
        yield from sorted(ROOT.glob(pattern))


def _short(role):
    return role.rsplit(".", 1)[-1]


def includes():
    """(caller file, target role, entry point) of every include_role/import_role."""
    out = []
    for path in _yaml_files():
        for task in _tasks(yaml.safe_load(path.read_text())):
            for key in INCLUDES:
                if isinstance(task.get(key), dict):
                    args = task[key]
                    out.append((path.relative_to(ROOT).as_posix(), _short(args["name"]),
                                args.get("tasks_from", "main").removesuffix(".yml")))
    return out


def _caller_role(caller):
    parts = caller.split("/")
    return parts[1] if parts[0] == "roles" else None


def _modules(role, entry):
    path = ROOT / "roles" / role / "tasks" / f"{entry}.yml"
    mods = set()
    for task in _tasks(yaml.safe_load(path.read_text()) if path.exists() else []):
        if any(k in task for k in ("block",)):
            continue
        mods |= {k for k in task if k not in NOT_MODULES}
    return mods


def fact_only_edges():
    """Cross-role includes whose target only works facts out."""
    return [(c, r, e) for c, r, e in includes()
            if _caller_role(c) not in (None, r) and e != "main" and _modules(r, e) <= FACT_ONLY]


def base_role_includes():
    return [(c, r, e) for c, r, e in includes() if _caller_role(c) == "deployment"]


def _specs(role):
    path = ROOT / "roles" / role / "meta" / "argument_specs.yml"
    return (yaml.safe_load(path.read_text()) or {}).get("argument_specs", {}) if path.exists() else {}


def entry_points_without_spec():
    """Entry points run through tasks_from (or a role's main) that have no argument spec."""
    missing = set()
    for _caller, role, entry in includes():
        if (ROOT / "roles" / role).is_dir() and entry not in _specs(role):
            missing.add(f"{role}:{entry}")
    for role_dir in sorted((ROOT / "roles").iterdir()):
        for task_file in sorted((role_dir / "tasks").glob("*.yml")):
            if task_file.stem == "main" and "main" not in _specs(role_dir.name):
                missing.add(f"{role_dir.name}:main")
    return sorted(missing)


def specs_without_tasks():
    """Argument-spec entry points with no task file (a spec that never runs); a role with defaults only (the base
    role) validates its main spec as every role's dependency."""
    out = []
    for role_dir in sorted((ROOT / "roles").iterdir()):
        for entry in _specs(role_dir.name):
            has_tasks = (role_dir / "tasks" / f"{entry}.yml").exists()
            if not has_tasks and not (entry == "main" and role_dir.name == "deployment"):
                out.append(f"{role_dir.name}:{entry}")
    return out


# The layers, bottom up: the base role (facts, no node tasks); internal roles (marked "Internal:" in their
# galaxy_info.description: what several stages share, never named by a playbook); the stages in deploy.yml's order; the
# rollout layer (roles that compose stages: generation, sglang_rotation, release_wheelhouse) and the playbooks.
# A stage includes only itself, the base and internal roles; an internal role only the base and internal roles.
BASE = "deployment"
STAGES = ("preflight", "host_prerequisites", "cuda_toolkit", "flashinfer_build", "sglang_build", "model_stage",
          "sglang_service", "smoke_health", "sglang_router", "monitoring")


def internal_roles():
    """Roles marked internal: galaxy_info.description starts with "Internal:"."""
    out = []
    for meta in sorted(ROOT.glob("roles/*/meta/main.yml")):
        info = (yaml.safe_load(meta.read_text()) or {}).get("galaxy_info") or {}
        if str(info.get("description", "")).startswith("Internal:"):
            out.append(meta.parent.parent.name)
    return out


def layer_violations():
    """(caller, role:entry, why) for each include that breaks the layering: a stage including another stage or a
    rollout role (upward or sideways), an internal role including anything above it, a playbook or scenario naming an
    internal role."""
    internal, out = set(internal_roles()), []
    for caller, role, entry in includes():
        owner = _caller_role(caller)
        below = role == BASE or role in internal
        if owner in STAGES and owner != role and not below:
            out.append((caller, f"{role}:{entry}", "a stage includes %s" % (
                "a later stage" if role in STAGES and STAGES.index(role) > STAGES.index(owner) else
                "an earlier stage" if role in STAGES else "a role above the stages")))
        elif owner in internal and owner != role and not below:
            out.append((caller, f"{role}:{entry}", "an internal role includes a role above it"))
        elif owner is None and role in internal and not caller.startswith("molecule/"):
            out.append((caller, f"{role}:{entry}", "a playbook names an internal role"))
    return out


def option_derivations():
    """(tasks that work out sglang_service_effective_options, times deploy.yml runs the file that holds them)."""
    holders = []
    for path in _yaml_files():
        for task in _tasks(yaml.safe_load(path.read_text())):
            facts = task.get("ansible.builtin.set_fact") or {}
            if isinstance(facts, dict) and "sglang_service_effective_options" in facts:
                holders.append(path.relative_to(ROOT).as_posix())
    runs = sum(1 for c, r, e in includes()
               if c == "playbooks/deploy.yml" and f"roles/{r}/tasks/{e}.yml" in holders)
    return holders, runs


def main():
    edges = includes()
    fact_only = fact_only_edges()
    holders, runs = option_derivations()
    counts = {
        "cross-role include_role/import_role tasks_from edges": sum(
            1 for c, r, e in edges if _caller_role(c) not in (None, r) and e != "main"),
        "cross-role tasks_from edges that only read facts": len(fact_only),
        "roles the base role includes": len(base_role_includes()),
        "tasks that work out the SGLang options": len(holders),
        "times deploy.yml runs them per node": runs,
        "tasks_from targets without an argument spec": len(entry_points_without_spec()),
        "argument-spec entry points without a task file": len(specs_without_tasks()),
        "upward or sideways edges out of stage and internal roles": len(layer_violations()),
    }
    for name, value in counts.items():
        print(f"{name}: {value}")
    for caller, role, entry in fact_only:
        print(f"  fact-only: {caller} -> {role}:{entry}")
    for item in entry_points_without_spec():
        print(f"  no argument spec: {item}")
    for item in specs_without_tasks():
        print(f"  spec without tasks: {item}")
    print("internal roles: " + ", ".join(internal_roles()))
    for caller, target, why in layer_violations():
        print(f"  layering: {caller} -> {target} ({why})")
    return counts


if __name__ == "__main__":
    main()
    sys.exit(0)
