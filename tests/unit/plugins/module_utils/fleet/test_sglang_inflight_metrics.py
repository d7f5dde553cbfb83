"""sglang_inflight.parse_prometheus on SGLang 0.5.23's /metrics and the corners of the text format 0.0.4."""

from ansible_collections.blackwell.sglang.plugins.module_utils.fleet.sglang_inflight import parse_prometheus

# SGLang 0.5.23 /metrics with --tp-size 2 (one line per rank), as the simulator and the real server print it.
METRICS = """# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{engine_type="unified",model_name="Kimi {K2.5}",tp_rank="0"} 3.0
sglang:num_running_reqs{engine_type="unified",model_name="Kimi {K2.5}",tp_rank="1"} 1.0
sglang:num_queue_reqs{engine_type="unified",model_name="m",tp_rank="0"} 2.0 1700000000000
process_open_fds 17
broken{label="x" NaNx
"""


def test_parse_prometheus_sums_ranks_and_survives_quoted_braces():
    values = parse_prometheus(METRICS)
    assert values == {"sglang:num_running_reqs": 4.0, "sglang:num_queue_reqs": 2.0, "process_open_fds": 17.0}


def test_escaped_quotes_stay_inside_the_label_value_and_bad_lines_are_skipped():
    text = ('m{path="a\\"}b",x="}"} 2\n'  # an escaped quote, then a brace, inside quoted values
            'm{x="1"} 3 1700000000000\n'
            '  # a comment with leading blanks\n'
            'm{x="2"}\n'  # no value
            'm{x="3"} many\n'  # not a number
            'up +Inf\n'
            'gone NaN\n')
    values = parse_prometheus(text)
    assert values["m"] == 5.0 and values["up"] == float("inf") and values["gone"] != values["gone"]
    assert set(values) == {"m", "up", "gone"} and parse_prometheus("") == {}
