"""Filters for the serving benchmark's figures (what the sglang_benchmark module returns and keeps): a table, a side by
side of two configurations, and the rolling redeploy's gate."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.sglang.plugins.filter.sglang_argv import sglang_argv_errors
from ansible_collections.blackwell.sglang.plugins.filter.sglang_eagle3 import sglang_eagle3_options

TABLE_COLUMNS = (("workload", 12), ("conc", 5), ("out tok/s", 10), ("req/s", 7), ("TTFT p50", 9), ("TTFT p99", 9),
                 ("ITL p50", 8), ("ITL p99", 8), ("accept", 6), ("failed", 6))


def _num(value, digits=1):
    if value is None:
        return "-"
    return ("%%.%df" % digits) % float(value)


def _row(cells):
    return " ".join(str(c).rjust(w) if i > 0 else str(c).ljust(w)
                    for i, (c, (dummy, w)) in enumerate(zip(cells, TABLE_COLUMNS))).rstrip()


def sglang_benchmark_table(results) -> str:
    """A fixed-width table of a sweep's figures, one run a line (latencies in ms)."""
    lines = [_row([column[0] for column in TABLE_COLUMNS])]
    lines.append("-" * len(lines[0]))
    for r in results or []:
        lines.append(_row([r.get("workload"), r.get("concurrency"), _num(r.get("output_tokens_per_s")),
                           _num(r.get("requests_per_s"), 2), _num(r.get("ttft_p50_ms")), _num(r.get("ttft_p99_ms")),
                           _num(r.get("itl_p50_ms")), _num(r.get("itl_p99_ms")), _num(r.get("accept_length"), 2),
                           r.get("failed", 0)]))
    return "\n".join(lines)


def _by_run(results):
    return {(r["workload"], int(r["concurrency"])): r for r in results or []}


def _change(new, old):
    """Relative change of ``new`` against ``old`` in percent (None when there is nothing to compare)."""
    if new is None or old in (None, 0):
        return None
    return (float(new) - float(old)) / float(old) * 100.0


def sglang_benchmark_compare(second, first, first_label="A", second_label="B") -> dict:
    """Two sweeps of the same workloads side by side: per workload and concurrency, which configuration makes more
    output tokens/s and by how much (``winner``, ``output_change_pct`` of the second against the first), and the
    p99 TTFT of each. Runs only one of them made are listed under ``unmatched``."""
    a, b = _by_run(first), _by_run(second)
    rows, lines = [], []
    head = "%-12s %5s %12s %12s %8s %12s %12s  %s" % ("workload", "conc", first_label[:12], second_label[:12], "change",
                                                      "TTFT99 " + first_label[:5], "TTFT99 " + second_label[:5],
                                                      "ahead")
    lines += [head, "-" * len(head)]
    for key in sorted(set(a) & set(b), key=lambda k: (k[0], k[1])):
        ra, rb = a[key], b[key]
        change = _change(rb.get("output_tokens_per_s"), ra.get("output_tokens_per_s"))
        winner = None if change is None else (second_label if change > 0 else first_label)
        rows.append({"workload": key[0], "concurrency": key[1], "winner": winner,
                     "output_change_pct": None if change is None else round(change, 1),
                     first_label: ra.get("output_tokens_per_s"), second_label: rb.get("output_tokens_per_s"),
                     "ttft_p99_ms": {first_label: ra.get("ttft_p99_ms"), second_label: rb.get("ttft_p99_ms")}})
        lines.append("%-12s %5d %12s %12s %7s%% %12s %12s  %s" % (
            key[0], key[1], _num(ra.get("output_tokens_per_s")), _num(rb.get("output_tokens_per_s")),
            "-" if change is None else "%+.1f" % change, _num(ra.get("ttft_p99_ms")), _num(rb.get("ttft_p99_ms")),
            "-" if winner is None else "%s by %.1f%%" % (winner, abs(change))))
    unmatched = sorted("%s c%d" % k for k in set(a) ^ set(b))
    return {"rows": rows, "table": "\n".join(lines), "unmatched": unmatched}


# What makes two runs of one workload and concurrency the same sweep (the figures of a run carry them).
SWEEP_KEYS = ("requests", "output_tokens")


def sglang_benchmark_gate(current, previous, concurrency, max_throughput_drop_pct, max_ttft_rise_pct,
                          workload="short_chat") -> dict:
    """The rolling redeploy's gate: this generation's sweep against the previous generation's record, at one
    reference concurrency of one workload. ``passed`` false names the figures: output tokens/s down by more than
    ``max_throughput_drop_pct``, or p99 TTFT up by more than ``max_ttft_rise_pct``. No previous record, or one of
    another sweep (its run's ``requests`` or ``output_tokens`` differ): passed, and ``msg`` says the gate only
    recorded."""
    try:
        concurrency = int(concurrency)
        drop_limit, rise_limit = float(max_throughput_drop_pct), float(max_ttft_rise_pct)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("sglang_benchmark_gate: concurrency and thresholds must be numbers (%s)" % exc)
    now = _by_run(current).get((workload, concurrency))
    if now is None:
        raise AnsibleFilterError("sglang_benchmark_gate: this sweep has no %s run at concurrency %d (it ran %s)" % (
            workload, concurrency, sorted("%s c%d" % k for k in _by_run(current))))
    before = _by_run(previous).get((workload, concurrency)) if previous else None
    # Like with like: a record of another sweep (other requests or output tokens a request) is no reference.
    other = [key for key in SWEEP_KEYS if before is not None and key in before and key in now and before[key] != now[key]]
    if before is None or other:
        why = ("no benchmark record of the previous generation at %s c%d" % (workload, concurrency) if before is None
               else "the previous generation's record at %s c%d ran another sweep (%s)" % (
                   workload, concurrency, ", ".join("%s %s, now %s" % (k, before[k], now[k]) for k in other)))
        return {"passed": True, "recorded_only": True, "problems": [],
                "msg": "%s: the gate recorded this one (%s output tokens/s, p99 TTFT %s ms) and passed" % (
                    why, _num(now.get("output_tokens_per_s")), _num(now.get("ttft_p99_ms")))}
    problems = []
    throughput = _change(now.get("output_tokens_per_s"), before.get("output_tokens_per_s"))
    if throughput is not None and -throughput > drop_limit:
        problems.append("output tokens/s at %s c%d fell %.1f%% (%s -> %s; the limit is %.1f%%)" % (
            workload, concurrency, -throughput, _num(before.get("output_tokens_per_s")),
            _num(now.get("output_tokens_per_s")), drop_limit))
    ttft = _change(now.get("ttft_p99_ms"), before.get("ttft_p99_ms"))
    if ttft is not None and ttft > rise_limit:
        problems.append("p99 TTFT at %s c%d rose %.1f%% (%s ms -> %s ms; the limit is %.1f%%)" % (
            workload, concurrency, ttft, _num(before.get("ttft_p99_ms")), _num(now.get("ttft_p99_ms")), rise_limit))
    summary = "output tokens/s %s -> %s (%s%%), p99 TTFT %s -> %s ms (%s%%)" % (
        _num(before.get("output_tokens_per_s")), _num(now.get("output_tokens_per_s")),
        "-" if throughput is None else "%+.1f" % throughput, _num(before.get("ttft_p99_ms")),
        _num(now.get("ttft_p99_ms")), "-" if ttft is None else "%+.1f" % ttft)
    return {"passed": not problems, "recorded_only": False, "problems": problems,
            "msg": ("benchmark gate passed at %s c%d: %s" if not problems else
                    "benchmark gate failed at %s c%d: %s") % (workload, concurrency, summary)}


def sglang_benchmark_options(effective, config, eagle3_options=None) -> dict:
    """The SGLang options one benchmark configuration runs with: the node's effective options; with
    ``eagle3_options`` (the config's ``eagle3`` through sglang_eagle3_options, ``{}`` when off) every
    ``speculative-*`` option of the node replaced by those; then the config's ``options`` over them (null removes
    one). Refuses a config without a label fit for a file name."""
    if not isinstance(config, dict):
        raise AnsibleFilterError("sglang_benchmark_options: a configuration is a dict (label, eagle3, options), got %r"
                                 % (config,))
    label = str(config.get("label") or "")
    if not label or not all(c.isalnum() or c in "._-" for c in label):
        raise AnsibleFilterError("sglang_benchmark_options: configuration label %r must be letters, digits, '.', '_' "
                                 "or '-' (it names the record file)" % label)
    out = dict(effective or {})
    if eagle3_options is not None:
        out = {k: v for k, v in out.items() if not str(k).startswith("speculative-")}
        out.update(eagle3_options)
    for key, value in (config.get("options") or {}).items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def sglang_benchmark_runs(configs, effective, base_options, family, version, staged_draft="") -> list:
    """Each configuration's label and the SGLang options it runs with (``sglang_benchmark_options``), its ``eagle3``
    turned into options by sglang_eagle3_options with the deployment's staged draft (``staged_draft``) only where it
    turns EAGLE-3 on (a draft staged for an "off" configuration is not an error here: the deployment staged it)."""
    runs = []
    for config in configs or []:
        eagle3 = None
        if isinstance(config, dict) and "eagle3" in config:
            spec = config["eagle3"] or {}
            eagle3 = sglang_eagle3_options(spec, base_options, family, version,
                                           staged_draft=staged_draft if spec.get("enabled") else "")
        options = sglang_benchmark_options(effective, config, eagle3)  # refuses a config without a fit label
        runs.append({"label": config["label"], "options": options})
    return runs


def sglang_benchmark_option_errors(runs, version, model_family=None, compute_capability=None) -> list:
    """Every problem of the configurations, all of them before the node is touched: fewer than two, labels that
    repeat, and what the release's parser and the product's rules find in each one's options (prefixed with its
    label)."""
    labels = [run.get("label") for run in runs or []]
    problems = []
    if len(labels) < 2:
        problems.append("two configurations are needed at least, got %d" % len(labels))
    if len(set(labels)) != len(labels):
        problems.append("labels must differ, got %s" % ", ".join(labels))
    return problems + ["%s: %s" % (run.get("label"), problem) for run in runs or []
                       for problem in sglang_argv_errors(run.get("options") or {}, version, model_family,
                                                         compute_capability)]


class FilterModule:
    def filters(self):
        return {"sglang_benchmark_table": sglang_benchmark_table, "sglang_benchmark_compare": sglang_benchmark_compare,
                "sglang_benchmark_gate": sglang_benchmark_gate, "sglang_benchmark_runs": sglang_benchmark_runs,
                "sglang_benchmark_option_errors": sglang_benchmark_option_errors}
