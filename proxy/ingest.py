"""Ingest: what workset learns from one new message, once. Pure: the store write happens at the edge."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from .extract import EXTRACT_CHARS, Stages, changed_paths, extract
from .extract.actions import MAX_GIST_CHARS, tool_output_gist
from .extract.names import message_names
from .messages import is_tool_result, message_text, tool_calls
from .observations import action_call
from .records import Extraction, Message, MessageContext, ToolCall



@dataclass(frozen=True)
class Extracted:
    extraction: Extraction
    tool: str  # tool results: the tool that was called
    gist: str  # tool results: one-line gist
    outcome: str  # tool results: ok | error
    evidence: str | None  # text stored under the message's ref
    names: tuple[str, ...]  # names in it (paths, identifiers) for the index of elided turns
    skipped: tuple[str, ...] = ()  # extraction stages left out because the message's time cap had passed


class CallLookup:
    """The assistant message a run of tool results answers, and its calls by id, found once for a whole loop over
    the messages: looked up result by result, k results of one call with k tool calls would cost k² steps (a
    hostile request of thousands of calls would stall the process)."""

    def __init__(self, messages: Sequence[Message]) -> None:
        self.messages = messages
        self._anchors: dict[int, int | None] = {}  # index -> its nearest assistant, tool results only between
        self._calls: dict[int, tuple[list[ToolCall], dict[str, ToolCall], str]] = {}

    def assistant(self, index: int) -> int | None:
        """The index of the nearest assistant message before `index` with only tool results between, or None."""
        path: list[int] = []
        found: int | None = None
        back = index - 1
        while back >= 0:
            if back + 1 in self._anchors:
                found = self._anchors[back + 1]
                break
            path.append(back + 1)
            if self.messages[back].get("role") == "assistant":
                found = back
                break
            if not is_tool_result(self.messages[back]):
                break
            back -= 1
        for at in path:
            self._anchors[at] = found
        return found

    def calls(self, assistant: int) -> tuple[list[ToolCall], dict[str, ToolCall], str]:
        """The assistant message's calls, in order and by id (the first of an id), and its text."""
        held = self._calls.get(assistant)
        if held is None:
            calls = tool_calls(self.messages[assistant])
            by_id: dict[str, ToolCall] = {}
            for call in calls:
                by_id.setdefault(call.id, call)
            held = self._calls[assistant] = (calls, by_id, message_text(self.messages[assistant]))
        return held


def context_for(messages: Sequence[Message], index: int, ref: str, first_user: int | None,
                observed: bool = False, lookup: CallLookup | None = None) -> MessageContext:
    """What an extractor may know of the messages before `index`: the call a tool result answers (for an
    observation sent in the user role, the command block before it), and the nearest assistant text (for answers
    to approval questions). Looks back only to the nearest assistant; a loop over many messages passes one
    `lookup` for all of them."""
    message = messages[index]
    lookup = lookup or CallLookup(messages)
    at = lookup.assistant(index)
    call: ToolCall | None = None
    if at is None:
        return MessageContext(index=index, ref=ref, call=None, previous_assistant_text="",
                              is_first_user=index == first_user)
    calls, by_id, text = lookup.calls(at)
    if observed:
        call = action_call(messages[at])
    elif is_tool_result(message):
        call_id = message.get("tool_call_id")
        call = by_id.get(call_id) if isinstance(call_id, str) else None
        if call is None and message.get("role") == "function" and calls:
            call = calls[-1]
    return MessageContext(index=index, ref=ref, call=call, previous_assistant_text=text,
                          is_first_user=index == first_user)


def tool_outcome(messages: Sequence[Message], index: int, first_user: int | None,
                 observed: bool = False, lookup: CallLookup | None = None) -> tuple[str, str, str]:
    """(tool, gist, outcome) of a tool result or observation: cheap, needed before the full extraction is."""
    context = context_for(messages, index, "", first_user, observed, lookup)
    tool = _tool_name(messages[index], context)
    outcome, gist = tool_output_gist(message_text(messages[index]), MAX_GIST_CHARS, context.call)
    return tool, gist, outcome


def extract_at(messages: Sequence[Message], index: int, ref: str, first_user: int | None,
               observed: bool = False, max_chars: int = EXTRACT_CHARS,
               deadline_ms: float | None = None) -> Extracted:
    """Everything deterministic extraction learns from messages[index] (its tokens are counted separately: the
    working set needs them at once, the rest can wait until the provider has the request). An observation (a
    tool output sent in the user role) is read as the tool output it is, never as the user's words.

    Bounded per message: extraction reads at most `max_chars` of the text (and half as much of the tool-call
    arguments), and once `deadline_ms` has passed its remaining stages are skipped and named in `skipped`. The
    request path passes config ingest.extract_ms; the default, no cap, keeps evaluations and tests the same on a
    busy machine (a time cap makes what is extracted depend on the machine's load). The evidence is the whole
    message."""
    return extract_message(messages[index], context_for(messages, index, ref, first_user, observed), observed,
                           max_chars, deadline_ms)


def extract_message(message: Message, context: MessageContext, observed: bool = False,
                    max_chars: int = EXTRACT_CHARS, deadline_ms: float | None = None) -> Extracted:
    """extract_at for a message whose context is known: plain data in and out, so it may run in another
    process (see proxy.extractors)."""
    stages = Stages.within(deadline_ms)
    message = _as_read(message, observed)
    extraction = extract(message, context, max_chars, stages)
    text = message_text(message)
    tool = gist = outcome = ""
    if is_tool_result(message):
        tool = _tool_name(message, context)
        action = extraction.actions[0] if extraction.actions else None
        outcome, gist = (action.outcome, action.gist) if action else tool_output_gist(text, MAX_GIST_CHARS, context.call)
    found = stages.run("names", lambda: message_names(message, text, max_chars), ())
    return Extracted(extraction, tool, gist, outcome, _evidence_text(message, text), found, tuple(stages.skipped))


MAX_NEWEST_RESULTS = 16  # results of one call read on the request path; the rest are read when settled


def newest_changes(messages: Sequence[Message], start: int, observed: Sequence[bool]) -> list[str]:
    """The files the newest tool results (those after the last assistant message, from index `start` on: not
    settled yet) changed, in order: what the live tail names before settling has read them into the state. At most
    the newest MAX_NEWEST_RESULTS are read."""
    found: list[str] = []
    lookup = CallLookup(messages)
    index = len(messages) - 1
    while index >= max(start, len(messages) - MAX_NEWEST_RESULTS):  # read on the request path: a few only
        seen = index < len(observed) and observed[index]
        if not (seen or is_tool_result(messages[index])):
            break
        context = context_for(messages, index, "", None, seen, lookup)
        found[:0] = [path for path in changed_paths(_as_read(messages[index], seen), context) if path not in found]
        index -= 1
    return found


def _tool_name(message: Message, context: MessageContext) -> str:
    return context.call.name if context.call else str(message.get("name") or "tool")


def evidence_of(message: Message, observed: bool = False) -> str | None:
    """What extract_message stores as the message's evidence, made on its own (a megabyte need not travel back
    from an extraction process)."""
    message = _as_read(message, observed)
    return _evidence_text(message, message_text(message))


def _as_read(message: Message, observed: bool) -> Message:
    """An observation (a tool output sent in the user role) is read as the tool output it is."""
    return {"role": "tool", "content": message.get("content")} if observed else message


def _evidence_text(message: Message, text: str) -> str | None:
    """What recall by ref returns: the text, with an assistant's tool calls spelled out."""
    calls = tool_calls(message) if message.get("role") == "assistant" else []
    if calls:
        text = "\n".join([text, *(f"{call.name}({call.arguments})" for call in calls)]).strip()
    return text or None
