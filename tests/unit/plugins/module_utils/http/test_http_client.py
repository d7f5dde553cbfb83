"""http_client on loopback: what open_request returns and raises, http_request's (status, body) and NoAnswer, and
JsonClient's JSON and its errors (EndpointError naming method, URL and status)."""

import http.server
import json
import threading
from urllib.error import HTTPError

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils.http import http_client
from ansible_collections.blackwell.sglang.plugins.module_utils.http.http_client import (
    EndpointError, JsonClient, NoAnswer, http_request, normalise_url, open_request,
)

REFUSED = "http://127.0.0.1:9"  # the discard port: nothing listens there on a test machine


@pytest.fixture
def endpoint():
    """``(base URL, answers, seen)``: ``answers[path] = (status, body bytes)``; each request is appended to ``seen``
    as ``(method, path, headers, body)``."""
    answers, seen = {}, []

    class Handler(http.server.BaseHTTPRequestHandler):
        def answer(self):
            length = int(self.headers.get("Content-Length") or 0)
            seen.append((self.command, self.path, dict(self.headers), self.rfile.read(length)))
            status, body = answers.get(self.path, (404, b"no such path"))
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        do_GET = do_POST = do_DELETE = do_HEAD = answer

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield "http://127.0.0.1:%d" % server.server_address[1], answers, seen
    server.shutdown()
    server.server_close()


def test_open_request_returns_the_raw_response_and_sends_the_headers(endpoint):
    base, answers, seen = endpoint
    answers["/a.bin"] = (206, b"0123")
    with open_request(base + "/a.bin", headers={"Range": "bytes=4-"}, timeout=5) as resp:
        assert resp.status == 206 and resp.read() == b"0123"
    with open_request(base + "/a.bin", method="HEAD", timeout=5) as resp:
        assert resp.headers["Content-Length"] == "4"
    assert [(m, p, h.get("Range")) for m, p, h, _b in seen] == [("GET", "/a.bin", "bytes=4-"), ("HEAD", "/a.bin", None)]


def test_open_request_raises_urllibs_errors(endpoint):
    base, _answers, _seen = endpoint
    with pytest.raises(HTTPError) as err:
        open_request(base + "/missing", timeout=5)
    assert err.value.code == 404 and err.value.read() == b"no such path"
    with pytest.raises(OSError):  # URLError is an OSError
        open_request(REFUSED, timeout=5)


def test_http_request_returns_error_statuses_and_posts_json(endpoint):
    base, answers, seen = endpoint
    answers["/v1/chat"] = (200, b'{"ok": true}')
    assert http_request(base + "/missing", timeout=5) == (404, b"no such path")
    assert http_request(base + "/v1/chat", {"q": 1}, 5, {"Authorization": "Bearer k"}) == (200, b'{"ok": true}')
    method, _path, headers, body = seen[-1]
    assert method == "POST" and json.loads(body) == {"q": 1}
    assert headers["Content-Type"] == "application/json" and headers["Authorization"] == "Bearer k"


def test_no_answer_holds_url_and_reason_and_names_the_method_given():
    with pytest.raises(NoAnswer) as err:
        http_request(REFUSED + "/health", timeout=5)
    assert err.value.url == REFUSED + "/health" and err.value.reason and err.value.method is None
    assert str(err.value) == "%s/health: no answer (%s)" % (REFUSED, err.value.reason)
    with pytest.raises(NoAnswer, match=r"^DELETE http://127\.0\.0\.1:9/workers/x: no answer \("):
        http_request(REFUSED + "/workers/x", timeout=5, method="DELETE")
    assert issubclass(NoAnswer, EndpointError)


def test_a_malformed_url_is_an_error_of_the_caller_not_no_answer(monkeypatch):
    monkeypatch.setattr(http_client, "urlopen", lambda *a, **k: pytest.fail("sent a request to a malformed URL"))
    with pytest.raises(ValueError, match="unknown url type") as err:
        http_request("node-1/metrics", timeout=5)  # no scheme at all
    assert not isinstance(err.value, NoAnswer)


def test_json_client_parses_json_and_passes_text_through(endpoint):
    base, answers, _seen = endpoint
    answers["/workers"] = (200, b'{"workers": []}')
    answers["/metrics"] = (200, b"sglang:num_running_reqs 0\n")
    client = JsonClient(base.upper().replace("HTTP://", "http://") + "/", timeout=5)
    assert client.base_url == base
    assert client.request("GET", "/workers") == (200, {"workers": []})
    assert client.request("GET", "/metrics") == (200, "sglang:num_running_reqs 0\n")
    assert client.request("GET", "/missing", expect=(200, 404)) == (404, "no such path")


def test_json_client_errors_name_method_url_and_status(endpoint):
    base, answers, _seen = endpoint
    answers["/workers"] = (500, b"x" * 1000)
    with pytest.raises(EndpointError) as err:
        JsonClient(base, timeout=5).request("POST", "/workers", {"url": "http://n1:30000"})
    assert str(err.value) == "POST %s/workers: HTTP 500 %s" % (base, "x" * 300)
    with pytest.raises(NoAnswer, match=r"^GET http://127\.0\.0\.1:9/metrics: no answer \("):
        JsonClient(REFUSED, timeout=5).request("GET", "/metrics")


def test_normalise_url():
    assert normalise_url("HTTP://Node-1:30000/") == "http://node-1:30000"
    assert normalise_url(" http://a:1/x/ ") == "http://a:1/x"
