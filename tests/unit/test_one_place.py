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
