"""The GPU health textfile collector (roles/monitoring/files/sglang_gpu_health.py) against the GPU stand-in
(tests/sandbox/fake_nvidia_smi.py, run as a process with its state file) and a journalctl stand-in that serves JSON
entries and honours --after-cursor; the exposition is linted with the real promtool (check metrics)."""

import json
import os
import pathlib
import shutil
import stat
import subprocess
import sys
import types

import pytest

ROOT = str(pathlib.Path(__file__).resolve().parents[3])
sys.path.insert(0, os.path.join(ROOT, "roles", "monitoring", "files"))
import sglang_gpu_health as gh  # noqa: E402

SMI = os.path.join(ROOT, "tests", "sandbox", "fake_nvidia_smi.py")

JOURNALCTL = r'''#!%s
import json, sys
entries = [json.loads(l) for l in open(%r) if l.strip()]
after = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--after-cursor=")), None)
matches = [a for a in sys.argv[1:] if "=" in a and not a.startswith("--")]
if after is not None:
    idx = [e["__CURSOR"] for e in entries].index(after)
    entries = entries[idx + 1:]
for e in entries:
    if all(e.get(m.split("=", 1)[0]) == m.split("=", 1)[1] for m in matches):
        print(json.dumps(e))
'''


@pytest.fixture
def node(tmp_path):
    """A GPU state file, the nvidia-smi stand-in reading it, a journal file and its journalctl."""
    state = tmp_path / "gpus.json"
    state.write_text(json.dumps({"process_state_dir": str(tmp_path / "none")}))
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\nFAKE_NVIDIA_SMI_CONFIG=%s exec %s %s \"$@\"\n" % (state, sys.executable, SMI))
    journal = tmp_path / "journal.jsonl"
    journal.write_text("")
    jctl = tmp_path / "journalctl"
    jctl.write_text(JOURNALCTL % (sys.executable, str(journal)))
    for f in (smi, jctl):
        f.chmod(f.stat().st_mode | stat.S_IXUSR)
    return types.SimpleNamespace(tmp=tmp_path, state=state, smi=str(smi), journal=journal, jctl=str(jctl))


def _args(node, **kw):
    ns = types.SimpleNamespace(nvidia_smi=node.smi, journalctl=node.jctl, journal_match=["_TRANSPORT=kernel"],
                               expected_gpus=8, timeout=20.0, state=str(node.tmp / "state.json"),
                               output=str(node.tmp / "out.prom"))
    ns.__dict__.update(kw)
    return ns


def _samples(text):
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def _get(samples, name, **labels):
    hits = [v for k, v in samples.items() if k.split("{")[0] == name
            and all('%s="%s"' % kv in k for kv in labels.items())]
    assert len(hits) == 1, (name, labels, [k for k in samples if k.startswith(name)])
    return hits[0]


def _set_gpus(node, gpus, **top):
    raw = {"process_state_dir": str(node.tmp / "none"), "gpus": gpus}
    raw.update(top)
    node.state.write_text(json.dumps(raw))


def _kernel(node, *lines, transport="kernel"):
    n = sum(1 for _ in open(node.journal))
    with open(node.journal, "a") as fh:
        for line in lines:
            n += 1
            fh.write(json.dumps({"__CURSOR": "c%d" % n, "_TRANSPORT": transport, "MESSAGE": line}) + "\n")


def _promtool():
    path = os.path.join(os.path.dirname(sys.executable), "promtool")
    return path if os.access(path, os.X_OK) else shutil.which("promtool")


def test_healthy_idle_node(node):
    text, state = gh.collect(_args(node), now=1000.0, boot_id="b1")
    s = _samples(text)
    assert _get(s, "sglang_gpu_health_up") == 1 and _get(s, "sglang_gpus_present") == 8
    assert _get(s, "sglang_gpus_expected") == 8 and _get(s, "sglang_gpu_xid_reader_up") == 1
    assert _get(s, "sglang_gpu_clocks_event_reason_active", gpu="0", reason="gpu_idle") == 1
    assert _get(s, "sglang_gpu_clocks_event_reason_active", gpu="0", reason="hw_thermal_slowdown") == 0
    # idle: the link runs at gen 1 of 5 on purpose, at full width
    assert _get(s, "sglang_gpu_pcie_link_gen_current", gpu="0") == 1 and _get(s, "sglang_gpu_pcie_link_gen_max", gpu="0") == 5
    assert _get(s, "sglang_gpu_pcie_link_width_current", gpu="7") == 16
    assert _get(s, "sglang_gpu_remapped_rows_pending", gpu="2") == 0
    assert _get(s, "sglang_gpu_utilization_ratio", gpu="0") == 0
    assert not any(k.startswith("sglang_gpu_retired_pages_pending") for k in s), "[N/A] must leave the series out"
    assert not any(k.startswith("sglang_gpu_xid_errors_total") for k in s)
    assert _get(s, "sglang_gpu_health_last_run_timestamp_seconds") == 1000.0
    assert state == {"boot_id": "b1", "cursor": None, "xids": {}}


def test_injected_faults_show(node):
    gpus = [{} for _ in range(8)]
    gpus[0] = {"clocks_event_reasons": ["hw_thermal_slowdown"], "utilization_gpu_pct": 97, "pstate": "P0"}
    gpus[2] = {"remapped_rows_pending": True, "ecc_errors_uncorrected_volatile": 3, "remapped_rows_uncorrectable": 1}
    gpus[5] = {"pcie_link_width_current": 8, "pcie_link_gen_current": 3, "utilization_gpu_pct": 90, "pstate": "P0"}
    gpus[6] = {"remapped_rows_failure": True}
    _set_gpus(node, gpus)
    s = _samples(gh.collect(_args(node), now=1.0, boot_id="b")[0])
    assert _get(s, "sglang_gpu_clocks_event_reason_active", gpu="0", reason="hw_thermal_slowdown") == 1
    assert _get(s, "sglang_gpu_clocks_event_reason_active", gpu="0", reason="gpu_idle") == 0
    assert _get(s, "sglang_gpu_pcie_link_gen_current", gpu="0") == 5, "busy: full speed"
    assert _get(s, "sglang_gpu_remapped_rows_pending", gpu="2") == 1
    assert _get(s, "sglang_gpu_remapped_rows_uncorrectable", gpu="2") == 1
    assert _get(s, "sglang_gpu_ecc_errors_uncorrected_volatile_total", gpu="2") == 3
    assert _get(s, "sglang_gpu_pcie_link_width_current", gpu="5") == 8
    assert _get(s, "sglang_gpu_pcie_link_gen_current", gpu="5") == 3
    assert _get(s, "sglang_gpu_utilization_ratio", gpu="5") == 0.9
    assert _get(s, "sglang_gpu_remapped_rows_failure", gpu="6") == 1


def test_a_lost_gpu_and_a_dead_driver(node):
    _set_gpus(node, [{} for _ in range(7)])
    s = _samples(gh.collect(_args(node), now=1.0, boot_id="b")[0])
    assert _get(s, "sglang_gpus_present") == 7 and _get(s, "sglang_gpus_expected") == 8
    _set_gpus(node, [{} for _ in range(8)], failure="nvml_error")
    _kernel(node, "NVRM: Xid (PCI:0000:61:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.")
    s = _samples(gh.collect(_args(node), now=1.0, boot_id="b")[0])
    assert _get(s, "sglang_gpu_health_up") == 0 and _get(s, "sglang_gpus_present") == 0
    # the Xid is still counted, by its PCI address (no GPU list to name its index)
    assert _get(s, "sglang_gpu_xid_errors_total", gpu="unknown", pci_bus_id="0000:61:00", xid="79") == 1


def test_xids_are_counted_once_per_event_and_per_boot(node):
    args = _args(node)
    _kernel(node, "NVRM: Xid (PCI:0000:61:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
            "NVRM: Xid (PCI:0000:43:00): 13, pid=4242, name=python3, Graphics SM Warp Exception",
            "usb 1-1: new high-speed USB device")
    _kernel(node, "NVRM: Xid (PCI:0000:61:00): 79, forged by a user", transport="syslog")
    text, state = gh.collect(args, now=1.0, boot_id="b1")
    s = _samples(text)
    assert _get(s, "sglang_gpu_xid_errors_total", gpu="3", pci_bus_id="00000000:61:00.0", xid="79") == 1
    assert _get(s, "sglang_gpu_xid_errors_total", gpu="1", xid="13") == 1
    assert state["cursor"] == "c3", "the last kernel entry read (the forged syslog line is not one)"
    with open(args.state, "w") as fh:
        json.dump(state, fh)
    s = _samples(gh.collect(args, now=2.0, boot_id="b1")[0])
    assert _get(s, "sglang_gpu_xid_errors_total", gpu="3", xid="79") == 1, "already counted entries count again"
    _kernel(node, "NVRM: Xid (PCI:0000:61:00.0): 79, pid=1, name=x, GPU has fallen off the bus.")
    text, state = gh.collect(args, now=3.0, boot_id="b1")
    assert _get(_samples(text), "sglang_gpu_xid_errors_total", gpu="3", xid="79") == 2
    with open(args.state, "w") as fh:
        json.dump(state, fh)
    # a new boot starts from zero (a counter reset for Prometheus) and reads this boot's journal from its start
    text, state = gh.collect(args, now=4.0, boot_id="b2")
    assert state["boot_id"] == "b2" and _get(_samples(text), "sglang_gpu_xid_errors_total", gpu="3", xid="79") == 2


def test_the_sandbox_match_reads_logger_lines(node):
    _kernel(node, "NVRM: Xid (PCI:0000:1b:00): 48, pid=7, name=x, An uncorrectable double bit error", transport="syslog")
    s = _samples(gh.collect(_args(node, journal_match=["_TRANSPORT=syslog"]), now=1.0, boot_id="b")[0])
    assert _get(s, "sglang_gpu_xid_errors_total", gpu="0", xid="48") == 1


def test_an_older_driver_with_throttle_reason_names(node, tmp_path):
    old = tmp_path / "old-smi"
    old.write_text("#!/bin/sh\ncase \"$*\" in *clocks_event_reasons*) echo 'Field \"clocks_event_reasons.gpu_idle\" "
                   "is not a valid field to query.'; exit 2;; esac\nexec %s \"$@\"\n" % node.smi)
    old.chmod(0o755)
    s = _samples(gh.collect(_args(node, nvidia_smi=str(old)), now=1.0, boot_id="b")[0])
    assert _get(s, "sglang_gpu_clocks_event_reason_active", gpu="4", reason="gpu_idle") == 1


def test_journal_failure_keeps_gpu_metrics(node):
    s = _samples(gh.collect(_args(node, journalctl="/nonexistent/journalctl"), now=1.0, boot_id="b")[0])
    assert _get(s, "sglang_gpu_xid_reader_up") == 0 and _get(s, "sglang_gpus_present") == 8


def test_parse_xids_formats():
    assert gh.parse_xids([
        "NVRM: Xid (PCI:0000:18:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
        "[12345.678] NVRM: Xid (PCI:0001:c3:00): 94, pid=10, name=python, Contained: SM (0x1).",
        "NVRM: GPU at PCI:0000:18:00: GPU-abc", "NVRM: Xid (PCI:0000:18:00): notanumber"]) == [
        ("0000:18:00", 79), ("0001:c3:00", 94)]
    assert gh.pci_key("00000000:C3:00.0") == "0000:c3:00"


def test_main_writes_a_valid_exposition_atomically(node):
    _kernel(node, "NVRM: Xid (PCI:0000:61:00): 79, pid=1, name=x, GPU has fallen off the bus.")
    out = node.tmp / "textfile" / "sglang_gpu_health.prom"
    out.parent.mkdir()
    argv = ["--output", str(out), "--state", str(node.tmp / "state.json"), "--nvidia-smi", node.smi,
            "--journalctl", node.jctl, "--expected-gpus", "8"]
    assert gh.main(argv) == 0
    assert sorted(os.listdir(out.parent)) == ["sglang_gpu_health.prom"]
    assert oct(out.stat().st_mode & 0o777) == "0o644"
    text = out.read_text()
    assert 'sglang_gpu_xid_errors_total{gpu="3",pci_bus_id="00000000:61:00.0",xid="79"} 1.0' in text
    promtool = _promtool()
    if promtool:  # scripts/bootstrap.sh puts it into .venv/bin
        r = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads((node.tmp / "state.json").read_text())["xids"] == {"0000:61:00/79": 1}
