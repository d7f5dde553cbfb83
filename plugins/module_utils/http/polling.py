"""The bounded poll of the modules that wait for a remote service to agree (router, drain, Alertmanager silence).

Facts: none of the outside world; ``time.monotonic`` so that a clock step on the host does not stretch or cut a wait.
"""

import time


def wait_until(check, timeout, interval, clock=time.monotonic, sleep=time.sleep):
    """Call ``check()`` every ``interval`` s until it returns a truthy value or ``timeout`` s passed.

    Returns ``(value, seconds_waited)``; ``value`` is the last falsy result on timeout. Exceptions from
    ``check`` propagate (a router that stops answering is an error, not a reason to wait).
    """
    start = clock()
    while True:
        value = check()
        waited = clock() - start
        if value or waited >= timeout:
            return value, waited
        sleep(min(interval, max(timeout - waited, 0.0)))
