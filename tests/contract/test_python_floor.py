"""The Python floor preflight enforces (deployment_python_floor) is the pinned sglang wheel's own Requires-Python, read
from the real package's metadata in .venv-sglang (tests/contract/install_real_sglang.sh), and every distribution of
the prerequisites map ships a python3 that reaches it."""

import pathlib
import subprocess

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
SGLANG_PY = ROOT / ".venv-sglang" / "bin" / "python"
DEFAULTS = yaml.safe_load((ROOT / "roles" / "deployment" / "defaults" / "main" / "main.yml").read_text())


@pytest.mark.skipif(not SGLANG_PY.exists(), reason=".venv-sglang is absent: run tests/contract/install_real_sglang.sh")
def test_the_floor_is_the_wheels_requires_python():
    out = subprocess.run([str(SGLANG_PY), "-c", "from importlib.metadata import metadata as m; "
                          "d = m('sglang'); print(d['Version']); print(d['Requires-Python'])"],
                         capture_output=True, text=True, timeout=120, check=True).stdout.split("\n")
    assert out[0] == DEFAULTS["deployment_sglang_version"]
    assert out[1].replace(" ", "") == ">=" + DEFAULTS["deployment_python_floor"]


def test_every_mapped_distribution_reaches_the_floor():
    prerequisites = yaml.safe_load((ROOT / "roles" / "host_prerequisites" / "defaults" / "main.yml").read_text())
    floor = tuple(int(x) for x in DEFAULTS["deployment_python_floor"].split("."))
    for key, entry in prerequisites["host_prerequisites_distributions"].items():
        assert tuple(int(x) for x in entry["python"].split(".")) >= floor, key
