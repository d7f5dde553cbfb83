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


def check(tmp_path, gpu_vars=None, router=None, extra=(), playbook=PLAYBOOK):
    """Run deploy.yml's inventory check; (rc, output)."""
    inv = {"all": {"children": {
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


def test_more_schedulers_than_gpus_ports_that_clash_and_an_unreachable_worker_fail_at_once(tmp_path):
    rc, out = check(tmp_path, gpu_vars={"sglang_service_extra_options": {"tp-size": 16, "nccl-port": 30000}},
                    router={})
    assert rc != 0
    assert "start 16 scheduler processes on this node" in out and "it has 8 GPU(s)" in out
    assert "--nccl-port and the HTTP port (--port) are both 30000" in out or \
        "the HTTP port (--port) and --nccl-port are both 30000" in out
    assert "router-a: gpu-a's SGLang listens on 127.0.0.1 only, which the router cannot reach" in out


def test_a_fleet_whose_nodes_listen_beyond_loopback_adds_up(tmp_path):
    rc, out = check(tmp_path, gpu_vars={"sglang_service_extra_options": {"host": "0.0.0.0"}}, router={})
    assert rc == 0, out[-3000:]


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
