"""Recall by ref: the `workset_recall` tool.

workset offers the model a `workset_recall` tool (from the first request, or once the working set holds refs:
`recall.offer`). `{"ref": "ID"}` reads the
stored content a page at a time (`"page": N`), or by lines (`"lines": "120-180"`), or only its lines matching
`"query"`, each with a little context; `{"query": "words"}` alone finds the best full-text matches (BM25) among
the session's stored content and shows the matching passage of each, with its ref (proxy.passages picks them).
The ref of an assistant message reads its whole turn: its text and calls, then what each call returned, each
result headed with its own ref (the digest of removed turns often keeps only the assistant's ref in view).
The proxy answers these calls itself and asks the provider again, up to `recall.max_rounds`, so the agent sees
one ordinary response, streamed or not: text already streamed stays streamed and the continuation follows in
the same stream.

When the model calls `workset_recall` together with the agent's own tools, the agent's calls are returned at once
(they are what the agent is waiting for) and the recall is resolved anyway: its result is delivered with the next
request of the session, in the tail of the working set.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from . import passages
from .errors import sse_error
from .extract.text import one_line
from .messages import tool_calls, tool_name
from .observations import action_call
from .policy import DigestRules
from .records import Message
from .sse import events
from .storage import Answer, Scope, Store
from .tokens import TokenCounter

RECALL_TOOL = "workset_recall"
RECALL_DEFINITION: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": RECALL_TOOL,
        "description": (
            "Get back content the context proxy elided. {\"ref\": ID} reads a [ref:ID] page by page; with query, "
            "only its matching lines. {\"query\": \"words\"} alone searches all elided content."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "ref": {"type": "string", "description": "ID of a [ref:ID] marker"},
                "query": {"type": "string", "description": "words to find"},
                "page": {"type": "integer", "description": "page number, from 1"},
                "lines": {"type": "string", "description": "line range, e.g. 120-180"},
            },
        },
    },
}

Ask = Callable[[dict[str, Any]], Awaitable[Any]]  # sends a chat body upstream: Reply | Stream
Resolve = Callable[[str], Awaitable[str]]  # answers one recall call's arguments (from the store, off the event loop)


def offer_tool(body: dict[str, Any]) -> dict[str, Any] | None:
    """The body with the recall tool added, or None when it cannot be offered: legacy `functions`, several
    choices (n > 1), or the client already defines a tool of that name."""
    if body.get("functions") or (body.get("n") or 1) != 1:
        return None
    tools = body.get("tools") or []
    if not isinstance(tools, list) or any(tool_name(t) == RECALL_TOOL for t in tools):
        return None
    return {**body, "tools": [*tools, RECALL_DEFINITION]}


def withdraw_tool(body: dict[str, Any]) -> dict[str, Any]:
    """The body without the recall tool (the last round must answer)."""
    out = dict(body)
    tools = [t for t in body.get("tools") or [] if tool_name(t) != RECALL_TOOL]
    if tools:
        out["tools"] = tools
    else:
        out.pop("tools", None)
        out.pop("tool_choice", None)
        out.pop("parallel_tool_calls", None)
    choice = out.get("tool_choice")
    if isinstance(choice, dict) and (choice.get("function") or {}).get("name") == RECALL_TOOL:
        out.pop("tool_choice", None)
    return out


class Resolver:
    """Answers recall calls from the store, within one conversation's scope (see Scope: refs of other sessions,
    and of other conversations that share this one's beginning, are never found).

    A ref is read a page at a time, or by line range, or by the lines matching a query (see proxy.passages);
    a query alone finds the best documents by full text (BM25) and shows the passage of each that matches.
    The ref of an assistant message reads as its whole turn (see `whole_turn`).
    Every answer stays within `max_tokens` and says where it is and how to go on."""

    def __init__(self, store: Store, counter: TokenCounter, scope: Scope, max_tokens: int,
                 search_results: int = 3, context_lines: int = 2,
                 arguments_chars: int = DigestRules().arguments_chars) -> None:
        self.store = store
        self.scope = scope
        self.counter = counter
        self.max_tokens = max_tokens
        self.search_results = search_results
        self.context_lines = context_lines
        self.arguments_chars = arguments_chars  # of a call in the heading of its result, as the digest shows it
        self.resolved: list[str] = []  # refs and queries answered, for the logs

    def __call__(self, arguments: str) -> str:
        try:
            parsed = orjson.loads(arguments or "{}")
        except orjson.JSONDecodeError:
            parsed = None
        if not isinstance(parsed, dict):
            return USAGE
        ref = str(parsed.get("ref") or "").strip().removeprefix("[ref:").removesuffix("]").strip()
        query = str(parsed.get("query") or "").strip()
        if ref:
            found = self.store.evidence(self.scope, ref)
            if found is None:
                self.resolved.append(f"ref:{ref}")
                return f"No stored content has ref {ref} in this conversation."
            stored = _Stored(ref, str(found.get("tool") or found.get("role")), self._content(found))
            if query:
                self.resolved.append(f"ref:{ref}?{query[:40]}")
                return self._matches(stored, query)
            lines = _asked_lines(parsed)
            if lines is not None:
                self.resolved.append(f"ref:{ref}#L{lines[0]}")
                return self._lines(stored, *lines)
            page = _positive_int(parsed.get("page")) or 1
            self.resolved.append(f"ref:{ref}" + (f"#p{page}" if page > 1 else ""))
            return self._page(stored, page)
        if query:
            self.resolved.append(f"query:{query[:40]}")
            return self._search(query)
        return USAGE

    # --- one ref ---------------------------------------------------------------------------------------------

    def _content(self, found: dict[str, Any]) -> str:
        """What a ref reads: the stored content, or for an assistant message its whole turn."""
        if found.get("role") != "assistant" or not found.get("node"):
            return str(found["content"])
        turn = self.store.turn(self.scope, str(found["node"]))
        if turn is None:
            return str(found["content"])
        return whole_turn(str(found["content"]), turn.message, turn.answers, self.arguments_chars)

    def _page_tokens(self, stored: _Stored) -> int:
        """Room for content in a page: the answer less its header and the longest footer it can have."""
        most = str(2 * len(stored.content) + 1)  # lines, pieces and pages number at most this
        footer = _page_footer(stored.ref, f"lines {most}-{most}", most, int(most) - 1, int(most))
        return max(1, self.max_tokens - self.counter.text(stored.header() + footer) - 2)

    def _page(self, stored: _Stored, page: int) -> str:
        laid = passages.layout(stored.content, self._page_tokens(stored), self.counter)
        if page > len(laid.pages):
            return (f"[ref:{stored.ref}] has {_count(len(laid.pages), 'page')} ({_count(laid.lines, 'line')}); "
                    f"there is no page {page}.")
        start, end = laid.pages[page - 1]
        shown = laid.pieces[start:end]
        footer = _page_footer(stored.ref, passages.span(shown), str(laid.lines), page, len(laid.pages))
        return f"{stored.header()}\n{passages.render(shown)}" + (f"\n{footer}" if footer else "")

    def _lines(self, stored: _Stored, first: int, last: int | None) -> str:
        limit = self._page_tokens(stored)
        laid = passages.layout(stored.content, limit, self.counter)
        if first > laid.lines:
            return f"[ref:{stored.ref}] has {_count(laid.lines, 'line')}; line {first} is past its end."
        last = min(laid.lines, last if last is not None else laid.lines)
        first, last = max(1, min(first, last)), max(first, last)
        shown, whole = passages.in_range(laid.pieces, first, last, limit)
        if not shown:
            return f"[ref:{stored.ref}] has {_count(laid.lines, 'line')}; lines {first}-{last} hold nothing to show."
        where = f"{passages.span(shown)} of {laid.lines}"
        tail = shown[-1]
        if whole and last < laid.lines:
            following = _range(last + 1, min(laid.lines, 2 * last - first + 1))  # as many lines again
            footer = f'({where}, ask {{"ref": "{stored.ref}", "lines": "{following}"}} for more)'
        elif whole:
            footer = f"({where}: the end)"
        elif tail.part < tail.parts:  # cut inside a long line: its next part is on a page
            page = laid.page_of(laid.pieces.index(tail) + 1)
            footer = f'({where}, line {tail.line} in part; ask {{"ref": "{stored.ref}", "page": {page}}} for more)'
        else:
            footer = f'({where}; ask {{"ref": "{stored.ref}", "lines": "{_range(tail.line + 1, last)}"}} for the rest)'
        return f"{stored.header()}\n{passages.render(shown)}\n{footer}"

    def _matches(self, stored: _Stored, query: str) -> str:
        lines = len(passages.split_lines(stored.content))
        header = f"[ref:{stored.ref}] {stored.label}, {_count(lines, 'line')}; lines matching {query!r}:"
        passage = self._passage(stored.content, passages.query_words(query),
                                self.max_tokens - self.counter.text(header) - 1)
        if passage is None:
            pages = len(passages.layout(stored.content, self._page_tokens(stored), self.counter).pages)
            return (f"No line of [ref:{stored.ref}] ({stored.label}, {_count(lines, 'line')}, "
                    f"{_count(pages, 'page')}) matches {query!r}. Read it with {{\"ref\": \"{stored.ref}\", "
                    f"\"page\": 1}}, or try other words.")
        return f"{header}\n{passage}"

    def _passage(self, content: str, words: list[str], limit: int) -> str | None:
        """The best matching lines of `content` with their context, and a note of matches left out, within
        `limit` tokens; None when no line matches."""
        note_room = self.counter.text(_left_out(len(content), len(content))) + 1
        laid = passages.layout(content, max(1, limit - note_room), self.counter)
        ranked, partial = passages.matching(laid.pieces, words)
        if not ranked:
            return None
        chosen = passages.select(laid.pieces, ranked, self.context_lines, limit - note_room)
        note = _left_out(chosen.left_out, partial)
        return passages.render(chosen.pieces) + (f"\n{note}" if note else "")

    # --- the whole session -------------------------------------------------------------------------------------

    def _search(self, query: str) -> str:
        hits = self.store.search_evidence(self.scope, query, self.search_results)
        if not hits:
            return f"Nothing stored in this conversation matches {query!r}."
        words = passages.query_words(query)
        footer = f'(ask {{"ref": "ID", "query": {orjson.dumps(query).decode()}}} for more of one)'
        remaining = self.max_tokens - self.counter.text(footer) - 1
        parts: list[str] = []
        for index, hit in enumerate(hits):
            share = remaining // (len(hits) - index)  # what one result leaves unused goes to the next
            stored = _Stored(str(hit["ref"]), str(hit.get("tool") or hit.get("role")), hit["content"])
            lines = len(passages.split_lines(stored.content))
            header = f"[ref:{stored.ref}] {stored.label}, {_count(lines, 'line')}:"
            room = share - self.counter.text(header) - 1
            passage = self._passage(stored.content, words, room)
            if passage is None:  # found by stemming, not by the words as written: its start
                laid = passages.layout(stored.content, max(1, room), self.counter)
                passage = passages.render(passages.in_range(laid.pieces, 1, laid.lines, room)[0])
            part = f"{header}\n{passage}"
            remaining -= self.counter.text(part) + 2
            parts.append(part)
        return "\n\n".join([*parts, footer])


def whole_turn(text: str, message: Message, answers: Sequence[Answer], arguments_chars: int) -> str:
    """An assistant message's turn as one document: its text and calls (`text`, as stored), then the result of
    each call headed with the call and the result's own ref, "--- result of bash {...} [ref:OUT]". A call's result
    is the newest answer carrying its id (a text-based agent's command block is answered by its observation);
    a call without a stored result is left out."""
    calls = tool_calls(message)
    action = None if calls else action_call(message)
    parts = [text]
    unused = list(answers)
    for call in calls or ([action] if action else []):
        answer = next((a for a in unused if a.call_id == call.id), None)
        if answer is None:
            continue
        unused.remove(answer)
        called = " ".join(part for part in (call.name, one_line(call.arguments, arguments_chars)) if part)
        heading = f"--- result of {called} [ref:{answer.ref}]"
        parts.append(f"{heading}\n{answer.content or '(empty)'}")
    return "\n".join(parts)


USAGE = ('workset_recall takes {"ref": "ID"} (add "page": N or "lines": "A-B" to move, or "query": "words" for its '
         'matching lines) or {"query": "words"} to search everything stored.')


@dataclass(frozen=True)
class _Stored:
    """One stored output as recall shows it."""

    ref: str
    label: str  # the tool that produced it, or the message's role
    content: str

    def header(self) -> str:
        return f"[ref:{self.ref}] {self.label}:"


def _page_footer(ref: str, where: str, lines: str, page: int, pages: int) -> str:
    """Where a page is, and how to go on: "(lines 1-140 of 612, page 1 of 5; ask {...} for more)"."""
    if pages == 1:
        return ""  # the whole text: nothing to say
    if page == pages:
        return f"({where} of {lines}, page {page} of {pages}: the end)"
    return f'({where} of {lines}, page {page} of {pages}; ask {{"ref": "{ref}", "page": {page + 1}}} for more)'


def _left_out(unshown: int, partial: int) -> str:
    """What a query's answer leaves out: matches that did not fit, lines holding only some of the words."""
    parts = [f"{unshown} more matching lines did not fit" if unshown else "",
             f"{partial} lines hold only some of the words: ask with fewer words for them" if partial else ""]
    return f"({'; '.join(part for part in parts if part)})" if unshown or partial else ""


def _range(first: int, last: int) -> str:
    return str(first) if first == last else f"{first}-{last}"


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _positive_int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        number = int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None


def _asked_lines(arguments: dict[str, Any]) -> tuple[int, int | None] | None:
    """The line range asked for: "lines" ("120-180", "120-", 120) or start_line / end_line."""
    if arguments.get("lines") is not None:
        return passages.parse_lines(arguments["lines"])
    first = _positive_int(arguments.get("start_line"))
    last = _positive_int(arguments.get("end_line"))
    if first is None and last is None:
        return None
    return first or 1, last


def split_calls(calls: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(recall calls, the agent's own calls)."""
    recall = [c for c in calls if ((c or {}).get("function") or {}).get("name") == RECALL_TOOL]
    return recall, [c for c in calls if c not in recall]


def follow_up(body: dict[str, Any], content: str | None, calls: list[dict[str, Any]],
              answers: list[str]) -> dict[str, Any]:
    """The body for the next round: the model's recall calls and their answers appended."""
    results: list[Message] = [
        {"role": "tool", "tool_call_id": call.get("id", ""), "content": answer} for call, answer in zip(calls, answers)
    ]
    asked: Message = {"role": "assistant", "content": content or None, "tool_calls": calls}
    return {**body, "messages": [*body["messages"], asked, *results]}


def add_usage(total: dict[str, Any] | None, usage: dict[str, Any] | None) -> dict[str, Any] | None:
    """Token usage summed over rounds, whatever the wire format's field names (every count, nested ones too): the
    client is told what the provider billed for its answer."""
    if not isinstance(usage, dict):
        return total
    if total is None:
        return dict(usage)
    out = dict(total)
    for key, value in usage.items():
        before = out.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and isinstance(before, int):
            out[key] = before + value
        elif isinstance(value, dict) and isinstance(before, dict):
            out[key] = add_usage(before, value)
        else:
            out[key] = value
    return out


class Dialect(Protocol):
    """How one wire format carries tool calls in a whole (non-streamed) reply, for the recall rounds."""

    def calls(self, data: dict[str, Any]) -> tuple[list[str], bool]:
        """The arguments of each recall call in the reply, and whether the agent's own calls are there too. Raises
        KeyError, IndexError or TypeError when the reply is not one to read."""

    def own_only(self, data: dict[str, Any]) -> None:
        """Drop the recall calls from the reply: the agent's own calls go back now."""

    def text_only(self, data: dict[str, Any]) -> None:
        """The last round still called recall: drop its calls, the reply is the answer."""

    def follow_up(self, body: dict[str, Any], data: dict[str, Any], answers: list[str]) -> dict[str, Any]:
        """The request of the next round: the reply's recall calls and their answers appended."""

    def withdraw(self, body: dict[str, Any]) -> dict[str, Any]:
        """The request without the recall tool (the last round must answer)."""

    def final(self, data: dict[str, Any], earlier: list[dict[str, Any]]) -> None:
        """The last round's reply as the client gets it, knowing the recall rounds before it."""


class ChatDialect:
    """Chat completions: `choices[0].message.tool_calls`."""

    def calls(self, data: dict[str, Any]) -> tuple[list[str], bool]:
        recall, own = split_calls(data["choices"][0]["message"].get("tool_calls") or [])
        return [str((call.get("function") or {}).get("arguments", "")) for call in recall], bool(own)

    def own_only(self, data: dict[str, Any]) -> None:
        message = data["choices"][0]["message"]
        message["tool_calls"] = split_calls(message["tool_calls"])[1]

    def text_only(self, data: dict[str, Any]) -> None:
        data["choices"][0]["message"].pop("tool_calls", None)
        data["choices"][0]["finish_reason"] = "stop"

    def follow_up(self, body: dict[str, Any], data: dict[str, Any], answers: list[str]) -> dict[str, Any]:
        message = data["choices"][0]["message"]
        return follow_up(body, message.get("content"), split_calls(message["tool_calls"])[0], answers)

    def withdraw(self, body: dict[str, Any]) -> dict[str, Any]:
        return withdraw_tool(body)

    def final(self, data: dict[str, Any], earlier: list[dict[str, Any]]) -> None:
        return None


CHAT = ChatDialect()


async def answers(calls: list[str], resolve: Resolve) -> list[str]:
    """The answer to each recall call (its arguments), in order."""
    return [await resolve(arguments) for arguments in calls]


# --- a whole response ---------------------------------------------------------------------------------------------


async def complete(first: Any, body: dict[str, Any], ask: Ask, resolve: Resolve, max_rounds: int,
                   deliver_later: Callable[[list[str]], None], dialect: Dialect = CHAT) -> tuple[Any, int]:
    """The final non-streamed reply after answering recall calls, and how many rounds that took."""
    reply, rounds, usage, changed = first, 0, None, False
    earlier: list[dict[str, Any]] = []  # the replies of the recall rounds
    while True:
        if getattr(reply, "status", 0) != 200:
            return reply, rounds
        try:
            data = orjson.loads(reply.body)
            calls, own = dialect.calls(data)
        except (orjson.JSONDecodeError, KeyError, IndexError, TypeError, AttributeError):
            return reply, rounds
        usage = add_usage(usage, data.get("usage"))
        if not calls:
            break
        changed = True  # from here on the client gets a reply workset wrote
        if own:  # the agent's calls go back now; the recall is resolved for the next request
            deliver_later(await answers(calls, resolve))
            dialect.own_only(data)
            break
        if rounds >= max_rounds:  # the tool was withdrawn and the model still calls it: answer with its text
            dialect.text_only(data)
            break
        rounds += 1
        earlier.append(data)
        body = dialect.follow_up(body, data, await answers(calls, resolve))
        if rounds >= max_rounds:
            body = dialect.withdraw(body)
        reply = await ask(body)
    if rounds:
        dialect.final(data, earlier)
    if changed:  # an answer without recall calls (nearly every one) goes back as the provider's bytes
        if usage is not None:
            data["usage"] = usage
        reply.body = orjson.dumps(data)
    return reply, rounds


# --- a stream -----------------------------------------------------------------------------------------------------


class Relay(Protocol):
    """How one wire format's stream is relayed to the client across recall rounds: one object per client stream,
    holding what the rounds share (block or item numbering, usage so far)."""

    failed: bool  # the round's stream carried an error event: relayed, and the client's stream ends there

    def start(self) -> None:
        """A round begins (its provider stream is about to be read)."""

    def take(self, name: str, data: bytes) -> bytes | None:
        """What to send the client for one event of the round (None: held back or dropped)."""

    def end(self) -> bytes:
        """The round's stream ended: what was still held for the client."""

    def calls(self) -> tuple[list[str], bool]:
        """The arguments of the round's recall calls, and whether the agent's own calls are there too."""

    def follow_up(self, body: dict[str, Any], answers: list[str]) -> dict[str, Any]:
        """The next round's request: the round's answer and the recall answers appended."""

    def withdraw(self, body: dict[str, Any]) -> dict[str, Any]:
        """The request without the recall tool (the last round must answer)."""

    def close(self, recall_only: bool) -> bytes:
        """The events that end the client's stream, with the usage of every round (`recall_only`: the last round
        still called recall, and its answer stands as text)."""

    def error(self, message: str) -> bytes:
        """An error event ending the client's stream."""


async def stream(first: Any, body: dict[str, Any], ask: Ask, resolve: Resolve, max_rounds: int,
                 deliver_later: Callable[[list[str]], None], relay: Relay | None = None) -> AsyncIterator[bytes]:
    """The client's stream across recall rounds, in any wire format (`relay`; chat completions by default): what
    the model says is relayed as it comes; recall calls are held back, answered, and the next round follows in
    the same stream; one ending, usage summed. Whatever goes wrong ends the stream with an error event, never
    silently."""
    relay = relay or ChatRelay()
    current, rounds = first, 0
    try:
        while True:
            relay.start()
            async for name, data in events(current.chunks):
                out = relay.take(name, data)
                if out:
                    yield out
                if relay.failed:
                    return
            out = relay.end()
            if out:
                yield out
            calls, own = relay.calls()
            if calls and not own and rounds < max_rounds:
                rounds += 1
                body = relay.follow_up(body, await answers(calls, resolve))
                if rounds >= max_rounds:
                    body = relay.withdraw(body)
                nxt = await ask(body)
                if not hasattr(nxt, "chunks"):  # the provider refused the follow-up: say so in the stream
                    yield relay.error("upstream failed while answering a workset_recall round")
                    return
                current = nxt
                continue
            if calls and own:  # the agent's calls went out; the recall is answered with the next request
                deliver_later(await answers(calls, resolve))
            yield relay.close(bool(calls) and not own)
            return
    except Exception as error:  # a provider failure in a follow-up round, or a workset bug
        yield relay.error(str(getattr(error, "message", None) or
                              f"workset_recall round failed: {error.__class__.__name__}"))


class ChatRelay:
    """Chat completion chunks across recall rounds."""

    def __init__(self) -> None:
        self.held = _Held()
        self.usage: dict[str, Any] | None = None

    @property
    def failed(self) -> bool:
        return self.held.failed

    def start(self) -> None:
        self.held = _Held()

    def take(self, name: str, data: bytes) -> bytes | None:
        return self.held.take(data)

    def end(self) -> bytes:
        self.usage = add_usage(self.usage, self.held.usage)
        return b""

    def calls(self) -> tuple[list[str], bool]:
        return [str((call.get("function") or {}).get("arguments", "")) for call in self.held.recall], \
            bool(self.held.own)

    def follow_up(self, body: dict[str, Any], answers: list[str]) -> dict[str, Any]:
        return follow_up(body, "".join(self.held.texts), self.held.recall, answers)

    def withdraw(self, body: dict[str, Any]) -> dict[str, Any]:
        return withdraw_tool(body)

    def close(self, recall_only: bool) -> bytes:
        out = b"".join(self.held.finish)
        if self.held.usage_chunk is not None:
            self.held.usage_chunk["usage"] = self.usage
            out += b"data: " + orjson.dumps(self.held.usage_chunk) + b"\n\n"
        return out + b"data: [DONE]\n\n"

    def error(self, message: str) -> bytes:
        return sse_error(message, "upstream_error", "recall_failed")


class _Held:
    """One round of a stream: what is relayed at once, what is held back until the round ends."""

    def __init__(self) -> None:
        self.recall: list[dict[str, Any]] = []  # recall calls being assembled
        self.own: list[int] = []  # provider indexes of the agent's calls
        self.texts: list[str] = []  # the round's text deltas (joined once: a long answer is not copied per delta)
        self.finish: list[bytes] = []  # finish-reason chunks, sent once the round is known to be the last
        self.usage: dict[str, Any] | None = None
        self.usage_chunk: dict[str, Any] | None = None
        self.failed = False
        self._kinds: dict[int, str] = {}  # provider tool-call index -> "recall" | "own"
        self._remap: dict[int, int] = {}  # provider index of an agent call -> index the client sees
        self._recall_slot: dict[int, int] = {}  # provider index of a recall call -> position in self.recall

    def take(self, event: bytes) -> bytes | None:
        if event == b"[DONE]":
            return None
        try:
            chunk = orjson.loads(event)
        except orjson.JSONDecodeError:
            return b"data: " + event + b"\n\n"
        if not isinstance(chunk, dict) or "error" in chunk:
            self.failed = True
            return b"data: " + event + b"\n\n"
        if chunk.get("usage") and not chunk.get("choices"):
            self.usage, self.usage_chunk = chunk["usage"], chunk
            return None
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        choices = chunk.get("choices") or []
        if not choices:
            return b"data: " + event + b"\n\n"
        choice = choices[0]
        delta = choice.get("delta") or {}
        changed = False
        if isinstance(delta.get("content"), str):
            self.texts.append(delta["content"])
        if delta.get("tool_calls"):
            delta["tool_calls"] = self._own_deltas(delta["tool_calls"])
            if not delta["tool_calls"]:
                del delta["tool_calls"]
            changed = True
        finish = choice.get("finish_reason")
        if finish:
            if finish == "tool_calls" and not self.own:
                choice["finish_reason"] = "stop"  # only recall calls so far; a later round decides
            self.finish.append(b"data: " + orjson.dumps(chunk) + b"\n\n")
            return None
        if changed:
            if not delta and not choice.get("logprobs"):
                return None  # a recall call's delta: nothing for the client
            return b"data: " + orjson.dumps(chunk) + b"\n\n"
        return b"data: " + event + b"\n\n"

    def _own_deltas(self, deltas: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for delta in deltas:
            index = int(delta.get("index", 0))
            name = (delta.get("function") or {}).get("name")
            if index not in self._kinds:
                self._kinds[index] = "recall" if name == RECALL_TOOL else "own"
                if self._kinds[index] == "recall":
                    self.recall.append({"id": delta.get("id", ""), "type": "function",
                                        "function": {"name": RECALL_TOOL, "arguments": ""}})
                    self._recall_slot[index] = len(self.recall) - 1
                else:
                    self._remap[index] = len(self.own)
                    self.own.append(index)
            if self._kinds[index] == "recall":
                slot = self.recall[self._recall_slot[index]]
                slot["function"]["arguments"] += (delta.get("function") or {}).get("arguments") or ""
                if delta.get("id"):
                    slot["id"] = delta["id"]
            else:
                out.append({**delta, "index": self._remap[index]})
        return out
