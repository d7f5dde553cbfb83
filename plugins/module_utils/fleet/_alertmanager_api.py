"""Alertmanager v2 silences and alerts, and Prometheus's alert list, for the alertmanager_silence module.

Facts (Alertmanager 0.25, Prometheus 2.42, Debian 12's packages; checked against the real ones in the monitoring
molecule scenario):

* ``GET /api/v2/silences`` -> ``[{"id", "matchers": [{"name", "value", "isRegex", "isEqual"}], "startsAt",
  "endsAt", "createdBy", "comment", "status": {"state": "active"|"pending"|"expired"}}]``;
* ``POST /api/v2/silences`` with ``{"matchers", "startsAt", "endsAt", "createdBy", "comment"}`` -> 200
  ``{"silenceID": ...}``; ``DELETE /api/v2/silence/{id}`` expires it (200);
* ``GET /api/v2/alerts`` -> ``[{"labels", "status": {"state": "active"|"suppressed"|"unprocessed",
  "silencedBy": [...]}, "endsAt", ...}]``, silenced ones included;
* Prometheus ``GET /api/v1/alerts`` -> ``{"data": {"alerts": [{"labels", "state": "pending"|"firing"}]}}``: an alert
  still pending has not reached Alertmanager yet.
"""

import datetime
import re

from ansible_collections.blackwell.sglang.plugins.module_utils.http.http_client import EndpointError, JsonClient


class AlertmanagerError(EndpointError):
    """An Alertmanager or Prometheus endpoint did not answer as expected."""


def normalise_matchers(matchers):
    """``[{"name", "value", "isRegex", "isEqual"}]`` sorted by name, from the module's ``name``/``value``/
    ``regex``/``equal`` form (or the API's own keys)."""
    out = []
    for m in matchers or []:
        if not isinstance(m, dict) or not m.get("name") or "value" not in m:
            raise AlertmanagerError("a matcher needs a name and a value, got %r" % (m,))
        out.append({"name": str(m["name"]), "value": str(m["value"]),
                    "isRegex": bool(m.get("regex", m.get("isRegex", False))),
                    "isEqual": bool(m.get("equal", m.get("isEqual", True)))})
    if not out:
        raise AlertmanagerError("a silence needs at least one matcher")
    return sorted(out, key=lambda m: (m["name"], m["value"], m["isRegex"], m["isEqual"]))


def matches(labels, matchers):
    """Whether an alert's ``labels`` satisfy every matcher (Alertmanager's semantics: regexes are anchored, a
    missing label is the empty string)."""
    for m in matchers:
        value = str((labels or {}).get(m["name"], ""))
        if m["isRegex"]:
            hit = re.match(r"^(?:%s)$" % m["value"], value) is not None
        else:
            hit = value == m["value"]
        if hit != m["isEqual"]:
            return False
    return True


def parse_time(text):
    """RFC 3339 as Alertmanager writes it (``2026-12-01T12:00:00.123456789Z``) -> aware datetime."""
    text = str(text).strip()
    m = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$", text)
    if not m:
        raise AlertmanagerError("cannot read the time %r" % text)
    base = datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S")
    micro = int(((m.group(2) or ".0")[1:] + "000000")[:6])
    zone = m.group(3)
    if zone == "Z":
        offset = datetime.timedelta(0)
    else:
        sign = 1 if zone[0] == "+" else -1
        offset = sign * datetime.timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6]))
    return (base.replace(microsecond=micro) - offset).replace(tzinfo=datetime.timezone.utc)


def format_time(when):
    return when.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


class Alertmanager(JsonClient):
    def silences(self):
        _status, data = self.request("GET", "/api/v2/silences")
        if not isinstance(data, list):
            raise AlertmanagerError("GET %s/api/v2/silences: expected a list, got %r" % (self.base_url, data))
        return data

    def live_silences(self, matchers, comment):
        """Silences not yet expired whose matchers and comment are these."""
        want = normalise_matchers(matchers)
        return [s for s in self.silences()
                if (s.get("status") or {}).get("state") in ("active", "pending")
                and s.get("comment") == comment and normalise_matchers(s.get("matchers")) == want]

    def create(self, matchers, comment, created_by, starts, ends):
        body = {"matchers": normalise_matchers(matchers), "startsAt": format_time(starts), "endsAt": format_time(ends),
                "createdBy": created_by, "comment": comment}
        _status, data = self.request("POST", "/api/v2/silences", body)
        if not isinstance(data, dict) or not data.get("silenceID"):
            raise AlertmanagerError("POST %s/api/v2/silences: no silenceID in %r" % (self.base_url, data))
        return data["silenceID"]

    def expire(self, silence_id):
        self.request("DELETE", "/api/v2/silence/%s" % silence_id)

    def alerts(self):
        _status, data = self.request("GET", "/api/v2/alerts")
        if not isinstance(data, list):
            raise AlertmanagerError("GET %s/api/v2/alerts: expected a list, got %r" % (self.base_url, data))
        return data


def active_alerts(alertmanager_alerts, prometheus_alerts, matchers, now):
    """``[{"alertname", "labels", "where"}]``: alerts matching ``matchers`` that are still live: in Alertmanager (not
    resolved: endsAt in the future) or in Prometheus (pending or firing)."""
    want = normalise_matchers(matchers)
    out = []
    for a in alertmanager_alerts or []:
        labels = a.get("labels") or {}
        try:
            ends = parse_time(a["endsAt"]) if a.get("endsAt") else None
        except AlertmanagerError:
            ends = None
        if ends is not None and ends <= now:
            continue
        if matches(labels, want):
            out.append({"alertname": labels.get("alertname", ""), "labels": labels, "where": "alertmanager"})
    for a in prometheus_alerts or []:
        labels = a.get("labels") or {}
        if a.get("state") in ("pending", "firing") and matches(labels, want):
            out.append({"alertname": labels.get("alertname", ""), "labels": labels,
                        "where": "prometheus (%s)" % a.get("state")})
    return out


def prometheus_alerts(client):
    _status, data = client.request("GET", "/api/v1/alerts")
    try:
        return data["data"]["alerts"]
    except (TypeError, KeyError):
        raise AlertmanagerError("GET %s/api/v1/alerts: unexpected answer %r" % (client.base_url, data))
