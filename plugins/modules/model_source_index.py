#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: model_source_index
short_description: Read the weights' size of a model_stage source (its index) before anything is staged
extends_documentation_fragment:
  - blackwell.sglang.common
  - blackwell.sglang.common.read_only
description:
  - Reads C(model.safetensors.index.json) of the checkpoint that M(blackwell.sglang.model_stage) would stage, from
    the node (the node is what reaches the source), and returns its C(metadata.total_size) and shard count. Preflight
    sizes the free-disk and HiCache checks by it before a byte is staged.
  - O(source=path) reads C(<source_path>/model.safetensors.index.json). O(source=http) GETs
    C(<url>/model.safetensors.index.json) with the same headers, token, timeout and retries as model_stage's http
    source (the same code). O(source=hf) GETs the pinned revision's index from the Hub's resolve URL,
    C(<endpoint>/<repo>/resolve/<revision>/model.safetensors.index.json), with the token as huggingface_hub sends
    it (to the Hub's host only, not to the CDN a large file redirects to); it needs no staging virtualenv, so it works
    on a fresh host.
  - A single-file checkpoint (no C(model.safetensors.index.json), one C(model.safetensors), as EAGLE-3 draft models
    ship) is sized from the safetensors header of C(model.safetensors) (the tensors' bytes), and RV(index) names that
    file. O(source=path) does so when the directory has no index and C(model.safetensors) is its one safetensors file
    (several are refused, naming them). O(source=http) and O(source=hf) do so when the index answers HTTP 404, reading
    only the header with two C(Range) requests (its 8-byte length, then the header), never the tensor data.
  - Never fails for an index it cannot read. RV(error) then says which path or URL and why (HTTP 404, no answer, not
    JSON, no C(metadata.total_size)), and the caller decides what to use instead.
  - Changes nothing on the host.
options:
  source:
    description: Which model_stage source to read, as model_stage's O(blackwell.sglang.model_stage#module:source).
    type: str
    choices: [path, http, hf]
    default: path
  source_path:
    description: The model directory (O(source=path)).
    type: path
  url:
    description: Base URL of the HTTP(S) mirror (O(source=http)); C(<url>/model.safetensors.index.json) is read.
    type: str
  token:
    description: Bearer token for the mirror (O(source=http)) or the Hub (O(source=hf); C(HF_TOKEN) from the
      environment when unset). Never logged.
    type: str
  headers:
    description: Extra HTTP request headers for the mirror (O(source=http)). Never logged.
    type: dict
    default: {}
  revision:
    description: The revision model_stage stages; the Hub revision when O(hf_revision) is unset.
    type: str
    default: main
  hf_repo_id:
    description: Hub repository (O(source=hf)).
    type: str
  hf_revision:
    description: Hub revision (pin a commit hash); defaults to O(revision).
    type: str
  hf_endpoint:
    description: Hub endpoint; empty uses C(HF_ENDPOINT) from the environment, else C(https://huggingface.co).
    type: str
    default: ""
  read_config:
    description:
      - Also read the source's C(config.json) (the same place, token and timeout), returned parsed in RV(config). An
        EAGLE3 draft is judged against its model by both before either is staged.
    type: bool
    default: false
  timeout:
    description: Socket timeout in seconds for the request.
    type: int
    default: 60
  retries:
    description: Retries after a transient failure (connection refused, timeout, HTTP 5xx/429); 404 and 401 are final.
    type: int
    default: 1
  retry_delay:
    description: Seconds before the first retry; doubled for each further one.
    type: float
    default: 1.0
"""

EXAMPLES = r"""
- name: Read the mirror's index (preflight budgets disk and HiCache by it)
  blackwell.sglang.model_source_index:
    source: http
    url: http://mirror.internal/models/Kimi-K2.5/4f2a9c1
    token: "{{ vault_mirror_token }}"
  register: source_index

- name: Read the pinned Hub revision's index
  blackwell.sglang.model_source_index:
    source: hf
    hf_repo_id: moonshotai/Kimi-K2.5
    revision: 4f2a9c1
    token: "{{ vault_hf_token }}"
"""

RETURN = r"""
index:
  description:
    - Where the index was read, or would have been (a path, or a URL without credentials).
    - For a single-file checkpoint, the C(model.safetensors) whose header was read.
  returned: always
  type: str
  sample: http://mirror.internal/models/Kimi-K2.5/4f2a9c1/model.safetensors.index.json
total_size_bytes:
  description:
    - The index's C(metadata.total_size) (a single-file checkpoint's, the tensor bytes its header lists); null when it
      could not be read.
  returned: always
  type: int
  sample: 595000000000
shards:
  description: Shard files the index names (1 for a single-file checkpoint); null when it could not be read.
  returned: always
  type: int
  sample: 64
config:
  description: With O(read_config), the source's C(config.json), parsed; null when it could not be read.
  returned: when O(read_config) is true
  type: dict
  sample: {"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 7168, "target_hidden_size": 7168}
config_location:
  description: With O(read_config), where C(config.json) was read (a path, or a URL without credentials).
  returned: when O(read_config) is true
  type: str
config_error:
  description: With O(read_config), why C(config.json) could not be read (it names the path or URL); null when it was.
  returned: when O(read_config) is true
  type: str
error:
  description: Why no size was read (it names the path or URL); null when it was.
  returned: always
  type: str
  sample: "model.safetensors.index.json: HTTP 404 Not Found (not on the mirror) from http://m/model.safetensors.index.json"
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils.staging.model_index import INDEX_NAME
from ansible_collections.blackwell.sglang.plugins.module_utils.staging.model_sources import make_source
from ansible_collections.blackwell.sglang.plugins.module_utils.staging.model_store import StageError

# What make_source needs besides this module's options (nothing here plans or transfers).
SOURCE_DEFAULTS = {"parallel": 1, "manifest": "SHA256SUMS", "link_mode": "copy"}


def read_source_index(params):
    """dict ``index``, ``total_size_bytes``, ``shards``, ``error`` for the source ``params`` names; with
    ``read_config`` also ``config``, ``config_location`` and ``config_error``."""
    out = {"index": None, "total_size_bytes": None, "shards": None, "error": None}
    missing = {"http": "url", "hf": "hf_repo_id"}.get(params["source"])
    if missing and not params.get(missing):
        out["error"] = "source %s without %s: no %s to read" % (params["source"], missing, INDEX_NAME)
        if params.get("read_config"):
            out.update(config=None, config_location=None,
                       config_error="source %s without %s: no config.json to read" % (params["source"], missing))
        return out
    source = make_source(dict(SOURCE_DEFAULTS, **params))
    out["index"] = source.index_location()
    try:
        out.update(source.read_index())
    except StageError as exc:
        out["error"] = "; ".join(exc.problems)
    if params.get("read_config"):
        out.update(config=None, config_location=None, config_error=None)
        try:
            out["config"], out["config_location"] = source.read_config()
        except StageError as exc:
            out["config_error"] = "; ".join(exc.problems)
    return out


def main():
    module = AnsibleModule(
        argument_spec=dict(
            source=dict(type="str", default="path", choices=["path", "http", "hf"]),
            source_path=dict(type="path"),
            url=dict(type="str"),
            token=dict(type="str", no_log=True),
            headers=dict(type="dict", default={}, no_log=True),
            revision=dict(type="str", default="main"),
            hf_repo_id=dict(type="str"),
            hf_revision=dict(type="str"),
            hf_endpoint=dict(type="str", default=""),
            read_config=dict(type="bool", default=False),
            timeout=dict(type="int", default=60),
            retries=dict(type="int", default=1),
            retry_delay=dict(type="float", default=1.0),
        ),
        supports_check_mode=True,
    )
    module.exit_json(changed=False, **read_source_index(module.params))


if __name__ == "__main__":
    main()
