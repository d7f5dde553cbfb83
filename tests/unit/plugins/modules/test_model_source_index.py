"""model_source_index: the source's own model.safetensors.index.json, read before anything is staged.

Against a real loopback server (tests/sandbox/fake_hub.py on 127.0.0.1, a port of its own): the http mirror with and
without its token, a 404 and a port nobody listens on (both answer with the reason, never fail), the hf source's
resolve URL with the token from the option or from HF_TOKEN, and the path source. Every read asks for the index alone
(no manifest, no HEAD of a shard) and writes nothing.
"""

import json
import os
import socket
import sys
import time

import pytest

from ansible_collections.blackwell.sglang.plugins.modules import model_source_index

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
sys.path.insert(0, os.path.join(ROOT, "tests", "sandbox"))
from fake_hub import FakeHub  # noqa: E402

INDEX = "model.safetensors.index.json"
# Kimi-K2.5's shape: 64 shards, and a total nearer 600 GB than the 547 GB fallback figure.
TOTAL = 595218731008
SHARDS = ["model-%05d-of-%06d.safetensors" % (i, 64) for i in range(1, 65)]
REPO = "moonshotai/Kimi-K2.5"
COMMIT = "4f2a9c1d0e5b6a7f8091a2b3c4d5e6f708192a3b"


@pytest.fixture
def checkpoint(tmp_path):
    """The index and config of a 64-shard checkpoint (no shard bytes: only the index is read)."""
    root = tmp_path / "Kimi-K2.5"
    root.mkdir()
    weight_map = dict(("layers.%d.w" % i, shard) for i, shard in enumerate(SHARDS))
    (root / INDEX).write_text(json.dumps({"metadata": {"total_size": TOTAL}, "weight_map": weight_map}))
    (root / "config.json").write_text("{}")
    return root


@pytest.fixture
def mirror(checkpoint):
    with FakeHub(str(checkpoint)) as server:
        yield server


def requests(server, count=1):
    """The server's request log once it holds ``count`` entries (it records each after sending the answer)."""
    deadline = time.monotonic() + 5
    while len(server.requests) < count and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)  # and nothing more arrives
    return list(server.requests)


def read(module_runner, check_mode=False, **params):
    kind, result = module_runner(model_source_index, dict(dict(retries=0, timeout=5), **params), check_mode=check_mode)
    assert kind == "exit", result
    assert result["changed"] is False
    return result


def test_http_reads_the_mirrors_index_alone(mirror, module_runner, tmp_path):
    result = read(module_runner, source="http", url=mirror.url)
    assert result["index"] == mirror.url + "/" + INDEX
    assert result["total_size_bytes"] == TOTAL and result["shards"] == 64 and result["error"] is None
    assert [(r[0], r[1], r[3]) for r in requests(mirror)] == [("GET", "/" + INDEX, 200)]
    assert sorted(os.listdir(str(tmp_path))) == ["Kimi-K2.5"]


def test_http_check_mode_reads_the_same(mirror, module_runner):
    assert read(module_runner, check_mode=True, source="http", url=mirror.url)["total_size_bytes"] == TOTAL


def test_http_sends_the_token_and_headers_the_http_source_sends(checkpoint, module_runner):
    with FakeHub(str(checkpoint), require_token="s3cr3t-token") as server:
        result = read(module_runner, source="http", url=server.url, token="s3cr3t-token", headers={"X-Site": "a"})
        assert result["total_size_bytes"] == TOTAL
        refused = read(module_runner, source="http", url=server.url)
    assert refused["total_size_bytes"] is None
    assert "HTTP 401" in refused["error"] and "set the token or headers option" in refused["error"]
    assert "s3cr3t" not in json.dumps(result) + json.dumps(refused)


def test_http_404_answers_with_the_url_and_the_status(mirror, module_runner):
    mirror.missing.add(INDEX)
    result = read(module_runner, source="http", url=mirror.url + "/Kimi-K2.5")
    assert result["total_size_bytes"] is None and result["shards"] is None
    assert result["index"] == mirror.url + "/Kimi-K2.5/" + INDEX
    assert result["error"].startswith(INDEX + ": HTTP 404 Not Found (not on the mirror) from "
                                      + mirror.url + "/Kimi-K2.5/" + INDEX)


def test_an_unreachable_mirror_answers_quickly_with_the_reason(module_runner):
    with socket.socket() as sock:  # a loopback port nobody listens on once this socket is closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    started = time.monotonic()
    result = read(module_runner, source="http", url="http://127.0.0.1:%d/Kimi-K2.5" % port, retries=1,
                  retry_delay=0.05)
    assert time.monotonic() - started < 10
    assert result["total_size_bytes"] is None
    assert "cannot connect" in result["error"] and "127.0.0.1:%d" % port in result["error"]
    assert "after 2 attempts" in result["error"]


def test_a_mirror_index_that_is_not_json_or_has_no_total_size(checkpoint, mirror, module_runner):
    (checkpoint / INDEX).write_text("<html>login</html>")
    result = read(module_runner, source="http", url=mirror.url)
    assert result["total_size_bytes"] is None and result["error"].startswith(mirror.url + "/" + INDEX + ": ")
    (checkpoint / INDEX).write_text(json.dumps({"weight_map": {"a": SHARDS[0]}}))
    result = read(module_runner, source="http", url=mirror.url)
    assert result["error"] == "%s/%s has no metadata.total_size, so it does not say the weights' size" % (
        mirror.url, INDEX)


@pytest.fixture
def hub(checkpoint):
    with FakeHub(str(checkpoint), repo=REPO, commit=COMMIT, require_token="hf_s3cr3t") as server:
        yield server


def test_hf_reads_the_pinned_revisions_index_from_the_resolve_url(hub, module_runner):
    result = read(module_runner, source="hf", hf_repo_id=REPO, revision="sandbox-r1", hf_revision=COMMIT,
                  hf_endpoint=hub.url, token="hf_s3cr3t")
    assert result["total_size_bytes"] == TOTAL and result["shards"] == 64 and result["error"] is None
    assert result["index"] == "%s/%s/resolve/%s/%s" % (hub.url, REPO, COMMIT, INDEX)
    assert [(r[0], r[1]) for r in requests(hub)] == [("GET", "/%s/resolve/%s/%s" % (REPO, COMMIT, INDEX))]
    assert "hf_s3cr3t" not in json.dumps(result)


def test_hf_takes_the_token_and_endpoint_from_the_environment(hub, module_runner, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_s3cr3t")
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    result = read(module_runner, source="hf", hf_repo_id=REPO, revision=COMMIT)
    assert result["total_size_bytes"] == TOTAL
    # a revision with a slash is quoted whole, as hf_hub_url does (the fake hub itself routes no such revision)
    branch = read(module_runner, source="hf", hf_repo_id=REPO, revision="refs/pr/1")
    assert branch["index"] == "%s/%s/resolve/refs%%2Fpr%%2F1/%s" % (hub.url, REPO, INDEX)
    monkeypatch.delenv("HF_TOKEN")
    refused = read(module_runner, source="hf", hf_repo_id=REPO, revision=COMMIT)
    assert refused["total_size_bytes"] is None and "HTTP 401" in refused["error"]


def test_path_reads_the_directorys_index(checkpoint, module_runner, tmp_path):
    result = read(module_runner, source="path", source_path=str(checkpoint))
    assert result == {"changed": False, "index": str(checkpoint / INDEX), "total_size_bytes": TOTAL, "shards": 64,
                      "error": None}
    missing = read(module_runner, source="path", source_path=str(tmp_path / "nowhere"))
    assert missing["total_size_bytes"] is None
    assert missing["error"].startswith(str(tmp_path / "nowhere" / INDEX) + ": cannot read the index")


def test_a_source_without_its_location_says_so(module_runner):
    assert read(module_runner, source="http")["error"] == "source http without url: no %s to read" % INDEX
    assert read(module_runner, source="path")["error"] == "no source_path is set, so there is no %s to read" % INDEX
    assert read(module_runner, source="hf")["error"] == "source hf without hf_repo_id: no %s to read" % INDEX


class Redirects(object):
    """A loopback Hub whose resolve URL redirects, as the real one does for a large (LFS/Xet) file: ``/<repo>/resolve/
    <rev>/<file>`` answers 302 to ``target`` (another host: its CDN's signed URL) after a relative 307 on its own
    host; ``target`` serves the index. Each request's Authorization header is recorded by path."""

    def __init__(self, body):
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        import threading
        seen = self.seen = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                seen.append((self.server.server_address[1], self.path, self.headers.get("Authorization")))
                if self.path.startswith("/%s/resolve/" % REPO):
                    self.send_response(307)
                    self.send_header("Location", "/api/resolve-cache/" + INDEX)
                elif self.path.startswith("/api/resolve-cache/"):
                    self.send_response(302)
                    self.send_header("Location", owner.target)
                elif self.path.startswith("/signed/"):
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                else:
                    self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.servers = [ThreadingHTTPServer(("127.0.0.1", 0), Handler) for _ in range(2)]
        hub, cdn = (s.server_address[1] for s in self.servers)
        self.url = "http://127.0.0.1:%d" % hub
        self.target = "http://localhost:%d/signed/%s?Signature=abc" % (cdn, INDEX)  # another host name
        for server in self.servers:
            threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def stop(self):
        for server in self.servers:
            server.shutdown()
            server.server_close()


def test_hf_sends_the_token_to_the_hub_only_not_to_the_cdn_it_redirects_to(checkpoint, module_runner):
    hub = Redirects((checkpoint / INDEX).read_bytes())
    try:
        result = read(module_runner, source="hf", hf_repo_id=REPO, revision=COMMIT, hf_endpoint=hub.url,
                      token="hf_s3cr3t")
    finally:
        hub.stop()
    assert result["total_size_bytes"] == TOTAL, result
    assert [(path.split("?")[0], auth) for port, path, auth in hub.seen] == [
        ("/%s/resolve/%s/%s" % (REPO, COMMIT, INDEX), "Bearer hf_s3cr3t"),
        ("/api/resolve-cache/" + INDEX, "Bearer hf_s3cr3t"),  # a redirect on the Hub's own host keeps it
        ("/signed/" + INDEX, None),
    ]


# ---------------------------------------------------------------- single-file checkpoints (an EAGLE-3 draft)

DRAFT_TENSORS = {"fc.weight": ((128, 384), "float32"), "midlayer.mlp.down_proj.weight": ((256, 512), "float16"),
                 "d2t": ((64,), "int64")}
DRAFT_BYTES = 128 * 384 * 4 + 256 * 512 * 2 + 64 * 8
SINGLE = "model.safetensors"


@pytest.fixture
def draft(tmp_path):
    """config.json and one model.safetensors, no index (lightseekorg/kimi-k2.5-eagle3's layout)."""
    import numpy as np
    from safetensors.numpy import save_file
    root = tmp_path / "draft"
    root.mkdir()
    save_file(dict((name, np.ones(shape, dtype=dtype)) for name, (shape, dtype) in DRAFT_TENSORS.items()),
              str(root / SINGLE))
    (root / "config.json").write_text("{}")
    return root


def test_path_sizes_a_single_file_checkpoint_by_its_header(draft, module_runner):
    result = read(module_runner, source="path", source_path=str(draft))
    assert result == {"changed": False, "index": str(draft / SINGLE), "total_size_bytes": DRAFT_BYTES, "shards": 1,
                      "error": None}


def test_path_refuses_several_safetensors_files_without_an_index(draft, module_runner):
    (draft / "extra.safetensors").write_bytes((draft / SINGLE).read_bytes())
    result = read(module_runner, source="path", source_path=str(draft))
    assert result["total_size_bytes"] is None
    assert result["error"] == (
        "%s: has no %s but 2 safetensors files (extra.safetensors, %s): without the index which file holds which "
        "tensor is ambiguous; stage a sharded checkpoint with its %s, or a single %s" % (draft, INDEX, SINGLE, INDEX,
                                                                                        SINGLE))


def test_http_sizes_a_single_file_checkpoint_by_two_ranged_gets_of_its_header(draft, module_runner):
    from test_model_stage_single import RangeServer, header_bytes
    server = RangeServer(draft)
    try:
        result = read(module_runner, source="http", url=server.url)
    finally:
        server.stop()
    assert result["index"] == server.url + "/" + SINGLE
    assert result["total_size_bytes"] == DRAFT_BYTES and result["shards"] == 1 and result["error"] is None
    head = header_bytes(draft / SINGLE)
    assert [(g[0], g[1], g[2], g[3]) for g in server.gets] == [
        ("/" + INDEX, None, 404, 0), ("/" + SINGLE, "bytes=0-7", 206, 8),
        ("/" + SINGLE, "bytes=8-%d" % (head - 1), 206, head - 8)]


def test_http_without_index_or_single_file_reports_the_index(checkpoint, mirror, module_runner):
    (checkpoint / INDEX).unlink()
    result = read(module_runner, source="http", url=mirror.url)
    assert result["total_size_bytes"] is None
    assert result["error"].startswith(INDEX + ": HTTP 404 Not Found (not on the mirror) from %s/%s" % (mirror.url,
                                                                                                        INDEX))
    assert sorted((r[1], r[3]) for r in requests(mirror, 2)) == [("/" + SINGLE, 404), ("/" + INDEX, 404)]


def test_http_index_that_fails_otherwise_is_not_replaced_by_the_header(draft, module_runner):
    (draft / INDEX).write_text("<html>login</html>")
    with FakeHub(str(draft)) as server:
        result = read(module_runner, source="http", url=server.url)
        assert result["error"].startswith(server.url + "/" + INDEX + ": ")
        assert [r[1] for r in requests(server)] == ["/" + INDEX]


def test_hf_sizes_a_single_file_revision_by_its_header(draft, module_runner):
    from test_model_stage_single import header_bytes
    with FakeHub(str(draft), repo=REPO, commit=COMMIT, require_token="hf_s3cr3t") as server:
        result = read(module_runner, source="hf", hf_repo_id=REPO, revision=COMMIT, hf_endpoint=server.url,
                      token="hf_s3cr3t")
        # the fake hub answers a closed range with the whole file (read only as far as needed, then closed) and
        # records a request once its answer is sent, so maybe out of order
        assert sorted((r[1], r[2] or "") for r in requests(server, 3)) == sorted([
            ("/%s/resolve/%s/%s" % (REPO, COMMIT, INDEX), ""),
            ("/%s/resolve/%s/%s" % (REPO, COMMIT, SINGLE), "bytes=0-7"),
            ("/%s/resolve/%s/%s" % (REPO, COMMIT, SINGLE), "bytes=8-%d" % (header_bytes(draft / SINGLE) - 1))])
    assert result["index"] == "%s/%s/resolve/%s/%s" % (server.url, REPO, COMMIT, SINGLE)
    assert result["total_size_bytes"] == DRAFT_BYTES and result["shards"] == 1 and result["error"] is None



DRAFT_CONFIG = {"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 7168, "target_hidden_size": 7168}


def test_read_config_reads_config_json_from_every_source_the_same_way(draft, module_runner):
    """With read_config the source's config.json comes back parsed, from the same place, with the same token: an
    EAGLE3 draft is judged against its model by both (preflight), before either is staged."""
    (draft / "config.json").write_text(json.dumps(DRAFT_CONFIG))
    result = read(module_runner, source="path", source_path=str(draft), read_config=True)
    assert result["config"] == DRAFT_CONFIG and result["config_location"] == str(draft / "config.json")
    assert result["config_error"] is None and result["total_size_bytes"] == DRAFT_BYTES
    with FakeHub(str(draft)) as server:
        result = read(module_runner, source="http", url=server.url, read_config=True)
        assert result["config"] == DRAFT_CONFIG and result["config_location"] == server.url + "/config.json"
    with FakeHub(str(draft), repo=REPO, commit=COMMIT, require_token="hf_s3cr3t") as server:
        result = read(module_runner, source="hf", hf_repo_id=REPO, revision=COMMIT, hf_endpoint=server.url,
                      token="hf_s3cr3t", read_config=True)
        assert result["config"] == DRAFT_CONFIG
        assert result["config_location"] == "%s/%s/resolve/%s/config.json" % (server.url, REPO, COMMIT)
        assert "hf_s3cr3t" not in json.dumps(result)
    # without the option nothing more is read or returned
    assert "config" not in read(module_runner, source="path", source_path=str(draft))


def test_read_config_says_why_a_config_json_cannot_be_read(draft, module_runner, tmp_path):
    (draft / "config.json").write_text("<html>login</html>")
    result = read(module_runner, source="path", source_path=str(draft), read_config=True)
    assert result["config"] is None and result["config_error"].startswith(str(draft / "config.json") + " is not JSON")
    (draft / "config.json").unlink()
    with FakeHub(str(draft)) as server:
        result = read(module_runner, source="http", url=server.url, read_config=True)
        assert result["config"] is None and "HTTP 404" in result["config_error"]
    result = read(module_runner, source="http", read_config=True)
    assert result["config_error"] == "source http without url: no config.json to read"
