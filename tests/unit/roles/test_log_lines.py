"""The unit's log wrapper (roles/sglang_service/files/sglang_log_lines.py): tqdm's redraws become records while they
happen, a crash's traceback is its own record, and the wrapper is transparent to systemd (the exit, the signal, the
forwarded SIGTERM). The bars come from the real tqdm (the library SGLang 0.5.23's loader draws with), in the format
SGLang gives it (``utils/common.py BAR_FORMAT``), written as it writes them: on stderr, no terminal, ``\\r`` redraws."""

import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import time

import pytest

ROOT = str(pathlib.Path(__file__).resolve().parents[3])
WRAPPER = os.path.join(ROOT, "roles", "sglang_service", "files", "sglang_log_lines.py")
sys.path.insert(0, os.path.dirname(WRAPPER))
import sglang_log_lines as ll  # noqa: E402
from ansible_collections.blackwell.sglang.plugins.module_utils.health.sglang_log import parse_log  # noqa: E402

BAR_FORMAT = "{desc}: {percentage:3.0f}% Completed | {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}]"


def records(splitter, *chunks):
    out = []
    for chunk in chunks:
        out += splitter.feed(chunk, 0.0)
    return [r.decode() for r in out]


def test_redraws_newlines_and_crlf_are_record_boundaries():
    s = ll.Splitter(0.25)
    got = records(s, b"\rbar 1/4   \rbar 2/4\rbar 3/4 ", b"\rbar 4/4\n", b"line a\r\nline b\n\nafter blank\n")
    assert got == ["bar 1/4", "bar 2/4", "bar 3/4", "bar 4/4", "line a", "line b", "", "after blank"]
    assert s.close() == []


def test_a_crlf_split_between_reads_is_one_terminator():
    s = ll.Splitter(0.25)
    assert records(s, b"text\r", b"\nnext\n") == ["text", "next"]


def test_the_last_redraw_is_written_once_idle_and_the_rest_of_its_line_is_a_record_of_its_own():
    s = ll.Splitter(0.25)
    assert records(s, b"\rMulti 59/64") == []
    assert s.flush_idle(0.1) == []  # not idle yet
    assert s.flush_idle(0.3) == [b"Multi 59/64"]
    got = records(s, b"[2026-12-05 10:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):\n")
    assert got == ["[2026-12-05 10:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):"]


def test_a_bar_closed_after_its_idle_flush_adds_no_blank_record():
    s = ll.Splitter(0.25)
    records(s, b"\rbar 64/64")
    assert s.flush_idle(1.0) == [b"bar 64/64"]
    assert records(s, b"\n", b"next\n") == ["next"]


def test_plain_partial_lines_wait_for_their_newline_and_huge_ones_are_bounded():
    s = ll.Splitter(0.25)
    assert records(s, b"no newline yet") == []
    assert s.flush_idle(10.0) == []
    assert records(s, b" ... done\n") == ["no newline yet ... done"]
    big = b"x" * (ll.MAX_RECORD + 10)
    assert records(s, big) == [big.decode()]


def run_wrapped(script, *extra, **kwargs):
    """Start the wrapper around ``python -c script``; returns the Popen with stdout and stderr pipes."""
    argv = [sys.executable, WRAPPER] + list(extra) + ["--", sys.executable, "-c", textwrap.dedent(script)]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)


def timed_lines(stream, until):
    """(monotonic time, line) of each line read from ``stream`` until EOF."""
    out = []
    for raw in iter(stream.readline, b""):
        out.append((time.monotonic(), raw.decode().rstrip("\n")))
        if until and until in out[-1][1]:
            break
    return out


LOADER = """
    import os, signal, sys, time, logging
    from tqdm import tqdm
    logging.basicConfig(format="[%(asctime)s TP0] %(message)s", datefmt="%Y-%m-%d %H:%M:%S", level=logging.INFO)
    log = logging.getLogger("x")
    log.info("Load weight begin. avail mem=90.00 GB")
    shards = ["model-%05d-of-000008.safetensors" % i for i in range(1, 9)]
    bar = tqdm(total=8, desc="Multi-thread loading shards", bar_format={fmt!r}, position=0)
    for i, shard in enumerate(shards, start=1):
        if i == {crash}:
            try:
                raise OSError(5, "Input/output error", shard)
            except OSError:
                import traceback
                log.error("Scheduler hit an exception: " + traceback.format_exc())
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep({delay})
        bar.update(1)
    bar.close()
    log.info("Load weight end.")
    sys.exit({code})
"""


def test_a_slow_load_shows_every_redraw_while_it_runs_and_a_crash_keeps_its_traceback_and_signal():
    proc = run_wrapped(LOADER.format(fmt=BAR_FORMAT, crash=6, delay=0.4, code=0))
    lines = timed_lines(proc.stderr, None)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL  # ended as the child did: killed by SIGKILL
    bars = [(t, line) for t, line in lines if "Multi-thread loading shards" in line]
    counts = [line.split("| ")[1].split(" ")[0] for t, line in bars]
    assert counts == ["0/8", "1/8", "2/8", "3/8", "4/8", "5/8"]
    # each redraw reached the reader as it happened, not when the bar ended
    gaps = [b[0] - a[0] for a, b in zip(bars, bars[1:])]
    assert min(gaps[1:-1]) > 0.3, gaps  # (the last one came out with the crash line right behind it)
    text = [line for t, line in lines]
    assert "OSError: [Errno 5] Input/output error: 'model-00006-of-000008.safetensors'" in text
    # what the product reads of it: the progress at the crash, the traceback and its error
    log = parse_log("\n".join(text))
    assert (log["progress"]["i"], log["progress"]["n"]) == (5, 8)
    assert log["error"] == "OSError: [Errno 5] Input/output error: 'model-00006-of-000008.safetensors'"
    assert log["traceback"].startswith("Traceback (most recent call last):")
    assert log["crash_phase"] == "loading_weights"


def test_a_log_line_after_a_buffered_redraw_is_a_record_of_its_own():
    s = ll.Splitter(0.25)
    assert records(s, b"\rbar 5/8") == []
    assert records(s, b"[2026-12-05 10:00:00 TP0] Scheduler hit an exception: Traceback\n") == [
        "bar 5/8", "[2026-12-05 10:00:00 TP0] Scheduler hit an exception: Traceback"]


def test_a_completed_bar_ends_without_a_blank_record_and_the_exit_code_is_the_childs():
    proc = run_wrapped(LOADER.format(fmt=BAR_FORMAT, crash=0, delay=0.01, code=3))
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 3
    text = err.decode().splitlines()
    assert "" not in text
    assert text[-2].startswith("Multi-thread loading shards: 100% Completed | 8/8")
    assert text[-1].endswith("Load weight end.")


def test_sigterm_reaches_the_command_which_drains_and_exits_0():
    proc = run_wrapped("""
        import signal, sys, time
        def drain(signum, frame):
            print("drained after SIGTERM", flush=True)
            sys.exit(0)
        signal.signal(signal.SIGTERM, drain)
        print("serving", flush=True)
        time.sleep(30)
    """)
    assert proc.stdout.readline() == b"serving\n"
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=10)
    assert out == b"drained after SIGTERM\n"
    assert proc.returncode == 0


def test_a_stray_child_holding_the_pipes_delays_the_exit_by_drain_s_at_most():
    proc = run_wrapped("""
        import subprocess, sys
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        print("parent exits", flush=True)
    """, "--drain-s", "1", start_new_session=True)
    started = time.monotonic()
    out, err = proc.communicate(timeout=20)
    assert out == b"parent exits\n" and proc.returncode == 0
    assert time.monotonic() - started < 6
    os.killpg(proc.pid, signal.SIGKILL)


def test_a_command_that_cannot_start_is_named():
    proc = subprocess.run([sys.executable, WRAPPER, "--", "/nonexistent/python"], capture_output=True, timeout=10)
    assert proc.returncode == 127
    assert b"/nonexistent/python" in proc.stderr


@pytest.mark.parametrize("argv", [[], ["--"]])
def test_no_command_is_refused(argv):
    proc = subprocess.run([sys.executable, WRAPPER] + argv, capture_output=True, timeout=10)
    assert proc.returncode == 2 and b"a command is required" in proc.stderr
