"""Contract with the REAL SGLang 0.5.23 parser (.venv-sglang, tests/contract/install_real_sglang.sh).

* The argv that roles/sglang_service renders for its default profile, for every inventory under inventory/*/,
  and for a profile with the optional parts on (EAGLE3, two nodes) is accepted by SGLang's own
  ``prepare_server_args`` (argparse plus ServerArgs' own checks), not only by our snapshot.
* The committed snapshot plugins/data/sglang_cli_0.5.23.json equals what export_sglang_cli.py exports from the
  real package now, so the snapshot (and the simulator built from it) cannot drift.

Skipped, with the reason, when .venv-sglang/bin/python is absent.
"""

import json
import pathlib
import re
import subprocess

import pytest
import yaml

from ansible_collections.blackwell.sglang.plugins.filter import sglang_argv as argv_filter
from ansible_collections.blackwell.sglang.plugins.filter import sglang_eagle3 as eagle3_filter
from ansible_collections.blackwell.sglang.plugins.filter import sglang_unit as unit_filter

ROOT = pathlib.Path(__file__).resolve().parents[2]
PYTHON = ROOT / ".venv-sglang" / "bin" / "python"
SNAPSHOT = ROOT / "plugins" / "data" / "sglang_cli_0.5.23.json"
pytestmark = pytest.mark.skipif(
    not PYTHON.exists(),
    reason=".venv-sglang/bin/python is absent: run tests/contract/install_real_sglang.sh (about 1 minute)",
)


# sglang_service's option model lives in the base role (roles/deployment/defaults/main/sglang_service.yml), beside the
# deployment's facts it reads: template with both, as Ansible does.
DEFAULTS = yaml.safe_load((ROOT / "roles" / "deployment" / "defaults" / "main" / "sglang_service.yml").read_text())
FACTS = yaml.safe_load((ROOT / "roles" / "deployment" / "defaults" / "main" / "main.yml").read_text())


def _trusted(node):
    """YAML from the repo, trusted as templates the way Ansible trusts role defaults and inventory files."""
    from ansible.template import trust_as_template

    if isinstance(node, dict):
        return {k: _trusted(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_trusted(v) for v in node]
    return trust_as_template(node) if isinstance(node, str) else node


def _resolve(value, variables):
    """Template ``value`` with the role's variables (Ansible's own Templar)."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar

    return Templar(loader=DataLoader(), variables=_trusted(variables)).template(_trusted(value))


def _argv(overrides=None, host="node-0"):
    """What roles/sglang_service/tasks/{options,main}.yml render, from the role defaults plus ``overrides``."""
    v = {**FACTS, **DEFAULTS, **(overrides or {})}
    base = {k: _resolve(x, v) for k, x in {**v["sglang_service_options"], **v["sglang_service_extra_options"]}.items()}
    multinode = unit_filter.sglang_multinode_options(
        v["sglang_service_nodes"], host, v["sglang_service_dist_init_host"], v["sglang_service_dist_init_port"],
        base.get("tp-size"), v["sglang_service_socket_ifname"])
    eagle3 = eagle3_filter.sglang_eagle3_options(v["sglang_service_eagle3"], base, v["sglang_service_model_family"],
                                               _resolve(v["sglang_service_sglang_version"], v))
    options = {**{k: _resolve(x, v) for k, x in v["sglang_service_options"].items()}, **multinode, **eagle3,
               **{k: _resolve(x, v) for k, x in v["sglang_service_extra_options"].items()}}
    return argv_filter.sglang_argv(options, _resolve(v["sglang_service_sglang_version"], v),
                                   model_family=v["sglang_service_model_family"],
                                   compute_capability=_resolve(v["sglang_service_compute_capability"], v))


def _inventory_overrides():
    cases = []
    for group_vars in sorted(ROOT.glob("inventory/*/group_vars/gpu_nodes/main.yml")):
        data = yaml.safe_load(group_vars.read_text()) or {}
        cases.append(pytest.param({k: v for k, v in data.items() if k.startswith("sglang_service_")},
                                  id=group_vars.parts[-4]))
    return cases


PROFILES = [pytest.param({}, id="role-defaults")] + _inventory_overrides() + [
    pytest.param({"sglang_service_eagle3": {**DEFAULTS["sglang_service_eagle3"], "enabled": True,
                                            "draft_model_path": "/srv/models/Kimi-K2.5-eagle3/current"},
                  "sglang_service_nodes": ["node-0", "node-1"], "sglang_service_socket_ifname": "eth0",
                  "sglang_service_extra_options": {"tp-size": 16, "hicache-size": 40,
                                                   "model-loader-extra-config": {"enable_multithread_load": True,
                                                                                 "num_threads": 16}}},
                 id="eagle3-two-nodes"),
]

REAL_PARSE = r"""
import json, sys
from sglang.srt.server_args import prepare_server_args
out = []
for argv in json.load(sys.stdin):
    try:
        args = prepare_server_args(argv)
        out.append({"ok": True, "tp_size": args.tp_size})
    except SystemExit as exc:
        out.append({"ok": False, "error": "argparse exit %s" % exc.code})
    except Exception as exc:
        out.append({"ok": False, "error": "%s: %s" % (type(exc).__name__, exc)})
print(json.dumps(out))
"""


@pytest.mark.parametrize("overrides", PROFILES)
def test_rendered_argv_is_accepted_by_the_real_parser(overrides):
    argv = _argv(overrides)
    print(" ".join(argv))
    result = subprocess.run([str(PYTHON), "-c", REAL_PARSE], input=json.dumps([argv]), capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    verdict = json.loads(result.stdout.strip().splitlines()[-1])[0]
    assert verdict["ok"], f"{verdict['error']}\nargv: {argv}\nstderr: {result.stderr[-3000:]}"
    want_tp = int(argv[argv.index("--tp-size") + 1])
    assert verdict["tp_size"] == want_tp


def test_real_parser_rejects_what_the_snapshot_rejects():
    """The contract can fail: a flag 0.5.23 removed must be refused by the real parser too."""
    result = subprocess.run([str(PYTHON), "-c", REAL_PARSE],
                            input=json.dumps([["--model-path", "/m", "--cuda-graph-max-bs", "8"]]),
                            capture_output=True, text=True, timeout=300)
    assert json.loads(result.stdout.strip().splitlines()[-1])[0] == {"ok": False, "error": "argparse exit 2"}


def _normalised(snapshot):
    """Choices as sorted lists: exports before the exporter sorted set-valued choices (0.5.23's
    --sampling-backend is a set) carry them in an arbitrary hash order, which argparse does not care about."""
    out = json.loads(json.dumps(snapshot))
    for action in out["actions"]:
        if action.get("choices") is not None:
            action["choices"] = sorted(action["choices"], key=str)
    return out


def test_committed_snapshot_equals_a_fresh_export(tmp_path):
    out = tmp_path / "snapshot.json"
    result = subprocess.run([str(PYTHON), str(ROOT / "tests" / "contract" / "export_sglang_cli.py"), str(out)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    fresh, committed = _normalised(json.loads(out.read_text())), _normalised(json.loads(SNAPSHOT.read_text()))
    assert fresh["sglang_version"] == committed["sglang_version"] == "0.5.23"
    assert len(fresh["actions"]) == len(committed["actions"]), "number of actions differs: re-export the snapshot"
    changed = [a["option_strings"] for a, b in zip(fresh["actions"], committed["actions"]) if a != b]
    assert not changed, (f"actions differ from the committed snapshot: {changed[:10]}; re-export with "
                         f".venv-sglang/bin/python tests/contract/export_sglang_cli.py {SNAPSHOT.relative_to(ROOT)}")
    assert fresh == committed
