"""The SGLang 0.5.23 simulator (tests/sandbox/sglang_sim) behaves like the real server from outside.

Every server runs on a free 127.0.0.1 port in its own session; every wait is bounded.
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

ROOT = Path(__file__).resolve().parents[2]
SIM = ROOT / "tests" / "sandbox" / "sglang_sim"
SNAPSHOT = ROOT / "plugins" / "data" / "sglang_cli_0.5.23.json"
FAST = {"SGLANG_SIM_SHARD_DELAY_S": "0.02", "SGLANG_SIM_CAPTURE_S": "0.1", "SGLANG_SIM_WARMUP_S": "0.1",
        "SGLANG_SIM_HEALTH_LATENCY_S": "0.05", "SGLANG_SIM_READY_POLL_S": "0.3",
        "SGLANG_SIM_DRAIN_POLL_S": "0.2", "SGLANG_SIM_FAULT_DELAY_S": "0.3"}
TOOLS = [{"type": "function", "function": {"name": "get-weather", "parameters": {
             "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
         {"type": "function", "function": {"name": "search_docs", "parameters": {
             "type": "object", "properties": {"query": {"type": "string"}, "top_k": {"type": "integer"}}}}}]


@pytest.fixture(scope="module")
def pkg(tmp_path_factory):
    """The simulator package with the CLI snapshot inside, as build_repo lays it out."""
    d = tmp_path_factory.mktemp("simpkg")
    shutil.copytree(SIM / "sglang", d / "sglang", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(SNAPSHOT, d / "sglang" / "cli_snapshot.json")
    return d


def make_checkpoint(path, shards=6):
    path.mkdir(parents=True, exist_ok=True)
    weight_map, total = {}, 0
    for i in range(1, shards + 1):
        name = f"model-{i:05d}-of-{64:06d}.safetensors"  # Kimi-K2.5 naming; fewer shards for speed
        tensors = {f"model.layers.{i}.mlp.weight": np.full((16, 16), i, dtype=np.float32),
                   f"model.layers.{i}.attn.weight": np.zeros((4, 8), dtype=np.float32)}
        save_file(tensors, str(path / name))
        for k, v in tensors.items():
            weight_map[k] = name
            total += v.nbytes
    (path / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": total}, "weight_map": weight_map}))
    (path / "config.json").write_text(json.dumps({"architectures": ["KimiK25ForConditionalGeneration"],
                                                  "model_type": "kimi_k25", "max_position_embeddings": 262144}))
    return path


@pytest.fixture
def ckpt(tmp_path):
    return make_checkpoint(tmp_path / "Kimi-K2.5")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Sim:
    def __init__(self, pkg, tmp, args, env=None, port=None):
        self.port = port or free_port()
        self.out_path, self.err_path = tmp / f"sim-{self.port}.out", tmp / f"sim-{self.port}.err"
        full_env = dict(os.environ, PYTHONPATH=str(pkg), SGLANG_SIM_CONFIG="", SGLANG_SIM_STATE_DIR=str(tmp / "state"),
                        **FAST)
        full_env.pop("SGLANG_SIM_FAULT", None)
        full_env.update(env or {})
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "sglang.launch_server", *args, "--host", "127.0.0.1", "--port", str(self.port)],
                stdout=out, stderr=err, env=full_env, start_new_session=True, cwd=str(tmp))
        self.pgid = self.proc.pid

    @property
    def log(self):
        # bytes, not read_text(): universal newlines would turn tqdm's \r into \n
        return (self.err_path.read_bytes() + self.out_path.read_bytes()).decode(errors="replace")

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def get(self, path, timeout=5):
        try:
            with urllib.request.urlopen(self.url(path), timeout=timeout) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()
        except (ConnectionRefusedError, urllib.error.URLError) as e:
            return None, str(e).encode()

    def post(self, path, body, timeout=10):
        req = urllib.request.Request(self.url(path), data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()

    def wait_for(self, pred, timeout, what):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if pred():
                return
            time.sleep(0.05)
        raise AssertionError(f"timed out after {timeout}s waiting for {what}; log tail:\n{self.log[-3000:]}")

    def wait_ready(self, timeout=15):
        self.wait_for(lambda: "The server is fired up and ready to roll!" in self.log, timeout, "ready line")

    def wait_exit(self, timeout=15):
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"simulator still running after {timeout}s; log tail:\n{self.log[-3000:]}")

    def children(self):
        out = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    stat = Path(f"/proc/{entry}/stat").read_text()
                    if int(stat[stat.rindex(")") + 2:].split()[1]) == self.proc.pid:
                        out.append((int(entry), Path(f"/proc/{entry}/cmdline").read_bytes()))
                except (OSError, ValueError):
                    pass
        return out

    def stop(self):
        try:
            os.killpg(self.pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


@pytest.fixture
def start(pkg, tmp_path):
    sims = []

    def _start(args, env=None, port=None):
        sims.append(Sim(pkg, tmp_path, args, env, port))
        return sims[-1]
    yield _start
    for s in sims:
        s.stop()


def run_cli(pkg, args):
    env = dict(os.environ, PYTHONPATH=str(pkg))
    return subprocess.run([sys.executable, "-m", "sglang.launch_server", *args], env=env, capture_output=True,
                          text=True, timeout=30)


def sse_events(raw):
    lines = [l for l in raw.decode().split("\n") if l.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    return [json.loads(l[6:]) for l in lines[:-1]]


# ---- parser --------------------------------------------------------------------------------------

def test_snapshot_is_the_real_0_5_23_parser():
    snap = json.loads(SNAPSHOT.read_text())
    opts = {o: a for a in snap["actions"] for o in a["option_strings"]}
    assert snap["sglang_version"] == "0.5.23" and snap["allow_abbrev"] is True
    assert len(snap["actions"]) > 500
    assert "kimi_k2" in opts["--tool-call-parser"]["choices"] and "kimi" not in opts["--tool-call-parser"]["choices"]
    assert {"kimi", "kimi_k2"} <= set(opts["--reasoning-parser"]["choices"])
    assert "--cuda-graph-max-bs" not in opts and "--cuda-graph-max-bs-decode" in opts


def test_kimi_is_not_a_tool_call_parser_and_kimi_k2_is(pkg, tmp_path):
    bad = run_cli(pkg, ["--model-path", str(tmp_path), "--tool-call-parser", "kimi"])
    assert bad.returncode == 2
    assert "sglang serve: error: argument --tool-call-parser: invalid choice: 'kimi' (choose from" in bad.stderr
    from_parser = subprocess.run(
        [sys.executable, "-c", "import sys; from sglang.srt.server_args import prepare_server_args as p; "
         "a = p(sys.argv[1:]); print(a.tool_call_parser, a.reasoning_parser, a.tp_size)",
         "--model-path", "m", "--tool-call-parser", "kimi_k2", "--reasoning-parser", "kimi", "--tp", "8"],
        env=dict(os.environ, PYTHONPATH=str(pkg)), capture_output=True, text=True, timeout=30)
    assert from_parser.returncode == 0, from_parser.stderr[-2000:]
    assert from_parser.stdout.split() == ["kimi_k2", "kimi", "8"]


def test_removed_and_unknown_options_exit_2(pkg, tmp_path):
    amb = run_cli(pkg, ["--model-path", str(tmp_path), "--cuda-graph-max-bs", "16"])
    assert amb.returncode == 2
    assert ("ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, "
            "--cuda-graph-max-bs-prefill") in amb.stderr
    unk = run_cli(pkg, ["--model-path", str(tmp_path), "--no-such-flag"])
    assert unk.returncode == 2 and "error: unrecognized arguments: --no-such-flag" in unk.stderr
    missing = run_cli(pkg, [])
    assert missing.returncode == 2 and "the following arguments are required: --model-path" in missing.stderr


# ---- the happy path, TP 8 ------------------------------------------------------------------------

def test_tp8_startup_http_surface_tools_and_drain(start, ckpt):
    sim = start(["--model-path", str(ckpt), "--tp", "8", "--trust-remote-code", "--tool-call-parser", "kimi_k2",
                 "--reasoning-parser", "kimi_k2", "--served-model-name", "kimi-k2.5", "--enable-metrics"],
                env={"SGLANG_SIM_SHARD_DELAY_S": "0.3", "SGLANG_SIM_WARMUP_S": "2.0", "SGLANG_SIM_REQUEST_S": "1.5"})
    want = sorted([f"sglang::scheduler_TP{r}\0".encode() for r in range(8)] + [b"sglang::detokenizer\0"])
    # a child sets its title right after it starts: wait for the titles, not only the count
    sim.wait_for(lambda: sorted(c[1] for c in sim.children()) == want, 15, "8 scheduler processes and a detokenizer")
    sim.wait_for(lambda: "Multi-thread loading shards:" in sim.log, 10, "loading progress")
    assert sim.get("/health")[0] is None, "port must not listen while weights load"

    # port open, warmup running: /v1/models says 200 while /health says 503
    sim.wait_for(lambda: sim.get("/v1/models")[0] == 200, 15, "/v1/models 200")
    assert "The server is fired up" not in sim.log
    assert sim.get("/health")[0] == 503 and sim.get("/health_generate")[0] == 503
    models = json.loads(sim.get("/v1/models")[1])
    assert models["data"][0]["id"] == "kimi-k2.5"

    sim.wait_ready()
    assert sim.get("/health")[0] == 200
    log = sim.log
    assert re.search(r"Multi-thread loading shards: 100% Completed \| 6/6 \[\d\d:\d\d<00:00, +\d+\.\d\d(it/s|s/it)\]", log)
    assert "\rMulti-thread loading shards:" in log
    assert re.search(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d TP0\] KV Cache is allocated\.", log)
    assert log.index("Capture target decode CUDA graph begin") < log.index("Capture target decode CUDA graph end") \
        < log.index("Uvicorn running on") < log.index("The server is fired up and ready to roll!")
    info = json.loads(sim.get("/model_info")[1])
    assert info["tool_call_parser"] == "kimi_k2" and info["served_model_name"] == "kimi-k2.5"
    assert json.loads(sim.get("/get_server_info")[1])["tp_size"] == 8

    # tool calls, non-streaming: two parallel calls, hyphenated name, no markup in content
    body = {"model": "kimi-k2.5", "messages": [{"role": "user", "content": "weather?"}], "tools": TOOLS}
    resp = json.loads(sim.post("/v1/chat/completions", body)[1])
    msg = resp["choices"][0]["message"]
    assert resp["model"] == "kimi-k2.5" and resp["choices"][0]["finish_reason"] == "tool_calls"
    assert [c["function"]["name"] for c in msg["tool_calls"]] == ["get-weather", "search_docs"]
    assert [c["id"] for c in msg["tool_calls"]] == ["functions.get-weather:0", "functions.search_docs:1"]
    assert json.loads(msg["tool_calls"][0]["function"]["arguments"]) == {"city": "Paris"}
    assert "<|tool_call" not in (msg["content"] or "") and "<think>" not in (msg["content"] or "")
    assert msg["reasoning_content"]

    # streaming: per-call header delta (index, id, name) then argument fragments
    events = sse_events(sim.post("/v1/chat/completions", dict(body, stream=True))[1])
    calls, content, reasoning = {}, "", ""
    for ev in events:
        delta = ev["choices"][0]["delta"]
        content += delta.get("content") or ""
        reasoning += delta.get("reasoning_content") or ""
        for tc in delta.get("tool_calls") or []:
            if "id" in tc:
                calls[tc["index"]] = {"id": tc["id"], "name": tc["function"]["name"], "args": ""}
            calls[tc["index"]]["args"] += tc["function"].get("arguments", "")
    assert [calls[i]["name"] for i in sorted(calls)] == ["get-weather", "search_docs"]
    assert calls[0]["id"] == "functions.get-weather:0"
    assert json.loads(calls[1]["args"]) == {"query": "sglang", "top_k": 1}
    assert "<|tool_call" not in content and reasoning == msg["reasoning_content"]
    assert events[-1]["choices"][0]["finish_reason"] == "tool_calls"

    metrics = sim.get("/metrics")[1].decode()
    for name in ("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:gen_throughput"):
        assert re.search(name + r'\{engine_type="unified",model_name="kimi-k2.5",moe_ep_rank="0",pp_rank="0",'
                                r'tp_rank="0"\} [0-9.]+', metrics)
    # finished requests' tokens, per is_streaming, as the tokenizer manager's counter has them (labels in its order)
    assert re.search(r'sglang:generation_tokens_total\{engine_type="unified",is_streaming="false",'
                     r'model_name="kimi-k2.5"\} [1-9][0-9]*\.0', metrics)
    assert re.search(r'sglang:generation_tokens_total\{engine_type="unified",is_streaming="true",'
                     r'model_name="kimi-k2.5"\} [1-9][0-9]*\.0', metrics)
    assert "# TYPE sglang:generation_tokens_total counter" in metrics

    # SIGTERM to the main process (what KillMode=mixed does): the in-flight request still completes
    result = {}

    def slow_request():
        result["status"] = sim.post("/v1/chat/completions",
                                    {"messages": [{"role": "user", "content": "hi"}]}, timeout=20)[0]
    t = threading.Thread(target=slow_request)
    t.start()
    sim.wait_for(lambda: 'sglang:num_running_reqs{engine_type="unified",model_name="kimi-k2.5",moe_ep_rank="0",'
                         'pp_rank="0",tp_rank="0"} 1.0' in sim.get("/metrics")[1].decode(), 5, "request in flight")
    os.kill(sim.proc.pid, signal.SIGTERM)
    t.join(timeout=15)
    assert result.get("status") == 200
    assert sim.wait_exit(15) == 0
    assert "SIGTERM received. signum=None frame=None. Draining requests and shutting down..." in sim.log
    assert re.search(r"Gracefully exiting\.\.\. Remaining number of requests 1\.", sim.log)


# ---- without parsers, TP 1 -----------------------------------------------------------------------

def test_without_parsers_markup_leaks_into_content(start, ckpt):
    sim = start(["--model-path", str(ckpt)], env={"SGLANG_SIM_PROGRESS_FORMAT": "legacy"})
    sim.wait_ready()
    assert [c[1] for c in sim.children() if b"scheduler" in c[1]] == [b"sglang::scheduler\0"]  # no _TP0 at tp 1
    assert len(re.findall(r"^Loading safetensors checkpoint shards: +\d+% Completed \| \d/6 ", sim.log, re.M)) == 7
    body = {"messages": [{"role": "user", "content": "weather?"}], "tools": TOOLS}
    msg = json.loads(sim.post("/v1/chat/completions", body)[1])["choices"][0]["message"]
    assert msg["tool_calls"] is None and msg["reasoning_content"] is None
    assert "<|tool_calls_section_begin|><|tool_call_begin|>functions.get-weather:0" in msg["content"]
    # the chat template put <think> into the prompt: the output starts inside the reasoning and closes it
    assert not msg["content"].startswith("<think>") and "</think>" in msg["content"]
    content = "".join(ev["choices"][0]["delta"].get("content") or ""
                      for ev in sse_events(sim.post("/v1/chat/completions", dict(body, stream=True))[1]))
    assert content == msg["content"]
    assert json.loads(sim.get("/v1/models")[1])["data"][0]["id"] == str(ckpt)
    assert sim.get("/metrics")[0] == 404  # only with --enable-metrics


# ---- failures ------------------------------------------------------------------------------------

def test_crash_at_shard_3_of_6_kills_the_tree(start, ckpt):
    sim = start(["--model-path", str(ckpt), "--tp-size", "2"],
                env={"SGLANG_SIM_FAULT": "crash_at_shard:3", "SGLANG_SIM_SHARD_DELAY_S": "0.15"})
    rc = sim.wait_exit()
    assert rc == -signal.SIGKILL  # kill_process_tree SIGKILLs the parent itself: systemd sees status=9/KILL
    log = sim.log
    assert "2/6" in log and "3/6" not in log
    assert re.search(r"\[[\d\- :]+ TP0\] Scheduler hit an exception: Traceback \(most recent call last\):", log)
    assert "OSError: [Errno 5] Input/output error" in log
    assert "Received sigquit from a child process. It usually means the child failed." in log
    assert not sim.children()


def test_truncated_shard_gives_safetensors_error(start, ckpt):
    shard = ckpt / "model-00004-of-000064.safetensors"
    shard.write_bytes(shard.read_bytes()[:-64])
    sim = start(["--model-path", str(ckpt)], env={"SGLANG_SIM_SAFETENSORS_STYLE": "legacy"})
    assert sim.wait_exit() == -signal.SIGKILL
    assert "safetensors_rust.SafetensorError: Error while deserializing header: MetadataIncompleteBuffer" in sim.log
    assert "Received sigquit from a child process" in sim.log


def test_empty_config_json_fails_in_the_parent(start, ckpt):
    (ckpt / "config.json").write_text("")
    sim = start(["--model-path", str(ckpt)])
    assert sim.wait_exit() == 1
    assert "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)" in sim.log
    assert "is not a valid JSON file" in sim.log


def test_oom_at_cuda_graph_capture(start, ckpt):
    sim = start(["--model-path", str(ckpt)], env={"SGLANG_SIM_FAULT": "oom_at_cuda_graph"})
    assert sim.wait_exit() == -signal.SIGKILL
    log = sim.log
    assert "Capture target decode CUDA graph begin" in log and "Capture target decode CUDA graph end" not in log
    assert "torch.OutOfMemoryError: CUDA out of memory." in log
    assert "Exception: Capture cuda graph failed: CUDA out of memory." in log
    assert log.index("Scheduler hit an exception") < log.index("Received sigquit from a child process")


def test_rank_dies_during_init(start, ckpt):
    sim = start(["--model-path", str(ckpt), "--tp", "2"], env={"SGLANG_SIM_FAULT": "rank_dies_at_init:1"})
    assert sim.wait_exit() == 1
    assert "RuntimeError: Rank 1 scheduler died during initialization (exit code: -9)." in sim.log
    assert not sim.children()


def test_hang_at_shard_keeps_port_closed(start, ckpt):
    sim = start(["--model-path", str(ckpt), "--tp", "2"], env={"SGLANG_SIM_FAULT": "hang_at_shard:2"})
    sim.wait_for(lambda: "Load weight begin" in sim.log, 10, "loading")
    time.sleep(1.0)
    assert sim.proc.poll() is None and len(sim.children()) == 3
    assert sim.get("/health")[0] is None
    assert "TP0] Load weight end" not in sim.log and "TP1] Load weight end" in sim.log
    assert not re.search(r"[2-6]/6 ", sim.log)


def test_nccl_abort_after_ready(start, ckpt):
    # 0.5.23: the subprocess watchdog sees the dead scheduler within ~1 s and the tree is killed
    sim = start(["--model-path", str(ckpt), "--tp", "2"], env={"SGLANG_SIM_FAULT": "nccl_abort_after_ready"})
    sim.wait_ready()
    assert sim.wait_exit(10) == -signal.SIGKILL
    assert re.search(r"Subprocess scheduler_\d \(pid=\d+\) crashed with exit code -6\. Triggering SIGQUIT", sim.log)
    # an NCCL abort (the parent keeps answering with its schedulers gone), e.g. releases without the watchdog
    r1 = start(["--model-path", str(ckpt), "--tp", "2"], env={"SGLANG_SIM_FAULT": "nccl_abort_after_ready:survive"})
    r1.wait_ready()
    r1.wait_for(lambda: not [c for c in r1.children() if b"scheduler" in c[1]], 5, "schedulers gone")
    time.sleep(1.2)
    assert r1.proc.poll() is None and r1.get("/v1/models")[0] == 200


def test_build_repo_is_idempotent(tmp_path):
    sys.path.insert(0, str(SIM))
    try:
        from build_repo import build_sglang_repo
    finally:
        sys.path.remove(str(SIM))
    a = build_sglang_repo(tmp_path / "sglang.git")
    b = build_sglang_repo(tmp_path / "sglang.git")
    c = build_sglang_repo(tmp_path / "other.git")
    assert a == b == c
    files = subprocess.run(["git", "--git-dir", str(tmp_path / "sglang.git"), "ls-tree", "-r", "--name-only",
                            "v0.5.23"], capture_output=True, text=True, check=True).stdout.split()
    assert {"README.md", "python/pyproject.toml", "python/sglang/__init__.py", "python/sglang/launch_server.py",
            "python/sglang/cli_snapshot.json"} <= set(files)


# ---- 0.5.23's start-up sequence, step by step ---------------------------------------------------------------

def sandbox_checkpoint_module():
    """tests/sandbox/checkpoint.py, which makes the sandbox's checkpoints."""
    sys.path.insert(0, str(ROOT / "tests" / "sandbox"))
    try:
        import checkpoint
    finally:
        sys.path.pop(0)
    return checkpoint


def kimi_checkpoint(path):
    """The sandbox's Kimi-K2.5 stand-in checkpoint (remote code, tiktoken.model, vision_config) with 4 small shards."""
    sandbox_checkpoint_module().make_checkpoint(str(path), num_shards=4, shard_bytes=64 * 1024)
    return path


def state_files(tmp_path):
    d = tmp_path / "state"
    return {int(p.stem): json.loads(p.read_text()) for p in d.glob("*.json")} if d.is_dir() else {}


def test_the_eager_warmup_before_capture_is_silent_with_the_gpu_busy(start, ckpt, tmp_path):
    """0.5.23 builds the EagerRunner before any graph and runs its kernels once: no line after ``Memory pool end``,
    the GPU busy, its memory flat after the static buffer."""
    sim = start(["--model-path", str(ckpt), "--tp", "2"], env={"SGLANG_SIM_EAGER_WARMUP_S": "2"})
    sim.wait_for(lambda: "TP1] Memory pool end" in sim.log and "TP0] Memory pool end" in sim.log, 15, "the KV pool")
    sim.wait_for(lambda: all(s.get("gpu_busy") for s in state_files(tmp_path).values()), 2, "busy GPUs")
    time.sleep(0.5)
    assert "Capture target prefill CUDA graph begin" not in sim.log
    assert sim.log.rstrip().splitlines()[-1].split("] ", 1)[1].startswith("Memory pool end. avail mem=")
    sim.wait_ready(20)


def test_startup_follows_0_5_23_prefill_first_hicache_after_capture(start, tmp_path):
    """Init parallel -> memory baseline -> weights -> KV pool -> prefill graphs -> decode graphs -> HiCache host pool
    (port still closed) -> watchdog + uvicorn -> image warmup (vision_config) -> ready; each scheduler publishes its
    phase and GPU memory for the GPU stand-in."""
    ckpt = kimi_checkpoint(tmp_path / "Kimi-K2.5")
    sim = start(["--model-path", str(ckpt), "--tp", "2", "--trust-remote-code", "--enable-hierarchical-cache",
                 "--hicache-size", "1"],
                env={"SGLANG_SIM_HICACHE_PIN_GBPS": "0.2", "SGLANG_SIM_FAULT": "hicache_alloc_failure:64"})
    sim.wait_for(lambda: "Allocating MLA hierarchical KV host pool" in sim.log, 15, "host pool allocation")
    # each rank pins its own 1 GB pool for 5 s after its own capture: both are at it together
    sim.wait_for(lambda: {s["phase"] for s in state_files(tmp_path).values()} == {"hicache_alloc"}, 5,
                 "both ranks pinning their host pools")
    assert sim.get("/health")[0] is None, "the port stays closed while the HiCache pool is pinned"
    sim.wait_ready(30)
    log = sim.log
    order = ["server_args={'", "TP0] Init parallel begin.", "TP0] Init parallel ends. elapsed=",
             "TP0] Memory baseline taken. mem usage=", "TP0] Load weight begin. avail mem=",
             "TP0] Load weight end. elapsed=", "TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: ",
             "TP0] Memory pool end. avail mem=", "TP0] Capture target prefill CUDA graph begin. backend=breakable",
             "Capturing prefill shape (num_tokens=", "TP0] Capture target prefill CUDA graph end. elapsed=",
             "TP0] Capture target decode CUDA graph begin. backend=full", "Capturing batches (bs=",
             "TP0] Capture target decode CUDA graph end. bs=", "TP0] Allocating MLA hierarchical KV host pool: ",
             "INFO:     Uvicorn running on http://127.0.0.1:", "Using a 512x512 image for Kimi VLM startup warmup",
             "The server is fired up and ready to roll!"]
    positions = [log.index(text) for text in order]
    assert positions == sorted(positions), [t for t, p in zip(order, positions)]
    assert "quant=compressed-tensors" in log  # the checkpoint's quantization_config, as model_config.py logs it
    assert re.search(r'INFO:     127\.0\.0\.1:\d+ - "POST /v1/chat/completions HTTP/1\.1" 200', log)
    states = state_files(tmp_path)
    assert sorted(s["rank"] for s in states.values()) == ["TP0", "TP1"]
    assert all(s["phase"] == "serving" and s["gpu_memory_used_mib"] > 70000 for s in states.values())
    assert sorted(s["gpu_id"] for s in states.values()) == [0, 1]


def test_quiet_log_level_keeps_failures_and_bars_only(start, ckpt):
    sim = start(["--model-path", str(ckpt), "--tp", "2", "--log-level", "warning"],
                env={"SGLANG_SIM_FAULT": "crash_at_shard:3"})
    assert sim.wait_exit() == -signal.SIGKILL
    log = sim.log
    for text in ("server_args=", "Init parallel begin", "Load weight begin", "Uvicorn running"):
        assert text not in log
    assert "Multi-thread loading shards:" in log  # tqdm writes regardless of the log level
    assert "Scheduler hit an exception: Traceback" in log and "Received sigquit from a child process" in log


def test_expert_parallel_adds_its_prefix_token_and_title(start, ckpt):
    sim = start(["--model-path", str(ckpt), "--tp", "2", "--moe-a2a-backend", "deepep"])
    sim.wait_ready()
    # not anchored at a line start: the ranks share one stderr, and rank 0's tqdm bar ends in \r, not a newline, so
    # under load rank 1's line can land on the bar's line (as on a real host)
    assert re.search(r"\[[\d\- :]+ TP1 EP1\] Load weight begin", sim.log), sim.log[-3000:]
    assert sorted(c[1] for c in sim.children() if b"scheduler" in c[1]) == [b"sglang::scheduler_TP0_EP0\0",
                                                                            b"sglang::scheduler_TP1_EP1\0"]


def test_warmup_failure_is_every_ranks_exception_in_the_forward_and_the_request_never_answers(start, tmp_path):
    """0.5.23 with a build lacking this GPU's kernels: the warmup request's forward raises on every rank, each rank
    logs ``Scheduler hit an exception`` and SIGQUITs the parent (running-phase handler), which kills the tree; the
    HTTP warmup gets no answer, so no ``Initialization failed. warmup error`` is ever logged."""
    ckpt = kimi_checkpoint(tmp_path / "Kimi-K2.5")
    sim = start(["--model-path", str(ckpt), "--tp", "2", "--trust-remote-code"],
                env={"SGLANG_SIM_FAULT": "warmup_failure"})
    assert sim.wait_exit(20) == -signal.SIGKILL
    log = sim.log
    assert len(re.findall(r"\[[\d\- :]+ TP[01]\] Scheduler hit an exception: Traceback", log)) >= 1
    assert "torch.AcceleratorError: CUDA error: no kernel image is available for execution on the device" in log
    assert "in forward_batch_generation" in log and "SIGQUIT received." in log
    assert "Initialization failed" not in log and "The server is fired up" not in log and not sim.children()


def test_hang_in_warmup_is_the_scheduler_watchdogs_sigquit(start, tmp_path):
    """0.5.23, a warmup forward that never finishes: no ready line, ``/health`` 503 (still starting), the GPU busy;
    every rank's scheduler watchdog (``--watchdog-timeout``, checked every half of it) logs its debug info, the py-spy
    attempts and ``Scheduler watchdog timeout``, then SIGQUITs the parent, which kills the tree."""
    ckpt = kimi_checkpoint(tmp_path / "Kimi-K2.5")
    sim = start(["--model-path", str(ckpt), "--tp", "2", "--trust-remote-code", "--watchdog-timeout", "2"],
                env={"SGLANG_SIM_FAULT": "hang_in_warmup"})
    sim.wait_for(lambda: "Uvicorn running on" in sim.log, 20, "the port")
    assert sim.get("/health")[0] == 503
    tic = time.time()
    assert sim.wait_exit(30) == -signal.SIGKILL
    log = sim.log
    assert re.search(r"TP[01]\] Scheduler watchdog timeout \(self\.watchdog_timeout=2\.0, self\.soft=False\)", log)
    assert re.search(r"TP[01]\] Scheduler debug info:\n", log) and "Pyspy" in log
    assert "SIGQUIT received." in log and "The server is fired up" not in log and not sim.children()
    assert time.time() - tic < 20


def test_health_follows_the_detokenizer_and_busy_is_not_dead(start, ckpt):
    """``/health`` is 200 once anything came back after the probe began; a prefill longer than
    SGLANG_HEALTH_CHECK_TIMEOUT holds every token, so a busy server answers 503, logs ``Health check failed``, and
    ``/ready`` says 503 until a later probe succeeds (the server is not dead: the long request then finishes)."""
    sim = start(["--model-path", str(ckpt), "--tp", "2"],
                env={"SGLANG_HEALTH_CHECK_TIMEOUT": "2", "SGLANG_SIM_PREFILL_TOKENS_PER_S": "1000"})
    sim.wait_ready()
    assert sim.get("/health")[0] == 200 and sim.get("/ready")[0] == 200
    long_prompt = "x" * 4 * 4000  # 4000 tokens at 1000/s: the scheduler is held 4 s
    done = {}
    worker = threading.Thread(target=lambda: done.update(r=sim.post(
        "/generate", {"text": long_prompt, "sampling_params": {"max_new_tokens": 4}}, timeout=30)))
    worker.start()
    time.sleep(0.3)
    tic = time.time()
    assert sim.get("/health", timeout=10)[0] == 503
    assert 2 <= time.time() - tic < 4
    assert "Health check failed. Server couldn't get a response from detokenizer for last 2 seconds." in sim.log
    assert sim.get("/ready")[0] == 503
    worker.join(30)
    assert done["r"][0] == 200
    assert sim.get("/health")[0] == 200 and sim.get("/ready")[0] == 200


def test_hang_after_ready_fails_health_then_the_watchdog_kills(start, ckpt):
    sim = start(["--model-path", str(ckpt), "--tp", "2", "--watchdog-timeout", "3"],
                env={"SGLANG_HEALTH_CHECK_TIMEOUT": "1", "SGLANG_SIM_FAULT": "hang_after_ready:0.5"})
    sim.wait_ready()
    time.sleep(0.6)
    assert sim.get("/health", timeout=10)[0] == 503
    assert sim.wait_exit(30) == -signal.SIGKILL
    assert "Scheduler watchdog timeout" in sim.log and not sim.children()


def test_tokenizer_files_are_checked_before_any_weight_is_read(start, tmp_path):
    """A Kimi checkpoint without the file its tokenizer imports relatively fails in the parent (exit 1) with
    transformers' message, before "Load weight begin"; --trust-remote-code is required for its remote code."""
    ckpt = kimi_checkpoint(tmp_path / "Kimi-K2.5")
    sim = start(["--model-path", str(ckpt), "--tp", "2"])
    assert sim.wait_exit() == 1
    assert "contains custom code which must be executed" in sim.log
    (ckpt / "tool_declaration_ts.py").unlink()
    sim = start(["--model-path", str(ckpt), "--tp", "2", "--trust-remote-code"])
    assert sim.wait_exit() == 1
    assert "does not appear to have a file named tool_declaration_ts.py" in sim.log
    assert "in get_processor" in sim.log and "Load weight begin" not in sim.log


def test_hicache_refuses_a_pool_larger_than_its_budget(start, ckpt):
    sim = start(["--model-path", str(ckpt), "--tp", "2", "--enable-hierarchical-cache", "--hicache-size", "4"],
                env={"SGLANG_SIM_FAULT": "hicache_alloc_failure:16"})
    assert sim.wait_exit() == -signal.SIGKILL
    # (16 GB - 10 GiB reserve) / 2 ranks = 2.63 GB per rank < 4 GB
    assert "ValueError: Not enough host memory available. Requesting 4.00 GB but only have 2.63 GB free. Please " \
           "reduce the size of the hierarchical cache." in sim.log
    assert "Allocating MLA hierarchical KV host pool" not in sim.log


def test_an_unmounted_memory_cgroup_stops_auto_sizing_but_not_an_explicit_size(start, ckpt):
    """0.5.23 mem_cache/host_memory.py: auto-sizing needs the cgroup's headroom and raises without it; an explicit
    --hicache-size logs the warning and checks against MemAvailable (allow_cgroup_fallback)."""
    sim = start(["--model-path", str(ckpt), "--tp", "2", "--enable-hierarchical-cache"],
                env={"SGLANG_SIM_FAULT": "hicache_cgroup_unmounted"})
    assert sim.wait_exit() == -signal.SIGKILL
    assert "RuntimeError: Cannot automatically size HiCache host memory; set --hicache-size explicitly" in sim.log
    sim = start(["--model-path", str(ckpt), "--tp", "2", "--enable-hierarchical-cache", "--hicache-size", "1"],
                env={"SGLANG_SIM_FAULT": "hicache_cgroup_unmounted"})
    sim.wait_ready()
    assert "Cannot determine cgroup memory headroom: Cannot locate the process memory cgroup in mounted cgroup " \
           "filesystems. Checking explicitly sized HiCache pools against host available memory" in sim.log


def test_metrics_count_the_scheduler_not_requests_streaming_back(start, ckpt):
    """sglang:num_running_reqs comes from the scheduler: it is 0 while a finished request is still on its way back
    to the client; SIGTERM's drain (rid_to_state) still waits for that request."""
    sim = start(["--model-path", str(ckpt), "--enable-metrics"],
                env={"SGLANG_SIM_REQUEST_S": "0.5", "SGLANG_SIM_DETOKENIZE_S": "2.5"})
    sim.wait_ready()
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("status", sim.post(
        "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}],
                                 "chat_template_kwargs": {"thinking": False}}, timeout=20)[0]))
    t.start()
    series = 'sglang:num_running_reqs{engine_type="unified",model_name="%s",moe_ep_rank="0",pp_rank="0",tp_rank="0"}' \
             % ckpt
    sim.wait_for(lambda: series + " 1.0" in sim.get("/metrics")[1].decode(), 5, "the request in the scheduler")
    sim.wait_for(lambda: series + " 0.0" in sim.get("/metrics")[1].decode(), 5, "the scheduler idle")
    assert t.is_alive(), "the response is still being handed back"
    assert sim.get("/metrics")[1].decode().count("sglang:num_running_reqs{") == 1  # one series: the stats rank
    os.kill(sim.proc.pid, signal.SIGTERM)
    t.join(timeout=15)
    assert result.get("status") == 200 and sim.wait_exit(15) == 0


def test_a_release_that_fails_after_ready_answers_every_nth_chat_with_500_and_metrics_count_what_finished(start, ckpt):
    """SGLANG_SIM_ERROR_FRACTION (the canary soak's bad release): the warmup and the first 19 chats after ready are
    served; the 20th fails as serving_base.py handle_request's ``except Exception`` does (500, InternalServerError,
    "Error in request" in the log); sglang:e2e_request_latency_seconds and sglang:num_requests_total count only
    the requests that finished (metrics_collector.py observe_one_finished_request), cumulative buckets."""
    sim = start(["--model-path", str(ckpt), "--enable-metrics"], env={"SGLANG_SIM_ERROR_FRACTION": "0.05"})
    sim.wait_ready()
    ask = {"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": {"thinking": False}}

    def chat(stream=False):
        try:
            return sim.post("/v1/chat/completions", dict(ask, stream=stream))
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    codes = [chat(n % 2 == 1)[0] for n in range(40)]
    assert [n for n, code in enumerate(codes) if code != 200] == [19, 39]
    for n in range(19):
        assert chat()[0] == 200
    status, body = chat()
    error = json.loads(body)
    assert status == 500 and error["type"] == "InternalServerError" and error["code"] == 500
    assert error["message"].startswith("Internal server error: ") and "Error in request: " in sim.log
    text = sim.get("/metrics")[1].decode()
    labels = 'engine_type="unified",is_streaming="%s",model_name="%s"'
    served = {"false": 1 + 20 + 19, "true": 18}  # the warmup's /generate counts, as it does upstream
    for streaming, count in served.items():
        assert 'sglang:num_requests_total{%s} %.1f' % (labels % (streaming, ckpt), count) in text
        assert 'sglang:e2e_request_latency_seconds_count{%s} %.1f' % (labels % (streaming, ckpt), count) in text
        buckets = [float(v) for v in re.findall(r'sglang:e2e_request_latency_seconds_bucket\{%s,le="[^"]+"\} (\S+)'
                                                 % re.escape(labels % (streaming, ckpt)), text)]
        assert len(buckets) == 23 and buckets == sorted(buckets) and buckets[-1] == count


def test_the_fake_model_thinks_first_and_honours_max_tokens(start, ckpt):
    sim = start(["--model-path", str(ckpt), "--reasoning-parser", "kimi_k2"])
    sim.wait_ready()
    ask = {"messages": [{"role": "user", "content": "hi"}]}
    cut = json.loads(sim.post("/v1/chat/completions", dict(ask, max_tokens=256))[1])["choices"][0]
    assert cut["finish_reason"] == "length" and cut["message"]["content"] is None
    assert len(cut["message"]["reasoning_content"]) > 500
    full = json.loads(sim.post("/v1/chat/completions", dict(ask, max_tokens=2048))[1])["choices"][0]
    assert full["finish_reason"] == "stop" and full["message"]["content"].startswith("Hello!")
    off = json.loads(sim.post("/v1/chat/completions", dict(ask, max_tokens=64, chat_template_kwargs={
        "thinking": False}))[1])["choices"][0]
    assert off["message"]["reasoning_content"] is None and off["message"]["content"].startswith("Hello!")


BIND_LINE = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] ERROR:    \[Errno 98\] error while attempting to bind on "
                       r"address \('127\.0\.0\.1', (\d+)\): address already in use$", re.M)


def test_a_taken_port_is_one_uvicorn_error_line_and_the_process_lives_on_for_the_warmup(start, ckpt):
    """0.5.23: uvicorn logs the bind error without a traceback, then SGLang's lifespan shutdown joins the warmup
    thread, which polls /model_info (120 times, 1 s apart) before it gives up: the process is still there."""
    from ansible_collections.blackwell.sglang.plugins.module_utils.health.sglang_log import parse_log

    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        sim = start(["--model-path", str(ckpt), "--tp-size", "2"], port=holder.getsockname()[1])
        sim.wait_for(lambda: BIND_LINE.search(sim.log), 20, "uvicorn's bind error")
        time.sleep(2.5)
        assert sim.proc.poll() is None  # alive: the warmup thread still polls
        assert "Traceback" not in sim.log and "ready to roll" not in sim.log
    log = parse_log(sim.log)
    assert log["bind_failed"]["port"] == sim.port and log["crash_phase"] == "http_server"
    assert log["error"].startswith("[Errno 98] error while attempting to bind on address ('127.0.0.1', ")


def test_a_port_held_by_an_old_server_warms_that_one_up_then_the_new_process_exits(start, ckpt):
    """With an old SGLang still on the port, the new one's warmup succeeds against it: the journal of the failing
    server has the ready line after the bind error, and it exits 1 (uvicorn's sys.exit)."""
    from ansible_collections.blackwell.sglang.plugins.module_utils.health.sglang_log import parse_log

    old = start(["--model-path", str(ckpt), "--tp-size", "1"])
    old.wait_ready()
    new = start(["--model-path", str(ckpt), "--tp-size", "1"], port=old.port)
    assert new.wait_exit(timeout=30) == 1
    assert BIND_LINE.search(new.log) and "The server is fired up and ready to roll!" in new.log
    assert new.log.index("error while attempting to bind") < new.log.index("ready to roll")
    log = parse_log(new.log)
    assert log["bind_failed"]["port"] == old.port and log["crash_phase"] == "http_server"


def test_a_gpu_another_process_holds_stops_every_other_rank_at_the_memory_baseline(start, ckpt, tmp_path):
    """0.5.23 distributed/bootstrap.py: the free memory at the memory baseline is all-reduced (MIN) and every rank
    whose GPU has more than 1/0.9 of it raises ``The memory capacity is unbalanced``; the rank on the held GPU does
    not. The holder is the sandbox's gpu-hog, in the state directory the GPU stand-in reads."""
    from ansible_collections.blackwell.sglang.plugins.module_utils.health.sglang_log import parse_log

    hog = subprocess.Popen([sys.executable, str(ROOT / "tests" / "sandbox" / "gpu_hog.py"), "--gpu", "1", "--mib",
                            "20480", "--state-dir", str(tmp_path / "state")])
    try:
        time.sleep(0.5)
        sim = start(["--model-path", str(ckpt), "--tp-size", "2"])
        assert sim.wait_exit(20) == -signal.SIGKILL
    finally:
        hog.terminate()
        hog.wait(5)
    log = sim.log
    assert re.search(r"\[[\d\- :]+ TP0\] Scheduler hit an exception: Traceback", log)
    assert not re.search(r"TP1\] Scheduler hit an exception", log)
    assert re.search(r"RuntimeError: The memory capacity is unbalanced\. Some GPUs may be occupied by other processes\. "
                     r"pre_model_load_memory=73\.6\d*, local_gpu_memory=93\.6\d*, local_gpu_memory \* 0\.9=84\.\d+", log)
    assert not re.search(r"TP0\] Memory baseline taken", log)  # the held GPU's rank goes on until the tree is killed
    parsed = parse_log(log)
    assert parsed["crash_phase"] == "init_parallel" and "memory capacity is unbalanced" in parsed["error"]


def test_a_missing_shard_is_refused_before_any_shard_is_read(start, ckpt):
    """0.5.23 checks every file the index names before it reads one: every rank raises, no bar is drawn."""
    from ansible_collections.blackwell.sglang.plugins.module_utils.health.sglang_log import parse_log

    victim = sorted(ckpt.glob("*.safetensors"))[2]
    victim.unlink()
    sim = start(["--model-path", str(ckpt), "--tp-size", "2"])
    assert sim.wait_exit(20) == -signal.SIGKILL
    assert re.search(r"RuntimeError: model\.safetensors\.index\.json references 1 shard file\(s\) missing from \S+ "
                     r"\(incomplete download\?\): \['%s'\]" % re.escape(victim.name), sim.log)
    assert "loading shards" not in sim.log
    log = parse_log(sim.log)
    assert log["crash_phase"] == "loading_weights" and "shard file(s) missing" in log["error"]


def test_host_memory_running_out_while_loading_kills_every_rank_and_the_kernel_says_so(start, ckpt, tmp_path):
    """sgl-project/sglang#38567: host RAM, not VRAM: the OOM killer SIGKILLs the ranks mid-load; 0.5.23's parent
    names the dead rank with its -9 and the OOM killer; the kernel's lines name the memory cgroup."""
    from ansible_collections.blackwell.sglang.plugins.module_utils.health.sglang_log import parse_log

    kernel = tmp_path / "kernel.log"
    sim = start(["--model-path", str(ckpt), "--tp-size", "2"],
                env={"SGLANG_SIM_FAULT": "host_oom_at_shard:3", "SGLANG_SIM_KERNEL_LOG": "file:%s" % kernel})
    assert sim.wait_exit(30) == 1
    assert re.search(r"RuntimeError: Rank \d scheduler died during initialization \(exit code: -9\)\. If exit code "
                     r"is -9 \(SIGKILL\), a common cause is the OS OOM killer", sim.log)
    lines = kernel.read_text().splitlines()
    # one kill per rank the OOM killer reached before the parent's death took the rest (PR_SET_PDEATHSIG)
    assert len(lines) in (3, 6) and sum("Memory cgroup out of memory: Killed process" in line for line in lines) >= 1
    assert re.search(r"^oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=\(null\),cpuset=/,mems_allowed=0,oom_memcg=\S+,"
                     r"task_memcg=\S+,task=sglang::schedul,pid=\d+,uid=\d+$", lines[1])
    log = parse_log(sim.log)
    assert log["crash_phase"] == "loading_weights" and log["scheduler_died"]["exit_code"] == -9


def test_the_drains_first_check_comes_0_to_5_s_after_sigterm(start, ckpt):
    """0.5.23's sigterm_watchdog is a task from start-up that looks every 5 s (2 s here) whether SIGTERM came: the
    first ``Gracefully exiting`` comes anywhere from at once to one poll after the signal, not a poll after it."""
    env = {"SGLANG_SIM_DRAIN_POLL_S": "2.0"}
    sims = [start(["--model-path", str(ckpt)], env=env) for _ in range(3)]
    for sim in sims:
        sim.wait_ready(20)
    delays = []
    for offset, sim in zip((0.0, 0.7, 1.4), sims):
        time.sleep(offset)
        sent = time.monotonic()
        os.kill(sim.proc.pid, signal.SIGTERM)
        sim.wait_for(lambda: "Gracefully exiting" in sim.log, 5, "the drain's first check")
        delays.append(time.monotonic() - sent)
    assert all(d <= 2.4 for d in delays), delays
    assert max(delays) - min(delays) >= 0.3, delays  # the check's phase is the watchdog's, not the signal's


def test_after_sigterm_new_requests_are_admitted_and_drained_too(start, ckpt):
    """managers/tokenizer_manager.py (0.5.23): SIGTERM sets gracefully_exit, which only /health and /ready read (503);
    generate requests are still admitted, and sigterm_watchdog's drain (no deadline) waits for them as well. A node
    stopped while the router still sends to it takes requests it then has to finish, or cut at TimeoutStopSec."""
    sim = start(["--model-path", str(ckpt), "--enable-metrics"],
                env={"SGLANG_SIM_REQUEST_S": "3.0", "SGLANG_SIM_DRAIN_POLL_S": "0.5"})
    sim.wait_ready()
    ask = {"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": {"thinking": False}}
    results = []

    def chat():
        sent = time.monotonic()
        results.append((sent, sim.post("/v1/chat/completions", ask, timeout=30)[0], time.monotonic()))
    first = threading.Thread(target=chat)
    first.start()
    sim.wait_for(lambda: re.search(r"sglang:num_running_reqs\{[^}]*\} 1\.0", sim.get("/metrics")[1].decode()), 5,
                 "a request in flight")
    os.kill(sim.proc.pid, signal.SIGTERM)
    sim.wait_for(lambda: "Gracefully exiting" in sim.log, 5, "the drain")
    assert sim.get("/health")[0] == 503 and sim.get("/ready")[0] == 503
    late = threading.Thread(target=chat)  # sent after the drain began: admitted, served, waited for
    late.start()
    first.join(timeout=20)
    late.join(timeout=20)
    assert [status for dummy, status, dummy in results] == [200, 200]
    assert sim.wait_exit(15) == 0
    assert re.search(r"Gracefully exiting\.\.\. Remaining number of requests 2\.", sim.log), sim.log[-2000:]


def test_sgl_force_shutdown_ends_the_drain_at_once(start, ckpt):
    """tokenizer_manager.py sigterm_watchdog: with SGL_FORCE_SHUTDOWN set in the server's environment the first check
    after SIGTERM exits without waiting for the requests in flight (they are cut)."""
    sim = start(["--model-path", str(ckpt)], env={"SGLANG_SIM_REQUEST_S": "6.0", "SGLANG_SIM_DRAIN_POLL_S": "0.5",
                                                   "SGL_FORCE_SHUTDOWN": "1"})
    sim.wait_ready()
    result = {}

    def chat():
        try:
            result["status"] = sim.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]},
                                        timeout=30)[0]
        except Exception as exc:  # the connection is cut
            result["error"] = exc
    t = threading.Thread(target=chat)
    t.start()
    time.sleep(1.0)
    sent = time.monotonic()
    os.kill(sim.proc.pid, signal.SIGTERM)
    assert sim.wait_exit(15) is not None
    assert time.monotonic() - sent < 4.0  # not the request's 6 s: it was cut, not drained
    t.join(timeout=2)
    assert result.get("status") != 200
    assert "Signal SIGTERM received while force shutdown flag set. Force exiting." in sim.log


def test_an_over_length_input_is_the_clients_400_with_0_5_23s_body(start, ckpt):
    """managers/tokenizer_manager.py raises ValueError for an input at or past the context length (and for input +
    max_new_tokens past it); the OpenAI route answers 400 with an ErrorResponse (type BadRequest, or BadRequestError
    from a stream's kick-start), /generate with {"error": {"message"}} and an ERROR line. Nothing is scheduled."""
    sim = start(["--model-path", str(ckpt), "--context-length", "1000"])
    sim.wait_ready()

    def post(path, body):
        req = urllib.request.Request(sim.url(path), data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    long = [{"role": "user", "content": "x" * 4000}]
    tokens = len(json.dumps(long)) // 4
    status, body = post("/v1/chat/completions", {"model": "m", "messages": long})
    assert status == 400
    assert body == ('{"object":"error","message":"The input (%d tokens) is longer than the model\'s context length '
                    '(1000 tokens).","type":"BadRequest","param":null,"code":400}' % tokens)
    status, body = post("/v1/chat/completions", {"model": "m", "messages": long, "stream": True})
    assert status == 400 and json.loads(body)["type"] == "BadRequestError"
    short = [{"role": "user", "content": "hi"}]
    status, body = post("/v1/chat/completions", {"model": "m", "messages": short, "max_tokens": 995})
    assert status == 400 and "Requested token count exceeds the model's maximum context length of 1000" in body
    status, body = post("/generate", {"text": "x" * 4000, "sampling_params": {"max_new_tokens": 4}})
    assert status == 400 and json.loads(body)["error"]["message"].startswith("The input (")
    assert "[http_server] Error: The input (" in sim.log
    assert post("/v1/chat/completions", {"model": "m", "messages": short, "max_tokens": 8})[0] == 200


def test_an_eagle3_draft_loads_after_the_target_and_before_the_kv_pool(start, tmp_path):
    """0.5.23's init_model_worker: the target's weights, then maybe_init_draft_worker (the draft's own ModelRunner:
    its config.json, then its own Load weight begin/end with the draft's architecture), then the KV pools. The draft
    as published: one model.safetensors and no index. A draft path without a config.json fails in the scheduler,
    after the target's weights were read."""
    ckpt = kimi_checkpoint(tmp_path / "Kimi-K2.5")
    draft = tmp_path / "kimi-k2.5-eagle3"
    sandbox_checkpoint_module().make_draft(str(draft))
    spec = ["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "2", "--speculative-eagle-topk", "1",
            "--speculative-num-draft-tokens", "3"]
    sim = start(["--model-path", str(ckpt), "--tp", "2", "--trust-remote-code", *spec,
                 "--speculative-draft-model-path", str(draft)])
    sim.wait_ready(30)
    log = sim.log
    order = ["TP0] Load weight begin.", "TP0] Load weight end. elapsed=", "type=KimiK25ForConditionalGeneration",
             "TP0] Load weight begin.", "type=LlamaForCausalLMEagle3", "TP0] KV Cache is allocated."]
    at = 0
    for text in order:  # each after the one before (index raises otherwise)
        at = log.index(text, at) + 1
    assert log.count("TP1] Load weight end.") == 2
    (tmp_path / "empty").mkdir()
    bad = start(["--model-path", str(ckpt), "--tp", "2", "--trust-remote-code", *spec,
                 "--speculative-draft-model-path", str(tmp_path / "empty")])
    bad.wait_exit(30)
    assert "type=KimiK25ForConditionalGeneration" in bad.log
    assert "Scheduler hit an exception" in bad.log and "does not appear to have a file named config.json" in bad.log
