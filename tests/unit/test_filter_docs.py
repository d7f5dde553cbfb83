"""Every filter plugin that documents itself has DOCUMENTATION / EXAMPLES / RETURN that parse as YAML (a colon in a
description breaks ansible-doc and ansible-lint's loader while Python still imports the file)."""

import ast
import pathlib

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
FILTERS = sorted((ROOT / "plugins" / "filter").glob("*.py"))


@pytest.mark.parametrize("path", FILTERS, ids=[p.stem for p in FILTERS])
def test_filter_docs_parse(path):
    docs = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id in ("DOCUMENTATION", "EXAMPLES", "RETURN"):
            docs[node.targets[0].id] = yaml.safe_load(ast.literal_eval(node.value))
    if docs:
        assert set(docs) == {"DOCUMENTATION", "EXAMPLES", "RETURN"}, path.name
        assert isinstance(docs["DOCUMENTATION"].get("options"), dict)
