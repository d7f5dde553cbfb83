"""The docs stay true: each role README's variable table matches its meta/argument_specs.yml, and the README names
the two commands."""

import pathlib
import re
import subprocess
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_role_variable_tables_match_argument_specs():
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "role_docs.py"), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    roles = sorted(p.parent.parent.name for p in ROOT.glob("roles/*/meta/argument_specs.yml"))
    assert roles and all((ROOT / "roles" / r / "README.md").exists() for r in roles)
    readme = (ROOT / "README.md").read_text()
    assert all("(roles/%s/README.md)" % r in readme for r in roles), "the README links every role's README"


def test_a_stale_role_table_is_caught(tmp_path, monkeypatch):
    """The drift check fails on a role README whose table no longer matches (a new variable in the specs)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("role_docs", ROOT / "scripts" / "role_docs.py")
    role_docs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(role_docs)
    current = (ROOT / "roles" / "preflight" / "README.md").read_text()
    stale = current.replace("| `preflight_", "| `preflight_renamed_", 1)
    assert role_docs.readme("preflight", stale) == current
    assert role_docs.readme("preflight", current) == current


def test_readme_is_short_and_links_docs_that_exist():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.encode()) < 6500
    for link in re.findall(r"\]\(((?:docs|roles)/[^)]+)\)", readme):
        assert (ROOT / link).exists(), link


# The base role holds the option model of the roles whose choices every other role must know (what a node runs, where
# its router and gateway listen, what its build needs): roles/deployment/defaults/main/<role>.yml, each file the variables of that role.
BASE_ROLE_MODELS = {"sglang_service", "sglang_router", "sglang_gateway", "sglang_build"}


def test_every_default_is_documented_in_argument_specs():
    sys.path.insert(0, str(ROOT / "scripts"))
    from role_docs import role_defaults

    for defaults in ROOT.glob("roles/*/defaults"):
        role = defaults.parent.name
        names = set(role_defaults(role))
        spec = yaml.safe_load((defaults.parent / "meta" / "argument_specs.yml").read_text())
        documented = {n for entry in spec["argument_specs"].values() for n in (entry.get("options") or {})}
        assert names <= documented, f"{role}: undocumented defaults {sorted(names - documented)}"
        prefixes = (role,) + (tuple(sorted(BASE_ROLE_MODELS)) if role == "deployment" else ())
        assert all(n.startswith(tuple(p + "_" for p in prefixes)) for n in names), \
            f"{role}: variables must carry the role prefix"
    for model in BASE_ROLE_MODELS:
        names = set(yaml.safe_load((ROOT / "roles/deployment/defaults/main" / f"{model}.yml").read_text()))
        assert all(n.startswith(model + "_") for n in names), f"deployment/defaults/main/{model}.yml: {sorted(names)}"
        assert not names & set(role_defaults(model)), f"{model}: set in two places {sorted(names & set(role_defaults(model)))}"


def test_defaults_live_only_in_defaults_main_yml():
    """A default is set once: in the role's defaults/main.yml. The argument specs give types and meanings only, so a
    changed default cannot leave a stale copy in meta/argument_specs.yml (or in the README, rendered from both)."""
    for spec_file in ROOT.glob("roles/*/meta/argument_specs.yml"):
        for entry, spec in yaml.safe_load(spec_file.read_text())["argument_specs"].items():
            restated = sorted(n for n, opt in (spec.get("options") or {}).items() if "default" in opt)
            assert not restated, f"{spec_file}: entry {entry} restates defaults of {restated}"


def test_the_layout_doc_names_every_role_and_plugin():
    """docs/layout.md is the map of the collection: a role, module, filter file or module_util it does not name is a
    file the next engineer cannot find from it (it went stale before: seven module_utils and two filters unnamed)."""
    layout = (ROOT / "docs" / "layout.md").read_text()
    words = set(re.findall(r"[A-Za-z0-9_]+", layout))
    files = [p for d in ("roles",) for p in (ROOT / d).iterdir() if p.is_dir()]
    files += [p for d in ("modules", "module_utils", "plugin_utils", "filter", "action")
              for p in (ROOT / "plugins" / d).rglob("*.py") if p.name != "__init__.py"]
    missing = sorted("%s/%s" % (p.parent.name, p.stem) for p in files if p.stem not in words)
    assert not missing, "docs/layout.md does not name %s" % ", ".join(missing)
