"""sglang_benchmark_chart draws a PNG (two panels, a legend) and writes it only when it differs."""

import pytest

from ansible_collections.blackwell.sglang.plugins.modules import sglang_benchmark_chart


SWEEP = [{"workload": "short_chat", "concurrency": c, "output_tokens_per_s": t, "ttft_p99_ms": f}
         for c, t, f in ((1, 61.0, 8.0), (8, 420.0, 30.0), (32, 1130.0, 110.0), (128, 1950.0, 440.0))]


def test_the_chart_is_a_png_written_once(tmp_path, module_runner):
    dest = tmp_path / "reports" / "bench.png"
    params = {"sweeps": [{"label": "baseline", "results": SWEEP}], "dest": str(dest)}
    kind, result = module_runner(sglang_benchmark_chart, params)
    assert kind == "exit" and result["changed"]
    assert dest.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and dest.stat().st_size > 10_000
    kind, again = module_runner(sglang_benchmark_chart, params)
    assert kind == "exit" and not again["changed"]  # same drawing, same bytes: no change


def test_check_mode_writes_nothing(tmp_path, module_runner):
    dest = tmp_path / "bench.png"
    kind, result = module_runner(sglang_benchmark_chart, {"sweeps": [{"label": "a", "results": SWEEP}],
                                                          "dest": str(dest)}, check_mode=True)
    assert kind == "exit" and result["changed"] and not dest.exists()


def test_matplotlib_is_a_controller_requirement():
    import pathlib
    root = pathlib.Path(__file__).resolve().parents[4]
    assert "matplotlib==" in (root / "requirements.txt").read_text()
