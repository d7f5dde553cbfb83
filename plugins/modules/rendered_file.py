#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: rendered_file
short_description: Write a file whose content was rendered on the controller, in one round trip
extends_documentation_fragment:
  - blackwell.sglang.common
  - ansible.builtin.files
description:
  - Compares O(content) and the file attributes with O(dest) and, when either differs, writes the content to a
    temporary file beside O(dest), gives it the requested owner, group and mode, runs O(validate) on it, and renames
    it over O(dest). A reader never sees a partial file, and a new file is never readable beyond O(mode), not even
    for a moment (C(ansible.builtin.copy) moves the file into place first and sets its mode after).
  - What C(ansible.builtin.template) and C(ansible.builtin.copy) with C(content) do, as one module. Their action
    plugins make and remove a remote temporary directory around every call and run two modules (C(stat), then
    C(file) or C(copy)) - five commands on the host for an unchanged file, against one here. Over ssh with
    pipelining on a 2-core host that is 1.8 s against 0.35 s a file (benchmarks/connection_cost.py).
  - Render the content with C(lookup('ansible.builtin.template', ...)) or C(lookup('ansible.builtin.file', ...,
    rstrip=false)) in the task; the content travels in the module's arguments, so keep it to configuration-sized
    files (a few hundred kB at most) and set C(no_log) on the task for a file that holds secrets.
options:
  dest:
    description: The file to write. Its directory must exist (in check mode a missing one means "would write").
    type: path
    required: true
  content:
    description: The file's whole content (text, written as UTF-8).
    type: str
    required: true
  validate:
    description:
      - A command run on the temporary file before it replaces O(dest); C(%s) stands for the temporary file's path.
        A non-zero exit refuses the write and fails the task with the command's output; O(dest) is left as it was.
      - Run only when the content or attributes change.
    type: str
attributes:
  check_mode:
    support: full
    description: Reports what would change (and the diff) without writing.
  diff_mode:
    support: full
    description: The content before and after, and attribute changes.
notes:
  - Runs on the target under its system Python, standard library and ansible.module_utils only.
"""

EXAMPLES = r"""
- name: Write the systemd unit (refused unless systemd-analyze verify accepts it)
  blackwell.sglang.rendered_file:
    dest: /etc/systemd/system/sglang-kimi.service
    content: "{{ lookup('ansible.builtin.template', 'sglang.service.j2') }}"
    owner: root
    group: root
    mode: "0644"
    validate: /usr/local/sbin/sglang-verify-unit sglang-kimi.service %s

- name: Write the environment file (secrets; root-only)
  blackwell.sglang.rendered_file:
    dest: /etc/sglang/kimi.env
    content: "{{ lookup('ansible.builtin.template', 'sglang.env.j2') }}"
    mode: "0600"
  no_log: true
"""

RETURN = r"""
dest:
  description: The file written (or that would be written in check mode).
  returned: always
  type: str
  sample: /etc/systemd/system/sglang-kimi.service
content_changed:
  description: Whether the content differed from the file's (or the file did not exist).
  returned: always
  type: bool
size:
  description: The content's size in bytes (UTF-8).
  returned: always
  type: int
  sample: 1834
"""

import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_bytes, to_native, to_text


def read_current(path):
    """The file's bytes, or None when it does not exist. Raises OSError for anything else (a directory, no access)."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def write_candidate(module, dest, data, file_args, validate):
    """Write ``data`` to a temporary file beside ``dest`` with the requested attributes, validate it; its path.

    The temporary file is created 0600 (mkstemp) and gets owner, group and mode before anything can read it under
    the final name. On a validation failure the temporary file is removed and the task fails.
    """
    directory = os.path.dirname(dest) or "."
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".%s." % os.path.basename(dest), suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        args = dict(file_args, path=tmp)
        module.set_fs_attributes_if_different(args, False)
        if module.selinux_enabled():
            context = module.selinux_default_context(dest)
            module.set_context_if_different(tmp, context, False)
        if validate:
            if "%s" not in validate:
                module.fail_json(msg="validate must contain %%s: %s" % validate)
            rc, out, err = module.run_command(validate % tmp)
            if rc != 0:
                reason = (err or out).strip()
                module.fail_json(msg="%s refused the new %s (exit %d): %s" % (validate.split()[0], dest, rc, reason),
                                 exit_status=rc, stdout=out, stderr=err)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return tmp


def main():
    module = AnsibleModule(
        argument_spec=dict(
            dest=dict(type="path", required=True),
            content=dict(type="str", required=True),
            validate=dict(type="str"),
        ),
        add_file_common_args=True,
        supports_check_mode=True,
    )
    dest = module.params["dest"]
    data = to_bytes(module.params["content"], errors="surrogate_or_strict")
    result = dict(dest=dest, changed=False, content_changed=False, size=len(data))
    if os.path.isdir(dest):
        module.fail_json(msg="%s is a directory" % dest, **result)
    if not os.path.isdir(os.path.dirname(dest) or "."):
        if module.check_mode:
            # Check mode on a fresh host: the task that makes the directory only said it would.
            result.update(changed=True, content_changed=True)
            module.exit_json(**result)
        module.fail_json(msg="the directory of %s does not exist" % dest, **result)
    try:
        current = read_current(dest)
    except OSError as exc:
        module.fail_json(msg="cannot read %s: %s" % (dest, to_native(exc)), **result)
    file_args = module.load_file_common_arguments(module.params, path=dest)
    diff = dict(before_header=dest, after_header=dest,
                before=to_text(current, errors="surrogate_or_replace") if current is not None else "",
                after=to_text(data, errors="surrogate_or_replace"))
    result["content_changed"] = current != data
    if result["content_changed"]:
        result["changed"] = True
        if not module.check_mode:
            tmp = write_candidate(module, dest, data, file_args, module.params["validate"])
            os.rename(tmp, dest)
            dirfd = os.open(os.path.dirname(dest) or ".", os.O_RDONLY)
            try:
                os.fsync(dirfd)
            finally:
                os.close(dirfd)
    else:
        # Same content: only the attributes can differ (check mode reports without changing them); the diff is the
        # attributes' (before/after dicts, as ansible.builtin.file reports them).
        diff = dict(before={"path": dest}, after={"path": dest})
        result["changed"] = module.set_fs_attributes_if_different(file_args, False, diff=diff)
    if module._diff and result["changed"]:
        result["diff"] = diff
    module.exit_json(**result)


if __name__ == "__main__":
    main()
