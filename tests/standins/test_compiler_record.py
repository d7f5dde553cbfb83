"""The sandbox's record of compiler processes (tests/sandbox/compiler_record.py), run for real: its wrapper records
every start of a compiler, however short, with its nice and what started it, and judges it."""

import os
import pathlib
import subprocess
import sys
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "sandbox"))
import compiler_record  # noqa: E402 - the harness's module, above

BASE = os.nice(0)  # the niceness this test runs at stands for the server's
# the preparation's priority, 10 above the server's, must be reachable from where this test runs
needs_headroom = pytest.mark.skipif(BASE > 9, reason="the test runs at nice %d: nothing can run 10 above it" % BASE)


@pytest.fixture
def toolkit(tmp_path):
    """A CUDA home whose nvcc and nvvm/bin/cicc exit at once (a 1 ms process), wrapped by the install script."""
    home = tmp_path / "cuda-13.0"
    for rel in ("bin/nvcc", "nvvm/bin/cicc"):
        path = home / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#!/bin/sh\necho \"real $0 $*\"\nexit ${FAKE_RC:-0}\n")
        path.chmod(0o755)
    (home / "bin" / "nvcc.profile").write_text("not a compiler\n")
    log = tmp_path / "record.tsv"
    out = subprocess.run(["sh", "-c", compiler_record.install_script(log=str(log), roots=str(tmp_path / "cuda*"))],
                         check=True, capture_output=True, text=True).stdout.split()
    assert out == [str(home / "bin" / "nvcc"), str(home / "nvvm" / "bin" / "cicc")]
    return home, log


@needs_headroom
def test_every_start_is_recorded_with_its_nice_and_parent(toolkit):
    home, log = toolkit
    nvcc = str(home / "bin" / "nvcc")
    first = subprocess.run([nvcc, "--version"], capture_output=True, text=True)
    # the real binary ran with the caller's arguments and its output and status are passed on
    assert first.returncode == 0 and first.stdout == "real %s.recorded --version\n" % nvcc
    failed = subprocess.run(["nice", "-n", "10", nvcc, "-c", "x.cu"], env=dict(os.environ, FAKE_RC="3"),
                            capture_output=True)
    assert failed.returncode == 3
    cicc = subprocess.run(["sh", "-c", "%s/nvvm/bin/cicc" % home], capture_output=True)
    assert cicc.returncode == 0
    procs = compiler_record.parse(log.read_text())
    assert [(p["name"], p["nice"], p["rc"]) for p in procs] == [
        ("nvcc", BASE, 0), ("nvcc", BASE + 10, 3), ("cicc", BASE, 0)]
    assert procs[0]["ppid"] == os.getpid() and "python" in procs[0]["ancestors"]
    assert procs[2]["parent"].startswith("sh -c %s/nvvm/bin/cicc" % home)
    assert all(p["start"] <= p["end"] for p in procs)


@needs_headroom
def test_a_compile_at_the_server_priority_is_caught_however_short(toolkit):
    home, log = toolkit
    subprocess.run(["nice", "-n", "10", str(home / "bin" / "nvcc"), "--version"], check=True, capture_output=True)
    started = time.time()
    subprocess.run([str(home / "bin" / "nvcc"), "--version"], check=True, capture_output=True)
    ended = time.time()
    procs = compiler_record.parse(log.read_text())
    assert procs[1]["end"] - procs[1]["start"] < 1.0
    judged = compiler_record.figures(procs, windows=[], until=ended, server_nice=BASE)
    assert judged["processes"] == 2 and judged["nice"] == sorted({BASE, BASE + 10})
    assert len(judged["at_server_priority"]) == 1
    assert judged["at_server_priority"][0].startswith("nvcc(pid %d, nice %d, started by " % (procs[1]["pid"], BASE))
    # the one at the preparation's priority is not, and neither is out of rotation unless its span meets a window
    assert judged["out_of_rotation"] == []
    inside = compiler_record.figures(procs, windows=[(started, ended)], until=ended, server_nice=BASE)
    assert [d.split("(")[0] for d in inside["out_of_rotation"]] == ["nvcc"]
    # a compiler with no end record (killed, or still running) spans until the log was read
    running = dict(procs[0], end=None)
    late = compiler_record.figures([running], windows=[(ended + 5, ended + 6)], until=ended + 10, server_nice=BASE)
    assert len(late["out_of_rotation"]) == 1


def test_a_record_that_cannot_be_written_fails_the_compile(tmp_path, toolkit):
    home, _ = toolkit
    broken = tmp_path / "no-such-dir" / "record.tsv"
    (home / "bin" / "nvcc").write_text(compiler_record.wrapper(str(broken)))
    run = subprocess.run([str(home / "bin" / "nvcc"), "--version"], capture_output=True, text=True)
    assert run.returncode == 97 and "real" in run.stdout


def test_install_is_idempotent_and_restore_puts_the_real_binaries_back(tmp_path, toolkit):
    home, log = toolkit
    again = subprocess.run(["sh", "-c", compiler_record.install_script(log=str(log), roots=str(tmp_path / "cuda*"))],
                           check=True, capture_output=True, text=True)
    assert again.stdout.split() == [str(home / "bin" / "nvcc"), str(home / "nvvm" / "bin" / "cicc")]
    assert "real" in (home / "bin" / "nvcc.recorded").read_text()  # not the wrapper wrapped twice
    subprocess.run(["sh", "-c", compiler_record.restore_script(roots=str(tmp_path / "cuda*"))], check=True)
    assert sorted(p.name for p in (home / "bin").iterdir()) == ["nvcc", "nvcc.profile"]
    assert (home / "bin" / "nvcc").read_text().startswith("#!/bin/sh\necho \"real")
