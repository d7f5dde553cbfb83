"""Contract: the uvicorn lines the product reads and the simulator prints are what the real uvicorn prints, configured
as SGLang 0.5.23 configures it.

The real uvicorn (0.55.0, the version the release's closure resolves; installed into .venv-sglang by
tests/contract/install_real_sglang.sh) serves a one-route app on loopback with the wheel's own
``set_uvicorn_logging_configs`` (its source, read from the installed ``sglang/srt/utils/common.py``, run on uvicorn's
``LOGGING_CONFIG`` as ``http_server.py launch_server`` does before ``uvicorn.Server``): start-up, one ``/health``
answered 503, a shutdown, and a second server on the taken port. Every line must be what the contract's judge calls
uvicorn's, what ``sglang_log_text``'s uvicorn patterns read, and, with the numbers masked, a line the simulator's
recordings hold. Skipped, with the reason, when .venv-sglang has no uvicorn.
"""

import pathlib
import re
import subprocess

import pytest

import log_lines
import wheel_templates as wt
from ansible_collections.blackwell.sglang.plugins.module_utils.health import sglang_log
from ansible_collections.blackwell.sglang.plugins.module_utils.health.sglang_log_text import text_re

ROOT = pathlib.Path(__file__).resolve().parents[2]
PY = ROOT / ".venv-sglang" / "bin" / "python"
SGLANG = wt.sglang_root(str(ROOT / ".venv-sglang"))
FIXTURES = ROOT / "tests" / "unit" / "fixtures" / "sglang_logs"


def _has_uvicorn():
    if not PY.exists():
        return False
    return subprocess.run([str(PY), "-c", "import uvicorn"], capture_output=True).returncode == 0


pytestmark = pytest.mark.skipif(SGLANG is None or not _has_uvicorn(),
                                reason=".venv-sglang has no sglang or uvicorn: run tests/contract/install_real_sglang.sh")

DRIVER = r'''
import ast, asyncio, socket, sys, threading, time, urllib.error, urllib.request
import uvicorn
from uvicorn.config import LOGGING_CONFIG

source = open(sys.argv[1]).read()
wanted = {"set_uvicorn_logging_configs", "_configure_uvicorn_access_log_filter"}
module = ast.Module(body=[n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name in wanted],
                    type_ignores=[])
namespace = {}
exec(compile(module, sys.argv[1], "exec"), namespace)
namespace["set_uvicorn_logging_configs"]()


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 503, "headers": []})
    await send({"type": "http.response.body", "body": b""})

with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=LOGGING_CONFIG, log_level="info"))
thread = threading.Thread(target=server.run)
thread.start()
while not server.started:
    time.sleep(0.05)
try:
    urllib.request.urlopen("http://127.0.0.1:%d/health" % port, timeout=5)
except urllib.error.HTTPError:
    pass
second = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=LOGGING_CONFIG, log_level="info"))
try:
    second.run()
except SystemExit:
    pass
server.should_exit = True
thread.join(10)
'''


@pytest.fixture(scope="module")
def real_lines(tmp_path_factory):
    driver = tmp_path_factory.mktemp("uvicorn") / "driver.py"
    driver.write_text(DRIVER)
    out = subprocess.run([str(PY), str(driver), str(pathlib.Path(SGLANG) / "srt" / "utils" / "common.py")],
                         capture_output=True, text=True, timeout=60)
    lines = [line for line in (out.stderr + out.stdout).splitlines() if line.strip()]
    assert lines, out
    return lines


@pytest.fixture(scope="module")
def judge():
    return log_lines.LineJudge(wt.load_templates(SGLANG, str(ROOT / ".cache")))


def _mask(line):
    """The line without its timestamp, numbers masked, and an access line's request and status phrase masked (both
    sides take the phrase from http.HTTPStatus)."""
    masked = re.sub(r"\d+", "N", re.sub(r"^\[[^\]]*\] ", "", line))
    return re.sub(r'"[A-Z]+ \S+ HTTP/N\.N" N [A-Za-z ]*$', '"REQUEST" N PHRASE', masked)


def test_every_real_uvicorn_line_is_judged_uvicorns(real_lines, judge):
    for line in real_lines:
        origin = judge.origin(line)
        assert origin and origin[0] == "foreign", line


def test_the_products_uvicorn_patterns_read_the_real_lines(real_lines):
    text = "\n".join(real_lines)
    for name in ("uvicorn_running", "uvicorn_startup", "uvicorn_health_request"):
        assert text_re(name).search(text), name
    bind = [line for line in real_lines if text_re("bind_failed").search(line)]
    assert len(bind) == 1 and sglang_log.BIND_RE.search(bind[0]), real_lines
    assert sglang_log.parse_log(text)["bind_failed"]["port"] > 0


def test_the_simulator_prints_uvicorns_lines_in_the_real_form(real_lines):
    """Start-up and access lines: as the simulator's recordings hold them (numbers masked). The bind error: as the
    simulator renders it for the same address. Shutdown lines (no recording ends with one): in its source."""
    recorded = set()
    for path in FIXTURES.glob("sim_*.log"):
        recorded |= {_mask(line) for line in path.read_text(errors="replace").splitlines()}
    sim_source = (ROOT / "tests" / "sandbox" / "sglang_sim" / "sglang" / "srt" / "entrypoints" /
                  "http_server.py").read_text()
    for line in real_lines:
        message = re.sub(r"^\[[^\]]*\] \w+: +", "", line)
        bind = sglang_log.BIND_RE.search(line)
        if bind:
            rendered = subprocess.run(
                ["python3", "-c", "import errno, os, sys; from sglang.srt.entrypoints.http_server import "
                 "bind_error_text; print(bind_error_text(sys.argv[1], int(sys.argv[2]), "
                 "OSError(errno.EADDRINUSE, os.strerror(errno.EADDRINUSE))))",
                 bind.group("address").strip("'"), bind.group("port")],
                env={"PYTHONPATH": str(ROOT / "tests" / "sandbox" / "sglang_sim"), "PATH": "/usr/bin:/bin"},
                capture_output=True, text=True, timeout=30)
            assert rendered.stdout.strip() == message, (rendered, line)
        elif re.search(r"Shutting down|[Aa]pplication shutdown|Finished server process", line):
            assert re.sub(r" \[\d+\]$", "", message) in sim_source, line
        else:
            assert _mask(line) in recorded, line
