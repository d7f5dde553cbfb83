"""The inventory check every entry playbook runs first (roles/deployment validate), run by the real ansible-playbook
against throw-away inventories: only that play runs (``--tags`` matches no stage; it is tagged ``always``) and it
contacts no host (its hosts here cannot be reached at all)."""

import json
import os
import pathlib
import subprocess
import sys

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
PLAYBOOK = os.path.join(str(ROOT), "deploy.yml")


KEYS = [{"name": "test", "key": "k" * 40}]


def check(tmp_path, gpu_vars=None, router=None, extra=(), playbook=PLAYBOOK, api_keys=KEYS):
    """Run deploy.yml's inventory check; (rc, output)."""
    inv = {"all": {"vars": {"deployment_api_keys": api_keys}, "children": {
        "gpu_nodes": {"hosts": {"gpu-a": dict({"ansible_host": "192.0.2.10"}, **(gpu_vars or {}))}},
        "sglang_routers": {"hosts": {"router-a": {"ansible_host": "192.0.2.20"}} if router is not None else {}},
    }}}
    if router:
        inv["all"]["children"]["sglang_routers"]["hosts"]["router-a"].update(router)
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump(inv))
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_HOST_KEY_CHECKING="False")
    bindir = os.path.dirname(sys.executable)
    proc = subprocess.run([os.path.join(bindir, "ansible-playbook"), "-i", str(path), playbook,
                           "--tags", "inventory-check-only", *extra], capture_output=True, text=True, env=env,
                          timeout=300, cwd=str(ROOT))
    return proc.returncode, proc.stdout + proc.stderr


def test_the_default_inventory_adds_up(tmp_path):
    rc, out = check(tmp_path)
    assert rc == 0, out[-3000:]
    assert "unreachable=0" in out and "failed=0" in out


def test_the_sglang_version_in_its_one_place_picks_the_parser_snapshot(tmp_path):
    """Bumping deployment_sglang_version changes the snapshot the unit's options are validated against: a release
    with no snapshot is refused before any host is touched."""
    rc, out = check(tmp_path, extra=["-e", "deployment_sglang_version=0.0.1"])
    assert rc != 0
    assert "no argparse snapshot for SGLang 0.0.1" in out


def test_more_schedulers_than_gpus_and_ports_that_clash_fail_at_once(tmp_path):
    rc, out = check(tmp_path, gpu_vars={"sglang_service_extra_options": {"tp-size": 16, "nccl-port": 30001}})
    assert rc != 0
    assert "start 16 scheduler processes on this node" in out and "it has 8 GPU(s)" in out
    assert "--nccl-port and the HTTP port (--port) are both 30001" in out or \
        "the HTTP port (--port) and --nccl-port are both 30001" in out


def test_a_fleet_reaches_each_node_at_its_gateway(tmp_path):
    """The router's workers are the nodes' gateways (deployment_port), while SGLang listens on loopback behind them."""
    play = tmp_path / "show.yml"
    play.write_text(yaml.safe_dump([
        {"import_playbook": PLAYBOOK},
        {"name": "Show the router's workers", "hosts": "sglang_routers", "gather_facts": False, "tags": ["always"],
         "tasks": [{"ansible.builtin.copy": {"dest": str(tmp_path / "workers.json"), "mode": "0644",
                                             "content": "{{ sglang_router_workers.urls | to_json }}"},
                    "delegate_to": "localhost"}]}]))
    rc, out = check(tmp_path, router={}, playbook=str(play))
    assert rc == 0, out[-3000:]
    assert json.loads((tmp_path / "workers.json").read_text()) == ["http://192.0.2.10:30000"]


def test_a_node_listening_beyond_loopback_bad_keys_and_a_router_on_a_gpu_node_fail_at_once(tmp_path):
    """SGLang on 0.0.0.0 would take requests without a key, past the gateway; a key too short, with a quote, or
    twice would be unusable (the messages never repeat a key); a host in both groups would run two gateways."""
    secret = 'sh"rt'
    rc, out = check(tmp_path, gpu_vars={"sglang_service_extra_options": {"host": "0.0.0.0"}}, router={},
                    api_keys=[{"name": "a", "key": secret}, {"name": "a", "key": "x" * 40},
                              {"name": "b", "key": "x" * 40}])
    assert rc != 0
    assert "gpu-a: SGLang listens on 0.0.0.0 (--host), where clients reach it without a key" in out
    assert "deployment_api_keys[0] (a): the key has 5 characters, at least 32 are needed" in out
    assert "deployment_api_keys[0] (a): the key has characters outside" in out
    assert "deployment_api_keys[1] (a): the name is used twice" in out
    assert "deployment_api_keys[2] (b): the same key as an earlier entry" in out
    assert secret not in out and "x" * 40 not in out
    rc, out = check(tmp_path, api_keys=[])
    assert rc != 0 and "deployment_api_keys is empty: the gateway would refuse every request" in out


def test_smoke_health_checks_what_sglang_service_deploys(tmp_path):
    """Issue 14's false verdicts: a served name with spaces, % and quotes, and tp 4 on port 8000. smoke_health's
    unit, URL, served name and scheduler count resolve from what sglang_service published (before: its own
    Kimi-K2.5, 127.0.0.1:30000 and 8, so /v1/models "did not list" the name and 4 healthy ranks read as stalled)."""
    play = tmp_path / "show.yml"
    play.write_text(yaml.safe_dump([
        {"import_playbook": PLAYBOOK},
        {"name": "Show what smoke_health would check", "hosts": "gpu_nodes", "gather_facts": False,
         "tags": ["always"], "tasks": [
             {"ansible.builtin.include_vars": {"file": str(ROOT / "roles" / "smoke_health" / "defaults" / "main.yml")}},
             {"ansible.builtin.copy": {"dest": str(tmp_path / "smoke.json"), "mode": "0644",
                                       "content": "{{ {'unit': smoke_health_unit, 'url': smoke_health_url, "
                                                  "'name': smoke_health_served_model_name, "
                                                  "'schedulers': smoke_health_schedulers} | to_json }}"},
              "delegate_to": "localhost"}]}]))
    rc, out = check(tmp_path, gpu_vars={"sglang_service_extra_options": {
        "served-model-name": 'Kimi 100% "K2.5"', "tp-size": 4, "port": 8000}}, playbook=str(play))
    assert rc == 0, out[-3000:]
    shown = json.loads((tmp_path / "smoke.json").read_text())
    assert shown == {"unit": "sglang-kimi.service", "url": "http://127.0.0.1:8000", "name": 'Kimi 100% "K2.5"',
                     "schedulers": 4}


def test_facts_are_gathered_once_for_every_stage():
    """deploy.yml gathers facts in one play (issue 22: seven gatherings cost 7 s of a no-op); every later play reuses
    them, and that play carries every stage's tag, so `--tags <stage>` still has facts."""
    plays = yaml.safe_load((ROOT / "playbooks" / "deploy.yml").read_text())
    gathering = [p for p in plays if p.get("gather_facts", True)]
    assert [p["name"] for p in gathering] == ["Gather facts once for the whole run"]
    stage_tags = {t for p in plays[plays.index(gathering[0]) + 1:] for t in p["tags"]}
    assert set(gathering[0]["tags"]) == stage_tags and "always" not in gathering[0]["tags"]
    hosts = {h for p in plays[plays.index(gathering[0]) + 1:] for h in p["hosts"].split(":")}
    assert set(gathering[0]["hosts"].split(":")) == hosts


def test_an_attention_backend_without_sm120_kernels_is_refused_before_any_host(tmp_path):
    """FA3 on the RTX PRO 6000 (compute capability 12.0, deployment_compute_capability): refused by the inventory check
    with the backend and what to use instead, no host contacted (none of this inventory's hosts can be reached)."""
    rc, out = check(tmp_path, gpu_vars={"sglang_service_extra_options": {"attention-backend": "fa3"}})
    assert rc != 0
    assert "--attention-backend fa3 cannot run on compute capability 12.0 (SM120" in out, out[-3000:]
    assert "FlashAttention v3 Backend requires SM>=80 and SM<=90" in out and "use triton" in out
    assert "unreachable=1" not in out and "UNREACHABLE" not in out


def test_eagle3_without_a_draft_and_a_tree_on_a_chain_only_path_are_refused_before_any_host(tmp_path):
    """Issue 38: EAGLE3 for Kimi-K2.5 without a draft path (it would load the target as its own draft,
    sgl-project/sglang#36528) and a draft tree with rejection sampling (SGLang 0.5.23 verifies a chain only there):
    both named by the inventory check, no host contacted."""
    rc, out = check(tmp_path, gpu_vars={"sglang_service_extra_options": {
        "speculative-algorithm": "EAGLE3", "speculative-eagle-topk": 4, "speculative-num-steps": 3,
        "speculative-num-draft-tokens": 8, "speculative-use-rejection-sampling": True}})
    assert rc != 0
    assert "--speculative-algorithm EAGLE3 without --speculative-draft-model-path" in out, out[-3000:]
    assert "--speculative-use-rejection-sampling needs --speculative-eagle-topk 1" in out
    assert "unreachable=1" not in out and "UNREACHABLE" not in out


ENTRY_PLAYBOOKS = sorted(["deploy.yml"] + ["playbooks/%s" % p.name for p in (ROOT / "playbooks").glob("*.yml")
                                         if "blackwell.sglang.deployment" in p.read_text()
                                         and "tasks_from: validate" in p.read_text() and p.name != "deploy.yml"])


def test_every_entry_playbook_checks_every_option_type_at_once_before_any_host():
    """The validate entry point's spec is main's (one definition, by a YAML anchor), so the first play of every entry
    playbook refuses wrong types with the full list, not with a Jinja filter error later."""
    specs = yaml.safe_load((ROOT / "roles" / "deployment" / "meta" / "argument_specs.yml").read_text())
    specs = specs["argument_specs"]
    assert specs["validate"]["options"] == specs["main"]["options"] and len(specs["main"]["options"]) >= 80
    assert ENTRY_PLAYBOOKS == ["deploy.yml", "playbooks/benchmark.yml", "playbooks/remove_node.yml",
                               "playbooks/rollback.yml", "playbooks/rolling_redeploy.yml"]


@pytest.mark.parametrize("playbook", ENTRY_PLAYBOOKS)
def test_a_wrong_type_is_listed_with_every_other_by_each_entry_playbook(tmp_path, playbook):
    rc, out = check(tmp_path, router={}, playbook=str(ROOT / playbook),
                    extra=["-e", "sglang_service_extra_options=notadict", "-e", "deployment_port=eighty",
                           "-e", "node=gpu-a"])
    assert rc != 0
    text = " ".join(out.split())
    for name in ("sglang_service_extra_options", "deployment_port"):
        assert "argument '%s' is of type" % name in text, out[-3000:]
    assert "Validating arguments against arg spec 'validate'" in text
    assert "combine" not in text and "unreachable=0" in text
