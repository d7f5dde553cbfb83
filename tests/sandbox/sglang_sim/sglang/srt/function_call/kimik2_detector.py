"""Kimi-K2 tool-call markup: the fake model's output, and the kimi_k2 parser (own code).

Markup: <|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>
{json}<|tool_call_end|>...<|tool_calls_section_end|>. Parsed ids follow 0.5.23's kimi_k2 rule:
``functions.{name}:{index}`` with the per-response index.
"""
import json
import re

BOT = "<|tool_calls_section_begin|>"
EOT = "<|tool_calls_section_end|>"
CALL_BEGIN = "<|tool_call_begin|>"
CALL_END = "<|tool_call_end|>"
ARG_BEGIN = "<|tool_call_argument_begin|>"
SPECIAL = [BOT, EOT, CALL_BEGIN, CALL_END, ARG_BEGIN]

CALL_RE = re.compile(r"<\|tool_call_begin\|>\s*(?P<id>[^\s<|]+)\s*<\|tool_call_argument_begin\|>\s*"
                     r"(?P<args>\{.*?\})\s*<\|tool_call_end\|>", re.DOTALL)
ID_RE = re.compile(r"^(?:functions\.)?(?P<name>[\w.\-]+):(?P<index>\d+)$")


def _sample(schema, key):
    t = (schema or {}).get("type", "string")
    if "enum" in (schema or {}):
        return schema["enum"][0]
    return {"string": {"location": "Paris", "city": "Paris", "query": "sglang"}.get(key, f"{key}-value"),
            "integer": 1, "number": 1.5, "boolean": True, "array": [], "object": {}}.get(t, "x")


def fake_arguments(tool):
    fn = tool.get("function", tool)
    props = ((fn.get("parameters") or {}).get("properties") or {})
    return {k: _sample(v, k) for k, v in props.items()} or {}


def fake_tool_markup(tools, history_count=0):
    """Markup for one call per tool, at most two (parallel calls)."""
    parts = [BOT]
    for i, tool in enumerate(tools[:2]):
        name = tool.get("function", tool).get("name")
        args = json.dumps(fake_arguments(tool), ensure_ascii=False)
        parts.append(f"{CALL_BEGIN}functions.{name}:{history_count + i}{ARG_BEGIN}{args}{CALL_END}")
    parts.append(EOT)
    return "".join(parts)


def detect_and_parse(text):
    """Returns (normal_text, [(name, arguments_json)])."""
    if BOT not in text:
        return text, []
    calls = []
    for m in CALL_RE.finditer(text):
        idm = ID_RE.match(m.group("id"))
        if not idm:
            continue
        calls.append((idm.group("name"), m.group("args")))
    return text[: text.find(BOT)], calls


class StreamParser:
    """Incremental kimi_k2 parsing: yields ("text", s) / ("call", index, name) / ("args", index, s)."""

    def __init__(self):
        self.buf = ""
        self.in_section = False
        self.index = -1
        self.in_args = False

    def feed(self, piece):
        self.buf += piece
        out = []
        while True:
            if not self.in_section:
                k = self.buf.find(BOT)
                if k < 0:
                    hold = max((n for n in range(1, len(BOT)) if self.buf.endswith(BOT[:n])), default=0)
                    emit, self.buf = self.buf[: len(self.buf) - hold], self.buf[len(self.buf) - hold:]
                    if emit:
                        out.append(("text", emit))
                    return out
                if k:
                    out.append(("text", self.buf[:k]))
                self.buf = self.buf[k + len(BOT):]
                self.in_section = True
                continue
            if self.in_args:
                k = self.buf.find(CALL_END)
                if k < 0:
                    hold = max((n for n in range(1, len(CALL_END)) if self.buf.endswith(CALL_END[:n])), default=0)
                    emit = self.buf[: len(self.buf) - hold]
                    if emit.strip():
                        out.append(("args", self.index, emit))
                        self.buf = self.buf[len(emit):]
                    return out
                if self.buf[:k]:
                    out.append(("args", self.index, self.buf[:k].rstrip()))
                self.buf = self.buf[k + len(CALL_END):]
                self.in_args = False
                continue
            b = self.buf.find(CALL_BEGIN)
            a = self.buf.find(ARG_BEGIN)
            if b >= 0 and a > b:
                call_id = self.buf[b + len(CALL_BEGIN):a].strip()
                self.buf = self.buf[a + len(ARG_BEGIN):].lstrip()
                m = ID_RE.match(call_id)
                self.index += 1
                out.append(("call", self.index, m.group("name") if m else call_id))
                self.in_args = True
                continue
            if EOT in self.buf and (b < 0 or self.buf.find(EOT) < b):
                self.buf = self.buf[self.buf.find(EOT) + len(EOT):]
                self.in_section = False
                continue
            return out
