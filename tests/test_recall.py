"""Recall by ref end to end: a scripted provider calls workset_recall; the proxy answers it from the store and asks
again; the client sees one ordinary response, streamed or not."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from fakeupstream import Completion, ToolCall

pytestmark = pytest.mark.e2e

REF = re.compile(r"\[ref:([0-9a-f]+)\]")
TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {}}}}]


def long_run(steps: int = 14, marker: str = "SECRET_VALUE_4471") -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."},
                                      {"role": "user", "content": "Find the config value. Never guess it."}]
    for step in range(steps):
        call_id = f"call_{step}"
        messages.append({"role": "assistant", "content": f"Step {step}.", "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": f"cat part{step}.txt"})}}]})
        text = f"header of part {step}\n" + ("filler text " * 120) + f"\nvalue = {marker}"
        messages.append({"role": "tool", "tool_call_id": call_id, "content": text})
    return messages


def placeholder_ref(body: dict[str, Any]) -> str:
    """The first ref the provider was shown for an elided tool output (in a placeholder or a digest line)."""
    for message in body["messages"]:
        for line in str(message.get("content")).splitlines():
            if "header of part" in line and REF.search(line):
                return REF.search(line).group(1)
    raise AssertionError("the first tool output was not elided with a ref")


def drive_to_compaction(client: Any, fake: Any, session: str, marker: str = "SECRET_VALUE_4471") -> list[dict[str, Any]]:
    """A run long enough for the small test policy to elide its first tool outputs."""
    messages = long_run(marker=marker)
    for end in range(4, len(messages) + 1, 2):
        client.chat.completions.create(model="small-test", messages=messages[:end], tools=TOOLS,
                                       extra_headers={"x-workset-session": session})
    placeholder_ref(fake.chat_requests()[-1].body)  # raises unless an output was elided
    return messages


def recall_then_answer(seen: dict[str, Any], ref: str | None = None) -> list[Any]:
    """Round 1: call workset_recall on the first placeholder's ref. Round 2: answer with what came back."""
    def ask(body: dict[str, Any]) -> Completion:
        assert any(t["function"]["name"] == "workset_recall" for t in body["tools"])
        seen["ref"] = ref or placeholder_ref(body)
        return Completion(content="Let me look that up. ",
                          tool_calls=[ToolCall("workset_recall", json.dumps({"ref": seen["ref"]}), "rc_1")])

    def answer(body: dict[str, Any]) -> Completion:
        result = body["messages"][-1]
        assert result["role"] == "tool" and result["tool_call_id"] == "rc_1"
        seen["recalled"] = result["content"]
        found = re.search(r"value = (\w+)", result["content"])
        return Completion(content=f"The value is {found.group(1) if found else 'unknown'}.")

    return [ask, answer]


def test_recall_is_answered_by_the_proxy_and_invisible_to_the_client(proxy: Any, fake: Any) -> None:
    client = proxy.client()
    messages = drive_to_compaction(client, fake, "recall-1")
    seen: dict[str, Any] = {}
    fake.script(*recall_then_answer(seen))
    before = len(fake.chat_requests())
    reply = client.chat.completions.create(model="small-test", messages=messages, tools=TOOLS,
                                           extra_headers={"x-workset-session": "recall-1"})
    message = reply.choices[0].message
    assert message.content == "The value is SECRET_VALUE_4471."
    assert not message.tool_calls and reply.choices[0].finish_reason == "stop"
    assert len(fake.chat_requests()) - before == 2  # one client call, two provider rounds
    assert "SECRET_VALUE_4471" in seen["recalled"] and f"[ref:{seen['ref']}]" in seen["recalled"]


def test_recall_in_a_stream_continues_the_same_stream(proxy: Any, fake: Any) -> None:
    client = proxy.client()
    messages = drive_to_compaction(client, fake, "recall-2")
    seen: dict[str, Any] = {}
    fake.script(*recall_then_answer(seen))
    stream = client.chat.completions.create(model="small-test", messages=messages, tools=TOOLS, stream=True,
                                            stream_options={"include_usage": True},
                                            extra_headers={"x-workset-session": "recall-2"})
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Let me look that up. The value is SECRET_VALUE_4471."
    assert not any(c.choices and c.choices[0].delta.tool_calls for c in chunks)
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["stop"]
    usage = [c.usage for c in chunks if c.usage]
    assert len(usage) == 1 and usage[0].prompt_tokens > 0  # both rounds, summed, reported once


def test_recall_alongside_the_agents_own_call_returns_the_agents_call(proxy: Any, fake: Any) -> None:
    client = proxy.client()
    messages = drive_to_compaction(client, fake, "recall-3")
    seen: dict[str, Any] = {}

    def both(body: dict[str, Any]) -> Completion:
        seen["ref"] = placeholder_ref(body)
        return Completion(tool_calls=[ToolCall("workset_recall", json.dumps({"ref": seen["ref"]}), "rc_9"),
                                      ToolCall("bash", json.dumps({"command": "ls"}), "own_1")])

    fake.script(both)
    reply = client.chat.completions.create(model="small-test", messages=messages, tools=TOOLS,
                                           extra_headers={"x-workset-session": "recall-3"})
    calls = reply.choices[0].message.tool_calls
    assert [c.function.name for c in calls] == ["bash"] and calls[0].id == "own_1"
    # the recall answer comes with the next request of the session
    follow = messages + [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "own_1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]},
        {"role": "tool", "tool_call_id": "own_1", "content": "part0.txt"}]
    client.chat.completions.create(model="small-test", messages=follow, tools=TOOLS,
                                   extra_headers={"x-workset-session": "recall-3"})
    tail = fake.chat_requests()[-1].body["messages"][-1]["content"]
    assert "SECRET_VALUE_4471" in tail and "workset_recall" in tail


def test_unknown_ref_and_another_sessions_ref_answer_not_found(proxy: Any, fake: Any) -> None:
    client = proxy.client()
    messages = drive_to_compaction(client, fake, "recall-a")
    fake.script(lambda body: Completion(content=placeholder_ref(body)))  # learn a ref of session A
    ref_of_a = client.chat.completions.create(model="small-test", messages=messages, tools=TOOLS,
                                              extra_headers={"x-workset-session": "recall-a"}).choices[0].message.content
    other = drive_to_compaction(client, fake, "recall-b", marker="OTHER_VALUE")
    for ref in (ref_of_a, "0123456789ab"):
        seen: dict[str, Any] = {}
        fake.script(*recall_then_answer(seen, ref=ref))
        reply = client.chat.completions.create(model="small-test", messages=other, tools=TOOLS,
                                               extra_headers={"x-workset-session": "recall-b"})
        assert "No stored content has ref" in seen["recalled"]
        assert "SECRET_VALUE_4471" not in seen["recalled"]
        assert reply.choices[0].message.content == "The value is unknown."


def test_a_model_that_keeps_calling_recall_gets_at_most_max_rounds() -> None:
    """Unit level: after max_rounds the tool is withdrawn; a model still calling it gets its text returned."""
    import asyncio

    import orjson

    from proxy import recall
    from proxy.upstream import Reply

    def reply(text: str) -> Reply:
        call = {"id": "r", "type": "function", "function": {"name": "workset_recall", "arguments": '{"query": "x"}'}}
        return Reply(200, orjson.dumps({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": text, "tool_calls": [call]}}], "usage": {"prompt_tokens": 10,
                                                                                     "completion_tokens": 1}}))

    asked: list[dict[str, Any]] = []

    async def ask(body: dict[str, Any]) -> Reply:
        asked.append(body)
        return reply(f"round {len(asked)}")

    body = recall.offer_tool({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    assert body is not None
    final, rounds = asyncio.run(recall.complete(reply("round 0"), body, ask, lambda args: "nothing", 2, lambda t: None))
    data = orjson.loads(final.body)
    assert rounds == 2 and len(asked) == 2
    assert "tools" not in asked[-1]  # the last round had no recall tool to call
    assert data["choices"][0]["message"]["content"] == "round 2" and "tool_calls" not in data["choices"][0]["message"]
    assert data["choices"][0]["finish_reason"] == "stop" and data["usage"]["prompt_tokens"] == 30
