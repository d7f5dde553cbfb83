#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: sglang_smoke
short_description: Prove a ready SGLang server serves chat, reasoning and Kimi tool calls
extends_documentation_fragment:
  - blackwell.sglang.common
description:
  - Runs on the node against its own loopback, after M(blackwell.sglang.sglang_health) said C(ready). Never a readiness check itself
    (C(/v1/models) answers 200 before the model can serve); the O(checks) are functional.
  - C(health) - C(GET /health) answers 200.
  - C(models) - C(GET /v1/models) lists O(served_model_name).
  - C(chat) - a chat completion with thinking switched off (O(no_thinking_kwargs)) returns non-empty text with no
    C(<think>) or tool-call markup in C(content).
  - C(reasoning) - a chat completion with thinking on (kimi_k2 thinks by default) returns C(reasoning_content) with no
    C(<think>) markup in it or in C(content). An answer cut at O(reasoning_max_tokens) inside the reasoning has an
    empty C(content); that still shows the reasoning parser at work and passes, saying so.
  - C(tool_calls) - a non-streaming request with two tools (one hyphenated name), thinking off, returns both as parsed
    C(tool_calls) (names, JSON-object arguments) and no C(<|tool_call) markup in C(content).
  - C(tool_calls_stream) - the same request streamed (server-sent events), deltas reassembled - both calls, arguments
    that parse as JSON, no markup in the streamed content.
  - C(answers) - each of O(golden_prompts) (thinking off, temperature 0) answered as a working model cannot miss
    (a sum, a fact, a fixed-format reply); a failure names the prompt, the expected and the received text. A server
    can answer C(/health) 200 and stream well-formed garbage (sgl-project/sglang#23264 - Kimi-K2.5's INT4 checkpoint on
    a wrong MoE kernel path on SM12x).
  - C(long_context) (not in the default list) - a secret word placed past O(long_context_tokens) tokens of filler,
    asked for at the end (kvcache-ai/ktransformers#1961 - garbled past ~55k tokens with one GEMM backend).
  - Every output of every check is checked for degeneracy - a word or phrase repeated 8 times in a row, or under 25
    distinct words in a stretch of 100 - and fails naming the repetition.
  - Runs C(health) and C(models) first, then the chat completions at once (one thread each, so the smoke costs its
    longest request, not their sum), then fails listing every failed one. Changes nothing; check mode skips the
    requests.
options:
  url:
    description: Base URL of the server on this node.
    type: str
    default: http://127.0.0.1:30000
  served_model_name:
    description: Model name C(/v1/models) must list; used as C(model) in requests.
    type: str
    required: true
  checks:
    description: Checks to run, in this order.
    type: list
    elements: str
    choices: [health, models, chat, reasoning, tool_calls, tool_calls_stream, answers, long_context]
    default: [health, models, chat, reasoning, tool_calls, tool_calls_stream, answers]
  probe_timeout:
    description: Seconds for C(/health) and C(/v1/models). C(/health) runs a one-token generation (~1 s when idle) and
      answers 503 after the server's own bound (C(SGLANG_HEALTH_CHECK_TIMEOUT), 20 s) when no token came back, so
      give it more than that bound (values below 5 are raised to 5). A 503 with requests in the scheduler (its
      C(/metrics)) passes as busy.
    type: float
    default: 25
  request_timeout:
    description: Seconds for one chat completion (streamed or not); at least 5.
    type: float
    default: 60
  max_tokens:
    description: C(max_tokens) of the requests with thinking off (chat and tool calls).
    type: int
    default: 512
  reasoning_max_tokens:
    description: C(max_tokens) of the reasoning check (thinking on). A thinking model spends hundreds of tokens before
      its answer; 256 often ends inside the reasoning.
    type: int
    default: 2048
  no_thinking_kwargs:
    description: C(chat_template_kwargs) that switch the model's thinking off, from the model's chat template
      (Kimi-K2.5's C(chat_template.jinja) tests C(thinking is defined and thinking is false); SGLang 0.5.23's
      kimi_k2 reasoning parser reads the same C(thinking) key). Empty for a model without the switch.
    type: dict
    default: {thinking: false}
  golden_prompts:
    description: Prompts for C(answers), each C(name), C(prompt), C(expect) (a regular expression the answer must
      match) and C(expected) (how the failure names it). Default - a sum (17 + 25), the capital of France, and a
      reply of exactly one given word.
    type: list
    elements: dict
  long_context_tokens:
    description: For C(long_context), how many tokens of filler come before the question, the secret word placed at
      nine tenths of them.
    type: int
    default: 60000
  api_key:
    description: Bearer token when the server runs with C(--api-key).
    type: str
attributes:
  check_mode:
    support: full
    description: Reports the checks it would run; sends no request.
"""

EXAMPLES = r"""
- name: Prove the Kimi-K2.5 endpoint serves chat and tool calls
  sglang_smoke:
    url: http://127.0.0.1:30000
    served_model_name: Kimi-K2.5
  register: smoke_health_smoke
"""

RETURN = r"""
checks:
  description: One entry per check, in order.
  returned: always
  type: list
  elements: dict
  sample: [{name: tool_calls, status: failed, detail: "tool-call markup left in content", elapsed_s: 0.1}]
  contains:
    name:
      description: Check name.
      type: str
    status:
      description: passed, failed or skipped.
      type: str
    detail:
      description: What was seen.
      type: str
    elapsed_s:
      description: Seconds the check took.
      type: float
failed_checks:
  description: Names of the failed checks.
  returned: always
  type: list
  elements: str
"""

import json
import time
from concurrent.futures import ThreadPoolExecutor

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils.http.http_client import (
    EndpointError, JsonClient, NoAnswer, http_request,
)
from ansible_collections.blackwell.sglang.plugins.module_utils.health._answer_checks import (
    GOLDEN_PROMPTS, check_answer, degeneracy, needle_prompt,
)
from ansible_collections.blackwell.sglang.plugins.module_utils.fleet.sglang_inflight import read_counts

ALL_CHECKS = ["health", "models", "chat", "reasoning", "tool_calls", "tool_calls_stream", "answers", "long_context"]
DEFAULT_CHECKS = [c for c in ALL_CHECKS if c != "long_context"]
PROBES = ("health", "models")
MARKUP = ("<|tool_call", "<|tool_calls_section")
THINK = ("<think>", "</think>")
TOOLS = [
    {"type": "function", "function": {
        "name": "get-weather", "description": "Current weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "search_docs", "description": "Search the documentation.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "top_k": {"type": "integer"}},
                       "required": ["query"]}}},
]
TOOL_NAMES = [t["function"]["name"] for t in TOOLS]
TOOL_PROMPT = ("Call both tools in parallel: get-weather for Paris and search_docs for 'sglang'. "
               "Do not answer in text.")


class CheckFailed(Exception):
    pass


def request(url, body=None, timeout=10.0, api_key=None):
    """GET (body None) or POST JSON. Returns (status, bytes); raises CheckFailed without an answer."""
    headers = {"Authorization": "Bearer %s" % api_key} if api_key else {}
    try:
        return http_request(url, body, timeout, headers)
    except NoAnswer as exc:
        raise CheckFailed("no answer from %s within %.0f s: %s" % (url, timeout, exc.reason))


def parse_json(status, raw, what):
    if status != 200:
        raise CheckFailed("%s answered HTTP %s: %s" % (what, status, raw[:300].decode("utf-8", "replace")))
    try:
        return json.loads(raw.decode("utf-8"))
    except ValueError:
        raise CheckFailed("%s answered HTTP 200 without JSON: %r" % (what, raw[:200]))


def sse_events(raw):
    """Server-sent events of a streamed chat completion -> list of JSON chunks (``data: [DONE]`` ends it).
    Events are separated by a blank line; an event's ``data:`` lines are joined with newlines."""
    text = raw.decode("utf-8", "replace").replace("\r\n", "\n")
    events, done = [], False
    for block in text.split("\n\n"):
        data = [line[5:].lstrip() if line.startswith("data:") else None for line in block.split("\n")]
        data = [d for d in data if d is not None]
        if not data:
            continue
        payload = "\n".join(data)
        if payload.strip() == "[DONE]":
            done = True
            break
        try:
            events.append(json.loads(payload))
        except ValueError:
            raise CheckFailed("stream carried an event that is not JSON: %r" % payload[:200])
    if not done:
        raise CheckFailed("stream ended without data: [DONE] after %d events" % len(events))
    return events


def assemble_stream(events):
    """Reassemble streamed deltas into (content, reasoning_content, tool_calls by index, finish_reason)."""
    content, reasoning, calls, finish = "", "", {}, None
    for ev in events:
        for choice in ev.get("choices") or []:
            delta = choice.get("delta") or {}
            content += delta.get("content") or ""
            reasoning += delta.get("reasoning_content") or ""
            for tc in delta.get("tool_calls") or []:
                call = calls.setdefault(tc.get("index", 0), {"id": None, "name": "", "arguments": ""})
                fn = tc.get("function") or {}
                call["id"] = tc.get("id") or call["id"]
                call["name"] += fn.get("name") or ""
                call["arguments"] += fn.get("arguments") or ""
            finish = choice.get("finish_reason") or finish
    return content, reasoning, [calls[i] for i in sorted(calls)], finish


def verify_tool_calls(calls, content):
    """Both tools called, by name, each with arguments that parse as a JSON object; no markup in content."""
    problems = []
    names = [c.get("name") for c in calls]
    if sorted(names) != sorted(TOOL_NAMES):
        problems.append("expected parsed tool_calls %s, got %s" % (TOOL_NAMES, names or "none"))
    for call in calls:
        try:
            args = json.loads(call.get("arguments") or "")
            if not isinstance(args, dict):
                raise ValueError
        except ValueError:
            problems.append("arguments of %s are not a JSON object: %r" % (call.get("name"), call.get("arguments")))
    if any(m in (content or "") for m in MARKUP):
        problems.append("tool-call markup left in content (is --tool-call-parser kimi_k2 set?): %r"
                        % (content or "")[:160])
    if problems:
        raise CheckFailed("; ".join(problems))
    return "%d calls: %s" % (len(calls), ", ".join("%s(%s)" % (c["name"], c["arguments"]) for c in calls))


class Smoke(object):
    def __init__(self, params):
        self.base = params["url"].rstrip("/")
        self.model = params["served_model_name"]
        self.probe_timeout = max(5.0, float(params["probe_timeout"]))
        self.request_timeout = max(5.0, float(params["request_timeout"]))
        self.api_key = params.get("api_key")
        self.max_tokens = int(params.get("max_tokens") or 512)
        self.reasoning_max_tokens = int(params.get("reasoning_max_tokens") or 2048)
        self.no_thinking = dict(params.get("no_thinking_kwargs") or {})
        self.golden = list(params.get("golden_prompts") or GOLDEN_PROMPTS)
        self.long_context_tokens = int(params.get("long_context_tokens") or 60000)

    @staticmethod
    def sane(text, what):
        """Raise CheckFailed when ``text`` is degenerate (a repetition, a collapsed vocabulary), naming ``what``."""
        problem = degeneracy(text)
        if problem:
            raise CheckFailed("degenerate output in %s: %s: %r" % (what, problem, (text or "")[:120]))

    def chat_body(self, thinking=False, **extra):
        """A chat request; with ``thinking`` False the model's thinking is switched off (its template kwargs)."""
        body = {"model": self.model, "temperature": 0,
                "max_tokens": self.reasoning_max_tokens if thinking else self.max_tokens}
        if not thinking and self.no_thinking:
            body["chat_template_kwargs"] = dict(self.no_thinking)
        body.update(extra)
        return body

    def post(self, body):
        return request(self.base + "/v1/chat/completions", body, self.request_timeout, self.api_key)

    def check_health(self):
        status, raw = request(self.base + "/health", None, self.probe_timeout, self.api_key)
        if status == 200:
            return "/health 200"
        # SGLang answers 503 when no token came back within its own bound: a server busy with a long prefill does
        # (sgl-project/sglang#22511). Busy is not broken: requests in its scheduler say so.
        in_flight = None
        if status == 503:
            try:
                headers = {"Authorization": "Bearer %s" % self.api_key} if self.api_key else {}
                counts = read_counts(JsonClient(self.base, self.probe_timeout, headers))
                in_flight = int(sum(counts.values()))
            except (EndpointError, NoAnswer):
                in_flight = None
        if in_flight:
            return "/health 503 while busy: %d request(s) in the scheduler (SGLang answers 503 when no token came " \
                   "back for its health-check bound, as during a long prefill)" % in_flight
        raise CheckFailed("/health answered %s%s; expected 200 (sglang_health should have waited for ready)"
                          % (status, " with no request in the scheduler" if in_flight == 0 else ""))

    def check_models(self):
        data = parse_json(*request(self.base + "/v1/models", None, self.probe_timeout, self.api_key),
                          what="/v1/models")
        ids = [m.get("id") for m in data.get("data") or []]
        if self.model not in ids:
            raise CheckFailed("/v1/models lists %s, not %r (--served-model-name?)" % (ids, self.model))
        return "lists %s" % self.model

    def chat_message(self, thinking):
        body = self.chat_body(thinking, messages=[{"role": "user", "content": "Say hello in one short sentence."}])
        data = parse_json(*self.post(body), what="/v1/chat/completions")
        try:
            return data["choices"][0]["message"], data["choices"][0].get("finish_reason")
        except (KeyError, IndexError, TypeError):
            raise CheckFailed("chat completion without choices[0].message: %r" % str(data)[:200])

    def check_chat(self):
        msg, finish = self.chat_message(thinking=False)
        content = (msg.get("content") or "").strip()
        self.sane(content, "content")
        if not content:
            raise CheckFailed("chat completion (thinking off: %s) returned no text in content (finish_reason %s)"
                              % (json.dumps(self.no_thinking) if self.no_thinking else "no switch", finish))
        if any(m in content for m in MARKUP + THINK):
            raise CheckFailed("markup in content: %r" % content[:160])
        return "content %r" % content[:80]

    def check_reasoning(self):
        msg, finish = self.chat_message(thinking=True)
        reasoning, content = (msg.get("reasoning_content") or "").strip(), msg.get("content") or ""
        self.sane(reasoning, "reasoning_content")
        self.sane(content, "content")
        if not reasoning:
            hint = " (reasoning left in content: is --reasoning-parser kimi_k2 set?)" if "</think>" in content else ""
            raise CheckFailed("no reasoning_content%s" % hint)
        if any(m in content or m in reasoning for m in THINK):
            raise CheckFailed("<think> markup left in content or reasoning_content: %r" % (content or reasoning)[:160])
        if not content.strip() and finish == "length":
            return ("reasoning_content %d chars; the answer ended inside the reasoning at max_tokens %d (content "
                    "empty), as a thinking model does" % (len(reasoning), self.reasoning_max_tokens))
        return "reasoning_content %d chars, separate from content" % len(reasoning)

    def ask(self, prompt, max_tokens=64):
        """One question, thinking off, temperature 0: the answer's content (checked for degeneracy)."""
        body = self.chat_body(messages=[{"role": "user", "content": prompt}])
        body["max_tokens"] = max_tokens
        data = parse_json(*self.post(body), what="/v1/chat/completions")
        try:
            content = data["choices"][0]["message"].get("content") or ""
        except (KeyError, IndexError, TypeError, AttributeError):
            raise CheckFailed("chat completion without choices[0].message: %r" % str(data)[:200])
        self.sane(content, "the answer to %r" % prompt[:60])
        return content

    def check_answers(self):
        wrong = [problem for problem in (check_answer(g, self.ask(g["prompt"])) for g in self.golden) if problem]
        if wrong:
            raise CheckFailed("wrong answers: " + "; ".join(wrong))
        return "%d golden prompts answered right (%s)" % (len(self.golden), ", ".join(g["name"] for g in self.golden))

    def check_long_context(self):
        prompt, word = needle_prompt(self.long_context_tokens)
        golden = {"name": "long_context", "prompt": "<%d tokens of filler>... What is the secret word?"
                  % self.long_context_tokens, "expect": r"\b%s\b" % word, "expected": word}
        problem = check_answer(golden, self.ask(prompt))
        if problem:
            raise CheckFailed(problem)
        return "the word placed past %d tokens came back" % int(self.long_context_tokens * 0.9)

    def check_tool_calls(self):
        body = self.chat_body(messages=[{"role": "user", "content": TOOL_PROMPT}], tools=TOOLS)
        data = parse_json(*self.post(body), what="/v1/chat/completions (tools)")
        msg = (data.get("choices") or [{}])[0].get("message") or {}
        calls = [{"id": c.get("id"), "name": (c.get("function") or {}).get("name"),
                  "arguments": (c.get("function") or {}).get("arguments")} for c in msg.get("tool_calls") or []]
        return verify_tool_calls(calls, msg.get("content"))

    def check_tool_calls_stream(self):
        body = self.chat_body(messages=[{"role": "user", "content": TOOL_PROMPT}], tools=TOOLS, stream=True)
        status, raw = self.post(body)
        if status != 200:
            raise CheckFailed("streamed tool-call request answered HTTP %s: %r" % (status, raw[:200]))
        content, dummy, calls, finish = assemble_stream(sse_events(raw))
        detail = verify_tool_calls(calls, content)
        return "%s; finish_reason %s" % (detail, finish)

    def run_one(self, name):
        started = time.time()
        try:
            detail, status = getattr(self, "check_" + name)(), "passed"
        except CheckFailed as exc:
            detail, status = str(exc), "failed"
        return {"name": name, "status": status, "detail": detail, "elapsed_s": round(time.time() - started, 3)}

    def run(self, names, check_mode=False):
        """Every check, the results in ``names``' order. The probes (health, models) run first; the chat completions
        then run at once, one thread each: they are independent requests a server batches, so the smoke costs its
        longest request rather than their sum (it runs while a rolling redeploy holds the node out of rotation)."""
        if check_mode:
            return [{"name": n, "status": "skipped", "detail": "check mode: no request sent", "elapsed_s": 0.0}
                    for n in names]
        probes = [n for n in names if n in PROBES]
        requests = [n for n in names if n not in PROBES]
        done = dict((n, self.run_one(n)) for n in probes)
        if requests:
            with ThreadPoolExecutor(max_workers=len(requests)) as pool:
                done.update(zip(requests, pool.map(self.run_one, requests)))
        return [done[n] for n in names]


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type="str", default="http://127.0.0.1:30000"),
            served_model_name=dict(type="str", required=True),
            checks=dict(type="list", elements="str", choices=ALL_CHECKS, default=list(DEFAULT_CHECKS)),
            probe_timeout=dict(type="float", default=25.0),
            request_timeout=dict(type="float", default=60.0),
            max_tokens=dict(type="int", default=512, no_log=False),
            reasoning_max_tokens=dict(type="int", default=2048, no_log=False),
            no_thinking_kwargs=dict(type="dict", default={"thinking": False}),
            golden_prompts=dict(type="list", elements="dict"),
            long_context_tokens=dict(type="int", default=60000, no_log=False),
            api_key=dict(type="str", no_log=True),
        ),
        supports_check_mode=True,
    )
    bad = [g for g in module.params["golden_prompts"] or []
           if not all(isinstance(g.get(k), str) and g.get(k) for k in ("name", "prompt", "expect", "expected"))]
    if bad:
        module.fail_json(msg="golden_prompts: each needs name, prompt, expect (a regular expression) and expected "
                         "(text); these do not: %s" % bad)
    results = Smoke(module.params).run(module.params["checks"], module.check_mode)
    failed = [r for r in results if r["status"] == "failed"]
    out = dict(changed=False, checks=results, failed_checks=[r["name"] for r in failed])
    if module.check_mode:
        module.exit_json(msg="check mode: %d smoke checks skipped, no request sent" % len(results), **out)
    if failed:
        module.fail_json(msg="%d of %d smoke checks failed against %s: %s" % (
            len(failed), len(results), module.params["url"],
            "; ".join("%s: %s" % (r["name"], r["detail"]) for r in failed)), **out)
    module.exit_json(msg="%d smoke checks passed" % len(results), **out)


if __name__ == "__main__":
    main()
