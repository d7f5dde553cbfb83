"""The sandbox's persistent channel (tests/sandbox/podman_persist.py), run against a local "container": the exec
command is `env`, so the agent runs on this machine as it would under `podman exec -i NAME`."""
import importlib.util
import os
import pathlib
import signal
import subprocess
import threading
import time

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
_SPEC = importlib.util.spec_from_file_location("podman_persist", REPO / "tests/sandbox/podman_persist.py")
persist = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(persist)


@pytest.fixture()
def channel(tmp_path):
    """(run, path, masters): run(argv, data=None) through a master for a local 'container' with a 3 s idle limit."""
    path = str(tmp_path / "cp" / "podman-test.sock")

    def run(argv, data=None, idle=3, exec_cmd=("env",)):
        return persist.call(path, persist.master_argv(path, list(exec_cmd), idle), argv, data)

    yield run, path
    # Stop any master left (its agent exits when the master closes its stdin).
    subprocess.run(["pkill", "-f", "master --socket " + path], check=False)


def _masters(path):
    out = subprocess.run(["pgrep", "-f", "master --socket " + path], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def test_commands_get_what_podman_exec_gives_them(channel):
    run, path = channel
    assert run(["sh", "-c", "echo out; echo err >&2; exit 3"]) == (3, b"out\n", b"err\n")
    # A pipelined module arrives on stdin; a raw command has /dev/null as stdin and must not wait on it.
    assert run(["cat"], data=b"MODULE" * 100000)[1] == b"MODULE" * 100000
    assert run(["cat"]) == (0, b"", b"")
    assert run(["sh", "-c", "kill -9 $$"])[0] == 128 + signal.SIGKILL
    rc, _, err = run(["/no/such/binary"])
    assert rc == 127 and b"No such file" in err
    # A daemonised child that keeps the pipes open does not hold the reply beyond the grace period.
    start = time.monotonic()
    assert run(["sh", "-c", "sleep 30 & echo started"])[1] == b"started\n"
    assert time.monotonic() - start < 10
    assert len(_masters(path)) == 1


def test_one_master_serves_concurrent_commands(channel):
    run, path = channel
    run(["true"])
    results = {}

    def worker(i):
        results[i] = run(["sh", "-c", "sleep 0.5; echo %d" % i])

    start = time.monotonic()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {i: (0, b"%d\n" % i, b"") for i in range(8)}
    assert time.monotonic() - start < 3.5  # in parallel, not 8 x 0.5 s in a row
    assert len(_masters(path)) == 1


def test_idle_master_exits_and_the_next_command_starts_another(channel):
    run, path = channel
    run(["true"], idle=1)
    first = _masters(path)
    assert len(first) == 1
    deadline = time.monotonic() + 10
    while _masters(path) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _masters(path) and not os.path.exists(path)
    assert run(["echo", "again"], idle=1) == (0, b"again\n", b"")
    assert _masters(path) and _masters(path) != first


def test_a_container_that_goes_away_breaks_the_running_command_and_the_next_starts_fresh(channel):
    run, path = channel
    run(["true"])
    errors = []

    def long():
        try:
            run(["sleep", "20"])
        except EOFError as exc:
            errors.append(str(exc))

    t = threading.Thread(target=long)
    t.start()
    time.sleep(0.5)
    # The container stops: its exec (the agent) dies, as podman kills exec sessions with the container.
    agent = subprocess.run(["pgrep", "-f", "-P", str(_masters(path)[0]), "python3 -u -c"], capture_output=True,
                           text=True).stdout.split()
    os.kill(int(agent[0]), signal.SIGKILL)
    t.join(10)
    assert errors and "agent exited" in errors[0]
    deadline = time.monotonic() + 5
    while _masters(path) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert run(["echo", "fresh"]) == (0, b"fresh\n", b"")


def test_no_container_means_no_master_and_the_caller_falls_back(channel):
    run, path = channel
    with pytest.raises(persist.Unavailable, match="did not start"):
        run(["true"], exec_cmd=("false",))
    assert not _masters(path)


# An agent that says hello, then closes its stdin and stays alive: the master's next write to it fails.
DEAF_AGENT = (
    "import json, os, struct, sys, time\n"
    "head = json.dumps({'id': -1, 'rc': 0, 'out': 0, 'err': 0}).encode()\n"
    "sys.stdout.buffer.write(struct.pack('!I', len(head)) + head); sys.stdout.flush()\n"
    "os.close(0); time.sleep(30)\n")


def test_an_agent_that_stops_reading_fails_the_request_instead_of_hanging(channel):
    run, path = channel
    errors = []

    def call():
        try:
            run(["true"], exec_cmd=("python3", "-c", DEAF_AGENT))
        except EOFError as exc:
            errors.append(str(exc))

    t = threading.Thread(target=call, daemon=True)
    t.start()
    t.join(15)
    assert not t.is_alive(), "the request hung on an agent that no longer reads"
    assert errors and "agent exited" in errors[0]
