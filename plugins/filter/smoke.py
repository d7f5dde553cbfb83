"""Filters for the smoke-health report."""

from __future__ import annotations


def task_outcome(result) -> str:
    """Return "passed", "failed", "skipped" or "not run" for a registered task result.

    ``result`` is what ``register:`` stored (a dict with ``failed``/``skipped`` keys), or ``{}``/None
    when the task never ran (pass ``var | default({})``), e.g. because the health verdict failed first.
    """
    if not result:
        return "not run"
    if result.get("skipped"):
        return "skipped"
    if result.get("failed"):
        return "failed"
    return "passed"


class FilterModule:
    def filters(self):
        return {"task_outcome": task_outcome}
