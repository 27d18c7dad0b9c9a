"""Deterministic extraction: what one message adds to the key-facts ledger and the actions table.

Pure functions, no model and no I/O: the same message and context always give the same Extraction, in the
same order. `extract` dispatches by role:

- user: constraints, an answer to a pending approval, checklist items, key facts;
- assistant: an approval request, plan items (checklists, announced numbered plans, todo-tool calls, labelled
  open items), its conclusions (decisions, failures and limits it learned, figures and conclusions it derived),
  key facts of its text and of its tool-call arguments;
- tool / function: the action (outcome and gist), a verification state for test runs, a rate limit or refusal
  an HTTP response shows, key facts (JSON fields of a JSON output, otherwise entities and `key: value` lines);
- system / developer and unknown roles: nothing (they are pinned and forwarded verbatim).

Bounded per message: only a window of the text (its head and tail, `ingest.extract_chars` in all) and half as
much of the tool-call arguments are read, and with a time cap (`Stages`) the stages left when it passes are skipped, in an
order that runs the cheap, valuable ones first. The whole message is still stored as evidence.
"""

from __future__ import annotations

from dataclasses import replace

from ..config import IngestSettings
from ..messages import message_text, tool_calls
from ..records import (
    APPROVAL,
    CANDIDATE,
    CHANGED,
    COLUMN,
    CONSTRAINT,
    DECISION,
    FAILURE,
    FIELD,
    FINDING,
    OUTCOME,
    PLAN,
    REASON,
    RULE,
    SAID,
    SCRIPT,
    VERIFICATION,
    Action,
    Extraction,
    Fact,
    Message,
    MessageContext,
    ToolCall,
)
from .actions import command_text, tool_action, tool_output_gist, verification
from .approvals import REQUESTED, approval_answer, approval_subject, stated_approvals, tool_approvals
from .changes import file_changes
from .checks import check_facts
from .claims import columns, outcomes, rules
from .evidence import Evidence, describe
from .constraints import constraints
from .facts import (
    MAX_ARGUMENT_STRINGS,
    argument_root,
    entities,
    head_and_tail,
    http_body,
    json_body,
    json_facts,
    parse_json,
    snippet,
    string_leaves,
    text_facts,
    window,
)
from .conclusions import change_reason, decisions, failures, findings, http_failures, prose_sentences
from .plans import plan_items
from .text import one_line
from .stages import Stages

__all__ = ["EXTRACT_CHARS", "Stages", "extract", "tool_output_gist"]

EXTRACT_CHARS = IngestSettings().extract_chars  # the window read of a message (config ingest.extract_chars)

MAX_ARGUMENT_FACTS = 20  # entities in one assistant message's tool-call arguments

_Triple = tuple[str, str, str]  # (kind, key, value)


def extract(message: Message, context: MessageContext, max_chars: int = EXTRACT_CHARS,
            stages: Stages | None = None) -> Extraction:
    """The facts and actions one message yields; never raises on odd content. Reads at most `max_chars` of the
    text (head and tail) and half as much of the tool-call arguments; with `stages`, runs only the stages its time
    cap leaves (the others are named in `stages.skipped`)."""
    if not isinstance(message, dict):
        return Extraction()
    stages = stages or Stages()
    role = message.get("role")
    full = message_text(message)
    text = window(full, max_chars)
    actions: tuple[Action, ...] = ()
    if role == "user":
        triples = _user(text, context, stages)
    elif role == "assistant":
        triples = _assistant(text, _bounded(_tool_calls(message), max_chars // 2), stages)
    elif role in ("tool", "function"):
        data = json_body(text)  # JSON when the window parses: the whole output, as a rule
        evidence = describe(full, context.call)  # what the output is: read once, for its gist and its claims
        action = tool_action(message, full, context, data, evidence)  # the gist reads bounded parts of the output
        actions = (action,)
        call = _bounded([context.call], max_chars // 2)[0] if context.call else None
        triples = _tool(text, data, call, action, stages, context.previous_assistant_text, evidence)
    else:
        return Extraction()
    source = "tool" if role in ("tool", "function") else str(role)
    return Extraction(facts=_facts(triples, context, source), actions=actions)


def changed_paths(message: Message, context: MessageContext, max_chars: int = EXTRACT_CHARS) -> list[str]:
    """The files a tool result's call changed (as extract records them, CHANGED), read from the call and the
    output's window alone: the few lookups the live tail needs for the newest results before they are settled."""
    if context.call is None or message.get("role") not in ("tool", "function"):
        return []
    text = window(message_text(message), max_chars)
    call = _bounded([context.call], max_chars // 2)[0]
    # no outcome: file_changes reads the exit status from the output itself (none shown: not a failure)
    return [key for kind, key, _ in file_changes(call, text, "") if kind == CHANGED]


def _bounded(calls: list[ToolCall], max_chars: int) -> list[ToolCall]:
    """The calls with their arguments cut to a window each, `max_chars` for all of them together."""
    share = max_chars // max(1, len(calls))
    return [call if len(call.arguments) <= share else replace(call, arguments=window(call.arguments, share))
            for call in calls]


def _tool_calls(message: Message) -> list[ToolCall]:
    """`tool_calls(message)` for well-formed entries only: `messages.tool_calls` expects `function` to be a dict
    and would raise on a malformed entry (a string or a list there), and extraction must never raise."""
    raw = message.get("tool_calls")
    entries = (
        [c for c in raw if isinstance(c, dict) and isinstance(c.get("function") or {}, dict)]
        if isinstance(raw, list)
        else []
    )
    legacy = message.get("function_call")
    return tool_calls({"tool_calls": entries, "function_call": legacy if isinstance(legacy, dict) else None})


def _facts(triples: list[_Triple], context: MessageContext, source: str) -> tuple[Fact, ...]:
    """Fact records, one per (kind, key): the first occurrence in the message wins."""
    seen: set[tuple[str, str]] = set()
    facts: list[Fact] = []
    for kind, key, value in triples:
        if not key or (kind, key) in seen:
            continue
        seen.add((kind, key))
        facts.append(Fact(kind=kind, key=key, value=value, turn=context.index, evidence_ref=context.ref, source=source))
    return tuple(facts)


def _user(text: str, context: MessageContext, stages: Stages) -> list[_Triple]:
    triples: list[_Triple] = stages.run("constraints", lambda: [(CONSTRAINT, key, value)
                                                              for key, value in constraints(text)], [])

    def approvals() -> list[_Triple]:
        answer = approval_answer(text, context.previous_assistant_text)
        return [(APPROVAL, subject, status) for subject, status in ([answer] if answer else []) + stated_approvals(text)]

    triples += stages.run("approval", approvals, [])
    triples += stages.run("plan", lambda: [(PLAN, key, status) for key, status in plan_items(text, [], "user")], [])
    triples += stages.run("facts", lambda: text_facts(head_and_tail(text)), [])
    return triples


def _assistant(text: str, calls: list[ToolCall], stages: Stages) -> list[_Triple]:
    triples: list[_Triple] = []
    subject = stages.run("approval", lambda: approval_subject(text), None) if text else None
    if subject is not None:
        triples.append((APPROVAL, subject, REQUESTED))
    triples += stages.run(
        "plan", lambda: [(PLAN, key, status) for key, status in plan_items(text, calls, "assistant")], [])
    said = stages.run("conclusions", lambda: prose_sentences(text), []) if text else []
    reason = change_reason(text) if said else ""
    if reason:
        triples.append((SAID, "latest", reason))
    triples += [(DECISION, key, value) for key, value in decisions(said)]
    triples += [(FAILURE, key, value) for key, value in failures(said)]
    triples += stages.run("findings", lambda: [(FINDING, key, value) for key, value in findings(text)], [])
    if text:
        triples += stages.run("facts", lambda: text_facts(head_and_tail(text)), [])
    triples += stages.run("argument facts", lambda: _argument_facts(calls), [])
    return triples


def _argument_facts(calls: list[ToolCall]) -> list[_Triple]:
    """Entities in the string values of tool-call arguments: the paths a command touches, the ids a call uses."""
    triples: list[_Triple] = []
    for call in calls:
        data = parse_json(call.arguments)
        strings = string_leaves(data, MAX_ARGUMENT_STRINGS) if data is not None else [call.arguments]
        for value in strings:
            value = head_and_tail(value)  # a heredoc can carry a whole file
            for entity in entities(value, MAX_ARGUMENT_FACTS - len(triples)):
                triples.append((entity.kind, entity.key, snippet(value, entity.start, entity.end)))
            if len(triples) >= MAX_ARGUMENT_FACTS:
                return triples
    return triples


def _tool(text: str, data: object, call: ToolCall | None, action: Action, stages: Stages, prose: str,
          evidence: Evidence) -> list[_Triple]:
    """`prose`: the words of the assistant message that made the call (why it changes what it changes);
    `evidence`: what the output is (a listing, a document...)."""
    triples: list[_Triple] = []
    checked = stages.run("verification", lambda: verification(call, text, action.outcome), None)
    if checked is not None:
        triples.append((VERIFICATION, checked[0], checked[1]))
    triples += stages.run("checks", lambda: check_facts(checked, text), [])
    changes = stages.run("changes", lambda: file_changes(call, text, action.outcome), [])
    triples += changes + (_reasons(changes, change_reason(prose)) if changes else [])
    triples += stages.run("http failures",
                          lambda: [(FAILURE, key, value) for key, value in http_failures(text, data, call)], [])
    # A tool output is evidence: what it claims (rules, outcomes) is a fact; its rows wait as candidates until the
    # dialogue singles one out (TaskState promotes them).
    subject = _subject(call, action)
    if data is not None:
        triples += stages.run("approvals", lambda: [(APPROVAL, subject, status)
                                                    for subject, status in tool_approvals(data)], [])
        named = argument_root(call.arguments) if call else ""  # the object the call asked about, if it names one
        fields = stages.run("facts", lambda: json_facts(data, named or action.tool, named_root=bool(named)), [])
        triples += [(FIELD, key, value) for key, value in fields]
        prose = "\n".join(string_leaves(data, MAX_ARGUMENT_STRINGS))
        triples += stages.run("claims", lambda: [(RULE, key, value) for key, value in rules(prose, evidence)], [])
        return triples
    body = head_and_tail(http_body(text))
    failed = action.outcome == "error"
    triples += stages.run("claims", lambda: [(RULE, key, value) for key, value in rules(body, evidence, failed)]
                          + [(OUTCOME, key, value) for key, value in outcomes(body, evidence, subject)], [])
    triples += stages.run("facts", lambda: [(CANDIDATE, f"{kind}:{key}", value)
                                            for kind, key, value in text_facts(body)]
                          + [(CANDIDATE, f"{COLUMN}:{token}", line) for token, line in columns(body)], [])
    return triples


def _reasons(changes: list[_Triple], reason: str) -> list[_Triple]:
    """Why each file a call changes was changed: the agent's sentence (kept from the first change of a file); ""
    when the call's message says nothing (the state takes what the agent said last, see SAID)."""
    paths = [key for kind, key, _ in changes if kind == CHANGED]
    paths += [line.split("\t", 1)[0] for kind, _, value in changes if kind == SCRIPT for line in value.splitlines()]
    return [(REASON, path, reason) for path in dict.fromkeys(paths) if path]


def _subject(call: ToolCall | None, action: Action) -> str:
    """What an output is about, for keys of the claims it makes: the call's command or main argument."""
    if call is None:
        return action.tool
    command = command_text(call.arguments) or argument_root(call.arguments)
    return one_line(f"{call.name} {command}".strip(), 80) if command else call.name
