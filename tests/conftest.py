"""Make this project's plugins importable one way: as the collection blackwell.sglang.

``.collections/ansible_collections/blackwell/sglang`` links to the repository root (ansible.cfg's collections_path),
so with ``.collections`` on ``sys.path`` every test imports a plugin by its collection path, as Ansible does:
``from ansible_collections.blackwell.sglang.plugins.modules import model_stage``, ``...plugins.filter import
preflight``, ``...plugins.module_utils.staging.model_mirror import ...``. ``ansible_collections`` is a namespace package, so
the collections bundled with the ``ansible`` package stay importable beside it.
"""

import json
import os
import sys

import pytest

from ansible.module_utils import basic

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTIONS = os.path.join(ROOT, ".collections")
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "unit", "fixtures")


def deployment_facts():
    """The deployment's facts as roles/deployment/defaults/main/main.yml sets them (their one place)."""
    import yaml

    with open(os.path.join(ROOT, "roles", "deployment", "defaults", "main", "main.yml")) as handle:
        return yaml.safe_load(handle)


# The pinned SGLang release (deployment_sglang_version): tests that render argv read it, never restate it.
SGLANG_VERSION = deployment_facts()["deployment_sglang_version"]

try:  # ansible-core >= 2.19
    from ansible.module_utils.testing import patch_module_args
except ImportError:  # pragma: no cover - older cores
    import contextlib
    from unittest import mock

    @contextlib.contextmanager
    def patch_module_args(args=None):
        payload = json.dumps({"ANSIBLE_MODULE_ARGS": args or {}}).encode()
        with mock.patch.object(basic, "_ANSIBLE_ARGS", payload):
            yield


class AnsibleExitJson(Exception):
    """exit_json was called; ``.result`` holds its kwargs."""

    def __init__(self, result):
        super(AnsibleExitJson, self).__init__(result)
        self.result = result


class AnsibleFailJson(Exception):
    """fail_json was called; ``.result`` holds its kwargs (with failed=True)."""

    def __init__(self, result):
        super(AnsibleFailJson, self).__init__(result)
        self.result = result


def _exit_json(self, **kwargs):
    kwargs.setdefault("changed", False)
    raise AnsibleExitJson(kwargs)


def _fail_json(self, msg, **kwargs):
    kwargs["failed"] = True
    kwargs["msg"] = msg
    raise AnsibleFailJson(kwargs)


@pytest.fixture
def module_runner(monkeypatch):
    """``run(module, args, check_mode=False)`` -> (kind, result) where kind is 'exit' or 'fail'."""
    monkeypatch.setattr(basic.AnsibleModule, "exit_json", _exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", _fail_json)

    def run(module, args, check_mode=False):
        args = dict(args)
        if check_mode:
            args["_ansible_check_mode"] = True
        with patch_module_args(args):
            try:
                module.main()
            except AnsibleExitJson as exc:
                return "exit", exc.result
            except AnsibleFailJson as exc:
                return "fail", exc.result
        raise AssertionError("module returned without exit_json/fail_json")

    return run


def load_yaml(*parts):
    import yaml

    with open(os.path.join(FIXTURES, *parts)) as handle:
        return yaml.safe_load(handle)


def load_text(*parts):
    with open(os.path.join(FIXTURES, *parts)) as handle:
        return handle.read()


def load_lspci(name):
    """A recorded ``lspci -D -vvv`` body in fixtures/host_facts (the fixture's leading # lines describe it and are not
    lspci output)."""
    return "".join(line for line in load_text("host_facts", name).splitlines(True) if not line.startswith("#"))


def read_sglang_log(name):
    """A log of fixtures/sglang_logs as recorded (``\\r`` redraws kept: no newline translation); "" for no name."""
    if not name:
        return ""
    with open(os.path.join(FIXTURES, "sglang_logs", name), newline="") as handle:
        return handle.read()
