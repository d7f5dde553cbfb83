"""model_stage on small real-format checkpoints (written with the safetensors reference library)."""

import errno
import hashlib
import json
import os
import shutil
from collections import namedtuple

import numpy as np
import pytest
from safetensors.numpy import save_file

from ansible_collections.blackwell.sglang.plugins.module_utils.staging import durable_files
from ansible_collections.blackwell.sglang.plugins.module_utils.staging import model_sources
from ansible_collections.blackwell.sglang.plugins.module_utils.staging import model_staging
from ansible_collections.blackwell.sglang.plugins.module_utils.staging import model_store
from ansible_collections.blackwell.sglang.plugins.module_utils.staging import _model_verify as model_verify
from ansible_collections.blackwell.sglang.plugins.modules import model_stage

SHARDS = ["model-00001-of-000003.safetensors", "model-00002-of-000003.safetensors", "model-00003-of-000003.safetensors"]


@pytest.fixture
def source(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    weight_map, total = {}, 0
    for i, shard in enumerate(SHARDS):
        tensors = {"model.layers.%d.w%d" % (i, j): np.full((64, 32), i + j, dtype=np.float16) for j in range(3)}
        save_file(tensors, str(src / shard), metadata={"format": "pt"})
        weight_map.update(dict((k, shard) for k in tensors))
        total += sum(t.nbytes for t in tensors.values())
    (src / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": total},
                                                                   "weight_map": weight_map}))
    (src / "config.json").write_text(json.dumps({"architectures": ["KimiK25ForConditionalGeneration"]}))
    (src / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 262144}))
    (src / "tiktoken.model").write_bytes(b"abc 0\n")
    # tokenizer_config.json has no chat_template, so the checkpoint needs chat_template.jinja (model_files)
    (src / "chat_template.jinja").write_text("{{ messages[0]['content'] }}\n")
    (src / "modeling_kimi_k25.py").write_text("# remote code\n")
    (src / "original.bin").write_bytes(b"x" * 10)
    (src / ".gitattributes").write_text("*.safetensors filter=lfs\n")
    (src / "docs").mkdir()
    return src


class FakeModule(object):
    def __init__(self, params, check_mode=False):
        self.params = dict(DEFAULTS, **params)
        self.check_mode = check_mode
        self.warnings = []

    def warn(self, msg):
        self.warnings.append(msg)


DEFAULTS = dict(source="path", source_path=None, url=None, manifest="SHA256SUMS", token=None, headers={}, parallel=4,
                retries=0, retry_delay=0.0, timeout=10, progress_file=None, progress_interval=0.0, hf_repo_id=None,
                hf_revision=None, hf_endpoint="", hf_python="/bin/false", hf_helper=None, allow_patterns=[],
                store="/srv/models", link_mode="copy", activate=True, nice=0)


def args(source, tmp_path, **kw):
    base = dict(name="Kimi-K2.5", revision="r1", source="path", source_path=str(source), store=str(tmp_path / "store"))
    base.update(kw)
    return base


def test_first_run_stages_verifies_and_activates(source, tmp_path, module_runner):
    kind, result = module_runner(model_stage, args(source, tmp_path))
    assert kind == "exit", result
    final = tmp_path / "store" / "Kimi-K2.5" / "r1"
    current = tmp_path / "store" / "Kimi-K2.5" / "current"
    assert result["changed"] is True and result["verified"] is True
    assert result["path"] == str(final) and result["current"] == str(current)
    assert result["shards"] == 3
    assert result["copied_bytes"] == result["total_bytes"] > 0
    assert os.readlink(str(current)) == "r1"
    assert not (tmp_path / "store" / "Kimi-K2.5" / "r1.partial").exists()
    assert sorted(result["skipped"]) == ["docs/", "original.bin"]
    staged = sorted(os.listdir(str(final)))
    assert staged == sorted([".manifest.json", "chat_template.jinja", "config.json", "model.safetensors.index.json",
                             "modeling_kimi_k25.py", "tiktoken.model", "tokenizer_config.json"] + SHARDS)
    manifest = json.loads((final / ".manifest.json").read_text())
    for rel, rec in manifest["files"].items():
        st = os.stat(str(final / rel))
        assert rec == {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "inode": st.st_ino,
                       "sha256": hashlib.sha256((source / rel).read_bytes()).hexdigest()}
    assert manifest["verified"] is True and manifest["shards"] == 3


def test_rerun_is_a_stat_only_noop(source, tmp_path, module_runner, monkeypatch):
    module_runner(model_stage, args(source, tmp_path))

    def no_hashing(*a, **k):
        raise AssertionError("a no-op run must not read file contents")

    for where, name in ((model_sources, "copy_and_hash"), (model_sources, "hash_file"), (durable_files, "hash_prefix"),
                        (model_verify, "verify_shard"), (model_staging, "verify_shard")):
        monkeypatch.setattr(where, name, no_hashing)
    kind, result = module_runner(model_stage, args(source, tmp_path))
    assert kind == "exit", result
    assert result["changed"] is False and result["copied_bytes"] == 0 and result["verified"] is True
    assert result["shards"] == 3


def test_check_mode_touches_nothing(source, tmp_path, module_runner):
    kind, result = module_runner(model_stage, args(source, tmp_path), check_mode=True)
    assert kind == "exit", result
    assert result["changed"] is True
    assert result["copied_bytes"] == result["total_bytes"]
    assert any(a.startswith("copy 9 file(s)") for a in result["actions"])
    assert not (tmp_path / "store").exists()


def test_verification_failures_listed_together_and_current_untouched(source, tmp_path, module_runner):
    module_runner(model_stage, args(source, tmp_path))  # r1 is current
    shard2 = source / SHARDS[1]
    shard2.write_bytes(shard2.read_bytes()[:-100])
    (source / "config.json").write_text("")
    (source / "tokenizer_config.json").write_text("{not json")
    kind, result = module_runner(model_stage, args(source, tmp_path, revision="r2"))
    assert kind == "fail"
    partial = tmp_path / "store" / "Kimi-K2.5" / "r2.partial"
    problems = result["problems"]
    assert problems[0].startswith("verification of %s failed" % partial)
    assert any(p.startswith(str(partial / SHARDS[1]) + ":") and "truncated by 100 bytes" in p for p in problems)
    assert any(p.startswith(str(partial / "config.json") + ": file is empty") for p in problems)
    assert any(p.startswith(str(partial / "tokenizer_config.json") + ": not valid JSON") for p in problems)
    assert os.readlink(str(tmp_path / "store" / "Kimi-K2.5" / "current")) == "r1"
    assert not (tmp_path / "store" / "Kimi-K2.5" / "r2").exists()
    journal = json.loads((partial / ".staging.json").read_text())
    assert SHARDS[1] not in journal["files"] and SHARDS[0] in journal["files"]


def test_index_tensor_missing_from_shard(source, tmp_path, module_runner):
    index = json.loads((source / "model.safetensors.index.json").read_text())
    index["weight_map"]["model.layers.9.extra"] = SHARDS[2]
    (source / "model.safetensors.index.json").write_text(json.dumps(index))
    kind, result = module_runner(model_stage, args(source, tmp_path))
    assert kind == "fail"
    assert "1 tensor(s) that model.safetensors.index.json assigns to this shard are not in its header, e.g. " \
           "model.layers.9.extra" in result["msg"]


def test_missing_shards_fail_before_copying(source, tmp_path, module_runner):
    os.unlink(str(source / SHARDS[0]))
    os.unlink(str(source / SHARDS[2]))
    kind, result = module_runner(model_stage, args(source, tmp_path))
    assert kind == "fail"
    assert "2 shard(s) named in model.safetensors.index.json are missing from %s: %s, %s" % (
        source, SHARDS[0], SHARDS[2]) in result["msg"]
    assert not (tmp_path / "store").exists()


def test_not_enough_space_gives_both_numbers(source, tmp_path, module_runner, monkeypatch):
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(model_store.shutil, "disk_usage", lambda p: usage(10 ** 12, 10 ** 12, 1000))
    kind, result = module_runner(model_stage, args(source, tmp_path))
    assert kind == "fail"
    assert "not enough free space in %s: need 0.0 GB" % (tmp_path / "store") in result["msg"]
    assert "0.0 GB free" in result["msg"]


def test_space_check_in_gb(source, tmp_path, monkeypatch):
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(model_store.shutil, "disk_usage", lambda p: usage(0, 0, 100 * 10 ** 9))
    monkeypatch.setattr(model_sources.PathSource, "plan", lambda self: {
        "index": {"shards": ["a"], "total_size": None, "tensors_by_shard": {}}, "files": ["a"],
        "sizes": {"a": 547 * 10 ** 9}, "skipped": [], "sha256": {}})
    with pytest.raises(model_store.StageError) as err:
        model_staging.stage(FakeModule(args(source, tmp_path, link_mode="copy"), check_mode=True))
    assert "need 574.4 GB (547.0 GB still to copy + 5%), 100.0 GB free" in str(err.value)


def test_interrupted_copy_resumes(source, tmp_path, module_runner, monkeypatch):
    real = model_sources.copy_and_hash
    calls = []

    def flaky(src, dst, *a, **kw):
        calls.append(src)
        if src.endswith(SHARDS[1]):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(src, dst, *a, **kw)

    monkeypatch.setattr(model_sources, "copy_and_hash", flaky)
    kind, result = module_runner(model_stage, args(source, tmp_path, parallel=1))
    assert kind == "fail" and "%s: disk full while writing it" % SHARDS[1] in result["msg"]
    assert not (tmp_path / "store" / "Kimi-K2.5" / "current").exists()
    monkeypatch.setattr(model_sources, "copy_and_hash", real)
    kind, result = module_runner(model_stage, args(source, tmp_path))
    assert kind == "exit", result
    assert result["resumed_files"] >= 2
    assert 0 < result["copied_bytes"] < result["total_bytes"]
    assert result["verified"] is True


def test_hardlink_mode_shares_inodes(source, tmp_path, module_runner):
    kind, result = module_runner(model_stage, args(source, tmp_path, link_mode="hardlink"))
    assert kind == "exit", result
    assert result["copied_bytes"] == 0
    final = tmp_path / "store" / "Kimi-K2.5" / "r1"
    assert os.stat(str(final / SHARDS[0])).st_ino == os.stat(str(source / SHARDS[0])).st_ino


def test_changed_staged_file_is_copied_again_and_the_rest_kept(source, tmp_path, module_runner):
    module_runner(model_stage, args(source, tmp_path))
    final = tmp_path / "store" / "Kimi-K2.5" / "r1"
    kept = os.stat(str(final / SHARDS[0])).st_ino
    good = (final / "config.json").read_bytes()
    with open(str(final / "config.json"), "a") as handle:
        handle.write(" ")
    kind, result = module_runner(model_stage, args(source, tmp_path))
    assert kind == "exit", result
    assert result["changed"] is True and result["repaired"] == ["config.json"]
    assert "config.json (size, mtime_ns changed)" in result["actions"][0]
    assert result["copied_bytes"] == len(good)
    assert (final / "config.json").read_bytes() == good
    assert os.stat(str(final / SHARDS[0])).st_ino == kept
    kind, result = module_runner(model_stage, args(source, tmp_path))
    assert result["changed"] is False and result["copied_bytes"] == 0


def test_staged_file_whose_source_changed_is_refused(source, tmp_path, module_runner):
    module_runner(model_stage, args(source, tmp_path))
    final = tmp_path / "store" / "Kimi-K2.5" / "r1"
    (final / "config.json").write_text("{}")
    (source / "config.json").write_text(json.dumps({"architectures": ["Other"]}))
    kind, result = module_runner(model_stage, args(source, tmp_path))
    assert kind == "fail"
    assert "config.json: the source now has different bytes" in result["msg"]
    assert "new revision label" in result["msg"]
    assert (final / "config.json").read_text() == "{}"


def test_new_revision_flips_current_and_keeps_old(source, tmp_path, module_runner):
    module_runner(model_stage, args(source, tmp_path))
    kind, result = module_runner(model_stage, args(source, tmp_path, revision="r2"))
    assert kind == "exit" and result["changed"] is True
    model_dir = tmp_path / "store" / "Kimi-K2.5"
    assert os.readlink(str(model_dir / "current")) == "r2"
    assert (model_dir / "r1" / ".manifest.json").exists()
    # flipping back to a staged revision is a stat-only change of the symlink
    kind, result = module_runner(model_stage, args(source, tmp_path, revision="r1"))
    assert result["changed"] is True and result["copied_bytes"] == 0
    assert os.readlink(str(model_dir / "current")) == "r1"


def test_current_as_directory_is_refused(source, tmp_path, module_runner):
    (tmp_path / "store" / "Kimi-K2.5" / "current").mkdir(parents=True)
    kind, result = module_runner(model_stage, args(source, tmp_path))
    assert kind == "fail" and "is not a symlink" in result["msg"]
    assert (tmp_path / "store" / "Kimi-K2.5" / "r1").is_dir()  # staged, verified, only activation refused


@pytest.mark.parametrize("bad", ["../x", ".hidden", "a/b", "current", "r1.partial"])
def test_bad_revision_labels(source, tmp_path, module_runner, bad):
    kind, result = module_runner(model_stage, args(source, tmp_path, revision=bad))
    assert kind == "fail" and "revision" in result["msg"]


def test_journal_records_a_file_only_after_the_filesystem_was_synced(tmp_path):
    now, synced = [0.0], []
    path = tmp_path / ".staging.json"
    journal = model_store.Journal(str(path), {"files": {}}, interval=30.0, clock=lambda: now[0],
                                  sync=lambda paths: synced.append((paths, path.exists())))
    journal.add("a.safetensors", {"sha256": "1"})
    now[0] = 10.0
    journal.add("b.safetensors", {"sha256": "2"})
    assert not synced and not path.exists()  # finished but not durable yet: not recorded
    now[0] = 31.0
    journal.add("c.safetensors", {"sha256": "3"})  # the interval passed: one sync for the three files
    assert synced == [([str(tmp_path / n) for n in ("a.safetensors", "b.safetensors", "c.safetensors")], False)]
    assert sorted(json.loads(path.read_text())["files"]) == ["a.safetensors", "b.safetensors", "c.safetensors"]
    journal.add("d.safetensors", {"sha256": "4"})
    assert journal.commit() == 1 and journal.commit() == 0  # nothing pending: no sync
    assert len(synced) == 2 and "d.safetensors" in json.loads(path.read_text())["files"]


def test_activate_false_stages_and_verifies_and_leaves_current_alone(source, tmp_path, module_runner):
    """The rolling redeploy prepares a new revision while the node serves the old one: current must not move (a
    server that restarts on its own would load the new revision before its switch)."""
    def run(params):
        kind, result = module_runner(model_stage, params)
        assert kind == "exit", result
        return result

    r1 = run(args(source, tmp_path))
    assert r1["activated"] and os.readlink(r1["current"]) == "r1"
    r2 = run(args(source, tmp_path, revision="r2", activate=False))
    assert r2["changed"] and r2["verified"] and not r2["activated"]
    assert os.path.isfile(os.path.join(r2["path"], ".manifest.json"))
    assert os.readlink(r2["current"]) == "r1"
    again = run(args(source, tmp_path, revision="r2", activate=False))  # a re-run of the prepare: nothing to do
    assert not again["changed"] and not again["activated"] and os.readlink(again["current"]) == "r1"
    switched = run(args(source, tmp_path, revision="r2"))  # the switch (activate true): only the link moves
    assert switched["changed"] and switched["activated"] and switched["copied_bytes"] == 0
    assert os.readlink(switched["current"]) == "r2"


def test_lower_priority_raises_niceness_and_sets_the_idle_io_class():
    """In a child process (niceness cannot be lowered back): nice +5 and, on Linux x86_64/aarch64, the idle I/O
    class, read back with ioprio_get."""
    import subprocess
    import sys
    code = (
        "import ctypes, os, platform, sys\n"
        "sys.path.insert(0, %r)\n"
        "from _priority import IOPRIO_SET, lower_priority\n"
        "before = os.nice(0)\n"
        "r = lower_priority(5)\n"
        "get = {'x86_64': 252, 'aarch64': 31}.get(platform.machine())\n"
        "cls = ctypes.CDLL(None).syscall(get, 1, 0) >> 13 if get else None\n"
        "print(before, r['nice'], os.nice(0), r['io_class'], cls)\n"
    ) % os.path.join(os.path.dirname(os.path.abspath(model_stage.__file__)), "..", "module_utils", "host")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    before, nice, now, io_class, cls = out.stdout.split()
    assert int(nice) == int(now) == int(before) + 5, out
    if cls != "None":
        assert io_class == "idle" and int(cls) == 3


def test_diff_mode_shows_the_revision_and_current_before_and_after(source, tmp_path, module_runner):
    store = tmp_path / "store" / "Kimi-K2.5"
    predicted = module_runner(model_stage, args(source, tmp_path, _ansible_diff=True), check_mode=True)[1]
    kind, result = module_runner(model_stage, args(source, tmp_path, _ansible_diff=True))
    assert kind == "exit", result
    total = result["total_bytes"]
    assert result["diff"] == {
        "before_header": str(store / "r1"), "after_header": str(store / "r1"),
        "before": "%s: absent\n%s: absent\n" % (store / "r1", store / "current"),
        "after": "%s: 3 shard(s), %d bytes, verified\n%s -> r1\n" % (store / "r1", total, store / "current")}
    assert predicted["diff"] == result["diff"]
    # a no-op has no diff; pointing current back at an older revision shows only the link moving
    assert "diff" not in module_runner(model_stage, args(source, tmp_path, _ansible_diff=True))[1]
    module_runner(model_stage, args(source, tmp_path, revision="r2"))
    diff = module_runner(model_stage, args(source, tmp_path, _ansible_diff=True))[1]["diff"]
    assert diff["before"].splitlines()[1] == "%s -> r2" % (store / "current")
    assert diff["after"].splitlines()[1] == "%s -> r1" % (store / "current")
    assert "diff" not in module_runner(model_stage, args(source, tmp_path))[1]


@pytest.fixture
def hardened_umask():
    """The process umask of a CIS-hardened root (077): without explicit modes every staged file would be 0600."""
    old = os.umask(0o077)
    yield
    os.umask(old)


def _closed(root):
    """Paths under ``root`` (and root) the service user (not owner, not in root's group) cannot read or traverse."""
    out = []
    for dirpath, dirnames, filenames in os.walk(str(root)):
        for path in [dirpath] + [os.path.join(dirpath, n) for n in filenames]:
            st = os.lstat(path)
            want = 0o555 if os.path.isdir(path) and not os.path.islink(path) else 0o444
            if not os.path.islink(path) and st.st_mode & want != want:
                out.append("%s %o" % (os.path.relpath(path, str(root)), st.st_mode & 0o777))
    return out


def test_a_hardened_umask_still_stages_files_the_service_user_can_read(source, tmp_path, module_runner,
                                                                       hardened_umask):
    kind, result = module_runner(model_stage, args(source, tmp_path))
    assert kind == "exit", result
    model_dir = tmp_path / "store" / "Kimi-K2.5"
    final = model_dir / "r1"
    # the umask was in force: a file made now is owner-only
    (tmp_path / "probe").write_text("x")
    assert os.stat(str(tmp_path / "probe")).st_mode & 0o777 == 0o600
    # yet every staged file is 0644 and every directory (the model's and the revision's) 0755: read bits only added
    # (the progress file beside the revision is the operator's, root's to tail)
    assert _closed(final) == []
    assert os.stat(str(final / SHARDS[0])).st_mode & 0o777 == 0o644
    assert os.stat(str(final)).st_mode & 0o777 == 0o755
    assert os.stat(str(model_dir)).st_mode & 0o777 == 0o755
    # and a re-run under the same umask finds nothing to change (the manifest too was made readable)
    kind, result = module_runner(model_stage, args(source, tmp_path))
    assert kind == "exit" and result["changed"] is False, result


def test_a_revision_staged_owner_only_is_opened_up_and_check_mode_only_says_so(source, tmp_path, module_runner):
    """A revision staged by a release without explicit modes under umask 077 (or chmodded by hand): the next run gives
    it the read bits and reports the change; check mode reports it and changes nothing."""
    module_runner(model_stage, args(source, tmp_path))
    model_dir = tmp_path / "store" / "Kimi-K2.5"
    final = model_dir / "r1"
    for path in [model_dir, final]:
        os.chmod(str(path), 0o700)
    for name in os.listdir(str(final)):
        os.chmod(str(final / name), 0o600)
    closed = _closed(final)
    assert len(closed) > 5
    kind, result = module_runner(model_stage, args(source, tmp_path), check_mode=True)
    assert kind == "exit" and result["changed"] is True, result
    assert any("read permission for the service user" in a for a in result["actions"]), result["actions"]
    assert _closed(final) == closed and os.stat(str(model_dir)).st_mode & 0o777 == 0o700
    kind, result = module_runner(model_stage, args(source, tmp_path))
    assert kind == "exit" and result["changed"] is True, result
    assert _closed(final) == [] and os.stat(str(model_dir)).st_mode & 0o777 == 0o755
    # owner bits kept, nothing gained a write bit
    assert os.stat(str(final / "config.json")).st_mode & 0o777 == 0o644
    # the manifest's stat comparison (size, mtime, inode) still holds: nothing was fetched again
    assert result["copied_bytes"] == 0 and "repaired" not in result
    kind, result = module_runner(model_stage, args(source, tmp_path))
    assert result["changed"] is False, result


def test_a_repair_under_a_hardened_umask_leaves_the_revision_readable(source, tmp_path, module_runner,
                                                                      hardened_umask):
    module_runner(model_stage, args(source, tmp_path))
    final = tmp_path / "store" / "Kimi-K2.5" / "r1"
    with open(str(final / "config.json"), "a") as handle:
        handle.write(" ")
    kind, result = module_runner(model_stage, args(source, tmp_path))
    assert kind == "exit" and result["repaired"] == ["config.json"], result
    assert _closed(final) == []
    kind, result = module_runner(model_stage, args(source, tmp_path))
    assert result["changed"] is False, result
