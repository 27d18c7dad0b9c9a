"""Plan items: checklists, announced numbered plans, todo-tool calls, and in assistant text labelled open items
("Next: lanes 121–240", "Open items: (1) … (2) …", "TODO: …", "待办：…"), items still to be confirmed ("TBC", "待定")
and the lines that close one ("lanes 121–240 done", "✅ lanes 121–240").

An item is kept as written; the ledger compares items without case (state.fact_key), so a later mention closes an
item only when it names the same item."""

from __future__ import annotations

import re
from typing import Any

from ..records import ToolCall
from .facts import parse_json
from .text import as_written, clip, prose_lines, sentences, strip_markup, strip_speaker, trim

PENDING = "pending"
COMPLETED = "completed"
NEXT = "next"  # pending, until the agent names its next step again
STEP = "step"  # a step of a plan the agent announced: pending until the work is done or the agent plans anew
MAX_PLAN_ITEMS = 40  # per message
MAX_ITEM_CHARS = 200
MAX_PLAN_SCAN_CHARS = 20_000  # plans are read from the start of a message

_CHECKBOX = re.compile(r"^\s*(?:(?:[-*+•]|\d{1,3}[.)])\s*)?\[(?P<mark>[ xX✓✔]?)\]\s+(?P<text>\S.*)$")  # linear
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
# Labels of open work: the text after one ("Next: lanes 121–240") or the list under one are pending items.
_LABELS = (
    r"(?:next(?: steps?)?|open(?: (?:items?|questions?|points?|issues?))?|to-?dos?|still to do|"
    r"remaining(?: (?:items|work|steps|tasks))?|outstanding(?: items)?|follow-?ups?|"
    r"待办(?:事项)?|下一步|待确认|待定事项|未完成(?:事项)?|遗留问题)"
)
# A label starts a line (after a list marker or "THOUGHT:") or a sentence, or follows a dash or a semicolon.
_PENDING_LABEL = re.compile(
    r"(?:^|(?<=[.!?;:—]\s)|(?<=[。！？；]))\s{0,3}(?:(?:[-*+•]|\d{1,3}[.)])\s+)?(?:\*\*)?"
    rf"(?P<label>{_LABELS})(?:\*\*)?\s?[:：](?:\*\*)?\s*",
    re.I,
)
_NEXT_LABEL = re.compile(r"next(?: steps?)?$|下一步$", re.I)
_LABEL_HEADING = re.compile(rf"^\s{{0,3}}#{{1,6}}\s+(?:\*\*)?{_LABELS}(?:\*\*)?\s?[:：]?\s*$", re.I)
_LABEL_WORDS = (
    "next", "open", "todo", "to-do", "to do", "remaining", "outstanding", "follow", "待办", "下一步", "待确认",
    "待定", "未完成", "遗留",
)  # fmt: skip
_LIST_ITEM = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)]|\(\d{1,3}\)|[a-z][.)])\s+\S")
# An inline enumerator: "(1) ", "2) ", "(b) ", "①"; only a run numbered from one counts (see `_label_items`).
_ENUMERATOR = re.compile(
    r"(?<![^\s:;,：；，。、—])(?:[(（](?P<p>\d{1,2}|[a-z])[)）]|(?P<b>\d{1,2}|[a-z])[)）])\s*|(?P<c>[①-⑳])\s*"
)
_ITEM_SEPARATOR = re.compile(r"\s*[;；]\s*")
_ITEM_TAIL_PUNCTUATION = ",，、;；"
_ITEM_TAIL_WORDS = (" and", " or", "以及", "和")
# What follows a label's items in the same sentence is the agent's narration, not another item.
_NARRATION_STARTS = ("i'll", "i’ll", "i will", "i ", "we'll", "we’ll", "we will", "let me", "let's", "let’s",
                     "then ", "我", "先", "然后", "再")
_TO_CONFIRM = re.compile(r"\b(?:TBC|TBD|TBA)\b|待定|待确认(?!事项|的|项)|待核实")
_TO_CONFIRM_WORDS = ("TBC", "TBD", "TBA", "待定", "待确认", "待核实")
# "lanes 121–240 done", "Done: lanes 121–240", "lanes 121–240 已完成"; a note in brackets may follow.
_CLOSED = re.compile(
    r"^(?P<a>.{2,80}?)\s?(?:[:：—–-]\s?)?(?:(?:is|are|now|all) )?(?:done|completed|finished)"
    r"(?:\s?[(（][^()（）\n]{0,60}[)）])?[.!。！]?$"
    r"|^(?:done|completed|finished)\s?[:：]\s?(?P<b>.{2,80})$"
    r"|^(?P<c>.{2,40}?)\s?(?:已完成|已经完成|完成了|已搞定)[。！.]?$"
    r"|^(?:已完成|完成)\s?[:：]\s?(?P<d>.{2,80})$",
    re.I,
)
_CLOSED_WORDS = ("done", "complete", "finished", "完成", "搞定")
MAX_CLOSING_CHARS = 100  # a longer sentence that ends in "done" is narration, not a closing line
MAX_CLOSING_WORDS = 8
# Closing lines name an item: "I'm done", "all done", "our fix is done", "the booking has been successfully
# completed" name none (narration starts with these words, or has a verb of its own).
_NOT_ITEM_START = frozenset(
    "i i'm i’m we we're we’re you it this that all everything so now let let's or actually however but and then "
    "our my there there's looks seems".split()
)
_NOT_ITEM_WORDS = frozenset(
    "is are was were be been being has have had should would will can could think need needs check looks seems "
    "if whether not successfully already".split()
)
_DONE_LEAD = ("✅", "✔", "☑")


def _item(text: str) -> tuple[str, str] | None:
    """(key, status) of one item text: done marks decide the status and are dropped from the key."""
    status = COMPLETED if _DONE_MARK.search(text) else PENDING
    key = as_written(strip_markup(_DONE_STRIP.sub("", text)))
    return (clip(key, MAX_ITEM_CHARS), status) if key else None


def checklist_items(text: str) -> list[tuple[str, str]]:
    """Markdown checklist lines `- [ ] x` / `- [x] x`, outside code blocks."""
    items: list[tuple[str, str]] = []
    if not any(box in text for box in _BOXES):
        return items
    for line in prose_lines(text):
        match = _CHECKBOX.match(line)
        if match:
            key = as_written(strip_markup(_DONE_STRIP.sub("", match.group("text"))))
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
            items.extend((key, STEP if status == PENDING else status)
                         for key, status in (item for item in (_item(t) for t in block) if item is not None))
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
    key = as_written(strip_markup(_DONE_STRIP.sub("", text)))
    return (clip(key, MAX_ITEM_CHARS), COMPLETED if done else PENDING) if key else None


def labelled_items(text: str) -> list[tuple[str, str]]:
    """Open work an assistant names in prose: the text after a label ("Next: lanes 121–240", "TODO: …",
    "下一步：…"), split into items when it enumerates them ("Open items: (1) … (2) …") or separates them with
    semicolons; the list right under a label line with nothing after its colon, or under a label heading
    ("## 待确认"); items marked TBC / TBD / 待定 anywhere; and lines that close an item ("lanes 121–240 done",
    "✅ lanes 121–240")."""
    lowered = text.lower()
    labelled = any(word in lowered for word in _LABEL_WORDS)
    to_confirm = any(word in text for word in _TO_CONFIRM_WORDS)
    closing = any(word in lowered for word in _CLOSED_WORDS) or any(mark in text for mark in _DONE_LEAD)
    if not (labelled or to_confirm or closing):
        return []
    items: list[tuple[str, str] | None] = []
    under_label = False  # inside the list under a label line or heading
    for line in prose_lines(text):
        if len(items) >= MAX_PLAN_ITEMS:
            break
        line = strip_speaker(line)
        if not line.strip():
            under_label = False
            continue
        if labelled and _LABEL_HEADING.match(line):
            under_label = True
            continue
        if under_label and _LIST_ITEM.match(line):
            items.append(_item(line.strip()))
            continue
        under_label = False
        if _CHECKBOX.match(line):
            continue  # checklists are read by checklist_items
        label = _PENDING_LABEL.search(line) if labelled else None
        if label is None:
            items.extend(_unlabelled_items(line, to_confirm, closing))
            continue
        rest = line[label.end():].strip()
        under_label = not rest
        own, after = _label_items(rest)
        items.extend(_unlabelled_items(line[: label.start()], to_confirm, closing))
        # "Next: …" names the next step only: the agent's next "Next:" replaces it (NEXT, see TaskState)
        status = NEXT if _NEXT_LABEL.match(label.group("label")) else PENDING
        items.extend(_pending(part, status) for part in own)
        items.extend(_unlabelled_items(" ".join(after), to_confirm, closing))
    return [item for item in items if item is not None]


def _unlabelled_items(text: str, to_confirm: bool, closing: bool) -> list[tuple[str, str] | None]:
    """Items of text outside a label: those marked TBC, else those a closing line completes."""
    if not text.strip():
        return []
    if to_confirm and _TO_CONFIRM.search(text):
        return _to_confirm_items(text)
    return _closed_items(text.strip()) if closing else []


def _pending(text: str, status: str = PENDING) -> tuple[str, str] | None:
    item = _item(text)
    return (item[0], status) if item is not None else None


def _label_items(rest: str) -> tuple[list[str], list[str]]:
    """The items of a label's text, and the sentences after them. "(1) a (2) b" or "1) a; 2) b" is split at a run
    of enumerators numbered from one (the last item ends with its sentence); otherwise the label's sentence is
    split at semicolons, leaving out the agent's narration ("…; I'll ask them")."""
    if not rest:
        return [], []
    marks: list[re.Match[str]] = []
    for match in _ENUMERATOR.finditer(rest):
        if _enumerator_number(match) == len(marks) + 1:
            marks.append(match)
    if len(marks) >= 2:
        ends = [m.start() for m in marks[1:]] + [len(rest)]
        parts = [rest[m.end(): end] for m, end in zip(marks, ends)]
        last = sentences(parts[-1].strip()) or [""]
        parts[-1], after = last[0], last[1:]
    else:
        said = sentences(rest) or [""]
        parts = [part for part in _ITEM_SEPARATOR.split(said[0])
                 if not part.strip().lower().startswith(_NARRATION_STARTS)]
        after = said[1:]
    return [cleaned for cleaned in (_without_joiner(part) for part in parts) if cleaned], after


def _without_joiner(part: str) -> str:
    """An enumerated item without what joins it to the next one: "freight for C, and" -> "freight for C"."""
    part = part.strip().rstrip(_ITEM_TAIL_PUNCTUATION).rstrip()
    for word in _ITEM_TAIL_WORDS:
        if part.lower().endswith(word):
            part = part[: -len(word)].rstrip().rstrip(_ITEM_TAIL_PUNCTUATION).rstrip()
            break
    return part


def _enumerator_number(match: re.Match[str]) -> int:
    mark = match.group("p") or match.group("b")
    if mark is None:
        return ord(match.group("c")) - ord("①") + 1
    return int(mark) if mark.isdigit() else ord(mark) - ord("a") + 1


def _to_confirm_items(line: str) -> list[tuple[str, str] | None]:
    """A list item marked TBC is that item; in prose, the sentence that says TBC is."""
    if _LIST_ITEM.match(line):
        return [_pending(line)]
    return [_pending(trim(sentence)) for sentence in sentences(line.strip()) if _TO_CONFIRM.search(sentence)]


def _closed_items(line: str) -> list[tuple[str, str] | None]:
    """Items a line closes: "✅ lanes 121–240", or a short sentence "lanes 121–240 done" / "Done: lanes 121–240"."""
    if line.startswith(_DONE_LEAD):
        return [_item(line)]
    closed: list[tuple[str, str] | None] = []
    for sentence in sentences(strip_markup(line)):
        if len(sentence) > MAX_CLOSING_CHARS:
            continue
        match = _CLOSED.match(sentence.strip())
        if match is None:
            continue
        text = next(group for group in match.groups() if group is not None)
        item = _item(text)
        words = item[0].lower().split() if item is not None else []
        if (item is not None and len(words) <= MAX_CLOSING_WORDS and words[0] not in _NOT_ITEM_START
                and not _NOT_ITEM_WORDS.intersection(words)):
            closed.append((item[0], COMPLETED))
    return closed


def plan_items(text: str, calls: list[ToolCall], role: str) -> list[tuple[str, str]]:
    """All plan items of a message, deduplicated by key (first wins), at most MAX_PLAN_ITEMS."""
    text = text[:MAX_PLAN_SCAN_CHARS]
    found = checklist_items(text)
    if role == "assistant":
        found += todo_items(calls)
        found += numbered_plan_items(text)
        found += labelled_items(text)
    seen: set[str] = set()
    unique: list[tuple[str, str]] = []
    for key, status in found:
        if key not in seen:
            seen.add(key)
            unique.append((key, status))
    return unique[:MAX_PLAN_ITEMS]
