"""Every filter plugin that documents itself has DOCUMENTATION / EXAMPLES / RETURN that parse as YAML (a colon in a
description breaks ansible-doc and ansible-lint's loader while Python still imports the file).

A file that exports several filters documents each in a sidecar, plugins/filter/<filter name>.yml (top-level keys
DOCUMENTATION, EXAMPLES, RETURN, as ansible-core's own lib/ansible/plugins/filter/*.yml). ansible-doc resolves a
filter to the .py that exports it and reads that file's own DOCUMENTATION first; only a .py without one sends it to
the sidecar named after the filter (ansible/utils/plugin_docs.py, find_plugin_docfile and get_plugin_docs). So a .py
with DOCUMENTATION documents its one filter, and hides the sidecars of every other filter it exports.
"""

import ast
import importlib
import inspect
import pathlib

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
FILTER_DIR = ROOT / "plugins" / "filter"
FILTERS = sorted(FILTER_DIR.glob("*.py"))
SIDECARS = sorted(FILTER_DIR.glob("*.yml"))
DOC_KEYS = {"DOCUMENTATION", "EXAMPLES", "RETURN"}


def _inline_docs(path):
    """The parsed DOCUMENTATION / EXAMPLES / RETURN strings of a filter .py ({} when it has none)."""
    docs = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id in DOC_KEYS:
            docs[node.targets[0].id] = yaml.safe_load(ast.literal_eval(node.value))
    return docs


def _exported():
    """Every filter the collection exports: name -> (the .py exporting it, the function)."""
    out = {}
    for path in FILTERS:
        module = importlib.import_module("ansible_collections.blackwell.sglang.plugins.filter." + path.stem)
        for name, func in module.FilterModule().filters().items():
            assert name not in out, "%s is exported by both %s and %s" % (name, out[name][0].name, path.name)
            out[name] = (path, func)
    return out


@pytest.mark.parametrize("path", FILTERS, ids=[p.stem for p in FILTERS])
def test_filter_docs_parse(path):
    docs = _inline_docs(path)
    if docs:
        assert set(docs) == DOC_KEYS, path.name
        assert isinstance(docs["DOCUMENTATION"].get("options"), dict)


@pytest.mark.parametrize("path", SIDECARS, ids=[p.stem for p in SIDECARS])
def test_filter_sidecar_docs(path):
    docs = yaml.safe_load(path.read_text())
    assert isinstance(docs, dict) and DOC_KEYS <= set(docs), "%s lacks %s" % (path.name, DOC_KEYS - set(docs or {}))
    doc = docs["DOCUMENTATION"]
    assert doc["name"] == path.stem
    options = doc.get("options")
    assert isinstance(options, dict) and "_input" in options, path.name
    assert isinstance(docs["EXAMPLES"], str) and docs["EXAMPLES"].strip(), path.name
    yaml.safe_load(docs["EXAMPLES"])
    assert isinstance(docs["RETURN"], dict) and "_value" in docs["RETURN"], path.name

    exported = _exported()
    assert path.stem in exported, "%s documents a filter no plugins/filter/*.py exports" % path.name
    source, func = exported[path.stem]
    params = list(inspect.signature(func).parameters.values())[1:]  # the first one is the filter's input
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        missing = [p.name for p in params if p.kind is not inspect.Parameter.VAR_POSITIONAL and p.name not in options]
        assert not missing, "%s: %s takes %s, not under options" % (path.name, func.__name__, ", ".join(missing))

    # The same filter documented in its .py too (ansible-doc shows the .py's): the two must say the same.
    inline = _inline_docs(source)
    if inline and inline["DOCUMENTATION"].get("name") == path.stem:
        sidecar = {k: v for k, v in doc.items() if k != "version_added"}
        assert sidecar == {k: v for k, v in inline["DOCUMENTATION"].items() if k != "version_added"}, path.name
        assert docs["RETURN"] == inline["RETURN"], path.name


def _shown_docs(name, source):
    """What ansible-doc shows for filter ``name`` of ``source``: 'own' (its documentation), 'none', or the name whose
    documentation it shows instead (a .py with DOCUMENTATION hides the sidecars of its other filters)."""
    inline = _inline_docs(source)
    if inline:
        shown = inline["DOCUMENTATION"].get("name")
        return "own" if shown == name else shown
    return "own" if any((FILTER_DIR / (name + ext)).is_file() for ext in (".yml", ".yaml")) else "none"


def test_every_exported_filter_is_documented():
    exported = _exported()
    shown = {name: _shown_docs(name, source) for name, (source, _func) in exported.items()}
    undocumented = sorted(name for name, what in shown.items() if what != "own")
    print("\nfilter docs: %d of %d exported filters documented, %d undocumented"
          % (len(exported) - len(undocumented), len(exported), len(undocumented)))
    problems = []
    for name in undocumented:
        source = exported[name][0].name
        if shown[name] == "none":
            problems.append("%s (%s): no DOCUMENTATION and no plugins/filter/%s.yml" % (name, source, name))
        else:
            sidecar = FILTER_DIR / (shown[name] + ".yml")
            fix = ("remove DOCUMENTATION/EXAMPLES/RETURN from %s (%s holds them)" % (source, sidecar.name)
                   if sidecar.is_file() else "move %s's DOCUMENTATION/EXAMPLES/RETURN to %s" % (source, sidecar.name))
            problems.append("%s (%s): ansible-doc shows %s's DOCUMENTATION, inline in %s, not %s.yml; %s"
                            % (name, source, shown[name], source, name, fix))
    assert not undocumented, "%d undocumented filter(s):\n- %s" % (len(undocumented), "\n- ".join(problems))
