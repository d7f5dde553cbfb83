"""Filters that turn structured SGLang options into a validated argv and a systemd ExecStart line.

``sglang_argv``
    dict of SGLang options -> list of argv strings, validated against the argparse snapshot of the
    pinned SGLang release (``plugins/data/sglang_cli_<version>.json``, exported from the real package by
    ``tests/contract/export_sglang_cli.py``). Keys are long option names without the leading dashes
    (``tp-size``; ``tp_size`` is accepted and normalised). Never emits abbreviations: argparse would accept
    ``--tp`` for ``--tp-size`` today and silently change meaning when a release adds ``--tp-foo``.

``sglang_argv_errors``
    the same checks as a list of messages, for preflight to report with every other problem.

``STARTUP_RULES`` / ``sglang_startup_rules``
    the checks SGLang 0.5.23 runs after argparse that a Kimi deployment can hit (HiCache vs radix cache, tp/nodes,
    multi-node DP, served name, chunked prefill vs page size, attention DP vs replicas, HiCache fraction, MoE dense
    TP, torch.compile without padding), so they fail preflight rather than a started unit.

Model-family and hardware rules (``model_family``, ``compute_capability`` arguments): Kimi models need
``--tool-call-parser kimi_k2 --reasoning-parser kimi_k2 --trust-remote-code``; on compute capability 12.x
(SM120) ``trtllm_mla`` attention and DeepGEMM backends are refused; ``--api-key``/``--admin-api-key`` are
refused because argv is world-readable.

``sglang_router_argv``
    the same for the router (``python -m sglang_router.launch_router``), against the router's snapshot.

``sglang_service_endpoint`` / ``sglang_router_metrics_endpoint``
    what a deployed server listens on (unset options at the snapshot's defaults), as the owning role publishes it:
    SGLang's probe and router URLs; the router's Prometheus listener, locally and for a scraper on another host.

``systemd_quote``
    list of argv strings -> one command line for ``ExecStart=``, quoted so that systemd's own parser
    (systemd.service(5) "COMMAND LINES", systemd.unit(5) "SPECIFIERS") gives back the same list.
"""

from __future__ import annotations

import difflib
import json
import os
import re

from ansible.errors import AnsibleFilterError

DATA_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")

_SNAPSHOTS: dict[str, dict] = {}

# Options removed or replaced in a release, with what to use instead (each checked in that release's server_args.py).
_REPLACED = {
    "cuda-graph-max-bs": "--cuda-graph-max-bs-decode",
    "enable-dp-attention": "--attn-dp-size",
}


# Products whose parsers we snapshot: file prefix and the name used in messages.
_PRODUCTS = {"sglang": ("sglang_cli_", "SGLang"), "router": ("sglang_router_cli_", "sglang-router")}


def load_snapshot(version: str, product: str = "sglang") -> dict:
    """Return the argparse snapshot of SGLang (or, ``product="router"``, sglang-router) ``version`` as
    exported from the real package.

    Shape: ``{"sglang_version": str, "allow_abbrev": bool, "actions": [{"option_strings": [...],
    "dest": str, "action": str, "nargs": ..., "choices": list|None, "type": str|None, ...}]}``.
    Raises AnsibleFilterError naming the versions we have when there is no snapshot for ``version``.
    """
    prefix, label = _PRODUCTS[product]
    key = prefix + version
    if key not in _SNAPSHOTS:
        path = os.path.join(DATA_DIR, f"{prefix}{version}.json")
        if not os.path.exists(path):
            have = sorted(
                f[len(prefix):-len(".json")]
                for f in os.listdir(DATA_DIR)
                if f.startswith(prefix) and f.endswith(".json")
            ) if os.path.isdir(DATA_DIR) else []
            raise AnsibleFilterError(
                f"no argparse snapshot for {label} {version} (have: {', '.join(have) or 'none'}); "
                f"export one with tests/contract/export_sglang_cli.py"
            )
        with open(path, encoding="utf-8") as fh:
            _SNAPSHOTS[key] = json.load(fh)
    return _SNAPSHOTS[key]


def _option_index(snapshot: dict) -> dict[str, dict]:
    index = {}
    for action in snapshot["actions"]:
        for opt in action.get("option_strings") or []:
            if opt.startswith("--"):
                index[opt] = action
    return index


_FLAG_ACTIONS = {"store_true", "store_false", "store_const", "count"}


def _check_type(flag: str, type_name: str | None, value: str) -> str | None:
    if type_name == "int":
        try:
            int(value)
        except ValueError:
            return f"{flag} expects an integer, got {value!r}"
    elif type_name == "float":
        try:
            float(value)
        except ValueError:
            return f"{flag} expects a number, got {value!r}"
    elif type_name == "json":
        try:
            json.loads(value)
        except ValueError as exc:
            return f"{flag} expects JSON, got {value!r} ({exc})"
    return None


def _scalar(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"), sort_keys=True)
    return str(value)


def _render(options: dict, version: str, product: str = "sglang") -> tuple[list[str], list[str]]:
    """(argv, errors) for ``options`` against the snapshot of ``version``; see ``sglang_argv``."""
    if not isinstance(options, dict):
        raise AnsibleFilterError(f"sglang_argv expects a dict of options, got {type(options).__name__}")
    snapshot = load_snapshot(str(version), product)
    label = f"{_PRODUCTS[product][1]} {version}"
    index = _option_index(snapshot)
    argv: list[str] = []
    errors: list[str] = []
    for raw_name, value in options.items():
        name = str(raw_name).lstrip("-").replace("_", "-")
        flag = "--" + name
        action = index.get(flag)
        if action is None:
            hint = ""
            if product == "sglang" and name in _REPLACED:
                hint = f"; {label} replaced it with {_REPLACED[name]}"
            else:
                near = difflib.get_close_matches(flag, list(index), n=3, cutoff=0.75)
                if near:
                    hint = f"; did you mean {' or '.join(near)}?"
            errors.append(f"{flag} is not an option of {label}{hint}")
            continue
        kind = action.get("action")
        if value is None:
            continue
        if kind in _FLAG_ACTIONS:
            if not isinstance(value, bool):
                errors.append(f"{flag} is a flag: give true or false, got {value!r}")
            elif value:
                argv.append(flag)
            continue
        if kind == "BooleanOptionalAction":
            if not isinstance(value, bool):
                errors.append(f"{flag} takes true or false, got {value!r}")
            else:
                argv.append(flag if value else "--no-" + name)
            continue
        if value is False:
            continue
        nargs = action.get("nargs")
        values = value if isinstance(value, list) and nargs not in (None, "?") else [value]
        if isinstance(value, list) and nargs in (None, "?"):
            values = [_scalar(value)]
        rendered = [_scalar(v) for v in values]
        choices = action.get("choices")
        for item in rendered:
            if choices is not None and item not in [str(c) for c in choices]:
                errors.append(
                    f"{flag} {item!r} is not a valid choice in {label} "
                    f"(choose from {', '.join(str(c) for c in choices)})"
                )
            problem = _check_type(flag, action.get("type"), item)
            if problem:
                errors.append(problem)
        argv.append(flag)
        argv.extend(rendered)
    return argv, errors


def _normalise(options: dict) -> dict:
    return {str(k).lstrip("-").replace("_", "-"): v for k, v in options.items()}


def model_family(options: dict, family: str | None = None) -> str:
    """``family`` when given; else ``kimi`` when the model path or served name says Kimi; else ``""``."""
    if family:
        return str(family).strip().lower()
    opts = _normalise(options)
    names = " ".join(str(opts.get(k) or "") for k in ("model-path", "served-model-name")).lower()
    return "kimi" if "kimi" in names else ""


# Kimi K2 / K2.5: kimi_k2 for both parsers (``kimi`` is an older
# reasoning-only format: wrong for K2/K2.5), and the model ships its own code (tokenizer) -> trust-remote-code.
_KIMI_REQUIRED = (("tool-call-parser", "kimi_k2"), ("reasoning-parser", "kimi_k2"), ("trust-remote-code", True))
# Options whose values fail on SM120 (compute capability 12.x): trtllm_mla kernels and DeepGEMM are built
# for SM90/SM100 only; on RTX PRO 6000 Blackwell the MLA default is triton.
_ATTENTION_OPTIONS = ("attention-backend", "decode-attention-backend", "prefill-attention-backend",
                      "speculative-draft-attention-backend")
_DEEPGEMM_VALUES = {"fp8-gemm-backend": ("deep_gemm", "flashinfer_deepgemm"),
                    "moe-runner-backend": ("deep_gemm",),
                    "speculative-moe-runner-backend": ("deep_gemm",)}
# Secrets SGLang 0.5.23 takes only as options (no environment variable): argv is world-readable
# (/proc/PID/cmdline, ps) and ends up in the unit file and `systemctl show`.
_SECRET_OPTIONS = ("api-key", "admin-api-key")


def sglang_option_rules(options: dict, family: str | None = None, compute_capability: str | None = None) -> list[str]:
    """Model-family, GPU-architecture and secret rules over ``options``; a list of messages (empty = fine)."""
    opts = _normalise(options)
    errors = []
    fam = model_family(opts, family)
    if fam == "kimi":
        for name, want in _KIMI_REQUIRED:
            have = opts.get(name)
            if want is True:
                if have is not True:
                    errors.append(f"Kimi models need --{name} (their tokenizer is code shipped with the model), "
                                  f"got {have!r}; set {name}: true")
            elif have != want:
                errors.append(f"Kimi models need --{name} {want}, got {have!r}; "
                              f"{'kimi is an older reasoning-only format, wrong for K2/K2.5; ' if have == 'kimi' else ''}"
                              f"set {name}: {want}")
    cc = str(compute_capability or "").strip()
    if cc.split(".", maxsplit=1)[0] == "12":
        sm = "SM" + cc.replace(".", "")
        for name in _ATTENTION_OPTIONS:
            if opts.get(name) == "trtllm_mla":
                errors.append(f"--{name} trtllm_mla fails on compute capability {cc} ({sm}, RTX PRO 6000 Blackwell): "
                              f"its kernels are built for SM90/SM100 only; leave it unset (MLA defaults to triton) "
                              f"or use triton")
        for name, bad in _DEEPGEMM_VALUES.items():
            if opts.get(name) in bad:
                errors.append(f"--{name} {opts[name]} uses DeepGEMM, which fails on compute capability {cc} ({sm}); "
                              f"leave it at auto or pick a non-DeepGEMM backend")
    for name in _SECRET_OPTIONS:
        if opts.get(name) not in (None, False, ""):
            errors.append(f"--{name} would put a secret in argv (world-readable in ps and /proc, and in the unit "
                          f"file and `systemctl show`); SGLang 0.5.23 reads it from no environment variable. "
                          f"Leave it out and protect the port (loopback + router, or a proxy holding the key)")
    return errors


# SGLang 0.5.23's own checks after argparse (ServerArgs resolution and check_server_args, sglang/srt/arg_groups/) that
# a Kimi-K2.5 deployment can hit, checked here so that they fail preflight instead of a started unit. Each entry:
# (name, the wheel's text for it -- tests/contract/test_startup_rules.py finds it in the wheel --, where, test,
# message). ``test(opts)`` is True when the options break the rule; ``opts`` holds normalised names.
def _opt_int(opts, name, default=None):
    try:
        return int(opts.get(name, default))
    except (TypeError, ValueError):
        return default


def _opt_float(opts, name):
    try:
        return float(opts[name]) if opts.get(name) is not None else None
    except (TypeError, ValueError):
        return None


STARTUP_RULES = (
    ("hicache_needs_radix_cache",
     r"enable-hierarchical-cache and disable-radix-cache are mutually exclusive",
     "arg_groups/kv_cache_hook.py",
     lambda o: bool(o.get("enable-hierarchical-cache")) and bool(o.get("disable-radix-cache")),
     "--enable-hierarchical-cache and --disable-radix-cache are mutually exclusive in SGLang 0.5.23: HiCache extends "
     "the radix cache; drop one"),
    ("tp_divisible_by_nodes",
     r"tp_size must be divisible by number of nodes",
     "arg_groups/validation_hook.py check_server_args",
     lambda o: (_opt_int(o, "tp-size", 1) * _opt_int(o, "pp-size", 1)) % max(_opt_int(o, "nnodes", 1), 1) != 0,
     "--tp-size x --pp-size must be divisible by --nnodes (SGLang 0.5.23 asserts it at start-up)"),
    ("no_multinode_data_parallel",
     r"multi-node data-parallel replicas are not supported",
     "arg_groups/validation_hook.py check_server_args",
     lambda o: _opt_int(o, "dp-size", 1) > 1 and _opt_int(o, "nnodes", 1) > 1,
     "--dp-size > 1 with --nnodes > 1: SGLang 0.5.23 has no multi-node data-parallel replicas; use --attn-dp-size "
     "across nodes or one deployment per node"),
    ("served_name_without_colon",
     r"served_model_name cannot contain a colon",
     "arg_groups/validation_hook.py check_server_args",
     lambda o: ":" in str(o.get("served-model-name") or ""),
     "--served-model-name must not contain ':' (SGLang 0.5.23 reserves it for the model:adapter LoRA syntax)"),
    ("chunked_prefill_multiple_of_page",
     r"chunked_prefill_size must be divisible by page_size",
     "arg_groups/validation_hook.py check_server_args",
     lambda o: (_opt_int(o, "chunked-prefill-size", 0) or 0) > 0 and (_opt_int(o, "page-size", 0) or 0) > 0
     and _opt_int(o, "chunked-prefill-size") % _opt_int(o, "page-size") != 0,
     "--chunked-prefill-size must be a multiple of --page-size (SGLang 0.5.23 asserts it at start-up)"),
    ("attention_dp_or_replicas",
     r"data-parallel replicas combined with attention data parallelism are not supported",
     "arg_groups/parallel_hook.py",
     lambda o: _opt_int(o, "attn-dp-size", 1) > 1 and _opt_int(o, "dp-size", 1) > 1,
     "--attn-dp-size > 1 with --dp-size > 1: SGLang 0.5.23 does not combine attention DP with DP replicas"),
    ("hicache_fraction_in_range",
     r"--hicache-host-memory-fraction must be in \(0, 1\]",
     "arg_groups/hicache_hook.py handle_hicache_ratio_default",
     lambda o: _opt_float(o, "hicache-host-memory-fraction") is not None
     and not 0 < _opt_float(o, "hicache-host-memory-fraction") <= 1,
     "--hicache-host-memory-fraction must be in (0, 1]"),
    ("moe_dense_tp_size",
     r"moe_dense_tp_size only supports None, 1, or tp_size currently",
     "arg_groups/validation_hook.py check_server_args",
     lambda o: o.get("moe-dense-tp-size") is not None
     and _opt_int(o, "moe-dense-tp-size") not in (1, _opt_int(o, "tp-size", 1)),
     "--moe-dense-tp-size must be 1 or the --tp-size"),
    ("no_torch_compile_without_padding",
     r"--disable-cuda-graph-padding is incompatible with --enable-torch-compile",
     "arg_groups/validation_hook.py check_server_args",
     lambda o: bool(o.get("disable-cuda-graph-padding")) and bool(o.get("enable-torch-compile")),
     "--disable-cuda-graph-padding with --enable-torch-compile compiles once per batch size and stalls start-up for "
     "minutes (SGLang 0.5.23 refuses it); drop one"),
)


def sglang_startup_rules(options: dict) -> list[str]:
    """SGLang 0.5.23's post-parse start-up checks (``STARTUP_RULES``) over ``options``: messages, empty = fine."""
    opts = _normalise(options)
    return [message for _name, _text, _where, broken, message in STARTUP_RULES if broken(opts)]


def sglang_argv_errors(options: dict, version: str, model_family: str | None = None,
                       compute_capability: str | None = None) -> list[str]:
    """Every problem ``sglang_argv`` would raise for, as a list (for preflight's one failure)."""
    _argv, errors = _render(options, str(version))
    return errors + sglang_option_rules(options, model_family, compute_capability) + sglang_startup_rules(options)


def sglang_argv(options: dict, version: str, model_family: str | None = None,
                compute_capability: str | None = None) -> list[str]:
    """Render ``options`` (option name -> value) as argv for ``python -m sglang.launch_server``.

    Values: ``True`` -> bare flag for store_true options; ``False``/``None`` -> omitted (a
    BooleanOptionalAction renders ``--no-NAME`` for False); a list -> one argv element per item for
    nargs options; a dict -> compact JSON (e.g. ``--model-loader-extra-config``); anything else -> str.
    Order follows the dict. Raises AnsibleFilterError listing every problem at once: unknown option
    (with the nearest names and the replacement for options a release removed), bad choice, wrong type,
    and the rules of ``sglang_option_rules`` (Kimi parsers, SM120 backends, secrets in argv).
    """
    argv, errors = _render(options, str(version))
    errors += sglang_option_rules(options, model_family, compute_capability) + sglang_startup_rules(options)
    if errors:
        raise AnsibleFilterError("invalid SGLang options:\n- " + "\n- ".join(errors))
    return argv


def sglang_router_argv(options: dict, version: str) -> list[str]:
    """Render ``options`` as argv for ``python -m sglang_router.launch_router``, validated against the snapshot of
    the real router parser (``plugins/data/sglang_router_cli_<version>.json``; sglang-router 0.3.2
    router_args.py ``RouterArgs.add_cli_args(parser, use_router_prefix=False)``). Same value rules as
    ``sglang_argv``; ``--api-key`` is refused (argv is world-readable). Raises AnsibleFilterError listing every
    problem at once.
    """
    argv, errors = _render(options, str(version), "router")
    named = _normalise(options)
    for secret in ("api-key", "oracle-password", "postgres-db-url", "redis-url"):
        if named.get(secret):
            errors.append(f"--{secret} would put a secret in the router's argv (world-readable in /proc); "
                          f"leave it out and keep the router on a private network")
    if errors:
        raise AnsibleFilterError("invalid sglang-router options:\n- " + "\n- ".join(errors))
    return argv


# MLA targets among the families we know (Kimi K2/K2.5 use DeepSeek-V3's multi-head latent attention).
_MLA_FAMILIES = ("kimi", "deepseek")
EAGLE3_DEFAULTS = {"enabled": False, "draft_model_path": "", "num_steps": 3, "eagle_topk": 1,
                   "num_draft_tokens": 4, "draft_is_mla": False, "draft_attention_backend": "triton"}


def sglang_eagle3_options(spec: dict | None, options: dict | None = None, family: str | None = None,
                          version: str = "0.5.23") -> dict:
    """EAGLE3 speculative-decoding options from ``spec`` (see ``EAGLE3_DEFAULTS``); ``{}`` when disabled.

    An MLA target (Kimi) with a non-MLA draft gets ``--speculative-draft-attention-backend`` explicitly
    (otherwise the draft inherits the target's MLA backend and fails); the backend must be one of
    the release's ``--attention-backend`` choices (the draft flag itself has no choices in 0.5.23).
    Raises AnsibleFilterError listing every problem.
    """
    spec = {**EAGLE3_DEFAULTS, **(spec or {})}
    if not spec["enabled"]:
        return {}
    errors = []
    if not str(spec["draft_model_path"] or "").strip():
        errors.append("EAGLE3 needs draft_model_path (a directory or hub id of the EAGLE3 draft for this target)")
    nums = {}
    for key in ("num_steps", "eagle_topk", "num_draft_tokens"):
        try:
            nums[key] = int(spec[key])
            if nums[key] < 1:
                raise ValueError
        except (TypeError, ValueError):
            errors.append(f"EAGLE3 {key} must be a positive integer, got {spec[key]!r}")
    if len(nums) == 3 and nums["eagle_topk"] == 1 and nums["num_draft_tokens"] != nums["num_steps"] + 1:
        errors.append(f"EAGLE3 with eagle_topk 1 drafts a chain: num_draft_tokens must be num_steps + 1 = "
                      f"{nums['num_steps'] + 1}, got {nums['num_draft_tokens']} (SGLang would silently change it)")
    out = {"speculative-algorithm": "EAGLE3", "speculative-draft-model-path": spec["draft_model_path"],
           "speculative-num-steps": nums.get("num_steps"), "speculative-eagle-topk": nums.get("eagle_topk"),
           "speculative-num-draft-tokens": nums.get("num_draft_tokens")}
    target_mla = model_family(options or {}, family) in _MLA_FAMILIES
    if target_mla and not spec["draft_is_mla"]:
        backend = str(spec["draft_attention_backend"] or "")
        index = _option_index(load_snapshot(str(version)))
        choices = [str(c) for c in (index["--attention-backend"].get("choices") or [])]
        if backend not in choices:
            errors.append(f"EAGLE3 draft_attention_backend {backend!r} is not an attention backend of SGLang {version} "
                          f"(choose from {', '.join(choices)}); an MLA target with a non-MLA draft needs one "
                          f"explicitly, triton works on SM120")
        out["speculative-draft-attention-backend"] = backend
    if errors:
        raise AnsibleFilterError("invalid EAGLE3 settings:\n- " + "\n- ".join(errors))
    return out


# Characters that need no quoting in a systemd command line.
_SAFE = re.compile(r"^[A-Za-z0-9_@%+=:,./-]+$")


def systemd_quote(argv) -> str:
    """Quote ``argv`` (list of str) for ``ExecStart=`` so systemd splits it back into the same list.

    systemd expands specifiers (``%`` -> ``%%``) and environment variables (``$`` -> ``$$``) and
    splits words C-style: inside double quotes ``\\`` and ``"`` are escaped, newlines become ``\\n``.
    Raises AnsibleFilterError for an empty argv or a relative executable path.
    """
    if isinstance(argv, (str, bytes)) or not argv:
        raise AnsibleFilterError("systemd_quote expects a non-empty list of arguments")
    words = []
    for i, arg in enumerate(argv):
        arg = str(arg)
        if i == 0 and not arg.startswith("/"):
            raise AnsibleFilterError(f"the executable must be an absolute path, got {arg!r}")
        escaped = arg.replace("%", "%%").replace("$", "$$")
        if arg and _SAFE.match(arg):
            words.append(escaped)
            continue
        escaped = (
            escaped.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
        )
        words.append(f'"{escaped}"')
    return " ".join(words)


def _parser_default(version: str, flag: str, product: str = "sglang"):
    """The default of ``--flag`` in the argparse snapshot of SGLang (or sglang-router) ``version`` (None when the
    option has none)."""
    action = _option_index(load_snapshot(str(version), product)).get("--" + flag)
    return None if action is None else action.get("default")


def sglang_schedulers_per_node(options: dict, version: str) -> int:
    """Scheduler processes SGLang ``version`` starts on one node for ``options`` (each holds one GPU).

    0.5.23 (entrypoints/engine.py ``_calculate_rank_ranges`` and ``_launch_scheduler_processes``,
    managers/data_parallel_controller.py ``launch_dp_schedulers``, arg_groups/parallel_hook.py
    ``_handle_deprecated_dp_attention``): a node runs ``max(pp // nnodes, 1)`` pipeline stages of
    ``tp // max(nnodes // pp, 1)`` tensor-parallel ranks each, once per data-parallel replica (``--dp-size``).
    ``--attn-dp-size`` splits attention inside the tensor-parallel group and adds no process; the deprecated
    ``--dp-size N --enable-dp-attention`` means ``--attn-dp-size N``. Unset options take the parser's defaults.
    """
    opts = _normalise(options)

    def num(name):
        value = opts.get(name)
        if value in (None, ""):
            value = _parser_default(version, name)
        try:
            return max(int(value if value is not None else 1), 1)
        except (TypeError, ValueError):
            raise AnsibleFilterError(f"--{name} must be an integer, got {value!r}")

    tp, pp, nnodes, dp = num("tp-size"), num("pp-size"), num("nnodes"), num("dp-size")
    if opts.get("enable-dp-attention") and num("attn-dp-size") == 1:
        dp = 1  # the old spelling: dp counted attention-DP groups, not replicas
    pp_per_node = max(pp // nnodes, 1)
    tp_per_node = tp // max(nnodes // pp, 1)
    return pp_per_node * max(tp_per_node, 1) * dp


_WILDCARD_HOSTS = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}
_LOOPBACK_PREFIXES = ("127.", "localhost", "::1")


def _url(scheme: str, address: str, port: int) -> str:
    address = str(address)
    if ":" in address and not address.startswith("["):
        address = f"[{address}]"  # IPv6 literal
    return f"{scheme}://{address}:{port}"


_LOCAL_CONNECTIONS = {"local", "containers.podman.podman", "community.docker.docker", "docker", "podman"}


def node_address(host: str, advertise: str | None = None, ansible_host: str | None = None,
                 connection: str | None = None) -> str:
    """The name other hosts reach ``host`` at: ``advertise`` when set, else ``ansible_host`` unless the connection is
    local or a container's (its ansible_host is a container name, not an address), else the inventory name."""
    if advertise:
        return str(advertise)
    if ansible_host and (connection or "ssh") not in _LOCAL_CONNECTIONS:
        return str(ansible_host)
    return str(host)


def _listener(opts: dict, version: str, product: str, host_flag: str, port_flag: str) -> tuple[str, int]:
    """(host, port) a server listens on: ``--host_flag``/``--port_flag`` of the normalised ``opts``, unset ones at the
    parser defaults of ``product`` ``version``."""
    host = opts.get(host_flag)
    host = str(_parser_default(version, host_flag, product) if host in (None, "") else host)
    port = opts.get(port_flag)
    try:
        port = int(_parser_default(version, port_flag, product) if port in (None, "") else port)
    except (TypeError, ValueError):
        raise AnsibleFilterError(f"--{port_flag} must be an integer, got {opts.get(port_flag)!r}")
    return host, port


def sglang_service_endpoint(options: dict, version: str, unit: str, address: str | None = None) -> dict:
    """What the deployed service is, for every role that talks to it (smoke_health, the router, drain, playbooks).

    :param options: the effective SGLang options (dashed names).
    :param version: SGLang release whose parser defaults fill unset options (``--host`` 127.0.0.1, ``--port``
        30000 in 0.5.23's server_args).
    :param unit: the systemd unit name.
    :param address: the name or address other hosts reach this node at (None: not known).
    :returns: dict ``unit``; ``host`` and ``port`` it listens on; ``scheme`` (https with ``--ssl-certfile``);
        ``probe_url`` on the node itself (the loopback address of the wildcard it listens on, else that host);
        ``router_url`` other hosts use (None when it listens on loopback only); ``served_model_name`` (0.5.23
        serves the model path when ``--served-model-name`` is unset); ``schedulers`` on this node
        (``sglang_schedulers_per_node``).
    """
    opts = _normalise(options)
    host, port = _listener(opts, version, "sglang", "host", "port")
    scheme = "https" if opts.get("ssl-certfile") else "http"
    local = _WILDCARD_HOSTS.get(host, host)
    loopback_only = host.startswith(_LOOPBACK_PREFIXES)
    served = opts.get("served-model-name") or opts.get("model-path")
    return {"unit": unit, "host": host, "port": port, "scheme": scheme,
            "probe_url": _url(scheme, local, port),
            "router_url": None if loopback_only or not address else _url(scheme, address, port),
            "served_model_name": None if served is None else str(served),
            "schedulers": sglang_schedulers_per_node(options, version)}


def sglang_router_metrics_endpoint(options: dict, version: str, address: str | None = None) -> dict:
    """Where sglang-router ``version`` serves its Prometheus metrics with ``options`` (its effective options).

    :param options: the router's options (dashed names); ``prometheus-host`` and ``prometheus-port`` unset take the
        parser's defaults (0.3.2's router_args.py: 0.0.0.0 and 29000).
    :param address: the name or address other hosts reach the router host at (None: not known).
    :returns: dict ``host`` and ``port`` it listens on; ``local_url`` from the router host itself (the loopback
        address of the wildcard it listens on, else that host); ``scrape_url`` other hosts use (None when it listens
        on loopback only or ``address`` is unknown).
    """
    host, port = _listener(_normalise(options), version, "router", "prometheus-host", "prometheus-port")
    return {"host": host, "port": port, "local_url": _url("http", _WILDCARD_HOSTS.get(host, host), port),
            "scrape_url": None if host.startswith(_LOOPBACK_PREFIXES) or not address else _url("http", address, port)}


class FilterModule:
    def filters(self):
        return {"sglang_argv": sglang_argv, "sglang_argv_errors": sglang_argv_errors,
                "sglang_schedulers_per_node": sglang_schedulers_per_node,
                "sglang_service_endpoint": sglang_service_endpoint, "sglang_node_address": node_address,
                "sglang_router_metrics_endpoint": sglang_router_metrics_endpoint,
                "sglang_eagle3_options": sglang_eagle3_options, "sglang_router_argv": sglang_router_argv,
                "systemd_quote": systemd_quote}
