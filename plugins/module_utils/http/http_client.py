# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's one HTTP client (stdlib only, no Ansible import) and its errors.

* ``open_request``: one request through urllib, the raw response back (streaming callers read it themselves);
  ``host_bound_headers`` (a token) go to the URL's host only, never after a redirect to another host;
* ``http_request``: ``(status, body bytes)``, an error status being an answer too;
* ``JsonClient``: JSON over ``http_request`` against one base URL, for the router, drain and Alertmanager modules;
* ``EndpointError``: an endpoint did not answer as expected; ``NoAnswer``, its subclass: nothing answered at all.

Facts (CPython 3 ``urllib.request``): ``urlopen`` follows redirects and raises ``HTTPError`` (a ``URLError``, and a
response whose ``code`` and ``read()`` are the answer) for a status of 400 or more; ``URLError`` (``reason``: the
socket error) when the connection fails or the name does not resolve; ``socket.timeout`` (an ``OSError``) when the
answer is late; ``http.client.InvalidURL`` (a ``ValueError``) for a bad port. ``Request`` raises ``ValueError`` for a
URL without a scheme it knows, before anything is sent.
"""

from __future__ import absolute_import, division, print_function

import json

# The standard library's urllib, not ansible.module_utils.urls: benchmarks/crash_to_verdict.py imports this file
# (through sglang_observe) on a node that has no Ansible, and model_mirror streams the weights through it
# (tests/sanity/ignore-2.19.txt says why for replace-urlopen).
from urllib.error import HTTPError, URLError
from urllib.parse import urlsplit
from urllib.request import HTTPRedirectHandler, Request, build_opener, urlopen

__metaclass__ = type


class EndpointError(Exception):
    """An HTTP endpoint did not answer as expected; the message names the method, the URL and the status (or what
    the answer lacked)."""


class NoAnswer(EndpointError):
    """Nothing answered (connection refused, timeout, name not resolved); ``reason`` says which, ``url`` where
    (``method`` too, where the caller named one)."""

    def __init__(self, url, reason, method=None):
        where = "%s %s" % (method, url) if method else url
        EndpointError.__init__(self, "%s: no answer (%s)" % (where, reason))
        self.url, self.reason, self.method = url, reason, method


def normalise_url(url):
    """``url`` without trailing slashes, scheme and host lower-cased (how JsonClient keeps its base URL and the router
    modules compare worker URLs)."""
    url = str(url).strip().rstrip("/")
    if "://" in url:
        scheme, rest = url.split("://", 1)
        host, sep, path = rest.partition("/")
        url = scheme.lower() + "://" + host.lower() + sep + path
    return url


class _HostBoundRedirects(HTTPRedirectHandler):
    """urllib's redirects, except that the headers named in the request's ``host_bound`` (credentials) are dropped
    when a redirect leaves the host, as requests and so huggingface_hub do: the Hub answers a resolve URL of a large
    file with a redirect to its CDN's signed URL, which must not get the token."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        new = HTTPRedirectHandler.redirect_request(self, req, fp, code, msg, headers, newurl)
        bound = getattr(req, "host_bound", ())
        if new is not None and bound:
            new.host_bound = bound
            if urlsplit(new.full_url).netloc.lower() != urlsplit(req.full_url).netloc.lower():
                for name in bound:
                    new.remove_header(name.capitalize())
        return new


_HOST_BOUND_OPENER = []


def open_request(url, headers=None, method=None, timeout=10.0, data=None, host_bound_headers=None):
    """Send one request and return urllib's response (``status``, ``headers``, ``read``; a context manager).

    ``url`` is a URL, or a ``urllib.request.Request`` made already (then its own headers, method and data are sent).
    ``host_bound_headers`` (e.g. a token's ``Authorization``) are sent to this URL's host only, not after a redirect
    to another host. Raises what urlopen raises: ``HTTPError`` for a status of 400 or more (``code``, ``headers``,
    ``read()``), ``URLError``/``OSError`` when nothing answered, ``ValueError`` for a malformed URL.
    """
    if not isinstance(url, Request):
        url = Request(url, data=data, headers=dict(headers or {}), method=method)
    if not host_bound_headers:
        return urlopen(url, timeout=timeout)
    for name, value in host_bound_headers.items():
        url.add_header(name, value)
    url.host_bound = tuple(host_bound_headers)
    if not _HOST_BOUND_OPENER:  # built once: an opener per request costs what open_url cost (see model_mirror)
        _HOST_BOUND_OPENER.append(build_opener(_HostBoundRedirects))
    return _HOST_BOUND_OPENER[0].open(url, timeout=timeout)


def http_request(url, body=None, timeout=10.0, headers=None, method=None):
    """GET (``body`` None) or POST ``body`` as JSON; returns ``(status int, raw bytes)``.

    An HTTP error status is an answer and is returned; NoAnswer is raised when nothing answered. Shared by
    sglang_health (``/health``), sglang_smoke (chat checks) and the router / drain modules (``JsonClient``).
    """
    headers = dict(headers or {})
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers.setdefault("Content-Type", "application/json")
    # Made before the try: a malformed URL stays the caller's ValueError, not "no answer" (a drain would read that
    # as a server that is down).
    req = Request(url, data=data, headers=headers, method=method)
    try:
        response = open_request(req, timeout=timeout)
        return response.getcode(), response.read()
    except HTTPError as exc:
        return exc.code, exc.read()
    except (URLError, OSError, ValueError) as exc:
        raise NoAnswer(url, getattr(exc, "reason", exc), method)


class JsonClient:
    """JSON over HTTP (``http_request``) against ``base_url``: EndpointError for a status not expected, NoAnswer when
    nothing answered."""

    def __init__(self, base_url, timeout=10, headers=None):
        self.base_url = normalise_url(base_url)
        self.timeout = timeout
        self.headers = dict(headers or {})

    def request(self, method, path, body=None, expect=(200,)):
        """(status, parsed JSON or text) of ``method path``; EndpointError for other statuses or no answer."""
        url = self.base_url + path
        status, raw = http_request(url, body, self.timeout, self.headers, method)
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        if status not in expect:
            raise EndpointError("%s %s: HTTP %s %s" % (method, url, status, text[:300]))
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text
