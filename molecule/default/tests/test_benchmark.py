"""After side_effect's short serving benchmark (playbooks/benchmark.yml): SGLang's own benchmark ran from the release
against the gateway, every run completed, and the figures are kept with the live generation and on the controller."""

import json
import os
from pathlib import Path

import testinfra.utils.ansible_runner

testinfra_hosts = [
    f"podman://{name}"
    for name in testinfra.utils.ansible_runner.AnsibleRunner(os.environ["MOLECULE_INVENTORY_FILE"]).get_hosts(
        "gpu_nodes"
    )
]
REPORTS = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", ".")) / "reports"


def test_the_figures_are_kept_with_the_live_generation(host):
    record = host.file("/var/lib/sglang-generations/current/benchmark-ci.json")
    assert record.is_file
    data = json.loads(record.content_string)
    assert data["label"] == "ci" and data["base_url"].startswith("http") and data["output_tokens"] == 16
    runs = [(r["workload"], r["concurrency"]) for r in data["results"]]
    assert runs == [("short_chat", 1), ("short_chat", 8), ("multi_turn", 1), ("multi_turn", 8)]
    for r in data["results"]:
        assert r["failed"] == 0 and r["output_tokens_per_s"] > 0 and r["ttft_p99_ms"] >= r["ttft_p50_ms"] > 0, r
        assert r["accept_length"] is None  # the scenario's node does not speculate
    # multi-turn: 4 turns a conversation, every turn answered
    assert data["results"][3]["completed"] == data["results"][3]["requests"] * 4


def test_the_sweep_left_no_scratch_and_the_workloads_are_on_the_node(host):
    listing = host.run("ls /var/lib/sglang-benchmark").stdout.split()
    assert "short_chat.jsonl" in listing and "multi_turn.json" in listing
    assert not [name for name in listing if name.startswith("sweep-")]


def test_the_controller_has_the_figures_and_a_chart(host):
    name = host.backend.name  # the container, named as the inventory names the node
    figures = json.loads((REPORTS / f"benchmark-{name}-ci.json").read_text())
    assert figures["host"] == name and len(figures["results"]) == 4
    assert (REPORTS / f"benchmark-{name}-ci.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
