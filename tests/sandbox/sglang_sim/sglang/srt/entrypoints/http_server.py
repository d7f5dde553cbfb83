"""HTTP surface of SGLang 0.5.23, simulated with the stdlib (ThreadingHTTPServer).

Timeline (``entrypoints/http_server.py`` launch_server, ``_wait_and_warmup``): the port opens only after every
scheduler reported ready and the subprocess watchdog started; ``/health`` and ``/health_generate`` answer 503 until
the warmup request has finished and ``The server is fired up and ready to roll!`` is logged; ``/v1/models`` and
``/model_info`` answer 200 as soon as the port is open. Warmup (``_execute_server_warmup``) polls ``/model_info``
once a second, then sends an image chat request for a model with image understanding (Kimi-K2.5's ``vision_config``;
``Using a 512x512 image for Kimi VLM startup warmup ...``), else ``/generate``; a failed request logs
``Initialization failed. warmup error: <traceback>`` and kills the whole tree (SIGKILL).

uvicorn's own lines use the format SGLang 0.5.23 gives uvicorn's ``LOGGING_CONFIG`` before it starts the server
(``utils/common.py set_uvicorn_logging_configs``, called by ``http_server.py launch_server``): ``[%(asctime)s]
%(levelprefix)s %(message)s`` and, for the access log, ``[%(asctime)s] %(levelprefix)s %(client_addr)s -
"%(request_line)s" %(status_code)s``, both with datefmt ``%Y-%m-%d %H:%M:%S`` (no colour when not a TTY; uvicorn's
``AccessFormatter`` appends the status phrase), at ``--log-level-http`` or ``--log-level``.

``/metrics`` (``--enable-metrics``) has one series per metric, from the stats-logging rank (attn_tp_rank 0), and
counts the scheduler's running batch and waiting queue (``managers/scheduler_components/metrics_reporter.py``), not
HTTP requests: a request being tokenised or streamed back is not in it. The gauge is written when a batch is
logged (each prefill, every decode log interval) and at once when the scheduler goes idle.

The fake model (``fake_generation``) thinks first, as kimi_k2 does by default: ``SGLANG_SIM_THINK_TOKENS`` tokens of
reasoning, ``</think>``, then the answer or Kimi tool-call markup. ``chat_template_kwargs: {"thinking": false}``
switches thinking off (the Kimi-K2.5 chat template's ``thinking`` switch, mirrored by the kimi_k2 reasoning parser's
``reasoning_default="thinking"`` in ``parser/reasoning_parser.py``); ``max_tokens`` cuts the output
(``finish_reason: length``), so an answer cut inside the reasoning has empty ``content``.
"""
import http.server
import json
import logging
import os
import re
import signal
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid

from sglang import __version__
from sglang.srt import distributed, sim_config, sim_perf
from sglang.srt.function_call import kimik2_detector as kimi
from sglang.srt.utils import get_exception_traceback, kill_process_tree

logger = logging.getLogger(__name__)
access_logger = logging.getLogger("uvicorn.access")
uv_logger = logging.getLogger("uvicorn.error")
REASONING_PARSERS = ("kimi_k2", "kimi", "deepseek-r1", "qwen3", "kimi_k3")
# observability/metrics_collector.py TokenizerMetricsCollector: bucket_e2e_request_latency's default
E2E_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400)
FORCE_STREAM_INTERVAL = 50  # environ.py SGLANG_FORCE_STREAM_INTERVAL: a non-streamed request's output, every 50 tokens


class _LevelPrefix(logging.Formatter):
    """uvicorn/logging.py ColourizedFormatter without colours: ``INFO:     message``."""

    def format(self, record):
        record.levelprefix = (record.levelname + ":").ljust(9)
        return super().format(record)


def setup_uvicorn_loggers(level):
    for lg, stream in ((access_logger, sys.stdout), (uv_logger, sys.stderr)):
        h = logging.StreamHandler(stream)
        h.setFormatter(_LevelPrefix("[%(asctime)s] %(levelprefix)s %(message)s", datefmt="%Y-%m-%d %H:%M:%S"))
        lg.handlers[:] = [h]
        lg.propagate = False
        lg.setLevel(getattr(logging, str(level or "info").upper(), logging.INFO))


class State:
    def __init__(self, args, schedulers, detok, cfg, watchdog):
        self.args, self.schedulers, self.detok, self.cfg, self.watchdog = args, schedulers, detok, cfg, watchdog
        self.served_model_name = args.served_model_name or args.model_path
        self.status = "Starting"
        self.gracefully_exit = False
        self.lock = threading.Lock()
        self.rid_to_state = {}  # every request the tokenizer manager holds (tokenising, scheduled, streaming back)
        self.in_scheduler = {}  # requests in the scheduler's running batch or waiting queue
        self.gauge = {"sglang:num_running_reqs": 0, "sglang:num_queue_reqs": 0}
        self.busy = False
        self.last_stats = time.time()
        self.gen_tokens = 0
        # sglang:generation_tokens_total per is_streaming label, as observability/metrics_collector.py's
        # observe_one_finished_request counts it: per finished request, a labelled series appearing with its first
        # finished request (0.5.23 srt/managers/tokenizer_manager.py calls it).
        self.finished_tokens = {}
        self.gen_started = time.time()
        self.startup_time = None
        self.server = None
        # managers/tokenizer_manager.py: when the tokenizer manager last heard from the detokenizer (any output of
        # any request); /health answers 200 only once it moves after the probe began
        self.last_receive_tstamp = time.time()
        # The scheduler's GPU: one forward at a time. A prefill holds it for the whole prompt (get_next_batch_to_run
        # runs a new prefill batch, chunk after chunk, before the running decode batch), so no request produces a
        # token meanwhile; a hung forward holds it for ever.
        self.forward_lock = threading.Lock()
        self.decoded = 0  # tokens decoded since the last Decode batch line
        # The performance model (srt/sim_perf.py): speculation's options, the prefix cache, and the accepted tokens
        # per verify step so far (internal_state.py _add_speculative: avg_spec_accept_length in /server_info).
        self.spec = sim_perf.Speculation(args)
        self.prefix_cache = sim_perf.PrefixCache()
        self.spec_accepted = 0
        self.spec_steps = 0
        self.spec_logged = (0, 0)  # spec_accepted and spec_steps at the last Decode batch line
        self.hang_armed_at = None  # hang_after_ready: from when the next forward never finishes
        self.chats_after_ready = 0  # SGLANG_SIM_ERROR_FRACTION counts them
        self.e2e_latency = {}  # is_streaming -> [cumulative counts per E2E_BUCKETS bound, sum, count]

    def output(self):
        """The detokenizer sent something (a streamed token, every 50th token of a non-streamed request, a finished
        request: managers/scheduler_components/output_streamer.py, SGLANG_FORCE_STREAM_INTERVAL 50)."""
        self.last_receive_tstamp = time.time()

    def forward(self, seconds=0.0, prefill_tokens=0):
        """One forward on the scheduler's GPU, waiting for the one running (a long prefill, a hung forward). A
        prefill runs chunk after chunk (``--chunked-prefill-size``, 8192) with nothing between them, each logged by
        the stats-logging rank when it is scheduled (``metrics_reporter.py report_prefill_stats``: one line per
        prefill batch, so a long prefill's log moves while its tokens and /health's do not)."""
        rate = sim_config.get_float("SGLANG_SIM_PREFILL_TOKENS_PER_S") / sim_config.get_float("SGLANG_SIM_RELEASE_SLOWDOWN")
        chunk = self.cfg.get("chunked_prefill_size") or 8192
        with self.forward_lock:
            left = prefill_tokens
            while True:
                n = min(left, chunk)
                if n > 0:
                    self.report_prefill(n, prefill_tokens - left, rate)
                if self._hangs():
                    for s in self.schedulers:
                        s.tell("hang")
                    threading.Event().wait()  # the lock is never released: nothing runs after it
                if n <= 0:
                    break
                time.sleep(n / rate if rate > 0 else 0.0)
                left -= n
            if seconds > 0:
                time.sleep(seconds)

    def _usage(self, tokens=0):
        total = self.cfg.get("max_total_num_tokens") or 0
        return (tokens / total) if total else 0.0

    def report_prefill(self, new_tokens, done, rate):
        """``Prefill batch, ...`` (metrics_reporter.py report_prefill_stats; a plain MLA pool:
        pool_stats_observer.py get_prefill_usage_msg_parts gives ``token usage``), told to the stats-logging rank."""
        running = max(len(self.in_scheduler) - 1, 0)
        self.schedulers[0].tell(
            f"log Prefill batch, #new-seq: 1, #new-token: {new_tokens}, #cached-token: 0, "
            f"token usage: {self._usage(done):.2f}, #running-req: {running}, #queue-req: 0, #pending-token: 0, "
            f"cuda graph: {not self.cfg.get('disable_prefill_graph')}, input throughput (token/s): {rate:.2f}")

    def report_decode(self, gen_throughput):
        """``Decode batch, ...`` every decode log interval (metrics_reporter.py report_decode_stats; no
        disaggregation part). With speculation, the interval's ``accept len`` (accepted tokens per verify step) and
        ``accept rate`` (correct drafts, the accepted tokens but the verify's own, per draft token: num_draft_tokens - 1
        a step, 0 where that is none), as report_decode_stats adds them after the token usage."""
        running = len(self.in_scheduler)
        spec = ""
        with self.lock:
            accepted, steps = self.spec_accepted - self.spec_logged[0], self.spec_steps - self.spec_logged[1]
            self.spec_logged = (self.spec_accepted, self.spec_steps)
        if self.spec.on and steps:
            drafts = steps * (self.spec.draft_tokens - 1)
            rate = (accepted - steps) / drafts if drafts > 0 else 0
            spec = f"accept len: {accepted / steps:.2f}, accept rate: {rate:.2f}, "
        self.schedulers[0].tell(
            f"log Decode batch, #running-req: {running}, #token: {running * 64}, "
            f"token usage: {self._usage(running * 64):.2f}, {spec}cuda graph: True, "
            f"gen throughput (token/s): {gen_throughput:.2f}, #queue-req: 0")

    def _hangs(self):
        if self.cfg.get("nnodes", 1) > 1 and os.path.exists(distributed.lost_flag(self.cfg)):
            return True  # a rank of another node is gone: the next collective waits for it for ever
        kind, arg, _ = sim_config.fault()
        if kind == "hang_in_warmup":
            return self.status == "Starting"
        if kind == "hang_after_ready" and self.hang_armed_at is not None:
            return time.time() >= self.hang_armed_at
        return False

    def finished(self, tokens, streaming, rid=None):
        """A request finished with ``tokens`` generated (observability/metrics_collector.py
        TokenizerMetricsCollector.observe_one_finished_request): its generation tokens, num_requests_total and its
        end-to-end latency (from when the tokenizer manager took it, rid_to_state) in sglang:e2e_request_latency_seconds
        with the collector's default buckets (bucket_e2e_request_latency)."""
        with self.lock:
            self.gen_tokens += tokens
            key = "true" if streaming else "false"
            self.finished_tokens[key] = self.finished_tokens.get(key, 0) + tokens
            started = self.rid_to_state.get(rid)
            if started is not None:
                latency = time.time() - started
                e2e = self.e2e_latency.setdefault(key, [[0] * len(E2E_BUCKETS), 0.0, 0])
                for i, bound in enumerate(E2E_BUCKETS):
                    if latency <= bound:
                        e2e[0][i] += 1
                e2e[1] += latency
                e2e[2] += 1

    def schedulers_alive(self):
        return all(s.is_alive() for s in self.schedulers)

    def log_stats(self):
        """metrics_reporter log_stats: the gauge takes the scheduler's counts now; the schedulers hear whether they
        have work (their GPUs compute while a batch runs: what utilization.gpu shows)."""
        busy = bool(self.in_scheduler)
        if busy != self.busy:
            self.busy = busy
            for s in self.schedulers:
                s.tell("busy" if busy else "idle")
        running = len(self.in_scheduler)
        limit = self.args.max_running_requests or 2048
        self.gauge["sglang:num_running_reqs"] = min(running, limit)
        self.gauge["sglang:num_queue_reqs"] = max(running - limit, 0)
        self.last_stats = time.time()


STATE = None


# -- the fake model -------------------------------------------------------------------------------

def prompt_tokens(content):
    """The prompt's length in tokens, as the sim counts it (no tokenizer): one per 4 characters of its text."""
    return max(1, len(json.dumps(content or "")) // 4)


# The fake model's thinking: varied sentences, as a model's are (a real model does not repeat one sentence; the
# smoke's degeneracy check must pass on it and fail on the fault below).
_THOUGHT_WORDS = ("first", "the", "question", "asks", "for", "a", "short", "answer", "so", "I", "should", "check",
                  "what", "it", "means", "and", "then", "reply", "clearly", "without", "extra", "detail", "maybe",
                  "consider", "an", "example", "or", "two", "before", "deciding", "which", "form", "fits", "best",
                  "given", "context", "user", "wants", "precise", "result", "now", "compute", "verify", "once",
                  "more", "that", "seems", "right", "good", "let", "me", "write", "final", "response")


def _reasoning_tokens(n, prompt_chars):
    out = ["The", " user", " wrote", " %d" % prompt_chars, " characters", "."]
    state = prompt_chars * 2654435761 % 4294967296 or 1
    length = 0
    while len(out) < n:
        state = (state * 1103515245 + 12345) % 2147483648
        word = _THOUGHT_WORDS[(state >> 8) % len(_THOUGHT_WORDS)]
        length += 1
        if length > 6 + (state >> 20) % 9:
            out.append(".")
            length = 0
        else:
            out.append(" " + word)
    return out[:n]


def answer_text(prompt):
    """What the fake model answers: what a working model cannot miss for the smoke's golden prompts (a sum, a product,
    a capital, a word to repeat, a needle placed in a long context), else a fixed greeting."""
    m = re.search(r"What is (-?\d+) ([+*-]) (-?\d+)\?", prompt)
    if m:
        a, op, b = int(m.group(1)), m.group(2), int(m.group(3))
        return str(a + b if op == "+" else a - b if op == "-" else a * b)
    m = re.search(r"capital of (\w+)", prompt)
    if m:
        return {"France": "Paris", "Japan": "Tokyo", "Italy": "Rome", "Germany": "Berlin"}.get(m.group(1), "I am not sure.")
    m = re.search(r"exactly the word (\w+)", prompt)
    if m:
        return m.group(1)
    m = re.search(r"The secret word is (\w+)\.", prompt)
    if m and "secret word" in prompt[m.end():]:
        return m.group(1)
    return "Hello! This is a simulated SGLang answer."


def fake_generation(messages, tools, tool_choice, thinking, limit=None):
    """Token pieces of the 'model' output: reasoning (when thinking), ``</think>``, then text or tool markup.
    The chat template put ``<think>`` into the prompt, so the output itself never starts with it. The fault
    ``degenerate_after:N`` makes every piece after the N-th `` foss`` (sgl-project/sglang#23264: Kimi-K2.5's INT4
    checkpoint bound to a wrong MoE kernel path on SM12x, /health 200 all the while)."""
    last = ""
    for m in messages or []:
        if m.get("role") == "user":
            c = m.get("content")
            last = c if isinstance(c, str) else " ".join(p.get("text", "") for p in c or [] if isinstance(p, dict))
    pieces = []
    if thinking:
        pieces += _reasoning_tokens(int(sim_config.get_float("SGLANG_SIM_THINK_TOKENS")), len(last))
        pieces.append("</think>")
    if tools and tool_choice != "none":
        pieces += tokenize(kimi.fake_tool_markup(tools))
    else:
        pieces += tokenize(answer_text(last))
    kind, arg, _ = sim_config.fault()
    if kind == "degenerate_after":  # no end-of-sequence ever comes: it runs to max_tokens (``limit``)
        n = int(arg or 0)
        pieces = pieces[:n] + [" foss"] * max(int(limit or 256) + 1 - n, 0)
    return pieces


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


def split_reasoning(text, parser, thinking):
    """kimi_k2 with thinking on: the output starts inside the reasoning (force_reasoning); it ends at ``</think>``
    or, when the model switches straight to tools, at the tool-call section."""
    if parser not in REASONING_PARSERS or not thinking:
        return None, text
    end = text.find("</think>")
    section = text.find(kimi.BOT)
    if end < 0 and section < 0:
        return text, ""
    if end < 0 or (0 <= section < end):
        return text[:section], text[section:]
    return text[:end], text[end + len("</think>"):]


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
        access_logger.info(f'{host}:{port} - "{self.requestline}" {code} {phrase}')

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
        """http_server.py health_generate: 503 while starting or draining; else a one-token generation (its own
        forward, queued behind whatever the scheduler runs) and, once a second, whether the detokenizer sent anything
        since the probe began (its answer or any other request's token); 503 after SGLANG_HEALTH_CHECK_TIMEOUT (20 s)
        without, which also marks the server UnHealthy (``/ready`` 503, and a SIGTERM then exits at once)."""
        if STATE.gracefully_exit:
            logger.info("Health check request received during shutdown. Returning 503.")
            return self._send(503)
        if STATE.status == "Starting":
            return self._send(503)
        step = sim_config.get_float("SGLANG_SIM_HEALTH_LATENCY_S")
        timeout = int(sim_config.get_float("SGLANG_HEALTH_CHECK_TIMEOUT"))
        tic = time.time()
        threading.Thread(target=self._health_generation, daemon=True).start()
        while time.time() < tic + timeout:
            time.sleep(step)
            if STATE.last_receive_tstamp > tic:
                STATE.status = "Up"
                return self._send(200)
        logger.error(f"Health check failed. Server couldn't get a response from detokenizer for last "
                     f"{timeout} seconds. tic start time: {time.strftime('%H:%M:%S', time.localtime(tic))}. "
                     f"last_heartbeat time: {time.strftime('%H:%M:%S', time.localtime(STATE.last_receive_tstamp))}")
        STATE.status = "UnHealthy"
        self._send(503)

    @staticmethod
    def _health_generation():
        """The probe's request: input_ids [0], max_new_tokens 1; no answer while a scheduler is dead."""
        if not STATE.schedulers_alive():
            return
        STATE.forward(prefill_tokens=1)  # one prefill step: its one token comes back with it
        if STATE.schedulers_alive():
            STATE.output()

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
            "has_image_understanding": STATE.cfg.get("has_vision", False), "has_audio_understanding": False,
            "model_type": STATE.cfg.get("model_type"), "architectures": [STATE.cfg["arch"]],
        })

    def get_server_info(self):
        logger.warning("Endpoint '/get_server_info' is deprecated and will be removed in a future version. "
                       "Please use '/server_info' instead.")
        self.server_info()

    def server_info(self):
        info = {k: v for k, v in vars(STATE.args).items()}
        info.update({"served_model_name": STATE.served_model_name, "startup_time": STATE.startup_time,
                     "internal_states": [self._internal_state()],
                     "version": __version__, "frontend": "python",
                     "max_total_num_tokens": STATE.cfg.get("max_total_num_tokens")})
        self._send(200, json.loads(json.dumps(info, default=str)))

    @staticmethod
    def _internal_state():
        """managers/scheduler_components/internal_state.py _add_speculative and _average_accept_length:
        avg_spec_accept_length (the accepted tokens per verify step so far; the benchmark's ``Accept length``) only
        where the server speculates and has run a verify step."""
        state = {"last_gen_throughput": 0.0}
        with STATE.lock:
            steps, accepted = STATE.spec_steps, STATE.spec_accepted
        if STATE.spec.on and steps:
            state["avg_spec_accept_length"] = accepted / steps
        return state

    def models(self):
        self._send(200, {"object": "list", "data": [{
            "id": STATE.served_model_name, "object": "model", "created": int(time.time()),
            "owned_by": "sglang", "root": STATE.served_model_name, "parent": None,
            "max_model_len": STATE.cfg["context_len"]}]})

    def metrics(self):
        if not STATE.args.enable_metrics:
            return self._send(404, {"detail": "Not Found"})
        with STATE.lock:
            if not STATE.in_scheduler and any(STATE.gauge.values()):
                STATE.log_stats()  # _maybe_log_idle_metrics: a stale gauge is refreshed when idle
            values = dict(STATE.gauge)
        elapsed = max(time.time() - STATE.gen_started, 1e-6)
        values["sglang:gen_throughput"] = STATE.gen_tokens / elapsed
        docs = {"sglang:num_running_reqs": "The number of running requests.",
                "sglang:num_queue_reqs": "The number of requests in the waiting queue.",
                "sglang:gen_throughput": "The generation throughput (token/s)."}
        labels = (f'engine_type="unified",model_name="{STATE.served_model_name}",moe_ep_rank="0",pp_rank="0",'
                  f'tp_rank="0"')
        lines = []
        for name, value in values.items():
            lines += [f"# HELP {name} {docs[name]}", f"# TYPE {name} gauge", f"{name}{{{labels}}} {float(value)}"]
        with STATE.lock:
            finished = dict(STATE.finished_tokens)
        if finished:  # the tokenizer manager's collector (tokenizer_metric_labels: model_name, engine_type)
            name = "sglang:generation_tokens_total"
            lines += [f"# HELP {name} Number of generation tokens processed.", f"# TYPE {name} counter"]
            for streaming in sorted(finished):
                lines.append(f'{name}{{engine_type="unified",is_streaming="{streaming}",'
                             f'model_name="{STATE.served_model_name}"}} {float(finished[streaming])}')
        with STATE.lock:
            e2e = {k: (list(v[0]), v[1], v[2]) for k, v in STATE.e2e_latency.items()}
        if e2e:
            name = "sglang:e2e_request_latency_seconds"
            lines += [f"# HELP {name} Histogram of End-to-end request latency in seconds", f"# TYPE {name} histogram"]
            for streaming in sorted(e2e):
                counts, total, count = e2e[streaming]
                labels = f'engine_type="unified",is_streaming="{streaming}",model_name="{STATE.served_model_name}"'
                for bound, n in zip(E2E_BUCKETS, counts):
                    lines.append(f'{name}_bucket{{{labels},le="{float(bound)}"}} {float(n)}')
                lines += [f'{name}_bucket{{{labels},le="+Inf"}} {float(count)}', f"{name}_sum{{{labels}}} {total}",
                          f"{name}_count{{{labels}}} {float(count)}"]
            name = "sglang:num_requests_total"
            lines += [f"# HELP {name} Number of requests processed.", f"# TYPE {name} counter"]
            for streaming in sorted(e2e):
                lines.append(f'{name}{{engine_type="unified",is_streaming="{streaming}",'
                             f'model_name="{STATE.served_model_name}"}} {float(e2e[streaming][2])}')
        self._send(200, "\n".join(lines) + "\n", ctype="text/plain; version=0.0.4; charset=utf-8")

    # -- generation ----------------------------------------------------------------------------
    def _schedule(self, rid, pieces, on_token=None, prompt_tokens=0, cached_tokens=0):
        """Tokenise, then the scheduler's share, then hand the result back: only the middle part counts in /metrics.
        The scheduler's share: the queue, the prefill of the prompt's uncached tokens at
        SGLANG_SIM_PREFILL_TOKENS_PER_S holding the scheduler (its step gives the first token), then one decode step
        of the running batch after another (srt/sim_perf.py: each as long as the batch it runs in makes it, at least
        SGLANG_SIM_TOKEN_S; with speculation each keeps the accept length's tokens, which a stream sends as one
        chunk). ``on_token`` gets each step's pieces. Hangs while a scheduler is dead (as upstream)."""
        with STATE.lock:
            STATE.rid_to_state[rid] = time.time()
        try:
            time.sleep(sim_config.get_float("SGLANG_SIM_TOKENIZE_S"))
            with STATE.lock:
                STATE.in_scheduler[rid] = time.time()
                STATE.log_stats()  # the prefill batch is logged
            STATE.forward(prefill_tokens=max(prompt_tokens - cached_tokens, 1))
            floor = sim_config.get_float("SGLANG_SIM_TOKEN_S")
            deadline = time.time() + sim_config.get_float("SGLANG_SIM_REQUEST_S")
            pacer = sim_perf.Pacer(STATE.spec)
            done = 0
            while done < len(pieces):
                if done:  # the first token came with the prefill
                    time.sleep(sim_perf.step_seconds(len(STATE.in_scheduler), STATE.spec, floor=floor))
                    STATE.forward()  # the decode step waits for a prefill or a hung forward
                n = pacer.next_count(len(pieces) - done) if done else 1
                step = pieces[done:done + n]
                if done and STATE.spec.on:
                    with STATE.lock:
                        STATE.spec_accepted += n
                        STATE.spec_steps += 1
                streamed_before, done = done, done + n
                STATE.decoded += n
                if on_token is not None:
                    on_token(step)
                if on_token is not None or done // FORCE_STREAM_INTERVAL > streamed_before // FORCE_STREAM_INTERVAL:
                    STATE.output()
                self._maybe_log_decode()
            while time.time() < deadline or not STATE.schedulers_alive():
                time.sleep(0.01)
                self._maybe_log_decode()
        finally:
            with STATE.lock:
                STATE.in_scheduler.pop(rid, None)
                if not STATE.in_scheduler:
                    STATE.log_stats()  # idle: the stale gauge is published at once
        STATE.output()  # finished
        time.sleep(sim_config.get_float("SGLANG_SIM_DETOKENIZE_S"))

    @staticmethod
    def _maybe_log_decode():
        if time.time() - STATE.last_stats >= sim_config.get_float("SGLANG_SIM_DECODE_LOG_S"):
            with STATE.lock:
                gap = max(time.time() - STATE.last_stats, 1e-6)
                STATE.log_stats()
                decoded, STATE.decoded = STATE.decoded, 0
            STATE.report_decode(decoded / gap)

    def _done(self, rid):
        with STATE.lock:
            STATE.rid_to_state.pop(rid, None)

    def generate(self):
        body = self._body()
        rid = body.get("rid") or uuid.uuid4().hex
        sp = body.get("sampling_params") or {}
        n = int(sp.get("max_new_tokens", 16) or 16)
        input_tokens = prompt_tokens(body.get("text"))
        error = self._length_error(input_tokens, sp.get("max_new_tokens"))
        if error:  # http_server.py serve_generate_request: logged, then _create_error_response
            logger.error(f"[http_server] Error: {error}")
            return self._send(400, json.dumps({"error": {"message": error}}, separators=(",", ":")))
        try:
            self._schedule(rid, [" x"] * n, prompt_tokens=input_tokens)
            text = " Paris." if "France" in str(body.get("text", "")) else " simulated output"
            STATE.finished(n, False, rid)
            self._send(200, {"text": text, "output_ids": list(range(n)), "meta_info": {
                "id": rid, "finish_reason": {"type": "length", "length": n}, "prompt_tokens": 7,
                "weight_version": "default", "completion_tokens": n, "cached_tokens": 0, "e2e_latency": 0.05}})
        finally:
            self._done(rid)

    @staticmethod
    def _length_error(input_tokens, max_new_tokens):
        """managers/tokenizer_manager.py _validate_one_request: the ValueError for an input at or past the context
        length, or (validate_total_tokens, on) one whose input and max_new_tokens together pass it; else None."""
        context_len = STATE.cfg["context_len"]
        if input_tokens >= context_len:
            return (f"The input ({input_tokens} tokens) is longer than the "
                    f"model's context length ({context_len} tokens).")
        if max_new_tokens is not None and max_new_tokens + input_tokens > context_len:
            return (f"Requested token count exceeds the model's maximum context length "
                    f"of {context_len} tokens. You requested a total of {max_new_tokens + input_tokens} "
                    f"tokens: {input_tokens} tokens from the input messages and "
                    f"{max_new_tokens} tokens for the completion. Please reduce the number "
                    f"of tokens in the input messages or the completion to fit within the limit.")
        return None

    def _openai_error(self, message, err_type):
        """entrypoints/openai/serving_base.py create_error_response: an ErrorResponse, ORJSON (compact), status 400
        (type ``BadRequest`` from handle_request, ``BadRequestError`` from a stream's kick-start)."""
        body = json.dumps({"object": "error", "message": message, "type": err_type, "param": None, "code": 400},
                          separators=(",", ":"))
        self._send(400, body)

    def _internal_error(self):
        """entrypoints/openai/serving_base.py handle_request, its last ``except Exception``: ``logger.exception(f"Error
        in request: {e}")`` (the traceback follows in the journal), then create_error_response with type
        InternalServerError and status 500, streamed or not (the exception comes before any stream starts). Raised
        for every round(1/SGLANG_SIM_ERROR_FRACTION)-th chat request after the ready line."""
        fraction = sim_config.get_float("SGLANG_SIM_ERROR_FRACTION")
        if fraction <= 0 or STATE.status == "Starting":
            return False
        with STATE.lock:
            STATE.chats_after_ready += 1
            n = STATE.chats_after_ready
        if n % max(int(round(1 / fraction)), 1):
            return False
        message = "'NoneType' object is not subscriptable"
        logger.error(f"Error in request: {message}\nTraceback (most recent call last):\n"
                     f'  File "sglang/srt/entrypoints/openai/serving_base.py", line 102, in handle_request\n'
                     f"TypeError: {message}")
        body = json.dumps({"object": "error", "message": f"Internal server error: {message}",
                           "type": "InternalServerError", "param": None, "code": 500}, separators=(",", ":"))
        self._send(500, body)
        return True

    def chat(self):
        body = self._body()
        rid = uuid.uuid4().hex
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        input_tokens = prompt_tokens(body.get("messages"))
        error = self._length_error(input_tokens, int(limit) if limit else None)
        if error:  # raised while the request is converted: the client's error, a 400, nothing scheduled
            return self._openai_error(error, "BadRequestError" if body.get("stream") else "BadRequest")
        if self._internal_error():
            return None
        tools = body.get("tools") or []
        tool_choice = body.get("tool_choice", "auto")
        thinking = (body.get("chat_template_kwargs") or {}).get("thinking") is not False
        pieces = fake_generation(body.get("messages"), tools, tool_choice, thinking, limit)
        if body.get("ignore_eos") and limit and len(pieces) < int(limit):
            # sampling_params ignore_eos: no end of sequence, the output runs to max_tokens (the serving benchmark
            # asks for it, sglang/benchmark/serving.py: ``ignore_eos = not args.disable_ignore_eos``)
            pieces += _reasoning_tokens(int(limit) - len(pieces) + 6, len(pieces))[6:]
        truncated = bool(limit) and (len(pieces) > int(limit) or bool(body.get("ignore_eos")))
        pieces = pieces[:int(limit)] if limit else pieces
        cached = STATE.prefix_cache.match_and_insert(body.get("messages"), prompt_tokens)
        if STATE.spec.on:  # sgl-project/sglang#32459: speculation loses its prefix-cache hits on multi-turn chat
            cached = int(cached * sim_config.get_float("SGLANG_SIM_SPEC_CACHE_HIT_FRACTION"))
        usage = self._usage(pieces, input_tokens)
        try:
            if body.get("stream"):
                return self._chat_stream(body, rid, pieces, tools, thinking, truncated, input_tokens, cached, usage)
            self._schedule(rid, pieces, prompt_tokens=input_tokens, cached_tokens=cached)
            return self._chat_once(rid, pieces, tools, thinking, truncated, usage)
        finally:
            self._done(rid)

    @staticmethod
    def _usage(pieces, prompt):
        return {"prompt_tokens": prompt, "total_tokens": prompt + len(pieces), "completion_tokens": len(pieces),
                "prompt_tokens_details": None, "reasoning_tokens": 0}

    def _chat_once(self, rid, pieces, tools, thinking, truncated, usage):
        STATE.finished(len(pieces), False, rid)
        tparser, rparser = STATE.args.tool_call_parser, STATE.args.reasoning_parser
        reasoning, text = split_reasoning("".join(pieces), rparser, thinking)
        tool_calls = None
        finish = "length" if truncated else "stop"
        if tparser == "kimi_k2" and tools and kimi.BOT in text:
            text, calls = kimi.detect_and_parse(text)
            tool_calls = [{"id": f"functions.{name}:{i}", "index": i, "type": "function",
                           "function": {"name": name, "arguments": args}} for i, (name, args) in enumerate(calls)]
            finish = "tool_calls"
        msg = {"role": "assistant", "content": text if text else None, "reasoning_content": reasoning,
               "tool_calls": tool_calls}
        self._send(200, {"id": rid, "object": "chat.completion", "created": int(time.time()),
                         "model": STATE.served_model_name,
                         "choices": [{"index": 0, "message": msg, "logprobs": None,
                                      "finish_reason": finish, "matched_stop": None}],
                         "usage": usage, "metadata": {"weight_version": "default"}})

    def _chat_stream(self, body, rid, pieces, tools, thinking, truncated, input_tokens, cached, usage):
        created, model = int(time.time()), STATE.served_model_name
        tparser, rparser = STATE.args.tool_call_parser, STATE.args.reasoning_parser
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True

        def chunk(delta, finish=None):
            obj = {"id": rid, "object": "chat.completion.chunk", "created": created, "model": model,
                   "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish,
                                "matched_stop": None}], "usage": None}
            self.wfile.write(b"data: " + json.dumps(obj).encode() + b"\n\n")
            self.wfile.flush()

        chunk({"role": "assistant", "content": ""})
        state = {"reasoning": rparser in REASONING_PARSERS and thinking, "call": False}
        sp = kimi.StreamParser() if (tparser == "kimi_k2" and tools) else None

        def deltas(piece):
            if state["reasoning"]:
                if piece == "</think>":
                    state["reasoning"] = False
                    return []
                if piece != kimi.BOT:
                    return [{"reasoning_content": piece}]
                state["reasoning"] = False
            if sp is None:
                return [{"content": piece}]
            out = []
            for ev in sp.feed(piece):
                if ev[0] == "text":
                    out.append({"content": ev[1]})
                elif ev[0] == "call":
                    state["call"] = True
                    out.append({"tool_calls": [{"index": ev[1], "id": f"functions.{ev[2]}:{ev[1]}", "type": "function",
                                                "function": {"name": ev[2], "arguments": ""}}]})
                else:
                    out.append({"tool_calls": [{"index": ev[1], "function": {"arguments": ev[2]}}]})
            return out

        def on_token(step):
            """One decode step's tokens as one chunk (several with speculation: managers/scheduler_components/
            output_streamer.py accept sends every step at the default stream_interval 1, whatever the step appended),
            split only where the kind of delta changes (reasoning, content, a tool call)."""
            pending = []
            for piece in step:
                for d in deltas(piece):
                    text_key = next((k for k in ("reasoning_content", "content") if k in d), None)
                    if pending and text_key and text_key in pending[-1]:
                        pending[-1][text_key] += d[text_key]
                    else:
                        pending.append(d)
            for d in pending:
                chunk(d)

        self._schedule(rid, pieces, on_token, prompt_tokens=input_tokens, cached_tokens=cached)
        STATE.finished(len(pieces), True, rid)
        chunk({}, finish="tool_calls" if state["call"] else ("length" if truncated else "stop"))
        if (body.get("stream_options") or {}).get("include_usage"):
            obj = {"id": rid, "object": "chat.completion.chunk", "created": created, "model": model,
                   "choices": [], "usage": usage}
            self.wfile.write(b"data: " + json.dumps(obj).encode() + b"\n\n")
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


# ---- lifecycle -------------------------------------------------------------------------------

MINIMUM_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4//8/AAX+Av4N70a4AAAAAElFTkSuQmCC"


def _post(url, body, timeout):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as res:
            return res.status, res.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def _execute_server_warmup(args):
    url = f"http://{'127.0.0.1' if args.host in ('0.0.0.0', '::') else args.host}:{args.port}"
    success, model_info, last_traceback = False, None, ""
    for _ in range(120):
        time.sleep(1)
        try:
            with urllib.request.urlopen(url + "/model_info", timeout=5) as res:
                assert res.status == 200, f"{res=}"
                model_info = json.loads(res.read())
                success = True
                break
        except (AssertionError, OSError):
            last_traceback = get_exception_traceback()
    if not success:
        logger.error(f"Initialization failed. warmup error: {last_traceback}")
        kill_process_tree(os.getpid())
        return False
    time.sleep(max(sim_config.get_float("SGLANG_SIM_WARMUP_S") - 1.0, 0))
    try:
        if model_info.get("has_image_understanding"):
            logger.info("Using a 512x512 image for Kimi VLM startup warmup to compile "
                        "MoonViT position interpolation.")
            body = {"model": STATE.served_model_name, "messages": [{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "data:image/png;base64," + MINIMUM_PNG}},
                {"type": "text", "text": "Describe the image."}]}], "max_tokens": 8, "stream": False,
                "temperature": 0.0}
            status, text = _post(url + "/v1/chat/completions", body, 600)
        else:
            status, text = _post(url + "/generate", {"sampling_params": {"temperature": 0, "max_new_tokens": 8},
                                                     "text": "The capital city of France is"}, 600)
        assert status == 200, f"{text}"
    except Exception:
        last_traceback = get_exception_traceback()
        logger.error(f"Initialization failed. warmup error: {last_traceback}")
        kill_process_tree(os.getpid())
        return False
    return True


def _wait_and_warmup(args):
    if not args.skip_server_warmup:
        if not _execute_server_warmup(args):
            return
    STATE.status = "Up"
    logger.info("The server is fired up and ready to roll!")
    for s in STATE.schedulers:
        s.tell("ready")
    kind, arg, _ = sim_config.fault()
    if kind == "hang_after_ready":
        STATE.hang_armed_at = time.time() + float(arg or 0)


def running_phase_sigquit_handler(signum=None, frame=None):
    logger.error(f"SIGQUIT received. {signum=}, {frame=}. It usually means one child failed.")
    STATE.watchdog.stop()
    kill_process_tree(os.getpid())


def sigterm_handler(signum=None, frame=None):
    logger.warning(f"SIGTERM received. {signum=} {frame=}. Draining requests and shutting down...")
    STATE.gracefully_exit = True


# managers/tokenizer_manager.py: the exit timeout of the schedulers after ShutdownReq
SCHEDULER_EXIT_TIMEOUT_SECS = 15


def sigterm_watchdog():
    """managers/tokenizer_manager.py sigterm_watchdog: a task from start-up that looks every 5 s whether SIGTERM came
    (so the drain's first check comes 0-5 s after it), drains, sends ShutdownReq, waits up to 15 s for the schedulers
    (they unpin the HiCache pool on the way out) and names the ones it must kill. The drain has no deadline: it ends
    at zero requests, at an UnHealthy server or with SGL_FORCE_SHUTDOWN set; and nothing stops new requests meanwhile
    (only /health and /ready turn 503, ``gracefully_exit``): a request that arrives after SIGTERM is admitted, and
    the drain waits for it too."""
    poll = sim_config.get_float("SGLANG_SIM_DRAIN_POLL_S")
    while not STATE.gracefully_exit:
        time.sleep(poll)
    while True:
        with STATE.lock:
            remaining_rids = list(STATE.rid_to_state)
        remain_num_req = len(remaining_rids)
        if STATE.status == "UnHealthy":
            logger.error("Signal SIGTERM received while health check failed. Force exiting.")
            break
        # utils/common.py get_bool_env_var: "true" or "1", read at each check (the server's own environment)
        if os.environ.get("SGL_FORCE_SHUTDOWN", "false").lower() in ("true", "1"):
            logger.error("Signal SIGTERM received while force shutdown flag set. Force exiting.")
            break
        logger.info(f"Gracefully exiting... Remaining number of requests {remain_num_req}. "
                    f"Remaining requests {remaining_rids=}.")
        if remain_num_req > 0:
            time.sleep(poll)
        else:
            break
    STATE.watchdog.stop()
    for s in STATE.schedulers + [STATE.detok]:
        s.shutdown()
    deadline = time.monotonic() + SCHEDULER_EXIT_TIMEOUT_SECS
    while time.monotonic() < deadline and any(s.is_alive() for s in STATE.schedulers):
        time.sleep(0.1)
    stragglers = [s.pid for s in STATE.schedulers if s.is_alive()]
    if stragglers:
        logger.warning(f"Schedulers still alive {SCHEDULER_EXIT_TIMEOUT_SECS}s after "
                       f"ShutdownReq, killing them before they released: {stragglers}")
    kill_process_tree(os.getpid(), include_parent=False)
    if STATE.server is None:  # the port was never bound: nothing serves, nothing to shut down
        os._exit(0)
    threading.Thread(target=STATE.server.shutdown, daemon=True).start()


def launch_server(args, schedulers, detok, cfg, watchdog):
    global STATE
    STATE = State(args, schedulers, detok, cfg, watchdog)
    STATE.startup_time = time.time()
    setup_uvicorn_loggers(args.log_level_http or args.log_level)
    # upstream registers both through loop.add_signal_handler, which calls them without arguments
    signal.signal(signal.SIGQUIT, lambda signum, frame: running_phase_sigquit_handler())
    signal.signal(signal.SIGTERM, lambda signum, frame: sigterm_handler())
    threading.Thread(target=sigterm_watchdog, daemon=True, name="sigterm_watchdog").start()
    http.server.ThreadingHTTPServer.allow_reuse_address = True
    http.server.ThreadingHTTPServer.daemon_threads = True
    # uvicorn's Config(backlog=2048): socketserver's listen backlog of 5 drops connections a benchmark opens at once
    http.server.ThreadingHTTPServer.request_queue_size = 2048
    # http_server.py lifespan: the startup half starts the warmup thread, the shutdown half joins it
    warmup = threading.Thread(target=_wait_and_warmup, args=(args,), daemon=True, name="warmup")
    warmup.start()
    uv_logger.info(f"Started server process [{os.getpid()}]")
    uv_logger.info("Waiting for application startup.")
    uv_logger.info("Application startup complete.")
    try:
        STATE.server = http.server.ThreadingHTTPServer((args.host, args.port), Handler)  # uvicorn binds after startup
    except OSError as exc:
        # uvicorn 0.55 server.py Server.startup: ``logger.error(exc)`` of the OSError CPython 3.11's
        # asyncio/base_events.py create_server raises ("[Errno 98] error while attempting to bind on address
        # ('127.0.0.1', 30000): address already in use"), no traceback; then the lifespan shutdown joins the warmup
        # thread, which polls /model_info 120 times (1 s apart) before "Initialization failed. warmup error" and the
        # tree's SIGKILL; if an old server holds the port and answers, the warmup runs against it and logs the ready
        # line. Then uvicorn's sys.exit(1).
        uv_logger.error(bind_error_text(args.host, args.port, exc))
        uv_logger.info("Waiting for application shutdown.")
        warmup.join()
        uv_logger.info("Application shutdown complete.")
        sys.exit(1)
    uv_logger.info(f"Uvicorn running on http://{args.host}:{args.port} (Press CTRL+C to quit)")
    try:
        STATE.server.serve_forever(poll_interval=0.1)
    finally:
        uv_logger.info("Shutting down")
        STATE.server.server_close()
        uv_logger.info("Waiting for application shutdown.")
        uv_logger.info("Application shutdown complete.")
        uv_logger.info("Finished server process [%d]" % os.getpid())


def bind_error_text(host, port, exc):
    """uvicorn's ``logger.error(exc)`` of the OSError asyncio's create_server raises for a taken port (checked against
    the real uvicorn 0.55.0 by tests/contract/test_uvicorn_lines.py)."""
    return f"[Errno {exc.errno}] error while attempting to bind on address {(host, port)!r}: {exc.strerror.lower()}"

