"""Verified summaries of old history.

When compaction removes old turns, a model (policy `summarizer.model`, through the same upstream configuration)
writes what happened in them: conclusions, unresolved problems, the reasons behind decisions, approaches that
failed. It never blocks the agent: the job starts in the background once a session passes
`summarizer.precompute_ratio` of its budget, on the turns the next compaction would remove, so the summary is
ready when the trigger fires. The summary is anchored: the next job merges the previous summary with the turns
removed since, instead of summarising everything again.

A summary is checked before it is used: every number, id, path and amount in it must occur in the turns it
summarises, the previous summary or the task state (otherwise it is invented), and it must say something. If it
is not ready in time, fails, or is rejected, the extractive digest stands in and the next compaction tries again.
What must never be lost (constraints, pending items, decisions, approvals) lives in the deterministic task state,
which compaction verifies separately (`state_kept`).

Pure except for `Job`, which is plain data the server runs against the provider and the eval against a fake. Jobs
and their results live in the store, not in a process: any replica may run a session's job, and one whose replica
died is taken over once its lease (`summarizer.timeout_s`) ran out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .extract.names import names
from .extract.text import flat
from .messages import message_text
from .state import TaskState
from .workingset import Conversation

SYSTEM_PROMPT = (
    "You compress the history of an agent's work for the agent itself. Write what happened in the turns below: "
    "conclusions reached, problems still open, the reasons behind decisions, and approaches that failed and must "
    "not be repeated. Use only facts that appear in the turns or the previous summary; never invent numbers, ids, "
    "paths or amounts. Do not restate the task state, which is kept separately. Be brief: short bullet points."
)
FACTS_PROMPT = (
    " Then, if the tool outputs below state facts the task may turn on that the task state lacks (a rule a "
    "maintainer or a document sets, an outcome such as an error code, a first bad commit or an approval's status, a "
    "figure being compared), list them after a line `FACTS:`, one per line as `- [ref:ID] rule: <words>` or "
    "`- [ref:ID] outcome: <words>`, the words copied exactly from that output. List nothing you cannot quote."
)
FACTS_MARK = "FACTS:"
MAX_PROPOSED_FACTS = 10
MAX_QUOTE_CHARS = 300
_PROPOSAL = re.compile(r"^\s*[-*]\s*\[ref:(?P<ref>[0-9a-f]{6,64})\]\s*(?P<kind>rule|outcome)\s*:\s*(?P<quote>\S.*)$")
_OUTPUT_HEADER = re.compile(r"^\[turn (?P<turn>\d+)\] .* output \[ref:(?P<ref>[0-9a-f]{6,64})\]:$", re.M)
TOOL_OUTPUT_CHARS = 1500  # of each tool output shown to the summariser
_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)+(?![\w.])|(?<![\w.])\d{2,}(?![\w.])")
_AMOUNT = re.compile(r"[$€£¥]\s?\d[\d,]*(?:\.\d+)?")


@dataclass(frozen=True)
class Job:
    """A summary to write: of turns (start, through] on one branch, anchored on the previous summary."""

    session_id: str
    start: int  # the previous summary covers up to here (-1: none)
    through: int  # index of the last message summarised
    through_hash: str
    previous: str  # the previous summary, merged into this one
    source: str  # the turns as text, what the summary may draw on
    body: dict[str, Any]  # the chat request for the summariser model
    claim: str = ""  # who runs it now: the token of its claim in the store (a replica that took it over has its own)


@dataclass(frozen=True)
class Summary:
    """A finished job: the text, and whether it passed verification."""

    start: int
    through: int
    through_hash: str
    text: str
    check: str  # "ok", or why it was not used

    @property
    def usable(self) -> bool:
        return self.check == "ok"


def render_turns(conversation: Conversation, indices: Sequence[int]) -> str:
    """The removed turns as plain text for the summariser: who said what, tool calls, outputs cut short."""
    lines: list[str] = []
    for index in indices:
        message = conversation.messages[index]
        text = message_text(message)
        if conversation.is_output(index):  # a tool result, or an observation a text-based agent got
            if len(text) > TOOL_OUTPUT_CHARS:
                text = text[: TOOL_OUTPUT_CHARS // 2] + "\n…\n" + text[-TOOL_OUTPUT_CHARS // 2:]
            lines.append(f"[turn {index}] {conversation.tool_names[index] or 'tool'} output [ref:{conversation.refs[index]}]:"
                         f"\n{text}")
            continue
        calls = " ".join(f"{(c.get('function') or {}).get('name')}({(c.get('function') or {}).get('arguments')})"
                         for c in message.get("tool_calls") or () if isinstance(c, dict))
        lines.append(f"[turn {index}] {message.get('role')}: {text}" + (f"\n  calls: {calls}" if calls else ""))
    return "\n".join(lines)


def job_for(conversation: Conversation, session_id: str, removed: Sequence[int], previous: str, start: int,
            state_text: str, model: str, max_tokens: int, propose_facts: bool = False) -> Job | None:
    """The job summarising the removed turns after `start`, or None when there is nothing new to summarise."""
    fresh = [index for index in removed if index > start]
    if not fresh:
        return None
    source = render_turns(conversation, fresh)
    prompt = (f"Task state (kept separately, do not restate):\n{state_text}\n\n"
              + (f"Previous summary (merge it in):\n{previous}\n\n" if previous else "")
              + f"Turns to summarise:\n{source}")
    body = {"model": model, "max_tokens": max_tokens, "temperature": 0,
            "messages": [{"role": "system", "content": SYSTEM_PROMPT + (FACTS_PROMPT if propose_facts else "")},
                         {"role": "user", "content": prompt}]}
    through = fresh[-1]
    return Job(session_id, start, through, conversation.hashes[through], previous, source, body)


@dataclass(frozen=True)
class Proposal:
    """A fact the summariser proposed and the output it cites holds word for word."""

    kind: str  # "rule" | "outcome" (records.RULE, records.OUTCOME)
    quote: str
    ref: str
    turn: int


def split_facts(text: str) -> tuple[str, list[str]]:
    """The summary, and the lines after its `FACTS:` line (none when there is no such line)."""
    head, mark, tail = text.partition("\n" + FACTS_MARK)
    if not mark and text.startswith(FACTS_MARK):
        head, tail = "", text[len(FACTS_MARK):]
    return head.rstrip(), [line for line in tail.splitlines() if line.strip()]


def proposed_facts(job: Job, lines: Sequence[str]) -> list[Proposal]:
    """The proposed facts whose words occur verbatim (spacing aside) in the output they cite, as the job showed
    it: a model may only point at what the system already holds, never add to it."""
    outputs: dict[str, tuple[int, str]] = {}
    headers = list(_OUTPUT_HEADER.finditer(job.source))
    for number, header in enumerate(headers):
        end = headers[number + 1].start() if number + 1 < len(headers) else len(job.source)
        outputs[header.group("ref")] = (int(header.group("turn")), flat(job.source[header.end():end]))
    found: list[Proposal] = []
    for line in lines:
        match = _PROPOSAL.match(line)
        if match is None or match.group("ref") not in outputs:
            continue
        quote = match.group("quote").strip().strip('"“”')
        turn, output = outputs[match.group("ref")]
        if len(quote) > MAX_QUOTE_CHARS or len(quote.split()) < 3 or flat(quote) not in output:
            continue
        found.append(Proposal(match.group("kind"), quote, match.group("ref"), turn))
        if len(found) >= MAX_PROPOSED_FACTS:
            break
    return found


def claims(text: str) -> set[str]:
    """What a summary asserts that could be invented: numbers, ids, paths, amounts."""
    found = set(names(text)) | {m.strip() for m in _AMOUNT.findall(text)}
    found |= {number for number in _NUMBER.findall(text)}
    return found


def verify(job: Job, text: str, state_text: str) -> str:
    """"ok", or why the summary must not be used."""
    if not text or not text.strip():
        return "rejected: empty"
    known = "\n".join((job.source, job.previous, state_text))
    invented = sorted(claim for claim in claims(text) if claim not in known)
    if invented:
        return "rejected: invented " + ", ".join(invented[:5])
    return "ok"


def state_kept(before: TaskState, state_text: str, task: int | None = None) -> list[str]:
    """What the state held before a compaction and its rendering no longer shows (must be empty); the constraints
    of the task message (index `task`) are forwarded with it, verbatim."""
    shown = flat(state_text).lower()
    missing: list[str] = []
    for fact in before.constraints:
        if fact.turn != task and flat(fact.value).lower() not in shown:
            missing.append(f"constraint: {fact.value[:80]}")
    for fact in before.pending:
        if flat(fact.key).lower() not in shown:
            missing.append(f"pending: {fact.key[:80]}")
    return missing


def summary_text(reply: Any) -> str:
    """The assistant text of a chat completion (dict), or ""."""
    try:
        content = reply["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return ""
    return content.strip() if isinstance(content, str) else ""


def anchored(previous: Summary | None, candidate: Summary | None, removed_through: int, hashes: Sequence[str]) -> Summary | None:
    """The summary the new epoch shows: the candidate when it is usable, continues the previous one and covers
    no more than the epoch removes; else the previous one (still valid for the turns it covers)."""
    if candidate is not None and candidate.usable and candidate.through <= removed_through and \
            candidate.through < len(hashes) and hashes[candidate.through] == candidate.through_hash and \
            candidate.start == (previous.through if previous else -1):
        return candidate
    return previous

