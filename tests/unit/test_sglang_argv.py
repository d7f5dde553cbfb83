"""sglang_argv: structured options -> argv validated against SGLang 0.5.23's own argparse snapshot."""

import importlib.util
import pathlib

import pytest
from ansible.errors import AnsibleFilterError

_PATH = pathlib.Path(__file__).resolve().parents[2] / "plugins" / "filter" / "sglang_argv.py"
_spec = importlib.util.spec_from_file_location("sglang_argv_filter", _PATH)
f = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(f)

KIMI = {
    "model-path": "/srv/models/Kimi-K2.5/current",
    "tp-size": 8,
    "trust-remote-code": True,
    "tool-call-parser": "kimi_k2",
    "reasoning-parser": "kimi_k2",
    "enable-hierarchical-cache": True,
}


def test_kimi_defaults_render_in_order_without_abbreviations():
    assert f.sglang_argv(KIMI) == [
        "--model-path", "/srv/models/Kimi-K2.5/current",
        "--tp-size", "8",
        "--trust-remote-code",
        "--tool-call-parser", "kimi_k2",
        "--reasoning-parser", "kimi_k2",
        "--enable-hierarchical-cache",
    ]


def test_underscored_names_are_normalised_and_false_flags_dropped():
    argv = f.sglang_argv({"tp_size": 8, "trust_remote_code": False, "port": None})
    assert argv == ["--tp-size", "8"]


def test_kimi_is_not_a_tool_call_parser():
    with pytest.raises(AnsibleFilterError, match=r"--tool-call-parser 'kimi' is not a valid choice in SGLang 0\.5\.23"):
        f.sglang_argv({**KIMI, "tool-call-parser": "kimi"})


def test_removed_flag_names_its_replacement():
    with pytest.raises(AnsibleFilterError, match=r"--cuda-graph-max-bs is not an option of SGLang 0\.5\.23.*--cuda-graph-max-bs-decode"):
        f.sglang_argv({"cuda-graph-max-bs": 256})


def test_abbreviation_is_unknown_not_silently_expanded():
    with pytest.raises(AnsibleFilterError, match=r"--tp is not an option"):
        f.sglang_argv({"tp": 8})


def test_every_problem_is_listed_at_once():
    with pytest.raises(AnsibleFilterError) as err:
        f.sglang_argv({"tp-size": "eight", "tool-call-parser": "kimi", "no-such-flag": 1})
    text = str(err.value)
    assert "--tp-size expects an integer, got 'eight'" in text
    assert "'kimi' is not a valid choice" in text
    assert "--no-such-flag is not an option" in text


def test_json_values_are_rendered_compactly():
    argv = f.sglang_argv({"model-loader-extra-config": {"enable_multithread_load": True, "num_threads": 16}})
    assert argv == ["--model-loader-extra-config", '{"enable_multithread_load":true,"num_threads":16}']


def test_unknown_version_says_which_snapshots_exist():
    with pytest.raises(AnsibleFilterError, match=r"no argparse snapshot for SGLang 0\.0\.1 \(have: .*0\.5\.23"):
        f.sglang_argv(KIMI, "0.0.1")


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["/opt/x/python", "-m", "sglang.launch_server"], "/opt/x/python -m sglang.launch_server"),
        (["/p", "50%"], "/p 50%%"),
        (["/p", "a b"], '/p "a b"'),
        (["/p", 'say "hi"'], '/p "say \\"hi\\""'),
        (["/p", "C:\\dir"], '/p "C:\\\\dir"'),
        (["/p", "$HOME"], '/p "$$HOME"'),
        (["/p", '{"num_threads":16}'], '/p "{\\"num_threads\\":16}"'),
        (["/p", ""], '/p ""'),
    ],
)
def test_systemd_quote(argv, expected):
    assert f.systemd_quote(argv) == expected


def test_systemd_quote_refuses_relative_executable_and_empty_argv():
    with pytest.raises(AnsibleFilterError):
        f.systemd_quote(["python3", "-m", "x"])
    with pytest.raises(AnsibleFilterError):
        f.systemd_quote([])
