"""Whole-site state after `deploy.yml` converged on a sandbox GPU node (issue 2 acceptance)."""

import json
import os

import testinfra.utils.ansible_runner

# podman:// runs each check with `podman exec` (testinfra has no backend for Ansible's podman connection).
testinfra_hosts = [
    f"podman://{name}"
    for name in testinfra.utils.ansible_runner.AnsibleRunner(os.environ["MOLECULE_INVENTORY_FILE"]).get_hosts(
        "gpu_nodes"
    )
]

UNIT = "sglang-kimi.service"


def test_unit_is_enabled_and_active(host):
    svc = host.service(UNIT)
    assert svc.is_enabled
    assert host.run(f"systemctl is-active {UNIT}").stdout.strip() == "active"


def test_health_is_200_from_inside_the_node(host):
    probe = host.run(
        "python3 -c 'import urllib.request,sys;"
        "print(urllib.request.urlopen(\"http://127.0.0.1:30000/health\", timeout=10).status)'"
    )
    assert probe.rc == 0, probe.stderr
    assert probe.stdout.strip() == "200"


def test_nvcc_reports_cuda_13_0_and_lib64_is_on_the_paths(host):
    out = host.run("/usr/local/cuda-13.0/bin/nvcc --version").stdout
    assert "release 13.0," in out
    profile = host.file("/etc/profile.d/cuda.sh").content_string
    assert "/usr/local/cuda-13.0/lib64" in profile
    assert "/usr/local/cuda-13.0/lib:" not in profile and not profile.rstrip().endswith("/lib")
    assert host.file("/etc/ld.so.conf.d/cuda-13.0.conf").content_string.strip() == "/usr/local/cuda-13.0/lib64"
    login_path = host.run("bash -lc 'command -v nvcc'").stdout.strip()
    assert login_path == "/usr/local/cuda-13.0/bin/nvcc"


def test_current_release_is_complete(host):
    current = host.file("/opt/sglang/current")
    assert current.is_symlink
    target = current.linked_to
    assert target.startswith("/opt/sglang/releases/")
    release = json.loads(host.file(f"{target}/release.json").content_string)
    assert release["fingerprint"] == os.path.basename(target)
    assert release["probe"]["sglang"] == "0.5.23"
    assert release["probe"]["flashinfer"].startswith("0.7.2")


def test_64_shards_are_staged_and_current(host):
    current = host.file("/srv/models/Kimi-K2.5/current")
    assert current.is_symlink and not current.linked_to.endswith(".partial")
    index = json.loads(host.file(f"{current.linked_to}/model.safetensors.index.json").content_string)
    shards = sorted(set(index["weight_map"].values()))
    assert len(shards) == 64
    staged = host.run(f"ls {current.linked_to} | grep -c '\\.safetensors$'").stdout.strip()
    assert staged == "64"
    manifest = json.loads(host.file(f"{current.linked_to}/.manifest.json").content_string)
    assert set(shards) <= set(manifest["files"])


def test_execstart_runs_exactly_the_rendered_argv(host):
    """Round trip through systemd's own command-line parser: the running process's argv."""
    expected = json.loads(host.file("/etc/sglang/kimi.argv.json").content_string)
    pid = host.run(f"systemctl show -p MainPID --value {UNIT}").stdout.strip()
    # the main process is the log wrapper (its shebang's python3), the server its only child
    wrapper = [c.decode() for c in host.file(f"/proc/{pid}/cmdline").content.split(b"\0")[:-1]]
    assert wrapper == ["/usr/bin/python3", "/usr/local/lib/sglang-service/sglang_log_lines.py", "--"] + expected
    child = host.run(f"pgrep -P {pid}").stdout.split()
    assert len(child) == 1
    cmdline = host.file(f"/proc/{child[0]}/cmdline").content.split(b"\0")[:-1]
    assert [c.decode() for c in cmdline] == expected
    for flag in ["--tp-size", "--trust-remote-code", "--tool-call-parser", "--reasoning-parser",
                 "--enable-hierarchical-cache"]:
        assert flag in expected
    assert expected[expected.index("--tool-call-parser") + 1] == "kimi_k2"


def test_env_file_is_root_only(host):
    env = host.file("/etc/sglang/kimi.env")
    assert env.user == "root" and env.group == "root" and env.mode == 0o600


def test_schedulers_run_one_per_tp_rank(host):
    titles = host.run("ps -eo args= | grep -c '^sglang::scheduler_TP'").stdout.strip()
    assert titles == "8"


def test_crash_at_shard_43_fails_the_unit_with_a_traceback_in_the_journal(host):
    """The simulator's fault "crash at shard 43 of 64" under real systemd: unit failed, cause in the journal."""
    unit = "sglang-fault-crash43"
    host.run(f"systemctl stop --no-block {unit} 2>/dev/null; systemctl reset-failed {unit} 2>/dev/null")
    start = host.run(
        f"systemd-run --unit {unit} -p Environment=SGLANG_SIM_FAULT=crash_at_shard:43 "
        "-p Environment=SGLANG_SIM_SHARD_DELAY_S=0.01 "
        "/opt/sglang/current/venv/bin/python -m sglang.launch_server "
        "--model-path /srv/models/Kimi-K2.5/current --tp-size 8 --trust-remote-code "
        "--tool-call-parser kimi_k2 --port 30001"
    )
    assert start.rc == 0, start.stderr
    # What systemd saw: the main process killed by SIGKILL (0.5.23's parent kills its own tree). The unit
    # then reads "failed", or "deactivating" in the sandbox: systemd in a container on this host's hybrid
    # cgroup v1 does not get empty-cgroup notifications, so it waits out the stop timeout.
    show = {}
    for _ in range(60):  # bounded: 30 s
        out = host.run(f"systemctl show -p ActiveState -p Result -p ExecMainCode -p ExecMainStatus {unit}").stdout
        show = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
        if show.get("Result") not in (None, "success"):
            break
        host.run("sleep 0.5")
    journal = host.run(f"journalctl -u {unit} -o cat --no-pager").stdout
    assert show.get("Result") == "signal" and show.get("ExecMainStatus") == "9", (show, journal[-2000:])
    assert show.get("ActiveState") in ("failed", "deactivating"), show
    assert "Traceback (most recent call last)" in journal
    assert "model-00043-of-000064.safetensors" in journal
    assert "Received sigquit from a child process" in journal


def _filters():
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[3] / "plugins" / "filter" / "sglang_unit.py"
    spec = importlib.util.spec_from_file_location("sglang_unit_filter", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_systemd_quote_round_trips_through_systemds_own_parser(host):
    """Values with %, $, spaces, quotes, backslashes, tabs and JSON reach the process unchanged."""
    args = ["50%", "%n", "a b", 'say "hi"', "it's", "C:\\dir\\", "$HOME", "${PATH}", "tab\there", "semi;colon", "",
            '{"enable_multithread_load":true,"num_threads":16}']
    argv = ["/usr/bin/python3", "-c",
            "import sys, json; open('/run/quote-roundtrip.json', 'w').write(json.dumps(sys.argv[1:]))"] + args
    unit = "[Unit]\nDescription=systemd_quote round trip\n[Service]\nType=oneshot\nExecStart=%s\n" % (
        _filters().systemd_quote(argv))
    host.run("rm -f /run/quote-roundtrip.json")
    with open("/tmp/quote-roundtrip.service", "w") as fh:
        fh.write(unit)
    name = host.backend.name
    copy = host.backend.run_local(f"podman cp /tmp/quote-roundtrip.service {name}:/etc/systemd/system/quote-roundtrip.service")
    assert copy.rc == 0, copy.stderr
    started = host.run("systemctl daemon-reload && systemctl start quote-roundtrip.service")
    assert started.rc == 0, started.stderr + host.run("journalctl -u quote-roundtrip -o cat --no-pager").stdout
    assert json.loads(host.file("/run/quote-roundtrip.json").content_string) == args
    host.run("rm -f /etc/systemd/system/quote-roundtrip.service; systemctl daemon-reload")


SECRET = "hf_moleculeSECRETtoken0123456789"


def test_hf_token_reaches_only_the_root_only_env_file(host):
    env = host.file("/etc/sglang/kimi.env")
    assert env.mode == 0o600 and env.user == "root"
    assert SECRET in env.content_string  # the converge set it: the checks below can fail
    for where, text in [
        ("systemctl show", host.run(f"systemctl show {UNIT}").stdout),
        ("unit file", host.file(f"/etc/systemd/system/{UNIT}").content_string),
        ("argv record", host.file("/etc/sglang/kimi.argv.json").content_string),
        ("journal", host.run("journalctl --no-pager -o cat").stdout),
        ("process command lines", host.run("cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '").stdout),
    ]:
        assert SECRET not in text, f"the HF token leaks into the {where}"


def test_apt_installed_the_toolkit_once(host):
    """The idempotence run did not re-run apt: the toolkit appears in exactly one apt history entry."""
    history = host.file("/var/log/apt/history.log").content_string
    entries = [e for e in history.split("\n\n") if "cuda-toolkit-13-0" in e]
    assert len(entries) == 1, entries
