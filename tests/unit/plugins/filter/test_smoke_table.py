"""smoke filters: the end-of-play table across hosts and the smoke summary."""
from ansible_collections.blackwell.sglang.plugins.filter.smoke import smoke_health_table, smoke_outcome, task_outcome


def test_table_has_a_row_per_host_fixed_width():
    hostvars = {
        "gpu-node-1": {"smoke_health_report": {
            "verdict": "ready", "phase": "ready", "progress": {"i": 64, "n": 64}, "elapsed_s": 612.4,
            "exit_status": None, "error": None, "smoke_summary": "passed 6/6"}},
        "gpu-node-2": {"smoke_health_report": {
            "verdict": "crashed", "phase": "cuda_graph_capture", "progress": {"i": 64, "n": 64}, "elapsed_s": 655.0,
            "exit_status": {"text": "killed by SIGKILL (9)"}, "smoke_summary": "not run",
            "error": "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 2.00 GiB."}},
        "gpu-node-3": {},
    }
    lines = smoke_health_table(["gpu-node-1", "gpu-node-2", "gpu-node-3"], hostvars).split("\n")
    assert lines[0].split() == ["host", "verdict", "phase", "progress", "elapsed", "exit", "smoke", "error"]
    assert set(lines[1]) == {"-"}
    assert lines[2].split()[:5] == ["gpu-node-1", "ready", "ready", "64/64", "612.4"]
    assert lines[3].index("crashed") == lines[2].index("ready")  # fixed width: columns line up
    assert "killed by SIGKILL (9)" in lines[3] and "Exception: Capture cuda graph failed" in lines[3]
    assert lines[4].startswith("gpu-node-3") and "no report" in lines[4]


def test_long_cells_are_cut():
    hostvars = {"h": {"smoke_health_report": {"verdict": "crashed", "phase": "a" * 40}}}
    row = smoke_health_table(["h"], hostvars).split("\n")[2]
    assert "a" * 17 + "~" in row and "a" * 18 not in row


def test_smoke_outcome():
    assert smoke_outcome({}) == "not run"
    assert smoke_outcome({"checks": [{"name": "chat", "status": "skipped"}]}) == "skipped"
    assert smoke_outcome({"failed": True, "failed_checks": ["tool_calls", "tool_calls_stream"]}) == \
        "FAILED tool_calls,tool_calls_stream"
    assert smoke_outcome({"checks": [{"name": "chat", "status": "passed"}] * 6, "failed_checks": []}) == "passed 6/6"
    assert task_outcome({"failed": True}) == "failed"


def test_wrong_or_degenerate_answers_are_unhealthy_answers():
    """The server serves, but its model's answers are wrong (a golden prompt) or degenerate (repetition): not the
    same as a check that could not run."""
    degenerate = {"name": "chat", "status": "failed", "detail": "degenerate output in content: the output repeats"}
    wrong = {"name": "answers", "status": "failed", "detail": "wrong answers: arithmetic: ..."}
    ok = {"name": "tool_calls", "status": "passed", "detail": "2 calls"}
    assert smoke_outcome({"checks": [degenerate, ok], "failed_checks": ["chat"]}) == "unhealthy answers: FAILED chat"
    assert smoke_outcome({"checks": [ok, wrong], "failed_checks": ["answers"]}) == \
        "unhealthy answers: FAILED answers"
    markup = {"name": "chat", "status": "failed", "detail": "markup in content"}
    assert smoke_outcome({"checks": [markup], "failed_checks": ["chat"]}) == "FAILED chat"
