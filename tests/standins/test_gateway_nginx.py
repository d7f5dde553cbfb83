"""The gateway's real configuration (roles/sglang_gateway/templates, rendered by Ansible's own templar with the
role's filters) in the real nginx (Debian's, installed by scripts/bootstrap.sh), in front of a recording backend on
loopback. What a client, the router and Prometheus get from it, and what a reload with a new key list does to a
stream in flight.

Skipped, with the reason, when nginx is not installed.
"""

import http.client
import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from ansible_collections.blackwell.sglang.plugins.filter.sglang_gateway import (
    sglang_gateway_keys, sglang_gateway_probe_sources)

ROOT = pathlib.Path(__file__).resolve().parents[2]
ROLE = ROOT / "roles" / "sglang_gateway"
NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
pytestmark = pytest.mark.skipif(NGINX is None, reason="nginx is not installed (scripts/bootstrap.sh installs it)")

OLD = {"name": "team-a", "key": "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0-_.~+/="}
NEW = {"name": "team-b", "key": "Zz" * 20}


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Backend(ThreadingHTTPServer):
    """Records (method, path, Authorization) and answers JSON; POST /stream sends 6 chunks 0.4 s apart."""
    daemon_threads = True

    def __init__(self):
        self.seen = []
        super().__init__(("127.0.0.1", 0), Handler)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self.server.seen.append((self.command, self.path, self.headers.get("Authorization")))
        if self.path == "/stream":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(6):
                data = ("data: %d\n\n" % i).encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
                time.sleep(0.4)
            self.wfile.write(b"0\r\n\r\n")
            return
        body = json.dumps({"path": self.path}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_HEAD = _answer

    def log_message(self, *args):
        pass


def _render(name, variables):
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    text = (ROLE / "templates" / name).read_text()
    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(text))


class Gateway:
    def __init__(self, tmp, backend_port, keys):
        self.tmp, self.port = tmp, _free_port()
        defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
        self.vars = {
            "ansible_managed": "test", "sglang_gateway_label": "test",
            "sglang_gateway_backend_url": "http://127.0.0.1:%d" % backend_port,
            "sglang_gateway_backend": "127.0.0.1:%d" % backend_port,
            "sglang_gateway_listen": "127.0.0.1:%d" % self.port,
            "sglang_gateway_keys_file": str(tmp / "keys.conf"),
            "sglang_gateway_sources": sglang_gateway_probe_sources([], {}),
            "sglang_gateway_probe_paths": defaults["sglang_gateway_probe_paths"],
            "sglang_gateway_log_dir": str(tmp), "sglang_gateway_max_body_size": "1m",
            "sglang_gateway_request_timeout_s": 30}
        self.write_keys(keys)
        (tmp / "gateway.conf").write_text(_render("gateway.conf.j2", self.vars))
        (tmp / "nginx.conf").write_text(
            "pid %(t)s/nginx.pid; error_log %(t)s/error.log; worker_processes 1; daemon off;\n"
            "events { worker_connections 64; }\n"
            "http { client_body_temp_path %(t)s/body; proxy_temp_path %(t)s/proxy; access_log off;\n"
            "       include %(t)s/gateway.conf; }\n" % {"t": tmp})
        self.proc = subprocess.Popen([NGINX, "-p", str(tmp), "-c", str(tmp / "nginx.conf")],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                if self.proc.poll() is not None:
                    raise AssertionError(self.proc.stdout.read().decode() + (tmp / "error.log").read_text())
                time.sleep(0.05)
        raise AssertionError("nginx did not listen within 10 s")

    def write_keys(self, keys):
        self.vars["sglang_gateway_keys_matched"] = sglang_gateway_keys(keys)
        (self.tmp / "keys.conf").write_text(_render("keys.conf.j2", self.vars))

    def test_config(self):
        return subprocess.run([NGINX, "-t", "-q", "-p", str(self.tmp), "-c", str(self.tmp / "nginx.conf")],
                              capture_output=True, text=True)

    def reload(self):
        self.proc.send_signal(signal.SIGHUP)

    def request(self, method, path, key=None, scheme="Bearer", source="127.0.0.1", body=None, headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10, source_address=(source, 0))
        hdrs = dict(headers or {})
        if key is not None:
            hdrs["Authorization"] = "%s %s" % (scheme, key)
        conn.request(method, path, body=body, headers=hdrs)
        resp = conn.getresponse()
        return resp, resp.read(), conn

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@pytest.fixture
def backend():
    server = Backend()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def gateway(tmp_path, backend):
    gw = Gateway(tmp_path, backend.server_address[1], [OLD])
    yield gw
    gw.stop()


def test_no_key_or_a_wrong_one_is_refused_like_sglang_refuses_and_reaches_nothing(gateway, backend):
    for key, scheme in ((None, "Bearer"), ("nope", "Bearer"), (OLD["key"].swapcase(), "Bearer"),
                        (OLD["key"] + "x", "Bearer"), (OLD["key"][:-1], "Bearer"), (OLD["key"], "Basic")):
        resp, body, _ = gateway.request("POST", "/v1/chat/completions", key, scheme, body=b"{}")
        assert resp.status == 401, (key, scheme)
        assert json.loads(body) == {"error": "Unauthorized"}  # SGLang 0.5.23 srt/utils/auth.py's own answer
        assert resp.getheader("WWW-Authenticate", "").startswith("Bearer")
    assert backend.seen == []


def test_the_key_passes_with_its_header_for_the_router_to_forward(gateway, backend):
    for scheme in ("Bearer", "bearer"):
        resp, body, _ = gateway.request("POST", "/v1/chat/completions?x=1", OLD["key"], scheme, body=b"{}")
        assert resp.status == 200 and json.loads(body) == {"path": "/v1/chat/completions?x=1"}
    assert backend.seen[-1] == ("POST", "/v1/chat/completions?x=1", "bearer " + OLD["key"])
    log = (gateway.tmp / "sglang-gateway-test.access.log").read_text()
    assert "key=team-a" in log and OLD["key"] not in log


def test_probes_need_no_key_from_a_probe_source_only_and_never_generate(gateway, backend):
    for path in ("/health", "/server_info", "/model_info", "/metrics"):
        resp, _, _ = gateway.request("GET", path)
        assert resp.status == 200, path
    # /health_generate runs a generation; a POST is not a probe; a path that normalises to a non-probe is not one
    for method, path in (("GET", "/health_generate"), ("POST", "/health"), ("GET", "/v1/models"),
                         ("GET", "/health/../v1/models"), ("GET", "/%68ealth_generate"), ("GET", "/health?x=/v1")):
        resp, _, _ = gateway.request(method, path)
        assert resp.status == (200 if path == "/health?x=/v1" else 401), (method, path)
    # the same probe from an address that is not a probe source (loopback 127.0.0.2; sources are 127.0.0.1/32, ::1)
    resp, _, _ = gateway.request("GET", "/health", source="127.0.0.2")
    assert resp.status == 401
    assert ("GET", "/v1/models", None) not in backend.seen and all(p != "/health_generate" for _, p, _ in backend.seen)


def test_a_stream_passes_as_it_is_generated(gateway):
    conn = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=10)
    start = time.monotonic()
    conn.request("POST", "/stream", body=b"{}", headers={"Authorization": "Bearer " + OLD["key"]})
    resp = conn.getresponse()
    first = resp.readline()
    assert first.startswith(b"data: 0") and time.monotonic() - start < 1.5  # the backend takes 2.4 s in all
    assert resp.read().count(b"data:") == 5


def test_a_reload_with_a_new_key_list_finishes_the_stream_in_flight(gateway):
    """Rotation: the new key first, the old one dropped, nginx reloaded (SIGHUP) mid-stream. The stream that started
    with the old key ends whole; after the reload only the new key passes."""
    conn = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=10)
    conn.request("POST", "/stream", body=b"{}", headers={"Authorization": "Bearer " + OLD["key"]})
    resp = conn.getresponse()
    assert resp.readline().startswith(b"data: 0")
    gateway.write_keys([NEW])
    assert gateway.test_config().returncode == 0
    gateway.reload()
    rest = resp.read()
    assert resp.status == 200 and rest.count(b"data:") == 5, rest
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # the new workers take over within a moment
        if gateway.request("GET", "/v1/models", NEW["key"])[0].status == 200:
            break
        time.sleep(0.1)
    assert gateway.request("GET", "/v1/models", NEW["key"])[0].status == 200
    assert gateway.request("GET", "/v1/models", OLD["key"])[0].status == 401
