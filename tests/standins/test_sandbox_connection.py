"""The sandbox's `podman` connection (tests/sandbox/plugins/connection/podman.py): the name the inventories and
molecule's podman driver use resolves to it through ansible.cfg, and a pipelined module reaches the container on the
exec's stdin in one podman call."""
import configparser
import os
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture()
def loader(monkeypatch):
    """Ansible's connection loader with the repo's ansible.cfg connection_plugins path."""
    monkeypatch.delenv("SANDBOX_PODMAN_PERSIST", raising=False)
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "ansible.cfg")
    path = REPO / cfg["defaults"]["connection_plugins"]
    from ansible.plugins.loader import connection_loader

    connection_loader.add_directory(str(path))
    return connection_loader


def _connection(loader, persist=0):
    from ansible.playbook.play_context import PlayContext

    ctx = PlayContext()
    ctx.remote_addr = "sglang-sandbox-gpu-0"
    conn = loader.get("podman", ctx, None)
    conn.set_options(var_options={"inventory_hostname": "sglang-sandbox-gpu-0", "ansible_pipelining": True,
                                  "ansible_podman_persist_seconds": persist})
    return conn


def test_short_name_is_the_pipelined_plugin(loader):
    conn = _connection(loader)
    assert type(conn).__module__.endswith("podman")
    assert os.path.samefile(loader.find_plugin("podman"), REPO / "tests/sandbox/plugins/connection/podman.py")
    assert conn.has_pipelining and conn.is_pipelining_enabled()


def test_without_a_channel_a_pipelined_module_goes_to_stdin_in_one_exec(loader, monkeypatch):
    conn = _connection(loader)
    calls = []
    monkeypatch.setattr(conn, "_podman", lambda cmd, args=None, in_data=None, **kw: (
        calls.append((cmd, args, in_data)) or (0, b"{}", b"")))
    conn._connected = True
    assert conn.exec_command("/bin/sh -c '/usr/bin/python3 && sleep 0'", in_data=b"MODULE") == (0, b"{}", b"")
    assert calls == [(["exec", "-i"], ["/bin/sh", "-c", "/usr/bin/python3 && sleep 0"], b"MODULE")]
    # Without a module on stdin (a raw command), no -i: the exec must not wait on the controller's stdin.
    conn.exec_command("/bin/sh -c 'echo ~'")
    assert calls[-1] == (["exec"], ["/bin/sh", "-c", "echo ~"], None)


def test_with_a_channel_commands_go_through_it_and_fall_back_to_exec(loader, monkeypatch):
    conn = _connection(loader, persist=30)
    conn._connected = True
    plugin = __import__(type(conn).__module__, fromlist=["persist"])
    sent, execs = [], []
    monkeypatch.setattr(conn, "_podman", lambda cmd, args=None, in_data=None, **kw: (
        execs.append((cmd, args, in_data)) or (0, b"exec", b"")))

    def call(path, start_argv, argv, in_data=None):
        sent.append((start_argv, argv, in_data))
        return 0, b"channel", b""

    monkeypatch.setattr(plugin.persist, "call", call)
    assert conn.exec_command("/bin/sh -c 'echo ~'") == (0, b"channel", b"")
    start_argv, argv, in_data = sent[0]
    assert argv == ["/bin/sh", "-c", "echo ~"] and in_data is None and not execs
    # The master holds one `podman exec -i <container>` open, and persists 30 s without a command.
    assert start_argv[-3:] == ["exec", "-i", "sglang-sandbox-gpu-0"] and start_argv[start_argv.index("--idle") + 1] == "30.0"

    def unavailable(*args, **kwargs):
        sent.append("try")
        raise plugin.persist.Unavailable("no master")

    monkeypatch.setattr(plugin.persist, "call", unavailable)
    assert conn.exec_command("/bin/true", in_data=b"MODULE") == (0, b"exec", b"")
    assert sent[1:] == ["try", "try"] and execs == [(["exec", "-i"], ["/bin/true"], b"MODULE")]

    def broken(*args, **kwargs):
        raise EOFError("the container's agent exited")

    from ansible.errors import AnsibleConnectionFailure

    monkeypatch.setattr(plugin.persist, "call", broken)
    with pytest.raises(AnsibleConnectionFailure, match="agent exited"):
        conn.exec_command("/bin/true")


def test_molecule_scenarios_and_inventories_use_it():
    import yaml

    base = yaml.safe_load((REPO / ".config/molecule/config.yml").read_text())
    cfg = base["ansible"]["cfg"]
    assert cfg["defaults"]["connection_plugins"].endswith("/../../tests/sandbox/plugins/connection")
    assert cfg["connection"]["pipelining"] is True
    for f in sorted(REPO.glob("molecule/*/molecule.yml")):
        own = (yaml.safe_load(f.read_text()).get("ansible") or {}).get("cfg") or {}
        # No scenario replaces the shared connection (molecule merges each molecule.yml over the base config).
        assert "connection_plugins" not in (own.get("defaults") or {}) and "connection" not in own, f
    for f in ("inventory/sandbox/hosts.yml", "inventory/sandbox-fleet/hosts.yml"):
        assert "ansible_connection: podman\n" in (REPO / f).read_text(), f


def test_molecule_scenarios_share_the_harness_prepare():
    """The base config names the one prepare (the harness's sandbox_prepare.yml, a path from the scenario's
    directory); a scenario with its own prepare.yml names it in its molecule.yml (else molecule would run the base
    config's and pass it over) and imports the harness's first."""
    import yaml

    base = yaml.safe_load((REPO / ".config/molecule/config.yml").read_text())
    shared = base["ansible"]["playbooks"]["prepare"]
    assert shared == "../../tests/sandbox/playbooks/sandbox_prepare.yml"
    for scenario in sorted(p.parent for p in REPO.glob("molecule/*/molecule.yml")):
        assert (scenario / shared).resolve() == REPO / "tests/sandbox/playbooks/sandbox_prepare.yml"
        own = (yaml.safe_load((scenario / "molecule.yml").read_text()).get("ansible") or {}).get("playbooks") or {}
        if (scenario / "prepare.yml").exists():
            assert own.get("prepare") == "prepare.yml", scenario
            first = yaml.safe_load((scenario / "prepare.yml").read_text())[0]
            assert first["ansible.builtin.import_playbook"] == shared, scenario
        else:
            assert "prepare" not in own, scenario
