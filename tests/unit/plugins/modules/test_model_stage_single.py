"""model_stage with a single-file checkpoint: ``config.json`` + one ``model.safetensors``, no
``model.safetensors.index.json`` (what EAGLE-3 draft models such as lightseekorg/kimi-k2.5-eagle3 ship; SGLang globs
``*.safetensors`` and loads it).

The index is derived from the file's safetensors header (model_index.index_from_header). path reads it from the local
file; http (a real ``http.server`` on 127.0.0.1 that honours ``Range`` and counts the bytes it sends) and hf (the stub
helper of test_model_stage_hf plus the loopback fake hub's resolve URL) read only the header, with two ranged GETs.
No index file is written into the staged revision; a re-run is a no-op; a corrupt file is still caught; several
``.safetensors`` files without an index are refused, naming them.
"""

import hashlib
import json
import os
import re
import struct
import sys
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from ansible_collections.blackwell.sglang.plugins.module_utils.staging import model_sources
from ansible_collections.blackwell.sglang.plugins.modules import model_stage

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(HERE))))
sys.path.insert(0, os.path.join(ROOT, "tests", "sandbox"))
sys.path.insert(0, HERE)
from fake_hub import FakeHub  # noqa: E402
from test_model_stage_hf import HELPER, STUB, _has_hub  # noqa: E402

INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"
REPO = "lightseekorg/kimi-k2.5-eagle3"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def write_sums(root):
    names = sorted(n for n in os.listdir(str(root)) if n != "SHA256SUMS" and not n.startswith("."))
    lines = ["%s  %s\n" % (hashlib.sha256((root / n).read_bytes()).hexdigest(), n) for n in names]
    (root / "SHA256SUMS").write_text("".join(lines))


def header_bytes(path):
    """8 + the header length of a safetensors file: what a plan may read of it."""
    with open(str(path), "rb") as handle:
        return 8 + struct.unpack("<Q", handle.read(8))[0]


@pytest.fixture
def draft(tmp_path):
    return write_draft(tmp_path / "draft")


def write_draft(src):
    """An EAGLE-3 draft's layout in ``src`` (~1 MB of weights): config.json, model.safetensors and a
    training_state.pt that is a weight file outside any index (skipped, as select_files skips it), with SHA256SUMS."""
    src.mkdir()
    rng = np.random.default_rng(3)
    tensors = {"midlayer.self_attn.q_proj.weight": rng.standard_normal((256, 256)).astype(np.float32),
               "midlayer.mlp.down_proj.weight": rng.standard_normal((256, 512)).astype(np.float16),
               "fc.weight": rng.standard_normal((128, 384)).astype(np.float32),
               "d2t": np.arange(64, dtype=np.int64)}
    save_file(tensors, str(src / SINGLE), metadata={"format": "pt"})
    (src / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLMEagle3"], "draft_vocab_size": 64}))
    (src / "training_state.pt").write_bytes(b"optimizer state" * 100)
    write_sums(src)
    return src


class RangeServer(ThreadingHTTPServer):
    """``python -m http.server`` over ``root`` that answers ``Range: bytes=A-B`` / ``bytes=A-`` with 206 (unless
    ``ranges`` is false: then 200 and the whole file, as http.server itself does) and records each GET as
    (path, Range header, status, body bytes sent). A GET is recorded as it arrives, so ``gets`` (which waits for the
    requests in progress to end) lists them in order and complete."""

    daemon_threads = True

    def __init__(self, root, ranges=True):
        self.root, self.ranges, self.log, self.active, self.lock = str(root), ranges, [], 0, threading.Lock()
        super(RangeServer, self).__init__(("127.0.0.1", 0), RangeHandler)
        self.thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.server_address[1]

    def stop(self):
        self.shutdown()
        self.server_close()

    @property
    def gets(self):
        deadline = time.monotonic() + 10
        while self.active and time.monotonic() < deadline:
            time.sleep(0.01)
        with self.lock:
            return [tuple(entry) for entry in self.log]

    def sent(self, name):
        return sum(g[3] for g in self.gets if g[0] == "/" + name)


class RangeHandler(SimpleHTTPRequestHandler):
    def __init__(self, *args, **kwargs):
        super(RangeHandler, self).__init__(*args, directory=args[2].root, **kwargs)

    def log_message(self, *args):
        pass

    def do_GET(self):
        entry = [self.path, self.headers.get("Range"), None, 0]
        with self.server.lock:
            self.server.log.append(entry)
            self.server.active += 1
        try:
            entry[2:] = self.answer(entry[1] or "")
        finally:
            with self.server.lock:
                self.server.active -= 1

    def answer(self, rng):
        """Send the answer; returns (status, body bytes sent)."""
        path = self.translate_path(self.path)
        if not os.path.isfile(path):
            self.send_error(404)
            return 404, 0
        size = os.path.getsize(path)
        start, end, status = 0, size - 1, 200
        match = re.match(r"^bytes=(\d+)-(\d*)$", rng.strip()) if self.server.ranges else None
        if match:
            start, status = int(match.group(1)), 206
            end = min(int(match.group(2)), size - 1) if match.group(2) else size - 1
            if start >= size:
                self.send_response(416)
                self.send_header("Content-Range", "bytes */%d" % size)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return 416, 0
        self.send_response(status)
        self.send_header("Content-Length", str(end - start + 1))
        if status == 206:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end, size))
        self.end_headers()
        sent = 0
        with open(path, "rb") as handle:
            handle.seek(start)
            left = end - start + 1
            try:
                while left:
                    block = handle.read(min(left, 1 << 16))
                    self.wfile.write(block)
                    sent += len(block)
                    left -= len(block)
            except (BrokenPipeError, ConnectionResetError):
                pass
        return status, sent


@pytest.fixture
def mirror(draft):
    server = RangeServer(draft)
    yield server
    server.stop()


def args(tmp_path, **kw):
    base = dict(name="kimi-k2.5-eagle3", revision="r1", source="path", store=str(tmp_path / "store"), retries=0,
                retry_delay=0.0, timeout=10, progress_interval=0.0)
    base.update(kw)
    return base


def staged(tmp_path, revision="r1"):
    return tmp_path / "store" / "kimi-k2.5-eagle3" / revision


def assert_staged_as_the_source_has_it(result, draft, tmp_path, sums_staged):
    """Staged as the source has it, no index file written (SHA256SUMS is a plain file to the path source, the
    manifest to the http source)."""
    final = staged(tmp_path)
    assert result["changed"] is True and result["verified"] is True and result["shards"] == 1
    assert sorted(os.listdir(str(final))) == [".manifest.json"] + ["SHA256SUMS"] * sums_staged + [
        "config.json", SINGLE]
    assert (final / SINGLE).read_bytes() == (draft / SINGLE).read_bytes()
    assert result["skipped"] == ["training_state.pt"]
    assert os.readlink(str(final.parent / "current")) == "r1"
    manifest = json.loads((final / ".manifest.json").read_text())
    assert manifest["shards"] == 1 and ("SHA256SUMS" in manifest["files"]) is sums_staged


def test_path_stages_a_single_file_checkpoint_and_reruns_as_a_noop(draft, tmp_path, module_runner):
    kind, result = module_runner(model_stage, args(tmp_path, source_path=str(draft)))
    assert kind == "exit", result
    assert_staged_as_the_source_has_it(result, draft, tmp_path, True)
    assert result["progress"][-1].startswith("staged 1/1 shards")
    kind, again = module_runner(model_stage, args(tmp_path, source_path=str(draft)))
    assert kind == "exit", again
    assert again["changed"] is False and again["copied_bytes"] == 0 and again["shards"] == 1


def test_path_check_mode_plans_one_shard(draft, tmp_path, module_runner):
    kind, result = module_runner(model_stage, args(tmp_path, source_path=str(draft)), check_mode=True)
    assert kind == "exit", result
    assert result["changed"] is True and result["shards"] == 1
    assert result["actions"][0].startswith("copy 3 file(s)")  # config.json, model.safetensors, SHA256SUMS
    assert not (tmp_path / "store").exists()


def test_http_plan_reads_only_the_header_then_stages_and_reruns_as_a_noop(draft, mirror, tmp_path, module_runner):
    kind, result = module_runner(model_stage, args(tmp_path, source="http", url=mirror.url), check_mode=True)
    assert kind == "exit", result
    assert result["shards"] == 1 and result["total_bytes"] == sum(
        os.path.getsize(str(draft / n)) for n in ("config.json", SINGLE))
    # the plan read the 8-byte length and the header, nothing of the tensor data
    head = header_bytes(draft / SINGLE)
    assert mirror.sent(SINGLE) == head < os.path.getsize(str(draft / SINGLE)) // 100
    assert [(g[1], g[2], g[3]) for g in mirror.gets if g[0] == "/" + SINGLE] == [
        ("bytes=0-7", 206, 8), ("bytes=8-%d" % (head - 1), 206, head - 8)]
    assert not [g for g in mirror.gets if g[0] == "/" + INDEX]  # the manifest said there is none: not asked for

    kind, result = module_runner(model_stage, args(tmp_path, source="http", url=mirror.url))
    assert kind == "exit", result
    assert_staged_as_the_source_has_it(result, draft, tmp_path, False)
    assert mirror.sent(SINGLE) == 2 * head + os.path.getsize(str(draft / SINGLE))  # two plans' headers, one file
    before = list(mirror.gets)
    kind, again = module_runner(model_stage, args(tmp_path, source="http", url=mirror.url))
    assert kind == "exit", again
    assert again["changed"] is False and again["copied_bytes"] == 0
    assert mirror.gets == before  # stat-only: no request at all


def test_http_mirror_serving_a_truncated_file_is_caught_by_verification(draft, mirror, tmp_path, module_runner):
    size = os.path.getsize(str(draft / SINGLE))
    (draft / SINGLE).write_bytes((draft / SINGLE).read_bytes()[:size - 1000])
    write_sums(draft)  # the mirror itself vouches for the truncated file: only the header check can tell
    kind, result = module_runner(model_stage, args(tmp_path, source="http", url=mirror.url))
    assert kind == "fail"
    partial = staged(tmp_path, "r1.partial")
    msg = [p for p in result["problems"] if p.startswith(str(partial / SINGLE) + ":")]
    assert msg and "file truncated by 1000 bytes" in msg[0], result["problems"]
    assert not (partial / SINGLE).exists()  # removed, so a re-run fetches it again
    assert not os.path.lexists(str(staged(tmp_path).parent / "current"))


def test_http_sha256_mismatch_of_the_single_file_names_it(draft, mirror, tmp_path, module_runner):
    sums = (draft / "SHA256SUMS").read_text().replace(hashlib.sha256((draft / SINGLE).read_bytes()).hexdigest(),
                                                      "0" * 64)
    (draft / "SHA256SUMS").write_text(sums)
    kind, result = module_runner(model_stage, args(tmp_path, source="http", url=mirror.url))
    assert kind == "fail"
    assert any(p.startswith(SINGLE + ": sha256 mismatch: manifest says " + "0" * 64) for p in result["problems"])


def test_a_staged_single_file_that_was_damaged_is_fetched_again(draft, tmp_path, module_runner):
    assert module_runner(model_stage, args(tmp_path, source_path=str(draft)))[0] == "exit"
    final = staged(tmp_path)
    with open(str(final / SINGLE), "r+b") as handle:
        handle.truncate(300)
    kind, result = module_runner(model_stage, args(tmp_path, source_path=str(draft)))
    assert kind == "exit", result
    assert result["repaired"] == [SINGLE] and result["changed"] is True
    assert (final / SINGLE).read_bytes() == (draft / SINGLE).read_bytes()
    assert not (final / INDEX).exists()
    assert module_runner(model_stage, args(tmp_path, source_path=str(draft)))[1]["changed"] is False


def test_repair_refuses_a_single_file_whose_source_changed(draft, tmp_path, module_runner):
    assert module_runner(model_stage, args(tmp_path, source_path=str(draft)))[0] == "exit"
    final = staged(tmp_path)
    os.unlink(str(final / SINGLE))
    save_file({"other": np.zeros((4, 4), dtype=np.float32)}, str(draft / SINGLE))
    kind, result = module_runner(model_stage, args(tmp_path, source_path=str(draft)))
    assert kind == "fail"
    assert any("the source now has different bytes" in p for p in result["problems"]), result["problems"]
    assert not (final / SINGLE).exists()  # nothing half-repaired put in place


def test_a_repair_of_config_json_reads_the_staged_files_header(draft, tmp_path, module_runner):
    assert module_runner(model_stage, args(tmp_path, source_path=str(draft)))[0] == "exit"
    final = staged(tmp_path)
    (final / "config.json").write_text("{}")
    kind, result = module_runner(model_stage, args(tmp_path, source_path=str(draft)))
    assert kind == "exit", result
    assert result["repaired"] == ["config.json"]
    assert (final / "config.json").read_text() == (draft / "config.json").read_text()


@pytest.mark.parametrize("kind", ["path", "http"])
def test_two_safetensors_files_without_an_index_are_refused_naming_them(draft, mirror, tmp_path, module_runner,
                                                                        kind):
    save_file({"x": np.zeros((2, 2), dtype=np.float32)}, str(draft / "extra.safetensors"))
    write_sums(draft)
    a = args(tmp_path, source_path=str(draft)) if kind == "path" else args(tmp_path, source="http", url=mirror.url)
    kind_, result = module_runner(model_stage, a)
    assert kind_ == "fail"
    assert "has no %s but 2 safetensors files (extra.safetensors, %s)" % (INDEX, SINGLE) in result["msg"]
    assert "ambiguous" in result["msg"]
    assert not (tmp_path / "store" / "kimi-k2.5-eagle3" / "r1.partial").exists()
    assert mirror.sent(SINGLE) == 0


def test_one_safetensors_file_of_another_name_without_an_index_is_refused(draft, tmp_path, module_runner):
    os.rename(str(draft / SINGLE), str(draft / "weights.safetensors"))
    kind, result = module_runner(model_stage, args(tmp_path, source_path=str(draft)))
    assert kind == "fail"
    assert "its one safetensors file is weights.safetensors, not %s" % SINGLE in result["msg"]


def test_no_index_and_no_safetensors_file_says_the_index_is_missing(draft, tmp_path, module_runner):
    os.unlink(str(draft / SINGLE))
    kind, result = module_runner(model_stage, args(tmp_path, source_path=str(draft)))
    assert kind == "fail" and "%s: cannot read the index" % (draft / INDEX) in result["msg"]


# ---------------------------------------------------------------- hf


@pytest.fixture
def fake_hub(draft):
    with FakeHub(str(draft), repo=REPO, commit=COMMIT, require_token="hf_s3cr3t") as server:
        yield server


def hf_args(tmp_path, helper, hub, **kw):
    base = dict(source="hf", hf_repo_id=REPO, hf_revision="main", hf_python=sys.executable, hf_helper=str(helper),
                token="hf_s3cr3t", hf_endpoint=hub.url)
    base.update(kw)
    return args(tmp_path, **base)


def test_hf_plan_reads_the_header_from_the_pinned_commits_resolve_url(draft, fake_hub, tmp_path, module_runner,
                                                                      monkeypatch):
    helper = tmp_path / "stub_helper.py"
    helper.write_text(STUB.replace('"c0ffee"', repr(COMMIT)))
    monkeypatch.setenv("STUB_SOURCE", str(draft))
    monkeypatch.setenv("STUB_LOG", str(tmp_path / "stub.json"))
    kind, result = module_runner(model_stage, hf_args(tmp_path, helper, fake_hub))
    assert kind == "exit", result
    final = staged(tmp_path)
    assert result["verified"] is True and result["shards"] == 1
    assert not (final / INDEX).exists() and (final / SINGLE).read_bytes() == (draft / SINGLE).read_bytes()
    # the plan's two ranged GETs, against the commit the listing resolved, with the token (the fake hub answers a
    # closed range with the whole file, 200, so it is read only as far as the header and the connection closed; it
    # records a request once its answer is sent, so maybe out of order)
    deadline = time.monotonic() + 10
    while len([r for r in fake_hub.requests if r[0] == "GET"]) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    gets = [r for r in fake_hub.requests if r[0] == "GET"]
    assert sorted((r[1], r[2]) for r in gets) == [
        ("/%s/resolve/%s/%s" % (REPO, COMMIT, SINGLE), "bytes=0-7"),
        ("/%s/resolve/%s/%s" % (REPO, COMMIT, SINGLE), "bytes=8-%d" % (header_bytes(draft / SINGLE) - 1))]
    assert "hf_s3cr3t" not in json.dumps(result)
    assert module_runner(model_stage, hf_args(tmp_path, helper, fake_hub))[1]["changed"] is False


HF_PYTHON = os.environ.get("MODEL_STAGE_HF_PYTHON")


@pytest.mark.skipif(not _has_hub(HF_PYTHON), reason="set MODEL_STAGE_HF_PYTHON to a python with huggingface_hub")
def test_real_huggingface_hub_stages_a_single_file_checkpoint(draft, fake_hub, tmp_path, module_runner):
    a = hf_args(tmp_path, HELPER, fake_hub, hf_python=HF_PYTHON)
    kind, result = module_runner(model_stage, a)
    assert kind == "exit", result
    final = staged(tmp_path)
    assert result["verified"] is True and result["shards"] == 1
    assert hashlib.sha256((final / SINGLE).read_bytes()).hexdigest() == \
        hashlib.sha256((draft / SINGLE).read_bytes()).hexdigest()
    assert sorted(os.listdir(str(final))) == [".manifest.json", "SHA256SUMS", "config.json", SINGLE]
    requests = len(fake_hub.requests)
    assert module_runner(model_stage, a)[1]["changed"] is False
    assert len(fake_hub.requests) == requests


def test_the_http_source_reads_the_header_with_two_ranged_gets(draft, mirror):
    """model_sources.fetch_header_index, as the http source's plan calls it (manifest size known or not)."""
    mirror_ = model_sources.Mirror(mirror.url, retries=0, timeout=5)
    index = model_sources.fetch_header_index(mirror_, SINGLE, SINGLE)
    assert index["shards"] == [SINGLE] and index["total_size"] == sum(
        t.nbytes for t in load_file(str(draft / SINGLE)).values())
    assert sorted(index["weight_map"]) == sorted(index["tensors_by_shard"][SINGLE])
    with pytest.raises(model_sources.StageError, match="runs past end of file"):
        model_sources.fetch_header_index(mirror_, SINGLE, SINGLE, file_size=100)

