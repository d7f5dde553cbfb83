"""One fact, one place: the deployment's facts are set in roles/deployment/defaults/main.yml and nowhere else.

A role default, task, handler or playbook that restates one of them as a literal (the CUDA release, the compute
capability, the SGLang version or its tag, the model's repository or name, the model store, the SGLang root, the
serving port) fails here, with the file and the key path. Comments are not scanned (the YAML is parsed).
"""

import pathlib
import re

import pytest
import yaml

from conftest import deployment_facts

ROOT = pathlib.Path(__file__).resolve().parents[2]
FACTS = deployment_facts()


def _literals():
    """(fact name, regex) for each fact's literal value and the forms derived from it."""
    cuda = FACTS["deployment_cuda_release"]
    cap = FACTS["deployment_compute_capability"]
    version = FACTS["deployment_sglang_version"]
    repo = FACTS["deployment_model_repo_id"]
    name = repo.rsplit("/", 1)[-1]
    assert FACTS["deployment_model_name"] == "{{ deployment_model_repo_id | basename }}"

    def num(text):
        return r"(?<![\d.])" + re.escape(text) + r"(?![\d])"

    return [
        ("deployment_cuda_release", num(cuda)),
        ("deployment_cuda_release", re.escape("cu" + cuda.replace(".", "")) + r"(?!\d)"),
        ("deployment_cuda_release", re.escape(cuda.replace(".", "-")) + r"(?![\d])"),
        ("deployment_compute_capability", num(cap)),
        ("deployment_compute_capability", re.escape("sm_" + cap.replace(".", "")) + r"(?!\d)"),
        ("deployment_sglang_version", num(version)),
        ("deployment_model_repo_id", re.escape(repo)),
        ("deployment_model_name", re.escape(name)),
        ("deployment_model_store", re.escape(FACTS["deployment_model_store"]) + r"(?![\w-])"),
        ("deployment_sglang_root", re.escape(FACTS["deployment_sglang_root"]) + r"(?![\w-])"),
        ("deployment_port", num(str(FACTS["deployment_port"]))),
    ]


LITERALS = _literals()


def _files():
    out = []
    for pattern in ("roles/*/defaults/*.yml", "roles/*/vars/*.yml", "roles/*/tasks/*.yml", "roles/*/handlers/*.yml",
                    "playbooks/*.yml", "deploy.yml"):
        out += [p for p in ROOT.glob(pattern) if "roles/deployment/" not in p.as_posix()]
    return sorted(out)


def _scalars(node, path=""):
    """(key path, scalar value) of every value in ``node`` (mapping keys are names, not values)."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _scalars(value, f"{path}.{key}" if path else str(key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _scalars(value, f"{path}[{i}]")
    elif node is not None and not isinstance(node, bool):
        yield path, node


def restated(doc):
    """[(key path, fact, value)] of every scalar in ``doc`` that carries a deployment fact's literal."""
    hits = []
    for path, value in _scalars(doc):
        text = str(value)
        for fact, pattern in LITERALS:
            if re.search(pattern, text):
                hits.append((path, fact, text))
    return hits


def test_the_scan_finds_a_restated_fact():
    """The test of the test: each fact restated the ways it was before (a default, a fallback in a template, a
    derived form) is caught; the same text reading the fact is not."""
    doc = {"a": {"cuda_version": "13.0"}, "b": "{{ x | default('/opt/sglang/current') }}",
           "c": ["https://download.pytorch.org/whl/cu130"], "d": {"port": 30000}, "e": "v0.5.23",
           "f": "/srv/models/Kimi-K2.5/current", "g": "{{ deployment_release_link }}", "h": "113.05", "i": 300000}
    facts = sorted({fact for _path, fact, _text in restated(doc)})
    assert facts == ["deployment_cuda_release", "deployment_model_name", "deployment_model_store", "deployment_port",
                     "deployment_sglang_root", "deployment_sglang_version"]
    assert not [hit for hit in restated(doc) if hit[0] in ("g", "h", "i")]


@pytest.mark.parametrize("path", _files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_role_or_playbook_restates_a_deployment_fact(path):
    doc = yaml.safe_load(path.read_text())
    hits = restated(doc)
    assert not hits, "\n".join(f"{path.relative_to(ROOT)}: {key} = {text!r} restates {fact} (read it instead)"
                               for key, fact, text in hits)


def _base_keys():
    """The keys the base role sets (defaults/main/*.yml: the facts and the option model of sglang_service,
    sglang_router, sglang_gateway and sglang_build) and derives (vars/main.yml): issue 39 moved them there."""
    base = ROOT / "roles" / "deployment"
    keys = {}
    for path in sorted(base.glob("defaults/main/*.yml")) + [base / "vars" / "main.yml"]:
        for key in yaml.safe_load(path.read_text()) or {}:
            keys[key] = path.relative_to(ROOT)
    return keys


def _definitions(path):
    """The variable names a defaults or vars file, or a playbook's plays (vars:) and set_fact tasks, define."""
    doc = yaml.safe_load(path.read_text()) or {}
    if isinstance(doc, dict):
        return set(doc)
    names = set()
    for play in doc:
        if isinstance(play, dict):
            names |= set(play.get("vars") or {})
    return names


def test_the_moved_keys_are_defined_in_the_base_role_alone():
    """Each key the base role sets or derives has that one definition: no other role's defaults or vars, and no
    playbook's play vars, define it again (a second definition would win or lose by precedence, silently).
    Overriding one for a single task (an include's vars) is a caller's input, not a definition, and is not scanned."""
    keys = _base_keys()
    assert {"sglang_service_user", "sglang_router_port", "sglang_gateway_port", "sglang_build_method",
            "sglang_service_effective_options", "sglang_service_endpoint", "sglang_router_published"} <= set(keys)
    again = []
    for pattern in ("roles/*/defaults/*.yml", "roles/*/defaults/main/*.yml", "roles/*/vars/*.yml", "playbooks/*.yml"):
        for path in sorted(ROOT.glob(pattern)):
            if "roles/deployment/" in path.as_posix():
                continue
            again += ["%s defines %s, set in %s" % (path.relative_to(ROOT), k, keys[k])
                      for k in sorted(_definitions(path) & set(keys))]
    assert not again, again


def test_the_moved_keys_scan_finds_a_second_definition(tmp_path):
    path = tmp_path / "main.yml"
    path.write_text("sglang_router_port: 31000\nother: 1\n")
    assert _definitions(path) & set(_base_keys()) == {"sglang_router_port"}
    play = tmp_path / "play.yml"
    play.write_text(yaml.safe_dump([{"hosts": "all", "vars": {"sglang_gateway_port": 1}, "tasks": []}]))
    assert _definitions(play) & set(_base_keys()) == {"sglang_gateway_port"}
