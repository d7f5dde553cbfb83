"""Every module's DOCUMENTATION, EXAMPLES and RETURN are valid YAML, ansible-doc renders it, and the documented
options are exactly the argument_spec's (a colon in a description breaks ansible-doc while lint still passes)."""

import ast
import os
import pathlib
import subprocess
import sys

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODULES = sorted((ROOT / "plugins" / "modules").glob("*.py"))


def _strings(tree):
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id in ("DOCUMENTATION", "EXAMPLES", "RETURN"):
                out[node.targets[0].id] = ast.literal_eval(node.value)
    return out


def _argument_spec(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "AnsibleModule":
            for kw in node.keywords:
                if kw.arg == "argument_spec" and isinstance(kw.value, ast.Call):
                    return {k.arg for k in kw.value.keywords}
                if kw.arg == "argument_spec" and isinstance(kw.value, ast.Dict):
                    return {ast.literal_eval(k) for k in kw.value.keys}
    return None


@pytest.mark.parametrize("path", MODULES, ids=[p.stem for p in MODULES])
def test_docs_parse_and_match_the_argument_spec(path):
    tree = ast.parse(path.read_text())
    docs = _strings(tree)
    assert set(docs) == {"DOCUMENTATION", "EXAMPLES", "RETURN"}, f"{path.name} lacks {docs.keys()}"
    parsed = {k: yaml.safe_load(v) for k, v in docs.items()}
    assert parsed["DOCUMENTATION"]["module"] == path.stem
    assert isinstance(parsed["EXAMPLES"], list) and parsed["EXAMPLES"]
    spec = _argument_spec(tree)
    action = ROOT / "plugins" / "action" / path.name
    if spec is None and action.exists():  # documentation of an action plugin: its _VALID_ARGS are the options
        for node in ast.walk(ast.parse(action.read_text())):
            if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "_VALID_ARGS":
                spec = set(ast.literal_eval(node.value.args[0]))
    assert spec is not None, "%s has neither an argument_spec nor an action plugin's _VALID_ARGS" % path.name
    assert set(parsed["DOCUMENTATION"].get("options") or {}) == spec


def test_ansible_doc_renders_every_module():
    names = ["blackwell.sglang." + p.stem for p in MODULES]
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(ROOT / ".collections"))
    result = subprocess.run([sys.executable, "-m", "ansible.cli.doc", "-t", "module", "--json", *names],
                            capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0 and "ERROR" not in result.stderr, result.stderr[-2000:]
