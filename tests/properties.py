"""The working-set invariants of DESIGN.md as one checker, used by the hypothesis tests and the trace replays.

Expected constraints and pending items are computed here independently of the proxy's branch cache: every
message of the request path is ingested from scratch and folded into a TaskState.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from proxy.hashing import chain, ref_of
from proxy.ingest import extract_at
from proxy.extract.text import normalize
from proxy.messages import message_text
from proxy.policy import Policy
from proxy.state import TaskState
from proxy.tokens import TokenCounter
from proxy.workingset import COMPACTED, DROPPED_USERS, REPEATED, WORKSET_TAG, Pairing, first_user

OBSERVATIONS = Policy().observation_matcher  # the default rules: which user messages are tool observations
EXCERPT_MARK = "tokens of this output elided; full output: [ref:"


def flat(text: str) -> str:
    """Lowercased, whitespace collapsed, bold and inline-code marks dropped: plan keys are stored that way."""
    return normalize(text)


@dataclass
class PathState:
    """Incremental expected state of one conversation path (append-only, as an agent sends it)."""

    counter: TokenCounter
    seen: int = 0
    state: TaskState = field(default_factory=TaskState)

    def update(self, messages: list[dict[str, Any]]) -> TaskState:
        hashes = chain("expected", messages[self.seen:])
        task = first_user(messages)
        for offset, digest in enumerate(hashes):
            index = self.seen + offset
            observed = OBSERVATIONS.is_observation(messages, index, task)
            self.state.apply(extract_at(messages, index, ref_of(digest), task, observed).extraction)
        self.seen = len(messages)
        return self.state


def is_reminder(message: dict[str, Any]) -> bool:
    """A message the client adds, not the agent's work nor the user's words: a system or developer message, or a
    user message of nothing but <system-reminder> blocks (Claude Code's reminders, when it sends no system turns)."""
    if message.get("role") in ("system", "developer"):
        return True
    content = message.get("content")
    parts = [content] if isinstance(content, str) else content if isinstance(content, list) else []
    texts = [p if isinstance(p, str) else p.get("text") if isinstance(p, dict) and p.get("type") == "text" else None
             for p in parts]
    return message.get("role") == "user" and bool(texts) and all(
        isinstance(t, str) and t.strip().startswith("<system-reminder>") and t.strip().endswith("</system-reminder>")
        for t in texts)


def newest_work(request: list[dict[str, Any]]) -> int:
    """Where the newest unit of work starts (an assistant message with its tool results, a text-based agent's
    command with its observation, a user message; not a reminder): it and all after it are the newest turns."""
    task = first_user(request)
    units = Pairing().feed(request).units
    merged: list[tuple[int, int]] = []
    for unit in units:
        if merged and OBSERVATIONS.is_observation(request, unit[0], task) and request[merged[-1][1]].get("role") == "assistant":
            merged[-1] = (merged[-1][0], unit[1])
        else:
            merged.append(unit)
    work = [u for u in merged if not all(is_reminder(request[i]) for i in range(u[0], u[1] + 1))]
    return work[-1][0] if work else len(request)


def repeat_problems(request: list[dict[str, Any]], codes: str, compacted: bool) -> list[str]:
    """A reminder sent again exactly is forwarded once, at its latest place: a compaction leaves out every earlier
    copy before the newest turn (code REPEATED in the decision record), and no message is ever left out as a
    repeat unless a later copy is forwarded. `codes`: the request's decision record."""
    codes = codes.replace(COMPACTED, "").replace("S", "")
    task = first_user(request)
    first_system = next((i for i, m in enumerate(request) if m.get("role") in ("system", "developer")), -1)
    newest = newest_work(request)
    problems = []
    for index, message in enumerate(request):
        later = any(other == message for other in request[index + 1:])
        if codes[index] == REPEATED and not later:
            problems.append(f"message {index} left out as a repeat, but no later copy")
        repeatable = is_reminder(message) and index > max(task if task is not None else -1, first_system)
        if compacted and repeatable and later and index < newest and codes[index] != REPEATED:
            problems.append(f"reminder {index} forwarded again at a compaction although a later copy is")
    return problems


def shown_as_sent(message: dict[str, Any], sent: list[dict[str, Any]]) -> bool:
    """The message is forwarded verbatim, or, a tool output, as its own head and tail around workset's marker."""
    if message in sent:
        return True
    text = message_text(message)
    for other in sent:
        shown = message_text(other)
        if other.get("role") == message.get("role") and other.get("tool_call_id") == message.get("tool_call_id") \
                and EXCERPT_MARK in shown:
            head, _, tail = shown.partition("\n…\n")
            if text.startswith(head) and text.endswith(tail.rpartition("\n…\n")[2]):
                return True
    return False


def shown_text(message: dict[str, Any]) -> str:
    """The message's text and its tool-call arguments: everything a model reads in it."""
    calls = message.get("tool_calls") or []
    return " ".join([message_text(message), *(str((c.get("function") or {}).get("arguments", "")) for c in calls)])


def forwarded_tokens(messages: list[dict[str, Any]], tools: Any, counter: TokenCounter) -> int:
    return sum(counter.message(m) for m in messages) + counter.tools(tools)


def pinned_tokens(sent: list[dict[str, Any]], request: list[dict[str, Any]], tools: Any, counter: TokenCounter) -> int:
    """Tokens of what may never be dropped: system messages, the task, the latest user turn and the assistant reply
    it answers, the newest unit of work and what follows it as shown, workset's own state messages (without the digest), and the tool
    definitions."""
    task = first_user(request)
    users = [i for i, m in enumerate(request) if m.get("role") == "user" and (i == task or not is_reminder(m))]
    keep = [m for m in request if m.get("role") in ("system", "developer")]
    keep += [request[i] for i in users[:1] + users[-1:]]
    answered = users[-1] - 1 if users else -1  # the assistant reply the latest user turn answers
    if answered > users[0] and request[answered].get("role") == "assistant" and not request[answered].get("tool_calls"):
        keep.append(request[answered])
    shown = [m for m in sent if not message_text(m).startswith(WORKSET_TAG) or m.get("role") == "tool"]
    newest = len(request) - newest_work(request)  # the newest unit of work and what follows it, as shown
    keep += [m for m in shown[len(shown) - newest:] if newest and m.get("role") not in ("system", "developer")
             and m not in keep]
    for message in sent:
        text = message_text(message)
        if message.get("role") == "user" and text.startswith(WORKSET_TAG):
            keep.append({"role": "user", "content": text.split("## Earlier steps")[0]})
    return sum(counter.message(m) for m in keep) + counter.tools(tools)


def violations(sent: list[dict[str, Any]], request: list[dict[str, Any]], state: TaskState, budget: int,
               tools: Any, counter: TokenCounter) -> list[str]:
    """Every invariant the forwarded messages break, in words (empty: all hold)."""
    problems: list[str] = []
    request_pairing = Pairing().feed(request)
    if not request_pairing.complete:
        if sent != request:
            problems.append("a history with broken tool pairing was rewritten instead of forwarded as sent")
        return problems
    if not Pairing().feed(sent).complete:
        problems.append("tool calls and results are not paired in what was forwarded")
    tokens = forwarded_tokens(sent, tools, counter)
    if tokens > budget and pinned_tokens(sent, request, tools, counter) <= budget:
        problems.append(f"over budget: {tokens} > {budget} although the pinned parts fit")
    for message in request:  # a repeated one once, at its latest place (see repeat_problems)
        if message.get("role") in ("system", "developer") and message not in sent:
            problems.append("a system message was not forwarded verbatim")
    task = first_user(request)
    newest = newest_work(request)
    for index in range(newest, len(request)):
        if not shown_as_sent(request[index], sent):
            problems.append(f"message {index}, of the newest turn or after it, was not forwarded as sent")
    users = [i for i, m in enumerate(request) if m.get("role") == "user"
             and not OBSERVATIONS.is_observation(request, i, task) and (i == task or not is_reminder(m))]
    if users and (request[users[0]] not in sent or request[users[-1]] not in sent):
        problems.append("the task or the latest user turn was not forwarded verbatim")
    said = "\n".join(message_text(m) for m in sent if message_text(m).startswith(WORKSET_TAG))
    left_out = said.split(DROPPED_USERS, 1)[1] if DROPPED_USERS in said else ""
    for index in users:
        if request[index] not in sent and f"turn {index} [ref:" not in left_out:
            problems.append(f"the user's message at {index} was neither forwarded nor named as left out")
    text = flat(" ".join(shown_text(m) for m in sent))
    for fact in state.constraints:
        if flat(fact.value) not in text:
            problems.append(f"constraint missing: {fact.value[:80]!r}")
    for fact in state.pending:
        if flat(fact.key) not in text:
            problems.append(f"pending item missing: {fact.key[:80]!r}")
    return problems
