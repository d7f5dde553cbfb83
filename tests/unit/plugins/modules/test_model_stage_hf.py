"""model_stage with source=hf: the module runs ``<hf_python> <hf_helper>`` and verifies what it wrote.

* with a stub helper (always runs): token only in the environment, LFS sha256 checked, verification as for
  the other sources, ``current`` untouched on failure;
* with the real helper (roles/model_stage/files/hf_snapshot.py) and the real ``huggingface_hub`` against the
  loopback fake hub (tests/sandbox/fake_hub.py): runs when ``MODEL_STAGE_HF_PYTHON`` names a python that has
  ``huggingface_hub`` installed (e.g. the staging venv), skipped otherwise.
"""

import hashlib
import json
import os
import subprocess
import sys
import time
from collections import namedtuple

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils.staging import model_source_base
from ansible_collections.blackwell.sglang.plugins.module_utils.staging import model_store
from ansible_collections.blackwell.sglang.plugins.modules import model_stage

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(HERE))))
sys.path.insert(0, os.path.join(ROOT, "tests", "sandbox"))
sys.path.insert(0, HERE)
from fake_hub import FakeHub  # noqa: E402
from test_model_stage_http import SHARDS, mirror_dir, write_sums  # noqa: E402,F401  (fixture reuse)

HELPER = os.path.join(ROOT, "roles", "model_stage", "files", "hf_snapshot.py")

STUB = r'''
import hashlib, json, os, shutil, sys, time
argv = sys.argv[1:]
opts = {}
for i, a in enumerate(argv):
    if a.startswith("--"):
        opts.setdefault(a, []).append(argv[i + 1] if i + 1 < len(argv) else None)
src = os.environ["STUB_SOURCE"]
with open(os.environ["STUB_LOG"], "a") as log:  # one JSON line per run
    log.write(json.dumps({"argv": sys.argv, "token": os.environ.get("HF_TOKEN"),
                          "endpoint": os.environ.get("HF_ENDPOINT")}) + "\n")
files = {}
plan = opts.get("--plan-dir", [None])[0]  # plan: list everything, fetch only names without a --skip-suffix
dest = plan or opts["--local-dir"][0]
for name in sorted(os.listdir(src)):
    if opts.get("--allow-pattern") and name not in opts["--allow-pattern"]:
        continue
    if not plan or not name.endswith(tuple(opts.get("--skip-suffix", []))):
        # as huggingface_hub does: write beside, rename into place once complete (file_download.py _chmod_and_move)
        part = os.path.join(dest, "." + name + ".incomplete")
        shutil.copy(os.path.join(src, name), part)
        os.replace(part, os.path.join(dest, name))
        if not plan:
            time.sleep(float(os.environ.get("STUB_SLEEP", "0")))
    sha = hashlib.sha256(open(os.path.join(src, name), "rb").read()).hexdigest()
    files[name] = {"size": os.path.getsize(os.path.join(src, name)),
                   "sha256": os.environ.get("STUB_LFS_" + name.replace(".", "_").replace("-", "_"), sha)
                   if name.endswith(".safetensors") else None}
if os.environ.get("STUB_REWRITE") and not plan:  # a file changed after it landed (same size, new bytes)
    time.sleep(0.3)
    path = os.path.join(opts["--local-dir"][0], os.environ["STUB_REWRITE"])
    data = open(path, "rb").read()
    open(path, "wb").write(data.replace(b" ", b"\t"))
with open(os.environ["STUB_LOG"] + ".end", "w") as end:
    end.write(repr(time.time()))
json.dump({"commit": "c0ffee", "files": files}, open(opts["--report"][0], "w"))
'''


@pytest.fixture
def stub(tmp_path, mirror_dir, monkeypatch):
    path = tmp_path / "stub_helper.py"
    path.write_text(STUB)
    monkeypatch.setenv("STUB_SOURCE", str(mirror_dir))
    monkeypatch.setenv("STUB_LOG", str(tmp_path / "stub.json"))
    return path


def hf_args(tmp_path, helper, **kw):
    base = dict(name="Kimi-K2.5", revision="r1", source="hf", hf_repo_id="moonshotai/Kimi-K2.5",
                hf_revision="0123456789abcdef0123456789abcdef01234567", hf_python=sys.executable,
                hf_helper=str(helper), token="hf_s3cr3t", hf_endpoint="http://127.0.0.1:9", store=str(tmp_path / "store"),
                progress_interval=0.1)
    base.update(kw)
    return base


def test_hf_stages_with_token_only_in_the_environment(stub, tmp_path, module_runner):
    kind, result = module_runner(model_stage, hf_args(tmp_path, stub))
    assert kind == "exit", result
    assert result["verified"] is True and result["shards"] == 4
    model_dir = tmp_path / "store" / "Kimi-K2.5"
    assert os.readlink(str(model_dir / "current")) == "r1"
    plan, fetch = runs(tmp_path)
    for log in (plan, fetch):
        assert log["token"] == "hf_s3cr3t" and log["endpoint"] == "http://127.0.0.1:9"
        assert "hf_s3cr3t" not in " ".join(log["argv"])
    assert "hf_s3cr3t" not in json.dumps(result)
    # the plan lists the pinned revision; the transfer fetches the commit the listing resolved it to
    assert "--plan-dir" in plan["argv"] and "--local-dir" in fetch["argv"]
    assert plan["argv"][plan["argv"].index("--revision") + 1] == "0123456789abcdef0123456789abcdef01234567"
    assert fetch["argv"][fetch["argv"].index("--revision") + 1] == "c0ffee"
    manifest = json.loads((model_dir / "r1" / ".manifest.json").read_text())
    assert "commit c0ffee" in manifest["source"]
    assert not (model_dir / "r1" / ".cache").exists()
    # the closing progress line counts the index's shards and the staged bytes (the helper knew the list, not us)
    assert result["progress"][-1].startswith("staged 4/4 shards, %.1f/%.1f GB" % ((manifest["total_bytes"] / 1e9,) * 2))
    assert module_runner(model_stage, hf_args(tmp_path, stub))[1]["changed"] is False


def test_hf_hashes_each_file_once_as_it_lands(stub, tmp_path, module_runner, monkeypatch):
    """Files are hashed while the others still download, each once; a file that changed after its early hash
    is hashed again (the early hash counts only for the same size, mtime and inode)."""
    monkeypatch.setenv("STUB_SLEEP", "0.3")
    monkeypatch.setenv("STUB_REWRITE", "config.json")
    calls, real = [], model_source_base.hash_file  # what the hub source hashes each landed file with

    def spy(path, *a, **kw):
        calls.append((os.path.basename(path), time.time()))
        return real(path, *a, **kw)

    monkeypatch.setattr(model_source_base, "hash_file", spy)
    kind, result = module_runner(model_stage, hf_args(tmp_path, stub))
    assert kind == "exit", result
    helper_end = float((tmp_path / "stub.json.end").read_text())
    names = [n for n, _ in calls]
    assert set(SHARDS) <= set(names)
    assert names.count("config.json") == 2 and all(names.count(n) == 1 for n in set(names) - {"config.json"}), names
    assert [t for n, t in calls if n == SHARDS[0]][0] < helper_end, "the first shard was hashed only after the download"
    final = tmp_path / "store" / "Kimi-K2.5" / "r1"
    manifest = json.loads((final / ".manifest.json").read_text())
    assert manifest["files"]["config.json"]["sha256"] == hashlib.sha256((final / "config.json").read_bytes()).hexdigest()


def test_hf_lfs_sha256_mismatch_names_the_file(stub, tmp_path, module_runner, monkeypatch):
    monkeypatch.setenv("STUB_LFS_" + SHARDS[1].replace(".", "_").replace("-", "_"), "0" * 64)
    kind, result = module_runner(model_stage, hf_args(tmp_path, stub))
    assert kind == "fail"
    partial = tmp_path / "store" / "Kimi-K2.5" / "r1.partial"
    assert any(p.startswith("%s: sha256 mismatch: manifest says %s" % (partial / SHARDS[1], "0" * 64))
               for p in result["problems"]), result["problems"]
    assert not os.path.lexists(str(tmp_path / "store" / "Kimi-K2.5" / "current"))


def test_hf_empty_config_is_a_staging_error(stub, mirror_dir, tmp_path, module_runner):
    (mirror_dir / "config.json").write_bytes(b"")
    kind, result = module_runner(model_stage, hf_args(tmp_path, stub))
    assert kind == "fail"
    assert any(p.startswith("%s: file is empty" % (tmp_path / "store" / "Kimi-K2.5" / "r1.partial" / "config.json"))
               for p in result["problems"])


def test_hf_helper_failure_is_reported_with_its_output(tmp_path, module_runner):
    helper = tmp_path / "broken.py"
    helper.write_text("import sys\nprint('RepositoryNotFoundError: 404 moonshotai/Kimi-K2.5')\nsys.exit(3)\n")
    kind, result = module_runner(model_stage, hf_args(tmp_path, helper))
    assert kind == "fail"
    assert "the hf helper failed (exit 3)" in result["msg"] and "RepositoryNotFoundError" in result["msg"]


def test_hf_missing_venv_says_what_to_do(tmp_path, module_runner):
    kind, result = module_runner(model_stage, hf_args(tmp_path, HELPER, hf_python=str(tmp_path / "nope" / "python")))
    assert kind == "fail" and "model_stage_hf_venv" in result["msg"]


def runs(tmp_path):
    """The stub helper's runs, oldest first (one JSON line each)."""
    return [json.loads(line) for line in (tmp_path / "stub.json").read_text().splitlines()]


def test_hf_check_mode_plans_from_the_listing_and_writes_nothing(stub, mirror_dir, tmp_path, module_runner):
    kind, result = module_runner(model_stage, hf_args(tmp_path, stub), check_mode=True)
    assert kind == "exit" and result["changed"] is True
    assert ["--plan-dir" in r["argv"] for r in runs(tmp_path)] == [True]
    assert not (tmp_path / "store").exists()
    everything = sum(os.path.getsize(str(mirror_dir / n)) for n in os.listdir(str(mirror_dir)))
    assert result["total_bytes"] == result["copied_bytes"] == everything and result["shards"] == 4


def test_hf_check_mode_before_the_staging_venv_exists_says_so(tmp_path, module_runner):
    a = hf_args(tmp_path, HELPER, hf_python=str(tmp_path / "nope" / "python"))
    kind, result = module_runner(model_stage, a, check_mode=True)
    assert kind == "exit" and result["changed"] is True
    assert "sizes unknown until" in result["actions"][0] and "model_stage_hf_venv" in result["actions"][0]


def test_hf_too_little_space_fails_before_any_shard_moves(stub, tmp_path, module_runner, monkeypatch):
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(model_store.shutil, "disk_usage", lambda p: usage(10 ** 12, 10 ** 12, 1000))
    kind, result = module_runner(model_stage, hf_args(tmp_path, stub))
    assert kind == "fail" and "not enough free space in %s" % (tmp_path / "store") in result["msg"]
    assert ["--plan-dir" in r["argv"] for r in runs(tmp_path)] == [True]
    assert not (tmp_path / "store" / "Kimi-K2.5" / "r1.partial").exists()


def test_hf_rerun_after_a_failed_transfer_fetches_only_what_is_not_recorded(stub, mirror_dir, tmp_path, module_runner,
                                                                             monkeypatch):
    monkeypatch.setenv("STUB_LFS_" + SHARDS[1].replace(".", "_").replace("-", "_"), "0" * 64)
    assert module_runner(model_stage, hf_args(tmp_path, stub))[0] == "fail"
    monkeypatch.delenv("STUB_LFS_" + SHARDS[1].replace(".", "_").replace("-", "_"))
    kind, result = module_runner(model_stage, hf_args(tmp_path, stub))
    assert kind == "exit", result
    fetch = runs(tmp_path)[-1]["argv"]
    assert [fetch[i + 1] for i, a in enumerate(fetch) if a == "--allow-pattern"] == [SHARDS[1]]
    assert result["resumed_files"] == len(os.listdir(str(mirror_dir))) - 1


HF_PYTHON = os.environ.get("MODEL_STAGE_HF_PYTHON")


def _has_hub(python):
    return python and subprocess.run([python, "-c", "import huggingface_hub"], capture_output=True).returncode == 0


@pytest.mark.skipif(not _has_hub(HF_PYTHON), reason="set MODEL_STAGE_HF_PYTHON to a python with huggingface_hub")
def test_real_huggingface_hub_against_the_fake_hub(mirror_dir, tmp_path, module_runner):
    with FakeHub(str(mirror_dir), repo="moonshotai/Kimi-K2.5", require_token="hf_s3cr3t") as hub:
        a = hf_args(tmp_path, HELPER, hf_python=HF_PYTHON, hf_endpoint=hub.url, hf_revision="main")
        kind, result = module_runner(model_stage, a)
        assert kind == "exit", result
        assert result["verified"] is True
        final = tmp_path / "store" / "Kimi-K2.5" / "r1"
        for shard in SHARDS:
            assert hashlib.sha256((final / shard).read_bytes()).hexdigest() == \
                hashlib.sha256((mirror_dir / shard).read_bytes()).hexdigest()
        assert any(r[1].startswith("/api/models/moonshotai/Kimi-K2.5/tree/") for r in hub.requests)
        requests = len(hub.requests)
        assert module_runner(model_stage, a)[1]["changed"] is False
        assert len(hub.requests) == requests
