#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: generation_record
short_description: A node's deployment record - which release, model revision and unit files it serves, one generation per switch
extends_documentation_fragment:
  - blackwell.sglang.common
description:
  - A generation is what one node serves together - the release C(current) names, the model revision the model link
    names, and copies of the unit, its environment file and its argv - written to C(<dir>/<N>/) with a
    C(record.json). C(<dir>/current) and C(<dir>/previous) name the live generation and the one before.
  - C(state=recorded) records what is live now as a new generation unless it equals the current one.
  - C(state=switched) makes O(target) live (flips both links, installs the staged files) and records it. In check
    mode it only says whether anything would change, so a rolling redeploy skips a node with nothing to switch.
  - C(state=restored) makes the previous generation live again (links and files) and records it as a new generation,
    so a second restore rolls forward. The new generation keeps the serving benchmark figures of the one it restores
    (C(benchmark-*.json), from M(blackwell.sglang.sglang_benchmark)), which measured the same release, model and
    unit. This is the one rollback, used by C(playbooks/rollback.yml) and the rolling
    redeploy's rescue.
  - Links are replaced atomically (a new symlink renamed over the old); files are written to a temporary name in
    their directory and renamed. Restarting the unit is the caller's (it must drain first).
options:
  dir:
    description: Directory of the generations.
    type: path
    required: true
  release_link:
    description: The link naming the active release (C(<root>/current)); its old target goes to O(previous_release_link).
    type: path
    required: true
  previous_release_link:
    description: The link naming the release before the active one.
    type: path
    required: true
  model_link:
    description: The link naming the active model revision (C(<store>/<name>/current)).
    type: path
    required: true
  files:
    description: Live files that belong to a generation (the unit, its environment file, its argv), copied into it.
    type: list
    elements: path
    required: true
  state:
    description: See the description.
    type: str
    choices: [recorded, switched, restored]
    default: recorded
  target:
    description:
      - With O(state=switched), what becomes live. C(release) and C(model) are directories the links will name
        (absolute, or relative to the link's directory as model_stage writes them); C(files) maps each live file of
        O(files) to the staged copy that replaces it (a live file not in it is kept).
    type: dict
  keep:
    description: Generations kept (the oldest beyond this are deleted; current and previous never).
    type: int
    default: 10
  reason:
    description: Why this generation was made (written into C(record.json), e.g. "rolling redeploy", "rollback").
    type: str
    default: ""
attributes:
  check_mode:
    support: full
    description: Reports the generation it would record, switch to or roll back to; writes nothing.
  diff_mode:
    support: full
    description:
      - Each link it points elsewhere (target before and after, as C(ansible.builtin.file) reports a link), each live
        file it installs (content before and after) and the C(record.json) of each generation it writes; in check
        mode what it would change. A file that is not readable by others (the environment file, mode 0600) shows as
        its sha256 digest, not its content.
      - Not shown - the copies in a new generation's directory, its C(current) and C(previous) links, and the
        generations beyond O(keep) it deletes.
notes:
  - Runs on the target under its system Python, standard library only.
"""

EXAMPLES = r"""
- name: Would the prepared release, model and unit change what this node serves?
  generation_record:
    dir: /var/lib/sglang/generations
    release_link: /opt/sglang/current
    previous_release_link: /opt/sglang/previous
    model_link: /srv/models/Kimi-K2.5/current
    files: [/etc/systemd/system/sglang-kimi.service, /etc/sglang/kimi.env, /etc/sglang/kimi.argv.json]
    state: switched
    target:
      release: /opt/sglang/releases/0123456789abcdef
      model: r2
      files: {/etc/systemd/system/sglang-kimi.service: /etc/sglang/staged/sglang-kimi.service}
  check_mode: true
  register: switch_plan

- name: Roll this node back to its previous generation
  generation_record:
    dir: /var/lib/sglang/generations
    release_link: /opt/sglang/current
    previous_release_link: /opt/sglang/previous
    model_link: /srv/models/Kimi-K2.5/current
    files: [/etc/systemd/system/sglang-kimi.service, /etc/sglang/kimi.env, /etc/sglang/kimi.argv.json]
    state: restored
    reason: rollback
"""

RETURN = r"""
current:
  description: The live generation after the call (its record), null when none was ever recorded.
  returned: always
  type: dict
  sample: {"generation": 4, "release": "/opt/sglang/releases/0123456789abcdef", "model": "r2",
           "files": {"/etc/sglang/kimi.env": "sha256:..."}, "recorded": "2026-12-01T12:00:00Z", "reason": "rolling redeploy"}
previous:
  description: The generation before it (null when there is none).
  returned: always
  type: dict
restored_generation:
  description: With O(state=restored), the generation made live again.
  returned: when state is restored
  type: int
differences:
  description: What O(state=switched) or O(state=restored) changes (or changed) - links and files, old and new.
  returned: always
  type: list
  elements: str
"""

import hashlib
import json
import os
import shutil
import stat
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_text

RECORD = "record.json"


class GenerationError(Exception):
    pass


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return "sha256:" + digest.hexdigest()


def link_target(path):
    """What ``path`` names, or None when it is not a symlink."""
    return os.readlink(path) if os.path.islink(path) else None


def resolve(link, target):
    """``target`` as the absolute path a link at ``link`` would reach (a relative target is relative to the link)."""
    if target is None:
        return None
    return os.path.normpath(target if os.path.isabs(target) else os.path.join(os.path.dirname(link), target))


def live_state(p):
    files = {}
    for path in p["files"]:
        files[path] = sha256(path) if os.path.isfile(path) else None
    return {"release": resolve(p["release_link"], link_target(p["release_link"])),
            "model": resolve(p["model_link"], link_target(p["model_link"])), "files": files}


def read_generation(gdir, name):
    link = os.path.join(gdir, name)
    if not os.path.islink(link):
        return None
    with open(os.path.join(gdir, os.readlink(link), RECORD)) as fh:
        return json.load(fh)


def numbers(gdir):
    return sorted(int(n) for n in os.listdir(gdir) if n.isdigit()) if os.path.isdir(gdir) else []


def same(a, b):
    return bool(a and b) and a.get("release") == b.get("release") and a.get("model") == b.get("model") \
        and a.get("files") == b.get("files")


def relink(link, target):
    """Point ``link`` at ``target`` atomically (a temporary symlink renamed over it)."""
    if os.path.lexists(link) and not os.path.islink(link):
        raise GenerationError("%s exists and is not a symlink; move it aside" % link)
    tmp = "%s.tmp-%d" % (link, os.getpid())
    if os.path.lexists(tmp):
        os.unlink(tmp)
    os.symlink(target, tmp)
    os.replace(tmp, link)


def install(src, dest):
    """Copy ``src`` over ``dest`` through a temporary file in ``dest``'s directory (mode and owner of ``src``)."""
    tmp = "%s.tmp-%d" % (dest, os.getpid())
    shutil.copy2(src, tmp)
    st = os.stat(src)
    os.chown(tmp, st.st_uid, st.st_gid)
    os.replace(tmp, dest)


def new_record(state, reason, number, sources=None):
    """The record of generation ``number`` holding ``state`` (live_state shape); its copies name the file in the
    generation's directory of each live file that has one (copied from ``sources[path]``, default the live file)."""
    copies = {}
    for i, path in enumerate(sorted(state["files"])):
        src = (sources or {}).get(path, path)
        if state["files"][path] is not None and os.path.isfile(src):
            copies[path] = "%02d-%s" % (i, os.path.basename(path))
    return {"generation": number, "release": state["release"], "model": state["model"], "files": state["files"],
            "copies": copies, "recorded": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "reason": reason}


def record_text(record):
    """``record.json`` as written."""
    return json.dumps(record, indent=2, sort_keys=True)


def next_number(gdir):
    have = numbers(gdir)
    return (have[-1] + 1) if have else 1


def write_generation(p, state, reason, sources=None):
    """Write ``state`` (live_state shape) as the next generation, copying each file from ``sources[path]`` (default:
    the live file); move current/previous; prune. Returns the record."""
    gdir = p["dir"]
    os.makedirs(gdir, mode=0o700, exist_ok=True)
    number = next_number(gdir)
    tmp = os.path.join(gdir, ".%d.tmp-%d" % (number, os.getpid()))
    if os.path.isdir(tmp):
        shutil.rmtree(tmp)
    os.makedirs(tmp, mode=0o700)
    record = new_record(state, reason, number, sources)
    for path, name in record["copies"].items():
        shutil.copy2((sources or {}).get(path, path), os.path.join(tmp, name))
    with open(os.path.join(tmp, RECORD), "w") as fh:
        fh.write(record_text(record))
    os.rename(tmp, os.path.join(gdir, str(number)))
    current = link_target(os.path.join(gdir, "current"))
    if current is not None:
        relink(os.path.join(gdir, "previous"), current)
    relink(os.path.join(gdir, "current"), str(number))
    protect = {link_target(os.path.join(gdir, n)) for n in ("current", "previous")}
    old = [n for n in numbers(gdir) if str(n) not in protect]
    for n in old[:max(len(old) - max(int(p["keep"]) - 2, 0), 0)]:
        shutil.rmtree(os.path.join(gdir, str(n)), ignore_errors=True)
    return record


def shown(path, secret):
    """A file's content for a diff ("" when there is none); only its digest when ``secret``."""
    if not os.path.isfile(path):
        return ""
    if secret:
        return "%s (not readable by others: content not shown)\n" % sha256(path)
    with open(path, "rb") as fh:
        return to_text(fh.read(), errors="surrogate_or_replace")


class Changes(object):
    """The diff entries of one call (``--diff``): each link, live file and record.json it changes, or would change
    in check mode. Collects nothing unless ``enabled``."""

    def __init__(self, enabled):
        self.enabled = enabled
        self.entries = []
        self.planned = 0  # generations check mode would have written by now (their numbers are taken)

    def link(self, link, target):
        old = link_target(link)
        if self.enabled and old != target:
            before = {"path": link, "src": old} if old is not None else {"path": link, "state": "absent"}
            self.entries.append({"before_header": link, "after_header": link, "before": before,
                                 "after": {"path": link, "src": target}})

    def file(self, path, src):
        if self.enabled:
            secret = any(os.path.isfile(f) and not os.stat(f).st_mode & stat.S_IROTH for f in (path, src))
            self.entries.append({"before_header": path, "after_header": path, "before": shown(path, secret),
                                 "after": shown(src, secret)})

    def record(self, gdir, record):
        if self.enabled:
            path = os.path.join(gdir, str(record["generation"]), RECORD)
            self.entries.append({"before_header": path, "after_header": path, "before": "",
                                 "after": record_text(record)})


def carry_measurements(gdir, source, dest):
    """A restored generation serves what ``source`` served (release, model, unit files): it keeps that generation's
    serving benchmark figures (``benchmark-*.json``), so the next rollout's gate compares with them."""
    src = os.path.join(gdir, str(source))
    for name in sorted(os.listdir(src)) if os.path.isdir(src) else []:
        if name.startswith("benchmark-") and name.endswith(".json"):
            shutil.copy2(os.path.join(src, name), os.path.join(gdir, str(dest), name))


def add_generation(p, state, reason, check, changes, sources=None):
    """Write ``state`` as the next generation and return its record; in check mode put the record it would write in
    the diff and return None."""
    if check:
        changes.record(p["dir"], new_record(state, reason, next_number(p["dir"]) + changes.planned, sources))
        changes.planned += 1
        return None
    written = write_generation(p, state, reason, sources)
    changes.record(p["dir"], written)
    return written


def record_applied(p, live, want, sources, reason, check, changes):
    """Record what apply made live; in check mode what it would have (``want`` over ``live``, files from
    ``sources``)."""
    if not check:
        return add_generation(p, live_state(p), reason, check, changes)
    files = dict(live["files"])
    files.update((path, digest) for path, digest in want["files"].items() if digest is not None)
    settled = {"release": want["release"], "model": want["model"], "files": files}
    return add_generation(p, settled, reason, check, changes, sources)


def model_target(p, model):
    """What the model link names for ``model`` (relative to the link's directory, as model_stage writes it)."""
    return os.path.relpath(model, os.path.dirname(p["model_link"])) if model is not None else None


def apply(p, want, sources, check, changes):
    """Make ``want`` (release, model, files -> digest) live from ``sources`` (live path -> file to copy); returns the
    differences (and changes nothing when ``check``). Puts each link and file it changes in ``changes``."""
    live = live_state(p)
    diff = []
    if want["release"] != live["release"]:
        diff.append("release %s -> %s" % (live["release"], want["release"]))
        if live["release"]:
            changes.link(p["previous_release_link"], live["release"])
        changes.link(p["release_link"], want["release"])
    if want["model"] != live["model"]:
        diff.append("model %s -> %s" % (live["model"], want["model"]))
        changes.link(p["model_link"], model_target(p, want["model"]))
    for path, digest in sorted(want["files"].items()):
        if digest != live["files"].get(path):
            diff.append("%s %s" % (path, "changed" if live["files"].get(path) else "installed"))
            if digest is not None:
                changes.file(path, sources[path])
    if check or not diff:
        return diff
    for path in (want["release"], want["model"]):
        if path and not os.path.isdir(path):
            raise GenerationError("%s does not exist: nothing was changed" % path)
    for path, digest in want["files"].items():
        if digest is not None and not os.path.isfile(sources.get(path, path)):
            raise GenerationError("%s (for %s) does not exist: nothing was changed" % (sources.get(path), path))
    if want["release"] != live["release"]:
        if live["release"]:
            relink(p["previous_release_link"], live["release"])
        relink(p["release_link"], want["release"])
    if want["model"] != live["model"]:
        relink(p["model_link"], model_target(p, want["model"]))
    for path, digest in want["files"].items():
        if digest is not None and digest != live["files"].get(path):
            install(sources[path], path)
    return diff


def run(module):
    p = module.params
    check = module.check_mode
    result = {"changed": False, "differences": []}
    changes = Changes(module._diff)
    current = read_generation(p["dir"], "current")
    live = live_state(p)
    if p["state"] == "recorded":
        if not same(current, live):
            result["changed"] = True
            current = add_generation(p, live, p["reason"] or "recorded", check, changes) or current
    elif p["state"] == "switched":
        target = p["target"] or {}
        sources = dict(target.get("files") or {})
        unknown = sorted(set(sources) - set(p["files"]))
        if unknown:
            raise GenerationError("target files %s are not among files %s" % (unknown, p["files"]))
        want = {"release": resolve(p["release_link"], target.get("release")) or live["release"],
                "model": resolve(p["model_link"], target.get("model")) or live["model"],
                "files": dict(live["files"])}
        for path, src in sources.items():
            if not os.path.isfile(src):
                raise GenerationError("staged file %s (for %s) does not exist" % (src, path))
            want["files"][path] = sha256(src)
        if not same(current, live):
            # The rollback target.
            current = add_generation(p, live, "recorded before a switch", check, changes) or current
        result["differences"] = apply(p, want, sources, check, changes)
        if result["differences"]:
            result["changed"] = True
            current = record_applied(p, live, want, sources, p["reason"] or "switched", check, changes) or current
    else:  # restored
        # The target: the previous generation when the live state is the current record (a switch that completed,
        # then failed its health check); the current record itself when the live state drifted from it (a switch
        # that failed half-way, before it could record anything).
        drifted = current is not None and not same(current, live)
        target_record = current if drifted else read_generation(p["dir"], "previous")
        if drifted:
            # The drifted live state becomes a generation of its own, so a second rollback rolls forward to it.
            add_generation(p, live, "recorded before a rollback (the live state was not the last record)", check,
                           changes)
        if target_record is None:
            raise GenerationError("no previous generation in %s: nothing to roll back to (a generation is recorded at "
                                  "each switch)" % p["dir"])
        gen_dir = os.path.join(p["dir"], str(target_record["generation"]))
        sources = dict((path, os.path.join(gen_dir, name)) for path, name in target_record.get("copies", {}).items())
        want = {"release": target_record["release"], "model": target_record["model"],
                "files": dict((path, digest) for path, digest in target_record["files"].items() if path in sources)}
        result["restored_generation"] = target_record["generation"]
        result["differences"] = apply(p, want, sources, check, changes)
        result["changed"] = bool(result["differences"])
        if result["changed"]:
            current = record_applied(p, live, want, sources, p["reason"] or "restored generation %d"
                                     % target_record["generation"], check, changes) or current
            if not check:
                carry_measurements(p["dir"], target_record["generation"], current["generation"])
    if changes.enabled and result["changed"]:
        result["diff"] = changes.entries
    result["current"] = current
    result["previous"] = read_generation(p["dir"], "previous")
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            dir=dict(type="path", required=True),
            release_link=dict(type="path", required=True),
            previous_release_link=dict(type="path", required=True),
            model_link=dict(type="path", required=True),
            files=dict(type="list", elements="path", required=True),
            state=dict(type="str", default="recorded", choices=["recorded", "switched", "restored"]),
            target=dict(type="dict"),
            keep=dict(type="int", default=10),
            reason=dict(type="str", default=""),
        ),
        required_if=[("state", "switched", ("target",))],
        supports_check_mode=True,
    )
    try:
        module.exit_json(**run(module))
    except (GenerationError, IOError, OSError) as exc:
        module.fail_json(msg="generation_record (%s): %s" % (module.params["state"], exc))


if __name__ == "__main__":
    main()
