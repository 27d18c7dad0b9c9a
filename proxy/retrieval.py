"""Event-driven retrieval: stored content brought back into the working set only when something happens.

- after two failed tool calls in a row: the most similar earlier failure, and what worked after it;
- when the latest user turn names something whose content was elided: the lines that mention it, with the ref;
- when the next action may be an irreversible tool call (one the policy lists, offered in this request, right
  after an approval was asked or given): the constraints and the approval state that concern it.

Pure functions over plain data; the search over stored content is passed in.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Sequence
from typing import Any

from .extract.facts import window
from .extract.names import names
from .extract.text import one_line
from .messages import is_tool_result, message_text, tool_name
from .records import Action, Fact, Message

_WORD = re.compile(r"[A-Za-z_][\w.]{2,}")
WORDS_CHARS = 8_192  # of a call's arguments and gist, the head and tail compared for similarity
MENTION_LINES = 5  # lines shown of one stored text that mention a name
Search = Callable[[str], list[dict[str, Any]]]  # query -> stored matches {ref, tool, role, content}


def _words(text: str) -> set[str]:
    return {word.lower() for word in _WORD.findall(window(text, WORDS_CHARS))}


def failure_advice(actions: Sequence[Action], recent_outcomes: Sequence[tuple[str, str, str]]) -> str:
    """When the two newest tool results failed: the earlier failure most like the newest one (by shared words
    of tool, arguments and error), and the first success of the same tool after it.

    `recent_outcomes` are (tool, arguments, outcome) of the newest tool results, oldest first; `actions` are the
    recorded ones, which may not include the newest yet."""
    if len(recent_outcomes) < 2 or any(outcome != "error" for _, _, outcome in recent_outcomes[-2:]):
        return ""
    tool, arguments, _ = recent_outcomes[-1]
    latest = _words(f"{tool} {arguments}")
    newest = {(a, b) for a, b, _ in recent_outcomes[-2:]}
    best: tuple[float, int] | None = None
    for index, action in enumerate(actions):
        if action.outcome != "error" or (action.tool, action.arguments) in newest:
            continue
        words = _words(f"{action.tool} {action.arguments} {action.gist}")
        score = len(words & latest) / (len(words | latest) or 1)
        if score > 0 and (best is None or score > best[0]):
            best = (score, index)
    if best is None:
        return ""
    failed = actions[best[1]]
    fix = next((a for a in actions[best[1] + 1:] if a.tool == failed.tool and a.outcome == "ok"), None)
    lines = ["Two tool calls in a row failed. An earlier similar failure:",
             f"- {failed.tool} {one_line(failed.arguments, 200)} -> {one_line(failed.gist, 200)}{_ref(failed)}"]
    if fix is not None:
        lines.append(f"What worked after it: {fix.tool} {one_line(fix.arguments, 300)} -> {one_line(fix.gist, 200)}{_ref(fix)}")
    return "\n".join(lines)


def elided_mentions(user_text: str, visible: str, search: Search, limit_chars: int) -> str:
    """Lines of stored content that mention names in the latest user turn, when that content is not in view."""
    wanted = sorted(n for n in names(user_text) if n not in visible)
    if not wanted:
        return ""
    out: list[str] = []
    used = 0
    for name in wanted[:5]:
        for hit in search(name):
            if hit["content"][:200] in visible or hit["content"][:200] in user_text:
                continue  # shown in full already, or the latest message itself (stored by now when another
                # conversation forked from this one meanwhile)
            lines = _lines_with(hit["content"], name, MENTION_LINES)
            if not lines:
                continue
            entry = f"- {name} in [ref:{hit['ref']}] ({hit.get('tool') or hit.get('role')}):\n  " + "\n  ".join(
                one_line(line, 300) for line in lines)
            if used + len(entry) > limit_chars:
                break
            out.append(entry)
            used += len(entry)
            break
    if not out:
        return ""
    return "The latest message names content that left the context; the lines that mention it:\n" + "\n".join(out)


def _lines_with(text: str, name: str, count: int) -> list[str]:
    """The first `count` lines of `text` that hold `name`, found by searching for it (not by splitting a long
    output into lines)."""
    found: list[str] = []
    position = 0
    while len(found) < count and (at := text.find(name, position)) >= 0:
        end = text.find("\n", at)
        end = len(text) if end < 0 else end
        found.append(text[text.rfind("\n", 0, at) + 1:end])
        position = end + 1
    return found


def irreversible_guard(tools: Sequence[Any], patterns: Sequence[str], approval_asked_or_given: bool,
                       constraints: Sequence[Fact], approvals: Sequence[Fact]) -> str:
    """Before an irreversible call may be made: the constraints and approval state that concern it."""
    if not patterns or not approval_asked_or_given:
        return ""
    offered = [name for name in (tool_name(t) for t in tools or ()) if name and
               any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)]
    if not offered:
        return ""
    lines = [f"Before an irreversible call ({', '.join(offered)}): check it against these."]
    lines += [f"- constraint: {' '.join(f.value.split())}" for f in constraints]
    lines += [f"- approval: {f.key}: {f.value}" for f in approvals]
    if len(lines) == 1:
        lines.append("- no constraint or approval is recorded: confirm with the user first.")
    return "\n".join(lines)


def recent_tool_outcomes(messages: Sequence[Message], outcomes: Sequence[str], tool_names: Sequence[str],
                         count: int = 2) -> list[tuple[str, str, str]]:
    """(tool, arguments, outcome) of the newest `count` tool results, oldest first."""
    found: list[tuple[str, str, str]] = []
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if is_tool_result(message):
            found.append((tool_names[index], _arguments_of(messages, index), outcomes[index]))
            if len(found) == count:
                break
        elif message.get("role") == "user":
            break
    return found[::-1]


def _arguments_of(messages: Sequence[Message], index: int) -> str:
    call_id = messages[index].get("tool_call_id")
    for back in range(index - 1, -1, -1):
        for call in messages[back].get("tool_calls") or ():
            if isinstance(call, dict) and call.get("id") == call_id:
                return str((call.get("function") or {}).get("arguments", ""))
        if messages[back].get("role") == "assistant":
            break
    return ""


def latest_user_text(messages: Sequence[Message]) -> str:
    return message_text(messages[-1]) if messages and messages[-1].get("role") == "user" else ""


def _ref(item: Action) -> str:
    return f" [ref:{item.evidence_ref}]" if item.evidence_ref else ""
