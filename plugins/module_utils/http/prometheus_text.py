"""Prometheus's text exposition format, read into samples with their labels (SGLang's and sglang-router's /metrics).

Facts (Prometheus text exposition format 0.0.4, https://prometheus.io/docs/instrumenting/exposition_formats/):
``# HELP`` and ``# TYPE`` lines are comments; a sample is ``name{label="value",...} value [timestamp]``, the label
block optional; a label value is quoted and may hold spaces, commas and braces, ``\\"`` and ``\\\\`` escaped.
"""


def _labels(block):
    """``{name: value}`` of a label block's inside (``a="x",b="y"``); None when it does not parse."""
    labels, i, n = {}, 0, len(block)
    while i < n:
        while i < n and block[i] in " ,":
            i += 1
        if i >= n:
            break
        eq = block.find("=", i)
        if eq < 0 or eq + 1 >= n or block[eq + 1] != '"':
            return None
        name, i, value, escaped = block[i:eq].strip(), eq + 2, [], False
        while i < n:
            ch = block[i]
            if escaped:
                value.append({"n": "\n"}.get(ch, ch))
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                break
            else:
                value.append(ch)
            i += 1
        else:
            return None
        labels[name] = "".join(value)
        i += 1
    return labels


def samples(text):
    """Every sample of ``text`` as ``(name, {label: value}, value)``, in order; a line that does not parse is skipped."""
    found = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        labels = {}
        if "{" in line:
            name, rest = line[:line.index("{")], line[line.index("{") + 1:]
            # the label block ends at the first '}' outside a quoted value
            quoted, escaped, end = False, False, -1
            for i, ch in enumerate(rest):
                if escaped:
                    escaped = False
                elif ch == "\\":
                    escaped = True
                elif ch == '"':
                    quoted = not quoted
                elif ch == "}" and not quoted:
                    end = i
                    break
            if end < 0:
                continue
            labels = _labels(rest[:end])
            if labels is None:
                continue
            fields = rest[end + 1:].split()
        else:
            parts = line.split()
            name, fields = parts[0], parts[1:]
        if not fields:
            continue
        try:
            value = float(fields[0])
        except ValueError:
            continue
        found.append((name, labels, value))
    return found


def sums(text):
    """Sum of each metric over its label sets: ``{"sglang:num_running_reqs": 3.0, ...}``."""
    totals = {}
    for name, _labels_, value in samples(text):
        totals[name] = totals.get(name, 0.0) + value
    return totals
