"""rollout_lock: a second concurrent rollout is refused, naming the first; a stale lock is taken over."""

import json
import os
import time

from ansible_collections.blackwell.sglang.plugins.modules import rollout_lock


def args(tmp_path, owner, **kw):
    base = {"path": str(tmp_path / "lock"), "owner": owner, "state": "present", "ttl": 3600, "break_lock": False}
    base.update(kw)
    return base


def test_a_second_rollout_is_refused_and_the_first_releases(tmp_path, module_runner):
    kind, first = module_runner(rollout_lock, args(tmp_path, "ops@a pid 1"))
    assert kind == "exit" and first["changed"] and first["holder"]["owner"] == "ops@a pid 1"
    kind, again = module_runner(rollout_lock, args(tmp_path, "ops@a pid 1"))
    assert kind == "exit" and not again["changed"]
    kind, second = module_runner(rollout_lock, args(tmp_path, "dev@b pid 2"))
    assert kind == "fail" and "another rollout holds the lock" in second["msg"] and "ops@a pid 1 took it" in second["msg"]
    kind, wrong = module_runner(rollout_lock, args(tmp_path, "dev@b pid 2", state="absent"))
    assert kind == "fail" and os.path.exists(str(tmp_path / "lock"))
    kind, released = module_runner(rollout_lock, args(tmp_path, "ops@a pid 1", state="absent"))
    assert kind == "exit" and released["changed"] and not os.path.exists(str(tmp_path / "lock"))


def test_an_abandoned_lock_is_taken_over_after_its_ttl_or_when_broken(tmp_path, module_runner):
    (tmp_path / "lock").write_text(json.dumps({"owner": "ops@a pid 1", "taken": time.time() - 7200}))
    kind, result = module_runner(rollout_lock, args(tmp_path, "dev@b pid 2"))
    assert kind == "exit" and result["holder"]["owner"] == "dev@b pid 2"
    kind, result = module_runner(rollout_lock, args(tmp_path, "ops@c pid 3", break_lock=True))
    assert kind == "exit" and result["holder"]["owner"] == "ops@c pid 3"


def test_diff_shows_the_lock_file_before_and_after_a_take_and_a_release(tmp_path, module_runner):
    lock = str(tmp_path / "lock")
    kind, taken = module_runner(rollout_lock, args(tmp_path, "ops@a pid 1", _ansible_diff=True))
    assert kind == "exit" and taken["diff"]["before_header"] == taken["diff"]["after_header"] == lock
    assert taken["diff"]["before"] == "" and json.loads(taken["diff"]["after"]) == taken["holder"]
    assert taken["diff"]["after"] == (tmp_path / "lock").read_text()
    kind, released = module_runner(rollout_lock, args(tmp_path, "ops@a pid 1", state="absent", _ansible_diff=True))
    assert released["diff"] == {"before_header": lock, "after_header": lock, "before": taken["diff"]["after"],
                                "after": ""}


def test_check_mode_diff_shows_the_lock_it_would_take_over_and_writes_nothing(tmp_path, module_runner):
    stale = json.dumps({"owner": "ops@a pid 1", "taken": time.time() - 7200})
    (tmp_path / "lock").write_text(stale)
    kind, result = module_runner(rollout_lock, args(tmp_path, "dev@b pid 2", _ansible_diff=True), check_mode=True)
    assert kind == "exit" and result["changed"] and result["diff"]["before"] == stale
    assert json.loads(result["diff"]["after"])["owner"] == "dev@b pid 2"
    assert (tmp_path / "lock").read_text() == stale
    kind, result = module_runner(rollout_lock, args(tmp_path, "ops@a pid 1", state="absent", _ansible_diff=True),
                                 check_mode=True)
    assert result["diff"]["before"] == stale and result["diff"]["after"] == "" and (tmp_path / "lock").exists()


def test_no_diff_when_the_lock_is_already_held_or_already_free(tmp_path, module_runner):
    module_runner(rollout_lock, args(tmp_path, "ops@a pid 1"))
    kind, again = module_runner(rollout_lock, args(tmp_path, "ops@a pid 1", _ansible_diff=True))
    assert kind == "exit" and not again["changed"] and "diff" not in again
    module_runner(rollout_lock, args(tmp_path, "ops@a pid 1", state="absent"))
    kind, free = module_runner(rollout_lock, args(tmp_path, "ops@a pid 1", state="absent", _ansible_diff=True))
    assert kind == "exit" and not free["changed"] and "diff" not in free
    kind, plain = module_runner(rollout_lock, args(tmp_path, "ops@a pid 1"))
    assert plain["changed"] and "diff" not in plain  # without --diff
