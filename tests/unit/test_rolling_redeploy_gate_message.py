"""benchmarks/rolling_redeploy.py's gate case reads what the gate said from the play's output: the default callback
wraps a long message over lines and quotes it, and the last of several messages is the one of the run."""

import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("rolling_redeploy", ROOT / "benchmarks" / "rolling_redeploy.py")
rolling_redeploy = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rolling_redeploy)

OUT = """TASK [blackwell.sglang.generation : Say what the gate found] *******************
ok: [sglang-fleet-gpu-0] =>
    msg: 'no benchmark record of the previous generation at short_chat c8: the gate recorded
        this one (487.0 output tokens/s, p99 TTFT 206.8 ms) and passed'

TASK [blackwell.sglang.generation : Refuse a generation slower than the one before (the node is rolled back)] ***
skipping: [sglang-fleet-gpu-0]
"""

FAILED = """    msg: 'benchmark gate failed at short_chat c8: output tokens/s 686.4 -> 530.2 (-22.8%),
        p99 TTFT 203.5 -> 264.5 ms (+30.0%)'
[ERROR]: Task failed: Action failed: Rolling redeploy stopped at sglang-fleet-gpu-0: task "Refuse a generation slower"
failed: benchmark gate failed at short_chat c8: output tokens/s 686.4 -> 530.2 (-22.8%). sglang-fleet-gpu-0 is back

NO MORE HOSTS LEFT ***
"""


def test_the_gate_message_is_read_whole_and_on_one_line():
    assert rolling_redeploy.gate_message(OUT) == (
        "no benchmark record of the previous generation at short_chat c8: the gate recorded this one (487.0 output "
        "tokens/s, p99 TTFT 206.8 ms) and passed")
    assert rolling_redeploy.gate_message(OUT + FAILED) == (
        "benchmark gate failed at short_chat c8: output tokens/s 686.4 -> 530.2 (-22.8%). sglang-fleet-gpu-0 is back")
    assert rolling_redeploy.gate_message("PLAY RECAP") == ""
