#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: model_stage
short_description: Stage a safetensors checkpoint into the model store, verify it, activate it atomically
extends_documentation_fragment:
  - blackwell.sglang.common
description:
  - Brings a model directory into C(<store>/<name>/<revision>.partial/) from a local or mounted directory
    (O(source=path)), a plain HTTP(S) mirror with a sha256 manifest (O(source=http)) or the Hugging Face Hub through a
    helper run by a staging virtualenv (O(source=hf)); hashes every file with sha256 while it is written (one pass for
    C(path) and C(http)), verifies every shard named in C(model.safetensors.index.json) (present, header parses, tensors
    cover the data bytes exactly, tensors listed in the index), the sha256 manifest, C(config.json) and
    C(tokenizer*.json) (non-empty valid JSON), writes C(<revision>/.manifest.json), renames the directory to
    C(<store>/<name>/<revision>/) and flips the C(<store>/<name>/current) symlink with an atomic rename.
  - A single-file checkpoint (C(config.json) and one C(model.safetensors), no C(model.safetensors.index.json), as
    EAGLE-3 draft models ship) is staged too. Its weight map and size come from the safetensors header of
    C(model.safetensors) (O(source=http) and O(source=hf) read only the header, with HTTP C(Range) requests, before
    anything moves). The staged file is verified the same way, against that header, and no index file is written into
    the revision. Several C(.safetensors) files and no index are refused, naming the files (which file holds which
    tensor is ambiguous).
  - Refuses a checkpoint that lacks a non-weight file its own configs require, naming it and why. The set is the
    C(auto_map) modules of config.json, tokenizer_config.json and the processor configs, every module they import
    relatively (Kimi's C(tokenization_kimi.py) imports C(tool_declaration_ts.py)), the tokenizer class's
    C(vocab_files_names) (C(tiktoken.model)) and the chat template. This happens before any shard moves (the C(hf)
    source lists the revision and fetches only its non-weight files first), and again on the staged tree before the
    rename. Staged files must be real files, not symlinks.
  - C(current) never points at a partial or unverified directory.
  - Transfers run in parallel (O(parallel) threads). An interrupted run resumes; finished files recorded in the staging
    journal are kept, and an HTTP file cut off mid-way continues with a C(Range) request (when the server answers
    C(206); otherwise that file starts again).
  - A re-run whose C(<revision>/.manifest.json) matches every file by size, mtime and inode (stat only, no hashing, no
    network) and whose C(current) already points at the revision changes nothing. A staged file that changed or
    disappeared is fetched again (checked against the sha256 recorded in the manifest) and replaced atomically; the
    other files are kept.
  - Before any byte moves the module checks that the store has free space for the bytes still to transfer x 1.05.
  - Durability is batched; there is no fsync as each file ends. Writeback starts while a file is written. The finished
    files are made durable in batches, at most 30 s apart and always before verification. Each batch issues its
    C(fdatasync) calls together, so the filesystem commits them at once. Only then does the staging journal record
    them. Nothing is recorded, renamed or pointed at before it is durable. A file that an
    interrupted run finished but had not recorded yet is hashed again, not fetched again.
options:
  name:
    description: Model name; the directory under O(store) (for example C(Kimi-K2.5)).
    type: str
    required: true
  revision:
    description: Revision label (a commit hash or a tag); the directory under C(<store>/<name>).
    type: str
    required: true
  source:
    description:
      - C(path) copies from O(source_path); C(http) downloads from O(url); C(hf) runs O(hf_helper) with O(hf_python).
    type: str
    choices: [path, http, hf]
    default: path
  source_path:
    description:
      - Directory holding C(model.safetensors.index.json), the shards, C(config.json) and tokenizer files; or, for a
        single-file checkpoint, C(model.safetensors) without an index.
    type: path
  url:
    description:
      - Base URL of an HTTP(S) mirror of the model directory (O(source=http)); C(<url>/<file>) must serve each file and
        should honour C(Range).
    type: str
  manifest:
    description:
      - 'Name (relative to O(url) or O(source_path)) or absolute URL of the sha256 manifest, in C(sha256sum) format or
        JSON C({"files": {"<name>": {"sha256": "<hex>", "size": <bytes>}}}); a staged revision directory served over
        HTTP offers C(.manifest.json).'
      - Required to exist for O(source=http) (it lists the files to fetch); used when present for O(source=path).
    type: str
    default: SHA256SUMS
  token:
    description: Bearer token for an authenticated mirror (O(source=http)) or the Hub (O(source=hf), passed as C(HF_TOKEN)).
    type: str
  headers:
    description: Extra HTTP request headers for the mirror (for example an API key header).
    type: dict
    default: {}
  parallel:
    description: Files transferred at once.
    type: int
    default: 4
  retries:
    description: Retries per file after a transient failure (connection lost, timeout, HTTP 5xx/429).
    type: int
    default: 5
  retry_delay:
    description: Seconds before the first retry; doubled for each further retry (at most 60).
    type: float
    default: 2.0
  timeout:
    description: Socket timeout in seconds for one HTTP read.
    type: int
    default: 60
  progress_file:
    description:
      - File the progress lines are appended to while staging (C(tail -f) it). Default C(<store>/<name>/.<revision>.progress).
    type: path
  progress_interval:
    description: Seconds between two progress lines.
    type: float
    default: 10.0
  hf_repo_id:
    description: Hub repository (O(source=hf)), for example C(moonshotai/Kimi-K2.5).
    type: str
  hf_revision:
    description: Hub revision to download (pin a commit hash); defaults to O(revision).
    type: str
  hf_endpoint:
    description: Hub endpoint (C(HF_ENDPOINT)); empty uses the library's default.
    type: str
    default: ""
  hf_python:
    description: Python of the staging virtualenv that has C(huggingface_hub) installed.
    type: path
    default: /opt/sglang/stage-venv/bin/python
  hf_helper:
    description: The helper script shipped by the model_stage role (C(hf_snapshot.py)).
    type: path
  allow_patterns:
    description: Glob patterns of files to download from the Hub (O(source=hf)); empty downloads the whole revision.
    type: list
    elements: str
    default: []
  store:
    description: Root of the model store.
    type: path
    default: /srv/models
  activate:
    description:
      - C(true) points C(current) at the revision once it is staged and verified.
      - C(false) stages and verifies it and leaves C(current) where it is, so a server that restarts on its own keeps
        loading what it served; the rolling redeploy flips C(current) when it switches the node (RV(activated)).
    type: bool
    default: true
  nice:
    description:
      - Niceness added to the staging process (0-19); above 0 it also gets the idle I/O class, so staging on a
        serving node yields the CPU and the disk to the server (the rolling redeploy's prepare step sets it).
    type: int
    default: 0
  link_mode:
    description:
      - C(copy) copies every file. C(hardlink) links them (O(source=path) only; source and store must be on one
        filesystem; the store then shares the source's data, so never edit the source in place).
    type: str
    choices: [copy, hardlink]
    default: copy
attributes:
  check_mode:
    support: full
    description: Plans the staging (what is present, what would be fetched) and fetches and writes nothing.
  diff_mode:
    support: full
    description:
      - The store before and after, as two lines - the revision directory (absent, or its shard count, bytes and
        whether it is verified) and the target of C(current) - when the run changes either (in check mode, what it
        would change).
notes:
  - Top-level regular files of O(source_path) (or files listed in the manifest for O(source=http), or in the Hub's
    listing for O(source=hf)) are staged, except
    hidden files and weight files (C(.safetensors), C(.bin), C(.pt), C(.pth), C(.gguf), C(.h5), C(.msgpack), C(.ckpt))
    not named in the index (for a single-file checkpoint, other than C(model.safetensors)); they are listed in
    RV(skipped).
  - O(token) and O(headers) are never logged or put into messages.
"""

EXAMPLES = r"""
- name: Stage Kimi-K2.5 from the NFS mirror and make it current
  model_stage:
    name: Kimi-K2.5
    revision: "{{ model_stage_revision }}"
    source: path
    source_path: /mnt/mirror/moonshotai/Kimi-K2.5
    store: /srv/models

- name: Stage Kimi-K2.5 from the site's HTTP mirror (SHA256SUMS beside the shards)
  model_stage:
    name: Kimi-K2.5
    revision: 4f2a9c1
    source: http
    url: http://mirror.internal/models/Kimi-K2.5/4f2a9c1
    token: "{{ vault_mirror_token }}"
    parallel: 4
  register: model_stage_result

- name: Stage from the Hub through the staging virtualenv
  model_stage:
    name: Kimi-K2.5
    revision: 4f2a9c1
    source: hf
    hf_repo_id: moonshotai/Kimi-K2.5
    hf_helper: /opt/sglang/stage-venv/hf_snapshot.py
    token: "{{ vault_hf_token }}"
"""

RETURN = r"""
path:
  description: The staged revision directory.
  returned: always
  type: str
  sample: /srv/models/Kimi-K2.5/4f2a9c1
current:
  description: The C(current) symlink.
  returned: always
  type: str
  sample: /srv/models/Kimi-K2.5/current
activated:
  description: Whether C(current) points at the revision now (false with O(activate=false) until the switch).
  returned: always
  type: bool
  sample: true
shards:
  description: Number of shards named in the index (1 for a single-file checkpoint).
  returned: always
  type: int
  sample: 64
total_bytes:
  description: Bytes of all staged files.
  returned: always
  type: int
  sample: 547000000000
copied_bytes:
  description:
    - Bytes copied or downloaded in this run (0 on a no-op or with hardlinks; in check mode, bytes that would move).
  returned: always
  type: int
verified:
  description: True when every file of the revision passed verification (this run or the run that wrote the manifest).
  returned: always
  type: bool
resumed_files:
  description: Files of an interrupted earlier run that were kept instead of transferred again.
  returned: when staged
  type: int
resumed_bytes:
  description: Bytes of partly downloaded files that an HTTP C(Range) request continued instead of fetching again.
  returned: when staged
  type: int
repaired:
  description: Files of an already staged revision that had changed or vanished and were fetched again.
  returned: when a staged revision was repaired
  type: list
  elements: str
skipped:
  description: Entries of the source that were not staged (subdirectories, weight files not in the index).
  returned: when staged
  type: list
  elements: str
progress:
  description: Progress lines written while staging (also appended to O(progress_file)).
  returned: always
  type: list
  elements: str
  sample: ["staged 12/64 shards, 143.2/547.0 GB, 1.9 GB/s, ETA 3m"]
progress_file:
  description: File the progress lines were appended to.
  returned: always
  type: str
actions:
  description: What was done (or, in check mode, what would be done).
  returned: always
  type: list
  elements: str
"""

import errno

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils.staging.model_staging import stage, store_state
from ansible_collections.blackwell.sglang.plugins.module_utils.staging.model_store import StageError
from ansible_collections.blackwell.sglang.plugins.module_utils.host._priority import lower_priority


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str", required=True),
            revision=dict(type="str", required=True),
            source=dict(type="str", default="path", choices=["path", "http", "hf"]),
            source_path=dict(type="path"),
            url=dict(type="str"),
            manifest=dict(type="str", default="SHA256SUMS"),
            token=dict(type="str", no_log=True),
            headers=dict(type="dict", default={}, no_log=True),
            parallel=dict(type="int", default=4),
            retries=dict(type="int", default=5),
            retry_delay=dict(type="float", default=2.0),
            timeout=dict(type="int", default=60),
            progress_file=dict(type="path"),
            progress_interval=dict(type="float", default=10.0),
            hf_repo_id=dict(type="str"),
            hf_revision=dict(type="str"),
            hf_endpoint=dict(type="str", default=""),
            hf_python=dict(type="path", default="/opt/sglang/stage-venv/bin/python"),
            hf_helper=dict(type="path"),
            allow_patterns=dict(type="list", elements="str", default=[]),
            store=dict(type="path", default="/srv/models"),
            link_mode=dict(type="str", default="copy", choices=["copy", "hardlink"]),
            activate=dict(type="bool", default=True),
            nice=dict(type="int", default=0),
        ),
        required_if=[("source", "path", ("source_path",)), ("source", "http", ("url",)),
                     ("source", "hf", ("hf_repo_id", "hf_helper"))],
        supports_check_mode=True,
    )
    if not module.check_mode:
        lower_priority(module.params["nice"])
    try:
        before = store_state(module.params)
        result = stage(module)
        if module._diff and result["changed"]:
            after = store_state(module.params, result if module.check_mode else None)
            if after != before:
                result["diff"] = {"before_header": result["path"], "after_header": result["path"],
                                  "before": before, "after": after}
    except StageError as exc:
        module.fail_json(msg="; ".join(exc.problems), problems=exc.problems)
    except (IOError, OSError) as exc:
        if exc.errno == errno.ENOSPC:
            module.fail_json(msg="disk full while staging into %s (%s); free space and re-run, copied files are kept"
                                 % (module.params["store"], exc))
        module.fail_json(msg="staging failed: %s; fix the cause and re-run (copied files are kept)" % exc)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
