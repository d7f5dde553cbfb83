"""GPU health for node exporter's textfile collector: what no stock exporter on these hosts reports.

Run by the sglang-gpu-health timer (roles/monitoring); writes Prometheus text exposition atomically to OUTPUT
(``<textfile dir>/sglang_gpu_health.prom``), which node exporter serves with its own metrics. Python 3 stdlib only.

From ``nvidia-smi`` (field names of ``nvidia-smi --help-query-gpu`` / ``--help-query-remapped-rows``, NVIDIA's
nvidia-smi documentation; a value ``[N/A]`` or ``[Not Supported]`` leaves the series out):

* ``clocks_event_reasons.{gpu_idle,sw_power_cap,hw_slowdown,hw_thermal_slowdown,hw_power_brake_slowdown,
  sw_thermal_slowdown}`` ("Active" / "Not Active"; drivers before R535 name them ``clocks_throttle_reasons.*``, which
  is asked when the new names are refused) -> ``sglang_gpu_clocks_event_reason_active{reason}`` 1/0;
* ``ecc.errors.{corrected,uncorrected}.volatile.total`` (since the driver loaded) ->
  ``sglang_gpu_ecc_errors_{corrected,uncorrected}_volatile_total``; ``retired_pages.pending`` (pre-Ampere page
  retirement; ``[N/A]`` on GPUs with row remapping) -> ``sglang_gpu_retired_pages_pending``;
* ``--query-remapped-rows=gpu_uuid,remapped_rows.{correctable,uncorrectable,pending,failure}`` ->
  ``sglang_gpu_remapped_rows_*`` (pending: a remap waits for the next GPU reset; failure: no spare row was left);
* ``pcie.link.gen.current`` / ``pcie.link.gen.max`` (the highest generation GPU and host support together) and
  ``pcie.link.width.current`` / ``.max`` -> ``sglang_gpu_pcie_link_{gen,width}_{current,max}``. A GPU lowers its link
  generation at idle on purpose, so the alert compares them only under load: ``utilization.gpu`` ->
  ``sglang_gpu_utilization_ratio``;
* how many GPUs answered -> ``sglang_gpus_present``, and ``--expected-gpus`` -> ``sglang_gpus_expected``;
  ``sglang_gpu_health_up`` is 0 when nvidia-smi failed (no driver, no devices, a timeout).

Xid events come from the kernel log: the NVIDIA driver writes ``NVRM: Xid (PCI:0000:18:00): 79, pid=..., name=...,
GPU has fallen off the bus.`` to the kernel ring buffer, which journald stores with ``_TRANSPORT=kernel`` (what
``journalctl -k`` reads). The collector reads ``journalctl -o json`` with the matches given (default
``_TRANSPORT=kernel``) after the cursor it kept, counts Xids per GPU (PCI address) and code for the current boot and
keeps counts and cursor in ``--state``: ``sglang_gpu_xid_errors_total{pci_bus_id,gpu,xid}`` and
``sglang_gpu_xid_reader_up``. The sandbox, whose containers have no kernel log of their own, feeds it with
``logger -t kernel`` and the match ``SYSLOG_IDENTIFIER=kernel`` (a real host's kernel lines carry that identifier
too, but so could any local user's; ``_TRANSPORT=kernel`` cannot be forged).

``sglang_gpu_health_last_run_timestamp_seconds`` says when it last ran (the stale-collector alert).

CLI: ``sglang_gpu_health.py --output FILE --state FILE [--nvidia-smi PATH] [--journalctl PATH]
[--journal-match FIELD=VALUE ...] [--expected-gpus N] [--timeout S]``
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

REASONS = ("gpu_idle", "sw_power_cap", "hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown",
           "sw_thermal_slowdown")
GPU_FIELDS = (["index", "pci.bus_id", "uuid", "utilization.gpu"]
              + ["clocks_event_reasons.%s" % r for r in REASONS]
              + ["ecc.errors.corrected.volatile.total", "ecc.errors.uncorrected.volatile.total",
                 "retired_pages.pending",
                 "pcie.link.gen.current", "pcie.link.gen.max", "pcie.link.width.current", "pcie.link.width.max"])
REMAP_FIELDS = ["gpu_uuid", "remapped_rows.correctable", "remapped_rows.uncorrectable", "remapped_rows.pending",
                "remapped_rows.failure"]
XID_RE = re.compile(r"NVRM: Xid \(PCI:([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.[0-9A-Fa-f])?\): (\d+)")
BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"


class ToolError(Exception):
    pass


def run_tool(argv, timeout):
    try:
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout,
                              universal_newlines=True, check=False)  # the exit status is read below
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolError("%s: %s" % (argv[0], exc))
    if proc.returncode != 0:
        raise ToolError("%s exited %d: %s" % (" ".join(argv[:2]), proc.returncode,
                                              (proc.stdout + proc.stderr).strip()[:300]))
    return proc.stdout


def is_marker(value):
    """nvidia-smi's answers for a value a GPU does not have: [N/A], [Not Supported], [Unknown Error], N/A."""
    value = value.strip()
    return value.startswith("[") or value in ("N/A", "")


def number(value):
    if is_marker(value):
        return None
    m = re.match(r"^\s*(-?[0-9.]+)", value)
    if m:
        return float(m.group(1))
    flag = value.strip().lower()
    if flag in ("yes", "active", "true", "enabled"):
        return 1.0
    if flag in ("no", "not active", "false", "disabled"):
        return 0.0
    return None


def parse_csv(text, fields):
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        values = [v.strip() for v in line.split(",")]
        if len(values) != len(fields):
            raise ToolError("nvidia-smi printed %d values for %d fields: %r" % (len(values), len(fields), line))
        rows.append(dict(zip(fields, values)))
    return rows


def query_gpus(nvidia_smi, timeout):
    """Per GPU: its fields (the R535+ names; the older clocks_throttle_reasons.* when those are refused)."""
    fmt = "--format=csv,noheader,nounits"
    try:
        text = run_tool([nvidia_smi, "--query-gpu=" + ",".join(GPU_FIELDS), fmt], timeout)
        fields = GPU_FIELDS
    except ToolError as exc:
        if "is not a valid field" not in str(exc):
            raise
        fields = [f.replace("clocks_event_reasons.", "clocks_throttle_reasons.") for f in GPU_FIELDS]
        text = run_tool([nvidia_smi, "--query-gpu=" + ",".join(fields), fmt], timeout)
    rows = parse_csv(text, fields)
    return [{k.replace("clocks_throttle_reasons.", "clocks_event_reasons."): v for k, v in r.items()} for r in rows]


def query_remapped_rows(nvidia_smi, timeout):
    """``{uuid: row}``; {} when the driver or GPU has no row remapper (the query is refused)."""
    try:
        text = run_tool([nvidia_smi, "--query-remapped-rows=" + ",".join(REMAP_FIELDS),
                         "--format=csv,noheader,nounits"], timeout)
    except ToolError as exc:
        if "exited" in str(exc) and "timed out" not in str(exc):
            return {}
        raise
    return {r["gpu_uuid"]: r for r in parse_csv(text, REMAP_FIELDS)}


def pci_key(bus_id):
    """``00000000:1B:00.0`` / ``0000:1b:00`` -> ``0000:1b:00`` (domain, bus, device; what an Xid line names)."""
    m = re.match(r"^([0-9A-Fa-f]{4,8}):([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})", bus_id.strip())
    if not m:
        return bus_id.strip().lower()
    return "%s:%s:%s" % (m.group(1)[-4:].lower(), m.group(2).lower(), m.group(3).lower())


def parse_xids(messages):
    """``[(pci key, xid)]`` from kernel log messages."""
    out = []
    for msg in messages:
        m = XID_RE.search(msg)
        if m:
            out.append((pci_key(m.group(1)), int(m.group(2))))
    return out


def read_journal(journalctl, matches, cursor, timeout):
    """(messages, last cursor) of this boot's entries after ``cursor`` with ``matches``."""
    argv = [journalctl, "--no-pager", "-o", "json", "-b"]
    argv += ["--after-cursor=%s" % cursor] if cursor else []
    argv += list(matches)
    text = run_tool(argv, timeout)
    messages, last = [], cursor
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        msg = entry.get("MESSAGE")
        if isinstance(msg, list):  # journald stores non-UTF-8 messages as byte arrays
            msg = bytes(b for b in msg if isinstance(b, int) and 0 <= b < 256).decode("utf-8", "replace")
        if isinstance(msg, str):
            messages.append(msg)
        last = entry.get("__CURSOR") or last
    return messages, last


def load_state(path, boot_id):
    try:
        with open(path) as fh:
            state = json.load(fh)
    except (OSError, ValueError):
        state = {}
    if state.get("boot_id") != boot_id or not isinstance(state.get("xids"), dict):
        state = {"boot_id": boot_id, "cursor": None, "xids": {}}
    return state


def _labels(**kw):
    return "{%s}" % ",".join('%s="%s"' % (k, str(v).replace("\\", "\\\\").replace('"', '\\"'))
                             for k, v in kw.items())


class Exposition:
    def __init__(self):
        self.meta, self.samples = {}, {}

    def add(self, name, kind, help_text, labels, value):
        if value is None:
            return
        self.meta.setdefault(name, (kind, help_text))
        self.samples.setdefault(name, []).append("%s%s %s" % (name, labels, repr(float(value))))

    def text(self):
        out = []
        for name in sorted(self.samples):
            kind, help_text = self.meta[name]
            out += ["# HELP %s %s" % (name, help_text), "# TYPE %s %s" % (name, kind)] + self.samples[name]
        return "\n".join(out) + "\n"


def collect(args, now=None, boot_id=None):
    """The exposition text and the new state."""
    now = time.time() if now is None else now
    ex = Exposition()
    gpus, by_pci = [], {}
    try:
        gpus = query_gpus(args.nvidia_smi, args.timeout)
        remap = query_remapped_rows(args.nvidia_smi, args.timeout)
        up = 1
    except ToolError as exc:
        sys.stderr.write("sglang-gpu-health: %s\n" % exc)
        remap, up = {}, 0
    ex.add("sglang_gpu_health_up", "gauge", "1 when nvidia-smi answered for every GPU.", "", up)
    ex.add("sglang_gpus_present", "gauge", "GPUs nvidia-smi lists.", "", len(gpus))
    if args.expected_gpus:
        ex.add("sglang_gpus_expected", "gauge", "GPUs this node must have.", "", args.expected_gpus)
    for g in gpus:
        labels = _labels(gpu=g["index"], pci_bus_id=g["pci.bus_id"], uuid=g["uuid"])
        by_pci[pci_key(g["pci.bus_id"])] = g
        util = number(g["utilization.gpu"])
        ex.add("sglang_gpu_utilization_ratio", "gauge", "utilization.gpu / 100.", labels,
               None if util is None else util / 100.0)
        for reason in REASONS:
            value = number(g["clocks_event_reasons.%s" % reason])
            ex.add("sglang_gpu_clocks_event_reason_active", "gauge",
                   "1 while the clock event (throttle) reason is active.",
                   _labels(gpu=g["index"], pci_bus_id=g["pci.bus_id"], uuid=g["uuid"], reason=reason), value)
        for kind in ("corrected", "uncorrected"):
            ex.add("sglang_gpu_ecc_errors_%s_volatile_total" % kind, "counter",
                   "ECC errors (%s) since the driver loaded." % kind, labels,
                   number(g["ecc.errors.%s.volatile.total" % kind]))
        ex.add("sglang_gpu_retired_pages_pending", "gauge", "1 while a page retirement waits for a GPU reset.",
               labels, number(g["retired_pages.pending"]))
        for field in ("gen.current", "gen.max", "width.current", "width.max"):
            ex.add("sglang_gpu_pcie_link_%s" % field.replace(".", "_"), "gauge", "pcie.link.%s." % field, labels,
                   number(g["pcie.link.%s" % field]))
        row = remap.get(g["uuid"])
        if row:
            for field, help_text in (("correctable", "Rows remapped for correctable errors."),
                                     ("uncorrectable", "Rows remapped for uncorrectable errors."),
                                     ("pending", "1 while a row remap waits for a GPU reset."),
                                     ("failure", "1 when a row remap failed (no spare row).")):
                ex.add("sglang_gpu_remapped_rows_%s" % field, "gauge", help_text, labels,
                       number(row["remapped_rows.%s" % field]))

    state = load_state(args.state, boot_id if boot_id is not None else _boot_id())
    try:
        messages, cursor = read_journal(args.journalctl, args.journal_match, state.get("cursor"), args.timeout)
        for key, xid in parse_xids(messages):
            slot = "%s/%d" % (key, xid)
            state["xids"][slot] = state["xids"].get(slot, 0) + 1
        state["cursor"] = cursor
        reader_up = 1
    except ToolError as exc:
        sys.stderr.write("sglang-gpu-health: %s\n" % exc)
        reader_up = 0
    ex.add("sglang_gpu_xid_reader_up", "gauge", "1 when the kernel log was read.", "", reader_up)
    for slot in sorted(state["xids"]):
        key, xid = slot.rsplit("/", 1)
        g = by_pci.get(key)
        ex.add("sglang_gpu_xid_errors_total", "counter", "NVRM Xid events in the kernel log since boot.",
               _labels(gpu=g["index"] if g else "unknown", pci_bus_id=g["pci.bus_id"] if g else key, xid=xid),
               state["xids"][slot])
    ex.add("sglang_gpu_health_last_run_timestamp_seconds", "gauge", "When the collector last ran.", "", now)
    return ex.text(), state


def _boot_id():
    try:
        with open(BOOT_ID_PATH) as fh:
            return fh.read().strip()
    except OSError:
        return ""


def write_atomic(path, text):
    """Write beside the target and rename (node exporter never reads a half-written file)."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=directory)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--output", required=True)
    ap.add_argument("--state", required=True)
    ap.add_argument("--nvidia-smi", default="nvidia-smi")
    ap.add_argument("--journalctl", default="journalctl")
    ap.add_argument("--journal-match", action="append", default=None,
                    help="journalctl match, repeatable (default _TRANSPORT=kernel)")
    ap.add_argument("--expected-gpus", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=20.0)
    args = ap.parse_args(argv)
    args.journal_match = args.journal_match or ["_TRANSPORT=kernel"]
    text, state = collect(args)
    write_atomic(args.output, text)
    write_atomic(args.state, json.dumps(state) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
