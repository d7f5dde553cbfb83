"""Filters for the smoke-health report."""

from __future__ import annotations

TABLE_COLUMNS = (("host", 18), ("verdict", 12), ("phase", 18), ("progress", 8), ("elapsed", 8), ("exit", 22),
                 ("smoke", 12), ("error", 0))


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


def smoke_outcome(result) -> str:
    """One word-ish summary of a registered ``sglang_smoke`` result: "passed 7/7", "FAILED tool_calls,chat",
    "unhealthy answers: FAILED answers,chat" (a golden prompt answered wrong, or degenerate output), "skipped" or
    "not run"."""
    if not result:
        return "not run"
    checks = result.get("checks") or []
    if result.get("skipped") or (checks and all(c.get("status") == "skipped" for c in checks)):
        return "skipped"
    failed = result.get("failed_checks") or [c.get("name") for c in checks if c.get("status") == "failed"]
    wrong = [c.get("name") for c in checks if c.get("status") == "failed" and (
        c.get("name") in ("answers", "long_context") or str(c.get("detail") or "").startswith("degenerate output"))]
    if wrong:  # the server serves, but what its model says is wrong: a release to roll back, not a node to restart
        return "unhealthy answers: FAILED " + ",".join(failed)
    if failed:
        return "FAILED " + ",".join(failed)
    if result.get("failed"):
        return "failed"
    return "passed %d/%d" % (len(checks), len(checks))


def _cell(value, width):
    text = "-" if value in (None, "", [], {}) else str(value)
    text = " ".join(text.split())
    if width and len(text) > width:
        text = text[: width - 1] + "~"
    return text.ljust(width) if width else text


def smoke_health_table(hosts, hostvars, fact="smoke_health_report") -> str:
    """Fixed-width table of every host's health report (``hostvars[host][fact]``, the dict the role writes
    to reports/<host>.json), one row per host in ``hosts`` order; hosts without a report say so."""
    # The host column fits the longest name: a truncated host name is no use in a fleet table.
    host_width = max([len("host")] + [len(str(h)) for h in hosts or []])
    columns = ((TABLE_COLUMNS[0][0], host_width),) + TABLE_COLUMNS[1:]
    header = " ".join(_cell(name, width) for name, width in columns).rstrip()
    rows = [header, "-" * len(header)]
    for host in hosts or []:
        report = (hostvars.get(host) or {}).get(fact) if hasattr(hostvars, "get") else None
        if not report:
            rows.append(" ".join(_cell(v, w) for v, (dummy, w) in zip(
                [host, "no report", None, None, None, None, None, "the play stopped before smoke_health"],
                columns)))
            continue
        progress = report.get("progress") or {}
        if isinstance(progress, dict) and progress.get("n"):
            progress = "%s/%s" % (progress.get("i"), progress.get("n"))
        exit_status = report.get("exit_status") or {}
        elapsed = report.get("elapsed_s")
        values = [host, report.get("verdict"), report.get("phase"), progress or None,
                  ("%s s" % elapsed) if elapsed not in (None, "") else None,
                  exit_status.get("text") if isinstance(exit_status, dict) else exit_status,
                  report.get("smoke_summary"),
                  report.get("error") if report.get("verdict") != "ready" else None]
        rows.append(" ".join(_cell(v, w) for v, (dummy, w) in zip(values, columns)).rstrip())
    return "\n".join(rows)


class FilterModule:
    def filters(self):
        return {"task_outcome": task_outcome, "smoke_outcome": smoke_outcome, "smoke_health_table": smoke_health_table}
