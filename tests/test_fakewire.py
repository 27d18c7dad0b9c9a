"""The strict wire fakes (fakewire.py), driven over real HTTP by the official anthropic and openai SDKs and by httpx.

Each validation rule has a refused request and an accepted one beside it, so a rule that refuses everything fails.
"""

from __future__ import annotations

import copy
import json
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from fakewire import (
    AnthropicError,
    AnthropicReply,
    CustomToolCall,
    FakeAnthropic,
    FakeResponses,
    FunctionCall,
    OutputText,
    Reasoning,
    RedactedThinking,
    ResponsesError,
    ResponsesReply,
    Text,
    Thinking,
    ToolUse,
    cacheable_blocks,
    canonical,
)
from servers import ServerThread

pytestmark = pytest.mark.e2e

TIMEOUT = 10.0
MODEL = "claude-fake"
HEADERS = {"anthropic-version": "2023-06-01", "x-api-key": "k"}
READ_TOOL = {"name": "read", "description": "read a file", "input_schema": {"type": "object", "properties": {}}}


@pytest.fixture(scope="module")
def anthropic_server() -> Iterator[tuple[FakeAnthropic, str]]:
    fake = FakeAnthropic()
    with ServerThread(fake.app) as server:
        yield fake, server.url


@pytest.fixture
def fa(anthropic_server: tuple[FakeAnthropic, str]) -> FakeAnthropic:
    anthropic_server[0].reset()
    return anthropic_server[0]


@pytest.fixture
def a_url(anthropic_server: tuple[FakeAnthropic, str]) -> str:
    return anthropic_server[1]


@pytest.fixture
def claude(a_url: str) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=a_url, api_key="k", timeout=TIMEOUT, max_retries=0) as client:
        yield client


@pytest.fixture(scope="module")
def responses_server() -> Iterator[tuple[FakeResponses, str]]:
    fake = FakeResponses()
    with ServerThread(fake.app) as server:
        yield fake, server.url


@pytest.fixture
def fr(responses_server: tuple[FakeResponses, str]) -> FakeResponses:
    responses_server[0].reset()
    return responses_server[0]


@pytest.fixture
def r_url(responses_server: tuple[FakeResponses, str]) -> str:
    return responses_server[1]


@pytest.fixture
def oai(r_url: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=r_url + "/v1", api_key="k", timeout=TIMEOUT, max_retries=0) as client:
        yield client


def messages_body(messages: list[Any], **extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "max_tokens": 256, "messages": messages, **extra}


def post(url: str, body: Any, headers: dict[str, str] = HEADERS) -> httpx.Response:
    return httpx.post(url, json=body, headers=headers, timeout=TIMEOUT)


def sse_events(text: str) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for chunk in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in chunk.splitlines())
        events.append((lines["event"], json.loads(lines["data"])))
    return events


# --- FakeAnthropic: round trips with the SDK ---


def test_anthropic_plain_echo_is_a_full_message_and_recorded(fa: FakeAnthropic, claude: anthropic.Anthropic) -> None:
    m = claude.messages.create(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "hi"}])
    assert (m.id, m.type, m.role, m.model) == ("msg_1", "message", "assistant", MODEL)
    assert m.content[0].type == "text" and m.content[0].text == "echo: hi"
    assert (m.stop_reason, m.stop_sequence) == ("end_turn", None)
    assert m.usage.input_tokens > 0 and m.usage.output_tokens > 0
    assert (m.usage.cache_read_input_tokens, m.usage.cache_creation_input_tokens) == (0, 0)
    [rec] = fa.requests
    assert (rec.method, rec.path) == ("POST", "/v1/messages")
    assert "k" in (rec.headers.get("x-api-key"), rec.headers.get("authorization", "").removeprefix("Bearer "))
    assert "anthropic-version" in rec.headers
    assert rec.body["messages"] == [{"role": "user", "content": "hi"}] and json.loads(rec.raw) == rec.body
    assert fa.violations == []


def test_anthropic_beta_query_count_tokens_and_unknown_path(fa: FakeAnthropic, claude: anthropic.Anthropic,
                                                           a_url: str) -> None:
    # Claude Code's SDK sends ?beta=true (this SDK version's beta client may not); the route ignores the query.
    claude.messages.create(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "hi"}],
                           extra_query={"beta": "true"})
    counted = claude.messages.count_tokens(model=MODEL, messages=[{"role": "user", "content": "count me"}])
    assert counted.input_tokens == len(canonical(fa.requests[1].body)) // 4 > 0
    assert httpx.get(a_url + "/v1/models", headers=HEADERS, timeout=TIMEOUT).status_code == 404
    assert [r.path for r in fa.requests] == ["/v1/messages?beta=true", "/v1/messages/count_tokens", "/v1/models"]
    assert fa.violations == []


def test_anthropic_stream_assembles_thinking_signature_and_tool_input(fa: FakeAnthropic,
                                                                     claude: anthropic.Anthropic) -> None:
    fa.script(AnthropicReply([Thinking("let me look at the file"), Text("I will read it"),
                              ToolUse("read", {"path": "a.txt", "lines": [1, 2]})]))
    first = [{"role": "user", "content": "what is in a.txt?"}]
    thinking = {"type": "enabled", "budget_tokens": 1024}
    with claude.messages.stream(model=MODEL, max_tokens=2048, messages=first, tools=[READ_TOOL],
                                thinking=thinking) as stream:
        final = stream.get_final_message()
    think, text, use = final.content
    assert think.type == "thinking" and think.thinking == "let me look at the file"
    assert think.signature == fa.sign("let me look at the file")
    assert text.type == "text" and text.text == "I will read it"
    assert use.type == "tool_use" and (use.id, use.name, use.input) == ("toolu_1", "read", {"path": "a.txt", "lines": [1, 2]})
    assert final.stop_reason == "tool_use" and final.usage.output_tokens > 0

    # The SDK's blocks, sent back as the next turn, pass every rule (signature, pairing, kept thinking).
    second = first + [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in final.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "hello"}]},
    ]
    again = claude.messages.create(model=MODEL, max_tokens=2048, messages=second, tools=[READ_TOOL], thinking=thinking)
    assert again.content[0].type == "text" and fa.violations == []


def test_anthropic_raw_stream_has_the_real_event_sequence(fa: FakeAnthropic, a_url: str) -> None:
    fa.script(AnthropicReply([Thinking("hmm"), RedactedThinking(), Text("two words"), ToolUse("read", {"p": 1})]))
    r = post(a_url + "/v1/messages", messages_body([{"role": "user", "content": "go"}], stream=True))
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    events = sse_events(r.text)
    names = [name for name, _ in events]
    assert names[:2] == ["message_start", "ping"] and names[-2:] == ["message_delta", "message_stop"]
    assert all(name == data["type"] for name, data in events)
    start = events[0][1]["message"]
    assert start["content"] == [] and start["stop_reason"] is None and "input_tokens" in start["usage"]
    deltas = [d["delta"] for n, d in events if n == "content_block_delta"]
    kinds = [d["type"] for d in deltas]
    assert kinds.count("thinking_delta") >= 2 and kinds.count("text_delta") >= 2
    assert kinds.count("input_json_delta") >= 2 and kinds.count("signature_delta") == 1
    assert kinds.index("signature_delta") == max(i for i, k in enumerate(kinds) if k == "thinking_delta") + 1
    assert "".join(d["partial_json"] for d in deltas if d["type"] == "input_json_delta") == '{"p": 1}'
    starts = [d["content_block"] for n, d in events if n == "content_block_start"]
    assert [s["type"] for s in starts] == ["thinking", "redacted_thinking", "text", "tool_use"]
    assert starts[1]["data"]  # redacted thinking arrives whole
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use" and events[-2][1]["usage"]["output_tokens"] > 0


def test_anthropic_stream_error_event_and_scripted_errors(fa: FakeAnthropic, claude: anthropic.Anthropic) -> None:
    fa.script(
        AnthropicReply([Text("partial answer"), Text("never sent")],
                       stream_error=AnthropicError(529, "overloaded_error", "Overloaded")),
        AnthropicError(429, "rate_limit_error", "slow down", headers={"retry-after": "1"}),
        lambda body: AnthropicReply([Text(f"{len(body['messages'])} messages")]),
    )
    seen = []
    with pytest.raises(anthropic.APIStatusError, match="Overloaded"):
        for event in claude.messages.create(model=MODEL, max_tokens=64, stream=True,
                                            messages=[{"role": "user", "content": "hi"}]):
            seen.append(event.type)
    assert "content_block_stop" in seen and "message_stop" not in seen
    with pytest.raises(anthropic.RateLimitError) as caught:
        claude.messages.create(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "hi"}])
    assert caught.value.body == {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
    m = claude.messages.create(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "hi"}])
    assert m.content[0].text == "1 messages" and fa.pending() == 0 and fa.violations == []
    # Not streamed, a scripted mid-stream error is the HTTP answer.
    fa.script(AnthropicReply([Text("x")], stream_error=AnthropicError(529, "overloaded_error", "Overloaded")))
    with pytest.raises(anthropic.APIStatusError) as overloaded:
        claude.messages.create(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "hi"}])
    assert overloaded.value.status_code == 529


# --- FakeAnthropic: validation, each rule refused and passed ---

U = {"role": "user", "content": "hi"}
A = {"role": "assistant", "content": "hello"}
EPH = {"type": "ephemeral"}


def text(t: str, **extra: Any) -> dict[str, Any]:
    return {"type": "text", "text": t, **extra}


def use(tid: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": tid, "name": "read", "input": {}}


def result(tid: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tid, "content": "ok"}


# (rule, refused body, accepted body)
ANTHROPIC_CASES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("shape", {"max_tokens": 9, "messages": [U]}, messages_body([U])),
    ("shape", {**messages_body([U]), "max_tokens": "9"}, messages_body([U])),
    ("shape", messages_body([]), messages_body([U])),
    ("shape", messages_body([{"role": "system", "content": "x"}, U]), messages_body([U], system="x")),
    ("shape", messages_body([A, U]), messages_body([U, A])),
    ("shape", messages_body([{"role": "user", "content": [{"type": "video", "url": "x"}]}]),
     messages_body([{"role": "user", "content": [text("x")]}])),
    ("shape", messages_body([U], system=[{"type": "image", "source": {}}]), messages_body([U], system=[text("s")])),
    ("shape", messages_body([{"role": "user", "content": [{"type": "tool_use", "name": "x"}]}]),
     messages_body([U])),
    ("empty_text", messages_body([{"role": "user", "content": [text(" ")]}]), messages_body([{"role": "user", "content": [text("x")]}])),
    ("empty_content", messages_body([{"role": "user", "content": ""}, A]), messages_body([U, {"role": "assistant", "content": ""}])),
    ("tool_pairing", messages_body([U, {"role": "assistant", "content": [use("t1")]}, U]),
     messages_body([U, {"role": "assistant", "content": [use("t1")]}, {"role": "user", "content": [result("t1")]}])),
    ("tool_pairing", messages_body([U, {"role": "assistant", "content": [use("t1")]}, {"role": "user", "content": [result("t1"), result("t2")]}]),
     messages_body([U, {"role": "assistant", "content": [use("t1"), use("t2")]}, {"role": "user", "content": [result("t1"), result("t2")]}])),
    ("tool_pairing", messages_body([{"role": "user", "content": [result("t0")]}]), messages_body([U])),
    ("tool_result_order", messages_body([U, {"role": "assistant", "content": [use("t1")]}, {"role": "user", "content": [text("and"), result("t1")]}]),
     messages_body([U, {"role": "assistant", "content": [use("t1")]}, {"role": "user", "content": [result("t1"), text("and")]}])),
    ("tool_use_ids", messages_body([U, {"role": "assistant", "content": [use("t1")]}, {"role": "user", "content": [result("t1")]},
                                    {"role": "assistant", "content": [use("t1")]}, {"role": "user", "content": [result("t1")]}]),
     messages_body([U, {"role": "assistant", "content": [use("t1")]}, {"role": "user", "content": [result("t1")]},
                    {"role": "assistant", "content": [use("t2")]}, {"role": "user", "content": [result("t2")]}])),
    ("cache_control_count", messages_body([{"role": "user", "content": [text(f"b{i}", cache_control=EPH) for i in range(5)]}]),
     messages_body([{"role": "user", "content": [text(f"b{i}", cache_control=EPH) for i in range(4)]}])),
    ("cache_control_count", messages_body([{"role": "user", "content": [text(f"b{i}", cache_control=EPH) for i in range(3)]}],
                                          system=[text("s", cache_control=EPH)], tools=[{**READ_TOOL, "cache_control": EPH}]),
     messages_body([{"role": "user", "content": [text(f"b{i}", cache_control=EPH) for i in range(2)]}],
                   system=[text("s", cache_control=EPH)], tools=[{**READ_TOOL, "cache_control": EPH}])),
    ("cache_control_placement", messages_body([{"role": "user", "content": [text("", cache_control=EPH)]}]),
     messages_body([{"role": "user", "content": [text("x", cache_control=EPH)]}])),
    ("cache_control_shape", messages_body([{"role": "user", "content": [text("x", cache_control={"type": "persistent"})]}]),
     messages_body([{"role": "user", "content": [text("x", cache_control={"type": "ephemeral", "ttl": "1h"})]}])),
    ("cache_control_shape", messages_body([{"role": "user", "content": [text("x", cache_control={"type": "ephemeral", "ttl": "10m"})]}]),
     messages_body([{"role": "user", "content": [text("x", cache_control={"type": "ephemeral", "ttl": "5m"})]}])),
    ("cache_control_ttl_order", messages_body([U], system=[text("a", cache_control=EPH), text("b", cache_control={**EPH, "ttl": "1h"})]),
     messages_body([U], system=[text("a", cache_control={**EPH, "ttl": "1h"}), text("b", cache_control=EPH)])),
    ("tools", messages_body([U], tools=[{"name": "read"}]), messages_body([U], tools=[READ_TOOL])),
    ("tools", messages_body([U], tools=[READ_TOOL, READ_TOOL]),
     messages_body([U], tools=[READ_TOOL, {"type": "web_search_20250305", "name": "web_search"}])),
    ("tool_choice", messages_body([U], tools=[READ_TOOL], tool_choice={"type": "tool", "name": "write"}),
     messages_body([U], tools=[READ_TOOL], tool_choice={"type": "tool", "name": "read"})),
    ("tool_choice", messages_body([U], tools=[READ_TOOL], tool_choice={"type": "sometimes"}),
     messages_body([U], tools=[READ_TOOL], tool_choice={"type": "any", "disable_parallel_tool_use": True})),
    ("thinking_placement", messages_body([{"role": "user", "content": [{"type": "redacted_thinking", "data": "x"}, text("x")]}]),
     messages_body([U])),
]


@pytest.mark.parametrize(("rule", "refused", "accepted"), ANTHROPIC_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(ANTHROPIC_CASES)])
def test_anthropic_rule(fa: FakeAnthropic, a_url: str, rule: str, refused: dict[str, Any], accepted: dict[str, Any]) -> None:
    r = post(a_url + "/v1/messages", refused)
    assert r.status_code == 400, r.text
    error = r.json()
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert error["error"]["message"].startswith(f"{rule}: ")
    [violation] = fa.violations
    assert f"{rule}: " in violation and "/v1/messages" in violation
    ok = post(a_url + "/v1/messages", accepted)
    assert ok.status_code == 200, ok.text
    assert len(fa.violations) == 1


def test_anthropic_requires_the_version_header(fa: FakeAnthropic, a_url: str) -> None:
    assert post(a_url + "/v1/messages", messages_body([U]), headers={"x-api-key": "k"}).status_code == 400
    assert fa.violations[0].endswith("headers: anthropic-version: header is required")
    assert post(a_url + "/v1/messages", messages_body([U])).status_code == 200


def issued_turn(fa: FakeAnthropic, a_url: str, blocks: list[Any]) -> list[dict[str, Any]]:
    """Ask the fake for one scripted assistant turn; return the conversation so far with that turn in it."""
    fa.script(AnthropicReply(blocks))
    first = [{"role": "user", "content": "go"}]
    r = post(a_url + "/v1/messages", messages_body(first, tools=[READ_TOOL]))
    assert r.status_code == 200, r.text
    return first + [{"role": "assistant", "content": r.json()["content"]}]


def test_anthropic_thinking_signature_must_verify(fa: FakeAnthropic, a_url: str) -> None:
    turn = issued_turn(fa, a_url, [Thinking("private plan"), Text("done")])
    good = turn + [U]
    bad = copy.deepcopy(good)
    bad[1]["content"][0]["thinking"] = "private plan, edited"
    assert post(a_url + "/v1/messages", messages_body(bad)).status_code == 400
    foreign = copy.deepcopy(good)
    foreign[1]["content"][0]["signature"] = FakeAnthropic().sign("private plan")  # another fake's secret
    assert post(a_url + "/v1/messages", messages_body(foreign)).status_code == 400
    assert [v.split(": ")[1] for v in fa.violations] == ["thinking_signature"] * 2
    assert post(a_url + "/v1/messages", messages_body(good)).status_code == 200
    assert len(fa.violations) == 2


def test_anthropic_redacted_thinking_must_be_issued(fa: FakeAnthropic, a_url: str) -> None:
    turn = issued_turn(fa, a_url, [RedactedThinking(), Text("done")])
    good = turn + [U]
    bad = copy.deepcopy(good)
    bad[1]["content"][0]["data"] = bad[1]["content"][0]["data"][:-4] + "AAAA"
    assert post(a_url + "/v1/messages", messages_body(bad)).status_code == 400
    assert "redacted_thinking: " in fa.violations[0]
    assert post(a_url + "/v1/messages", messages_body(good)).status_code == 200


def test_anthropic_thinking_is_kept_in_the_current_tool_use_turn(fa: FakeAnthropic, a_url: str) -> None:
    turn = issued_turn(fa, a_url, [Thinking("plan"), RedactedThinking(), ToolUse("read", {})])
    answer = {"role": "user", "content": [result("toolu_1")]}
    thinking = {"thinking": {"type": "enabled", "budget_tokens": 1024}, "tools": [READ_TOOL]}
    stripped = copy.deepcopy(turn)
    stripped[1]["content"] = stripped[1]["content"][2:]
    reordered = copy.deepcopy(turn)
    reordered[1]["content"] = reordered[1]["content"][1:] + reordered[1]["content"][:1]
    for bad in (stripped, reordered):
        assert post(a_url + "/v1/messages", messages_body(bad + [answer], **thinking)).status_code == 400
    assert [v.split(": ")[1] for v in fa.violations] == ["thinking_preserved"] * 2
    # Without thinking enabled the stripped turn is fine; with it, the turn as issued is.
    assert post(a_url + "/v1/messages", messages_body(stripped + [answer], tools=[READ_TOOL])).status_code == 200
    assert post(a_url + "/v1/messages", messages_body(turn + [answer], **thinking)).status_code == 200
    assert len(fa.violations) == 2


def test_anthropic_thinking_blocks_refuse_cache_control(fa: FakeAnthropic, a_url: str) -> None:
    turn = issued_turn(fa, a_url, [Thinking("plan"), Text("done")])
    bad = copy.deepcopy(turn) + [U]
    bad[1]["content"][0]["cache_control"] = EPH
    assert post(a_url + "/v1/messages", messages_body(bad)).status_code == 400
    assert "cache_control_placement: " in fa.violations[0]
    good = copy.deepcopy(turn) + [U]
    good[1]["content"][1]["cache_control"] = EPH
    assert post(a_url + "/v1/messages", messages_body(good)).status_code == 200


# --- FakeAnthropic: prompt-cache simulation ---

SYSTEM = [text("You are a careful assistant. " * 20, cache_control=EPH)]


def conversation(turns: int) -> list[dict[str, Any]]:
    """user/assistant turns, with a breakpoint on the last user block only."""
    out: list[dict[str, Any]] = []
    for i in range(turns):
        out.append({"role": "user", "content": [text(f"question {i}: " + "words " * 30)]})
        out.append({"role": "assistant", "content": [text(f"answer {i}")]})
    out.append({"role": "user", "content": [text(f"question {turns}: " + "words " * 30, cache_control=EPH)]})
    return out


def test_anthropic_cache_hits_the_previous_turn_then_misses_when_an_early_block_changes(
    fa: FakeAnthropic, claude: anthropic.Anthropic
) -> None:
    first = claude.messages.create(model=MODEL, max_tokens=64, system=SYSTEM, messages=conversation(1))
    assert first.usage.cache_read_input_tokens == 0 and first.usage.cache_creation_input_tokens > 0
    assert fa.cache_hit_index() is None

    second_messages = conversation(2)
    second = claude.messages.create(model=MODEL, max_tokens=64, system=SYSTEM, messages=second_messages)
    blocks = cacheable_blocks(fa.requests[-1].body)
    # The previous breakpoint ("question 1", messages.2) now carries no cache_control but is found by lookback.
    assert fa.cache_hit_index() == 3 and blocks[3].path == "messages.2.content.0"
    assert fa.cache_hits[-1] is not None and fa.cache_hits[-1].path == "messages.2.content.0"
    assert second.usage.cache_read_input_tokens == sum(b.tokens for b in blocks[:4]) == fa.cache_reads[-1] > 0
    assert second.usage.cache_creation_input_tokens == sum(b.tokens for b in blocks[4:])
    assert second.usage.input_tokens == 0  # everything up to the last block is cached or written

    edited = copy.deepcopy(second_messages)
    edited[0]["content"][0]["text"] = "question 0, reworded"
    claude.messages.create(model=MODEL, max_tokens=64, system=SYSTEM, messages=edited)
    assert fa.cache_hit_index() == 0 and fa.cache_hits[-1].path == "system.0"  # only the system block still hits

    other_system = [text("Another system prompt", cache_control=EPH)]
    claude.messages.create(model=MODEL, max_tokens=64, system=other_system, messages=edited)
    assert fa.cache_reads[-1] == 0 and fa.cache_hit_index() is None
    assert fa.violations == []


def test_anthropic_cache_lookback_is_twenty_blocks(fa: FakeAnthropic, a_url: str) -> None:
    base = [{"role": "user", "content": [text("start", cache_control=EPH)]}]
    assert post(a_url + "/v1/messages", messages_body(base)).status_code == 200

    def grown(extra: int) -> list[dict[str, Any]]:
        blocks = [text("start")] + [text(f"more {i}") for i in range(extra)]
        blocks[-1] = {**blocks[-1], "cache_control": EPH}
        return [{"role": "user", "content": blocks}]

    assert post(a_url + "/v1/messages", messages_body(grown(20))).status_code == 200
    assert fa.cache_hit_index() == 0  # the breakpoint is 20 blocks after the cached one
    fa.reset()
    assert post(a_url + "/v1/messages", messages_body(base)).status_code == 200
    assert post(a_url + "/v1/messages", messages_body(grown(21))).status_code == 200
    assert fa.cache_hit_index() is None and fa.cache_reads == [0, 0]


# --- FakeResponses: round trips with the SDK ---


def test_responses_plain_echo_is_a_full_response(fr: FakeResponses, oai: openai.OpenAI) -> None:
    r = oai.responses.create(model="gpt-fake", input="hi", instructions="be brief")
    assert (r.id, r.object, r.status, r.model) == ("resp_1", "response", "completed", "gpt-fake")
    assert r.output_text == "echo: hi" and r.output[0].id == "msg_1"
    assert (r.instructions, r.store, r.previous_response_id, r.parallel_tool_calls) == ("be brief", True, None, True)
    assert r.usage is not None and r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens
    assert r.usage.input_tokens_details.cached_tokens == 0 and r.usage.output_tokens_details.reasoning_tokens == 0
    [rec] = fr.requests
    assert (rec.path, rec.body["input"], rec.headers["authorization"]) == ("/v1/responses", "hi", "Bearer k")
    assert fr.violations == [] and fr.cached_tokens == [0]


def test_responses_stream_events_and_the_sdk_final_response(fr: FakeResponses, oai: openai.OpenAI) -> None:
    fr.script(ResponsesReply([Reasoning("thinking it over"), OutputText("two words"),
                              FunctionCall("read", '{"path": "a.txt"}'), CustomToolCall("apply_patch", "*** Begin Patch")]))
    events = list(oai.responses.create(model="gpt-fake", input="go", stream=True))
    kinds = [e.type for e in events]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed"
    assert kinds.count("response.output_item.added") == kinds.count("response.output_item.done") == 4
    for kind in ("response.reasoning_summary_part.added", "response.reasoning_summary_text.done",
                 "response.reasoning_summary_part.done", "response.content_part.added", "response.output_text.done",
                 "response.content_part.done", "response.function_call_arguments.done",
                 "response.custom_tool_call_input.done"):
        assert kinds.count(kind) == 1, kind
    for kind in ("response.reasoning_summary_text.delta", "response.output_text.delta",
                 "response.function_call_arguments.delta", "response.custom_tool_call_input.delta"):
        assert kinds.count(kind) >= 2, kind
    final = events[-1].response
    reasoning, message, call, custom = final.output
    assert reasoning.type == "reasoning" and reasoning.id == "rs_1" and reasoning.encrypted_content
    assert reasoning.summary[0].text == "thinking it over"
    assert final.output_text == "two words"
    assert (call.id, call.call_id, call.name, call.arguments) == ("fc_1", "call_1", "read", '{"path": "a.txt"}')
    assert (custom.type, custom.call_id, custom.input) == ("custom_tool_call", "call_2", "*** Begin Patch")
    assert final.usage is not None and final.usage.output_tokens_details.reasoning_tokens > 0


def test_responses_stream_helper_and_replaying_the_output(fr: FakeResponses, oai: openai.OpenAI) -> None:
    fr.script(ResponsesReply([Reasoning("plan"), FunctionCall("read", '{"path": "a.txt"}')]))
    with oai.responses.stream(model="gpt-fake", input="read a.txt", store=False) as stream:
        final = stream.get_final_response()
    assert [o.type for o in final.output] == ["reasoning", "function_call"] and final.store is False
    # Stateless (store: false, as Codex does): replay reasoning with its encrypted_content, then the call's output.
    replay = [{"role": "user", "content": "read a.txt"}] + [o.model_dump(exclude_none=True) for o in final.output]
    replay.append({"type": "function_call_output", "call_id": final.output[1].call_id, "output": "hello"})
    r = oai.responses.create(model="gpt-fake", input=replay, store=False)
    assert r.output_text == "echo: read a.txt" and fr.violations == []


def test_responses_previous_response_id_chains_stored_history(fr: FakeResponses, oai: openai.OpenAI) -> None:
    fr.script(ResponsesReply([FunctionCall("read", "{}")]))
    first = oai.responses.create(model="gpt-fake", input="read")
    answer = [{"type": "function_call_output", "call_id": "call_1", "output": "hello"}]
    second = oai.responses.create(model="gpt-fake", input=answer, previous_response_id=first.id)
    assert second.previous_response_id == first.id and fr.violations == []
    stored = fr.stored(second.id)
    assert stored is not None and [i.get("type", "message") for i in stored] == [
        "message", "function_call", "function_call_output", "message"]
    unstored = oai.responses.create(model="gpt-fake", input="x", store=False)
    with pytest.raises(openai.BadRequestError) as caught:
        oai.responses.create(model="gpt-fake", input="y", previous_response_id=unstored.id)
    assert caught.value.code == "previous_response_not_found" and caught.value.param == "previous_response_id"
    assert len(fr.violations) == 1 and "previous_response: " in fr.violations[0]


def test_responses_failure_cut_and_scripted_errors(fr: FakeResponses, oai: openai.OpenAI) -> None:
    fr.script(
        ResponsesReply([OutputText("partial"), OutputText("never")], fail=ResponsesError(500, "server_error", "boom")),
        ResponsesReply([OutputText("partial"), OutputText("never")], cut=True),
        ResponsesError(429, "rate_limit_error", "slow down", "rate_limit_exceeded"),
        lambda body: ResponsesReply([OutputText(f"model {body['model']}")]),
    )
    events = list(oai.responses.create(model="gpt-fake", input="a", stream=True))
    assert events[-1].type == "response.failed" and events[-1].response.error.message == "boom"
    assert [e.type for e in events].count("response.output_item.done") == 1
    seen = []
    with pytest.raises(openai.APIConnectionError):
        for event in oai.responses.create(model="gpt-fake", input="b", stream=True):
            seen.append(event.type)
    assert "response.output_item.done" in seen and "response.completed" not in seen
    with pytest.raises(openai.RateLimitError) as caught:
        oai.responses.create(model="gpt-fake", input="c")
    assert caught.value.code == "rate_limit_exceeded"
    assert oai.responses.create(model="gpt-fake", input="d").output_text == "model gpt-fake"
    # Not streamed: the failure is the HTTP error, a cut is half a JSON body.
    fr.script(ResponsesReply([OutputText("x")], fail=ResponsesError(503, "server_error", "busy")),
              ResponsesReply([OutputText("x")], cut=True))
    with pytest.raises(openai.InternalServerError):
        oai.responses.create(model="gpt-fake", input="e")
    with pytest.raises(openai.APIConnectionError):
        oai.responses.create(model="gpt-fake", input="f")
    assert fr.violations == []


def test_responses_compact_models_and_unknown_paths(fr: FakeResponses, oai: openai.OpenAI, r_url: str) -> None:
    with pytest.raises(openai.NotFoundError):
        oai.responses.compact(model="gpt-fake", input="long history")
    compacted = {"id": "cmp_1", "object": "response.compaction", "created_at": 1,
                 "output": [{"type": "compaction", "id": "cmp_item_1", "encrypted_content": "opaque"}],
                 "usage": {"input_tokens": 9, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 1,
                           "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 10}}
    fr.script_compact(compacted)
    c = oai.responses.compact(model="gpt-fake", input="long history")
    assert c.id == "cmp_1" and c.output[0].type == "compaction"
    # The compaction item (opaque) is accepted as input.
    r = oai.responses.create(model="gpt-fake", input=[{"type": "compaction", "encrypted_content": "opaque"},
                                                      {"role": "user", "content": "next"}])
    assert r.output_text == "echo: next"
    assert [m.id for m in oai.models.list()] == ["fake-model"]
    assert httpx.get(r_url + "/v1/chat/completions", timeout=TIMEOUT).status_code == 404
    assert [(q.method, q.path) for q in fr.requests] == [
        ("POST", "/v1/responses/compact"), ("POST", "/v1/responses/compact"), ("POST", "/v1/responses"),
        ("GET", "/v1/models"), ("GET", "/v1/chat/completions")]
    assert fr.violations == []


# --- FakeResponses: validation, each rule refused and passed ---

UI = {"role": "user", "content": "hi"}


def fc(call_id: str, kind: str = "function_call") -> dict[str, Any]:
    if kind == "custom_tool_call":
        return {"type": kind, "call_id": call_id, "name": "patch", "input": "x"}
    return {"type": kind, "call_id": call_id, "name": "read", "arguments": "{}"}


def fco(call_id: str, kind: str = "function_call_output") -> dict[str, Any]:
    return {"type": kind, "call_id": call_id, "output": "ok"}


def rbody(input: Any, **extra: Any) -> dict[str, Any]:
    return {"model": "gpt-fake", "input": input, **extra}


RESPONSES_CASES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("shape", {"input": "hi"}, rbody("hi")),
    ("shape", rbody(3), rbody([UI])),
    ("shape", rbody("hi", stream="yes"), rbody("hi", stream=False)),
    ("shape", rbody("hi", instructions=["x"]), rbody("hi", instructions="x")),
    ("tools", rbody("hi", tools=[{"name": "read"}]), rbody("hi", tools=[{"type": "function", "name": "read"}])),
    ("input_item", rbody([{"type": "bogus"}]), rbody([{"type": "message", "role": "user", "content": "hi"}])),
    ("input_item", rbody([{"role": "tool", "content": "x"}]), rbody([{"role": "developer", "content": "x"}, UI])),
    ("input_item", rbody([{"role": "user", "content": [{"type": "text", "text": "chat-style part"}]}]),
     rbody([{"role": "user", "content": [{"type": "input_text", "text": "x"}]},
            {"role": "assistant", "content": [{"type": "output_text", "text": "y"}]}, UI])),
    ("input_item", rbody([UI, {"type": "function_call", "call_id": "c1", "name": "read"}]), rbody([UI, fc("c1")])),
    ("tool_output_without_call", rbody([UI, fco("c1")]), rbody([UI, fc("c1"), fco("c1")])),
    ("tool_output_without_call", rbody([UI, fco("c1"), fc("c1")]), rbody([UI, fc("c1"), fco("c1"), UI])),
    ("tool_output_without_call", rbody([UI, fc("c1"), fco("c1", "custom_tool_call_output")]),
     rbody([UI, fc("c1", "custom_tool_call"), fco("c1", "custom_tool_call_output")])),
    ("call_without_output", rbody([UI, fc("c1"), UI]), rbody([UI, fc("c1"), fc("c2")])),
    ("call_without_output", rbody([UI, fc("c1", "custom_tool_call"), UI]),
     rbody([UI, fc("c1", "custom_tool_call"), fco("c1", "custom_tool_call_output"), UI])),
    ("reasoning_unknown", rbody([UI, {"type": "reasoning", "id": "rs_999", "summary": []}, UI]), rbody([UI])),
    ("previous_response", rbody("hi", previous_response_id="resp_999"), rbody("hi")),
]


@pytest.mark.parametrize(("rule", "refused", "accepted"), RESPONSES_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(RESPONSES_CASES)])
def test_responses_rule(fr: FakeResponses, r_url: str, rule: str, refused: dict[str, Any], accepted: dict[str, Any]) -> None:
    r = post(r_url + "/v1/responses", refused, headers={})
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["type"] == "invalid_request_error" and set(error) == {"message", "type", "param", "code"}
    assert error["message"].startswith(f"{rule}: ")
    [violation] = fr.violations
    assert f"{rule}: " in violation and "/v1/responses" in violation
    ok = post(r_url + "/v1/responses", accepted, headers={})
    assert ok.status_code == 200, ok.text
    assert len(fr.violations) == 1


def reasoned_turn(fr: FakeResponses, r_url: str, items: list[Any], **extra: Any) -> list[dict[str, Any]]:
    fr.script(ResponsesReply(items))
    r = post(r_url + "/v1/responses", rbody([UI], **extra), headers={})
    assert r.status_code == 200, r.text
    return [UI] + r.json()["output"]


def refused_rule(fr: FakeResponses, r_url: str, body: dict[str, Any]) -> str:
    before = len(fr.violations)
    r = post(r_url + "/v1/responses", body, headers={})
    assert r.status_code == 400, r.text
    assert len(fr.violations) == before + 1
    return r.json()["error"]["message"].split(": ")[0]


def test_responses_reasoning_encrypted_content_must_be_byte_identical(fr: FakeResponses, r_url: str) -> None:
    turn = reasoned_turn(fr, r_url, [Reasoning("plan"), OutputText("done")], store=False)
    good = turn + [UI]
    bad = copy.deepcopy(good)
    bad[1]["encrypted_content"] = bad[1]["encrypted_content"][:-4] + "AAAA"
    assert refused_rule(fr, r_url, rbody(bad, store=False)) == "reasoning_encrypted"
    missing = copy.deepcopy(good)
    del missing[1]["encrypted_content"]  # not stored, so the fake cannot find it by id alone
    assert refused_rule(fr, r_url, rbody(missing, store=False)) == "reasoning_unknown"
    assert post(r_url + "/v1/responses", rbody(good, store=False), headers={}).status_code == 200


def test_responses_reasoning_needs_its_following_item(fr: FakeResponses, r_url: str) -> None:
    turn = reasoned_turn(fr, r_url, [Reasoning("plan"), FunctionCall("read", "{}")])
    answered = turn + [fco("call_1")]
    assert refused_rule(fr, r_url, rbody([UI, turn[1], UI])) == "reasoning_following"
    assert refused_rule(fr, r_url, rbody([UI, turn[1]])) == "reasoning_following"
    assert refused_rule(fr, r_url, rbody([UI, turn[1], fc("other"), fco("other")])) == "reasoning_following"
    assert post(r_url + "/v1/responses", rbody(answered), headers={}).status_code == 200
    # Stored, so the id alone is enough; a message follower may come back without its id.
    turn2 = reasoned_turn(fr, r_url, [Reasoning("plan"), OutputText("done")])
    bare = {k: v for k, v in turn2[2].items() if k != "id"}
    short = [UI, {"type": "reasoning", "id": turn2[1]["id"], "summary": []}, bare, UI]
    assert post(r_url + "/v1/responses", rbody(short), headers={}).status_code == 200
    assert len(fr.violations) == 3


# --- FakeResponses: prompt-cache simulation ---

LONG = "Follow the repository's conventions. " * 160  # about 1,500 tokens


def test_responses_cache_grows_with_the_conversation_and_misses_on_an_early_change(
    fr: FakeResponses, oai: openai.OpenAI
) -> None:
    history: list[Any] = [{"role": "user", "content": "first question " + "in detail " * 200}]
    r1 = oai.responses.create(model="gpt-fake", instructions=LONG, input=history, prompt_cache_key="s1")
    assert r1.usage is not None and r1.usage.input_tokens_details.cached_tokens == 0
    history += [o.model_dump(exclude_none=True) for o in r1.output] + [{"role": "user", "content": "second"}]
    r2 = oai.responses.create(model="gpt-fake", instructions=LONG, input=history, prompt_cache_key="s1")
    assert r2.usage is not None
    cached = r2.usage.input_tokens_details.cached_tokens
    assert cached >= 1024 and cached % 128 == 0 and cached <= r2.usage.input_tokens
    # Another key shares nothing; a changed early item keeps only the instructions; changed instructions keep nothing.
    oai.responses.create(model="gpt-fake", instructions=LONG, input=history, prompt_cache_key="s2")
    edited = [{"role": "user", "content": "first question, reworded " + "in detail " * 200}] + history[1:]
    oai.responses.create(model="gpt-fake", instructions=LONG, input=edited, prompt_cache_key="s1")
    oai.responses.create(model="gpt-fake", instructions="short", input=history, prompt_cache_key="s1")
    assert fr.cached_tokens[2] == 0 and 1024 <= fr.cached_tokens[3] < cached and fr.cached_tokens[4] == 0
    # Without a prompt_cache_key, requests of one model share a cache.
    oai.responses.create(model="gpt-fake", instructions=LONG, input="a")
    oai.responses.create(model="gpt-fake", instructions=LONG, input="b")
    oai.responses.create(model="gpt-other", instructions=LONG, input="b")
    assert fr.cached_tokens[5:] == [0, fr.cached_tokens[6], 0] and fr.cached_tokens[6] >= 1024
    assert fr.violations == []


def test_cache_breakpoints_are_cache_control_keys_not_words() -> None:
    body = messages_body([{"role": "user", "content": [text("what does cache_control do?"), text("x", cache_control=EPH)]}])
    assert [b.breakpoint for b in cacheable_blocks(body)] == [False, True]
    # A string content and the same text as a block are one cache key, as the API tokenizes them alike.
    as_string = cacheable_blocks(messages_body([{"role": "user", "content": "same"}]))
    as_block = cacheable_blocks(messages_body([{"role": "user", "content": [text("same", cache_control=EPH)]}]))
    assert as_string[0].text == as_block[0].text


def test_fakes_answer_concurrent_requests(fa: FakeAnthropic, a_url: str, fr: FakeResponses, r_url: str) -> None:
    def both(i: int) -> tuple[int, int]:
        a = post(a_url + "/v1/messages", messages_body([{"role": "user", "content": f"q{i}"}]))
        r = post(r_url + "/v1/responses", rbody(f"q{i}"), headers={})
        return a.status_code, r.status_code

    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(both, range(16), timeout=60)) == [(200, 200)] * 16
    assert len(fa.requests) == len(fr.requests) == 16 and fa.violations == fr.violations == []
    assert len(fa.cache_reads) == len(fr.cached_tokens) == 16


def test_fakes_are_safe_to_reset_and_reuse(fa: FakeAnthropic, fr: FakeResponses) -> None:
    fa.script(AnthropicReply([Text("x")]))
    fr.script(ResponsesReply([OutputText("x")]))
    assert fa.pending() == fr.pending() == 1
    fa.reset()
    fr.reset()
    assert fa.pending() == fr.pending() == 0 and fa.requests == fr.requests == fa.violations == []
    assert fa.cache_reads == [] and fr.cached_tokens == []
