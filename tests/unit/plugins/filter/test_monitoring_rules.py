"""The monitoring role's alert rules with the real promtool (Debian's prometheus 2.42, scripts/bootstrap.sh puts it in
.venv/bin), and the filters that generate its Prometheus and Alertmanager configuration.

Every alert of the rule file must have a promtool case in tests/unit/fixtures/monitoring/rules_test.yml in which it
fires (most also have one in which it must not).
"""

import os
import pathlib
import shutil
import subprocess
import sys

import pytest
import yaml

from ansible_collections.blackwell.sglang.plugins.filter import monitoring_config as mc
from ansible.errors import AnsibleFilterError

ROOT = str(pathlib.Path(__file__).resolve().parents[4])
FIXTURES = os.path.join(ROOT, "tests", "unit", "fixtures", "monitoring")


def _promtool():
    for path in (os.path.join(os.path.dirname(sys.executable), "promtool"), shutil.which("promtool") or ""):
        if path and os.access(path, os.X_OK):
            return path
    pytest.fail("promtool not found next to %s or on PATH: run scripts/bootstrap.sh" % sys.executable)


PUBLISHED = [
    {"node": "gpu-0", "roles": ["gpu"], "node_exporter": "gpu-0:9100",
     "sglang": {"url": "http://gpu-0:30000", "unit": "sglang-kimi.service"}},
    {"node": "gpu-1", "roles": ["gpu"], "node_exporter": "gpu-1:9100",
     "sglang": {"url": "http://gpu-1:30000", "unit": "sglang-kimi.service"}},
    {"node": "router", "roles": ["router"], "node_exporter": "router:9100",
     "router": {"url": "http://router:29000", "unit": "sglang-router.service", "workers": 2}},
]


@pytest.fixture(scope="module")
def rule_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("rules")
    rules = mc.monitoring_alert_rules(PUBLISHED, {})
    (out / "rules.yml").write_text(yaml.safe_dump(rules, sort_keys=False, width=1000))
    bare = {"groups": [{"name": g["name"], "rules": [{k: v for k, v in r.items() if k != "annotations"}
                                                     for r in g["rules"]]} for g in rules["groups"]]}
    (out / "rules_noannotations.yml").write_text(yaml.safe_dump(bare, sort_keys=False, width=1000))
    for name in ("rules_test.yml", "annotations_test.yml"):
        shutil.copy(os.path.join(FIXTURES, name), out / name)
    return out


def _run(args, cwd):
    return subprocess.run(args, cwd=str(cwd), capture_output=True, text=True, timeout=120)


def test_promtool_check_rules(rule_dir):
    r = _run([_promtool(), "check", "rules", "rules.yml"], rule_dir)
    assert r.returncode == 0, r.stdout + r.stderr
    count = sum(len(g["rules"]) for g in yaml.safe_load((rule_dir / "rules.yml").read_text())["groups"])
    assert "SUCCESS: %d rules found" % count in r.stdout


def test_promtool_test_rules(rule_dir):
    r = _run([_promtool(), "test", "rules", "rules_test.yml", "annotations_test.yml"], rule_dir)
    assert r.returncode == 0, r.stdout + r.stderr


def test_promtool_rejects_a_wrong_expectation(rule_dir):
    """The promtool cases can fail: the same file with one expectation removed does."""
    tests = yaml.safe_load((rule_dir / "rules_test.yml").read_text())
    first = next(t for t in tests["tests"] if t["name"] == "one recovered crash")
    case = next(c for c in first["alert_rule_test"] if c["alertname"] == "SGLangServiceRestarted" and c["exp_alerts"])
    case["exp_alerts"] = []
    (rule_dir / "broken_test.yml").write_text(yaml.safe_dump(tests, sort_keys=False))
    r = _run([_promtool(), "test", "rules", "broken_test.yml"], rule_dir)
    assert r.returncode != 0 and "SGLangServiceRestarted" in r.stdout + r.stderr


def test_every_alert_has_a_firing_case():
    rules = mc.monitoring_alert_rules(PUBLISHED, {})
    names = {r["alert"] for g in rules["groups"] for r in g["rules"]}
    tests = yaml.safe_load(open(os.path.join(FIXTURES, "rules_test.yml")))
    firing = {c["alertname"] for t in tests["tests"] for c in t["alert_rule_test"] if c["exp_alerts"]}
    assert names - firing == set(), "alerts without a firing promtool case"
    assert firing - names == set(), "promtool cases for alerts that do not exist"


def test_rules_follow_the_published_units_and_settings():
    published = [dict(PUBLISHED[0], sglang={"url": "http://gpu-0:30000", "unit": "sglang-llama.service"}),
                 PUBLISHED[2]]
    rules = mc.monitoring_alert_rules(published, {"down_for": "20s", "loop_restarts": 3})
    by_name = {r["alert"]: r for g in rules["groups"] for r in g["rules"]}
    assert 'name=~"sglang-llama[.]service"' in by_name["SGLangServiceDown"]["expr"]
    assert by_name["SGLangServiceDown"]["for"] == "20s"
    assert by_name["SGLangServiceRestartLoop"]["expr"].endswith(">= 3")
    assert ") < 2\nunless on () (sum (increase(node_systemd_service_restart_total{name=~\"sglang-llama[.]service\"}[20m])) >= 1)" in by_name["SGLangRouterWorkersMissing"]["expr"]


def test_rules_without_gpu_nodes_or_router():
    rules = mc.monitoring_alert_rules([{"node": "m", "node_exporter": "m:9100"}], {})
    names = {r["alert"] for g in rules["groups"] for r in g["rules"]}
    assert "SGLangServiceDown" not in names and "SGLangRouterWorkersMissing" not in names
    assert "HostDown" in names


@pytest.mark.parametrize("settings, message", [
    ({"down_for": "5 minutes"}, "not a Prometheus duration"),
    ({"queue_high": "many"}, "not a number"),
    ({"down_after": "5m"}, "unknown monitoring alert setting"),
])
def test_bad_settings_are_refused(settings, message):
    with pytest.raises(AnsibleFilterError, match=message):
        mc.monitoring_alert_rules(PUBLISHED, settings)


def test_unit_names_are_checked():
    bad = [dict(PUBLISHED[0], sglang={"url": "http://gpu-0:30000", "unit": "sglang kimi.service"})]
    with pytest.raises(AnsibleFilterError, match="characters a systemd unit name cannot have"):
        mc.monitoring_alert_rules(bad, {})


def test_scrape_configs_from_the_published_targets():
    jobs = mc.monitoring_scrape_configs(PUBLISHED, {
        "server": {"node": "router", "prometheus": "127.0.0.1:9090", "alertmanager": "127.0.0.1:9093"},
        "scrape_auth": {"sglang": {"authorization": {"type": "Bearer", "credentials_file": "/etc/prometheus/t"}}}})
    by_job = {j["job_name"]: j for j in jobs}
    assert sorted(by_job) == ["alertmanager", "node", "prometheus", "sglang", "sglang_router"]
    assert [c["targets"] for c in by_job["sglang"]["static_configs"]] == [["gpu-0:30000"], ["gpu-1:30000"]]
    assert by_job["sglang"]["static_configs"][1]["labels"] == {"node": "gpu-1", "role": "gpu"}
    assert by_job["sglang"]["authorization"]["credentials_file"] == "/etc/prometheus/t"
    assert "authorization" not in by_job["node"]
    assert by_job["sglang_router"]["static_configs"] == [
        {"targets": ["router:29000"], "labels": {"node": "router", "role": "router"}}]
    assert len(by_job["node"]["static_configs"]) == 3


def test_scrape_configs_refuse_duplicates_and_unknown_auth_jobs():
    with pytest.raises(AnsibleFilterError, match="same node"):
        mc.monitoring_scrape_configs([PUBLISHED[0], PUBLISHED[0]])
    with pytest.raises(AnsibleFilterError, match="unknown job"):
        mc.monitoring_scrape_configs(PUBLISHED, {"scrape_auth": {"sglangg": {}}})
    with pytest.raises(AnsibleFilterError, match="is not http"):
        mc.monitoring_scrape_configs([dict(PUBLISHED[0], sglang={"url": "gpu-0:30000", "unit": "x.service"})])


def test_alertmanager_config():
    hook = {"name": "pager", "webhook_configs": [{"url": "http://127.0.0.1:9095/alerts"}]}
    config = mc.monitoring_alertmanager_config([hook], {"group_wait": "1s"})
    assert config["route"]["receiver"] == "pager" and config["route"]["group_wait"] == "1s"
    assert config["route"]["group_by"] == ["alertname", "node"]
    assert config["receivers"] == [hook]
    with pytest.raises(AnsibleFilterError, match="reach nobody"):
        mc.monitoring_alertmanager_config([{"name": "void"}])
    with pytest.raises(AnsibleFilterError, match="at least one receiver"):
        mc.monitoring_alertmanager_config([])
    with pytest.raises(AnsibleFilterError, match="not one of the receivers"):
        mc.monitoring_alertmanager_config([hook], {"receiver": "other"})


def test_node_exporter_args():
    args = mc.monitoring_node_exporter_args(["sglang-kimi.service", "sglang-kimi.service"],
                                            "/var/lib/prometheus/node-exporter", ":9100")
    assert args == ["--web.listen-address=:9100", "--collector.textfile.directory=/var/lib/prometheus/node-exporter",
                    "--collector.systemd", "--collector.systemd.enable-restarts-metrics",
                    "--collector.systemd.unit-include=sglang-kimi[.]service"]
    assert "--collector.systemd" not in mc.monitoring_node_exporter_args([], "/x", ":9100")



def test_monitoring_docs_list_every_alert_setting_with_its_default():
    section = open(os.path.join(ROOT, "docs", "monitoring.md")).read()
    for key, default in mc.ALERT_DEFAULTS.items():
        assert "| `%s` | `%s` |" % (key, default) in section, key

