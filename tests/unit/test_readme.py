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


def test_every_default_is_documented_in_argument_specs():
    for defaults in ROOT.glob("roles/*/defaults/main.yml"):
        role = defaults.parent.parent.name
        names = set((yaml.safe_load(defaults.read_text()) or {}))
        spec = yaml.safe_load((defaults.parent.parent / "meta" / "argument_specs.yml").read_text())
        documented = set(spec["argument_specs"]["main"].get("options") or {})
        assert names <= documented, f"{role}: undocumented defaults {sorted(names - documented)}"
        assert all(n.startswith(role + "_") for n in names), f"{role}: variables must carry the role prefix"


def test_readme_opens_with_the_two_commands_and_ci_runs_the_test_one():
    readme = (ROOT / "README.md").read_text()
    first_block = readme.split("```bash", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in first_block.strip().splitlines()]
    assert commands == ["scripts/sandbox-deploy.sh", "scripts/test.sh"]
    assert "scripts/test.sh" in (ROOT / ".ci" / "run").read_text()


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
    files += [p for d in ("modules", "module_utils", "filter", "action") for p in (ROOT / "plugins" / d).glob("*.py")
              if p.name != "__init__.py"]
    missing = sorted("%s/%s" % (p.parent.name, p.stem) for p in files if p.stem not in words)
    assert not missing, "docs/layout.md does not name %s" % ", ".join(missing)
