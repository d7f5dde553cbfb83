"""model_sources: every source through the one protocol the staging flow uses (plan, transfer, check_room...).

The same 4-shard checkpoint is served three ways: a local directory (path), the loopback mirror with SHA256SUMS
(http, tests/sandbox/fake_hub.py) and the stub hf helper (test_model_stage_hf.STUB, which writes files the way
huggingface_hub does). Each must plan the same files and sizes and transfer the same bytes, calling ``on_done``
once per file; and the staging flow itself must never ask which kind of source it has.
"""

import hashlib
import os
import re
import sys
import threading

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils.staging import model_sources
from ansible_collections.blackwell.sglang.plugins.module_utils.staging import model_staging
from ansible_collections.blackwell.sglang.plugins.module_utils.staging.model_store import StageError
from ansible_collections.blackwell.sglang.plugins.module_utils.staging.stage_progress import Progress

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "modules"))
from test_model_stage_http import SHARDS, mirror_dir, hub  # noqa: E402,F401  (fixture reuse)
from test_model_stage_hf import STUB  # noqa: E402

PARAMS = dict(name="Kimi-K2.5", revision="r1", source_path=None, url=None, manifest="SHA256SUMS", token=None,
              headers={}, parallel=2, retries=0, retry_delay=0.0, timeout=10, progress_interval=0.0,
              hf_repo_id="moonshotai/Kimi-K2.5", hf_revision="main", hf_endpoint="", hf_python=sys.executable,
              hf_helper=None, allow_patterns=[], link_mode="copy")


@pytest.fixture(params=["path", "http", "hf"])
def source(request, mirror_dir, hub, tmp_path, monkeypatch):
    kind = request.param
    p = dict(PARAMS, source=kind)
    if kind == "path":
        p["source_path"] = str(mirror_dir)
    elif kind == "http":
        p["url"] = hub.url
    else:
        helper = tmp_path / "stub_helper.py"
        helper.write_text(STUB)
        monkeypatch.setenv("STUB_SOURCE", str(mirror_dir))
        monkeypatch.setenv("STUB_LOG", str(tmp_path / "stub.json"))
        p["hf_helper"] = str(helper)
    return model_sources.make_source(p)


def staged_names(mirror_dir):
    """What every source stages from the fixture: all its files but SHA256SUMS."""
    return sorted(n for n in os.listdir(str(mirror_dir)) if n != "SHA256SUMS")


def sha(path):
    return hashlib.sha256(open(str(path), "rb").read()).hexdigest()


def test_every_source_plans_the_same_files_and_sizes(source, mirror_dir):
    assert source.missing_tools() == []
    plan = source.plan()
    names = staged_names(mirror_dir)
    # SHA256SUMS is a plain file to the path and hf sources (staged too) and the manifest to the http source
    assert sorted(set(plan["files"]) - {"SHA256SUMS"}) == names
    assert sorted(plan["index"]["shards"]) == SHARDS
    assert dict((n, plan["sizes"][n]) for n in names) == dict((n, os.path.getsize(str(mirror_dir / n))) for n in names)
    # whatever the source vouches for is right (http: SHA256SUMS, hf: the Hub's LFS sha256, path: nothing)
    assert all(plan["sha256"][n] == sha(mirror_dir / n) for n in plan["sha256"])
    assert isinstance(source.description, str) and source.verb in ("copy", "link", "download")


def test_every_source_transfers_the_bytes_and_reports_each_file_once(source, mirror_dir, tmp_path):
    plan = source.plan()
    dest = tmp_path / "dest"
    dest.mkdir()
    done, lock = [], threading.Lock()

    def on_done(rel, rec):
        with lock:
            done.append(rel)

    progress = Progress(plan["index"]["shards"], sum(plan["sizes"].values()), interval=0.0)
    records, problems = source.transfer(str(dest), plan["files"], plan["sha256"], plan["sizes"], progress, on_done)
    assert problems == []
    assert sorted(done) == sorted(records) == sorted(plan["files"])
    for rel, rec in records.items():
        assert rec["sha256"] == sha(mirror_dir / rel) == sha(dest / rel)
        assert rec["transferred"] == os.path.getsize(str(mirror_dir / rel)) and rec["resumed_from"] == 0
        assert source.still_valid(rel, dict(rec))
    assert not (dest / ".cache").exists()


def test_every_source_transfers_a_subset_into_a_fresh_directory(source, mirror_dir, tmp_path):
    """What repair does: only the named files, into a work directory, with the sizes and sha256 a manifest holds."""
    names = [SHARDS[2], "config.json"]
    sizes = dict((n, os.path.getsize(str(mirror_dir / n))) for n in names)
    expected = dict((n, sha(mirror_dir / n)) for n in names)
    progress = Progress([SHARDS[2]], sum(sizes.values()), interval=0.0)
    records, problems = source.transfer(str(tmp_path / "work"), names, expected, sizes, progress,
                                        lambda rel, rec: None)
    assert problems == [] and sorted(records) == sorted(names)
    assert sorted(os.listdir(str(tmp_path / "work"))) == sorted(names)


def test_every_source_transfers_nothing_when_nothing_is_left(source, tmp_path):
    """A re-run whose journal holds every file (killed after the last commit, before the rename) fetches nothing."""
    progress = Progress([], 0, interval=0.0)
    assert source.transfer(str(tmp_path / "work"), [], {}, {}, progress, lambda rel, rec: None) == ({}, [])
    assert not (tmp_path / "work").exists() or os.listdir(str(tmp_path / "work")) == []
    assert not (tmp_path / "stub.json").exists() or all("--plan-dir" in line for line in
                                                         (tmp_path / "stub.json").read_text().splitlines())


def test_every_source_refuses_a_store_without_room(source, tmp_path, monkeypatch):
    from collections import namedtuple
    from ansible_collections.blackwell.sglang.plugins.module_utils.staging import model_store
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(model_store.shutil, "disk_usage", lambda p: usage(0, 0, 1000))
    with pytest.raises(StageError, match=r"not enough free space in /store: need 0\.0 GB"):
        source.check_room("/store", str(tmp_path / "store" / "m"), 10 ** 6)
    monkeypatch.setattr(model_store.shutil, "disk_usage", lambda p: usage(0, 0, 10 ** 9))
    assert source.check_room("/store", str(tmp_path / "store" / "m"), 10 ** 6) == 10 ** 6


def test_every_source_names_a_shard_the_index_lists_but_the_source_lacks(source, mirror_dir):
    os.unlink(str(mirror_dir / SHARDS[3]))
    lines = [ln for ln in (mirror_dir / "SHA256SUMS").read_text().splitlines() if not ln.endswith(SHARDS[3])]
    (mirror_dir / "SHA256SUMS").write_text("\n".join(lines) + "\n")
    with pytest.raises(StageError) as err:
        source.plan()
    assert SHARDS[3] in str(err.value)


def test_the_staging_flow_never_asks_which_kind_of_source_it_has():
    """The flow calls the protocol only: no test of the source's kind, class or option (make_source picks)."""
    text = open(model_staging.__file__).read()
    assert not re.search(r"\.kind\b|isinstance\([^)]*Source|getattr\(source|p\[\"source\"\]\s*==|"
                         r"source\s*==\s*\"(path|http|hf)\"", text), "a branch on the source kind in model_staging"
    # and every source class implements every protocol method
    for cls in model_sources.SOURCES.values():
        for method in ("missing_tools", "plan", "still_valid", "partial_bytes", "check_room", "transfer"):
            assert callable(getattr(cls, method)), (cls, method)


@pytest.fixture(params=["path", "http", "hf"])
def single_source(request, tmp_path, monkeypatch):
    """A single-file checkpoint (test_model_stage_single.draft: config.json, model.safetensors, training_state.pt,
    SHA256SUMS) served each way; the http mirror is a Range-capable http.server, the hf resolve URL the fake hub."""
    from test_model_stage_single import COMMIT, REPO, RangeServer, write_draft
    from fake_hub import FakeHub
    draft = write_draft(tmp_path / "draft")
    kind = request.param
    p = dict(PARAMS, source=kind)
    server = None
    if kind == "path":
        p["source_path"] = str(draft)
    elif kind == "http":
        server = RangeServer(draft)
        p["url"] = server.url
    else:
        server = FakeHub(str(draft), repo=REPO, commit=COMMIT).start()
        helper = tmp_path / "stub_helper.py"
        helper.write_text(STUB)
        monkeypatch.setenv("STUB_SOURCE", str(draft))
        monkeypatch.setenv("STUB_LOG", str(tmp_path / "stub.json"))
        p.update(hf_helper=str(helper), hf_repo_id=REPO, hf_revision=COMMIT, hf_endpoint=server.url)
    yield model_sources.make_source(p), draft
    if server is not None:
        server.stop()


def test_every_source_plans_a_single_file_checkpoint_from_its_header(single_source):
    from safetensors.numpy import load_file
    source, draft = single_source
    total = sum(t.nbytes for t in load_file(str(draft / "model.safetensors")).values())
    figures = source.read_index()
    assert figures["total_size_bytes"] == total and figures["shards"] == 1
    assert figures["index"].endswith("/model.safetensors")
    plan = source.plan()
    assert plan["index"]["shards"] == ["model.safetensors"] and plan["index"]["total_size"] == total
    assert sorted(set(plan["files"]) - {"SHA256SUMS"}) == ["config.json", "model.safetensors"]  # no index file
    assert plan["skipped"] == ["training_state.pt"]
    assert plan["sizes"]["model.safetensors"] == os.path.getsize(str(draft / "model.safetensors"))
