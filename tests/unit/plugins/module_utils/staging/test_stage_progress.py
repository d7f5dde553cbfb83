"""stage_progress: progress lines and their throttling."""

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils.staging.stage_progress import Progress, format_duration


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
