#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: sglang_benchmark_chart
short_description: Draw serving benchmark sweeps as a PNG chart (throughput and p99 TTFT against concurrency)
extends_documentation_fragment:
  - blackwell.sglang.common
  - blackwell.sglang.common.no_diff
description:
  - Draws one or more sweeps of M(blackwell.sglang.sglang_benchmark) (for example two configurations of one node)
    as a PNG with two panels sharing a logarithmic concurrency axis - output tokens/s, and p99 time to first token in
    ms on a logarithmic scale - one colour per sweep and one line style per workload, with a legend.
  - Meant for the controller (delegated to localhost); needs matplotlib there (the collection's requirements.txt).
  - Writes O(dest) only when the drawing differs from the file there (PNG metadata carries no date).
options:
  sweeps:
    description: The sweeps, each C(label) and C(results) (the module's C(results) list).
    type: list
    elements: dict
    required: true
  title:
    description: The chart's title.
    type: str
    default: SGLang serving benchmark
  dest:
    description: The PNG file.
    type: path
    required: true
requirements:
  - matplotlib
attributes:
  check_mode:
    support: full
    description: Draws nothing; says whether the file would be written.
"""

EXAMPLES = r"""
- name: Chart the node's sweep on the controller
  blackwell.sglang.sglang_benchmark_chart:
    sweeps: [{label: deployed, results: "{{ sweep.results }}"}]
    dest: reports/benchmark-gpu-0.png
  delegate_to: localhost
"""

RETURN = r"""
dest:
  description: The PNG written.
  returned: success
  type: str
"""

import io
import os
import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

try:
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot
    HAS_MATPLOTLIB, MATPLOTLIB_ERROR = True, None
except ImportError:
    HAS_MATPLOTLIB, MATPLOTLIB_ERROR = False, traceback.format_exc()


def draw(sweeps, title):
    """The PNG's bytes."""
    fig, (top, bottom) = pyplot.subplots(2, 1, figsize=(8, 7), sharex=True)
    workloads = sorted({r["workload"] for s in sweeps for r in s.get("results") or []})
    styles = ["-", "--", ":", "-."]
    for index, sweep in enumerate(sweeps):  # a colour per configuration, a line style per workload
        colour = "C%d" % (index % 10)
        by_workload = {}
        for r in sweep.get("results") or []:
            by_workload.setdefault(r["workload"], []).append(r)
        for workload, runs in sorted(by_workload.items()):
            runs = sorted(runs, key=lambda r: r["concurrency"])
            x = [r["concurrency"] for r in runs]
            style = dict(color=colour, linestyle=styles[workloads.index(workload) % len(styles)], marker="o",
                         label="%s, %s" % (sweep.get("label", "?"), workload))
            top.plot(x, [r.get("output_tokens_per_s") or 0 for r in runs], **style)
            bottom.plot(x, [max(r.get("ttft_p99_ms") or 0, 0.1) for r in runs], **style)
    top.set_ylabel("output tokens/s")
    bottom.set_ylabel("p99 time to first token (ms, log)")
    bottom.set_yscale("log")
    bottom.set_xlabel("concurrency (requests in flight)")
    bottom.set_xscale("log", base=2)
    concurrencies = sorted({r["concurrency"] for s in sweeps for r in s.get("results") or []})
    bottom.set_xticks(concurrencies)
    bottom.set_xticklabels([str(c) for c in concurrencies])
    for axis in (top, bottom):
        axis.grid(True, alpha=0.3)
    top.legend(fontsize="small")
    top.set_title(title)
    fig.tight_layout()
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=100, metadata={"Software": None})
    pyplot.close(fig)
    return out.getvalue()


def main():
    module = AnsibleModule(
        argument_spec=dict(sweeps=dict(type="list", elements="dict", required=True),
                           title=dict(type="str", default="SGLang serving benchmark"),
                           dest=dict(type="path", required=True)),
        supports_check_mode=True,
    )
    if not HAS_MATPLOTLIB:
        module.fail_json(msg=missing_required_lib("matplotlib"), exception=MATPLOTLIB_ERROR)
    data = draw(module.params["sweeps"], module.params["title"])
    dest = module.params["dest"]
    try:
        with open(dest, "rb") as fh:
            changed = fh.read() != data
    except OSError:
        changed = True
    if changed and not module.check_mode:
        os.makedirs(os.path.dirname(os.path.abspath(dest)), exist_ok=True)
        with open(dest + ".tmp", "wb") as fh:
            fh.write(data)
        os.replace(dest + ".tmp", dest)
    module.exit_json(changed=changed, dest=dest)


if __name__ == "__main__":
    main()
