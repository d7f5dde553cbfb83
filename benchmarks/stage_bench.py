#!/usr/bin/env python3
"""Benchmark model_stage (http and hf sources) against what users would pick instead, and its no-op re-run.

    python benchmarks/stage_bench.py --gb 1      # default 4; after source scripts/env.sh (safetensors optional)

Contenders, the same bytes from the same loopback server: ``cp -r`` (+ ``sync``, + ``sha256sum -c``), model_stage
``source: http`` and ``source: hf`` (full sha256 of every shard, durable before it records a file), the pinned
huggingface_hub's ``hf download`` against the server's fake Hub API, and ``aria2c -x N`` (Debian's aria2,
``apt-get install aria2``; skipped when absent) from its mirror face. Each row: wall seconds, GB/s, CPU seconds per
GB (the contender's processes, user + sys; the server's sendfile is not counted). PASS/FAIL lines at the end:
model_stage http at least as fast as ``hf download`` and within 10 % of ``aria2c``, or the CPU figures show the
core-bound step (sha256) that prevents it on this machine's cores.

1. writes a real-format checkpoint of ``--gb`` GB (``--shards`` shards, tests/sandbox/checkpoint.py) with SHA256SUMS;
2. serves it from a separate process on 127.0.0.1 (tests/sandbox/fake_hub.py, sendfile, honours Range);
3. times ``cp -r`` of the directory, ``cp -r`` then ``sha256sum`` of the copy, and a staging run of the module (its
   own process, as on a node: download with ``--parallel`` threads, sha256 while writing, verify, rename, flip);
4. times the no-op re-run (stat only) in-process, best of ``--repeat``, for this checkpoint and for one with the
   same shard count and 2x the bytes.

Source files are warm in the page cache for every contender (each is read once before timing). Targets:
staging <= 1.15 x cp, no-op(2x) / no-op(1x) <= 1.1. Disk peak is about 5 x ``--gb``; everything under ``--workdir``
is removed at the end unless ``--keep``. ``cp`` does not sync while model_stage makes the files durable
(fdatasync in batches) before it records them as done or renames; ``cp + sync`` is printed too, with the staging
process's CPU seconds and the sha256 rate of one core (hashing alone bounds staging from below on few cores).
"""

import argparse
import hashlib
import json
import os
import resource
import struct
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "sandbox"))
# The checkout as the collection blackwell.sglang (.collections links to the repository root).
sys.path.insert(0, os.path.join(ROOT, ".collections"))

from ansible_collections.blackwell.sglang.plugins.module_utils.staging.model_staging import stage  # noqa: E402


def save_u8_tensors(tensors, path, metadata=None):
    """Write 1-D U8 tensors (name -> bytes) as a safetensors file with the standard library: an 8-byte
    little-endian header length, the JSON header padded with spaces to 8 bytes, then the data in order.
    Used where the safetensors package is not installed (a bare benchmark host)."""
    header, offset = {}, 0
    for name, data in tensors.items():
        header[name] = {"dtype": "U8", "shape": [len(data)], "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    if metadata:
        header["__metadata__"] = metadata
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as handle:
        handle.write(struct.pack("<Q", len(raw)) + raw)
        for data in tensors.values():
            handle.write(data)


def make_checkpoint(out, shards, shard_bytes):
    """``shards`` real safetensors files of ``shard_bytes`` each (4 U8 tensors of random bytes), index, config,
    tokenizer config and SHA256SUMS (same layout as tests/sandbox/checkpoint.py, whose miniature model caps the size).
    Written by the safetensors package when it is installed, else by ``save_u8_tensors``."""
    try:
        import numpy as np
        from safetensors.numpy import save_file

        def save(tensors, path):
            save_file(dict((k, np.frombuffer(v, np.uint8)) for k, v in tensors.items()), path,
                      metadata={"format": "pt"})
    except ImportError:
        def save(tensors, path):
            save_u8_tensors(tensors, path, {"format": "pt"})

    os.makedirs(out, exist_ok=True)
    weight_map, total, files = {}, 0, {}
    for i in range(1, shards + 1):
        name = "model-%05d-of-%06d.safetensors" % (i, shards)
        tensors = dict(("language_model.model.layers.%d.w%d" % (i, j), os.urandom(shard_bytes // 4)) for j in range(4))
        save(tensors, os.path.join(out, name))
        weight_map.update(dict((k, name) for k in tensors))
        total += sum(len(t) for t in tensors.values())
    meta = {"model.safetensors.index.json": {"metadata": {"total_size": total}, "weight_map": weight_map},
            "config.json": {"architectures": ["KimiK25ForConditionalGeneration"]},
            # A chat template inline, so model_stage's required-files check asks for no chat_template.jinja.
            "tokenizer_config.json": {"model_max_length": 262144,
                                      "chat_template": "{% for m in messages %}{{ m['content'] }}{% endfor %}"}}
    for name, data in meta.items():
        with open(os.path.join(out, name), "w") as handle:
            json.dump(data, handle)
    sums = []
    for name in sorted(os.listdir(out)):
        digest = hashlib.sha256()
        with open(os.path.join(out, name), "rb") as handle:
            for block in iter(lambda: handle.read(1 << 22), b""):
                digest.update(block)
        sums.append("%s  %s\n" % (digest.hexdigest(), name))
        files[name] = os.path.getsize(os.path.join(out, name))
    with open(os.path.join(out, "SHA256SUMS"), "w") as handle:
        handle.writelines(sums)
    return {"files": files}


class Module(object):
    check_mode = False

    def __init__(self, params):
        self.params = params

    def warn(self, msg):
        print("warning: %s" % msg)


HF_REPO = "moonshotai/Kimi-K2.5"
HF_COMMIT = "0123456789abcdef0123456789abcdef01234567"
HF_HELPER = os.path.join(ROOT, "roles", "model_stage", "files", "hf_snapshot.py")


def params(url, store, revision, parallel, source="http", commit=None):
    """model_stage's arguments; ``source: hf`` runs the role's own helper with this Python (huggingface_hub)."""
    hf = source == "hf"
    return dict(name="Kimi-K2.5", revision=revision, source=source, source_path=None, url=None if hf else url,
                manifest="SHA256SUMS", token=None, headers={}, parallel=parallel, retries=3, retry_delay=1.0,
                timeout=60, progress_file=None, progress_interval=5.0, hf_repo_id=HF_REPO if hf else None,
                hf_revision=commit if hf else None, hf_endpoint=url if hf else "", hf_python=sys.executable,
                hf_helper=HF_HELPER if hf else None, allow_patterns=[], store=store, link_mode="copy")


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def timed(argv, **kw):
    start = time.perf_counter()
    subprocess.run(argv, check=True, **kw)
    return time.perf_counter() - start


def warm(directory):
    subprocess.run("cat %s/* > /dev/null" % directory, shell=True, check=True)


def serve(directory, hub=False):
    """tests/sandbox/fake_hub.py on a free loopback port: the plain mirror, or (``hub``) the fake Hub API, which
    answers only Hub paths, as the real one does. Both send the same files with sendfile."""
    port = free_port()
    argv = [sys.executable, os.path.join(ROOT, "tests", "sandbox", "fake_hub.py"), directory, "--port", str(port)]
    proc = subprocess.Popen(argv + (["--repo", HF_REPO, "--commit", HF_COMMIT] if hub else []), stdout=subprocess.PIPE)
    proc.stdout.readline()
    return proc, "http://127.0.0.1:%d" % port


def stage_process(url, store, revision, parallel, source="http", commit=None):
    argsfile = os.path.join(store + ".args.json")
    with open(argsfile, "w") as handle:
        json.dump({"ANSIBLE_MODULE_ARGS": params(url, store, revision, parallel, source, commit)}, handle)
    runner = ("import sys, runpy; sys.path.insert(0, %r); sys.argv[1:] = [%r]; "
              "runpy.run_path(%r, run_name='__main__')" % (os.path.join(ROOT, ".collections"), argsfile,
                                                           os.path.join(ROOT, "plugins", "modules", "model_stage.py")))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", runner], capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    os.unlink(argsfile)
    result = json.loads(out.stdout)
    if result.get("failed"):
        raise SystemExit("staging failed: %s" % result["msg"])
    result["cpu_s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, result


def child_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_child(argv, env=None):
    """Run a contender to completion; returns (wall s, CPU s of it and its children). Raises on a non-zero exit."""
    before, start = child_cpu(), time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - start, child_cpu() - before
    if proc.returncode != 0:
        raise SystemExit("%s failed (exit %d): %s" % (argv[0], proc.returncode, (proc.stdout + proc.stderr)[-800:]))
    return wall, cpu


def warm_hub(url, repo, commit):
    """The fake Hub computes each file's sha256 and git blob id on its first metadata request: do that before any
    timing, so no contender pays for the server's hashing (a real Hub has them precomputed)."""
    with urllib.request.urlopen("%s/api/models/%s/revision/%s" % (url, repo, commit), timeout=600) as answer:
        answer.read()


def hf_download(url, repo, commit, dst, parallel):
    """``hf download`` of the controller venv's huggingface_hub (the pinned 2.4.0) into ``dst``."""
    hf = os.path.join(os.path.dirname(sys.executable), "hf")
    env = dict(os.environ, HF_ENDPOINT=url, HF_HUB_DISABLE_TELEMETRY="1", HF_HUB_DISABLE_PROGRESS_BARS="1",
               HF_HOME=dst + ".hf-home")
    env.pop("HF_TOKEN", None)
    try:
        return run_child([hf, "download", repo, "--revision", commit, "--local-dir", dst, "--max-workers",
                          str(parallel), "--quiet"], env=env)
    finally:
        shutil.rmtree(dst + ".hf-home", ignore_errors=True)


def aria2c(url, names, dst, parallel):
    """``aria2c -x N -j N`` of every file from the mirror into ``dst``; None when aria2c is not installed."""
    if not shutil.which("aria2c"):
        return None
    listing = dst + ".urls"
    with open(listing, "w") as handle:
        for name in names:
            handle.write("%s/%s\n  out=%s\n" % (url, name, name))
    try:
        return run_child(["aria2c", "-x", str(parallel), "-s", str(parallel), "-j", str(parallel), "--dir", dst,
                          "-i", listing, "--file-allocation=none", "--console-log-level=warn", "--summary-interval=0",
                          "--auto-file-renaming=false", "--allow-overwrite=true", "--download-result=hide"])
    finally:
        os.unlink(listing)


def sha256_rate(nbytes=512 * 1024 * 1024, chunk=8 * 1024 * 1024):
    """sha256 bytes per second of one core (hashlib, the module's chunk size)."""
    block = memoryview(os.urandom(chunk))
    digest = hashlib.sha256()
    start = time.perf_counter()
    for _ in range(nbytes // chunk):
        digest.update(block)
    return nbytes / (time.perf_counter() - start)


def noop_time(url, store, revision, parallel, repeat):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        result = stage(Module(params(url, store, revision, parallel)))
        times.append(time.perf_counter() - start)
        assert result["changed"] is False and result["copied_bytes"] == 0, result
    return min(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gb", type=float, default=4.0, help="checkpoint size in GB (default 4)")
    ap.add_argument("--shards", type=int, default=16)
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--workdir", default="/tmp/stage-bench")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    work = args.workdir
    os.makedirs(work, exist_ok=True)
    try:
        report = {}
        for factor in (1, 2):
            src = os.path.join(work, "src%dx" % factor, "Kimi-K2.5")
            shard_bytes = int(args.gb * factor * 1e9 / args.shards)
            t0 = time.perf_counter()
            summary = make_checkpoint(src, args.shards, shard_bytes)
            nbytes = sum(summary["files"].values())
            print("%dx: checkpoint %.2f GB in %d shards written in %.1f s" % (
                factor, nbytes / 1e9, args.shards, time.perf_counter() - t0), flush=True)
            warm(src)
            if factor == 1:
                dst = os.path.join(work, "cp")
                t_cp = timed(["cp", "-r", src, dst])
                t_cpsync = t_cp + timed(["sync"])
                shutil.rmtree(dst)
                subprocess.run(["sync"], check=True)
                warm(src)
                start = time.perf_counter()
                subprocess.run(["cp", "-r", src, dst], check=True)
                subprocess.run("cd %s && sha256sum -c --quiet SHA256SUMS" % dst, shell=True, check=True)
                t_cpsum = time.perf_counter() - start
                shutil.rmtree(dst)
                subprocess.run(["sync"], check=True)
                warm(src)
            server, url = serve(src)
            hub, hub_url = serve(src, hub=True) if factor == 1 else (None, None)
            others = {}
            try:
                store = os.path.join(work, "store%dx" % factor)
                t_stage, result = stage_process(url, store, "r1", args.parallel)
                assert result["verified"] and result["copied_bytes"] == result["total_bytes"], result
                t_noop = noop_time(url, store, "r1", args.parallel, args.repeat)
                if factor == 1:
                    warm_hub(hub_url, HF_REPO, HF_COMMIT)
                    # The other contenders, each into an empty directory on the same disk, then made durable.
                    hf_store = os.path.join(work, "store-hf")
                    t_hf, hf_result = stage_process(hub_url, hf_store, "r1", args.parallel, "hf", HF_COMMIT)
                    assert hf_result["verified"] and hf_result["shards"] == result["shards"], hf_result
                    others["model_stage hf (sha256)"] = (t_hf, hf_result["cpu_s"], 0.0)
                    shutil.rmtree(hf_store)
                    contenders = (
                        ("hf download", lambda dst: hf_download(hub_url, HF_REPO, HF_COMMIT, dst, args.parallel)),
                        ("aria2c -x %d" % args.parallel,
                         lambda dst: aria2c(url, sorted(summary["files"]), dst, args.parallel)))
                    for label, fetch in contenders:
                        dst = os.path.join(work, "dl")
                        os.makedirs(dst)
                        got = fetch(dst)
                        if got is not None:
                            t_sync = timed(["sync"])
                            got_bytes = sum(os.path.getsize(os.path.join(dst, n)) for n in summary["files"])
                            assert got_bytes == nbytes, (label, got_bytes, nbytes)
                            others[label] = (got[0], got[1], t_sync)
                        else:
                            others[label] = None
                        shutil.rmtree(dst)
                        subprocess.run(["sync"], check=True)
                        warm(src)
            finally:
                for proc in (server, hub):
                    if proc:
                        proc.terminate()
                        proc.wait(10)
            report[factor] = dict(bytes=nbytes, stage=t_stage, noop=t_noop, progress=result["progress"][-1],
                                  cpu=result["cpu_s"])
            if factor == 1:
                report[1].update(cp=t_cp, cpsum=t_cpsum, cpsync=t_cpsync, others=others)
            shutil.rmtree(os.path.dirname(src))  # keep disk use low: the 2x run does not need 1x's source
            shutil.rmtree(store)
        one, two = report[1], report[2]
        gb = one["bytes"] / 1e9
        print()
        print("bytes: %.2f GB, %d shards, parallel %d, %d CPU(s)" % (gb, args.shards, args.parallel, os.cpu_count()))
        print("cp -r                       %7.2f s  %5.2f GB/s  1.00x" % (one["cp"], gb / one["cp"]))
        print("cp -r + sync                %7.2f s  %5.2f GB/s  %.2fx" % (one["cpsync"], gb / one["cpsync"],
                                                                         one["cpsync"] / one["cp"]))
        print("cp -r + sha256sum -c        %7.2f s  %5.2f GB/s  %.2fx" % (one["cpsum"], gb / one["cpsum"],
                                                                         one["cpsum"] / one["cp"]))
        print("model_stage http (sha256)   %7.2f s  %5.2f GB/s  %.2fx  (target <= 1.15x)" % (
            one["stage"], gb / one["stage"], one["stage"] / one["cp"]))
        print("  last progress line: %s" % one["progress"])
        # Why the target is out of reach on few cores: the CPU work that cannot be avoided.
        rate = sha256_rate()
        cores = os.cpu_count() or 1
        floor = one["bytes"] / rate / cores
        print("  staging process CPU       %7.2f s  (user+sys, all threads; the mirror's sendfile is extra)" % one["cpu"])
        print("  sha256 one core           %7.2f GB/s; hashing alone on %d core(s) %.2f s = %.2fx cp" % (
            rate / 1e9, cores, floor, floor / one["cp"]))
        print("  vs cp -r + sync           %7.2fx  (both durable on return)" % (one["stage"] / one["cpsync"]))
        print()
        print("%-26s %8s %7s %9s %12s" % ("same bytes, same server", "wall s", "GB/s", "CPU s/GB", "+ sync s"))
        rows = [("model_stage http (sha256)", one["stage"], one["cpu"], 0.0)]
        rows += [(label, *row) for label, row in one["others"].items() if row]
        for label, wall, cpu, t_sync in rows:
            print("%-26s %8.2f %7.2f %9.2f %12.2f" % (label, wall, gb / wall, cpu / gb, wall + t_sync))
        for label, row in one["others"].items():
            if row is None:
                print("%-26s not installed (apt-get install aria2)" % label)
        print("sha256 per core            %7.2f GB/s (hashlib, 8 MiB pieces)" % (rate / 1e9))
        print()
        core_bound = one["cpu"] >= 0.85 * cores * one["stage"]
        why = ("; the staging process used %.1f of %.1f core-seconds (%d cores x %.1f s): core-bound, sha256 alone "
               "needs %.2f s" % (one["cpu"], cores * one["stage"], cores, one["stage"], floor)) if core_bound else ""
        verdicts = []
        hf_row = one["others"].get("hf download")
        if hf_row:
            ok = one["stage"] <= hf_row[0] + hf_row[2]
            verdicts.append(("model_stage http <= hf download (+ sync)", ok, "%.2f s vs %.2f s" % (
                one["stage"], hf_row[0] + hf_row[2])))
        aria = [row for label, row in one["others"].items() if label.startswith("aria2c") and row]
        if aria:
            limit = 1.10 * (aria[0][0] + aria[0][2])
            ok = one["stage"] <= limit
            verdicts.append(("model_stage http within 10 % of aria2c (+ sync)", ok, "%.2f s vs %.2f s allowed" % (
                one["stage"], limit)))
        for what, ok, figures in verdicts:
            print("%s %s: %s%s" % ("PASS" if ok else ("EXPLAINED" if core_bound else "FAIL"), what, figures,
                                   "" if ok else why))
        print("no-op re-run 1x             %7.4f s" % one["noop"])
        print("no-op re-run 2x             %7.4f s  ratio %.2f  (target <= 1.1)" % (two["noop"], two["noop"] / one["noop"]))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
