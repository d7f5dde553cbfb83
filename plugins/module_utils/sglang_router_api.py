"""sglang-router 0.3.2 worker API and SGLang's Prometheus metrics, for the rolling-redeploy modules.

Facts (sglang-router 0.3.2, checked against the real router on loopback, tests/contract/test_router_api.py):

* ``GET /workers`` -> ``{"workers": [{"id", "url", "is_healthy", "load", ...}], "total", "stats"}``;
* ``POST /workers {"url": URL}`` -> 202 ``{"status": "accepted", "worker_id", ...}``; the worker is added by a
  background workflow (health check, model discovery), so it shows up in ``GET /workers`` a moment later;
* ``DELETE /workers/{id}`` -> 202 ``{"status": "accepted", ...}``; removal is asynchronous as well;
* there is no ``/add_worker`` or ``/remove_worker`` in this release; ``GET /liveness`` answers while the router
  process serves HTTP, ``GET /readiness`` 200 only with a healthy worker.

SGLang 0.5.23 ``/metrics`` (``--enable-metrics``): Prometheus text, one gauge line per scheduler rank,
e.g. ``sglang:num_running_reqs{...,tp_rank="0"} 3.0``.
"""

import json
import time

from ansible_collections.blackwell.sglang.plugins.module_utils.sglang_observe import NoAnswer as _Silence, http_request


class RouterError(Exception):
    """A router or worker endpoint did not answer as expected; the message names URL and status."""


class NoAnswer(RouterError):
    """Nothing answered at all (connection refused, timeout, name not resolved): sglang_observe.NoAnswer."""


def normalise_url(url):
    """``url`` without trailing slashes, scheme and host lower-cased (how we compare worker URLs)."""
    url = str(url).strip().rstrip("/")
    if "://" in url:
        scheme, rest = url.split("://", 1)
        host, sep, path = rest.partition("/")
        url = scheme.lower() + "://" + host.lower() + sep + path
    return url


def parse_prometheus(text):
    """Sum of each metric over its label sets: ``{"sglang:num_running_reqs": 3.0, ...}``.

    Prometheus text exposition format 0.0.4: ``# HELP``/``# TYPE`` comments, ``name{labels} value [timestamp]``.
    Label values may contain spaces and braces inside quotes; a line that does not parse is skipped.
    """
    sums = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if "{" in line:
            name = line[:line.index("{")]
            rest = line[line.index("{"):]
            # the label block ends at the first '}' outside a quoted value
            quoted, escaped, end = False, False, -1
            for i, ch in enumerate(rest):
                if escaped:
                    escaped = False
                elif ch == "\\":
                    escaped = True
                elif ch == '"':
                    quoted = not quoted
                elif ch == "}" and not quoted:
                    end = i
                    break
            if end < 0:
                continue
            fields = rest[end + 1:].split()
        else:
            parts = line.split()
            name, fields = parts[0], parts[1:]
        if not fields:
            continue
        try:
            value = float(fields[0])
        except ValueError:
            continue
        sums[name] = sums.get(name, 0.0) + value
    return sums


class HttpJson:
    """JSON over HTTP (sglang_observe.http_request) with the router modules' errors."""

    def __init__(self, base_url, timeout=10, headers=None):
        self.base_url = normalise_url(base_url)
        self.timeout = timeout
        self.headers = dict(headers or {})

    def request(self, method, path, body=None, expect=(200,)):
        """(status, parsed JSON or text) of ``method path``; RouterError for other statuses or no answer."""
        url = self.base_url + path
        try:
            status, raw = http_request(url, body, self.timeout, self.headers, method)
        except _Silence as exc:
            raise NoAnswer("%s %s: no answer (%s)" % (method, url, exc.reason))
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        if status not in expect:
            raise RouterError("%s %s: HTTP %s %s" % (method, url, status, text[:300]))
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text


class Router(HttpJson):
    """The worker API of sglang-router 0.3.2 (see the module docstring)."""

    def workers(self):
        """List of ``{"id", "url", "is_healthy", "load", ...}`` the router knows now."""
        _status, data = self.request("GET", "/workers")
        if not isinstance(data, dict) or not isinstance(data.get("workers"), list):
            raise RouterError("GET %s/workers: expected {\"workers\": [...]}, got %r" % (self.base_url, data))
        return data["workers"]

    def find(self, worker_url):
        """Entries of ``workers()`` whose URL equals ``worker_url`` (after ``normalise_url``)."""
        want = normalise_url(worker_url)
        return [w for w in self.workers() if normalise_url(w.get("url", "")) == want]

    def add(self, worker_url):
        _status, data = self.request("POST", "/workers", {"url": worker_url}, expect=(200, 201, 202))
        return data

    def remove(self, worker_id):
        _status, data = self.request("DELETE", "/workers/%s" % worker_id, expect=(200, 202, 204))
        return data


def wait_until(check, timeout, interval, clock=time.monotonic, sleep=time.sleep):
    """Call ``check()`` every ``interval`` s until it returns a truthy value or ``timeout`` s passed.

    Returns ``(value, seconds_waited)``; ``value`` is the last falsy result on timeout. Exceptions from
    ``check`` propagate (a router that stops answering is an error, not a reason to wait).
    """
    start = clock()
    while True:
        value = check()
        waited = clock() - start
        if value or waited >= timeout:
            return value, waited
        sleep(min(interval, max(timeout - waited, 0.0)))
