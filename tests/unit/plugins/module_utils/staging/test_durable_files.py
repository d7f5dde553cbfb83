"""durable_files: one-pass copy and hash, writeback hints, batched durability, tree_bytes."""

import os

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils.staging import durable_files


def test_pump_hashes_copies_and_asks_for_writeback_every_64_mib(tmp_path, monkeypatch):
    import hashlib
    import io

    
    kicks = []
    monkeypatch.setattr(durable_files, "start_writeback", lambda fd: kicks.append(fd))
    data = bytes(range(256)) * (4096 * 130)  # 130 MiB
    digest = hashlib.sha256()
    with open(str(tmp_path / "out"), "wb", buffering=0) as out:
        assert durable_files.pump(io.BytesIO(data), out, digest) == len(data)
        fileno = out.fileno()
    assert digest.hexdigest() == hashlib.sha256(data).hexdigest()
    assert (tmp_path / "out").read_bytes() == data
    assert kicks == [fileno, fileno, fileno]  # at 64 and 128 MiB, then the last 2 MiB; the caller syncs


def test_writeback_hint_and_batch_sync_work_on_this_kernel(tmp_path, monkeypatch):
    
    paths = [str(tmp_path / ("f%d" % i)) for i in range(3)]
    for path in paths:
        with open(path, "wb") as handle:
            handle.write(b"x" * 4096)
            assert durable_files.start_writeback(handle.fileno()) is True
    synced = []
    real = durable_files._sync_one
    monkeypatch.setattr(durable_files, "_sync_one", lambda p, data_only=True: synced.append((p, data_only)) or
                        real(p, data_only))
    durable_files.sync_files(paths)
    assert sorted(synced) == sorted([(p, True) for p in paths] + [(str(tmp_path), False)])  # files, then their dir
    with pytest.raises(OSError, match="absent"):
        durable_files.sync_files([str(tmp_path / "absent")])


def test_tree_bytes_counts_regular_files_only(tmp_path):
    """One count for model_stage's progress and host_capacity's partial_bytes: files, not symlinks, 0 when absent."""
    from ansible_collections.blackwell.sglang.plugins.module_utils.staging.durable_files import tree_bytes

    (tmp_path / "d" / "sub").mkdir(parents=True)
    (tmp_path / "d" / "a.safetensors").write_bytes(b"x" * 1000)
    (tmp_path / "d" / "sub" / "b.json").write_bytes(b"y" * 24)
    os.symlink(str(tmp_path / "d" / "a.safetensors"), str(tmp_path / "d" / "link"))
    assert tree_bytes(str(tmp_path / "d")) == 1024
    assert tree_bytes(str(tmp_path / "missing")) == 0
