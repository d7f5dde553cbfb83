"""A fleet's wheelhouse as roles/release_wheelhouse makes it: downloaded once, served by nginx, installed from by every
node, with the real pip, nginx and uv.

The downloads are the role's own (``wheelhouse_download_commands`` on pins shaped like ``sglang_build_pins``), run with
the real pip against a local index (the sandbox artifacts' build-backend wheels stand in for PyPI); the site is the
role's template in Debian's nginx; the nodes are two releases installed with the product's own uv command
(``release_install_command``) from ``--no-index --find-links http://127.0.0.1:<port>/``, sharing one package cache, as
two releases on one node do. What crosses the wire is read from nginx's access log: the second release fetches no wheel.
"""

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from ansible_collections.blackwell.sglang.plugins.filter.build_release import (release_install_command,
                                                                               wheelhouse_download_commands)

ROOT = Path(__file__).resolve().parents[2]
ROLE = ROOT / "roles" / "release_wheelhouse"
SOURCE = ROOT / ".sandbox" / "artifacts" / "wheelhouse"  # tests/sandbox/build_artifacts.py: setuptools, wheel, ninja
NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
sys.path.insert(0, str(ROOT / "tests" / "standins"))

from test_release_installer import uv  # noqa: E402,F401 - the role's pinned uv, a module-scoped fixture

pytestmark = [
    pytest.mark.skipif(NGINX is None, reason="nginx is not installed (scripts/bootstrap.sh installs it)"),
    pytest.mark.skipif(not any(SOURCE.glob("ninja-*.whl")),
                       reason="no artifacts: run tests/sandbox/build_artifacts.py first"),
]


def _pin(project):
    wheel = next(SOURCE.glob("%s-*.whl" % project))
    return "%s==%s" % (project, wheel.name.split("-")[1])


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _render(variables):
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    text = (ROLE / "templates" / "wheelhouse.conf.j2").read_text()
    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(text))


@pytest.fixture()
def wheelhouse(tmp_path):
    """The role's downloads into a fresh directory with the real pip; (directory, pins, the downloads' outputs)."""
    house = tmp_path / "wheelhouse"
    (house / ".stacks").mkdir(parents=True)
    pins = {"method": "wheel", "requirements": [_pin("ninja")], "installer": _pin("wheel"),
            "constraints": _pin("ninja") + "\n", "torch": {"version": "2.14.1", "index_url": "", "pip_args": []},
            "jit_cache": {"requirement": "", "pip_args": []}}
    constraints = house / ".stacks" / "stack.constraints.txt"
    constraints.write_text(pins["constraints"])
    pip = tmp_path / "pip"
    subprocess.run([sys.executable, "-m", "venv", str(pip)], check=True)
    runs = wheelhouse_download_commands(pins, str(house), str(pip / "bin" / "pip"), str(constraints),
                                        ["--no-index", "--find-links", str(SOURCE)], [])
    outputs = [subprocess.run(argv, check=True, capture_output=True, text=True).stdout for argv in runs]
    return house, pins, outputs, runs


@pytest.fixture()
def served(tmp_path, wheelhouse):
    house = wheelhouse[0]
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    port = _free_port()
    conf = _render({"ansible_managed": "test", "release_wheelhouse_dir": str(house),
                    "release_wheelhouse_listen_address": "127.0.0.1", "release_wheelhouse_port": port})
    assert defaults["release_wheelhouse_port"] and "autoindex on;" in conf
    run = tmp_path / "nginx"
    run.mkdir()
    (run / "wheelhouse.conf").write_text(conf)
    (run / "nginx.conf").write_text(
        # the workers read pytest's private temporary directory as its owner (the role's is 0755, read as www-data)
        "%(user)spid %(t)s/nginx.pid; error_log %(t)s/error.log; worker_processes 1; daemon off;\n"
        "events { worker_connections 64; }\n"
        "http { client_body_temp_path %(t)s/body; proxy_temp_path %(t)s/proxy; access_log %(t)s/access.log;\n"
        "       include %(t)s/wheelhouse.conf; }\n" % {"t": run, "user": "user root root; " if os.geteuid() == 0 else ""})
    proc = subprocess.Popen([NGINX, "-p", str(run), "-c", str(run / "nginx.conf")], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError("nginx did not start: %s" % (run / "error.log").read_text())
                time.sleep(0.05)
        yield "http://127.0.0.1:%d/" % port, run / "access.log"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_the_downloads_fill_the_wheelhouse_once_and_a_second_run_downloads_nothing(wheelhouse):
    house, pins, outputs, runs = wheelhouse
    assert sorted(p.name.split("-")[0] for p in house.glob("*.whl")) == ["ninja", "wheel"]
    assert all(argv[1:5] == ["download", "--disable-pip-version-check", "--only-binary=:all:", "--dest"] for argv in runs)
    assert any("Saved " in out for out in outputs)
    again = [subprocess.run(argv, check=True, capture_output=True, text=True).stdout for argv in runs]
    assert not any("Saved " in out for out in again), again  # the role's changed_when: nothing new


def _release(tmp_path, name, pins):
    release = tmp_path / "releases" / name
    release.mkdir(parents=True)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(release / "venv")], check=True)
    (release / "constraints.txt").write_text(pins["constraints"])
    return release


def _wheel_fetches(log):
    """Requests that read a wheel: whole (200) or a range of it (206: uv reads a remote wheel's metadata that way)."""
    return [line for line in log.read_text().splitlines() if re.search(r'"GET /[^ ]+\.whl [^"]*" 20[06] ', line)]


def test_every_node_installs_from_it_and_a_second_release_fetches_no_wheel(tmp_path, wheelhouse, served, uv):  # noqa: F811
    house, pins, _outputs, _runs = wheelhouse
    url, access = served
    for count, name in enumerate(("first", "second"), start=1):
        release = _release(tmp_path, name, pins)
        command = release_install_command({
            "release": str(release), "installer": "uv", "uv": str(uv), "cache_dir": str(tmp_path / "package-cache"),
            "compile_bytecode": False, "nice": 0, "pip_args": ["--no-index", "--find-links", url],
            "torch": pins["torch"], "jit_cache": pins["jit_cache"], "requirements": pins["requirements"]})
        subprocess.run(["bash", "-c", command], check=True)
        assert (release / "venv" / "bin" / "ninja").exists(), (release / "build.log").read_text()
        if count == 1:
            fetched = _wheel_fetches(access)
            assert fetched and all("ninja-" in line for line in fetched) and any('" 200 ' in line for line in fetched)
    # the second release: from the node's package cache alone, not one byte of a wheel again
    assert _wheel_fetches(access) == fetched, access.read_text()


def test_its_records_are_not_served(served, wheelhouse):
    import urllib.error
    import urllib.request

    url, _access = served
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(url + ".stacks/stack.constraints.txt", timeout=5)
    assert err.value.code == 404
    index = urllib.request.urlopen(url, timeout=5).read().decode()
    assert "ninja-" in index and ".stacks" not in index
