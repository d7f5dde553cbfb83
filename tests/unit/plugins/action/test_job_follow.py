"""job_follow: any number of rounds, progress at default verbosity, the job's own result (a real playbook on the
local connection; the sandbox runs it over podman in molecule/staging)."""
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT / "benchmarks"))
import follow_rounds  # noqa: E402
from ansible_collections.blackwell.sglang.plugins.action import job_follow  # noqa: E402


def test_a_round_reads_the_async_results_file_and_the_last_progress_line(tmp_path):
    results, progress = tmp_path / "job", tmp_path / "progress"
    results.write_text('{"started": 1, "finished": 0, "ansible_job_id": "j1"}')
    progress.write_text("staged 1/64\nstaged 2/64\n\n")
    out = subprocess.run(["sh", "-c", job_follow.round_command(str(results), str(progress), 0.2)],
                         capture_output=True, text=True).stdout
    assert job_follow.parse_round(out) == (None, "staged 2/64")
    results.write_text('{"changed": true, "shards": 64}')
    out = subprocess.run(["sh", "-c", job_follow.round_command(str(results), None, 5)], capture_output=True,
                         text=True, timeout=3).stdout
    assert job_follow.parse_round(out) == ({"changed": True, "shards": 64}, "")


def test_four_hundred_rounds_do_not_recurse_and_print_progress_at_default_verbosity(tmp_path):
    """A self-including task file dies at ~300 rounds; this follows a 15 s job with no interval: hundreds of rounds
    (about 90 a second on an idle 2-core machine, 60 under load; benchmarks/follow_rounds.py measures the rate)."""
    rc, rounds, _wall, output = follow_rounds.run(15, 0, str(tmp_path))
    assert rc == 0, output[-3000:]
    assert rounds >= 400, rounds
    assert "RecursionError" not in output
    assert "localhost bench: step 1" in output and "localhost bench: step 60" in output
    assert "rc=0 stdout=done" in output
