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


FRAGMENTS = ROOT / "plugins" / "doc_fragments"


def _fragment(name):
    """The YAML of one of the collection's doc fragments, by its name in extends_documentation_fragment
    (blackwell.sglang.<file>[.<variable>]); None for another collection's."""
    parts = name.split(".")
    if parts[:2] != ["blackwell", "sglang"]:
        return None
    var = parts[3].upper() if len(parts) > 3 else "DOCUMENTATION"
    tree = ast.parse((FRAGMENTS / (parts[2] + ".py")).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == var:
            return yaml.safe_load(ast.literal_eval(node.value))
    raise AssertionError("no doc fragment %s" % name)


def _merged(doc):
    """DOCUMENTATION with the collection's own fragments merged in, as ansible-doc merges them."""
    doc = dict(doc)
    for name in doc.pop("extends_documentation_fragment", []):
        fragment = _fragment(name)
        for key, value in (fragment or {}).items():
            if isinstance(value, dict):
                assert not set(value) & set(doc.get(key) or {}), (name, key)
                doc[key] = dict(doc.get(key) or {}, **value)
            elif isinstance(value, list):
                doc[key] = (doc.get(key) or []) + value
    return doc


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
    parsed["DOCUMENTATION"] = _merged(parsed["DOCUMENTATION"])
    assert parsed["DOCUMENTATION"]["module"] == path.stem
    assert parsed["DOCUMENTATION"]["author"]
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


def test_shared_option_docs_are_written_once():
    """Issue 58: module doc blocks repeated the same options and attributes (34 duplicates pairs); what several
    modules document alike lives in plugins/doc_fragments/common.py, and no module writes it again."""
    shared = _fragment("blackwell.sglang.common.request_timeout")["options"]["request_timeout"]
    users = []
    for path in MODULES:
        docs = _strings(ast.parse(path.read_text()))
        raw = yaml.safe_load(docs["DOCUMENTATION"])
        assert "author" not in raw and "blackwell.sglang.common" in raw["extends_documentation_fragment"], path.name
        own = (raw.get("options") or {}).get("request_timeout")
        assert own is None or own != shared, "%s writes the shared request_timeout again" % path.name
        if "blackwell.sglang.common.request_timeout" in raw["extends_documentation_fragment"]:
            users.append(path.stem)
    assert len(users) >= 4
