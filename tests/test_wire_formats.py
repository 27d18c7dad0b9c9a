"""Anthropic Messages and OpenAI Responses through workset, driven by their official SDKs against strict fake
providers (tests/fakewire.py): what reaches the provider must be valid for it (tool pairing, thinking signatures,
reasoning items byte for byte, at most four cache breakpoints), compaction must happen in either format, and
recall must stay inside the proxy."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import re

import anthropic
import httpx
import orjson
import pytest

from fakewire import (
    AnthropicReply,
    FakeAnthropic,
    FakeResponses,
    FunctionCall,
    OutputText,
    Reasoning,
    ResponsesReply,
    Text,
    Thinking,
    ToolUse,
)
from servers import ServerThread

pytestmark = pytest.mark.e2e

TASK = "Fix the parser in src/parse.py. Never edit the tests."
BASH = {"name": "Bash", "description": "run a shell command",
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}
SYSTEM = [{"type": "text", "text": "You are a coding agent."},
          {"type": "text", "text": "Work carefully.", "cache_control": {"type": "ephemeral"}}]


@pytest.fixture(scope="module")
def wire_fakes() -> Iterator[tuple[FakeAnthropic, FakeResponses, str, str]]:
    fa, fr = FakeAnthropic(), FakeResponses()
    with ServerThread(fa.app) as a_server, ServerThread(fr.app) as r_server:
        yield fa, fr, a_server.url, r_server.url


@pytest.fixture
def fakes(wire_fakes: tuple[FakeAnthropic, FakeResponses, str, str]) -> tuple[FakeAnthropic, FakeResponses]:
    wire_fakes[0].reset()
    wire_fakes[1].reset()
    return wire_fakes[0], wire_fakes[1]


@pytest.fixture
def wire_proxy(start_proxy: Any, wire_fakes: tuple[FakeAnthropic, FakeResponses, str, str]) -> Any:
    _, _, a_url, r_url = wire_fakes
    return start_proxy(r_url, upstream={"timeout_s": 5, "connect_timeout_s": 2, "anthropic_base": a_url})


def claude(proxy: Any, **headers: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=proxy.url, api_key="sk-cc", timeout=20, max_retries=0,
                               default_headers=headers)


def output(step: int, lines: int = 220) -> str:
    return "\n".join(f"tests/test_{step}.py::case_{n} PASSED  checksum {step * 1000 + n:08x}" for n in range(lines))


def claude_turns(steps: int) -> list[AnthropicReply]:
    return [AnthropicReply([Thinking(f"step {i}: run the next check"), Text(f"Running check {i}."),
                            ToolUse("Bash", {"command": f"pytest -k case_{i}"})]) for i in range(steps)]


def drive_claude(client: anthropic.Anthropic, model: str, steps: int,
                 stream: bool = False) -> tuple[list[dict[str, Any]], list[httpx.Headers]]:
    """An agent loop as Claude Code runs it: the assistant's blocks sent back as they came (thinking with its
    signature), each tool result in the next user message, the client's breakpoint on the last block."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": TASK}]}]
    headers: list[httpx.Headers] = []
    for step in range(steps):
        sent = [dict(m) for m in messages]
        last = dict(sent[-1])
        last["content"] = [*last["content"][:-1], {**last["content"][-1], "cache_control": {"type": "ephemeral"}}]
        sent[-1] = last
        kwargs = dict(model=model, max_tokens=1024, system=SYSTEM, tools=[BASH], messages=sent,
                      thinking={"type": "enabled", "budget_tokens": 1024})
        if stream:
            with client.messages.stream(**kwargs) as events:
                reply = events.get_final_message()
                headers.append(events.response.headers)
        else:
            raw = client.messages.with_raw_response.create(**kwargs)
            reply, _ = raw.parse(), headers.append(raw.headers)
        blocks = [block.model_dump(exclude_none=True) for block in reply.content]
        for block in blocks:
            block.pop("citations", None) if block.get("type") == "text" else None
        messages.append({"role": "assistant", "content": blocks})
        use = next((b for b in blocks if b["type"] == "tool_use"), None)
        if use is None:
            break
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": use["id"], "content": output(step)}]})
    return messages, headers


def breakpoints(body: dict[str, Any]) -> int:
    return orjson.dumps(body).count(b'"cache_control"')


# --- Anthropic Messages -----------------------------------------------------------------------------------------


def test_messages_plain_and_streamed_reach_the_provider_as_sent(wire_proxy: Any, fakes: Any) -> None:
    fa, _ = fakes
    fa.script(AnthropicReply([Thinking("think"), Text("hello")]), AnthropicReply([Text("streamed hello")]))
    with claude(wire_proxy) as client:
        raw = client.messages.with_raw_response.create(model="claude-test", max_tokens=64, system="be brief",
                                                       messages=[{"role": "user", "content": "hi"}])
        reply = raw.parse()
        with client.messages.stream(model="claude-test", max_tokens=64, messages=[
                {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
                {"role": "user", "content": "again"}]) as events:
            text = "".join(events.text_stream)
    assert [b.type for b in reply.content] == ["thinking", "text"] and reply.content[1].text == "hello"
    assert reply.content[0].signature == fa.sign("think")
    assert text == "streamed hello"
    assert raw.headers["x-workset-session"].startswith("s_") and float(raw.headers["x-workset-ms"]) >= 0
    first = fa.requests[0]
    assert first.path.startswith("/v1/messages") and first.headers["anthropic-version"]
    assert first.headers.get("authorization") == "Bearer sk-cc" or first.headers.get("x-api-key") == "sk-cc"
    assert first.body["system"] == "be brief" and first.body["max_tokens"] == 64
    assert fa.violations == []


def test_long_claude_run_is_compacted_validly_and_the_frozen_prefix_is_read_from_cache(
        wire_proxy: Any, fakes: Any) -> None:
    fa, _ = fakes
    fa.script(*claude_turns(16))
    with claude(wire_proxy, **{"x-claude-code-session-id": "cc-session-1"}) as client:
        _, headers = drive_claude(client, "small-claude", 16)
    assert fa.violations == []
    compacted = [i for i, h in enumerate(headers) if h.get("x-workset-compacted") == "1"]
    assert compacted, "a run of 16 big tool outputs under a 3,000-token budget must compact"
    bodies = [r.body for r in fa.requests]
    assert all(breakpoints(body) <= 4 for body in bodies)
    after = compacted[0] + 1
    assert after < len(bodies) and "[workset]" in orjson.dumps(bodies[compacted[0]]).decode()
    # the turn after a compaction reads the compacted prefix from the provider's cache
    assert fa.cache_reads[after] > 0
    # thinking blocks of the current tool-use turn reach the provider as signed
    last = bodies[-1]["messages"]
    turn = next(m for m in reversed(last) if m["role"] == "assistant")
    thinking = [b for b in turn["content"] if b["type"] == "thinking"]
    assert thinking and thinking[0]["signature"] == fa.sign(thinking[0]["thinking"])
    # every session id the proxy answered with is one session, named by Claude Code's header
    assert len({h["x-workset-session"] for h in headers}) == 1
    row = wire_proxy.engine.store.find_sessions("cc-session-1")
    assert row and row[0]["client_id"] == "cc-session-1"


def test_claude_streamed_run_with_recall_answered_inside_the_proxy(wire_proxy: Any, fakes: Any) -> None:
    fa, _ = fakes
    recalled: list[dict[str, Any]] = []

    def agent(body: dict[str, Any]) -> AnthropicReply:
        step = sum(1 for m in body["messages"] if m["role"] == "assistant")
        offered = any(t.get("name") == "workset_recall" for t in body.get("tools") or ())
        text = orjson.dumps(body["messages"]).decode()
        last = body["messages"][-1]["content"]
        answering = isinstance(last, list) and any(b.get("type") == "tool_result" and "recall-1" in
                                                   b.get("tool_use_id", "") for b in last)
        if answering:
            recalled.append(body)
            # thinking again: the client's next turn must start with this round's thinking, not the recall round's
            return AnthropicReply([Thinking("now I have it"), Text("Recalled it."), ToolUse("Bash", {"command": "make"})])
        if offered and not recalled and "[ref:" in text:
            ref = text.split("[ref:", 1)[1].split("]", 1)[0]
            return AnthropicReply([Thinking("need the old output"),
                                   ToolUse("workset_recall", {"ref": ref}, id="toolu_recall-1")])
        return AnthropicReply([Thinking(f"step {step}"), Text(f"Check {step}."),
                               ToolUse("Bash", {"command": f"pytest -k case_{step}"})])

    fa._default = agent  # every turn decides from the request
    with claude(wire_proxy) as client:
        messages, _ = drive_claude(client, "small-claude", 14, stream=True)
    assert fa.violations == []
    assert recalled, "the model asked for a ref once it was offered"
    seen = orjson.dumps(messages).decode()
    assert "workset_recall" not in seen and "toolu_recall-1" not in seen
    answer = recalled[0]["messages"][-1]["content"][0]["content"]
    assert "checksum" in answer  # the stored tool output, read back from the store


def test_count_tokens_counts_what_workset_would_forward(wire_proxy: Any, fakes: Any) -> None:
    fa, _ = fakes
    with claude(wire_proxy) as client:
        counted = client.messages.count_tokens(model="claude-test", messages=[{"role": "user", "content": "hi"}])
    assert counted.input_tokens > 0
    assert fa.requests[-1].path.startswith("/v1/messages/count_tokens")


def test_bad_messages_request_is_a_400_in_anthropics_shape(wire_proxy: Any, fakes: Any) -> None:
    reply = httpx.post(wire_proxy.url + "/v1/messages", timeout=10, headers={"x-api-key": "k"},
                       json={"model": "claude-test", "max_tokens": 5, "messages": [{"role": "robot", "content": "x"}]})
    assert reply.status_code == 400
    body = reply.json()
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert "role" in body["error"]["message"] and body["error"]["code"]
    assert fakes[0].requests == []


def test_subagent_is_its_own_session_linked_to_its_parent(wire_proxy: Any, fakes: Any) -> None:
    """Claude Code's subagent (the Agent tool) shares the session header and adds X-Claude-Code-Agent-Id."""
    fa, _ = fakes
    fa.script(AnthropicReply([ToolUse("Agent", {"prompt": "look around"})]), AnthropicReply([Text("found it")]),
              AnthropicReply([Text("the title")]))
    with claude(wire_proxy, **{"x-claude-code-session-id": "cc-parent"}) as client:
        main = client.messages.with_raw_response.create(
            model="claude-test", max_tokens=64, tools=[BASH], messages=[{"role": "user", "content": TASK}])
        sub = client.messages.with_raw_response.create(
            model="claude-test", max_tokens=64, system="You are a subagent.",
            messages=[{"role": "user", "content": "look around"}], extra_headers={"x-claude-code-agent-id": "a1"})
        side = client.messages.with_raw_response.create(  # another conversation of the session, not a subagent
            model="claude-test", max_tokens=64, messages=[{"role": "user", "content": "Name this session."}])
    parent, child, other = (r.headers["x-workset-session"] for r in (main, sub, side))
    assert len({parent, child, other}) == 3
    store = wire_proxy.engine.store
    rows = {row["id"]: row for row in store.find_sessions("cc-parent") + store.find_sessions("a1")}
    assert rows[child]["parent_id"] == parent and rows[child]["client_id"] == "a1"
    assert rows[parent]["client_id"] == "cc-parent" and rows[parent]["parent_id"] is None
    assert rows[other]["parent_id"] is None


def test_codex_subagent_is_linked_to_the_thread_that_spawned_it(wire_proxy: Any, fakes: Any) -> None:
    """A Codex subagent keeps the session-id, has its own thread-id and names its parent's thread."""
    _, fr = fakes
    client = wire_proxy.client()
    headers = {"session-id": "sess-9", "thread-id": "sess-9"}
    main = client.responses.with_raw_response.create(model="fake-model", input=TASK, extra_headers=headers)
    child = client.responses.with_raw_response.create(
        model="fake-model", input="CHILD-TASK: look around",
        extra_headers={"session-id": "sess-9", "thread-id": "thread-child", "x-codex-parent-thread-id": "sess-9"})
    rows = {row["id"]: row for row in wire_proxy.engine.store.find_sessions("thread-child")}
    parent_id, child_id = main.headers["x-workset-session"], child.headers["x-workset-session"]
    assert rows[child_id]["parent_id"] == parent_id and fr.violations == []


# --- OpenAI Responses -------------------------------------------------------------------------------------------


def codex_turns(steps: int) -> list[ResponsesReply]:
    return [ResponsesReply([Reasoning(f"step {i}"), FunctionCall("exec_command", orjson.dumps(
        {"cmd": f"pytest -k case_{i}"}).decode())]) for i in range(steps)] + [ResponsesReply([OutputText("Done.")])]


def drive_codex(client: Any, model: str, steps: int, stream: bool = False) -> tuple[list[Any], list[Any]]:
    """A Codex-like loop: store false, the whole input each turn, the output items sent back as they came."""
    items: list[Any] = [{"type": "message", "role": "developer", "content": "You are Codex."},
                        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": TASK}]}]
    headers = []
    for step in range(steps + 1):
        kwargs = dict(model=model, input=items, store=False, include=["reasoning.encrypted_content"],
                      tools=[{"type": "function", "name": "exec_command", "parameters": {"type": "object"}}],
                      prompt_cache_key="thread-1", extra_headers={"session-id": "thread-1"})
        if stream:
            with client.responses.stream(**kwargs) as events:
                response = events.get_final_response()
                headers.append(events.response.headers if hasattr(events, "response") else {})
        else:
            raw = client.responses.with_raw_response.create(**kwargs)
            response, _ = raw.parse(), headers.append(raw.headers)
        produced = [item.model_dump(exclude_none=True) for item in response.output]
        items.extend(produced)
        calls = [item for item in produced if item["type"] == "function_call"]
        if not calls:
            break
        items.extend({"type": "function_call_output", "call_id": call["call_id"], "output": output(step)}
                     for call in calls)
    return items, headers


def test_responses_plain_and_streamed(wire_proxy: Any, fakes: Any) -> None:
    _, fr = fakes
    fr.script(ResponsesReply([OutputText("hello")]), ResponsesReply([Reasoning("r"), OutputText("streamed")]))
    client = wire_proxy.client()
    plain = client.responses.create(model="fake-model", input="hi", instructions="be brief")
    with client.responses.stream(model="fake-model", input=[{"role": "user", "content": "hi"}]) as events:
        text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
        final = events.get_final_response()
    assert plain.output_text == "hello" and text == "streamed" and final.output_text == "streamed"
    assert fr.requests[0].body["instructions"] == "be brief"
    assert fr.violations == []


def test_long_codex_run_is_compacted_with_reasoning_items_intact(wire_proxy: Any, fakes: Any) -> None:
    _, fr = fakes
    fr.script(*codex_turns(14))
    items, headers = drive_codex(wire_proxy.client(), "small-codex", 14)
    assert fr.violations == []  # reasoning items byte for byte, every call answered, outputs after their calls
    assert any(h.get("x-workset-compacted") == "1" for h in headers)
    assert any("[workset]" in orjson.dumps(r.body).decode() for r in fr.requests)
    assert len({h["x-workset-session"] for h in headers}) == 1
    assert max(fr.cached_tokens) > 0  # the stable prefix is a cache hit between compactions


def test_codex_streamed_run_with_recall_answered_inside_the_proxy(wire_proxy: Any, fakes: Any) -> None:
    _, fr = fakes
    recalled: list[dict[str, Any]] = []

    def agent(body: dict[str, Any]) -> ResponsesReply:
        items = body["input"]
        step = sum(1 for i in items if i.get("type") == "function_call_output")
        offered = any(t.get("name") == "workset_recall" for t in body.get("tools") or ())
        text = orjson.dumps(items).decode()
        if items and items[-1].get("type") == "function_call_output" and items[-1]["call_id"] == "call_recall":
            recalled.append(body)
            return ResponsesReply([OutputText("Recalled."), FunctionCall("exec_command", '{"cmd": "make"}')])
        if offered and not recalled and "[ref:" in text:
            ref = text.split("[ref:", 1)[1].split("]", 1)[0]
            return ResponsesReply([Reasoning("need it"), FunctionCall("workset_recall", orjson.dumps(
                {"ref": ref}).decode(), call_id="call_recall")])
        if step >= 14:
            return ResponsesReply([OutputText("Done.")])
        return ResponsesReply([Reasoning(f"step {step}"), FunctionCall("exec_command", orjson.dumps(
            {"cmd": f"pytest -k case_{step}"}).decode())])

    fr._default = agent
    items, _ = drive_codex(wire_proxy.client(), "small-codex", 14, stream=True)
    assert fr.violations == []
    assert recalled
    seen = orjson.dumps(items).decode()
    assert "workset_recall" not in seen and "call_recall" not in seen
    assert "checksum" in recalled[0]["input"][-1]["output"]


def test_previous_response_id_is_forwarded_as_sent(wire_proxy: Any, fakes: Any) -> None:
    _, fr = fakes
    fr.script(ResponsesReply([OutputText("one")]), ResponsesReply([OutputText("two")]))
    client = wire_proxy.client()
    first = client.responses.create(model="fake-model", input="remember 7")
    client.responses.create(model="fake-model", input="what number?", previous_response_id=first.id)
    assert fr.requests[1].body["previous_response_id"] == first.id and fr.requests[1].body["input"] == "what number?"
    assert fr.violations == []


def test_codex_compaction_trigger_is_answered_from_workset_and_its_item_read_back(wire_proxy: Any, fakes: Any) -> None:
    """Codex (provider named OpenAI, pointed at workset in front of another provider) compacts through the API:
    workset answers the compaction_trigger itself, and the compaction item, sent back, stands for the history."""
    _, fr = fakes
    fr.script(*codex_turns(4))
    items, _ = drive_codex(wire_proxy.client(), "fake-model", 4)
    asked = len(fr.requests)
    client = wire_proxy.client()
    tools = [{"type": "function", "name": "exec_command", "parameters": {"type": "object"}}]
    with client.responses.stream(model="fake-model", input=[*items, {"type": "compaction_trigger"}], store=False,
                                 tools=tools, extra_headers={"session-id": "thread-1"}) as events:
        compacted = events.get_final_response()
    assert len(fr.requests) == asked  # answered by workset: the provider is not asked
    [item] = [i.model_dump(exclude_none=True) for i in compacted.output]
    assert item["type"] == "compaction" and item["encrypted_content"].startswith("workset-handoff:")
    users = [i for i in items if i.get("role") in ("user", "developer")]
    recalled: list[str] = []

    def after_compaction(body: dict[str, Any]) -> ResponsesReply:
        last = body["input"][-1]
        if last.get("type") == "function_call_output":
            recalled.append(last["output"])
            return ResponsesReply([OutputText("Continuing.")])
        text = orjson.dumps(body["input"]).decode()
        ref = re.search(r"\[ref:([0-9a-f]{12})\]", text).group(1)  # the digest names every step by its ref
        return ResponsesReply([FunctionCall("workset_recall", orjson.dumps({"ref": ref}).decode())])

    fr._default = after_compaction
    after = client.responses.create(model="fake-model", input=[*users, item, {"role": "user", "content": "go on"}],
                                    store=False, tools=tools, extra_headers={"session-id": "thread-1"})
    assert after.output_text == "Continuing."
    seen = fr.requests[-2].body["input"]
    handed = [i for i in seen if i.get("role") == "user" and "[workset]" in orjson.dumps(i).decode()]
    assert handed and "[ref:" in orjson.dumps(handed).decode()
    # a ref the compaction item names is read from the store: the history Codex dropped is still recallable
    assert recalled and "No stored content" not in recalled[0] and "[ref:" in recalled[0]
    assert fr.violations == []
    reply = httpx.post(wire_proxy.url + "/v1/responses/compact", timeout=10, headers={"authorization": "Bearer k"},
                       json={"model": "fake-model", "input": items})
    output = reply.json()["output"]
    assert reply.status_code == 200 and output[-1]["type"] == "compaction"
    assert [i["role"] for i in output[:-1]] == ["user"]


def test_an_anthropic_model_list_entry_is_reachable_from_messages(start_proxy: Any, fakes: Any,
                                                                  wire_fakes: Any) -> None:
    """A model that model_list names as anthropic/... goes to that entry: its api_base, its key (workset pays,
    so the caller presents one of workset's own keys), the provider's model name."""
    fa, _ = fakes
    a_url = wire_fakes[2]
    proxy = start_proxy(model_list=[
        {"model_name": "team-claude", "litellm_params": {"model": "anthropic/claude-real", "api_base": a_url + "/v1",
                                                         "api_key": "sk-provider"}},
        {"model_name": "*", "litellm_params": {"model": "openai/*", "api_base": "http://127.0.0.1:9/v1"}}],
        server={"api_keys": ["sk-team"]})
    fa.script(AnthropicReply([Text("from the team's deployment")]))
    with anthropic.Anthropic(base_url=proxy.url, api_key="sk-team", timeout=20, max_retries=0) as client:
        reply = client.messages.create(model="team-claude", max_tokens=16, messages=[{"role": "user", "content": "hi"}])
        with pytest.raises(anthropic.AuthenticationError):
            anthropic.Anthropic(base_url=proxy.url, api_key="sk-other", timeout=20, max_retries=0).messages.create(
                model="team-claude", max_tokens=16, messages=[{"role": "user", "content": "hi"}])
    assert reply.content[0].text == "from the team's deployment"
    received = fa.requests[-1]
    assert received.headers["x-api-key"] == "sk-provider" and received.body["model"] == "claude-real"
    assert len(fa.requests) == 1  # the refused caller never reached the provider


def test_anthropic_stream_relay_keeps_usage_and_leads_with_thinking_after_a_recall_round() -> None:
    """Usage in message_delta is cumulative (it replaces message_start's, summed only across rounds); and when the
    round after a recall opens without thinking, the recall round's thinking leads the client's turn (with thinking
    on, the API wants the next request's last assistant turn to start with it)."""
    import asyncio

    from proxy import recall
    from proxy.anthropic import Relay
    from proxy.sse import event
    from proxy.upstream import Stream

    def message(blocks: list[dict[str, Any]], output_tokens: int) -> list[bytes]:
        out = [event("message_start", {"type": "message_start", "message": {
            "id": "msg_1", "type": "message", "role": "assistant", "content": [],
            "usage": {"input_tokens": 1000, "cache_read_input_tokens": 500, "output_tokens": 1}}})]
        for index, block in enumerate(blocks):
            start = {k: v for k, v in block.items() if k not in ("input", "thinking", "signature")}
            if block["type"] == "tool_use":
                start["input"] = {}
            if block["type"] == "thinking":
                start.update(thinking="", signature="")
            out.append(event("content_block_start", {"type": "content_block_start", "index": index,
                                                     "content_block": start}))
            if block["type"] == "thinking":
                out.append(event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": {
                    "type": "thinking_delta", "thinking": block["thinking"]}}))
                out.append(event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": {
                    "type": "signature_delta", "signature": block["signature"]}}))
            if block["type"] == "tool_use":
                out.append(event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": {
                    "type": "input_json_delta", "partial_json": orjson.dumps(block["input"]).decode()}}))
            out.append(event("content_block_stop", {"type": "content_block_stop", "index": index}))
        out.append(event("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {
            "input_tokens": 1000, "cache_read_input_tokens": 500, "output_tokens": output_tokens}}))
        return out + [event("message_stop", {"type": "message_stop"})]

    async def chunks(events: list[bytes]) -> Any:
        for chunk in events:
            yield chunk

    thinking = {"type": "thinking", "thinking": "read the old output", "signature": "sig-1"}
    first = message([thinking, {"type": "tool_use", "id": "toolu_r", "name": "workset_recall",
                                "input": {"ref": "abc"}}], 5)
    second = message([{"type": "tool_use", "id": "toolu_b", "name": "Bash", "input": {"command": "ls"}}], 7)
    asked: list[dict[str, Any]] = []

    async def ask(body: dict[str, Any]) -> Stream:
        asked.append(body)
        return Stream(chunks(second))

    async def resolve(arguments: str) -> str:
        return "recalled"

    async def run() -> list[tuple[str, dict[str, Any]]]:
        out = b"".join([chunk async for chunk in recall.stream(Stream(chunks(first)), {"messages": []}, ask,
                                                                resolve, 3, lambda texts: None, Relay())])
        return [(block.split(b"\n")[0][7:].decode(), orjson.loads(block.split(b"\n")[1][6:]))
                for block in out.split(b"\n\n") if block]

    events = asyncio.run(run())
    starts = [data["content_block"]["type"] for name, data in events if name == "content_block_start"]
    assert starts == ["thinking", "tool_use"]  # the recall call hidden, its thinking leading the Bash call
    assert [data["index"] for name, data in events if name == "content_block_start"] == [0, 1]
    [delta] = [data for name, data in events if name == "message_delta"]
    assert delta["usage"] == {"input_tokens": 2000, "cache_read_input_tokens": 1000, "output_tokens": 12}
    assert asked[0]["messages"][-1]["content"][0]["content"] == "recalled"


def test_a_responses_stream_the_provider_cuts_ends_with_a_responses_error_event(wire_proxy: Any, fakes: Any) -> None:
    _, fr = fakes
    fr.script(ResponsesReply([OutputText("a long answer that breaks off")], cut=True))
    with httpx.stream("POST", wire_proxy.url + "/v1/responses", timeout=20, headers={"authorization": "Bearer k"},
                      json={"model": "fake-model", "input": "hi", "stream": True}) as response:
        body = b"".join(response.iter_bytes())
    last = [block for block in body.split(b"\n\n") if block.strip()][-1]
    assert last.startswith(b"event: error\n")
    data = orjson.loads(last.split(b"data: ", 1)[1])
    assert data["type"] == "error" and data["code"] == "stream_cut"
