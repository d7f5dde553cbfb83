#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible module: make sglang-router's members the inventory's, in its membership file and its live list."""

DOCUMENTATION = r"""
module: sglang_router_members
short_description: Make sglang-router's workers the given list, in its membership file and live, without a restart
extends_documentation_fragment:
  - blackwell.sglang.common
  - blackwell.sglang.common.request_timeout
  - blackwell.sglang.common.router_poll
description:
  - sglang-router 0.3.2 forgets every worker added through C(POST /workers) when it restarts, so its unit names no
    worker and registers those of the membership file when it starts (roles/sglang_router,
    C(files/register_workers.py)). This module writes that file and brings the running router to the same list
    through its worker API (C(GET /workers), C(POST /workers), C(DELETE /workers/{id})); the router's process is not
    touched.
  - Order, so that the router never lists fewer healthy workers than it needs (sgl-project/sglang#38524 - the
    router's adds and removes are independent jobs, a remove can finish before the add it was meant to follow) -
    the file first (a restart at any moment registers the new list), then every missing worker added and listed
    healthy, and only then the workers not in the list removed, each drained (bounded) from the router host.
  - Run it on the router host. Check mode reports what would change and changes nothing.
options:
  router_url:
    description: Base URL of the router on its own host, e.g. C(http://127.0.0.1:30000); written to the file too.
    type: str
    required: true
  members_file:
    description: The router's membership file.
    type: path
    required: true
  workers:
    description: Every worker URL the router must list (as the router reaches each one), in order.
    type: list
    elements: str
    required: true
  timeout:
    description: Seconds to wait for the router to list each added worker healthy, and to forget each removed one.
    type: int
    default: 180
  drain_timeout:
    description: Seconds to wait, per removed worker, until it has nothing in flight (its C(/metrics), as the
      sglang_drain module reads them; a worker that no longer answers has nothing in flight). 0 does not wait.
    type: int
    default: 0
"""

EXAMPLES = r"""
- name: Make the router's members the inventory's
  blackwell.sglang.sglang_router_members:
    router_url: http://127.0.0.1:30000
    members_file: /etc/sglang-router/workers.json
    workers: [http://gpu-node-0:30000, http://gpu-node-1:30000]
    drain_timeout: 660
"""

RETURN = r"""
added:
  description: Workers registered by this run (listed healthy at the end).
  returned: always
  type: list
  elements: str
removed:
  description: Workers the router listed that are not in I(workers), deregistered (and drained) by this run.
  returned: always
  type: list
  elements: str
file_changed:
  description: Whether the membership file was (or, in check mode, would be) rewritten.
  returned: always
  type: bool
workers:
  description: URLs and health of every worker the router lists at the end, C([{url, is_healthy}]).
  returned: always
  type: list
  elements: dict
drains:
  description: Per removed worker, what it had in flight (the sglang_drain module's figures).
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils.fleet.router_members import (
    MembersFileError, read_members, write_members,
)
from ansible_collections.blackwell.sglang.plugins.module_utils.fleet.sglang_inflight import wait_drained
from ansible_collections.blackwell.sglang.plugins.module_utils.fleet.sglang_router_api import (
    Router, RouterError, worker_health, worker_summary,
)
from ansible_collections.blackwell.sglang.plugins.module_utils.http.http_client import (
    EndpointError, JsonClient, normalise_url,
)
from ansible_collections.blackwell.sglang.plugins.module_utils.http.polling import wait_until


def run(params, check_mode, router=None, clock=None, sleep=None, client=None):
    """Do what the parameters ask; the module result. Raises EndpointError (RouterError) with the evidence, and
    MembersFileError for a membership file that cannot be read.

    ``router`` (a sglang_router_api.Router) and ``client`` (url -> JsonClient, for a removed worker's drain) are made
    from the parameters unless given (tests)."""
    waits = {k: v for k, v in (("clock", clock), ("sleep", sleep)) if v is not None}
    router = router or Router(params["router_url"], timeout=params["request_timeout"])
    client = client or (lambda url: JsonClient(url, timeout=params["request_timeout"]))
    wanted = []
    for url in params["workers"]:
        if normalise_url(url) not in wanted:
            wanted.append(normalise_url(url))
    members = {"router_url": params["router_url"].rstrip("/"), "workers": wanted}
    before = read_members(params["members_file"])
    listed = router.workers()
    health = worker_health(listed)
    missing = [u for u in wanted if not health.get(u)]
    extra = [w for w in listed if normalise_url(w.get("url") or "") not in wanted]
    result = {"changed": False, "added": [], "removed": sorted({normalise_url(w["url"]) for w in extra}),
              "file_changed": before != members, "drains": {}, "workers": worker_summary(listed)}
    # A member the router lists but not healthy at this instant (a busy spell, a restart the rollout just made) is waited
    # for below, not added: nothing changes for it, so it is no change (a deploy right after a rollout said changed=1).
    result["changed"] = bool(result["file_changed"] or [u for u in missing if u not in health] or extra)
    if check_mode:
        result["added"] = [u for u in missing if u not in health]
        return result

    if result["file_changed"]:
        write_members(params["members_file"], members)
    for url in missing:
        if url not in health:
            router.add(url)
            result["added"].append(url)
    timeout, interval = params["timeout"], params["poll_interval"]

    def healthy_now():
        now = worker_health(router.workers())
        return all(now.get(u) for u in missing)

    done, waited = wait_until(healthy_now, timeout, interval, **waits)
    if not done:
        now = worker_health(router.workers())
        raise RouterError("the router does not list every member healthy %.0f s after adding them: %s; nothing was "
                          "removed" % (waited, ", ".join("%s %s" % (u, "unhealthy" if u in now else "not listed")
                                                         for u in missing if not now.get(u))))
    for entry in extra:
        router.remove(entry["id"])
    gone, waited = wait_until(lambda: not set(worker_health(router.workers())) & set(result["removed"]), timeout,
                              interval, **waits)
    if not gone:
        raise RouterError("the router still lists %s %.0f s after DELETE /workers" % (result["removed"], waited))
    if (params.get("drain_timeout") or 0) > 0:
        for url in result["removed"]:
            result["drains"][url] = wait_drained(client(url), params["drain_timeout"], **waits)
    result["workers"] = worker_summary(router.workers())
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            router_url=dict(type="str", required=True),
            members_file=dict(type="path", required=True),
            workers=dict(type="list", elements="str", required=True),
            timeout=dict(type="int", default=180),
            drain_timeout=dict(type="int", default=0),
            poll_interval=dict(type="float", default=0.5),
            request_timeout=dict(type="int", default=10),
        ),
        supports_check_mode=True,
    )
    try:
        result = run(module.params, module.check_mode)
    except (EndpointError, MembersFileError) as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
