"""rendered_file: one round trip for a file rendered on the controller; atomic, never wider than its mode, idempotent."""

import os
import stat

from ansible_collections.blackwell.sglang.plugins.modules import rendered_file


def args(dest, content="[Service]\nExecStart=/bin/true\n", **kw):
    base = {"dest": str(dest), "content": content, "mode": "0600"}
    base.update(kw)
    return base


def mode(path):
    return stat.S_IMODE(os.stat(str(path)).st_mode)


def test_writes_once_then_reports_no_change(tmp_path, module_runner):
    dest = tmp_path / "kimi.env"
    kind, first = module_runner(rendered_file, args(dest))
    assert kind == "exit" and first["changed"] and first["content_changed"]
    assert dest.read_text() == "[Service]\nExecStart=/bin/true\n" and mode(dest) == 0o600
    kind, again = module_runner(rendered_file, args(dest))
    assert kind == "exit" and not again["changed"] and not again["content_changed"]
    assert sorted(os.listdir(str(tmp_path))) == ["kimi.env"]  # no temporary file left


def test_a_new_secret_file_is_never_readable_beyond_its_mode(tmp_path, module_runner, monkeypatch):
    """ansible.builtin.copy moves a new file into place with the umask's 0644 and narrows it after; here the file
    has its mode before it has its name."""
    dest = tmp_path / "kimi.env"
    seen = []
    real_rename = os.rename

    def rename(src, dst):
        seen.append((mode(src), dst))
        real_rename(src, dst)

    monkeypatch.setattr(rendered_file.os, "rename", rename)
    kind, res = module_runner(rendered_file, args(dest, content="HF_TOKEN=secret\n"))
    assert kind == "exit" and seen == [(0o600, str(dest))]


def test_attribute_drift_is_mended_without_rewriting(tmp_path, module_runner):
    dest = tmp_path / "unit.service"
    module_runner(rendered_file, args(dest))
    inode = os.stat(str(dest)).st_ino
    os.chmod(str(dest), 0o644)
    kind, res = module_runner(rendered_file, args(dest))
    assert res["changed"] and not res["content_changed"]
    assert mode(dest) == 0o600 and os.stat(str(dest)).st_ino == inode


def test_check_mode_reports_the_diff_and_writes_nothing(tmp_path, module_runner):
    dest = tmp_path / "unit.service"
    dest.write_text("old\n")
    kind, res = module_runner(rendered_file, dict(args(dest, content="new\n"), _ansible_diff=True), check_mode=True)
    assert kind == "exit" and res["changed"] and res["content_changed"]
    assert res["diff"]["before"] == "old\n" and res["diff"]["after"] == "new\n"
    assert dest.read_text() == "old\n"
    kind, res = module_runner(rendered_file, args(tmp_path / "new.service"), check_mode=True)
    assert res["changed"] and not (tmp_path / "new.service").exists()


def test_validate_sees_the_candidate_and_a_refusal_leaves_the_old_file(tmp_path, module_runner):
    dest = tmp_path / "unit.service"
    dest.write_text("good\n")
    checker = tmp_path / "check.sh"
    checker.write_text("#!/bin/sh\ngrep -q good \"$1\" || { echo \"bad unit: $1\" >&2; exit 3; }\n")
    checker.chmod(0o755)
    kind, res = module_runner(rendered_file, args(dest, content="broken\n", validate="%s %%s" % checker))
    assert kind == "fail" and res["exit_status"] == 3 and "bad unit" in res["msg"]
    assert dest.read_text() == "good\n"
    assert sorted(os.listdir(str(tmp_path))) == ["check.sh", "unit.service"]
    kind, res = module_runner(rendered_file, args(dest, content="good too\n", validate="%s %%s" % checker))
    assert kind == "exit" and res["changed"] and dest.read_text() == "good too\n"
    kind, res = module_runner(rendered_file, args(dest, content="x\n", validate=str(checker)))
    assert kind == "fail" and "%s" in res["msg"]


def test_bad_destinations_fail_clearly(tmp_path, module_runner):
    kind, res = module_runner(rendered_file, args(tmp_path / "missing" / "unit.service"))
    assert kind == "fail" and "does not exist" in res["msg"]
    # In check mode the directory may be one an earlier task would have made: would write.
    kind, res = module_runner(rendered_file, args(tmp_path / "missing" / "unit.service"), check_mode=True)
    assert kind == "exit" and res["changed"] and not (tmp_path / "missing").exists()
    kind, res = module_runner(rendered_file, args(tmp_path))
    assert kind == "fail" and "is a directory" in res["msg"]
