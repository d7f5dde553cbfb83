"""The pins every release is installed with (constraints.txt) are the pinned SGLang release's own.

sglang 0.5.23 pins its kernel stack exactly in its wheel's Requires-Dist (read here from the real package's metadata in
.venv-sglang, tests/contract/install_real_sglang.sh): torch, sglang-kernel and flashinfer_python. The product writes
constraints.txt from sglang_build_torch_version, flashinfer_build_version and sglang_build_constraints
(roles/sglang_build/tasks/main.yml); each must say what the wheel says, or pip either refuses the install (a pin that
contradicts sglang's) or the release holds a stack SGLang was never released with. triton comes through torch: its pin
must satisfy the pinned torch's own requirement, read from torch 2.14.1's metadata by pip itself.
"""

import json
import pathlib
import subprocess
import sys

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = pathlib.Path(__file__).resolve().parents[2]
SGLANG_PY = ROOT / ".venv-sglang" / "bin" / "python"
DEPLOYMENT = yaml.safe_load((ROOT / "roles" / "deployment" / "defaults" / "main" / "main.yml").read_text())
SGLANG_BUILD = yaml.safe_load((ROOT / "roles" / "deployment" / "defaults" / "main" / "sglang_build.yml").read_text())
FLASHINFER_BUILD = yaml.safe_load((ROOT / "roles" / "flashinfer_build" / "defaults" / "main.yml").read_text())

needs_wheel = pytest.mark.skipif(not SGLANG_PY.exists(),
                                 reason=".venv-sglang is absent: run tests/contract/install_real_sglang.sh")


def _product_pins():
    """{canonical name: version} of constraints.txt as the roles' defaults write it (wheel methods)."""
    pins = ["torch==" + SGLANG_BUILD["sglang_build_torch_version"],
            "flashinfer-python==" + FLASHINFER_BUILD["flashinfer_build_version"]]
    pins += SGLANG_BUILD["sglang_build_constraints"]
    out = {}
    for pin in pins:
        req = Requirement(pin)
        (spec,) = req.specifier
        assert spec.operator == "==", pin
        out[canonicalize_name(req.name)] = spec.version
    return out


def _requires(python, distribution):
    text = subprocess.run([str(python), "-c", "import json, sys; from importlib.metadata import requires, version; "
                           "print(json.dumps([version(sys.argv[1]), requires(sys.argv[1])]))", distribution],
                          capture_output=True, text=True, timeout=120, check=True).stdout
    return json.loads(text)


@needs_wheel
def test_the_release_pins_are_the_sglang_wheels_own_exact_pins():
    version, requires = _requires(SGLANG_PY, "sglang")
    assert version == DEPLOYMENT["deployment_sglang_version"]
    exact = {}
    for line in requires:
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue  # an extra's requirement (sglang[test], ...) is not the release's
        specs = list(req.specifier)
        if len(specs) == 1 and specs[0].operator == "==":
            exact[canonicalize_name(req.name)] = specs[0].version
    pins = _product_pins()
    for name in ("torch", "sglang-kernel", "flashinfer-python"):
        assert name in exact, "sglang %s no longer pins %s exactly: %s" % (version, name, requires)
        assert pins[name] == exact[name], "%s: constraints.txt pins %s, sglang %s requires ==%s" % (
            name, pins[name], version, exact[name])


def test_the_triton_pin_satisfies_the_pinned_torchs_requirement():
    torch = "torch==" + SGLANG_BUILD["sglang_build_torch_version"]
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--no-deps", "--ignore-installed",
                           "--report", "-", torch], capture_output=True, text=True, timeout=600, check=False)
    if proc.returncode != 0:
        pytest.skip("pip cannot resolve %s here (no index holds it): %s" % (torch, proc.stderr.strip()[-300:]))
    (item,) = json.loads(proc.stdout)["install"]
    requires = [Requirement(r) for r in item["metadata"].get("requires_dist", [])]
    linux = {"platform_system": "Linux", "sys_platform": "linux", "python_version": "3.11", "extra": ""}
    (triton,) = [r for r in requires if canonicalize_name(r.name) == "triton" and r.marker.evaluate(linux)]
    pinned = _product_pins()["triton"]
    assert triton.specifier.contains(pinned), "triton==%s does not satisfy %s's %s" % (pinned, torch, triton)
