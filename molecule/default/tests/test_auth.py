"""The gateway on a deployed node (issue 19): the public port takes a request only with the deployment's key, SGLang
itself listens on loopback only, and the key is nowhere a reader can see it but the 0600 keys file - not on the node,
not in the smoke's reports, not in Ansible's output at -vvv of a re-run of the service, gateway and smoke plays."""

import json
import os
import pathlib
import re
import subprocess
import sys

import testinfra.utils.ansible_runner

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests" / "sandbox"))
from sandbox_keys import sandbox_api_keys  # noqa: E402 - the harness's module, on the path just above

testinfra_hosts = [
    f"podman://{name}"
    for name in testinfra.utils.ansible_runner.AnsibleRunner(os.environ["MOLECULE_INVENTORY_FILE"]).get_hosts(
        "gpu_nodes"
    )
]

KEY = sandbox_api_keys()[0]["key"]
# The key as the keys file writes it (every non-alphanumeric escaped) still holds its longest alphanumeric run.
RUN = max(re.findall(r"[A-Za-z0-9]+", KEY), key=len)
GET = ("python3 -c 'import sys,urllib.request as u,urllib.error as e\n"
       "r=u.Request(sys.argv[1], headers=dict([sys.argv[2].split(\": \",1)]) if len(sys.argv)>2 else {})\n"
       "try: print(u.urlopen(r, timeout=20).status)\n"
       "except e.HTTPError as x: print(x.code)' ")


def _status(host, url, header=None):
    out = host.run(GET + url + (" 'Authorization: Bearer %s'" % header if header else ""))
    assert out.rc == 0, out.stderr
    return int(out.stdout.strip())


def _leaks(text):
    return KEY in text or RUN in text


def test_the_public_port_refuses_without_the_key_and_serves_with_it(host):
    assert _status(host, "http://127.0.0.1:30000/v1/models") == 401
    assert _status(host, "http://127.0.0.1:30000/v1/models", "x" * 44) == 401
    assert _status(host, "http://127.0.0.1:30000/health_generate") == 401
    assert _status(host, "http://127.0.0.1:30000/v1/models", KEY) == 200
    # a probe from the node itself (loopback is a probe source)
    assert _status(host, "http://127.0.0.1:30000/health") == 200


def test_sglang_listens_on_loopback_only_and_nginx_is_the_public_entry(host):
    listeners = host.run("ss -Hltnp").stdout
    assert re.search(r"127\.0\.0\.1:30001 ", listeners), listeners
    assert not re.search(r"(0\.0\.0\.0|\*|\[::\]):30001 ", listeners), listeners
    assert re.search(r"0\.0\.0\.0:30000 .*nginx", listeners), listeners
    assert not re.search(r":80 ", listeners), "Debian's default site is still enabled"


def test_the_keys_file_is_root_only_and_the_only_place_on_the_node_with_the_key(host):
    keys = host.file("/etc/nginx/sglang-gateway-keys.conf")
    assert keys.mode == 0o600 and keys.user == "root" and keys.group == "root"
    assert RUN in keys.content_string and "sandbox" in keys.content_string  # the search below can find it
    found = host.run("grep -rlF %s /etc /var/log /run /var/lib /root /tmp 2>/dev/null" % RUN).stdout.split()
    assert found == ["/etc/nginx/sglang-gateway-keys.conf"], found
    for where, text in [
        ("the journal", host.run("journalctl --no-pager -o cat").stdout),
        ("systemctl show", host.run("systemctl show '*'").stdout),
        ("process command lines", host.run("cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '").stdout),
        ("process environments", host.run("cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' ' '").stdout),
        ("SGLang's /server_info", host.run(GET.replace("print(u.urlopen(r, timeout=20).status)",
                                                       "print(u.urlopen(r, timeout=20).read().decode())")
                                           + "http://127.0.0.1:30001/server_info").stdout),
    ]:
        assert not _leaks(text), f"the API key leaks into {where}"
    assert "key=sandbox" in host.file("/var/log/nginx/sglang-gateway-sglang.access.log").content_string


def test_the_key_is_not_in_the_reports_nor_in_ansible_output_at_vvv(host):
    reports = list((ROOT / "reports").glob("*.json"))
    assert reports, "the smoke wrote no report"
    for report in reports:
        assert not _leaks(report.read_text()), report
    assert json.loads(reports[0].read_text()).get("smoke_summary")
    # A re-run of the plays that handle the key (the keys file, the smoke's requests), as verbose as Ansible gets.
    scenario = pathlib.Path(os.environ["MOLECULE_SCENARIO_DIRECTORY"])
    run = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-vvv",
         "-i", os.environ["MOLECULE_INVENTORY_FILE"], str(scenario / "converge.yml"),
         "--tags", "sglang_service,smoke_health"],
        capture_output=True, text=True, timeout=900, cwd=str(ROOT))
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-4000:]
    assert "Write the keys (0600 root" in output and "Prove the endpoint serves chat" in output
    assert not _leaks(output), "the API key appears in ansible-playbook -vvv output"
