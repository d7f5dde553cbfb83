"""HTTP surface of SGLang 0.5.23, simulated with the stdlib (ThreadingHTTPServer).

Timeline (as upstream): the port opens only after every scheduler reported ready (weights, KV
cache, CUDA graphs); /health and /health_generate answer 503 until the warmup request finished and
"The server is fired up and ready to roll!" is logged; /v1/models, /model_info answer 200 as soon
as the port is open. After ready a subprocess watchdog (1 s) turns a dead scheduler into SIGQUIT ->
kill_process_tree -> SIGKILL of the parent, as 0.5.23 does.
"""
import http.server
import json
import logging
import os
import signal
import sys
import threading
import time
import uuid

from sglang import __version__
from sglang.srt import sim_config
from sglang.srt.function_call import kimik2_detector as kimi
from sglang.srt.utils import kill_process_tree

logger = logging.getLogger(__name__)
access_logger = logging.getLogger("uvicorn.access")
uv_logger = logging.getLogger("uvicorn.error")


def setup_uvicorn_loggers():
    for lg, stream in ((access_logger, sys.stdout), (uv_logger, sys.stderr)):
        h = logging.StreamHandler(stream)
        h.setFormatter(logging.Formatter("[%(asctime)s] %(message)s", "%Y-%m-%d %H:%M:%S"))
        lg.handlers[:] = [h]
        lg.propagate = False
        lg.setLevel(logging.INFO)


class State:
    def __init__(self, args, schedulers, detok, cfg):
        self.args, self.schedulers, self.detok, self.cfg = args, schedulers, detok, cfg
        self.served_model_name = args.served_model_name or args.model_path
        self.status = "Starting"
        self.gracefully_exit = False
        self.lock = threading.Lock()
        self.in_flight = {}
        self.gen_tokens = 0
        self.gen_started = time.time()
        self.startup_time = None
        self.server = None
        self.watchdog_stop = threading.Event()

    def schedulers_alive(self):
        return all(s.is_alive() for s in self.schedulers)


STATE = None


def fake_generation(messages, tools, tool_choice):
    """Deterministic 'model' output: <think>…</think> then text or Kimi tool-call markup."""
    last = ""
    for m in messages or []:
        if m.get("role") == "user":
            c = m.get("content")
            last = c if isinstance(c, str) else " ".join(p.get("text", "") for p in c or [] if isinstance(p, dict))
    reasoning = f"The user wrote {len(last)} characters. I will answer briefly."
    text = "<think>" + reasoning + "</think>"
    if tools and tool_choice != "none":
        text += kimi.fake_tool_markup(tools)
    else:
        text += "Hello! This is a simulated SGLang answer."
    return text


def tokenize(text):
    """Split output into token-like pieces: special tokens whole, other text in 4-char chunks."""
    pieces, i = [], 0
    specials = kimi.SPECIAL + ["<think>", "</think>"]
    while i < len(text):
        for sp in specials:
            if text.startswith(sp, i):
                pieces.append(sp)
                i += len(sp)
                break
        else:
            j = i + 1
            while j < len(text) and j - i < 4 and not any(text.startswith(sp, j) for sp in specials):
                j += 1
            pieces.append(text[i:j])
            i = j
    return pieces


def split_reasoning(text, parser):
    if parser not in ("kimi_k2", "kimi", "deepseek-r1", "qwen3", "kimi_k3") or "</think>" not in text:
        return None, text
    head, _, rest = text.partition("</think>")
    return head.replace("<think>", "", 1), rest


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "uvicorn"
    sys_version = ""

    def log_message(self, fmt, *a):
        pass

    def log_request(self, code="-", size="-"):
        try:
            phrase = http.HTTPStatus(int(code)).phrase
        except ValueError:
            phrase = ""
        host, port = self.client_address[:2]
        access_logger.info(f'INFO:     {host}:{port} - "{self.requestline}" {code} {phrase}')

    # -- helpers -------------------------------------------------------------------------------
    def _send(self, code, body=b"", ctype="application/json", headers=None):
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        elif isinstance(body, str):
            body = body.encode()
        self.send_response(code)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def _body(self):
        n = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(n) if n else b""
        return json.loads(raw or b"{}")

    def _auth_ok(self):
        key = STATE.args.api_key
        if not key:
            return True
        return self.headers.get("Authorization", "") == f"Bearer {key}"

    # -- routing -------------------------------------------------------------------------------
    def do_GET(self):
        path = self.path.split("?", 1)[0]
        routes = {"/health": self.health, "/health_generate": self.health, "/model_info": self.model_info,
                  "/get_model_info": self.get_model_info, "/server_info": self.server_info,
                  "/get_server_info": self.get_server_info, "/v1/models": self.models, "/metrics": self.metrics,
                  "/ready": self.ready}
        if path not in routes:
            return self._send(404, {"detail": "Not Found"})
        if path not in ("/health", "/health_generate", "/metrics") and not self._auth_ok():
            return self._send(401, {"error": "Unauthorized"})
        routes[path]()

    def do_POST(self):
        path = self.path.split("?", 1)[0]
        if not self._auth_ok():
            return self._send(401, {"error": "Unauthorized"})
        if path == "/v1/chat/completions":
            return self.chat()
        if path == "/generate":
            return self.generate()
        self._send(404, {"detail": "Not Found"})

    # -- endpoints -----------------------------------------------------------------------------
    def health(self):
        if STATE.gracefully_exit:
            logger.info("Health check request received during shutdown. Returning 503.")
            return self._send(503)
        if STATE.status == "Starting":
            return self._send(503)
        step = sim_config.get_float("SGLANG_SIM_HEALTH_LATENCY_S")
        timeout = sim_config.get_float("SGLANG_HEALTH_CHECK_TIMEOUT")
        tic = time.time()
        while time.time() < tic + timeout:
            time.sleep(step)
            if STATE.schedulers_alive():  # a live scheduler answers the 1-token generation
                STATE.status = "Up"
                return self._send(200)
        logger.error(f"Health check failed. Server couldn't get a response from detokenizer for last "
                     f"{int(timeout)} seconds. tic start time: {time.strftime('%H:%M:%S', time.localtime(tic))}. "
                     f"last_heartbeat time: {time.strftime('%H:%M:%S', time.localtime(STATE.startup_time or tic))}")
        STATE.status = "UnHealthy"
        self._send(503)

    def ready(self):
        self._send(200 if (STATE.status == "Up" and not STATE.gracefully_exit) else 503)

    def get_model_info(self):
        logger.warning("Endpoint '/get_model_info' is deprecated and will be removed in a future version. "
                       "Please use '/model_info' instead.")
        self.model_info()

    def model_info(self):
        a = STATE.args
        self._send(200, {
            "model_path": a.model_path, "served_model_name": STATE.served_model_name,
            "tokenizer_path": a.tokenizer_path or a.model_path, "is_generation": True,
            "preferred_sampling_params": a.preferred_sampling_params, "weight_version": a.weight_version,
            "load_format": a.load_format, "reasoning_parser": a.reasoning_parser,
            "tool_call_parser": a.tool_call_parser, "disaggregation_mode": a.disaggregation_mode,
            "has_image_understanding": False, "has_audio_understanding": False,
            "model_type": STATE.cfg.get("model_type"), "architectures": [STATE.cfg["arch"]],
        })

    def get_server_info(self):
        logger.warning("Endpoint '/get_server_info' is deprecated and will be removed in a future version. "
                       "Please use '/server_info' instead.")
        self.server_info()

    def server_info(self):
        info = {k: v for k, v in vars(STATE.args).items()}
        info.update({"served_model_name": STATE.served_model_name, "startup_time": STATE.startup_time,
                     "internal_states": [{"last_gen_throughput": 0.0, "avg_spec_accept_length": None}],
                     "version": __version__, "frontend": "python",
                     "max_total_num_tokens": STATE.cfg.get("max_total_num_tokens")})
        self._send(200, json.loads(json.dumps(info, default=str)))

    def models(self):
        self._send(200, {"object": "list", "data": [{
            "id": STATE.served_model_name, "object": "model", "created": int(time.time()),
            "owned_by": "sglang", "root": STATE.served_model_name, "parent": None,
            "max_model_len": STATE.cfg["context_len"]}]})

    def metrics(self):
        if not STATE.args.enable_metrics:
            return self._send(404, {"detail": "Not Found"})
        with STATE.lock:
            running = len(STATE.in_flight)
        elapsed = max(time.time() - STATE.gen_started, 1e-6)
        lines = []
        for name, doc, value in (
                ("sglang:num_running_reqs", "The number of running requests.", running),
                ("sglang:num_queue_reqs", "The number of requests in the waiting queue.", 0),
                ("sglang:gen_throughput", "The generation throughput (token/s).", STATE.gen_tokens / elapsed)):
            lines += [f"# HELP {name} {doc}", f"# TYPE {name} gauge"]
            for s in STATE.schedulers:
                rank = child_rank.get(s.pid, 0)
                lines.append(f'{name}{{engine_type="unified",model_name="{STATE.served_model_name}",'
                             f'moe_ep_rank="0",pp_rank="0",tp_rank="{rank}"}} {float(value if rank == 0 else 0)}')
        self._send(200, "\n".join(lines) + "\n", ctype="text/plain; version=0.0.4; charset=utf-8")

    # -- generation ----------------------------------------------------------------------------
    def _run_request(self, rid):
        """Hold the request for SGLANG_SIM_REQUEST_S; hang while schedulers are dead (as upstream)."""
        with STATE.lock:
            STATE.in_flight[rid] = time.time()
        try:
            deadline = time.time() + sim_config.get_float("SGLANG_SIM_REQUEST_S")
            while time.time() < deadline or not STATE.schedulers_alive():
                time.sleep(0.01)
        finally:
            with STATE.lock:
                STATE.in_flight.pop(rid, None)

    def generate(self):
        body = self._body()
        rid = body.get("rid") or uuid.uuid4().hex
        self._run_request(rid)
        sp = body.get("sampling_params") or {}
        n = int(sp.get("max_new_tokens", 16) or 16)
        text = " Paris." if "France" in str(body.get("text", "")) else " simulated output"
        STATE.gen_tokens += n
        self._send(200, {"text": text, "output_ids": list(range(n)), "meta_info": {
            "id": rid, "finish_reason": {"type": "length", "length": n}, "prompt_tokens": 7,
            "weight_version": "default", "completion_tokens": n, "cached_tokens": 0, "e2e_latency": 0.05}})

    def chat(self):
        body = self._body()
        rid = uuid.uuid4().hex
        tools = body.get("tools") or []
        tool_choice = body.get("tool_choice", "auto")
        raw = fake_generation(body.get("messages"), tools, tool_choice)
        self._run_request(rid)
        pieces = tokenize(raw)
        STATE.gen_tokens += len(pieces)
        usage = {"prompt_tokens": 12, "total_tokens": 12 + len(pieces), "completion_tokens": len(pieces),
                 "prompt_tokens_details": None, "reasoning_tokens": 0}
        created = int(time.time())
        model = STATE.served_model_name
        tparser, rparser = STATE.args.tool_call_parser, STATE.args.reasoning_parser
        if not body.get("stream"):
            reasoning, text = split_reasoning(raw, rparser)
            tool_calls = None
            finish = "stop"
            if tparser == "kimi_k2" and tools and kimi.BOT in text:
                text, calls = kimi.detect_and_parse(text)
                tool_calls = [{"id": f"functions.{name}:{i}", "index": i, "type": "function",
                               "function": {"name": name, "arguments": args}} for i, (name, args) in enumerate(calls)]
                finish = "tool_calls"
            msg = {"role": "assistant", "content": text if text else None, "reasoning_content": reasoning,
                   "tool_calls": tool_calls}
            return self._send(200, {"id": rid, "object": "chat.completion", "created": created, "model": model,
                                    "choices": [{"index": 0, "message": msg, "logprobs": None,
                                                 "finish_reason": finish, "matched_stop": None}],
                                    "usage": usage, "metadata": {"weight_version": "default"}})
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True

        def chunk(delta, finish=None, extra=None):
            obj = {"id": rid, "object": "chat.completion.chunk", "created": created, "model": model,
                   "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish,
                                "matched_stop": None}], "usage": None}
            if extra:
                obj.update(extra)
            self.wfile.write(b"data: " + json.dumps(obj).encode() + b"\n\n")
            self.wfile.flush()

        chunk({"role": "assistant", "content": ""})
        in_reasoning = rparser in ("kimi_k2", "kimi", "deepseek-r1", "qwen3", "kimi_k3")
        parse_tools = tparser == "kimi_k2" and bool(tools)
        sp = kimi.StreamParser() if parse_tools else None
        saw_call = False
        for piece in pieces:
            if in_reasoning:
                if piece == "<think>":
                    continue
                if piece == "</think>":
                    in_reasoning = False
                    continue
                chunk({"reasoning_content": piece})
                continue
            if sp is None:
                chunk({"content": piece})
                continue
            for ev in sp.feed(piece):
                if ev[0] == "text":
                    chunk({"content": ev[1]})
                elif ev[0] == "call":
                    saw_call = True
                    chunk({"tool_calls": [{"index": ev[1], "id": f"functions.{ev[2]}:{ev[1]}", "type": "function",
                                           "function": {"name": ev[2], "arguments": ""}}]})
                else:
                    chunk({"tool_calls": [{"index": ev[1], "function": {"arguments": ev[2]}}]})
        chunk({}, finish="tool_calls" if saw_call else "stop")
        if (body.get("stream_options") or {}).get("include_usage"):
            obj = {"id": rid, "object": "chat.completion.chunk", "created": created, "model": model,
                   "choices": [], "usage": usage}
            self.wfile.write(b"data: " + json.dumps(obj).encode() + b"\n\n")
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


child_rank = {}


# ---- lifecycle -------------------------------------------------------------------------------

def warmup():
    """Upstream: poll /model_info every 1 s, POST /generate ('The capital city of France is'), then ready."""
    a = STATE.args
    time.sleep(min(1.0, sim_config.get_float("SGLANG_SIM_WARMUP_S")))
    access_logger.info(f'INFO:     127.0.0.1:{40000 + os.getpid() % 20000} - "GET /model_info HTTP/1.1" 200 OK')
    if not a.skip_server_warmup:
        time.sleep(max(sim_config.get_float("SGLANG_SIM_WARMUP_S") - 1.0, 0))
        prefix = " TP0" if a.tp_size > 1 else ""
        print(time.strftime(f"[%Y-%m-%d %H:%M:%S{prefix}] ") + "Prefill batch, #new-seq: 1, #new-token: 7, "
              "#cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0, cuda graph: False, input throughput "
              "(token/s): 0.00", file=sys.stderr, flush=True)
        access_logger.info(f'INFO:     127.0.0.1:{40001 + os.getpid() % 20000} - "POST /generate HTTP/1.1" 200 OK')
    STATE.status = "Up"
    logger.info("The server is fired up and ready to roll!")
    fault = sim_config.fault()
    if not (fault[0] == "nccl_abort_after_ready" and "survive" in fault[1:]):
        threading.Thread(target=subprocess_watchdog, daemon=True, name="subprocess-watchdog").start()


def subprocess_watchdog():
    names = [(s, f"scheduler_{i}") for i, s in enumerate(STATE.schedulers)] + [(STATE.detok, "detokenizer")]
    while not STATE.watchdog_stop.wait(1.0):
        for child, name in names:
            code = child.exitcode()
            if code is None or code == 0:
                continue
            logger.error(f"Subprocess {name} (pid={child.pid}) crashed with exit code {code}. "
                         f"Triggering SIGQUIT for cleanup...")
            os.kill(os.getpid(), signal.SIGQUIT)
            return


def running_phase_sigquit_handler(signum=None, frame=None):
    # Upstream registers through loop.add_signal_handler, which calls without arguments.
    logger.error("SIGQUIT received. signum=None, frame=None. It usually means one child failed.")
    STATE.watchdog_stop.set()
    kill_process_tree(os.getpid())


def sigterm_handler(signum=None, frame=None):
    # Upstream registers through loop.add_signal_handler, which calls without arguments.
    logger.warning("SIGTERM received. signum=None frame=None. Draining requests and shutting down...")
    STATE.gracefully_exit = True
    threading.Thread(target=sigterm_watchdog, daemon=True).start()


def sigterm_watchdog():
    poll = sim_config.get_float("SGLANG_SIM_DRAIN_POLL_S")
    time.sleep(poll)
    while True:
        with STATE.lock:
            rids = list(STATE.in_flight)
        if STATE.status == "UnHealthy":
            logger.error("Signal SIGTERM received while health check failed. Force exiting.")
            break
        logger.info(f"Gracefully exiting... Remaining number of requests {len(rids)}. Remaining requests {rids=}.")
        if rids:
            time.sleep(poll)
        else:
            break
    STATE.watchdog_stop.set()
    for s in STATE.schedulers + [STATE.detok]:
        s.shutdown()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(s.is_alive() for s in STATE.schedulers):
        time.sleep(0.1)
    kill_process_tree(os.getpid(), include_parent=False)
    threading.Thread(target=STATE.server.shutdown, daemon=True).start()


def serve(args, schedulers, detok, cfg):
    global STATE
    STATE = State(args, schedulers, detok, cfg)
    for s in schedulers:
        child_rank[s.pid] = s_rank_from_title(s)
    STATE.startup_time = time.time()
    setup_uvicorn_loggers()
    signal.signal(signal.SIGQUIT, running_phase_sigquit_handler)
    signal.signal(signal.SIGTERM, sigterm_handler)
    http.server.ThreadingHTTPServer.allow_reuse_address = True
    http.server.ThreadingHTTPServer.daemon_threads = True
    STATE.server = http.server.ThreadingHTTPServer((args.host, args.port), Handler)
    uv_logger.info(f"INFO:     Started server process [{os.getpid()}]")
    uv_logger.info("INFO:     Waiting for application startup.")
    threading.Thread(target=warmup, daemon=True, name="warmup").start()
    uv_logger.info("INFO:     Application startup complete.")
    uv_logger.info(f"INFO:     Uvicorn running on http://{args.host}:{args.port} (Press CTRL+C to quit)")
    try:
        STATE.server.serve_forever(poll_interval=0.1)
    finally:
        uv_logger.info("INFO:     Shutting down")
        STATE.server.server_close()
        uv_logger.info("INFO:     Finished server process [%d]" % os.getpid())


def s_rank_from_title(child):
    title = child.proc.args[0]
    return int(title.rsplit("TP", 1)[1]) if "TP" in title else 0
