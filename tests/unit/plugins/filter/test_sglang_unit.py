"""Unit filters (timeouts, multi-node, recovery, ExecStart quoting) and the systemd-analyze verify wrapper of
roles/sglang_service."""

import pathlib
import shutil
import subprocess

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.sglang.plugins.filter import sglang_unit as u

ROOT = pathlib.Path(__file__).resolve().parents[4]
VERIFY = ROOT / "roles" / "sglang_service" / "files" / "sglang-verify-unit"


def test_timeout_start_from_model_size():
    # Kimi-K2.5 547 GB at 200 MB/s = 2735 s + 600 s = 3335 s -> 3360 s (whole minutes).
    assert u.sglang_timeout_start_sec(547 * 10 ** 9) == "3360"
    assert u.sglang_timeout_start_sec(0) == "infinity"        # no index yet (check mode on a fresh host)
    assert u.sglang_timeout_start_sec(None) == "infinity"
    assert u.sglang_timeout_start_sec(547 * 10 ** 9, "infinity") == "infinity"
    assert u.sglang_timeout_start_sec(547 * 10 ** 9, 900) == "900"
    with pytest.raises(AnsibleFilterError, match="auto, infinity or a positive number"):
        u.sglang_timeout_start_sec(1, "10min")


def test_stop_timeout_must_exceed_drain():
    assert u.sglang_unit_errors(180, 120) == []
    errors = u.sglang_unit_errors(120, 120, "soon")
    assert len(errors) == 2
    assert errors[0].startswith("TimeoutStopSec 120 s must exceed the drain time 120 s")
    assert "above 120 (e.g. 180)" in errors[0]
    assert "TimeoutStartSec must be auto" in errors[1]


def test_single_node_renders_nothing():
    assert u.sglang_multinode_options([], "a") == {}
    assert u.sglang_multinode_options(["a"], "a") == {}


def test_multinode_rank_and_init_address_per_host():
    nodes = ["gpu-01", "gpu-02"]
    assert u.sglang_multinode_options(nodes, "gpu-01", "", 50000, 16, "ens1f0") == {
        "nnodes": 2, "node-rank": 0, "dist-init-addr": "gpu-01:50000"}
    assert u.sglang_multinode_options(nodes, "gpu-02", "10.0.0.1", 5000, 16, "ens1f0") == {
        "nnodes": 2, "node-rank": 1, "dist-init-addr": "10.0.0.1:5000"}


def test_multinode_problems_listed_together():
    with pytest.raises(AnsibleFilterError) as err:
        u.sglang_multinode_options(["a", "b", "b"], "c", "", 70000, 8, "")
    text = str(err.value)
    for part in ("lists b more than once", "c is not in sglang_service_nodes", "port 70000 must be 1-65535",
                 "--tp-size 8 does not split evenly over 3 nodes", "needs sglang_service_socket_ifname"):
        assert part in text


def test_multinode_argv_parses_against_the_snapshot():
    from ansible_collections.blackwell.sglang.plugins.filter import sglang_argv
    opts = u.sglang_multinode_options(["a", "b"], "b", "", 50000, 16, "eth0")
    # with the tp size the options come with (16 ranks over 2 nodes: SGLang asserts tp divisible by nodes)
    from conftest import SGLANG_VERSION
    assert sglang_argv.sglang_argv({"tp-size": 16, **opts}, SGLANG_VERSION) == ["--tp-size", "16", "--nnodes", "2", "--node-rank", "1",
                                                                "--dist-init-addr", "a:50000"]


GOOD_UNIT = """[Unit]
Description=t
[Service]
Type=simple
ExecStart=/bin/true "a b" 50%%
KillMode=mixed
TimeoutStartSec=3360
TimeoutStopSec=180
"""


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd-analyze not installed (Debian: systemd)")
def test_verify_wrapper_accepts_a_good_unit_and_refuses_a_bad_one(tmp_path):
    src = tmp_path / "tmpXYZ"  # what Ansible's validate hands over: no .service suffix
    src.write_text(GOOD_UNIT)
    ok = subprocess.run([str(VERIFY), "sglang-kimi.service", str(src)], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    src.write_text(GOOD_UNIT.replace("KillMode=mixed", "KillMode=sometimes").replace("/bin/true", "/nonexistent/py"))
    bad = subprocess.run([str(VERIFY), "sglang-kimi.service", str(src)], capture_output=True, text=True)
    print(bad.stderr)
    assert bad.returncode != 0
    assert "/nonexistent/py" in bad.stderr


def test_verify_wrapper_refuses_a_name_that_is_not_a_service(tmp_path):
    src = tmp_path / "u"
    src.write_text(GOOD_UNIT)
    result = subprocess.run([str(VERIFY), "sglang-kimi", str(src)], capture_output=True, text=True)
    assert result.returncode == 2 and "must end in .service" in result.stderr


def test_a_failed_unit_is_started_again_and_says_why():
    gave_up = u.sglang_unit_recovery({"ActiveState": "failed", "Result": "start-limit-hit", "NRestarts": "3"})
    assert gave_up["restarted"] and gave_up["why"] == (
        "the unit had failed (Result=start-limit-hit, 3 automatic restart(s), then systemd stopped restarting it: start "
        "limit hit); this run started it again")
    # systemd 252 after the start limit stopped its automatic restarts (measured in a sandbox node: kill -9 twice,
    # StartLimitBurst=2): Result is the last crash's, not start-limit-hit.
    gave_up_252 = u.sglang_unit_recovery({"ActiveState": "failed", "Result": "signal", "NRestarts": "2"})
    assert gave_up_252["why"] == (
        "the unit had failed (Result=signal, 2 automatic restart(s), then systemd stopped restarting it: start limit "
        "hit); this run started it again")
    crashed = u.sglang_unit_recovery({"ActiveState": "failed", "Result": "exit-code", "NRestarts": "0"})
    assert crashed["restarted"] and "Result=exit-code" in crashed["why"] and "start limit" not in crashed["why"]
    assert u.sglang_unit_recovery({"ActiveState": "active", "Result": "success"})["restarted"] is False
    assert u.sglang_unit_recovery({})["why"] is None  # a unit systemd does not know yet


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["/opt/x/python", "-m", "sglang.launch_server"], "/opt/x/python -m sglang.launch_server"),
        (["/p", "50%"], "/p 50%%"),
        (["/p", "a b"], '/p "a b"'),
        (["/p", 'say "hi"'], '/p "say \\"hi\\""'),
        (["/p", "C:\\dir"], '/p "C:\\\\dir"'),
        (["/p", "$HOME"], '/p "$$HOME"'),
        (["/p", '{"num_threads":16}'], '/p "{\\"num_threads\\":16}"'),
        (["/p", ""], '/p ""'),
    ],
)
def test_systemd_quote(argv, expected):
    assert u.systemd_quote(argv) == expected


def test_systemd_quote_refuses_relative_executable_and_empty_argv():
    with pytest.raises(AnsibleFilterError):
        u.systemd_quote(["python3", "-m", "x"])
    with pytest.raises(AnsibleFilterError):
        u.systemd_quote([])
