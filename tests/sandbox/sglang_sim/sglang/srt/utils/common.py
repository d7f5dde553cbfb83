"""Process plumbing shared by the simulator's processes (stdlib only).

Behaviour copied from SGLang 0.5.23 ``sglang/srt/utils/common.py``: ``configure_logger`` (format
``[%(asctime)s{maybe_ms}{prefix}] %(message)s``, level from ``--log-level``), ``kill_process_tree`` (logs
``kill_process_tree called: ...``, SIGKILLs the descendants, and with ``include_parent`` itself: systemd then sees
status=9/KILL), ``kill_itself_when_parent_died`` (prctl PR_SET_PDEATHSIG).
"""
import ctypes
import ctypes.util
import logging
import os
import signal
import sys

from sglang.srt import sim_config

logger = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1
PR_SET_NAME = 15
_libc = None


def _prctl(option, arg):
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    return _libc.prctl(option, arg, 0, 0, 0)


def set_comm(title):
    """prctl(PR_SET_NAME): /proc/PID/comm (15 bytes), as setproctitle also does."""
    try:
        _prctl(PR_SET_NAME, ctypes.c_char_p(title.encode()[:15]))
    except Exception:  # pragma: no cover - non-Linux
        pass


def kill_itself_when_parent_died():
    """prctl(PR_SET_PDEATHSIG, SIGKILL) like upstream: the kernel kills us when the parent dies."""
    try:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except Exception:  # pragma: no cover
        pass


def configure_logger(log_level="info", prefix=""):
    """utils/common.py configure_logger: every process of SGLang logs with this format at --log-level."""
    maybe_ms = ".%(msecs)03d" if sim_config.get("SGLANG_LOG_MS") not in ("", "0", "false", "False") else ""
    logging.basicConfig(level=getattr(logging, str(log_level or "info").upper(), logging.INFO),
                        format=f"[%(asctime)s{maybe_ms}{prefix}] %(message)s",
                        datefmt="%Y-%m-%d %H:%M:%S", stream=sys.stderr, force=True)


def get_exception_traceback():
    import traceback
    return "".join(traceback.format_exception(*sys.exc_info()))


def _children(pid):
    """All descendants of pid, from /proc (psutil is not available on the node)."""
    parents = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read().decode(errors="replace")
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        parents.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for c in parents.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def kill_process_tree(parent_pid, include_parent=True):
    """Upstream semantics: SIGKILL every descendant; with include_parent and parent == self,
    SIGKILL ourselves (so systemd sees status=9/KILL, not an exit code)."""
    logger.info(f"kill_process_tree called: parent_pid={parent_pid}, "
                f"include_parent={include_parent}, pid={os.getpid()}")
    for child in _children(parent_pid):
        try:
            os.kill(child, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if include_parent:
        for h in logging.getLogger().handlers:
            try:
                h.flush()
            except Exception:
                pass
        sys.stderr.flush()
        os.kill(parent_pid, signal.SIGKILL)
        if parent_pid == os.getpid():
            sys.exit(0)  # not reached: SIGKILL is delivered first


def gib(nbytes):
    return nbytes / (1 << 30)


def launch_dummy_health_check_server(host, port, enable_metrics):
    """``utils/common.py launch_dummy_health_check_server``: what a node of rank >= 1 serves on the HTTP port, from a
    daemon thread: ``/ping``, ``/health`` and ``/health_generate`` answer 200 at once with an empty body, ``/metrics``
    exists with ``--enable-metrics``, everything else is FastAPI's 404 (405 for another method on a route). uvicorn
    runs at warning level: no access lines, no start-up lines. A taken port is uvicorn's bind error, then the
    thread's ``Dummy health check server stopped at ...``; the follower goes on without it."""
    import http.server
    import threading

    routes = {"/ping", "/health", "/health_generate"} | ({"/metrics"} if enable_metrics else set())

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "uvicorn"

        def log_message(self, fmt, *args):
            pass

        def _answer(self, code, body=b"", ctype="application/json"):
            self.send_response(code)
            self.send_header("content-length", str(len(body)))
            if body or code == 200 and self.path.split("?")[0] == "/metrics":
                self.send_header("content-type", ctype)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            path = self.path.split("?")[0]
            if path not in routes:
                return self._answer(404, b'{"detail":"Not Found"}')
            if path == "/metrics":  # the multiprocess registry of a node without a tokenizer manager
                return self._answer(200, b"", "text/plain; version=0.0.4; charset=utf-8")
            return self._answer(200)

        def do_POST(self):
            length = int(self.headers.get("content-length") or 0)
            if length:
                self.rfile.read(length)
            path = self.path.split("?")[0]
            if path in routes:
                return self._answer(405, b'{"detail":"Method Not Allowed"}')
            return self._answer(404, b'{"detail":"Not Found"}')

    where = f"{host}:{port}"

    def run_server():
        try:
            http.server.ThreadingHTTPServer.daemon_threads = True
            server = http.server.ThreadingHTTPServer((host, port), Handler)
        except OSError as exc:
            from sglang.srt.entrypoints.http_server import bind_error_text  # the rank-0 server's uvicorn line

            logging.getLogger("uvicorn.error").error(bind_error_text(host, port, exc))
            logger.info(f"Dummy health check server stopped at {where}")
            return
        try:
            server.serve_forever(poll_interval=0.1)
        finally:
            logger.info(f"Dummy health check server stopped at {where}")

    threading.Thread(target=run_server, daemon=True, name="health-check-server").start()
    logger.info(f"Dummy health check server started in background thread at {where}")
