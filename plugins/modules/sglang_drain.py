#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible module: wait until an SGLang server has no request in flight (its /metrics say 0), bounded."""

DOCUMENTATION = r"""
module: sglang_drain
short_description: Wait until an SGLang server's running and queued requests reach 0
extends_documentation_fragment:
  - blackwell.sglang.common
description:
  - Polls SGLang's Prometheus endpoint (C(GET /metrics), served only with C(--enable-metrics)) and sums
    C(sglang:num_running_reqs) and C(sglang:num_queue_reqs) over the series it serves. Succeeds once the sum was 0
    in I(settle_polls) consecutive polls.
  - What the gauges count (SGLang 0.5.23 managers/scheduler_components/metrics_reporter.py, observability/
    metrics_collector.py) - one series, from the stats-logging rank (attn_tp_rank 0), of the scheduler's running batch
    and waiting queue, written when a batch is logged and at once when the scheduler goes idle. A request still being
    tokenised, or whose answer is still being streamed back, is not in them.
  - So 0 means the scheduler has nothing left, not that every HTTP answer was sent. Use it after the worker left the
    router's rotation and before a restart; the restart's SIGTERM then drains what remains (SGLang's
    tokenizer_manager.py sigterm_watchdog waits for every request it holds, without a limit of its own), which the
    unit's KillMode=mixed and TimeoutStopSec let finish.
  - Fails with the last counts when I(timeout) passes, or when the endpoint has no such metrics (then the
    server runs without C(--enable-metrics), and the message says so).
  - A server that does not answer at all (stopped, crashed) has nothing in flight, so the module succeeds at
    once with I(server_down=true).
  - Check mode reads the counts once and does not wait.
options:
  url:
    description: Base URL of the SGLang server, e.g. C(http://127.0.0.1:30000).
    type: str
    required: true
  metrics:
    description: Gauges to sum; all must be present in the answer.
    type: list
    elements: str
    default: ["sglang:num_running_reqs", "sglang:num_queue_reqs"]
  timeout:
    description: Seconds to wait for 0 before failing.
    type: int
    default: 300
  poll_interval:
    description: Seconds between polls.
    type: float
    default: 0.5
  settle_polls:
    description: Consecutive polls that must read 0 (covers a request the router had already sent).
    type: int
    default: 2
  request_timeout:
    description: Seconds per C(/metrics) request.
    type: int
    default: 10
"""

EXAMPLES = r"""
- name: Wait until the worker finished what it was given (at most 5 minutes)
  sglang_drain:
    url: http://127.0.0.1:30000
    timeout: 300
"""

RETURN = r"""
in_flight_initial:
  description: Running + queued requests at the first poll.
  returned: always
  type: int
in_flight:
  description: Running + queued requests at the last poll (0 on success).
  returned: always
  type: int
counts:
  description: The last value of each gauge, summed over ranks.
  returned: always
  type: dict
  sample: {"sglang:num_running_reqs": 0.0, "sglang:num_queue_reqs": 0.0}
server_down:
  description: True when nothing answered at the first poll (nothing to drain).
  returned: always
  type: bool
waited_s:
  description: Seconds until drained (or until the timeout).
  returned: always
  type: float
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils.fleet.sglang_inflight import IN_FLIGHT_GAUGES, POLL_INTERVAL, SETTLE_POLLS, wait_drained
from ansible_collections.blackwell.sglang.plugins.module_utils.http.http_client import EndpointError, JsonClient


def run(params, check_mode, client=None, clock=None, sleep=None):
    """The module's result: sglang_inflight.wait_drained on ``params["url"]``; raises EndpointError with the counts."""
    client = client or JsonClient(params["url"], timeout=params["request_timeout"])
    waits = {k: v for k, v in (("clock", clock), ("sleep", sleep)) if v is not None}
    result = wait_drained(client, params["timeout"], metrics=params["metrics"], poll_interval=params["poll_interval"],
                          settle_polls=params["settle_polls"], check_mode=check_mode, **waits)
    result["changed"] = False
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type="str", required=True),
            metrics=dict(type="list", elements="str", default=list(IN_FLIGHT_GAUGES)),
            timeout=dict(type="int", default=300),
            poll_interval=dict(type="float", default=POLL_INTERVAL),
            settle_polls=dict(type="int", default=SETTLE_POLLS),
            request_timeout=dict(type="int", default=10),
        ),
        supports_check_mode=True,
    )
    try:
        result = run(module.params, module.check_mode)
    except EndpointError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
