"""Prometheus's text exposition format, read into one sum per metric (for SGLang's ``/metrics``).

Facts (Prometheus text exposition format 0.0.4, https://prometheus.io/docs/instrumenting/exposition_formats/):
``# HELP`` and ``# TYPE`` lines are comments; a sample is ``name{label="value",...} value [timestamp]``, the label
block optional; a label value is quoted and may hold spaces and braces, ``\\"`` and ``\\\\`` escaped.

SGLang 0.5.23 ``/metrics`` (``--enable-metrics``): Prometheus text, one gauge line per scheduler rank,
e.g. ``sglang:num_running_reqs{...,tp_rank="0"} 3.0``.
"""


def parse_prometheus(text):
    """Sum of each metric over its label sets: ``{"sglang:num_running_reqs": 3.0, ...}``.

    Prometheus text exposition format 0.0.4: ``# HELP``/``# TYPE`` comments, ``name{labels} value [timestamp]``.
    Label values may contain spaces and braces inside quotes; a line that does not parse is skipped.
    """
    sums = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if "{" in line:
            name = line[:line.index("{")]
            rest = line[line.index("{"):]
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
        sums[name] = sums.get(name, 0.0) + value
    return sums
