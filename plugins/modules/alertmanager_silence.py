#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible module: create or expire an Alertmanager silence, the way a maintenance window needs it."""

DOCUMENTATION = r"""
module: alertmanager_silence
short_description: Create or expire an Alertmanager silence (v2 API), waiting for its alerts to settle first
extends_documentation_fragment:
  - blackwell.sglang.common
  - blackwell.sglang.common.request_timeout
description:
  - A silence is identified by its I(matchers) and I(comment) together. C(state=present) creates one unless a
    silence with the same matchers and comment is active (or pending) and lasts at least I(min_remaining) more
    seconds.
  - C(state=absent) expires every such silence. With I(settle_timeout) it first waits (bounded) until no alert that
    the matchers select is live, neither in Alertmanager (endsAt still ahead) nor, with I(prometheus_url), pending or
    firing in Prometheus; an alert that is still live when the silence ends is notified. Alerts still live when the
    wait ends are returned in C(still_active) and the silence is expired anyway, so a real problem pages.
  - Check mode reads the silences and changes nothing (and does not wait).
options:
  url:
    description: Base URL of Alertmanager, e.g. C(http://127.0.0.1:9093).
    type: str
    required: true
  matchers:
    description: Label matchers; each C(name), C(value), C(regex) (default false), C(equal) (default true).
    type: list
    elements: dict
    required: true
  comment:
    description: Why; together with the matchers it names the silence.
    type: str
    required: true
  created_by:
    description: Author recorded in the silence.
    type: str
    default: sglang-ansible
  state:
    description: present creates, absent expires.
    type: str
    choices: [present, absent]
    default: present
  duration:
    description: Seconds a new silence lasts (a safety net if nothing expires it).
    type: int
    default: 3600
  min_remaining:
    description: An existing silence ending sooner than this many seconds from now is replaced by a new one.
    type: int
    default: 300
  settle_timeout:
    description: With state=absent, seconds to wait for the matched alerts to resolve before expiring; 0 waits not.
    type: int
    default: 0
  prometheus_url:
    description: Prometheus base URL whose pending and firing alerts count in the settle wait; empty skips them.
    type: str
    default: ""
  poll_interval:
    description: Seconds between polls while settling.
    type: float
    default: 2.0
"""

EXAMPLES = r"""
- name: Silence the node while it is switched
  alertmanager_silence:
    url: http://127.0.0.1:9093
    matchers: [{name: node, value: gpu-3}]
    comment: rolling redeploy of gpu-3
    duration: 3600

- name: Expire it once its alerts resolved (at most 2 minutes)
  alertmanager_silence:
    url: http://127.0.0.1:9093
    prometheus_url: http://127.0.0.1:9090
    matchers: [{name: node, value: gpu-3}]
    comment: rolling redeploy of gpu-3
    state: absent
    settle_timeout: 120
"""

RETURN = r"""
silence_ids:
  description: IDs of the silences created, kept (present) or expired (absent).
  returned: always
  type: list
  elements: str
still_active:
  description: Alerts the matchers selected that were still live when the silence was expired (absent).
  returned: always
  type: list
  elements: dict
  sample: [{"alertname": "SGLangServiceRestarted", "where": "alertmanager", "labels": {"node": "gpu-3"}}]
waited_s:
  description: Seconds spent waiting for the alerts to settle.
  returned: always
  type: float
"""

import datetime

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils.fleet._alertmanager_api import (
    Alertmanager, AlertmanagerError, active_alerts, normalise_matchers, parse_time, prometheus_alerts,
)
from ansible_collections.blackwell.sglang.plugins.module_utils.http.http_client import EndpointError, JsonClient
from ansible_collections.blackwell.sglang.plugins.module_utils.http.polling import wait_until


def _now():
    return datetime.datetime.now(datetime.timezone.utc)


def run(params, check_mode, client=None, prometheus=None, now=None, clock=None, sleep=None):
    client = client or Alertmanager(params["url"], timeout=params["request_timeout"])
    now = now or _now
    matchers = normalise_matchers(params["matchers"])
    live = client.live_silences(matchers, params["comment"])
    result = {"changed": False, "silence_ids": [], "still_active": [], "waited_s": 0.0}
    if params["state"] == "present":
        keep = [s for s in live
                if (parse_time(s["endsAt"]) - now()).total_seconds() >= params["min_remaining"]]
        if keep:
            result["silence_ids"] = [s["id"] for s in keep]
            return result
        result["changed"] = True
        if not check_mode:
            start = now()
            result["silence_ids"] = [client.create(matchers, params["comment"], params["created_by"], start,
                                                   start + datetime.timedelta(seconds=params["duration"]))]
        return result

    if not live:
        return result
    result["changed"] = True
    result["silence_ids"] = [s["id"] for s in live]
    if check_mode:
        return result
    if params["prometheus_url"] and prometheus is None:
        prometheus = JsonClient(params["prometheus_url"], timeout=params["request_timeout"])

    def still():
        return active_alerts(client.alerts(), prometheus_alerts(prometheus) if prometheus else [], matchers, now())

    state = {"left": still()}
    if state["left"] and params["settle_timeout"] > 0:
        waits = {k: v for k, v in (("clock", clock), ("sleep", sleep)) if v is not None}

        def settled():
            state["left"] = still()
            return not state["left"]

        _done, waited = wait_until(settled, params["settle_timeout"], params["poll_interval"], **waits)
        result["waited_s"] = round(waited, 2)
    result["still_active"] = state["left"]
    for s in live:
        client.expire(s["id"])
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type="str", required=True),
            matchers=dict(type="list", elements="dict", required=True),
            comment=dict(type="str", required=True),
            created_by=dict(type="str", default="sglang-ansible"),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            duration=dict(type="int", default=3600),
            min_remaining=dict(type="int", default=300),
            settle_timeout=dict(type="int", default=0),
            prometheus_url=dict(type="str", default=""),
            poll_interval=dict(type="float", default=2.0),
            request_timeout=dict(type="int", default=10),
        ),
        supports_check_mode=True,
    )
    try:
        result = run(module.params, module.check_mode)
    except (AlertmanagerError, EndpointError) as exc:
        module.fail_json(msg=str(exc))
    if result["still_active"]:
        module.warn("silence expired while %d alert(s) it covered were still live: %s"
                    % (len(result["still_active"]),
                       ", ".join(sorted({a["alertname"] for a in result["still_active"]}))))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
