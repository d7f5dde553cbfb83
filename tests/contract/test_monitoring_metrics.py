"""Every SGLang metric the monitoring role's alert rules read is one the real sglang 0.5.23 defines (its
observability/metrics_collector.py in .venv-sglang), with the type the rule treats it as; the simulator serves them
under the same names. (The router's smg_worker_health is checked against the real router in test_router_api.py,
node exporter's series against the real node exporter in molecule/monitoring.)

Skipped, with the reason, when .venv-sglang is absent (tests/contract/install_real_sglang.sh).
"""

import pathlib
import re
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
from ansible_collections.blackwell.sglang.plugins.filter import monitoring_config  # noqa: E402

COLLECTORS = sorted(ROOT.glob(".venv-sglang/lib/python3*/site-packages/sglang/srt/observability/metrics_collector.py"))
pytestmark = pytest.mark.skipif(not COLLECTORS, reason=".venv-sglang absent: run tests/contract/install_real_sglang.sh")

PUBLISHED = [{"node": "gpu-0", "node_exporter": "gpu-0:9100",
              "sglang": {"url": "http://gpu-0:30000", "unit": "sglang-kimi.service"}}]


def _rule_metrics():
    rules = monitoring_config.monitoring_alert_rules(PUBLISHED, {})
    names = set()
    for group in rules["groups"]:
        for rule in group["rules"]:
            names |= set(re.findall(r"sglang:[a-z_]+", rule["expr"]))
    return names


def test_rule_metrics_exist_in_the_real_wheel():
    source = COLLECTORS[0].read_text()
    defined = {}
    for m in re.finditer(r'(Counter|Gauge|Histogram)\(\s*name="(sglang:[a-z_]+)"', source):
        defined[m.group(2)] = m.group(1)
    used = _rule_metrics()
    assert used, "the rules read no SGLang metric"
    for name in sorted(used):
        base = name[:-len("_total")] if name.endswith("_total") else name
        kind = defined.get(name) or defined.get(base)
        assert kind, "%s is not defined in %s" % (name, COLLECTORS[0])
        if name.endswith("_total"):
            assert kind == "Counter", name  # rate() is only meaningful on a counter
        else:
            assert kind == "Gauge", name


def test_the_simulator_serves_them():
    sim = (ROOT / "tests" / "sandbox" / "sglang_sim" / "sglang" / "srt" / "entrypoints" / "http_server.py").read_text()
    for name in sorted(_rule_metrics()):
        assert name in sim, name
