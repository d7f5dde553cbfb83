"""Which program printed a line of an SGLang unit's journal, or None when nothing we know prints it.

``LineJudge(templates).origin(line)`` -> ``("sglang", "file:line")`` for a line SGLang 0.5.23 prints (a log record
whose message fits one of the wheel's per-line templates, a continuation line of a multi-line message, or a tqdm
bar whose description is the wheel's), ``("foreign", what)`` for a line another program prints in a shape listed in
``FOREIGN`` below (CPython tracebacks and warnings, uvicorn, torch/NCCL, libstdc++), or None. An exception line of
a traceback is accepted when its message is SGLang's or fits ``EXCEPTION_MESSAGES`` (text of the library that
raises it). Used to check that log fixtures said to be SGLang 0.5.23's, and every line the simulator prints, are
lines the real stack prints.
"""

import re

import wheel_templates as wt

# [%(asctime)s{maybe_ms}{prefix}] (utils/common.py configure_logger; prefix tokens: managers/scheduler.py)
PREFIX = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{3})?(?: [A-Z][A-Z_]*\d+)*\] ")
# tqdm 4.70 std.py format_meter: default l_bar '{desc}: {percentage:3.0f}%|' + bar + r_bar
# '| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}{postfix}]'; SGLang's own BAR_FORMAT
# (utils/common.py) replaces the bar with ' Completed | '.
TQDM = re.compile(r"^(?P<desc>.+?): +\d{1,3}%(?:\|[^|]{10}\| | Completed \| )\d+/\d+ "
                  r"\[[\d:?]+<[\d:?]+, +(?:[\d.]+|\?)(?:s/it|it/s)\] *$")

FOREIGN = (
    ("CPython traceback.py", re.compile(
        r"^(?:Traceback \(most recent call last\):|  File \".+\", line \d+, in \S+|    .*|\s*[~^]+\s*|"
        r"During handling of the above exception, another exception occurred:|"
        r"The above exception was the direct cause of the following exception:)$")),
    ("CPython warnings.py (showwarning)", re.compile(r"^\S+\.py:\d+: \w+Warning: .*$|^  warnings\.warn\($")),
    # SGLang 0.5.23 utils/common.py set_uvicorn_logging_configs: "[%(asctime)s] %(levelprefix)s %(message)s" (and the
    # access log's), datefmt "%Y-%m-%d %H:%M:%S": a bare "INFO:     ..." line is uvicorn's own default, not 0.5.23's.
    ("uvicorn 0.55 (server.py, lifespan/on.py, config.py, protocols/http access log)", re.compile(
        r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] (?:INFO|WARNING|ERROR): +(?:Started server process \[\d+\]|Waiting for application startup\.|"
        r"Application startup complete\.|Uvicorn running on \S+ \(Press CTRL\+C to quit\)|Shutting down|"
        r"Waiting for application shutdown\.|Application shutdown complete\.|"
        r"Waiting for connections to close\. \(CTRL\+C to force quit\)|Finished server process \[\d+\]|"
        r"\S+:\d+ - \"[A-Z]+ \S+ HTTP/1\.[01]\" \d{3}(?: [A-Za-z ]+)?|"
        r"\[Errno \d+\] error while attempting to bind on address \(.+\): [a-z ]+)$")),
    ("torch ProcessGroupNCCL.cpp watchdog", re.compile(
        r"^\[rank\d+\]:\[E\d{4} \d\d:\d\d:\d\d\.\d+ ProcessGroupNCCL\.cpp:\d+\] .*NCCL error: .*$")),
    ("NCCL ncclSystemError description", re.compile(r"^ncclSystemError: .*$")),
    # the lines after "CUDA error: <text>" in torch's error (c10/cuda/CUDAException.cpp c10_cuda_check_implementation:
    # the error's help, then get_cuda_async_error_suffix; text read in torch 2.14.1's libc10_cuda.so)
    ("torch 2.14 libc10_cuda CUDA error help", re.compile(
        r"^(?:Search for `cudaError\w+' in https://docs\.nvidia\.com/cuda/cuda-runtime-api/group__CUDART__TYPES\.html "
        r"for more information\.|CUDA kernel errors might be asynchronously reported at some other API call, so the "
        r"stacktrace below might be incorrect\.|For debugging consider passing CUDA_LAUNCH_BLOCKING=1)$")),
    ("libstdc++ std::terminate", re.compile(r"^terminate called after throwing an instance of '[\w:]+'$")),
    ("empty line", re.compile(r"^\s*$")),
)

# Messages of exceptions raised by libraries SGLang calls (not SGLang's own text).
EXCEPTION_MESSAGES = (
    ("CPython OSError with errno (Objects/exceptions.c)", re.compile(r"^\[Errno \d+\] [A-Za-z ]+(?:: '.*')?$")),
    ("torch c10 CUDACachingAllocator OutOfMemoryError", re.compile(r"^CUDA out of memory\. Tried to allocate .*$")),
    ("torch c10/cuda/CUDAException.cpp c10_cuda_check_implementation (the CUDA runtime's error string)",
     re.compile(r"^CUDA error: [a-z ]+$")),
    ("transformers 5.19.0 utils/hub.py cached_files",
     re.compile(r"^.+ does not appear to have a file named \S+\. Checkout '.*' for available files\.$")),
    ("transformers 5.19.0 configuration_utils.py _dict_from_json_file",
     re.compile(r"^It looks like the config file at '.*' is not a valid JSON file\.$")),
    ("json.decoder (CPython)", re.compile(r"^Expecting value: line \d+ column \d+ \(char \d+\)$")),
    ("safetensors 0.6 (Rust) header errors", re.compile(r"^Error while deserializing header: .*$")),
    ("tiktoken load_tiktoken_bpe on a missing vocabulary (CPython open)",
     re.compile(r"^expected str, bytes or os\.PathLike object, not NoneType$")),
    ("torch c10d NCCLUtils (an echo of a rank's NCCL failure)",
     re.compile(r"^NCCL error in: \S+, remote process exited or there was a network error, NCCL version [\d.]+$")),
    ("an HTTP error body SGLang's warmup asserts on (entrypoints/openai/protocol.py ErrorResponse)",
     re.compile(r"^\{\"object\": \"error\", \"message\": .*\}$")),
)
EXCEPTION_LINE = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)|Exception|OSError|"
                            r"AssertionError|KeyError): (?P<message>.*)$")


class LineJudge:
    def __init__(self, templates):
        self.index = wt.LineIndex(templates)

    def _sglang(self, message):
        return self.index.source_of(message) or self.index.source_of(message.rstrip())

    def origin(self, line):
        line = line.rstrip("\n")
        prefix = PREFIX.match(line)
        if prefix:
            message = line[prefix.end():]
            source = self._sglang(message)
            if source:
                return ("sglang", source)
            for what, pattern in FOREIGN:  # uvicorn's lines carry SGLang's timestamp, not its message
                if what.startswith("uvicorn") and pattern.match(line):
                    return ("foreign", what)
            return None
        bar = TQDM.match(line.strip())
        if bar:
            source = self._sglang(bar.group("desc"))
            return ("sglang", "tqdm bar, desc from %s" % source) if source else None
        exc = EXCEPTION_LINE.match(line)
        if exc:
            source = self._sglang(exc.group("message"))
            if source:
                return ("sglang", source)
            for what, pattern in EXCEPTION_MESSAGES:
                if pattern.match(exc.group("message")):
                    return ("foreign", what)
        for what, pattern in FOREIGN:
            if pattern.match(line):
                return ("foreign", what)
        source = self._sglang(line)  # a continuation line of one of SGLang's multi-line messages
        return ("sglang", source) if source else None

    def unknown(self, text):
        """Lines of a log (``\\r`` redraws split like the journal would show them) that nothing known prints:
        list of (line number, line)."""
        out = []
        for number, line in enumerate(re.split(r"\r\n|\n", text), start=1):
            for piece in line.split("\r"):
                for part in re.split(r"(?<=.)(?=\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)", piece):
                    if part.strip() and self.origin(part) is None:
                        out.append((number, part))
        return out
