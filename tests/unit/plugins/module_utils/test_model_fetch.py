"""model_fetch: manifest parsing, progress lines, URL redaction."""

import os

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils.model_fetch import Progress, format_duration, parse_manifest, parse_sha256sums, redact_url

A, B = "a" * 64, "B" * 64


def test_sha256sums_text_and_binary_markers():
    text = "%s  model-00001-of-000064.safetensors\n%s *./config.json\n\n# comment\n" % (A, B)
    assert parse_sha256sums(text) == {"model-00001-of-000064.safetensors": A, "config.json": B.lower()}


def test_sha256sums_bad_lines_are_named():
    with pytest.raises(ValueError, match=r"SHA256SUMS: line\(s\) 2, 3 are not"):
        parse_sha256sums("%s  ok\nnot a line\n%s\n" % (A, A[:10]))


def test_json_manifest_carries_sizes():
    sums, sizes = parse_manifest(b'{"files": {"x.safetensors": {"sha256": "%s", "size": 12}, "c.json": "%s"}}' % (
        A.encode(), B.encode()))
    assert sums == {"x.safetensors": A, "c.json": B.lower()} and sizes == {"x.safetensors": 12}


def test_json_manifest_without_sha_is_refused():
    with pytest.raises(ValueError, match="no valid sha256 for x"):
        parse_manifest(b'{"files": {"x": {"size": 1}}}', "m.json")


def test_progress_line_matches_the_issue_format(tmp_path):
    now = [0.0]
    shards = ["model-%05d-of-000064.safetensors" % i for i in range(1, 65)]
    progress = Progress(shards, 547 * 10 ** 9, present_bytes=0, path=str(tmp_path / "p"), interval=5,
                        clock=lambda: now[0])
    for shard in shards[:12]:
        progress.file_done(shard)
    now[0] = 75.0
    progress.add(int(143.2 * 10 ** 9) - 10 ** 8)
    progress.add(10 ** 8)
    assert progress.line() == "staged 12/64 shards, 143.2/547.0 GB, 1.9 GB/s, ETA 4m"
    progress.maybe_emit(force=True)
    assert (tmp_path / "p").read_text().splitlines()[-1].endswith("staged 12/64 shards, 143.2/547.0 GB, 1.9 GB/s, ETA 4m")


def test_progress_is_throttled_to_the_interval():
    now = [0.0]
    progress = Progress(["s"], 100, interval=10, clock=lambda: now[0])
    for t in range(0, 30):
        now[0] = float(t)
        progress.add(1)
    assert len(progress.lines) == 3


@pytest.mark.parametrize("seconds,text", [(None, "?"), (0, "0s"), (59, "59s"), (61, "2m"), (3600, "1h00m"), (7380, "2h03m")])
def test_format_duration(seconds, text):
    assert format_duration(seconds) == text


def test_redact_url_drops_credentials():
    assert redact_url("https://user:pw@mirror.example/models/K") == "https://mirror.example/models/K"


def test_pump_hashes_copies_and_asks_for_writeback_every_64_mib(tmp_path, monkeypatch):
    import hashlib
    import io

    from ansible_collections.blackwell.sglang.plugins.module_utils import model_fetch

    kicks = []
    monkeypatch.setattr(model_fetch, "start_writeback", lambda fd: kicks.append(fd))
    data = bytes(range(256)) * (4096 * 130)  # 130 MiB
    digest = hashlib.sha256()
    with open(str(tmp_path / "out"), "wb", buffering=0) as out:
        assert model_fetch.pump(io.BytesIO(data), out, digest) == len(data)
        fileno = out.fileno()
    assert digest.hexdigest() == hashlib.sha256(data).hexdigest()
    assert (tmp_path / "out").read_bytes() == data
    assert kicks == [fileno, fileno, fileno]  # at 64 and 128 MiB, then the last 2 MiB; the caller syncs


def test_writeback_hint_and_batch_sync_work_on_this_kernel(tmp_path, monkeypatch):
    from ansible_collections.blackwell.sglang.plugins.module_utils import model_fetch

    paths = [str(tmp_path / ("f%d" % i)) for i in range(3)]
    for path in paths:
        with open(path, "wb") as handle:
            handle.write(b"x" * 4096)
            assert model_fetch.start_writeback(handle.fileno()) is True
    synced = []
    real = model_fetch._sync_one
    monkeypatch.setattr(model_fetch, "_sync_one", lambda p, data_only=True: synced.append((p, data_only)) or
                        real(p, data_only))
    model_fetch.sync_files(paths)
    assert sorted(synced) == sorted([(p, True) for p in paths] + [(str(tmp_path), False)])  # files, then their dir
    with pytest.raises(OSError, match="absent"):
        model_fetch.sync_files([str(tmp_path / "absent")])


def test_tree_bytes_counts_regular_files_only(tmp_path):
    """One count for model_stage's progress and host_capacity's partial_bytes: files, not symlinks, 0 when absent."""
    from ansible_collections.blackwell.sglang.plugins.module_utils.model_fetch import tree_bytes

    (tmp_path / "d" / "sub").mkdir(parents=True)
    (tmp_path / "d" / "a.safetensors").write_bytes(b"x" * 1000)
    (tmp_path / "d" / "sub" / "b.json").write_bytes(b"y" * 24)
    os.symlink(str(tmp_path / "d" / "a.safetensors"), str(tmp_path / "d" / "link"))
    assert tree_bytes(str(tmp_path / "d")) == 1024
    assert tree_bytes(str(tmp_path / "missing")) == 0
