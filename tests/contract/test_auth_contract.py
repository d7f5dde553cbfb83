"""Contract behind the authenticating gateway (roles/sglang_gateway), with the REAL wheels: SGLang 0.5.23
(.venv-sglang, tests/contract/install_real_sglang.sh) and sglang-router 0.3.2 (.venv-router,
tests/contract/install_real_router.sh).

Why the product gives SGLang and the router no key and puts nginx in front of them instead:

- SGLang's --api-key lets /health*, /ready* and /metrics* through without a key (a prefix match), /health_generate
  included, which runs a generation; and /health runs the same handler, generating too unless
  SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION is false;
- SGLang writes --api-key and --admin-api-key into its log (the ``server_args=`` line) and answers them on
  /server_info (the resolved fields and the launch command): its redaction covers watermark secrets only;
- sglang-router's --api-key is in its /proc/<pid>/cmdline from exec until the launcher sets the process title.

What the gateway relies on, seen at a recording stand-in worker behind the real router: a client's Authorization
reaches the worker unchanged (streamed chats too), and everything the router asks a worker on its own is a key-less
GET on a path in sglang_gateway_probe_paths (roles/sglang_gateway/defaults/main.yml).

Skipped, with the reason, when .venv-sglang or .venv-router is absent. Loopback only, free ports, bounded waits.
"""

import ast
import contextlib
import importlib.util
import json
import os
import pathlib
import secrets
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

import wheel_templates as wt

ROOT = pathlib.Path(__file__).resolve().parents[2]
SGLANG_PY = ROOT / ".venv-sglang" / "bin" / "python"
SGLANG = wt.sglang_root(str(ROOT / ".venv-sglang"))
ROUTER_PY = ROOT / ".venv-router" / "bin" / "python"
GATEWAY_DEFAULTS = ROOT / "roles" / "sglang_gateway" / "defaults" / "main.yml"
needs_sglang = pytest.mark.skipif(
    SGLANG is None or not SGLANG_PY.exists(),
    reason=".venv-sglang has no sglang package: run tests/contract/install_real_sglang.sh (about a minute)")
needs_router = pytest.mark.skipif(
    not ROUTER_PY.exists(), reason=".venv-router/bin/python is absent: run tests/contract/install_real_router.sh (about 30 s)")


def _wheel_file(relative):
    return pathlib.Path(SGLANG, relative)


def _functions(relative):
    """The module-level functions of a file of the sglang package, by name (parsed, not imported)."""
    tree = ast.parse(_wheel_file(relative).read_text())
    return {node.name: node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _route_levels():
    """srt/entrypoints/http_server.py: each route's AuthLevel name, from its endpoint's @auth_level (NORMAL without)."""
    levels = {}
    for fn in _functions("srt/entrypoints/http_server.py").values():
        level = "NORMAL"
        for dec in fn.decorator_list:
            if isinstance(dec, ast.Call) and ast.unparse(dec.func) == "auth_level":
                level = ast.unparse(dec.args[0]).rsplit(".", 1)[-1]
        for dec in fn.decorator_list:
            if (isinstance(dec, ast.Call) and ast.unparse(dec.func).startswith("app.") and dec.args
                    and isinstance(dec.args[0], ast.Constant)):
                levels[dec.args[0].value] = level
    return levels


def _load_auth():
    """srt/utils/auth.py, loaded by path: it imports only the standard library (the sglang package pulls in torch)."""
    spec = importlib.util.spec_from_file_location("sglang_0_5_23_auth", _wheel_file("srt/utils/auth.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses looks the module up while the class is built
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


@needs_sglang
def test_sglang_api_key_leaves_probe_paths_open():
    """sglang 0.5.23, sglang/srt/utils/auth.py ``decide_request_auth`` (with the routes' levels from
    sglang/srt/entrypoints/http_server.py): with api_key set, /health, /health_generate, /metrics and /ready take a
    request without Authorization, at any auth level, so SGLang's own key cannot guard /health_generate, which runs a
    generation; /v1/chat/completions and /server_info answer 401. /server_info has no @auth_level: with only
    admin_api_key set it takes no key at all."""
    auth = _load_auth()
    levels = _route_levels()

    def decide(path, method="GET", header=None, api_key="k", admin_api_key=None, level=None):
        return auth.decide_request_auth(
            method=method, path=path, authorization_header=header, api_key=api_key, admin_api_key=admin_api_key,
            auth_level=level or auth.AuthLevel[levels[path]])

    for path in ("/health", "/health_generate", "/metrics", "/ready"):
        for level in auth.AuthLevel:
            assert decide(path, level=level).allowed, (path, level)
            assert decide(path, admin_api_key="a", level=level).allowed, (path, level)
    for path, method in (("/v1/chat/completions", "POST"), ("/server_info", "GET")):
        assert levels[path] == "NORMAL", path
        decision = decide(path, method)
        assert not decision.allowed and decision.error_status_code == 401, (path, decision)
        assert decide(path, method, header="Bearer k").allowed, path
        assert not decide(path, method, header="Bearer wrong").allowed, path
    assert decide("/server_info", api_key=None, admin_api_key="a").allowed


@needs_sglang
def test_sglang_health_runs_a_generation_by_default():
    """sglang 0.5.23, sglang/srt/entrypoints/http_server.py and sglang/srt/environ.py: /health and /health_generate
    are one handler, which answers /health without generating only when SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION is
    false; it defaults to true."""
    fn = _functions("srt/entrypoints/http_server.py")["health_generate"]
    routes = {dec.args[0].value for dec in fn.decorator_list if isinstance(dec, ast.Call) and dec.args}
    assert routes == {"/health", "/health_generate"}
    assert "not envs.SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION.get() and request.url.path == '/health'" in ast.unparse(fn)
    environ = _wheel_file("srt/environ.py").read_text()
    assert "SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION = EnvBool(True)" in environ


# Run in .venv-sglang: the real ServerArgs (no model is read), the real redaction and the real build_server_info.
_LEAK_PROBE = r"""
import json, sys
from sglang.srt.sampling.watermarking.core import WATERMARK_SECRET_FIELD_NAMES, redact_watermark_secrets
from sglang.srt.server_args import prepare_server_args
from sglang.srt.utils.common import build_server_info
api_key, admin_api_key = sys.argv[1:3]
args = prepare_server_args(["--model-path", "/nonexistent/model", "--api-key", api_key, "--admin-api-key", admin_api_key])
logged = redact_watermark_secrets(args.resolved_dict())
info = redact_watermark_secrets(build_server_info(args, {}))
print(json.dumps({"secret_fields": sorted(WATERMARK_SECRET_FIELD_NAMES),
                  "logged": {k: logged[k] for k in ("api_key", "admin_api_key")},
                  "server_info": {k: info[k] for k in ("api_key", "admin_api_key", "launch_command")}}))
"""


@needs_sglang
def test_sglang_logs_and_serves_its_keys(tmp_path):
    """sglang 0.5.23: sglang/srt/entrypoints/engine.py logs ``server_args=`` through ``_server_args_for_logging``, which
    is ``redact_watermark_secrets(server_args.resolved_dict())``; /server_info (sglang/srt/entrypoints/http_server.py)
    answers ``redact_watermark_secrets`` of sglang/srt/utils/common.py's ``build_server_info``, the resolved fields
    plus ``launch_command``; and sglang/srt/sampling/watermarking/core.py's WATERMARK_SECRET_FIELD_NAMES holds
    neither api_key nor admin_api_key. So both keys are in the log and in /server_info."""
    engine = _functions("srt/entrypoints/engine.py")
    assert [ast.unparse(s) for s in engine["_server_args_for_logging"].body] == [
        "return redact_watermark_secrets(server_args.resolved_dict())"]
    engine_text = _wheel_file("srt/entrypoints/engine.py").read_text()
    assert "from sglang.srt.sampling.watermarking.core import redact_watermark_secrets" in engine_text
    assert 'logger.info(f"server_args={_server_args_for_logging(server_args)}")' in engine_text
    server_info = ast.unparse(_functions("srt/entrypoints/http_server.py")["server_info"])
    assert "redact_watermark_secrets({**build_server_info(server_args, _global_state.scheduler_info)" in server_info

    api_key, admin_api_key = "contract-api-" + secrets.token_hex(6), "contract-admin-" + secrets.token_hex(6)
    done = subprocess.run([str(SGLANG_PY), "-c", _LEAK_PROBE, api_key, admin_api_key], cwd=tmp_path, timeout=120,
                          capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    assert not {"api_key", "admin_api_key"} & set(seen["secret_fields"]), seen["secret_fields"]
    assert seen["logged"] == {"api_key": api_key, "admin_api_key": admin_api_key}
    info = seen["server_info"]
    assert (info["api_key"], info["admin_api_key"]) == (api_key, admin_api_key)
    assert f"--api-key {api_key}" in info["launch_command"] and f"--admin-api-key {admin_api_key}" in info["launch_command"]


# --- the real sglang-router in front of a recording worker ------------------------------------------------------

_GET_ANSWERS = {
    "/health": None,
    "/server_info": {"model_path": "m", "served_model_name": "m", "version": "0.5.23"},
    "/model_info": {"model_path": "m", "served_model_name": "m", "is_generation": True},
    "/v1/models": {"object": "list", "data": [{"id": "m", "object": "model", "owned_by": "sglang"}]},
}
_CHUNK = {"id": "c", "object": "chat.completion.chunk", "model": "m",
          "choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": None}]}
_COMPLETION = {"id": "c", "object": "chat.completion", "model": "m",
               "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
               "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


class _Recorder(BaseHTTPRequestHandler):
    """A stand-in SGLang worker: small JSON answers; every request lands in server.calls as
    (method, path, Authorization or None, the body's "stream" for a POST)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _record(self, stream=None):
        path = urllib.parse.urlsplit(self.path).path
        with self.server.lock:
            self.server.calls.append((self.command, path, self.headers.get("Authorization"), stream))
        return path

    def _send(self, status, body, ctype="application/json"):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        path = self._record()
        if path not in _GET_ANSWERS:
            self._send(404, {"error": "not found"})
        else:
            self._send(200, b"" if _GET_ANSWERS[path] is None else _GET_ANSWERS[path])

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        stream = bool(body.get("stream"))
        if self._record(stream) != "/v1/chat/completions":
            self._send(404, {"error": "not found"})
        elif stream:
            self._send(200, f"data: {json.dumps(_CHUNK)}\n\ndata: [DONE]\n\n".encode(), "text/event-stream")
        else:
            self._send(200, _COMPLETION)


@contextlib.contextmanager
def _worker():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    server.daemon_threads = True
    server.calls, server.lock = [], threading.Lock()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _calls(worker):
    with worker.lock:
        return list(worker.calls)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _router(worker, log_path, *extra):
    """The real router on loopback (free ports, its Prometheus listener too) with ``worker`` as its one worker;
    yields (Popen, its argv, base URL) and stops it by its handle (its title is sglang::router)."""
    port, metrics = _free_port(), _free_port()
    argv = [str(ROUTER_PY), "-m", "sglang_router.launch_router", "--worker-urls", f"http://127.0.0.1:{worker.server_port}",
            "--host", "127.0.0.1", "--port", str(port), "--prometheus-host", "127.0.0.1", "--prometheus-port", str(metrics),
            "--health-check-interval-secs", "1", "--log-level", "warn", *extra]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield proc, argv, f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def _get_json(url, key=None):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=5) as resp:
        return json.loads(resp.read())


def _wait_registered(worker, proc, log_path, base, key=None, timeout=30.0):
    """Until the router asked the worker for /model_info and lists it healthy on /workers."""
    url = f"http://127.0.0.1:{worker.server_port}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"router exited {proc.returncode}: {log_path.read_text()[-3000:]}"
        if any(call[1] == "/model_info" for call in _calls(worker)):
            try:
                if any(w["url"] == url and w["is_healthy"] for w in _get_json(base + "/workers", key)["workers"]):
                    return
            except (OSError, ValueError, KeyError):
                pass
        time.sleep(0.05)
    raise AssertionError(f"router did not register {url} within {timeout} s; worker saw {_calls(worker)}; "
                         f"log: {log_path.read_text()[-3000:]}")


def _chat(base, stream, key=None):
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": stream}
    req = urllib.request.Request(base + "/v1/chat/completions", method="POST", headers=headers, data=json.dumps(body).encode())
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def _health_checks(worker):
    return sum(1 for method, path, auth, _ in _calls(worker) if (method, path, auth) == ("GET", "/health", None))


@pytest.fixture(scope="module")
def keyless_router(tmp_path_factory):
    """The real router without --api-key before a recording worker: registered, one plain and one streamed chat with
    the client's key, then three more health-check intervals (1 s each) of its own calls."""
    key = "contract-client-" + secrets.token_hex(6)
    log = tmp_path_factory.mktemp("router") / "router.log"
    with _worker() as worker, _router(worker, log) as (proc, _argv, base):
        _wait_registered(worker, proc, log, base)
        answers = {stream: _chat(base, stream, key) for stream in (False, True)}
        wanted, deadline = _health_checks(worker) + 3, time.monotonic() + 20
        while _health_checks(worker) < wanted and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _health_checks(worker) >= wanted, f"fewer than 3 health checks in 20 s: {_calls(worker)}"
        yield {"key": key, "answers": answers, "calls": _calls(worker)}


@needs_router
def test_router_passes_the_client_key_to_the_worker(keyless_router):
    """sglang-router 0.3.2 (sglang_router/launch_router.py, sglang_router/sglang_router_rs.abi3.so) without --api-key:
    a client's ``Authorization: Bearer <k>`` reaches the worker unchanged, for a plain and a streamed chat; the
    gateway before the worker checks that header."""
    answers, key = keyless_router["answers"], keyless_router["key"]
    assert answers[False][0] == 200 and json.loads(answers[False][1])["choices"][0]["message"]["content"] == "hi"
    assert answers[True][0] == 200 and "data: [DONE]" in answers[True][1], answers[True]
    chats = [call for call in keyless_router["calls"] if call[0] == "POST"]
    assert sorted(chats, key=lambda c: c[3]) == [
        ("POST", "/v1/chat/completions", f"Bearer {key}", False), ("POST", "/v1/chat/completions", f"Bearer {key}", True)]


@needs_router
def test_router_own_calls_are_keyless_probe_gets(keyless_router):
    """sglang-router 0.3.2 (sglang_router/sglang_router_rs.abi3.so): everything the router sends a worker on its own,
    while it registers the worker, routes chats and runs its health checks, carries no Authorization and is a GET on a
    path in sglang_gateway_probe_paths (roles/sglang_gateway/defaults/main.yml): the gateway lets exactly these
    through without a key, from the router's address."""
    assert GATEWAY_DEFAULTS.exists(), f"{GATEWAY_DEFAULTS.relative_to(ROOT)} is absent: it sets sglang_gateway_probe_paths"
    probe_paths = yaml.safe_load(GATEWAY_DEFAULTS.read_text())["sglang_gateway_probe_paths"]
    calls, key = keyless_router["calls"], keyless_router["key"]
    own = [call for call in calls if call[2] is None]
    assert "/health" in {call[1] for call in own}, calls
    assert [call for call in own if call[0] != "GET" or call[1] not in probe_paths] == [], own
    assert {call[2] for call in calls} == {None, f"Bearer {key}"}, calls


def _argv_at_exec(proc, argv, timeout=20.0):
    """/proc/<pid>/cmdline read from the fork on: ``argv`` once the router is exec'd, or None when the first read after
    exec already shows the title that sglang_router/launch_router.py sets (a loaded machine: start it again)."""
    want = b"\0".join(arg.encode() for arg in argv) + b"\0"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            raw = pathlib.Path(f"/proc/{proc.pid}/cmdline").read_bytes()
        except OSError:
            raw = b""
        if raw == want:
            return [arg.decode() for arg in raw.split(b"\0")[:-1]]
        if raw.startswith(b"sglang::router"):
            return None
        assert proc.poll() is None, f"router exited {proc.returncode}"
        time.sleep(0.001)
    raise AssertionError(f"/proc/{proc.pid}/cmdline showed neither the router's argv nor its title in {timeout} s")


@needs_router
def test_router_api_key_is_on_its_command_line(tmp_path):
    """sglang-router 0.3.2 with --api-key K (sglang_router/launch_router.py, sglang_router/router_args.py,
    sglang_router/sglang_router_rs.abi3.so): a chat without Authorization gets 401 from the router, with K it gets
    200; K is in /proc/<pid>/cmdline from exec until launch_router() calls setproctitle("sglang::router") (after
    Python's start and the router's imports), which is why the product never passes it. The router also sends K to
    the worker on its own calls."""
    key = "contract-router-" + secrets.token_hex(6)
    for _attempt in range(3):
        with _worker() as worker, _router(worker, tmp_path / "router.log", "--api-key", key) as (proc, argv, base):
            at_exec = _argv_at_exec(proc, argv)
            if at_exec is None:
                continue
            assert at_exec[at_exec.index("--api-key") + 1] == key
            _wait_registered(worker, proc, tmp_path / "router.log", base, key)
            assert _chat(base, False)[0] == 401
            assert _chat(base, False, "not-" + key)[0] == 401
            assert _chat(base, False, key)[0] == 200
            titled = pathlib.Path(f"/proc/{proc.pid}/cmdline").read_bytes()
            assert titled.split(b"\0")[0] == b"sglang::router" and key.encode() not in titled, titled
            calls = _calls(worker)
            assert [call for call in calls if call[0] == "POST"] == [
                ("POST", "/v1/chat/completions", f"Bearer {key}", False)], calls
            assert ("GET", "/model_info", f"Bearer {key}", None) in calls, calls
            return
    pytest.fail("in three starts the router's title replaced its argv before /proc/<pid>/cmdline could be read")
