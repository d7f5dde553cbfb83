"""alertmanager_silence: identity by matchers + comment, idempotence, check mode, the settle wait before expiring
(Alertmanager's unresolved alerts and Prometheus's pending/firing ones), and the matcher semantics. The real
Alertmanager 0.25 answers the same calls in molecule/monitoring."""

import datetime

import pytest

from ansible_collections.blackwell.sglang.plugins.modules import alertmanager_silence as mod
from ansible_collections.blackwell.sglang.plugins.module_utils.fleet._alertmanager_api import (
    AlertmanagerError, active_alerts, format_time, matches, normalise_matchers, parse_time,
)

T0 = datetime.datetime(2026, 12, 1, 12, 0, 0, tzinfo=datetime.timezone.utc)


class FakeAM:
    """The v2 API's silences and alerts, in memory."""

    def __init__(self, alerts=None):
        self.silence_list, self.alert_list, self.expired, self.created = [], list(alerts or []), [], []

    def silences(self):
        return self.silence_list

    def live_silences(self, matchers, comment):
        want = normalise_matchers(matchers)
        return [s for s in self.silence_list if s["status"]["state"] in ("active", "pending")
                and s["comment"] == comment and normalise_matchers(s["matchers"]) == want]

    def create(self, matchers, comment, created_by, starts, ends):
        sid = "s%d" % (len(self.silence_list) + 1)
        self.silence_list.append({"id": sid, "matchers": matchers, "comment": comment, "createdBy": created_by,
                                  "startsAt": format_time(starts), "endsAt": format_time(ends),
                                  "status": {"state": "active"}})
        self.created.append(sid)
        return sid

    def expire(self, sid):
        self.expired.append(sid)
        for s in self.silence_list:
            if s["id"] == sid:
                s["status"]["state"] = "expired"

    def alerts(self):
        return self.alert_list


class FakeProm:
    def __init__(self, alerts):
        self.alert_list = alerts

    def request(self, method, path, body=None, expect=(200,)):
        assert (method, path) == ("GET", "/api/v1/alerts")
        return 200, {"status": "success", "data": {"alerts": self.alert_list}}


def _params(**kw):
    p = {"url": "http://127.0.0.1:9093", "matchers": [{"name": "node", "value": "gpu-1"}],
         "comment": "rolling redeploy of gpu-1", "created_by": "sglang-ansible", "state": "present",
         "duration": 3600, "min_remaining": 300, "settle_timeout": 0, "prometheus_url": "", "poll_interval": 1.0,
         "request_timeout": 5}
    p.update(kw)
    return p


def test_present_creates_once_then_keeps_it():
    am = FakeAM()
    first = mod.run(_params(), False, client=am, now=lambda: T0)
    assert first["changed"] and first["silence_ids"] == ["s1"]
    silence = am.silence_list[0]
    assert silence["matchers"] == [{"name": "node", "value": "gpu-1", "isRegex": False, "isEqual": True}]
    assert silence["endsAt"] == "2026-12-01T13:00:00.000Z"
    again = mod.run(_params(), False, client=am, now=lambda: T0 + datetime.timedelta(minutes=5))
    assert not again["changed"] and again["silence_ids"] == ["s1"] and am.created == ["s1"]
    # another node's silence is another silence
    other = mod.run(_params(matchers=[{"name": "node", "value": "gpu-2"}], comment="rolling redeploy of gpu-2"),
                    False, client=am, now=lambda: T0)
    assert other["changed"] and other["silence_ids"] == ["s2"]


def test_present_replaces_a_silence_about_to_end():
    am = FakeAM()
    mod.run(_params(duration=600), False, client=am, now=lambda: T0)
    later = mod.run(_params(), False, client=am, now=lambda: T0 + datetime.timedelta(minutes=6))
    assert later["changed"] and am.created == ["s1", "s2"]


def test_check_mode_changes_nothing():
    am = FakeAM()
    assert mod.run(_params(), True, client=am, now=lambda: T0)["changed"]
    assert am.silence_list == []
    mod.run(_params(), False, client=am, now=lambda: T0)
    checked = mod.run(_params(state="absent", settle_timeout=60), True, client=am, now=lambda: T0)
    assert checked["changed"] and am.expired == []


def test_absent_expires_and_is_idempotent():
    am = FakeAM()
    mod.run(_params(), False, client=am, now=lambda: T0)
    gone = mod.run(_params(state="absent"), False, client=am, now=lambda: T0)
    assert gone["changed"] and am.expired == ["s1"] and gone["still_active"] == []
    assert not mod.run(_params(state="absent"), False, client=am, now=lambda: T0)["changed"]


def _alert(name, node, ends):
    return {"labels": {"alertname": name, "node": node, "severity": "warning"}, "endsAt": format_time(ends),
            "status": {"state": "suppressed", "silencedBy": ["s1"]}}


def test_absent_waits_until_the_silenced_alerts_resolved():
    clock = {"t": 0.0}
    fired = _alert("SGLangMetricsUnreachable", "gpu-1", T0 + datetime.timedelta(minutes=4))
    am = FakeAM([fired, _alert("HostDown", "gpu-2", T0 + datetime.timedelta(hours=1))])
    prom = FakeProm([{"labels": {"alertname": "SGLangServiceDown", "node": "gpu-1"}, "state": "pending"}])
    mod.run(_params(), False, client=am, now=lambda: T0)

    def sleep(s):
        clock["t"] += s
        if clock["t"] >= 4:  # Prometheus resolves: Alertmanager's copy ends, the pending one is gone
            fired["endsAt"] = format_time(T0)
            prom.alert_list = []

    res = mod.run(_params(state="absent", settle_timeout=30, prometheus_url="http://p"), False, client=am,
                  prometheus=prom, now=lambda: T0 + datetime.timedelta(seconds=1), clock=lambda: clock["t"],
                  sleep=sleep)
    assert res["changed"] and res["still_active"] == [] and res["waited_s"] == 4.0
    assert am.expired == ["s1"], "expired only after the wait"


def test_absent_expires_anyway_and_names_what_is_still_live():
    clock = {"t": 0.0}
    am = FakeAM([_alert("SGLangServiceRestarted", "gpu-1", T0 + datetime.timedelta(hours=1))])
    mod.run(_params(), False, client=am, now=lambda: T0)
    res = mod.run(_params(state="absent", settle_timeout=10), False, client=am, now=lambda: T0,
                  clock=lambda: clock["t"], sleep=lambda s: clock.__setitem__("t", clock["t"] + s))
    assert [a["alertname"] for a in res["still_active"]] == ["SGLangServiceRestarted"]
    assert res["waited_s"] == 10.0 and am.expired == ["s1"]


def test_matchers():
    eq = normalise_matchers([{"name": "node", "value": "gpu-1"}])
    assert matches({"node": "gpu-1"}, eq) and not matches({"node": "gpu-10"}, eq)
    rx = normalise_matchers([{"name": "alertname", "value": "SGLang.*", "regex": True},
                             {"name": "node", "value": "router", "equal": False}])
    assert matches({"alertname": "SGLangQueueHigh", "node": "gpu-0"}, rx)
    assert not matches({"alertname": "SGLangQueueHigh", "node": "router"}, rx)
    assert not matches({"alertname": "xSGLang", "node": "gpu-0"}, rx), "regexes are anchored"
    with pytest.raises(AlertmanagerError, match="at least one matcher"):
        normalise_matchers([])
    with pytest.raises(AlertmanagerError, match="name and a value"):
        normalise_matchers([{"name": "node"}])


def test_active_alerts_ignores_resolved_and_other_nodes():
    now = T0
    am = [_alert("A", "gpu-1", T0 - datetime.timedelta(seconds=1)), _alert("B", "gpu-1", T0 + datetime.timedelta(1)),
          _alert("C", "gpu-2", T0 + datetime.timedelta(1))]
    prom = [{"labels": {"alertname": "D", "node": "gpu-1"}, "state": "inactive"},
            {"labels": {"alertname": "E", "node": "gpu-1"}, "state": "firing"}]
    got = active_alerts(am, prom, [{"name": "node", "value": "gpu-1"}], now)
    assert [(a["alertname"], a["where"]) for a in got] == [("B", "alertmanager"), ("E", "prometheus (firing)")]


def test_times():
    assert parse_time("2026-12-01T12:00:00.123456789Z") == T0.replace(microsecond=123456)
    assert parse_time("2026-12-01T13:00:00+01:00") == T0
    assert format_time(T0) == "2026-12-01T12:00:00.000Z"
    with pytest.raises(AlertmanagerError):
        parse_time("yesterday")
