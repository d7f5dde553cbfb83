"""Build filters: arch lists by CUDA version (build_arch), job counts from memory and the build's priority
(build_host), patch series (build_patches), release fingerprints, constraints and pruning (build_release)."""


import re

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.sglang.plugins.filter import build_arch as arch
from ansible_collections.blackwell.sglang.plugins.filter import build_host as host
from ansible_collections.blackwell.sglang.plugins.filter import build_patches as patching
from ansible_collections.blackwell.sglang.plugins.filter import build_release as release
from ansible_collections.blackwell.sglang.plugins.filter import prune_selection as prune


@pytest.mark.parametrize(
    "cuda, expected",
    [("12.8", "12.0a"), ("12.9", "12.0f"), ("13.0", "12.0f"), ("13.1", "12.0f")],
)
def test_sm120_arch_list_follows_cuda_version(cuda, expected):
    assert arch.flashinfer_arch_list(["12.0"], cuda) == expected


def test_sm120_with_cuda_12_6_is_refused_with_both_versions():
    with pytest.raises(AnsibleFilterError, match=r"12\.0.*CUDA >= 12\.8.*found CUDA 12\.6"):
        arch.flashinfer_arch_list(["12.0"], "12.6")


def test_arch_list_deduplicates_and_keeps_other_capabilities():
    assert arch.flashinfer_arch_list(["12.0", "12.0", "9.0"], "13.0") == "12.0f 9.0"
    assert arch.torch_arch_list(["12.0", "12.0"]) == "12.0"


@pytest.mark.parametrize("version, cuda, expected", [
    ("0.7.2", "13.0", "flashinfer-jit-cache==0.7.2+cu130"),
    ("0.7.2", "12.9", "flashinfer-jit-cache==0.7.2+cu129"),
    ("0.7.2", "13.0.2", "flashinfer-jit-cache==0.7.2+cu130"),
])
def test_flashinfer_aot_kernels_are_flashinfers_version_with_the_cuda_release_as_local_version(version, cuda, expected):
    assert arch.flashinfer_jit_cache_requirement(version, cuda) == expected


@pytest.mark.parametrize("version, cuda, words", [
    ("0.7.2+cu130", "13.0", "FlashInfer's release version (such as 0.7.2), got '0.7.2+cu130'"),
    ("", "13.0", "got ''"),
    ("0.7.2", "13", "a CUDA release such as 13.0, got '13'"),
    ("0.7.2", "thirteen", "not a dotted version number: 'thirteen'"),
])
def test_flashinfer_aot_requirement_refuses_what_flashinfer_would_ignore(version, cuda, words):
    with pytest.raises(AnsibleFilterError, match=re.escape(words)):
        arch.flashinfer_jit_cache_requirement(version, cuda)


@pytest.mark.parametrize(
    "mem_gib, cores, expected",
    [
        (64, 32, 6),     # the example: memory, not cores, decides
        (512, 32, 32),   # plenty of memory: capped by cores
        (4, 16, 1),      # tiny host: never zero
        (1024, 128, 96),
    ],
)
def test_job_count_comes_from_memory(mem_gib, cores, expected):
    assert host.build_jobs(mem_gib * 1024, cores) == expected


def test_job_count_respects_max_jobs_and_rejects_nonsense():
    assert host.build_jobs(512 * 1024, 64, max_jobs=4) == 4
    with pytest.raises(AnsibleFilterError):
        host.build_jobs("lots", 8)
    with pytest.raises(AnsibleFilterError):
        host.build_jobs(1024, 8, gb_per_job=0)


def test_fingerprint_ignores_key_order_and_sees_every_value():
    a = {"sglang_ref": "v0.5.23", "cuda": "13.0", "patches": ["ab12"]}
    b = {"patches": ["ab12"], "cuda": "13.0", "sglang_ref": "v0.5.23"}
    assert release.release_fingerprint(a) == release.release_fingerprint(b)
    assert len(release.release_fingerprint(a)) == 16
    for key, value in [("cuda", "12.9"), ("patches", ["ab13"]), ("sglang_ref", "v0.5.22")]:
        assert release.release_fingerprint({**a, key: value}) != release.release_fingerprint(a)


# ------------------------------------------------------------------------ fingerprint inputs (issue 4)
def _patch(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_patch_series_keeps_order_hashes_bytes_and_numbers_node_names(tmp_path):
    _patch(tmp_path, "fix-a.patch", "--- a/x\n+++ b/x\n")
    _patch(tmp_path, "fix-b.patch", "--- a/y\n+++ b/y\n")
    series = patching.patch_series(["fix-b.patch", str(tmp_path / "fix-a.patch")], str(tmp_path))
    assert [s["name"] for s in series] == ["fix-b.patch", "fix-a.patch"]
    assert [s["dest"] for s in series] == ["0001-fix-b.patch", "0002-fix-a.patch"]
    import hashlib
    assert series[1]["sha256"] == hashlib.sha256(b"--- a/x\n+++ b/x\n").hexdigest()
    assert patching.patch_series([], str(tmp_path)) == [] and patching.patch_series(None) == []


def test_patch_series_names_a_missing_patch(tmp_path):
    with pytest.raises(AnsibleFilterError, match=r"patch 2 of 2 \(gone\.patch\).*No such file"):
        _patch(tmp_path, "ok.patch", "x")
        patching.patch_series(["ok.patch", "gone.patch"], str(tmp_path))
    with pytest.raises(AnsibleFilterError, match="list of file paths"):
        patching.patch_series("one.patch")


def _inputs(tmp_path, patches=(), method="source", constraints=("sglang-kernel==0.4.10",)):
    series = patching.patch_series(list(patches), str(tmp_path))
    return {"method": method, "sglang_ref": "v0.5.23", "patches": patching.patch_fingerprint(series),
            "constraints": release.build_constraints(list(constraints), ["torch==2.14.1"]),
            "cuda": "13.0", "arch_list": "12.0", "python": "3.11", "torch": "2.14.1"}


def test_fingerprint_sees_patch_content_order_method_and_constraints(tmp_path):
    _patch(tmp_path, "a.patch", "A\n")
    _patch(tmp_path, "b.patch", "B\n")
    base = release.release_fingerprint(_inputs(tmp_path, ["a.patch", "b.patch"]))
    assert release.release_fingerprint(_inputs(tmp_path, ["a.patch", "b.patch"])) == base  # same inputs
    assert release.release_fingerprint(_inputs(tmp_path, ["b.patch", "a.patch"])) != base  # order matters
    assert release.release_fingerprint(_inputs(tmp_path, ["a.patch"])) != base
    assert release.release_fingerprint(_inputs(tmp_path, ["a.patch", "b.patch"], method="wheel")) != base
    assert release.release_fingerprint(
        _inputs(tmp_path, ["a.patch", "b.patch"], constraints=["sglang-kernel==0.4.11"])) != base
    _patch(tmp_path, "b.patch", "B changed\n")  # same name, new content -> new release
    assert release.release_fingerprint(_inputs(tmp_path, ["a.patch", "b.patch"])) != base


def test_constraints_put_required_pins_first_and_refuse_conflicts():
    text = release.build_constraints(["sglang-kernel==0.4.10", "torch==2.14.1"], ["torch==2.14.1"])
    assert text == "torch==2.14.1\nsglang-kernel==0.4.10\n"
    with pytest.raises(AnsibleFilterError, match=r"torch is pinned twice: 'torch==2\.14\.1' and 'torch==2\.9\.0'"):
        release.build_constraints(["torch==2.9.0"], ["torch==2.14.1"])
    with pytest.raises(AnsibleFilterError, match="not a pin"):
        release.build_constraints(["sglang-kernel"])
    assert release.build_constraints([]) == ""


def test_installed_stack_names_each_pinned_distribution_and_sglang_as_pip_freeze_has_them():
    constraints = "torch==2.14.1\nflashinfer-python==0.7.2\nsglang-kernel==0.4.10\ntriton==3.8.0\n"
    freeze = ("Flask==3.1.0\nflashinfer_python==0.7.2\nsglang==0.5.23\nsglang-kernel==0.4.10\n"
              "torch==2.14.1\nnvidia-nccl-cu13==2.30.7\n")
    assert release.installed_stack(freeze, constraints) == {
        "torch": "2.14.1", "flashinfer-python": "0.7.2", "sglang-kernel": "0.4.10", "triton": None,
        "sglang": "0.5.23"}


def test_installed_stack_keeps_a_direct_reference_and_ignores_comments():
    freeze = "# Editable install\nsglang @ file:///opt/sglang/releases/r1/src/sglang/python\ntorch==2.14.1\n"
    assert release.installed_stack(freeze, "torch==2.14.1\n") == {
        "torch": "2.14.1", "sglang": "file:///opt/sglang/releases/r1/src/sglang/python"}


def test_patch_failure_names_the_first_patch_that_did_not_apply():
    results = [
        {"rc": 0, "item": {"name": "0001-ok.patch", "index": 1, "path": "/p/0001-ok.patch"}},
        {"rc": 1, "failed": True, "stderr": "error: patch failed: python/sglang/__init__.py:3",
         "item": {"name": "0002-broken.patch", "index": 2, "path": "/p/0002-broken.patch"}},
        {"rc": 1, "failed": True, "stderr": "later", "item": {"name": "0003-x.patch", "index": 3}},
    ]
    msg = patching.patch_failure(results, "SGLang v0.5.23")
    assert msg.startswith("patch 0002-broken.patch (2 of 3, /p/0002-broken.patch) does not apply to SGLang v0.5.23")
    assert "patch failed: python/sglang/__init__.py:3" in msg and "0003" not in msg
    assert patching.patch_failure(results[:1]) == ""
    # The roles' loops name their variable (loop_control.loop_var): each result holds its entry under that name.
    named = [{k if k != "item" else "sglang_build_patch": v for k, v in r.items()} for r in results]
    for r in named:
        r["ansible_loop_var"] = "sglang_build_patch"
    assert patching.patch_failure(named, "SGLang v0.5.23") == msg


def test_sm_arch_names_torch_archs():
    assert arch.sm_arch("12.0") == "sm_120"
    assert arch.sm_arch("9.0") == "sm_90"


# ------------------------------------------------------------------------------------ prune selection
def _rel(name, mtime, complete=True):
    return {"name": name, "mtime": mtime, "complete": complete}


def test_prune_keeps_newest_complete_and_never_current_or_previous():
    entries = [_rel("r1", 1), _rel("r2", 2), _rel("r3", 3), _rel("r4", 4), _rel("r5", 5)]
    assert prune.prune_selection(entries, 3) == ["r1", "r2"]
    # current is the oldest (a rollback happened) and previous the next: both stay, they count towards keep
    assert prune.prune_selection(entries, 3, protect=["/opt/sglang/releases/r1", "r2"]) == ["r3", "r4"]
    assert prune.prune_selection(entries, 1, protect=["r1", "r2"]) == ["r3", "r4", "r5"]


def test_prune_drops_failed_builds_only_once_something_newer_succeeded():
    entries = [_rel("ok1", 1), _rel("failed", 2, False), _rel("ok2", 3), _rel("failing-now", 4, False)]
    assert prune.prune_selection(entries, 3) == ["failed"]
    assert prune.prune_selection([_rel("failed", 2, False)], 3) == []


def test_prune_reads_find_results_markers_partials_and_pattern():
    found = [{"path": "/opt/sglang/releases/%016x" % i, "mtime": i} for i in range(1, 6)]
    found.append({"path": "/opt/sglang/releases/lost+found", "mtime": 0})
    markers = [{"path": "/opt/sglang/releases/%016x/release.json" % i} for i in (1, 2, 3, 5)]
    doomed = prune.prune_selection(found, 2, protect=["%016x" % 5], pattern="[0-9a-f]{16}", markers=markers)
    # 5 protected + 3 kept; 2 and 1 complete but old; 4 incomplete and older than 5
    assert doomed == ["%016x" % 1, "%016x" % 2, "%016x" % 4]
    wheels = [{"path": "/w/flashinfer-%016x" % 1, "mtime": 1}, {"path": "/w/flashinfer-%016x.partial" % 2, "mtime": 2},
              {"path": "/w/flashinfer-%016x" % 3, "mtime": 3}]
    assert prune.prune_selection(wheels, 1, pattern=r"flashinfer-[0-9a-f]{16}(\.partial)?") == [
        "flashinfer-%016x" % 1, "flashinfer-%016x.partial" % 2]


def test_prune_refuses_keep_below_one():
    with pytest.raises(AnsibleFilterError, match="at least 1"):
        prune.prune_selection([], 0)


@pytest.mark.parametrize("nice, prefix", [(0, ""), (None, ""), ("10", "nice -n 10 ionice -c 3 "),
                                          (19, "nice -n 19 ionice -c 3 ")])
def test_priority_prefix_lowers_cpu_and_io_priority_only_when_asked(nice, prefix):
    assert host.priority_prefix(nice) == prefix


@pytest.mark.parametrize("nice, words", [(20, "0-19, got 20"), (-1, "0-19, got -1"), ("low", "a number 0-19")])
def test_priority_prefix_refuses_a_niceness_out_of_range(nice, words):
    with pytest.raises(AnsibleFilterError, match=words):
        host.priority_prefix(nice)


def _install_spec(**over):
    spec = {"release": "/opt/sglang/releases/0123456789abcdef", "installer": "uv", "uv": "/opt/sglang/tools/uv/bin/uv",
            "cache_dir": "/opt/sglang/releases/.package-cache", "compile_bytecode": True, "nice": 0,
            "pip_args": ["--find-links", "/srv/wheel house"],
            "torch": {"version": "2.14.1", "index_url": "", "pip_args": []},
            "requirements": ["flashinfer-python==0.7.2", "sglang==0.5.23"]}
    spec.update(over)
    return spec


def _runs(command):
    import shlex
    assert command.startswith("{ set -o pipefail; ") and command.endswith(
        "; } > /opt/sglang/releases/0123456789abcdef/build.log 2>&1")
    body = command[len("{ set -o pipefail; "):-len("; } > /opt/sglang/releases/0123456789abcdef/build.log 2>&1")]
    return [shlex.split(run) for run in body.split(" && ")]


def test_uv_install_hardlinks_from_its_cache_into_the_release_venv_held_to_constraints():
    (argv,) = _runs(release.release_install_command(_install_spec()))
    assert argv == ["/opt/sglang/tools/uv/bin/uv", "pip", "install", "--no-config",
                    "--python", "/opt/sglang/releases/0123456789abcdef/venv/bin/python",
                    "--cache-dir", "/opt/sglang/releases/.package-cache", "--link-mode", "hardlink", "--compile-bytecode",
                    "--find-links", "/srv/wheel house", "-c", "/opt/sglang/releases/0123456789abcdef/constraints.txt",
                    "flashinfer-python==0.7.2", "sglang==0.5.23"]
    (argv,) = _runs(release.release_install_command(_install_spec(compile_bytecode=False)))
    assert "--compile-bytecode" not in argv


def test_pip_install_and_a_torch_index_and_priority():
    spec = _install_spec(installer="pip", nice=10, requirements=["", "sglang==0.5.23"],
                         torch={"version": "2.14.1", "index_url": "https://mirror/whl/cu130", "pip_args": ["--no-cache-dir"]})
    torch, rest = _runs(release.release_install_command(spec))
    python = "/opt/sglang/releases/0123456789abcdef/venv/bin/python"
    constraints = ["-c", "/opt/sglang/releases/0123456789abcdef/constraints.txt"]
    prefix = ["nice", "-n", "10", "ionice", "-c", "3"]
    assert torch == prefix + [python, "-m", "pip", "install", "--disable-pip-version-check",
                              "--index-url", "https://mirror/whl/cu130", "--no-cache-dir", *constraints, "torch==2.14.1"]
    assert rest == prefix + [python, "-m", "pip", "install", "--disable-pip-version-check",
                             "--find-links", "/srv/wheel house", *constraints, "sglang==0.5.23"]


def test_flashinfers_aot_kernels_are_installed_last_without_dependencies_from_their_own_index():
    aot = "flashinfer-jit-cache==0.7.2+cu130"
    rest, jit_cache = _runs(release.release_install_command(_install_spec(
        jit_cache={"requirement": aot, "pip_args": ["--index-url", "https://flashinfer.ai/whl/cu130"]})))
    assert rest[-2:] == ["flashinfer-python==0.7.2", "sglang==0.5.23"] and aot not in rest
    assert jit_cache[-6:] == ["--no-deps", "--index-url", "https://flashinfer.ai/whl/cu130",
                              "-c", "/opt/sglang/releases/0123456789abcdef/constraints.txt", aot]
    assert jit_cache[:2] == ["/opt/sglang/tools/uv/bin/uv", "pip"] and "--link-mode" in jit_cache
    # no index of its own: the release's (a wheelhouse that holds it)
    _rest, jit_cache = _runs(release.release_install_command(_install_spec(jit_cache={"requirement": aot, "pip_args": []})))
    assert jit_cache[-6:-2] == ["--no-deps", "--find-links", "/srv/wheel house", "-c"]
    # none asked for: one run, as before
    assert len(_runs(release.release_install_command(_install_spec(jit_cache={"requirement": "", "pip_args": []})))) == 1


def _pins(**over):
    pins = {"method": "wheel", "requirements": ["flashinfer-python==0.7.2", "sglang==0.5.23"], "installer": "uv==0.13.9",
            "torch": {"version": "2.14.1", "index_url": "", "pip_args": []},
            "jit_cache": {"requirement": "", "pip_args": []}}
    pins.update(over)
    return pins


def test_the_wheelhouse_downloads_the_closure_with_the_installer_held_to_the_releases_pins():
    (run,) = release.wheelhouse_download_commands(_pins(), "/srv/wheelhouse", "/opt/pip/bin/pip", "/srv/c.txt",
                                                  ["--index-url", "https://mirror/simple"])
    assert run == ["/opt/pip/bin/pip", "download", "--disable-pip-version-check", "--only-binary=:all:", "--dest",
                   "/srv/wheelhouse", "--index-url", "https://mirror/simple", "-c", "/srv/c.txt",
                   "flashinfer-python==0.7.2", "sglang==0.5.23", "uv==0.13.9"]


def test_the_wheelhouse_takes_torch_and_flashinfers_aot_package_from_their_own_indexes():
    pins = _pins(installer="", torch={"version": "2.14.1", "index_url": "https://torch/cu130", "pip_args": ["-q"]},
                 jit_cache={"requirement": "flashinfer-jit-cache==0.7.2+cu130", "pip_args": []})
    torch, rest, aot = release.wheelhouse_download_commands(pins, "/w", "pip", "/c.txt", [],
                                                            ["--index-url", "https://flashinfer.ai/whl/cu130"])
    assert torch[6:] == ["--index-url", "https://torch/cu130", "-q", "-c", "/c.txt", "torch==2.14.1"]
    assert rest[6:] == ["-c", "/c.txt", "flashinfer-python==0.7.2", "sglang==0.5.23"]
    assert aot[6:] == ["--no-deps", "--index-url", "https://flashinfer.ai/whl/cu130", "flashinfer-jit-cache==0.7.2+cu130"]


def test_the_wheelhouse_refuses_a_source_build():
    with pytest.raises(AnsibleFilterError, match="a wheelhouse holds the wheel method's packages; sglang_build_method is 'source'"):
        release.wheelhouse_download_commands(_pins(method="source"), "/w", "pip", "/c.txt")


@pytest.mark.parametrize("over, words", [
    ({"installer": "conda"}, "installer must be one of uv, pip, got 'conda'"),
    ({"uv": "", "cache_dir": ""}, "uv, cache_dir missing for the uv installer"),
    ({"requirements": []}, "requirements missing"),
])
def test_install_command_refuses_what_it_cannot_run(over, words):
    with pytest.raises(AnsibleFilterError, match=re.escape(words)):
        release.release_install_command(_install_spec(**over))
