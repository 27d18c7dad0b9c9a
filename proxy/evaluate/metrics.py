"""Metrics of one forwarded request against what the real agent did next. Pure functions over plain data."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from ..extract.facts import parse_json, string_leaves
from ..extract.names import names
from ..messages import message_text
from ..records import Message
from ..workingset import WORKSET_TAG

_REF = re.compile(r"\[ref:[0-9a-f]+\]")


def identifiers(text: str) -> set[str]:
    """The names of the next-step recall metric (the issue's definition; the same kinds workset indexes)."""
    return names(text)


def readable_text(message: Message) -> str:
    """What a model reads in a message: its text and its tool calls."""
    parts = [message_text(message)]
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            parts.append(f"{function.get('name', '')} {function.get('arguments', '')}")
    return "\n".join(parts)


def action_text(message: Message) -> str:
    """What an action names: its text, and its tool calls' names and argument values as written, not their JSON
    escapes (a command's "\\nsys.path.insert" names sys.path.insert, as the index of elided turns reads it)."""
    parts = [message_text(message)]
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            arguments = str(function.get("arguments", ""))
            data = parse_json(arguments)
            parts.append(str(function.get("name", "")))
            parts.extend(string_leaves(data, 256) if data is not None else [arguments])
    return "\n".join(parts)


def message_texts(messages: Iterable[Message]) -> list[str]:
    """Each forwarded message's readable text, refs removed: a ref names content, it does not show it."""
    return [_REF.sub(" ", readable_text(m)) for m in messages]


def leading_identical(previous: Sequence[Message] | None, current: Sequence[Message]) -> int:
    """How many leading messages the request shares with the previous one (what a prompt cache can reuse)."""
    if not previous:
        return 0
    count = min(len(previous), len(current))
    for index in range(count):
        if previous[index] is not current[index] and previous[index] != current[index]:
            return index
    return count


def cached_cost(message_tokens: Sequence[int], tools_tokens: int, reused: int, tools_reused: bool,
                cache_read_price: float) -> float:
    """Cost of one request in full-price token units: the reused leading messages (and the tool definitions, which
    come first in the prompt) at the cache-read price, the rest at 1."""
    cached = sum(message_tokens[:reused]) + (tools_tokens if tools_reused else 0)
    total = sum(message_tokens) + tools_tokens
    return cached * cache_read_price + (total - cached)


def flat(text: str) -> str:
    return " ".join(text.split()).lower()


def probe_values(expected_actions: Sequence[dict[str, Any]]) -> list[str]:
    """Scalar argument values of tau's expected actions, as the strings an agent would write."""
    values: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, bool) or value is None:
            return
        elif isinstance(value, (int, float)):
            values.append(str(int(value)) if float(value).is_integer() else str(value))
        elif isinstance(value, str) and len(value) >= 2:
            values.append(value)

    for action in expected_actions:
        walk(action.get("kwargs", {}))
    return list(dict.fromkeys(values))


def probe_turns(messages: Sequence[Message], values: Sequence[str]) -> dict[int, list[str]]:
    """For each value, the first assistant turn (index >= 2) whose tool calls carry it, if the value occurs in the
    history before that turn: {turn: [values]}. Those are what the agent had to have in view at that turn."""
    arguments = {i: " ".join(str((c.get("function") or {}).get("arguments", "")) for c in m.get("tool_calls") or ())
                 for i, m in enumerate(messages) if i >= 2 and m.get("role") == "assistant" and m.get("tool_calls")}
    turns: dict[int, list[str]] = {}
    for value in values:
        turn = next((i for i in sorted(arguments) if value in arguments[i]), None)
        if turn is None:
            continue
        history = "\n".join(readable_text(m) for m in messages[:turn])
        if value in history:
            turns.setdefault(turn, []).append(value)
    return turns


# --- probe checks: what a scenario says must be in view when the agent acts -------------------------------------

PROBE_KINDS = ("constraint", "fact", "decision", "pending", "approval", "failure")


@dataclass(frozen=True)
class ProbeCheck:
    """One entry of a trace's probes.checks: at `turn` (an assistant message; the request is messages[:turn]),
    one forwarded message must hold one of `strings` (case-insensitive) or match one of `patterns`."""

    id: str
    turn: int
    kind: str
    strings: tuple[str, ...]  # casefolded
    patterns: tuple[re.Pattern[str], ...]  # compiled with re.IGNORECASE
    why: str = ""

    def kept_in(self, texts: Sequence[str]) -> bool:
        """Whether one of the texts (one per forwarded message) holds it: a probe split across two messages is
        not in view as the model would need it."""
        for text in texts:
            folded = text.casefold()
            if any(item in folded for item in self.strings) or any(p.search(text) for p in self.patterns):
                return True
        return False


def probe_checks(trace: dict[str, Any]) -> list[ProbeCheck]:
    """The trace's probe checks, each validated against its messages. Raises ValueError naming the trace and the
    check when one cannot be scored (no agent action at its turn, nothing to look for, a bad regex)."""
    messages = trace.get("messages") or []
    checks: list[ProbeCheck] = []
    for number, raw in enumerate((trace.get("probes") or {}).get("checks") or []):
        where = f"trace {trace.get('id')!r}, probe check {raw.get('id', number)!r}"
        turn = raw.get("turn")
        if not isinstance(turn, int) or not 2 <= turn < len(messages) or messages[turn].get("role") != "assistant":
            raise ValueError(f"{where}: turn {turn!r} is not an assistant message at index 2 or later "
                             f"(the request is messages[:turn])")
        strings = tuple(str(item).casefold() for item in raw.get("must_contain_any") or () if str(item))
        try:
            patterns = tuple(re.compile(str(item), re.IGNORECASE) for item in raw.get("must_match_any") or ())
        except re.error as error:
            raise ValueError(f"{where}: bad regex: {error}") from error
        if not strings and not patterns:
            raise ValueError(f"{where}: neither must_contain_any nor must_match_any is given")
        checks.append(ProbeCheck(str(raw.get("id", number)), turn, str(raw.get("kind") or "other"), strings,
                                 patterns, str(raw.get("why") or "")))
    return checks


# --- part sizes: what workset's own messages are made of -------------------------------------------------------

# Section headings of workset's messages, by prefix, and the part each belongs to (first match wins). Any
# "## Earlier ..." section is digest-like; an unknown heading counts as "other".
PART_HEADINGS: tuple[tuple[str, str], ...] = (
    ("## Task state", "state"),
    ("## Earlier", "digest"),
    ("## Names in elided turns", "names"),
    ("## Summary of turns", "summary"),
    ("## Retrieved for this step", "retrieval"),
)
OTHER_PART = "other"


def part_of(heading: str) -> str:
    return next((part for prefix, part in PART_HEADINGS if heading.startswith(prefix)), OTHER_PART)


def part_tokens(messages: Iterable[Message], count: Callable[[str], int]) -> dict[str, int]:
    """Tokens of each part (state, digest, names, ...) in one request: the "## " sections of the messages whose
    text starts with workset's tag (the compacted message, the live state), summed over messages. The lines
    before a message's first section (its header) belong to no part."""
    sizes: dict[str, int] = {}

    def add(part: str | None, lines: list[str]) -> None:
        if part is not None:
            sizes[part] = sizes.get(part, 0) + count("\n".join(lines).strip())

    for message in messages:
        text = message_text(message)
        if not text.startswith(WORKSET_TAG) or "\n## " not in text:
            continue
        part: str | None = None
        lines: list[str] = []
        for line in text.split("\n"):
            if line.startswith("## "):
                add(part, lines)
                part, lines = part_of(line), []
            lines.append(line)
        add(part, lines)
    return sizes


def workset_sections(messages: Iterable[Message]) -> list[tuple[str | None, str]]:
    """Every line of workset's own text in one request (the messages whose text starts with its tag), each with
    the part its "## " section belongs to (None for a message's header, before its first section)."""
    lines: list[tuple[str | None, str]] = []
    for message in messages:
        text = message_text(message)
        if not text.startswith(WORKSET_TAG):
            continue
        part: str | None = None
        for line in text.split("\n"):
            if line.startswith("## "):
                part = part_of(line)
            lines.append((part, line))
    return lines


# --- dump rows: lines of workset's text that copy raw output by its form rather than state a fact ---------------

_LS_ROW = re.compile(r"[-dlcbps][rwxsStT-]{9}[.+@]?\s+\d+\s+\S+\s+\S+\s+[\d,]+\s+\w{3}\s+\d{1,2}\s+"
                     r"(\d{1,2}:\d{2}|\d{4})\s+\S")  # `ls -l`: mode, links, owner, group, size, date, name
_LS_TOTAL = re.compile(r"total \d+$")
_PIP_ROW = re.compile(r"[A-Za-z][\w.-]*\s{2,}\d+(\.\w+)+(\s+\S+)?$")  # `pip list`: name, padding, version
_BARE_PATH = re.compile(r"(\.{1,2}/|/|~/)?([\w.@+-]+/)+[\w.@+-]*$|\./[\w.@+-]+$")  # find's output: a path only
# grep -rn (`path:12: text`), grep -r (`dir/path.py:text`), grep -n or -A/-B in one file (`12: text`, `12- text`)
# `path:12: text`, `path: text` (grep -r without -n), `12:    text` (grep -n of one file: the line's indentation
# follows; "403: key lacks scope" is an HTTP status line of the state's, not a hit)
_GREP_HIT = re.compile(r"\.?/?[\w.@+/-]*[\w-]\.\w{1,8}[:-]\d+[:-]|\.?/?[\w.@+-]*/[\w.@+/-]*\.\w{1,8}: ?\S|"
                       r"\d+[:-](?:\s{2,}|\t)")
_FRAME = re.compile(r'File "[^"]+", line \d+|Traceback \(most recent call last\)|[\w./-]+\.py:\d+: in \w+')
_PROGRESS = re.compile(r"(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\s*\[\s*\d+%\]|\S+\s+[.FEsxX]+\s+\[\s*\d+%\]$")
_LOG = re.compile(
    r"platform \w+ -- Python \d|collected \d+ items?|collecting \.\.\.|(rootdir|configfile|plugins|cachedir|"
    r"testpaths|cacheprovider): |={5,}|-{5,} |_{5,} |(Requirement already satisfied|Collecting|Downloading|"
    r"Installing collected packages|Successfully installed|Using cached|Obtaining|Building wheels? for|"
    r"Created wheel|Stored in directory|Looking in indexes|Attempting uninstall|Found existing installation|"
    r"WARNING: Running pip as)\b|\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d\S*\s+(DEBUG|INFO|WARN|WARNING|ERROR)\b|"
    r"[━\s]*[\d.]+/[\d.]+ [kMG]?B [\d.]+ [kMG]?B/s eta |[\w.-]+\.(whl|tar\.gz) \([\d.]+ [kMG]?B\)")
# build files: Makefile variables and recipes, ini/TOML keys with quoted or list values, section headers, targets
_BUILD = re.compile(r"[A-Z][A-Z0-9_]+\s*[?:+!]?=|[\w.-]+\s*(:=|\?=|\+=)|[a-z_][\w.-]*\s*=\s*([\"'\[{]|>=|file:|"
                    r"find:|attr:)|\[[\w.\-: \"']+\]$|.*\$[({][A-Z_]+[)}]|\.PHONY\s*:")
# a Makefile rule, where it cannot be a `label: value` of the state's: a file or pattern target, or make syntax
_TARGET = re.compile(r"([\w/-]+\.[a-z0-9]{1,4}|\S*[%$]\S*):(\s+[\w./%$()-]+)*$|\S+:.*\$[({]")
_README = re.compile(r"#{1,6} \S|\[!\[|```|\[[^\]]+\]\([^)]+\)$|\|.*\|$|[=~^-]{4,}$|\.\. \w+::|:\w+: ")
_SOURCE = re.compile(
    r"(async def|def|class) \w+|import [\w.]+(\s*,\s*[\w.]+)*( as \w+)?$|from [\w.]+ import |"
    r"(return|raise|yield|assert|del)( |$)|(pass|break|continue)$|"
    r"(if|elif|while|for|with|try|except|else|finally)\b.*:$|@\w[\w.]*(\(|$)|(self|cls)\.\w+|"
    r"\"\"\"|'''|#!/|// |/\* |\*/|[})\]]+;?,?$|[\w.\[\]'\"]+\s*=\s*[\w.]+\(.*\)?$|[\w.]+\(.*\)[,;:]?$|['\"].*['\"],$|"
    r".*[([{,]$|(const|let|var|func|fn|pub|public|private|static|struct|impl|package) \w")
# workset's own line shapes, unwrapped to the value they carry
_ACTION = re.compile(r"(turn \d+ )?\S+ .*? -> (ok|error|exit -?\d+|\w+)?:? ?(exit -?\d+: )?(?P<gist>.*)$")
_PLACEHOLDER = re.compile(r"\[workset\] \S+ output elided: (?P<gist>.*)$")
_SAYS = re.compile(r"turn \d+ (assistant|user): (?P<gist>.*)$")
_SIZE = re.compile(r"\s*\(\d+ lines?(, [\d.]+k? chars)?\)$|\s*\([\d.]+ [kMG]?B\)$")
_LABEL = re.compile(r"[^\s=:][^=:]{0,79}?( = |: )(\w+=)?")
_CARD_FIELD = re.compile(r"\w+=")
_PLAN = re.compile(r"\[[ x]\] ")
_VERIFIED = re.compile(r".+: (passed|failed|unclear)(: .*| — passed since)?$")
# a "Files changed" line of the state's: the file and how the agent changed it
_CHANGED = re.compile(r"\S+: (written|edited|deleted|patched|created|moved|copied|renamed|changed)\b")

DUMP_KINDS = ("listing", "doc", "grep", "source", "frame", "log")


def line_body(line: str) -> str:
    """A line of workset's text without its bullet and refs (and a cut's ellipsis)."""
    body = _REF.sub("", line).strip()
    body = body[2:] if body.startswith("- ") else body
    return body.rstrip(" …").strip()


def raw_kind(text: str, labelled: bool = False) -> str | None:
    """The kind of raw output a text is by its form, or None. A labelled value (what follows a label the state
    added) is not counted as a bare path: a state line naming a file is a fact."""
    if not text:
        return None
    if _LS_ROW.match(text) or _LS_TOTAL.match(text) or _PIP_ROW.match(text):
        return "listing"
    if not labelled and " " not in text and _BARE_PATH.match(text):
        return "listing"
    if _FRAME.match(text):
        return "frame"
    if _PROGRESS.search(text) or _LOG.match(text):
        return "log"
    if _GREP_HIT.match(text):
        return "grep"
    if _BUILD.match(text) or _TARGET.match(text) or _README.match(text):
        return "doc"
    if _SOURCE.match(text):
        return "source"
    return None


def dump_row(line: str) -> str | None:
    """The kind of raw output (DUMP_KINDS) a line of workset's own text copies, or None when the line is workset's
    structure (a heading, a section title, a plan item, a digest line) or a fact. Digest and action lines
    (`turn 12 bash ARGS -> ok: GIST`) and placeholders of elided outputs are judged by their gist, labelled
    lines (`label = value`, `label: value`, a card's `field=value`) by their whole text, then by their value."""
    body = line_body(line)
    if not body or line.startswith("## ") or (body.endswith(":") and not line.lstrip().startswith("- ")):
        return None
    if _PLAN.match(body) or _VERIFIED.match(body) or _SAYS.match(body) or _CHANGED.match(body):
        return None  # an item, a verification, a digest line of what the agent or user said: workset's structure
    found = _PLACEHOLDER.match(body) or (_ACTION.match(body) if " -> " in body else None)
    if found:
        return raw_kind(_SIZE.sub("", found.group("gist")).strip())
    kind = raw_kind(body)
    if kind is not None:
        return kind
    label = _LABEL.match(body)
    if label is None:
        return None
    value = body[label.end():].strip()
    return raw_kind(value, labelled=True)


def task_copy(line: str, task_text: str) -> bool:
    """Whether a state line's value is a copy of the task message's text (which is forwarded verbatim anyway):
    its body, or its value after a `Label: ` prefix, of 20+ characters, found in the task, compared flat."""
    body = line_body(line)
    label = _LABEL.match(body)
    candidates = [body] + ([body[label.end():]] if label else [])
    folded = flat(task_text.replace("*", ""))
    return any(len(text) >= 20 and flat(text.replace("*", "")) in folded for text in candidates)


@dataclass(frozen=True)
class TextCounts:
    """What workset's own text in one request is made of: its lines, the dump rows among them (by kind), and of the
    task state's lines, how many are dump rows and how many copy the task."""

    lines: int = 0
    dump_rows: int = 0
    kinds: tuple[tuple[str, int], ...] = ()
    state_lines: int = 0
    state_dump_rows: int = 0
    state_task_copies: int = 0


def is_state_item(line: str) -> bool:
    """A line of the task state that carries content: not its heading, not a section title."""
    stripped = line.strip()
    if not stripped or stripped.startswith("## "):
        return False
    return stripped.startswith("- ") or not stripped.endswith(":")


def text_counts(sections: Sequence[tuple[str | None, str]], task_text: str = "") -> TextCounts:
    """TextCounts of workset's lines (from workset_sections)."""
    kinds: dict[str, int] = {}
    lines = dump = state = state_dump = copies = 0
    for part, line in sections:
        if not line.strip():
            continue
        lines += 1
        kind = dump_row(line)
        if kind is not None:
            dump += 1
            kinds[kind] = kinds.get(kind, 0) + 1
        if part == "state" and is_state_item(line):
            state += 1
            state_dump += kind is not None
            copies += bool(task_text) and kind is None and task_copy(line, task_text)
    return TextCounts(lines, dump, tuple(sorted(kinds.items())), state, state_dump, copies)
