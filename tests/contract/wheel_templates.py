"""What the pinned SGLang wheel can print, as templates, and whether a regex or a log line fits one.

The product reads SGLang's log with regexes (``plugins/module_utils/health/sglang_log_text.py``) and the sandbox's
simulator prints lines meant to be SGLang's. Both must agree with the real package, not with each other.
Most of SGLang's runtime lines are f-strings, %-format strings or concatenations, so a plain text search of
the wheel misses them (``watchdog.py`` builds ``"... crashed " "with exit code {proc.exitcode}. "``,
``tokenizer_manager.py`` uses ``{signum=}``, ``memory_pool.py`` picks ``'is allocated'`` with a conditional).

``extract_templates(root)`` parses every ``.py`` file under ``root`` with :mod:`ast` and turns each string
expression into one or more *templates*: a tuple of segments, each a literal ``str`` or ``WILD`` (None) for
a value only known at run time. It folds implicit concatenation (done by the parser), ``+``, f-strings
(``{x=}`` keeps its ``x=``), ``%``-style and ``str.format`` placeholders, conditional expressions with string
branches (both kept), and names bound in the same module or function to such expressions (``capture_name =
f"{role} prefill"`` with ``role = "draft" if ... else "target"``), or subscripts of a name bound to a dict
literal (``graph_backend[device]`` -> its string values).

``pattern_fits(regex, template)`` says whether some line the template can produce contains a match of the
regex, with one rule that keeps it honest: a literal character of the regex must land on a literal character
of the template; only the regex's classes (``\\d``, ``\\w``, ``[^]]``, ``.``) may stand for text a wildcard
produces. A pattern whose words were invented, or that matches only because a wildcard could be anything,
does not fit.

``line_fits(message, template)`` is the same question for a concrete line (a recorded log line or what the
simulator printed): the whole message must be one the template can produce.

Stdlib only; used by tests/contract/test_log_knowledge.py.
"""

from __future__ import annotations

import ast
import hashlib
import itertools
import json
import os
import re
import sys
import warnings

try:  # Python 3.11+
    import re._constants as sre_c
    import re._parser as sre_parse
except ImportError:  # pragma: no cover - Python < 3.11
    import sre_constants as sre_c
    import sre_parse

WILD = None
MAX_ALTERNATIVES = 64
_PERCENT = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(?:\d+|\*)?(?:\.(?:\d+|\*))?[sdifgeExXrcau]")
_BRACES = re.compile(r"\{[^{}]*\}")


# ------------------------------------------------------------------ templates


def _normalise(segments):
    out = []
    for seg in segments:
        if seg is WILD:
            if out and out[-1] is WILD:
                continue
            out.append(WILD)
        elif seg:
            if out and out[-1] is not WILD:
                out[-1] += seg
            else:
                out.append(seg)
    return tuple(out)


def _fold(text, placeholder):
    """Split ``text`` at placeholders (a compiled regex) into literal segments and WILDs."""
    out, pos = [], 0
    for match in placeholder.finditer(text):
        out.append(text[pos:match.start()])
        out.append(WILD)
        pos = match.end()
    out.append(text[pos:])
    return out


def _product(parts):
    """Cartesian product of alternative lists, capped at MAX_ALTERNATIVES."""
    combos = [[]]
    for alternatives in parts:
        combos = [c + a for c in combos for a in alternatives][:MAX_ALTERNATIVES]
    return combos


class _Scope:
    """Names bound in a module or a function body to an expression (every binding kept)."""

    def __init__(self, body, parent=None):
        self.parent = parent
        self.names = {}
        self.extended = set()  # names later grown with ``+=`` (``msg = f"..."; msg += f"..."``)
        for node in body:
            for sub in ast.walk(node):
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)) and sub is not node:
                    continue
                if isinstance(sub, ast.Assign):
                    for target in sub.targets:
                        if isinstance(target, ast.Name):
                            self.names.setdefault(target.id, []).append(sub.value)
                elif isinstance(sub, ast.AnnAssign) and sub.value is not None and isinstance(sub.target, ast.Name):
                    self.names.setdefault(sub.target.id, []).append(sub.value)
                elif isinstance(sub, ast.AugAssign) and isinstance(sub.op, ast.Add) and isinstance(sub.target, ast.Name):
                    self.extended.add(sub.target.id)

    def lookup(self, name):
        scope = self
        while scope is not None:
            if name in scope.names:
                return scope.names[name]
            scope = scope.parent
        return []


def _dict_strings(node):
    """String values of every dict literal inside ``node`` (``defaultdict(lambda: ..., {...})`` included)."""
    out = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Dict):
            out.extend(v.value for v in sub.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
    return out


def _alternatives(node, scope, depth=0):
    """Alternatives (lists of segments) of the text ``node`` evaluates to; ``[[WILD]]`` when unknown."""
    if depth > 8:
        return [[WILD]]
    if isinstance(node, ast.Constant):
        return [[node.value]] if isinstance(node.value, str) else [[WILD]]
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append([[str(value.value)]])
            elif isinstance(value, ast.FormattedValue) and value.conversion == -1 and value.format_spec is None:
                parts.append(_alternatives(value.value, scope, depth + 1))
            else:
                parts.append([[WILD]])
        return _product(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _product([_alternatives(node.left, scope, depth + 1), _alternatives(node.right, scope, depth + 1)])
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        left = _alternatives(node.left, scope, depth + 1)
        return [sum((_fold(s, _PERCENT) if s is not WILD else [WILD] for s in alt), []) for alt in left]
    if isinstance(node, ast.IfExp):
        return (_alternatives(node.body, scope, depth + 1) + _alternatives(node.orelse, scope, depth + 1))[
            :MAX_ALTERNATIVES]
    if isinstance(node, ast.Name):
        bound = scope.lookup(node.id)
        if not bound or len(bound) > 6:
            return [[WILD]]
        out = []
        for value in bound:
            out.extend(_alternatives(value, scope, depth + 1))
        return out[:MAX_ALTERNATIVES] or [[WILD]]
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        values = [s for bound in scope.lookup(node.value.id) for s in _dict_strings(bound)]
        return [[v] for v in dict.fromkeys(values)][:MAX_ALTERNATIVES] or [[WILD]]
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"
            and isinstance(node.func.value, ast.Constant) and isinstance(node.func.value.value, str)):
        return [_fold(node.func.value.value, _BRACES)]
    return [[WILD]]


_STRINGY = (ast.Constant, ast.JoinedStr, ast.BinOp)


def _is_stringy(node):
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
        return _is_stringy(node.left) or (isinstance(node.op, ast.Add) and _is_stringy(node.right))
    return False


def _file_templates(tree):
    """Every template of every string expression in a parsed module: iterable of (segments, lineno)."""
    module_scope = _Scope(tree.body)

    def visit(node, scope, inside_string):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            scope = _Scope(node.body, module_scope)
        stringy = _is_stringy(node)
        if (isinstance(node, ast.Assign) and _is_stringy(node.value)
                and any(isinstance(t, ast.Name) and t.id in scope.extended for t in node.targets)):
            for alt in _alternatives(node.value, scope):
                yield alt + [WILD], node.lineno  # the text grows after this assignment
        if stringy and not inside_string:
            for alt in _alternatives(node, scope):
                yield alt, getattr(node, "lineno", 0)
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for placeholder in (_PERCENT, _BRACES):
                    if placeholder.search(node.value):
                        yield _fold(node.value, placeholder), node.lineno
        for child in ast.iter_child_nodes(node):
            # the pieces of a string expression are templates of their own too (cheap, never wider)
            yield from visit(child, scope, False)

    yield from visit(tree, module_scope, False)


# Parts of the sglang package that a serving process never imports (diffusion serving, kernels' build code, tests).
SKIP_DIRS = ("multimodal_gen", "kernels", "test", "benchmark", "__pycache__")


def _walk(root):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not (dirpath == root and d in SKIP_DIRS) and d != "__pycache__")
        yield dirpath, dirnames, sorted(filenames)


def extract_templates(root):
    """Templates of every ``.py`` file under ``root`` (but ``SKIP_DIRS``): dict ``template (tuple) ->
    ["relpath:lineno", ...]`` (every place that can print it, at most one per file).

    Templates with no literal text at all are dropped (they fit anything and prove nothing)."""
    out = {}
    for dirpath, dirnames, filenames in _walk(root):
        for filename in filenames:
            if not filename.endswith(".py"):
                continue
            path = os.path.join(dirpath, filename)
            try:
                with open(path, encoding="utf-8", errors="replace") as handle, warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # invalid escapes in the wheel's own docstrings
                    tree = ast.parse(handle.read(), filename=path)
            except SyntaxError:
                continue
            rel = os.path.relpath(path, root)
            for segments, lineno in _file_templates(tree):
                template = _normalise(segments)
                if any(seg is not WILD and seg.strip() for seg in template):
                    places = out.setdefault(template, [])
                    if not any(p.startswith(rel + ":") for p in places):
                        places.append("%s:%d" % (rel, lineno))
    return out


def tree_digest(root):
    """sha256 over the relative paths and sizes of the ``.py`` files under ``root`` (cache key)."""
    digest = hashlib.sha256()
    for dirpath, dirnames, filenames in _walk(root):
        for filename in filenames:
            if filename.endswith(".py"):
                path = os.path.join(dirpath, filename)
                digest.update(("%s %d\n" % (os.path.relpath(path, root), os.path.getsize(path))).encode())
    return digest.hexdigest()


def load_templates(root, cache_dir):
    """``extract_templates(root)``, cached as JSON in ``cache_dir`` by ``tree_digest(root)`` and this file's own
    code; list of (template tuple, list of "relpath:lineno") pairs."""
    with open(os.path.abspath(__file__), "rb") as handle:  # the extractor's own code is part of the key
        own = hashlib.sha256(handle.read()).hexdigest()
    key = hashlib.sha256((tree_digest(root) + own).encode()).hexdigest()[:16]
    cache = os.path.join(cache_dir, "wheel-templates-%s.json" % key)
    if os.path.exists(cache):
        with open(cache, encoding="utf-8") as handle:
            return [(tuple(t), places) for t, places in json.load(handle)]
    templates = extract_templates(root)
    os.makedirs(cache_dir, exist_ok=True)
    tmp = cache + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump([[list(t), places] for t, places in templates.items()], handle)
    os.replace(tmp, cache)
    return list(templates.items())


# ------------------------------------------------------------------ regex -> NFA


class _NFA:
    def __init__(self, ignorecase):
        self.edges = []  # per state: list of (kind, test, target); kind "lit" | "pred"
        self.eps = []
        self.ignorecase = ignorecase

    def state(self):
        self.edges.append([])
        self.eps.append([])
        return len(self.edges) - 1

    def closure(self, states):
        out, stack = set(states), list(states)
        while stack:
            s = stack.pop()
            for t in self.eps[s]:
                if t not in out:
                    out.add(t)
                    stack.append(t)
        return out


_CATEGORIES = {
    sre_c.CATEGORY_DIGIT: str.isdigit, sre_c.CATEGORY_NOT_DIGIT: lambda c: not c.isdigit(),
    sre_c.CATEGORY_SPACE: str.isspace, sre_c.CATEGORY_NOT_SPACE: lambda c: not c.isspace(),
    sre_c.CATEGORY_WORD: lambda c: c.isalnum() or c == "_",
    sre_c.CATEGORY_NOT_WORD: lambda c: not (c.isalnum() or c == "_"),
}


def _class_test(items):
    negate = any(op is sre_c.NEGATE for op, _ in items)
    tests = []
    for op, av in items:
        if op is sre_c.LITERAL:
            tests.append(lambda c, ch=chr(av): c == ch)
        elif op is sre_c.RANGE:
            tests.append(lambda c, lo=av[0], hi=av[1]: lo <= ord(c) <= hi)
        elif op is sre_c.CATEGORY:
            tests.append(_CATEGORIES[av])
    return (lambda c: not any(t(c) for t in tests)) if negate else (lambda c: any(t(c) for t in tests))


def _compile(nfa, seq, start):
    cur = start
    for op, av in seq:
        if op is sre_c.LITERAL:
            nxt = nfa.state()
            nfa.edges[cur].append(("lit", chr(av), nxt))
            cur = nxt
        elif op in (sre_c.NOT_LITERAL, sre_c.ANY, sre_c.IN, sre_c.CATEGORY):
            if op is sre_c.NOT_LITERAL:
                test = (lambda c, ch=chr(av): c != ch)
            elif op is sre_c.ANY:
                test = (lambda c: c != "\n")
            elif op is sre_c.IN:
                test = _class_test(av)
            else:
                test = _CATEGORIES[av]
            nxt = nfa.state()
            nfa.edges[cur].append(("pred", test, nxt))
            cur = nxt
        elif op is sre_c.SUBPATTERN:
            cur = _compile(nfa, av[-1], cur)
        elif op is sre_c.BRANCH:
            end = nfa.state()
            for alternative in av[1]:
                branch_start = nfa.state()
                nfa.eps[cur].append(branch_start)
                nfa.eps[_compile(nfa, alternative, branch_start)].append(end)
            cur = end
        elif op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT, getattr(sre_c, "POSSESSIVE_REPEAT", object())):
            low, high, item = av
            for _ in range(low):
                cur = _compile(nfa, item, cur)
            if high == sre_c.MAXREPEAT:
                loop = nfa.state()
                nfa.eps[cur].append(loop)
                body_end = _compile(nfa, item, loop)
                nfa.eps[body_end].append(loop)
                cur = loop
            else:
                end = nfa.state()
                for _ in range(high - low):
                    nfa.eps[cur].append(end)
                    cur = _compile(nfa, item, cur)
                nfa.eps[cur].append(end)
                cur = end
        elif op in (sre_c.AT, sre_c.ASSERT, sre_c.ASSERT_NOT):
            continue  # anchors and lookarounds do not consume: permissive
        else:
            raise ValueError("unsupported regex construct %s in a log pattern" % (op,))
    return cur


def _parse(regex):
    if isinstance(regex, str):
        regex = re.compile(regex)
    return sre_parse.parse(regex.pattern, regex.flags), bool(regex.flags & re.IGNORECASE)


def compile_nfa(regex):
    """(nfa, start, accept) for ``regex`` (a str or compiled pattern)."""
    tree, ignorecase = _parse(regex)
    nfa = _NFA(ignorecase)
    start = nfa.state()
    accept = _compile(nfa, list(tree), start)
    return nfa, start, accept


def required_literals(regex):
    """Runs of literal characters every match of ``regex`` contains (top level and plain groups), longest
    first. A pattern with no run of 4 or more is too generic to be knowledge about a program's output."""
    tree, _ = _parse(regex)
    runs, cur = [], []

    def walk(seq):
        for op, av in seq:
            if op is sre_c.LITERAL:
                cur.append(chr(av))
            elif op is sre_c.SUBPATTERN:
                walk(av[-1])
            elif op is sre_c.MAX_REPEAT and av[0] >= 1 and av[0] == av[1]:
                walk(list(av[2]) * av[0])
            else:
                if cur:
                    runs.append("".join(cur))
                    del cur[:]
                if op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT) and av[0] >= 1:
                    walk(av[2])  # the first mandatory copy still holds its literals
                    if cur:
                        runs.append("".join(cur))
                        del cur[:]

    walk(list(tree))
    if cur:
        runs.append("".join(cur))
    return sorted(runs, key=len, reverse=True)


def _fits(nfa, start, accept, tape, search=True):
    fold = (lambda c: c.casefold()) if nfa.ignorecase else (lambda c: c)

    def match_lit(kind, test, ch):
        if kind == "lit":
            return ch is not WILD and fold(ch) == fold(test)
        if ch is WILD:
            return True
        if nfa.ignorecase:
            return test(ch) or test(ch.lower()) or test(ch.upper())
        return test(ch)

    cur = nfa.closure({start})
    for item in tape:
        if search:
            cur |= nfa.closure({start})
        if accept in cur:
            return True
        if item is WILD:
            reach, stack = set(cur), list(cur)
            while stack:
                s = stack.pop()
                for kind, test, target in nfa.edges[s]:
                    if kind == "pred":
                        for t in nfa.closure({target}):
                            if t not in reach:
                                reach.add(t)
                                stack.append(t)
            cur = reach
        else:
            nxt = set()
            for s in cur:
                for kind, test, target in nfa.edges[s]:
                    if match_lit(kind, test, item):
                        nxt.add(target)
            cur = nfa.closure(nxt)
        if not cur and not search:
            return False
    if search:
        cur |= nfa.closure({start})
    return accept in cur


def _tape(template):
    tape = []
    for seg in template:
        if seg is WILD:
            tape.append(WILD)
        else:
            tape.extend(seg)
    return tape


class PatternIndex:
    """Templates indexed for ``fits``: a regex is tried only on templates holding its longest required literal."""

    def __init__(self, templates):
        self.templates = list(templates)  # (template, source)
        self._folded = [tuple(s.casefold() if s is not WILD else WILD for s in t) for t, _ in self.templates]

    def fits(self, regex, min_letters=6):
        """The templates ``regex`` fits (list of (template, places)); raises ValueError when the
        regex's longest required literal run holds fewer than ``min_letters`` letters or digits (too generic
        to be knowledge about one program's output)."""
        runs = required_literals(regex)
        if not runs or sum(c.isalnum() for c in runs[0]) < min_letters:
            raise ValueError("%r has no literal run with %d+ letters every match needs: too generic to be "
                             "checked against the wheel" % (getattr(regex, "pattern", regex), min_letters))
        needle = runs[0].casefold()
        nfa, start, accept = compile_nfa(regex)
        out = []
        for (template, source), folded in zip(self.templates, self._folded):
            if not any(seg is not WILD and needle in seg for seg in folded):
                continue
            if _fits(nfa, start, accept, _tape(template)):
                out.append((template, source))
        return out


def pattern_fits(regex, template):
    """True when some text ``template`` can produce contains a match of ``regex`` (see the module doc)."""
    nfa, start, accept = compile_nfa(regex)
    return _fits(nfa, start, accept, _tape(template))


# ------------------------------------------------------------------ concrete lines


def template_regex(template):
    """A compiled regex matching exactly the texts ``template`` can produce (a wildcard: any text)."""
    return re.compile("".join("(?:.*?)" if seg is WILD else re.escape(seg) for seg in template) + r"\Z", re.DOTALL)


def line_templates(templates):
    """Split templates at literal newlines into per-line templates: list of (template, source)."""
    out = {}
    for template, source in templates:
        lines = [[]]
        for seg in template:
            if seg is WILD:
                lines[-1].append(WILD)
                continue
            pieces = seg.split("\n")
            lines[-1].append(pieces[0])
            for piece in pieces[1:]:
                lines.append([piece])
        for line in lines:
            norm = _normalise(line)
            if any(seg is not WILD and len(seg.strip()) >= 4 for seg in norm):
                out.setdefault(norm, source)
    return list(out.items())


class LineMatcher:
    """Whether a concrete line is exactly what a per-line template can produce, as ``template_regex`` says, in one
    pass: the literal before the first wildcard at the start, the one after the last at the end, and each literal run
    between wildcards found leftmost in what is left (a wildcard is any text, so the leftmost place is never worse).
    The regex's ``.*?`` between many literals backtracks: about 5 ms a line, 9 s a log fixture."""

    def __init__(self, template):
        runs, run = [], []
        for seg in template:
            if seg is WILD:
                runs.append("".join(run))
                run = []
            else:
                run.append(seg)
        runs.append("".join(run))
        self.wild = len(runs) > 1
        self.prefix, self.middle, self.suffix = runs[0], [r for r in runs[1:-1] if r], runs[-1]

    def match(self, text):
        if not self.wild:
            return text == self.prefix
        end = len(text) - len(self.suffix)
        if end < len(self.prefix) or not text.startswith(self.prefix) or not text.endswith(self.suffix):
            return False
        pos = len(self.prefix)
        for run in self.middle:
            found = text.find(run, pos, end)
            if found < 0:
                return False
            pos = found + len(run)
        return True


class LineIndex:
    """Per-line templates indexed by their longest literal; ``source_of(message)`` names where a template the
    concrete line fits comes from (the first place), or None."""

    GRAM = 4  # a needle of this many characters or more is found through its first GRAM characters

    def __init__(self, templates):
        self.entries = []
        for template, source in line_templates(templates):
            literals = [seg for seg in template if seg is not WILD]
            self.entries.append((max(literals, key=len), template, source))
        self._compiled = {}
        # The entries whose needle can be in a message: those whose needle starts with one of the message's GRAM-grams,
        # and the few with a shorter needle. A line is then checked against tens of needles, not every template's
        # (the log fixtures' check took about 9 s a fixture scanning them all).
        self._by_gram, self._short = {}, []
        for i, (needle, _template, _source) in enumerate(self.entries):
            if len(needle) >= self.GRAM:
                self._by_gram.setdefault(needle[:self.GRAM], []).append(i)
            else:
                self._short.append(i)

    def _candidates(self, message):
        """Indices, in the entries' order, of the entries whose needle may be in ``message``."""
        found = set(self._short)
        for j in range(len(message) - self.GRAM + 1):
            found.update(self._by_gram.get(message[j:j + self.GRAM], ()))
        return sorted(found)

    def source_of(self, message):
        best = None
        for i in self._candidates(message):
            needle, template, source = self.entries[i]
            if needle not in message:
                continue
            matcher = self._compiled.get(template)
            if matcher is None:
                matcher = self._compiled[template] = LineMatcher(template)
            if matcher.match(message):
                literal = sum(len(s) for s in template if s is not WILD)
                if best is None or literal > best[0]:
                    best = (literal, source, template)
        if best is None:
            return None
        return best[1][0] if isinstance(best[1], list) else best[1]


def sglang_root(venv):
    """The ``sglang`` package directory inside the venv ``venv`` (``.venv-sglang``), or None."""
    lib = os.path.join(venv, "lib")
    if not os.path.isdir(lib):
        return None
    for entry in sorted(os.listdir(lib)):
        path = os.path.join(lib, entry, "site-packages", "sglang")
        if os.path.isdir(path):
            return path
    return None


if __name__ == "__main__":  # pragma: no cover - manual use: python wheel_templates.py ROOT REGEX
    index = PatternIndex(extract_templates(sys.argv[1]).items())
    for template, places in index.fits(sys.argv[2]):
        print(", ".join(places), "".join("{*}" if s is WILD else s for s in template)[:160])
