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
import tempfile

from ansible_collections.blackwell.sglang.plugins.module_utils.http.http_client import normalise_url


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


def render(members):
    """The file's text, as every writer writes it (so an unchanged membership is an unchanged file)."""
    return json.dumps({"router_url": members["router_url"], "workers": members["workers"]}, indent=2) + "\n"


def write_members(path, members):
    """Write ``members`` to ``path`` atomically (mode 0644: the router's user reads it); True when it changed."""
    text = render(members)
    try:
        with open(path, encoding="utf-8") as handle:
            if handle.read() == text:
                return False
    except FileNotFoundError:
        pass
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=".workers-", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return True
