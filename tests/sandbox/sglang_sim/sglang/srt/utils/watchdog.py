"""The parent's subprocess watchdog, as SGLang 0.5.23 ``sglang/srt/utils/watchdog.py`` SubprocessWatchdog:
started after every scheduler reported ready and before uvicorn binds; polls each child every second and, for
one that exited with a non-zero code, logs ``Subprocess {name} (pid={pid}) crashed with exit code {code}.
Triggering SIGQUIT for cleanup...`` and sends SIGQUIT to its own process."""
import logging
import os
import signal
import threading

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
