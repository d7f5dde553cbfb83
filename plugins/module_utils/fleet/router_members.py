"""The router's membership file: which workers a cold-started sglang-router registers.

sglang-router 0.3.2 keeps the workers added through ``POST /workers`` in memory only: a restart starts with those of
its command line, and nothing else. So the router's unit carries no worker; its ``ExecStartPost``
(roles/sglang_router/files/register_workers.py) registers the workers of this file, and every change of membership
(deploy.yml's router play from the inventory, a node joining with ``--limit``, playbooks/remove_node.yml) writes it
together with the router's live list. One JSON object, written atomically::

    {"router_url": "http://127.0.0.1:30000", "workers": ["http://gpu-node-0:30000", ...]}

``router_url`` is where the router listens on its own host: a play that runs without the router host (a GPU node's
``--limit`` run) reads it here, from where the router role published it.
"""

import json
import os

from ansible_collections.blackwell.sglang.plugins.module_utils.http.http_client import normalise_url
from ansible_collections.blackwell.sglang.plugins.module_utils.staging.durable_files import write_json_atomic


class MembersFileError(Exception):
    """The membership file cannot be read as the router role writes it; the message names the path and why."""


def read_members(path):
    """``{"router_url": str, "workers": [url, ...]}`` from ``path``; ``None`` when there is no such file."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise MembersFileError("%s: cannot read the router's membership file: %s" % (path, exc))
    if not isinstance(data, dict) or not isinstance(data.get("workers"), list):
        raise MembersFileError("%s: expected {\"router_url\": ..., \"workers\": [...]}, got %r" % (path, data))
    return {"router_url": str(data.get("router_url") or ""), "workers": [str(u) for u in data["workers"]]}


def with_worker(members, url, present):
    """``members`` with ``url`` added at the end (``present``) or every entry equal to it removed."""
    want = normalise_url(url)
    workers = [u for u in members["workers"] if normalise_url(u) != want]
    if present:
        workers = list(members["workers"]) if len(workers) < len(members["workers"]) else workers + [want]
    return dict(members, workers=workers)


def write_members(path, members):
    """Write ``members`` to ``path`` atomically (durable_files.write_json_atomic: fsynced, renamed over it), mode 0644
    so that the router's user reads it. The callers write only what differs from what they read."""
    write_json_atomic(path, {"router_url": members["router_url"], "workers": members["workers"]})
    os.chmod(path, 0o644)
