"""Plan items (checklists, announced numbered plans, todo-tool calls) and decisions from assistant text."""

from __future__ import annotations

import re
from typing import Any

from ..records import ToolCall
from .facts import parse_json
from .text import clip, cut, looks_like_code, normalize, prose_lines, sentences, strip_markup, trim, units

PENDING = "pending"
COMPLETED = "completed"
MAX_PLAN_ITEMS = 40  # per message
MAX_ITEM_CHARS = 200
MAX_DECISIONS = 3  # per message: decisions are few; more is narration
MAX_DECISION_CHARS = 240
MAX_PLAN_SCAN_CHARS = 20_000  # plans are read from the start of a message
MAX_DECISION_SCAN_CHARS = 8_000  # decisions too: a longer message is mostly pasted output

_CHECKBOX = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])?\s*\[(?P<mark>[ xX✓✔]?)\]\s+(?P<text>\S.*)$")
_BOXES = ("[ ]", "[x]", "[X]", "[]", "[✓]", "[✔]")
_NUMBERED = re.compile(r"^\s{0,3}(?P<n>\d{1,2})[.)]\s+(?P<text>\S.*)$")
_SUB_ITEM = re.compile(r"^\s+(?:[-*+•]|\d{1,3}[.)]|[a-z][.)])\s+\S")
# A line announcing a plan. Strong cues make any list under them a plan; weak cues ("I'll", "let me") need
# the items themselves to read like steps (imperative verbs).
_STRONG_CUE = re.compile(r"\b(?:plan|steps?|to-?dos?|approach|roadmap|checklist|next steps)\b|计划|步骤", re.I)
_WEAK_CUE = re.compile(
    r"\b(?:next|i will|i'll|i’ll|let me|let's|let’s|i'm going to|i am going to|we need to|we will|we'll)\b", re.I
)
_NOT_A_CUE = re.compile(r"\blet me know\b|\bnext time\b", re.I)
_IMPERATIVE = re.compile(
    r"^(?:add|analy[sz]e|apply|build|change|check|clean|commit|configure|confirm|create|debug|deploy|document|edit|"
    r"ensure|examine|explore|extract|find|fix|handle|identify|implement|inspect|install|investigate|locate|look|"
    r"make|modify|move|open|read|refactor|remove|rename|replace|reproduce|review|rewrite|run|search|set|submit|"
    r"test|trace|understand|update|use|validate|verify|write)\b",
    re.I,
)
# "done" in prose is not a mark; "(done)", "DONE", a tick or a strike-through is.
_DONE_MARK = re.compile(r"✅|✔️?|✓|☑|(?i:\((?:done|completed)\)|\[(?:done|x)\])|\bDONE\b|~~.+~~")
_DONE_STRIP = re.compile(r"✅|✔️?|✓|☑|(?i:\((?:done|completed)\)|\[(?:done|x)\])|\bDONE\b:?|~~|⏳|🔄|⬜|☐")
_TODO_TOOL = re.compile(
    r"^(?:todo|todos|todo_?write|write_?todos?|update_?todos?|todo_?list|update_?plan|plan|set_?plan)$", re.I
)
_TODO_LIST_KEYS = ("todos", "items", "plan", "tasks", "steps", "todo", "checklist")
_TODO_TEXT_KEYS = ("content", "step", "title", "task", "description", "text", "name", "activeForm")
_DONE_STATUSES = frozenset({"completed", "complete", "done", "finished", "cancelled", "canceled", "skipped"})
_DECISION = re.compile(
    r"\b(?:i(?:'|’)ll use|i will use|i(?:'|’)ll go with|i will go with|we(?:'|’)ll use|we will use|we will go with|"
    r"we(?:'|’)ll go with|i(?:'|’)ve decided|i decided|i have decided|we decided|we(?:'|’)ve decided|decision:|"
    r"the fix is to|the solution is to|the right fix is|i(?:'|’)m going to use|let(?:'|’)s go with|i chose|we chose|"
    r"i(?:'|’)ll choose|going with)(?!\w)",
    re.I,
)

# Every decision pattern holds one of these: a cheap test before the slow scan.
_DECISION_WORDS = ("use", "go with", "going with", "decid", "decision", "fix is", "solution is", "chose", "choose")


def _item(text: str) -> tuple[str, str] | None:
    """(key, status) of one item text: done marks decide the status and are dropped from the key."""
    status = COMPLETED if _DONE_MARK.search(text) else PENDING
    key = normalize(strip_markup(_DONE_STRIP.sub("", text)))
    return (clip(key, MAX_ITEM_CHARS), status) if key else None


def checklist_items(text: str) -> list[tuple[str, str]]:
    """Markdown checklist lines `- [ ] x` / `- [x] x`, outside code blocks."""
    items: list[tuple[str, str]] = []
    if not any(box in text for box in _BOXES):
        return items
    for line in prose_lines(text):
        match = _CHECKBOX.match(line)
        if match:
            key = normalize(strip_markup(_DONE_STRIP.sub("", match.group("text"))))
            if key:
                done = match.group("mark").strip() != "" or bool(_DONE_MARK.search(match.group("text")))
                items.append((clip(key, MAX_ITEM_CHARS), COMPLETED if done else PENDING))
    return items


def numbered_plan_items(text: str) -> list[tuple[str, str]]:
    """Items of numbered lists that a line announces as a plan, skipping lists of questions or explanations."""
    items: list[tuple[str, str]] = []
    if "1. " not in text and "1) " not in text:
        return items
    lines = list(prose_lines(text))
    index = 0
    while index < len(lines):
        if not _NUMBERED.match(lines[index]):
            index += 1
            continue
        intro = _intro_line(lines, index)
        block, index = _numbered_block(lines, index)
        if _is_plan(intro, block):
            items.extend(item for item in (_item(t) for t in block) if item is not None)
    return items


def _intro_line(lines: list[str], index: int) -> str:
    for back in range(index - 1, max(-1, index - 3), -1):
        if lines[back].strip():
            return lines[back].strip()
    return ""


def _numbered_block(lines: list[str], index: int) -> tuple[list[str], int]:
    """The item texts of the numbered list starting at `index`, and the index after it."""
    block: list[str] = []
    while index < len(lines):
        line = lines[index]
        match = _NUMBERED.match(line)
        if match:
            block.append(match.group("text").strip())
        elif line.strip() and not _SUB_ITEM.match(line):
            break
        index += 1
    return block, index


def _is_plan(intro: str, block: list[str]) -> bool:
    if not intro or not block or _NOT_A_CUE.search(intro) or intro.rstrip().endswith(("?", "？")):
        return False
    if any(item.rstrip("*_ ").endswith(("?", "？")) for item in block):
        return False  # numbered questions to the user are not a plan
    if _STRONG_CUE.search(intro):
        return True
    if not _WEAK_CUE.search(intro):
        return False
    imperative = sum(1 for item in block if _IMPERATIVE.match(strip_markup(item)))
    return imperative * 2 >= len(block)


def todo_items(calls: list[ToolCall]) -> list[tuple[str, str]]:
    """Items of todo/plan tool calls (todo_write, TodoWrite, update_plan, write_todos...)."""
    items: list[tuple[str, str]] = []
    for call in calls:
        if not _TODO_TOOL.match(call.name.replace("-", "_")):
            continue
        for entry in _todo_entries(parse_json(call.arguments)):
            item = _todo_item(entry)
            if item is not None:
                items.append(item)
    return items


def _todo_entries(data: Any) -> list[Any]:
    if isinstance(data, list):
        return data
    if isinstance(data, dict):
        for name in _TODO_LIST_KEYS:
            value = data.get(name)
            if isinstance(value, list):
                return value
    return []


def _todo_item(entry: Any) -> tuple[str, str] | None:
    if isinstance(entry, str):
        return _item(entry)
    if not isinstance(entry, dict):
        return None
    text = next((entry[k] for k in _TODO_TEXT_KEYS if isinstance(entry.get(k), str) and entry[k].strip()), "")
    if not text:
        return None
    status = str(entry.get("status") or entry.get("state") or "").strip().lower().replace(" ", "_")
    # Cancelled items are closed too: the ledger only knows pending and completed.
    done = status in _DONE_STATUSES or entry.get("done") is True or entry.get("checked") is True
    key = normalize(strip_markup(_DONE_STRIP.sub("", text)))
    return (clip(key, MAX_ITEM_CHARS), COMPLETED if done else PENDING) if key else None


def plan_items(text: str, calls: list[ToolCall], role: str) -> list[tuple[str, str]]:
    """All plan items of a message, deduplicated by key (first wins), at most MAX_PLAN_ITEMS."""
    text = text[:MAX_PLAN_SCAN_CHARS]
    found = checklist_items(text)
    if role == "assistant":
        found += todo_items(calls)
        found += numbered_plan_items(text)
    seen: set[str] = set()
    unique: list[tuple[str, str]] = []
    for key, status in found:
        if key not in seen:
            seen.add(key)
            unique.append((key, status))
    return unique[:MAX_PLAN_ITEMS]


def decisions(text: str) -> list[tuple[str, str]]:
    """(key, sentence) for sentences that state a decision ("I'll use X", "the fix is to ...")."""
    text = text[:MAX_DECISION_SCAN_CHARS]
    lowered = text.lower()
    if not any(word in lowered for word in _DECISION_WORDS) or not _DECISION.search(text):
        return []
    found: list[tuple[str, str]] = []
    seen: set[str] = set()
    for unit in units(text):
        if not _DECISION.search(unit):
            continue
        for sentence in sentences(unit):
            if len(found) >= MAX_DECISIONS:
                return found
            if not _DECISION.search(sentence) or sentence.rstrip().endswith(("?", "？")) or looks_like_code(sentence):
                continue
            value = cut(trim(sentence), MAX_DECISION_CHARS)
            key = normalize(value)
            if key and key not in seen:
                seen.add(key)
                found.append((key, value))
    return found
