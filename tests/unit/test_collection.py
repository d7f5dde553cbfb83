"""The checkout is the collection blackwell.sglang: what the tarball holds, how the checkout resolves itself, FQCNs
in every playbook and role, and one way for tests to import a plugin."""

import configparser
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
FQ = "blackwell.sglang."
PLUGIN_NAMES = {kind: sorted(p.stem for p in (ROOT / "plugins" / kind).rglob("*.py") if p.stem != "__init__")
                for kind in ("modules", "action", "filter", "module_utils", "plugin_utils")}
ALL_PLUGINS = "|".join(sorted(set(sum(PLUGIN_NAMES.values(), []))))
UTILS = PLUGIN_NAMES["module_utils"] + PLUGIN_NAMES["plugin_utils"]
YAML_DIRS = ("roles", "playbooks", "molecule")


def _yaml_files():
    files = [ROOT / "deploy.yml"]
    for d in YAML_DIRS:
        files += sorted((ROOT / d).rglob("*.yml"))
    return files


def _filter_names():
    """Every filter the collection's filter plugins define (tests/conftest.py puts .collections on sys.path)."""
    names = set()
    for stem in PLUGIN_NAMES["filter"]:
        mod = __import__("ansible_collections.blackwell.sglang.plugins.filter." + stem, fromlist=["FilterModule"])
        names |= set(mod.FilterModule().filters())
    return names


@pytest.fixture(scope="module")
def tarball(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "ansible.cli.galaxy", "collection", "build", "--output-path", str(out),
                    str(ROOT)], check=True, capture_output=True, timeout=120)
    (path,) = out.glob("blackwell-sglang-*.tar.gz")
    return path


def test_galaxy_yml_names_the_collection_and_its_version():
    galaxy = yaml.safe_load((ROOT / "galaxy.yml").read_text())
    assert (galaxy["namespace"], galaxy["name"]) == ("blackwell", "sglang")
    assert re.match(r"^\d+\.\d+\.\d+$", galaxy["version"])
    assert galaxy["license"] == ["GPL-3.0-or-later"] and (ROOT / "LICENSE").read_text().startswith(
        "                    GNU GENERAL PUBLIC LICENSE\n                       Version 3")
    changes = yaml.safe_load((ROOT / "changelogs" / "changelog.yaml").read_text())
    assert galaxy["version"] in changes["releases"], "the version has no changelog release"
    assert yaml.safe_load((ROOT / "meta" / "runtime.yml").read_text())["requires_ansible"].startswith(">=2.19")


def test_every_role_and_module_says_the_one_license():
    for meta in (ROOT / "roles").glob("*/meta/main.yml"):
        assert yaml.safe_load(meta.read_text())["galaxy_info"]["license"] == "GPL-3.0-or-later", meta
    for module in (ROOT / "plugins" / "modules").glob("*.py"):
        assert "GNU General Public License v3.0+" in module.read_text()[:600], module


def test_the_tarball_ships_the_product_and_leaves_the_harness_out(tarball):
    with tarfile.open(tarball) as tar:
        names = set(tar.getnames())
    for wanted in ("MANIFEST.json", "LICENSE", "CHANGELOG.md", "meta/runtime.yml", "playbooks/deploy.yml",
                   "playbooks/rolling_redeploy.yml", "playbooks/rollback.yml", "plugins/data/sglang_cli_0.5.23.json",
                   "plugins/data/sglang_router_cli_0.3.2.json", "roles/model_stage/files/hf_snapshot.py",
                   "tests/sanity/ignore-2.19.txt"):
        assert wanted in names, wanted
    for unwanted in (".collections", "tests/sandbox", "tests/unit", "tests/standins", "tests/contract", "molecule", ".config", "benchmarks",
                     "scripts", "inventory", ".venv", ".sandbox", ".cache", "tests/sandbox/playbooks/sandbox.yml",
                     "tests/sandbox/playbooks/sandbox_prepare.yml", "deploy.yml", "ansible.cfg"):
        assert not [n for n in names if n == unwanted or n.startswith(unwanted + "/")], unwanted
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_the_installed_copy_loads_its_argparse_snapshot_by_package_relative_path(tarball, tmp_path):
    """The argv filter of the installed collection, imported with only its collections path, finds plugins/data."""
    dest = tmp_path / "collections"
    subprocess.run([sys.executable, "-m", "ansible.cli.galaxy", "collection", "install", "--no-deps", "-p",
                    str(dest), str(tarball)], check=True, capture_output=True, timeout=120,
                   env=dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(dest)))
    version = yaml.safe_load((ROOT / "roles" / "deployment" / "defaults" / "main" / "main.yml").read_text())[
        "deployment_sglang_version"]
    code = ("import sys; sys.path.insert(0, sys.argv[1]); "
            "from ansible_collections.blackwell.sglang.plugins.filter import sglang_argv as f; "
            "print(f.__file__); print(f.sglang_argv({'tp-size': 8}, sys.argv[2]))")
    out = subprocess.run([sys.executable, "-c", code, str(dest), version], capture_output=True, text=True,
                         check=True, timeout=60, cwd=tmp_path).stdout.splitlines()
    assert out[0].startswith(str(dest)) and out[1] == "['--tp-size', '8']"


def test_the_checkout_resolves_itself_as_the_collection_and_has_no_short_name_paths():
    link = ROOT / ".collections" / "ansible_collections" / "blackwell" / "sglang"
    assert link.is_symlink() and link.resolve() == ROOT
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "ansible.cfg")
    assert cfg["defaults"]["collections_path"].split(":")[0] == ".collections"
    for key in ("library", "module_utils", "action_plugins", "roles_path"):
        assert key not in cfg["defaults"], key
    # the harness's own filters only
    assert cfg["defaults"]["filter_plugins"] == "tests/sandbox/plugins/filter"
    lint = yaml.safe_load((ROOT / ".ansible-lint").read_text())
    assert ".collections/" in lint["exclude_paths"]
    assert ".collections" in yaml.safe_load((ROOT / "galaxy.yml").read_text())["build_ignore"]


def test_playbooks_and_roles_call_modules_filters_and_roles_by_fqcn():
    roles = sorted(p.name for p in (ROOT / "roles").iterdir() if p.is_dir())
    modules = PLUGIN_NAMES["modules"]
    # block style (`name: preflight`), flow style (`{name: monitoring, tasks_from: ...}`), role names in a loop
    role_ref = re.compile(r"(?:^\s*(?:-\s+)?|[{,]\s*)(?:role|name):\s*(%s)\s*(?:[,}#]|$)" % "|".join(roles))
    role_loop = re.compile(r"^\s*loop:\s*\[(?:[^\]]*,)?\s*(%s)\s*[,\]]" % "|".join(roles))
    module_key = re.compile(r"^\s*(?:-\s+)?(%s):\s*(?:#.*)?$" % "|".join(modules))
    filter_use = re.compile(r"\|\s*(%s)\b" % "|".join(sorted(_filter_names())))
    short = []
    for path in _yaml_files() + sorted((ROOT / "roles").rglob("*.j2")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if role_ref.search(line) or role_loop.match(line) or module_key.match(line) or filter_use.search(line):
                short.append("%s:%d: %s" % (path.relative_to(ROOT), number, line.strip()))
    assert not short, "short names (use blackwell.sglang.<name>):\n" + "\n".join(short)


def test_role_dependencies_are_fqcn():
    for meta in (ROOT / "roles").glob("*/meta/main.yml"):
        for dep in yaml.safe_load(meta.read_text()).get("dependencies") or []:
            name = dep["role"] if isinstance(dep, dict) else dep
            assert name.startswith(FQ), (meta, name)


def test_tests_import_plugins_one_way():
    """Every plugin is imported as ansible_collections.blackwell.sglang.plugins.<type>.<name>: no file-path
    loading of plugins, no plugins/ directory on sys.path, no ansible.module_utils path patch, no bare name."""
    bare = re.compile(r"^\s*import (%s)\b" % ALL_PLUGINS, re.M)
    banned = [
        (re.compile(r"spec_from_file_location\([^)]*[\"']plugins[\"']"), "a plugin loaded by file path"),
        (re.compile(r"sys\.path\.(?:insert|append)\([^)]*[\"']plugins[\"']"), "plugins/ on sys.path"),
        (re.compile(r"module_utils\.__path__"), "an ansible.module_utils path patch"),
        (re.compile(r"from ansible\.module_utils\.(%s)\b" % "|".join(UTILS)),
         "this collection's module_utils under ansible.module_utils"),
        (bare, "a bare plugin import"),
        (re.compile(r"^\s*from (%s) import" % ALL_PLUGINS, re.M),
         "a plugin imported by its bare module name"),
        (re.compile(r"from ansible\.module_utils import [^\n]*\b(%s)\b" % "|".join(UTILS)),
         "this collection's module_utils from ansible.module_utils"),
    ]
    found = []
    files = sorted((ROOT / "tests" / "unit").rglob("*.py")) + sorted((ROOT / "tests" / "contract").rglob("*.py"))
    files += sorted((ROOT / "benchmarks").glob("*.py")) + [ROOT / "tests" / "conftest.py"]
    for path in files:
        if path == Path(__file__):
            continue
        text = path.read_text()
        for pattern, what in banned:
            for match in pattern.finditer(text):
                found.append("%s: %s (%s)" % (path.relative_to(ROOT), what, match.group(0).strip()))
    assert not found, "\n".join(found)
    assert "ansible_collections.blackwell.sglang.plugins" in (ROOT / "tests" / "unit" / "plugins" / "modules"
                                                              / "test_model_stage.py").read_text()


def test_ad_hoc_module_calls_are_fqcn():
    """``ansible -m <module>`` in the scripts, benchmarks and harness names this collection's modules by FQCN (the
    rolling benchmark's lock case called ``-m rollout_lock``, which no path resolves any more)."""
    names = "|".join(PLUGIN_NAMES["modules"])
    short = re.compile(r"""(?:["']-m["'],\s*["']|-m\s+)(%s)\b""" % names)
    found = []
    for path in sorted((ROOT / "benchmarks").glob("*.py")) + sorted((ROOT / "scripts").glob("*")) + sorted(
            (ROOT / "tests").rglob("*.py")) + sorted((ROOT / "molecule").rglob("*.yml")):
        if path.is_file() and path != Path(__file__):
            found += ["%s: %s" % (path.relative_to(ROOT), m.group(0)) for m in short.finditer(path.read_text())]
    assert not found, "\n".join(found)

