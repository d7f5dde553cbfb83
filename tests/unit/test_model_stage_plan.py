"""model_stage's plan entry point (tasks_from: plan, what preflight includes), run by the real ansible-playbook on
localhost in check mode against a loopback mirror (tests/sandbox/fake_hub.py on 127.0.0.1): it reads the mirror's
index on the node, publishes it in model_stage_plan.source_index, and preflight's filters size the weights by it.
It changes nothing: the store is not created."""

import json
import os
import pathlib
import re
import subprocess
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "sandbox"))
from fake_hub import FakeHub  # noqa: E402

INDEX = "model.safetensors.index.json"
TOTAL = 133713371337

PLAY = [{
    "hosts": "all", "gather_facts": False,
    "tasks": [
        {"name": "Plan", "ansible.builtin.include_role": {"name": "blackwell.sglang.model_stage", "tasks_from": "plan",
                                                          "public": True}},
        {"name": "Size the weights as preflight does", "ansible.builtin.set_fact": {
            "sized": "{{ {'memory': {'available_bytes': 0}, 'model': {'index': None, 'total_size_bytes': None}}"
                     " | blackwell.sglang.preflight_model_size(model_stage_plan.source_index, preferred=[],"
                     " fallback_gb=547, draft_index=(model_stage_plan.draft.source_index if model_stage_plan.draft"
                     " else none)) }}"}},
        {"name": "Print", "ansible.builtin.debug": {
            "msg": "RESULT={{ {'plan': model_stage_plan, 'model': sized.model} | to_json }}"}},
    ],
}]


def run_plan(tmp_path, url, *extra):
    play = tmp_path / "play.yml"
    play.write_text(yaml.safe_dump(PLAY))
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_CALLBACK_RESULT_FORMAT="json")
    bindir = os.path.dirname(sys.executable)
    proc = subprocess.run(
        [os.path.join(bindir, "ansible-playbook"), "-i", "localhost,", "-c", "local", "--check",
         "-e", "ansible_python_interpreter=%s" % sys.executable, "-e", "model_stage_source=http",
         "-e", "model_stage_url=%s" % url, "-e", "model_stage_store=%s" % (tmp_path / "store"),
         "-e", "model_stage_timeout=5", *extra, str(play)],
        capture_output=True, text=True, env=env, timeout=300, cwd=str(ROOT))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "changed=0" in out, out[-3000:]
    return json.loads(re.search(r'"RESULT=(.*)"\n', out).group(1).replace('\\"', '"'))


def test_the_plan_reads_the_mirrors_index_and_preflight_sizes_by_it(tmp_path):
    src = tmp_path / "mirror"
    src.mkdir()
    (src / INDEX).write_text(json.dumps({"metadata": {"total_size": TOTAL}, "weight_map": {"a": "s1.safetensors"}}))
    with FakeHub(str(src)) as mirror:
        result = run_plan(tmp_path, mirror.url + "/")
        mirror.missing.add(INDEX)
        missing = run_plan(tmp_path, mirror.url)
    url = mirror.url + "/" + INDEX
    assert result["plan"]["source_index"] == {"index": url, "total_size_bytes": TOTAL, "shards": 1, "error": None,
                                              "config": None, "config_error": None, "config_location": None}
    assert result["plan"]["draft"] is None
    assert result["plan"]["store"] == str(tmp_path / "store")
    assert result["model"]["total_size_bytes"] == TOTAL
    assert result["model"]["source"] == "133.71 GB in 1 shard, metadata.total_size of %s" % url
    assert missing["model"]["total_size_bytes"] == 547 * 1000 ** 3
    assert missing["model"]["source"] == ("no index readable (%s: HTTP 404 Not Found (not on the mirror) from %s); "
                                          "using preflight_hicache_fallback_weights_gb=547" % (INDEX, url))
    assert not (tmp_path / "store").exists()


def test_with_a_draft_the_plan_reads_both_configs_and_sizes_the_draft_too(tmp_path):
    """deployment_draft_model_repo_id set: the plan reads the draft's single file header and config.json and the
    model's config.json, on the node; preflight budgets the draft's bytes with the model's and judges the configs."""
    sys.path.insert(0, str(ROOT / "tests" / "sandbox"))
    import checkpoint
    src = tmp_path / "mirror"
    (src / "Kimi-K2.5").mkdir(parents=True)
    (src / "Kimi-K2.5" / INDEX).write_text(json.dumps({"metadata": {"total_size": TOTAL},
                                                        "weight_map": {"a": "s1.safetensors"}}))
    (src / "Kimi-K2.5" / "config.json").write_text(json.dumps(checkpoint.config_json(61, 8)))
    draft = checkpoint.make_draft(src / "kimi-k2.5-eagle3")
    with FakeHub(str(src)) as mirror:
        result = run_plan(tmp_path, mirror.url + "/Kimi-K2.5", "-e", "deployment_draft_model_repo_id=org/kimi-k2.5-eagle3",
                          "-e", "deployment_draft_model_revision=d1", "-e", "model_stage_draft_source=http",
                          "-e", "model_stage_draft_url=%s/kimi-k2.5-eagle3" % mirror.url)
    plan = result["plan"]
    assert plan["source_index"]["config"]["architectures"] == ["KimiK25ForConditionalGeneration"]
    assert plan["draft"]["revision_dir"] == "/srv/models/kimi-k2.5-eagle3/d1"
    reading = plan["draft"]["source_index"]
    assert reading["config"]["architectures"] == ["LlamaForCausalLMEagle3"] and reading["config_error"] is None
    assert reading["total_size_bytes"] == draft["total_size"] and reading["shards"] == 1
    assert result["model"]["total_size_bytes"] == TOTAL + draft["total_size"]
    assert result["model"]["source"].endswith("+ the EAGLE3 draft's 0.0 GB (%s/kimi-k2.5-eagle3/model.safetensors)"
                                              % mirror.url)
    from ansible_collections.blackwell.sglang.plugins.filter.sglang_eagle3 import preflight_draft_problems
    assert preflight_draft_problems(plan, {"enabled": True}) == []
