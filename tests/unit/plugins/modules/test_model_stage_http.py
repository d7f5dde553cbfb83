"""model_stage with source=http against a loopback mirror (tests/sandbox/fake_hub.py), and the field cases.

Each failure case asserts that the message names the file at fault and that ``current`` never moved.
"""

import hashlib
import json
import os
import signal
import struct
import subprocess
import sys
import time
from collections import namedtuple

import numpy as np
import pytest
from safetensors.numpy import save_file

from ansible_collections.blackwell.sglang.plugins.module_utils.staging import durable_files
from ansible_collections.blackwell.sglang.plugins.module_utils.staging import model_sources
from ansible_collections.blackwell.sglang.plugins.module_utils.staging import model_staging
from ansible_collections.blackwell.sglang.plugins.module_utils.staging import model_store
from ansible_collections.blackwell.sglang.plugins.module_utils.staging import _model_verify as model_verify
from ansible_collections.blackwell.sglang.plugins.module_utils.staging import safetensors_header
from ansible_collections.blackwell.sglang.plugins.modules import model_stage

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
sys.path.insert(0, os.path.join(ROOT, "tests", "sandbox"))
from fake_hub import FakeHub  # noqa: E402

SHARDS = ["model-%05d-of-%06d.safetensors" % (i, 4) for i in range(1, 5)]
INDEX = "model.safetensors.index.json"


def write_sums(root):
    names = sorted(n for n in os.listdir(str(root)) if n != "SHA256SUMS" and not n.startswith("."))
    lines = ["%s  %s\n" % (hashlib.sha256((root / n).read_bytes()).hexdigest(), n) for n in names]
    (root / "SHA256SUMS").write_text("".join(lines))


@pytest.fixture
def mirror_dir(tmp_path):
    """A 4-shard real-format checkpoint (~1.6 MB) with SHA256SUMS, written with the safetensors library."""
    src = tmp_path / "mirror"
    src.mkdir()
    weight_map, total = {}, 0
    rng = np.random.default_rng(5)
    for i, shard in enumerate(SHARDS):
        tensors = {"language_model.model.layers.%d.w%d" % (i, j): rng.standard_normal((128, 256)).astype(np.float32)
                   for j in range(4)}
        save_file(tensors, str(src / shard), metadata={"format": "pt"})
        weight_map.update(dict((k, shard) for k in tensors))
        total += sum(t.nbytes for t in tensors.values())
    (src / INDEX).write_text(json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}))
    (src / "config.json").write_text(json.dumps({"architectures": ["KimiK25ForConditionalGeneration"]}))
    (src / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 262144}))
    (src / "tiktoken.model").write_bytes(b"abc 0\n")
    (src / "chat_template.jinja").write_text("{{ messages[0]['content'] }}\n")
    write_sums(src)
    return src


@pytest.fixture
def hub(mirror_dir):
    server = FakeHub(str(mirror_dir)).start()
    yield server
    server.stop()


def args(hub, tmp_path, **kw):
    base = dict(name="Kimi-K2.5", revision="r1", source="http", url=hub.url, store=str(tmp_path / "store"),
                retries=0, retry_delay=0.0, timeout=10, progress_interval=0.0)
    base.update(kw)
    return base


def model_dir(tmp_path):
    return tmp_path / "store" / "Kimi-K2.5"


def total_bytes(mirror_dir):
    return sum(os.path.getsize(str(mirror_dir / n)) for n in os.listdir(str(mirror_dir)) if n != "SHA256SUMS")


def test_http_stages_verifies_activates_and_reports_progress(hub, mirror_dir, tmp_path, module_runner):
    kind, result = module_runner(model_stage, args(hub, tmp_path))
    assert kind == "exit", result
    final = model_dir(tmp_path) / "r1"
    assert result["changed"] is True and result["verified"] is True and result["shards"] == 4
    assert result["copied_bytes"] == result["total_bytes"] == total_bytes(mirror_dir)
    assert os.readlink(str(model_dir(tmp_path) / "current")) == "r1"
    assert not (model_dir(tmp_path) / "r1.partial").exists()
    manifest = json.loads((final / ".manifest.json").read_text())
    sums = dict(reversed(line.split("  ")) for line in (mirror_dir / "SHA256SUMS").read_text().splitlines())
    assert dict((k, v["sha256"]) for k, v in manifest["files"].items()) == sums
    assert result["progress"][-1].startswith("staged 4/4 shards, 0.0/0.0 GB, ")
    assert result["progress"][-1].endswith("ETA 0s")
    progress_file = model_dir(tmp_path) / ".r1.progress"
    assert result["progress_file"] == str(progress_file)
    assert "staged 4/4 shards" in progress_file.read_text().splitlines()[-1]


def test_noop_rerun_touches_neither_network_nor_file_contents(hub, tmp_path, module_runner, monkeypatch):
    module_runner(model_stage, args(hub, tmp_path))
    before = len(hub.requests)

    def forbidden(*a, **k):
        raise AssertionError("a no-op run must not read file contents")

    for where, name in ((model_sources, "hash_file"), (durable_files, "hash_prefix"), (model_verify, "verify_shard"),
                        (model_staging, "verify_shard")):
        monkeypatch.setattr(where, name, forbidden)
    kind, result = module_runner(model_stage, args(hub, tmp_path))
    assert kind == "exit", result
    assert result["changed"] is False and result["copied_bytes"] == 0 and result["verified"] is True
    assert len(hub.requests) == before


def test_check_mode_downloads_nothing(hub, tmp_path, module_runner):
    kind, result = module_runner(model_stage, args(hub, tmp_path), check_mode=True)
    assert kind == "exit", result
    assert result["changed"] is True and result["copied_bytes"] == result["total_bytes"] > 0
    assert result["actions"][0].startswith("download 9 file(s)")
    assert not (tmp_path / "store").exists()
    assert hub.body_bytes(SHARDS[0]) == 0


def test_truncated_or_corrupt_staged_shard_is_fetched_again_rest_kept(hub, tmp_path, module_runner):
    module_runner(model_stage, args(hub, tmp_path))
    final = model_dir(tmp_path) / "r1"
    with open(str(final / SHARDS[2]), "r+b") as handle:
        handle.truncate(300)
    inode_kept = os.stat(str(final / SHARDS[0])).st_ino
    sent_before = hub.body_bytes()
    kind, result = module_runner(model_stage, args(hub, tmp_path))
    assert kind == "exit", result
    assert result["repaired"] == [SHARDS[2]] and result["changed"] is True
    assert "%s (size, mtime_ns changed)" % SHARDS[2] in result["actions"][0]
    assert hub.body_bytes() - sent_before - len((hub.root + "/SHA256SUMS").encode()) < 2 * os.path.getsize(
        os.path.join(hub.root, SHARDS[2]))
    assert result["copied_bytes"] == os.path.getsize(os.path.join(hub.root, SHARDS[2]))
    assert os.stat(str(final / SHARDS[0])).st_ino == inode_kept
    safetensors_header.verify_shard(str(final / SHARDS[2]))
    assert module_runner(model_stage, args(hub, tmp_path))[1]["changed"] is False


# ---------------------------------------------------------------- field cases

def test_field_shard_truncated_to_a_few_hundred_bytes(hub, mirror_dir, tmp_path, module_runner):
    shard = mirror_dir / SHARDS[1]
    shard.write_bytes(shard.read_bytes()[:400])
    write_sums(mirror_dir)  # the mirror itself holds the truncated file: only the header check can tell
    kind, result = module_runner(model_stage, args(hub, tmp_path))
    assert kind == "fail"
    partial = model_dir(tmp_path) / "r1.partial"
    msg = [p for p in result["problems"] if p.startswith(str(partial / SHARDS[1]) + ":")]
    assert msg and ("truncated" in msg[0]), result["problems"]
    assert not os.path.lexists(str(model_dir(tmp_path) / "current"))
    assert not (partial / SHARDS[1]).exists()  # removed so a re-run fetches it again


def test_field_shard_in_weight_map_absent_from_mirror(hub, mirror_dir, tmp_path, module_runner):
    os.unlink(str(mirror_dir / SHARDS[3]))
    kind, result = module_runner(model_stage, args(hub, tmp_path))
    assert kind == "fail"
    assert any(p.startswith(SHARDS[3] + ": HTTP 404") for p in result["problems"]), result["problems"]
    assert hub.body_bytes(SHARDS[0]) == 0  # found before any shard byte moved


def test_field_shard_in_weight_map_absent_from_manifest(hub, mirror_dir, tmp_path, module_runner):
    sums = (mirror_dir / "SHA256SUMS").read_text().splitlines()
    (mirror_dir / "SHA256SUMS").write_text("\n".join(l for l in sums if SHARDS[2] not in l) + "\n")
    kind, result = module_runner(model_stage, args(hub, tmp_path))
    assert kind == "fail"
    assert "1 shard(s) named in model.safetensors.index.json are not in SHA256SUMS, so they cannot be verified: %s" \
        % SHARDS[2] in result["msg"]


def test_field_header_length_past_end_of_file(hub, mirror_dir, tmp_path, module_runner):
    shard = mirror_dir / SHARDS[0]
    raw = shard.read_bytes()
    shard.write_bytes(struct.pack("<Q", len(raw) * 4) + raw[8:])
    write_sums(mirror_dir)
    kind, result = module_runner(model_stage, args(hub, tmp_path))
    assert kind == "fail"
    path = model_dir(tmp_path) / "r1.partial" / SHARDS[0]
    assert any(p.startswith("%s: header length %d runs past end of file" % (path, len(raw) * 4))
               for p in result["problems"]), result["problems"]


def test_field_zero_byte_config_json(hub, mirror_dir, tmp_path, module_runner):
    (mirror_dir / "config.json").write_bytes(b"")
    write_sums(mirror_dir)
    kind, result = module_runner(model_stage, args(hub, tmp_path))
    assert kind == "fail"
    path = model_dir(tmp_path) / "r1.partial" / "config.json"
    assert any(p.startswith("%s: file is empty" % path) for p in result["problems"]), result["problems"]


def test_field_sha256_mismatch(hub, mirror_dir, tmp_path, module_runner):
    hub.corrupt.add(SHARDS[2])
    kind, result = module_runner(model_stage, args(hub, tmp_path, retries=1))
    assert kind == "fail"
    assert any(p.startswith(SHARDS[2] + ": sha256 mismatch: manifest says ") for p in result["problems"])
    partial = model_dir(tmp_path) / "r1.partial"
    assert not (partial / SHARDS[2]).exists() and not (partial / (SHARDS[2] + ".download")).exists()
    assert not os.path.lexists(str(model_dir(tmp_path) / "current"))
    # fetched twice from byte 0 (one retry), then given up
    assert len([r for r in hub.requests if r[0] == "GET" and r[1].endswith(SHARDS[2])]) == 2
    hub.corrupt.clear()
    kind, result = module_runner(model_stage, args(hub, tmp_path))
    assert kind == "exit", result
    assert result["resumed_files"] >= 1 and result["copied_bytes"] < total_bytes(mirror_dir)


def test_field_store_with_too_little_space(hub, mirror_dir, tmp_path, module_runner, monkeypatch):
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(model_store.shutil, "disk_usage", lambda p: usage(10 ** 12, 10 ** 12, 1000 * 1000))
    kind, result = module_runner(model_stage, args(hub, tmp_path))
    assert kind == "fail"
    need = total_bytes(mirror_dir) * 1.05 / 1e9
    assert "not enough free space in %s: need %.1f GB (%.1f GB still to copy + 5%%), 0.0 GB free" % (
        tmp_path / "store", need, total_bytes(mirror_dir) / 1e9) in result["msg"]
    assert hub.body_bytes(SHARDS[0]) == 0 and not (tmp_path / "store").exists()


def test_space_needed_counts_only_what_is_left(hub, mirror_dir, tmp_path, module_runner, monkeypatch):
    hub.cut_after[SHARDS[1]] = 100000
    module_runner(model_stage, args(hub, tmp_path, parallel=1))
    seen = []
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(model_store.shutil, "disk_usage", lambda p: seen.append(p) or usage(0, 0, 10 ** 12))
    kind, result = module_runner(model_stage, args(hub, tmp_path), check_mode=True)
    assert kind == "exit", result
    assert result["resumed_bytes"] == 100000
    assert result["copied_bytes"] < total_bytes(mirror_dir) - 100000


def test_field_transfer_killed_mid_file_then_rerun(hub, mirror_dir, tmp_path, module_runner, monkeypatch):
    # r0 is live; r1's transfer dies half-way through shard 2 (the connection drops, no retries left)
    module_runner(model_stage, args(hub, tmp_path, revision="r0"))
    flips = []
    real_flip = model_staging.flip_current
    monkeypatch.setattr(model_staging, "flip_current", lambda cur, rev: flips.append(rev) or real_flip(cur, rev))
    size = os.path.getsize(str(mirror_dir / SHARDS[1]))
    hub.cut_after[SHARDS[1]] = size // 2
    sent0 = hub.body_bytes()
    kind, result = module_runner(model_stage, args(hub, tmp_path, parallel=1))
    assert kind == "fail"
    assert any(p.startswith(SHARDS[1] + ": ") for p in result["problems"]), result["problems"]
    partial = model_dir(tmp_path) / "r1.partial"
    assert os.path.getsize(str(partial / (SHARDS[1] + ".download"))) == size // 2
    assert os.readlink(str(model_dir(tmp_path) / "current")) == "r0"
    first = hub.body_bytes() - sent0

    sent1 = hub.body_bytes()
    kind, result = module_runner(model_stage, args(hub, tmp_path))
    assert kind == "exit", result
    second = hub.body_bytes() - sent1
    total = total_bytes(mirror_dir)
    assert result["resumed_bytes"] == size // 2 and result["resumed_files"] >= 1
    assert result["copied_bytes"] < total and second < total
    assert first + result["copied_bytes"] <= total + 10000  # only the index/manifest are fetched twice
    ranged = [r for r in hub.requests if r[1].endswith(SHARDS[1]) and r[2]]
    assert ranged == [("GET", "/" + SHARDS[1], "bytes=%d-" % (size // 2), 206, size - size // 2)]
    assert os.readlink(str(model_dir(tmp_path) / "current")) == "r1"
    assert flips == ["r1"] and not any(f.endswith(".partial") for f in flips)


def test_finished_but_unrecorded_file_is_hashed_not_fetched_again(hub, mirror_dir, tmp_path, module_runner):
    """A run that stopped after a file was whole but before the journal recorded it (batched durability)."""
    partial = model_dir(tmp_path) / "r1.partial"
    partial.mkdir(parents=True)
    (partial / SHARDS[2]).write_bytes((mirror_dir / SHARDS[2]).read_bytes())
    (partial / SHARDS[3]).write_bytes((mirror_dir / SHARDS[3]).read_bytes()[:-10] + b"0123456789")  # damaged
    kind, result = module_runner(model_stage, args(hub, tmp_path, retries=1))
    assert kind == "exit", result
    assert hub.body_bytes(SHARDS[2]) == 0  # whole and matching the manifest: kept
    assert hub.body_bytes(SHARDS[3]) == os.path.getsize(str(mirror_dir / SHARDS[3]))  # sha256 said no: fetched
    assert result["resumed_files"] == 1
    assert result["copied_bytes"] == total_bytes(mirror_dir) - os.path.getsize(str(mirror_dir / SHARDS[2]))
    staged = model_dir(tmp_path) / "r1"
    assert (staged / SHARDS[3]).read_bytes() == (mirror_dir / SHARDS[3]).read_bytes()


def test_server_ignoring_range_restarts_that_file(hub, mirror_dir, tmp_path, module_runner):
    hub.cut_after[SHARDS[0]] = 5000
    module_runner(model_stage, args(hub, tmp_path))
    hub.ignore_range.add(SHARDS[0])
    kind, result = module_runner(model_stage, args(hub, tmp_path))
    assert kind == "exit", result
    last = [r for r in hub.requests if r[1].endswith(SHARDS[0])][-1]
    assert last[2] == "bytes=5000-" and last[3] == 200  # answered from byte 0: restarted, not appended
    assert result["verified"] is True


def test_transient_failures_are_retried_with_backoff(hub, mirror_dir, tmp_path, monkeypatch):
    from ansible_collections.blackwell.sglang.plugins.module_utils.staging.model_mirror import Mirror

    hub.cut_after[SHARDS[0]] = 1000
    hub.cut_times[SHARDS[0]] = 2
    sleeps = []
    mirror = Mirror(hub.url, retries=3, retry_delay=0.5, timeout=10, sleep=sleeps.append)
    dest = str(tmp_path / SHARDS[0])
    got = mirror.download(SHARDS[0], dest, expected_size=os.path.getsize(str(mirror_dir / SHARDS[0])))
    assert sleeps == [0.5, 1.0]
    assert got["sha256"] == hashlib.sha256((mirror_dir / SHARDS[0]).read_bytes()).hexdigest()
    assert got["transferred"] == os.path.getsize(dest)  # 1000 + 0 + the rest: nothing fetched twice
    mirror2 = Mirror(hub.url, retries=2, retry_delay=0.5, sleep=sleeps.append)
    hub.missing.add(SHARDS[1])
    with pytest.raises(Exception) as err:
        mirror2.download(SHARDS[1], str(tmp_path / "x"))
    assert str(err.value).startswith(SHARDS[1] + ": HTTP 404") and sleeps == [0.5, 1.0]  # 404 is not retried


def test_token_goes_in_a_header_and_never_into_messages(mirror_dir, tmp_path, module_runner):
    with FakeHub(str(mirror_dir), require_token="s3cr3t-token") as server:
        kind, result = module_runner(model_stage, args(server, tmp_path, token="wrong-token"))
        assert kind == "fail"
        assert "HTTP 401" in result["msg"] and "credentials" in result["msg"]
        assert "wrong-token" not in json.dumps(result)
        kind, result = module_runner(model_stage, args(server, tmp_path, token="s3cr3t-token"))
        assert kind == "exit", result
        assert "s3cr3t-token" not in json.dumps(result)
        assert "s3cr3t-token" not in (model_dir(tmp_path) / "r1" / ".manifest.json").read_text()


def test_json_manifest_with_sizes_needs_no_head_requests(hub, mirror_dir, tmp_path, module_runner):
    files = {}
    for line in (mirror_dir / "SHA256SUMS").read_text().splitlines():
        sha, name = line.split("  ")
        files[name] = {"sha256": sha, "size": os.path.getsize(str(mirror_dir / name))}
    (mirror_dir / "manifest.json").write_text(json.dumps({"files": files}))
    kind, result = module_runner(model_stage, args(hub, tmp_path, manifest="manifest.json"))
    assert kind == "exit", result
    assert not [r for r in hub.requests if r[0] == "HEAD"]


def test_real_sigkill_mid_transfer_then_rerun(hub, mirror_dir, tmp_path, module_runner):
    """The module as a process, killed with SIGKILL while a shard is half written; the re-run resumes it."""
    shard = mirror_dir / SHARDS[1]
    tensors = {"language_model.model.layers.1.w%d" % j: np.ones((1024, 256), dtype=np.float32) for j in range(4)}
    save_file(tensors, str(shard), metadata={"format": "pt"})  # same names, 4 MiB: long enough to kill mid-file
    index = json.loads((mirror_dir / INDEX).read_text())
    index["metadata"]["total_size"] += 3 * 4 * 131072 * 4
    (mirror_dir / INDEX).write_text(json.dumps(index))
    write_sums(mirror_dir)
    hub.delay = 0.5  # seconds per MiB sent
    argsfile = tmp_path / "args.json"
    argsfile.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args(hub, tmp_path, parallel=1)}))
    runner = ("import sys, runpy; sys.path.insert(0, %r); sys.argv[1:] = [%r]; "
              "runpy.run_path(%r, run_name='__main__')" % (os.path.join(ROOT, ".collections"),
                                                           str(argsfile),
                                                           os.path.join(ROOT, "plugins", "modules", "model_stage.py")))
    proc = subprocess.Popen([sys.executable, "-c", runner], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    partial = model_dir(tmp_path) / "r1.partial"
    deadline = time.time() + 30
    try:
        while time.time() < deadline:
            downloads = list(partial.glob("*.download")) if partial.exists() else []
            if any(d.name.startswith(SHARDS[1]) and d.stat().st_size > 0 for d in downloads):
                break
            time.sleep(0.01)
        else:
            raise AssertionError("no shard download started in 30 s: %r" % (proc.poll(),))
    finally:
        proc.send_signal(signal.SIGKILL)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL, (out, err)
    assert not os.path.lexists(str(model_dir(tmp_path) / "current"))
    hub.delay = 0.0
    sent = hub.body_bytes()
    kind, result = module_runner(model_stage, args(hub, tmp_path))
    assert kind == "exit", result
    assert result["resumed_files"] >= 1 and result["resumed_bytes"] > 0
    assert hub.body_bytes() - sent < total_bytes(mirror_dir)
    assert os.readlink(str(model_dir(tmp_path) / "current")) == "r1"
