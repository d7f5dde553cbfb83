"""sglang-router 0.3.2 worker API, for the rolling-redeploy modules.

Facts (sglang-router 0.3.2, checked against the real router on loopback, tests/contract/test_router_api.py):

* ``GET /workers`` -> ``{"workers": [{"id", "url", "is_healthy", "load", ...}], "total", "stats"}``;
* ``POST /workers {"url": URL}`` -> 202 ``{"status": "accepted", "worker_id", ...}``; the worker is added by a
  background workflow (health check, model discovery), so it shows up in ``GET /workers`` a moment later;
* ``DELETE /workers/{id}`` -> 202 ``{"status": "accepted", ...}``; removal is asynchronous as well;
* there is no ``/add_worker`` or ``/remove_worker`` in this release; ``GET /liveness`` answers while the router
  process serves HTTP, ``GET /readiness`` 200 only with a healthy worker.
"""

from ansible_collections.blackwell.sglang.plugins.module_utils.http.http_client import (
    EndpointError, JsonClient, normalise_url,
)


class RouterError(EndpointError):
    """The router's worker list is not what was asked or expected: an answer that is no worker list, a worker not
    added or removed in time, too few healthy others for the capacity guard; the message names the URLs and the list
    (HTTP statuses and silence are the client's EndpointError and NoAnswer)."""


class Router(JsonClient):
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


def worker_summary(workers):
    """``[{url, is_healthy}]`` of a ``Router.workers()`` list: what the modules return as RV(workers)."""
    return [{"url": w.get("url"), "is_healthy": bool(w.get("is_healthy"))} for w in workers]


def worker_health(workers):
    """``{normalised URL: listed healthy}`` of a ``Router.workers()`` list."""
    return {normalise_url(w.get("url") or ""): bool(w.get("is_healthy")) for w in workers}
