#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible module: register or deregister one SGLang worker with sglang-router 0.3.2, and wait until it shows."""

DOCUMENTATION = r"""
module: sglang_router_workers
short_description: Add a worker to sglang-router or remove it, and wait until the router's list agrees
extends_documentation_fragment:
  - blackwell.sglang.common
  - blackwell.sglang.common.request_timeout
  - blackwell.sglang.common.router_poll
description:
  - Talks to the worker API of sglang-router 0.3.2 (C(GET /workers), C(POST /workers), C(DELETE /workers/{id});
    this release has no C(/add_worker)). Both calls are asynchronous in the router, so the module polls
    C(GET /workers) until the worker is listed healthy (I(state=present)) or no longer listed (I(state=absent)).
  - Run it where the router's URL answers (the router host itself, C(delegate_to)).
  - Check mode reports what would change and changes nothing.
options:
  router_url:
    description: Base URL of the router, e.g. C(http://127.0.0.1:30000). Required unless I(members_file) names it
      (a play without the router host, a GPU node's C(--limit) run, reads it there).
    type: str
  members_file:
    description:
      - The router's membership file (roles/sglang_router writes it; its C(ExecStartPost) registers its workers when
        the router starts, which keeps none of C(POST /workers) across a restart). Given, a worker joins it once the
        router lists it healthy (I(state=present)) and leaves it before its C(DELETE) (I(state=absent)), so a router
        restarted at any moment re-learns the fleet's members and only them. Omitted, the file is not touched (a
        rolling switch takes a member out of rotation and back; it stays a member).
    type: path
  worker_url:
    description: The worker's URL as the router reaches it, e.g. C(http://gpu-node-0:30000). Compared without
      a trailing slash.
    type: str
    required: true
  state:
    description: C(present) adds the worker (if missing) and waits until it is listed healthy; C(absent)
      removes every entry with this URL and waits until none is listed.
    type: str
    choices: [present, absent]
    default: present
  min_healthy_others:
    description:
      - With I(state=absent), the capacity guard - refuse (before removing anything) unless at least this many
        other workers are listed healthy. A rolling redeploy sets it so a node that is already unhealthy stops the
        rollout instead of taking a second node out of rotation. 0 turns the guard off.
    type: int
    default: 0
  drain_timeout:
    description:
      - With I(state=absent), then wait (at most this many seconds) until the worker has no request in flight, read
        from its C(/metrics) at I(worker_url) as the router reaches it. The rule is the sglang_drain module's -
        running + queued requests 0 in two polls 0.5 s apart, and a worker that does not answer has nothing in
        flight. One module run for deregister and drain keeps a rolling redeploy's node out of rotation one task
        shorter.
      - Also when the worker was not listed (a re-run after a failed switch still waits for what it holds). 0 does not
        wait. Fails with the counts on timeout, or when the worker serves no such metrics (C(--enable-metrics)).
    type: int
    default: 0
  health_check_timeout:
    description:
      - With I(drain_timeout), SGLang's own bound on C(/health) (C(SGLANG_HEALTH_CHECK_TIMEOUT),
        deployment_health_check_timeout_s). After the drain the module asks the worker's C(/health) once, waiting 5 s longer than that. A busy spell can
        have left SGLang 0.5.23 C(UnHealthy) (one C(/health) answered 503). It stays so until a C(/health) succeeds,
        and out of rotation nobody probes it. A SIGTERM would then force-exit instead of draining what is still
        streamed back (tokenizer_manager.py sigterm_watchdog). The answer is in RV(drain) (C(health_after)).
    type: int
    default: 20
  timeout:
    description: Seconds to wait for the router's list to agree before failing.
    type: int
    default: 120
"""

EXAMPLES = r"""
- name: Take the worker out of rotation
  sglang_router_workers:
    router_url: http://127.0.0.1:30000
    worker_url: "http://{{ inventory_hostname }}:30000"
    state: absent
  delegate_to: "{{ groups['sglang_routers'][0] }}"

- name: Take the worker out of rotation and wait until it finished what it was given (at most 10 minutes)
  sglang_router_workers:
    router_url: http://127.0.0.1:30000
    worker_url: "http://{{ inventory_hostname }}:30000"
    state: absent
    drain_timeout: 600
  delegate_to: "{{ groups['sglang_routers'][0] }}"

- name: Put it back and wait until the router lists it healthy
  sglang_router_workers:
    router_url: http://127.0.0.1:30000
    worker_url: "http://{{ inventory_hostname }}:30000"
    state: present
    timeout: 180
  delegate_to: "{{ groups['sglang_routers'][0] }}"
"""

RETURN = r"""
worker:
  description: The router's entry for the worker after the change (empty dict when absent).
  returned: always
  type: dict
  sample: {"id": "fde6749d-56d5-4474-a8db-803fe722f7a8", "url": "http://gpu-node-1:30000", "is_healthy": true,
           "load": 0}
members:
  description: The workers of I(members_file) after the change (omitted without it).
  returned: when members_file is given
  type: list
  elements: str
workers:
  description: URLs and health of every worker the router lists at the end, C([{url, is_healthy}]).
  returned: always
  type: list
  elements: dict
waited_s:
  description: Seconds spent waiting for the router's list to agree (0 when nothing changed).
  returned: always
  type: float
drain:
  description: With I(drain_timeout), what the worker had in flight, as the sglang_drain module returns it -
    in_flight_initial, in_flight, counts, server_down, waited_s; and health_after, the status of the C(/health)
    asked after the drain (200 clears an C(UnHealthy) left by a busy spell; null when the worker did not answer or
    the module ran in check mode).
  returned: when state is absent and drain_timeout is above 0
  type: dict
  sample: {"in_flight_initial": 3, "in_flight": 0, "counts": {"sglang:num_running_reqs": 0.0,
           "sglang:num_queue_reqs": 0.0}, "server_down": false, "waited_s": 4.02, "health_after": 200}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils.fleet.sglang_inflight import health_after_drain, wait_drained
from ansible_collections.blackwell.sglang.plugins.module_utils.http.http_client import (
    EndpointError, JsonClient, normalise_url,
)
from ansible_collections.blackwell.sglang.plugins.module_utils.http.polling import wait_until
from ansible_collections.blackwell.sglang.plugins.module_utils.fleet.sglang_router_api import (
    Router, RouterError, worker_summary,
)
from ansible_collections.blackwell.sglang.plugins.module_utils.fleet.router_members import (
    MembersFileError, read_members, with_worker, write_members,
)


def run(params, check_mode, router=None, clock=None, sleep=None, worker=None, health=None):
    """Do what the parameters ask; returns the module result dict, raises EndpointError with the evidence
    (RouterError where the router's list is the evidence; MembersFileError for an unreadable membership file).

    ``router`` (a sglang_router_api.Router), ``worker`` (an http_client.JsonClient on the worker, for the drain) and
    ``health`` (one for its /health, with SGLang's bound + 5 s as its timeout) are made from the parameters unless
    given (tests)."""
    members = _Members(params)
    router_url = params.get("router_url") or (members.current or {}).get("router_url")
    if not router_url:
        raise EndpointError("no router_url: give it, or a members_file the router role wrote (%s: %s)"
                            % (params.get("members_file"), "absent" if members.current is None else "no router_url"))
    router = router or Router(router_url, timeout=params["request_timeout"])
    waits = {k: v for k, v in (("clock", clock), ("sleep", sleep)) if v is not None}
    result = _rotation(params, check_mode, router, waits, members)
    if params["state"] == "absent" and (params.get("drain_timeout") or 0) > 0:
        worker = worker or JsonClient(params["worker_url"], timeout=params["request_timeout"])
        drain = wait_drained(worker, params["drain_timeout"], check_mode=check_mode, **waits)
        drain["health_after"] = None
        if not check_mode and not drain["server_down"]:
            bound = int(params.get("health_check_timeout") or 20) + 5
            health = health or JsonClient(params["worker_url"], timeout=bound)
            drain["health_after"] = health_after_drain(health)
        result["drain"] = drain
    return result


class _Members:
    """The membership file of ``params["members_file"]`` (nothing without one): read once, updated per state."""

    def __init__(self, params):
        self.path = params.get("members_file")
        self.current = read_members(self.path) if self.path else None
        if self.path and self.current is None:
            raise EndpointError("%s does not exist: the router role writes it (deploy.yml's router play); deploy the "
                                "router first" % self.path)

    def update(self, url, present, check_mode, result):
        """Add or drop ``url``; notes the change in ``result`` (``changed``, ``members``)."""
        if not self.path:
            return
        wanted = with_worker(self.current, url, present)
        if wanted["workers"] != self.current["workers"]:
            result["changed"] = True
            if not check_mode:
                write_members(self.path, wanted)
            self.current = wanted
        result["members"] = list(self.current["workers"])


def _rotation(params, check_mode, router, waits, members):
    """Add or remove the worker and wait until the router's list agrees (the result without the drain); the
    membership file (``members``) follows: a worker leaves it before it leaves the router, and joins it once listed
    healthy.

    ``waits``: wait_until's ``clock`` and ``sleep`` where a test gives them."""
    url = normalise_url(params["worker_url"])
    timeout, interval = params["timeout"], params["poll_interval"]
    entries = router.find(url)
    result = {"changed": False, "worker": entries[0] if entries else {}, "waited_s": 0.0}

    if params["state"] == "absent":
        if not entries:
            members.update(url, False, check_mode, result)
            result["workers"] = worker_summary(router.workers())
            return result
        need = int(params.get("min_healthy_others") or 0)
        if need:
            everyone = router.workers()
            others = [w for w in everyone if normalise_url(w.get("url") or "") != url]
            healthy_others = [w.get("url") for w in others if w.get("is_healthy")]
            if len(healthy_others) < need:
                raise RouterError("refusing to take %s out of rotation: %d other worker(s) healthy (%s), the capacity "
                                  "guard needs %d; unhealthy: %s" % (
                                      url, len(healthy_others), ", ".join(healthy_others) or "none", need,
                                      ", ".join(w.get("url") for w in others if not w.get("is_healthy")) or "none"))
        result["changed"] = True
        members.update(url, False, check_mode, result)
        if check_mode:
            result["workers"] = worker_summary(router.workers())
            return result
        for entry in entries:
            router.remove(entry["id"])
        gone, waited = wait_until(lambda: not router.find(url), timeout, interval, **waits)
        result.update(waited_s=round(waited, 2), worker={})
        if not gone:
            raise RouterError("%s is still listed by the router %.0f s after DELETE /workers/%s: %s"
                              % (url, waited, entries[0]["id"], router.find(url)))
        result["workers"] = worker_summary(router.workers())
        return result

    if entries and any(e.get("is_healthy") for e in entries):
        members.update(url, True, check_mode, result)
        result["workers"] = worker_summary(router.workers())
        return result
    if check_mode:
        result["changed"] = not entries
        members.update(url, True, check_mode, result)
        result["workers"] = worker_summary(router.workers())
        return result
    if not entries:
        router.add(url)
        result["changed"] = True

    def healthy():
        found = [e for e in router.find(url) if e.get("is_healthy")]
        return found[0] if found else None

    entry, waited = wait_until(healthy, timeout, interval, **waits)
    result["waited_s"] = round(waited, 2)
    if not entry:
        listed = router.find(url)
        state = "listed but unhealthy" if listed else "not listed"
        raise RouterError("the router does not list %s as healthy %.0f s after adding it (%s): %s"
                          % (url, waited, state, listed))
    result["worker"] = entry
    members.update(url, True, check_mode, result)
    result["workers"] = worker_summary(router.workers())
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            router_url=dict(type="str"),
            members_file=dict(type="path"),
            worker_url=dict(type="str", required=True),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            min_healthy_others=dict(type="int", default=0),
            drain_timeout=dict(type="int", default=0),
            health_check_timeout=dict(type="int", default=20),
            timeout=dict(type="int", default=120),
            poll_interval=dict(type="float", default=0.5),
            request_timeout=dict(type="int", default=10),
        ),
        required_one_of=[("router_url", "members_file")],
        supports_check_mode=True,
    )
    try:
        result = run(module.params, module.check_mode)
    except (EndpointError, MembersFileError) as exc:
        module.fail_json(msg=str(exc), worker_url=module.params["worker_url"])
    module.exit_json(**result)


if __name__ == "__main__":
    main()
