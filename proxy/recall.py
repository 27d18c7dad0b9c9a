"""Recall by ref: the `workset_recall` tool.

When the working set holds refs, workset offers the model a `workset_recall` tool. A call `{"ref": "ID"}` gets the
stored content back; `{"query": "words"}` the best full-text matches (BM25) among the session's stored content,
each with its ref. The proxy answers these calls itself and asks the provider again, up to `recall.max_rounds`,
so the agent sees one ordinary response, streamed or not: text already streamed stays streamed and the
continuation follows in the same stream.

When the model calls `workset_recall` together with the agent's own tools, the agent's calls are returned at once
(they are what the agent is waiting for) and the recall is resolved anyway: its result is delivered with the next
request of the session, in the tail of the working set.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from .errors import sse_error
from .records import Message
from .store import Store
from .tokens import TokenCounter

RECALL_TOOL = "workset_recall"
RECALL_DEFINITION: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": RECALL_TOOL,
        "description": (
            "Get back content that the context proxy elided from this conversation. Nothing is lost: pass "
            '{"ref": "ID"} for a [ref:ID] shown in the context, or {"query": "words"} to search everything elided.'
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "ref": {"type": "string", "description": "an ID from a [ref:ID] marker"},
                "query": {"type": "string", "description": "words to search the elided content for"},
            },
        },
    },
}

Ask = Callable[[dict[str, Any]], Awaitable[Any]]  # sends a chat body upstream: Reply | Stream


def offer_tool(body: dict[str, Any]) -> dict[str, Any] | None:
    """The body with the recall tool added, or None when it cannot be offered: legacy `functions`, several
    choices (n > 1), or the client already defines a tool of that name."""
    if body.get("functions") or (body.get("n") or 1) != 1:
        return None
    tools = body.get("tools") or []
    if not isinstance(tools, list) or any(_tool_name(t) == RECALL_TOOL for t in tools):
        return None
    return {**body, "tools": [*tools, RECALL_DEFINITION]}


def withdraw_tool(body: dict[str, Any]) -> dict[str, Any]:
    """The body without the recall tool (the last round must answer)."""
    out = dict(body)
    tools = [t for t in body.get("tools") or [] if _tool_name(t) != RECALL_TOOL]
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


def _tool_name(tool: Any) -> str:
    return str(((tool or {}).get("function") or {}).get("name", "")) if isinstance(tool, dict) else ""


class Resolver:
    """Answers recall calls from the store, within one session (refs of other sessions are never found)."""

    def __init__(self, store: Store, counter: TokenCounter, session_id: str, max_tokens: int,
                 search_results: int = 3) -> None:
        self.store = store
        self.counter = counter
        self.session_id = session_id
        self.max_tokens = max_tokens
        self.search_results = search_results
        self.resolved: list[str] = []  # refs and queries answered, for the logs

    def __call__(self, arguments: str) -> str:
        try:
            parsed = orjson.loads(arguments or "{}")
        except orjson.JSONDecodeError:
            parsed = None
        if not isinstance(parsed, dict):
            return 'workset_recall takes {"ref": "ID"} or {"query": "words"}.'
        ref = str(parsed.get("ref") or "").strip().removeprefix("[ref:").removesuffix("]").strip()
        if ref:
            self.resolved.append(f"ref:{ref}")
            found = self.store.evidence(self.session_id, ref)
            if found is None:
                return f"No stored content has ref {ref} in this conversation."
            return self._cut(f"[ref:{ref}] {found.get('tool') or found.get('role')}:\n{found['content']}")
        query = str(parsed.get("query") or "").strip()
        if query:
            self.resolved.append(f"query:{query[:40]}")
            hits = self.store.search_evidence(self.session_id, query, self.search_results)
            if not hits:
                return f"Nothing stored in this conversation matches {query!r}."
            share = max(64, self.max_tokens // len(hits))
            return "\n\n".join(self._cut(f"[ref:{hit['ref']}] {hit.get('tool') or hit.get('role')}:\n{hit['content']}",
                                         share) for hit in hits)
        return 'workset_recall takes {"ref": "ID"} or {"query": "words"}.'

    def _cut(self, text: str, limit: int | None = None) -> str:
        head, dropped = self.counter.head(text, limit or self.max_tokens)
        return head + f"\n… ({dropped} more tokens: ask again with a narrower query)" if dropped else head


@dataclass
class Round:
    """What one recall round asked for."""

    calls: list[dict[str, Any]] = field(default_factory=list)  # the recall tool calls, as the model made them
    content: str = ""


def split_calls(calls: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(recall calls, the agent's own calls)."""
    recall = [c for c in calls if ((c or {}).get("function") or {}).get("name") == RECALL_TOOL]
    return recall, [c for c in calls if c not in recall]


def follow_up(body: dict[str, Any], content: str | None, calls: list[dict[str, Any]],
              resolve: Callable[[str], str]) -> dict[str, Any]:
    """The body for the next round: the model's recall calls and their results appended."""
    results: list[Message] = [
        {"role": "tool", "tool_call_id": call.get("id", ""), "content": resolve(str((call.get("function") or {})
                                                                                 .get("arguments", "")))}
        for call in calls
    ]
    asked: Message = {"role": "assistant", "content": content or None, "tool_calls": calls}
    return {**body, "messages": [*body["messages"], asked, *results]}


def add_usage(total: dict[str, Any] | None, usage: dict[str, Any] | None) -> dict[str, Any] | None:
    """Token usage summed over rounds: the client is told what the provider billed for its answer."""
    if not isinstance(usage, dict):
        return total
    if total is None:
        return dict(usage)
    out = dict(total)
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        if isinstance(usage.get(key), int):
            out[key] = int(out.get(key) or 0) + usage[key]
    return out


# --- a whole response ---------------------------------------------------------------------------------------------


async def complete(first: Any, body: dict[str, Any], ask: Ask, resolve: Callable[[str], str], max_rounds: int,
                   deliver_later: Callable[[list[str]], None]) -> tuple[Any, int]:
    """The final non-streamed reply after answering recall calls, and how many rounds that took."""
    reply, rounds, usage = first, 0, None
    while True:
        if getattr(reply, "status", 0) != 200:
            return reply, rounds
        try:
            data = orjson.loads(reply.body)
            message = data["choices"][0]["message"]
        except (orjson.JSONDecodeError, KeyError, IndexError, TypeError):
            return reply, rounds
        usage = add_usage(usage, data.get("usage"))
        recall, own = split_calls(message.get("tool_calls") or [])
        if not recall:
            break
        if own:  # the agent's calls go back now; the recall is resolved for the next request
            deliver_later([resolve(str((c.get("function") or {}).get("arguments", ""))) for c in recall])
            message["tool_calls"] = own
            break
        if rounds >= max_rounds:  # the tool was withdrawn and the model still calls it: answer with its text
            message.pop("tool_calls", None)
            data["choices"][0]["finish_reason"] = "stop"
            break
        rounds += 1
        body = follow_up(body, message.get("content"), recall, resolve)
        if rounds >= max_rounds:
            body = withdraw_tool(body)
        reply = await ask(body)
    if rounds or usage is not None:
        if usage is not None:
            data["usage"] = usage
        reply.body = orjson.dumps(data)
    return reply, rounds


# --- a stream -----------------------------------------------------------------------------------------------------


async def stream(first: Any, body: dict[str, Any], ask: Ask, resolve: Callable[[str], str], max_rounds: int,
                 deliver_later: Callable[[list[str]], None]) -> AsyncIterator[bytes]:
    """The client's stream across recall rounds: text is relayed as it comes; recall calls are held back, answered,
    and the next round's chunks follow in the same stream; one finish, one usage chunk, one [DONE] at the end.
    Whatever goes wrong ends the stream with an OpenAI-style error event, never silently."""
    try:
        async for chunk in _rounds(first, body, ask, resolve, max_rounds, deliver_later):
            yield chunk
    except Exception as error:  # a provider failure in a follow-up round, or a workset bug
        message = getattr(error, "message", None) or f"workset_recall round failed: {error.__class__.__name__}"
        yield sse_error(str(message), "upstream_error", "recall_failed")


async def _rounds(first: Any, body: dict[str, Any], ask: Ask, resolve: Callable[[str], str], max_rounds: int,
                  deliver_later: Callable[[list[str]], None]) -> AsyncIterator[bytes]:
    current, rounds, usage = first, 0, None
    while True:
        held = _Held()
        async for event in _events(current.chunks):
            out = held.take(event)
            if out is not None:
                yield out
            if held.failed:
                return
        usage = add_usage(usage, held.usage)
        if held.recall and not held.own and rounds < max_rounds:
            rounds += 1
            body = follow_up(body, held.content, held.recall, resolve)
            if rounds >= max_rounds:
                body = withdraw_tool(body)
            nxt = await ask(body)
            if not hasattr(nxt, "chunks"):  # the provider refused the follow-up: say so in the stream
                message = "upstream failed while answering a workset_recall round"
                yield sse_error(message, "upstream_error", "recall_failed")
                return
            current = nxt
            continue
        if held.recall and held.own:
            deliver_later([resolve(str((c.get("function") or {}).get("arguments", ""))) for c in held.recall])
        for chunk in held.finish:
            yield chunk
        if held.usage_chunk is not None:
            held.usage_chunk["usage"] = usage
            yield b"data: " + orjson.dumps(held.usage_chunk) + b"\n\n"
        yield b"data: [DONE]\n\n"
        return


class _Held:
    """One round of a stream: what is relayed at once, what is held back until the round ends."""

    def __init__(self) -> None:
        self.recall: list[dict[str, Any]] = []  # recall calls being assembled
        self.own: list[int] = []  # provider indexes of the agent's calls
        self.content = ""
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
            self.content += delta["content"]
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


async def _events(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The `data:` payloads of a server-sent-event byte stream, whatever the chunking."""
    buffer = b""
    async for chunk in chunks:
        buffer += chunk
        while True:
            cut = buffer.find(b"\n\n")
            if cut < 0:
                break
            block, buffer = buffer[:cut], buffer[cut + 2:]
            data = b"\n".join(line[5:].lstrip() for line in block.replace(b"\r\n", b"\n").split(b"\n")
                              if line.startswith(b"data:"))
            if data:
                yield data
    if buffer.strip().startswith(b"data:"):
        yield buffer.strip()[5:].lstrip()
