"""The parent's subprocess watchdog, as SGLang 0.5.23 ``sglang/srt/utils/watchdog.py`` SubprocessWatchdog:
started after every scheduler reported ready and before uvicorn binds; polls each child every second and, for
one that exited with a non-zero code, logs ``Subprocess {name} (pid={pid}) crashed with exit code {code}.
Triggering SIGQUIT for cleanup...`` and sends SIGQUIT to its own process."""
import logging
import os
import signal
import subprocess
import sys
import threading
import time

logger = logging.getLogger(__name__)


class SubprocessWatchdog:
    def __init__(self, processes, process_names, interval=1.0):
        self._processes, self._names, self._interval = processes, process_names, interval
        self._stop_event = threading.Event()
        self._thread = None

    def start(self):
        if self._thread is not None or not self._processes:
            return
        self._thread = threading.Thread(target=self._monitor_loop, daemon=True, name="subprocess-watchdog")
        self._thread.start()

    def stop(self):
        self._stop_event.set()

    def _monitor_loop(self):
        while not self._stop_event.wait(self._interval):
            for proc, name in zip(self._processes, self._names):
                code = proc.exitcode()
                if code is None or code == 0:
                    continue
                logger.error(f"Subprocess {name} (pid={proc.pid}) crashed "
                             f"with exit code {code}. "
                             f"Triggering SIGQUIT for cleanup...")
                os.kill(os.getpid(), signal.SIGQUIT)
                return


class WatchdogRaw:
    """``utils/watchdog.py`` WatchdogRaw, as ``managers/scheduler_components/invariant_checker.py``
    create_scheduler_watchdog makes it for every scheduler (``--watchdog-timeout``, 300 s by default,
    ``arg_groups/fields/device.py``): a thread that looks every ``watchdog_timeout / 2`` s whether the forward counter
    moved while a batch runs (``is_active``); once it has not for longer than ``watchdog_timeout`` it logs the debug
    info, runs ``py-spy dump`` on its own process (``utils/cudacore_pyspy_dump_utils.py pyspy_dump_schedulers``: the
    same shell command, so the journal shows what py-spy, or the shell without it, really answers), logs the timeout,
    and 5 s later SIGQUITs its parent."""

    def __init__(self, debug_name, get_counter, is_active, watchdog_timeout, soft=False, dump_info=None):
        self.debug_name, self.get_counter, self.is_active = debug_name, get_counter, is_active
        self.watchdog_timeout, self.soft, self.dump_info = watchdog_timeout, soft, dump_info
        self.parent_pid = os.getppid()
        threading.Thread(target=self._watchdog_once, daemon=True, name="watchdog").start()

    def _watchdog_once(self):
        watchdog_last_counter = 0
        watchdog_last_time = time.perf_counter()
        while True:
            current = time.perf_counter()
            if self.is_active():
                current_counter = self.get_counter()
                if watchdog_last_counter == current_counter:
                    if current > watchdog_last_time + self.watchdog_timeout:
                        break
                else:
                    watchdog_last_counter = current_counter
                    watchdog_last_time = current
            time.sleep(self.watchdog_timeout / 2)
        if self.dump_info is not None and (info_msg := self.dump_info()):
            logger.error(f"{self.debug_name} debug info:\n{info_msg}")
        _pyspy_dump(os.getpid())
        logger.error(f"{self.debug_name} watchdog timeout ({self.watchdog_timeout=}, {self.soft=})")
        print(file=sys.stderr, flush=True)
        print(file=sys.stdout, flush=True)
        if not self.soft:
            time.sleep(5)  # "so that the parent process can print the error"
            os.kill(self.parent_pid, signal.SIGQUIT)


def _pyspy_dump(pid):
    for attempt, native_flag in enumerate(["--native", ""]):
        cmd = f"py-spy dump {native_flag} --pid {pid}".strip()
        try:
            result = subprocess.run(cmd, shell=True, capture_output=True, text=True, check=True, timeout=60)
            logger.error(f"Pyspy dump for PID {pid} ({cmd}):\n{result.stdout}")
            break
        except subprocess.CalledProcessError as e:
            logger.error(f"Pyspy failed ({cmd}). Error: {e.stderr}")
            if attempt == 1:
                logger.error(f"All pyspy dump attempts failed for PID {pid}.")
        except subprocess.TimeoutExpired:  # the sim's own bound (upstream has none): a sandbox must not hang here
            logger.error(f"Pyspy failed ({cmd}). Error: timed out")
            if attempt == 1:
                logger.error(f"All pyspy dump attempts failed for PID {pid}.")
