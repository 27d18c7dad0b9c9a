"""End to end: the official openai SDK -> workset (uvicorn on 127.0.0.1) -> a fake OpenAI-compatible provider."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from fakeupstream import Completion, CutStream, Error, Hang, ToolCall, Usage
from stores import POSTGRES, run_sql

pytestmark = pytest.mark.e2e

TOOLS = [{"type": "function", "function": {"name": "bash", "description": "run a command",
                                           "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}]


def agent_messages(steps: int, words: int = 80, task: str = "Fix the parser. Never edit tests.") -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."},
                                      {"role": "user", "content": task}]
    for step in range(steps):
        call_id = f"call_{step}"
        messages.append({"role": "assistant", "content": f"Looking at step {step}.", "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": f"cat f{step}.py"})}}]})
        messages.append({"role": "tool", "tool_call_id": call_id,
                         "content": f"<returncode>0</returncode>\n" + " ".join(f"tok{step}x{i}" for i in range(words))})
    return messages


# --- forwarding ---------------------------------------------------------------------------------------------------


def test_chat_completion_forwards_every_parameter_unchanged(proxy, fake) -> None:
    client = proxy.client()
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"}]
    params: dict[str, Any] = dict(
        tools=TOOLS, tool_choice="auto", temperature=0.3, top_p=0.9, response_format={"type": "json_object"},
        stop=["\n\n"], seed=7, n=1, max_tokens=50, presence_penalty=0.1, frequency_penalty=0.2,
        logit_bias={"50256": -100}, user="agent-1", parallel_tool_calls=False,
    )
    raw = client.chat.completions.with_raw_response.create(model="gpt-test", messages=messages,
                                                           extra_body={"custom_flag": {"x": 1}}, **params)
    completion = raw.parse()
    assert completion.choices[0].message.content == "echo: hello"
    received = fake.chat_requests()[-1].body
    for key, value in params.items():
        assert received[key] == value or key == "tools", key
    # the client's tools as sent, then workset_recall (offered from the first request: the cached list stays put)
    assert received["tools"][:-1] == TOOLS and received["tools"][-1]["function"]["name"] == "workset_recall"
    assert received["custom_flag"] == {"x": 1}
    assert received["model"] == "gpt-test"
    assert received["messages"] == messages
    assert raw.headers["x-workset-session"]
    assert 0 < int(raw.headers["x-workset-tokens-original"]) < int(raw.headers["x-workset-tokens-sent"])
    assert fake.chat_requests()[-1].headers["authorization"] == "Bearer sk-test"


def test_streaming_relays_chunks_in_order_with_usage_and_done(proxy, fake) -> None:
    fake.script(Completion(content="one two three", pieces=["one ", "two ", "three"], usage=Usage(11, 3), chunk_delay=0.02))
    stream = proxy.client().chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": "count"}], stream=True,
        stream_options={"include_usage": True})
    chunks = list(stream)
    texts = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert texts == ["one ", "two ", "three"]  # one chunk per provider chunk, not re-batched
    assert chunks[-1].usage is not None and chunks[-1].usage.prompt_tokens == 11
    assert fake.chat_requests()[-1].body["stream_options"] == {"include_usage": True}


def test_raw_stream_ends_with_done_and_carries_headers(proxy, fake) -> None:
    with httpx.stream("POST", proxy.url + "/v1/chat/completions", timeout=10,
                      json={"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}], "stream": True}) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["x-workset-session"]
        body = b"".join(response.iter_raw())
    assert body.rstrip().endswith(b"data: [DONE]")


def test_streamed_tool_calls_arrive_intact(proxy, fake) -> None:
    fake.script(Completion(tool_calls=[ToolCall("bash", '{"command": "ls"}')]))
    stream = proxy.client().chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "list"}],
                                                    tools=TOOLS, stream=True)
    arguments = "".join(c.choices[0].delta.tool_calls[0].function.arguments or ""
                        for c in stream if c.choices and c.choices[0].delta.tool_calls)
    assert json.loads(arguments) == {"command": "ls"}


def test_async_client_streaming_and_not(proxy, fake) -> None:
    async def run() -> tuple[str, str]:
        client = proxy.async_client()
        plain = await client.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "a"}])
        stream = await client.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "b"}],
                                                      stream=True)
        parts = [c.choices[0].delta.content or "" async for c in stream if c.choices]
        await client.close()
        return plain.choices[0].message.content or "", "".join(parts)

    plain, streamed = asyncio.run(asyncio.wait_for(run(), 30))
    assert plain == "echo: a" and streamed == "echo: b"


def test_embeddings_models_and_health(proxy, fake) -> None:
    client = proxy.client()
    result = client.embeddings.create(model="text-embed", input=["a", "b"], dimensions=8)
    assert len(result.data) == 2 and len(result.data[0].embedding) == 8
    received = [r for r in fake.requests if r.path == "/v1/embeddings"][-1].body
    assert received["input"] == ["a", "b"] and received["dimensions"] == 8
    assert [m.id for m in client.models.list()] == ["*"]
    assert httpx.get(proxy.url + "/healthz", timeout=5).json() == {"status": "ok"}


# --- sessions -----------------------------------------------------------------------------------------------------


def test_continuing_conversation_keeps_its_session(proxy, fake) -> None:
    client = proxy.client()
    messages = agent_messages(2)
    first = client.chat.completions.with_raw_response.create(model="gpt-test", messages=messages)
    second = client.chat.completions.with_raw_response.create(model="gpt-test", messages=agent_messages(3))
    assert first.headers["x-workset-session"] == second.headers["x-workset-session"]


def test_explicit_session_wins_and_metadata_is_stripped(proxy, fake) -> None:
    client = proxy.client()
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-test", messages=[{"role": "user", "content": "hi"}],
        extra_body={"metadata": {"session_id": "run-42", "tag": "x"}})
    assert raw.headers["x-workset-session"] == "run-42"
    assert fake.chat_requests()[-1].body["metadata"] == {"tag": "x"}
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-test", messages=[{"role": "user", "content": "hi"}], extra_headers={"x-workset-session": "run-43"},
        extra_body={"metadata": {"session_id": "ignored"}})
    assert raw.headers["x-workset-session"] == "run-43"
    assert "metadata" not in fake.chat_requests()[-1].body


def test_sessions_belong_to_the_callers_key(proxy, fake) -> None:
    messages = agent_messages(2)
    one = proxy.client("sk-one").chat.completions.with_raw_response.create(model="gpt-test", messages=messages)
    two = proxy.client("sk-two").chat.completions.with_raw_response.create(model="gpt-test", messages=messages)
    assert one.headers["x-workset-session"] != two.headers["x-workset-session"]
    proxy.flush()
    assert len(proxy.engine.store.sessions()) == 2
    if POSTGRES:  # every row of every table, as text
        tables = [row[0] for row in run_sql(
            proxy.store, "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")]
        store_bytes = "".join(str(row[0]) for table in tables
                              for row in run_sql(proxy.store, f"SELECT CAST(t AS text) FROM {table} t")).encode()
    else:  # the file itself, and its write-ahead log
        db = Path(proxy.store)
        store_bytes = db.read_bytes() + db.with_name("store.db-wal").read_bytes()
    assert b"gpt-test" in store_bytes and b"sk-one" not in store_bytes and b"sk-two" not in store_bytes


def test_two_runs_of_one_task_fork_and_never_share_state(proxy, fake) -> None:
    client = proxy.client()
    task = [{"role": "system", "content": "agent"}, {"role": "user", "content": "Book a flight."}]
    run_a = task + [{"role": "assistant", "content": "Which day?"},
                    {"role": "user", "content": "Friday. You must never book basic economy."}]
    run_b = task + [{"role": "assistant", "content": "Which day?"}, {"role": "user", "content": "Monday please."}]
    client.chat.completions.create(model="small-model", messages=run_a)
    client.chat.completions.create(model="small-model", messages=run_b)
    # grow run B past the small budget so the task state is rendered, and look for A's constraint
    for step in range(12):
        run_b = run_b + [{"role": "assistant", "content": f"Checking option {step}: " + "details " * 250},
                         {"role": "user", "content": f"Next option {step}."}]
        client.chat.completions.create(model="small-model", messages=run_b)
    forwarded_b = json.dumps(fake.chat_requests()[-1].body["messages"])
    assert "Task state" in forwarded_b
    assert "basic economy" not in forwarded_b


# --- working set through the proxy ----------------------------------------------------------------------------------


def test_long_run_is_compacted_within_budget_with_stable_prefix(proxy, fake) -> None:
    client = proxy.client()
    sent: list[list[dict[str, Any]]] = []
    compactions = 0
    for steps in range(1, 40):
        raw = client.chat.completions.with_raw_response.create(model="small-model", messages=agent_messages(steps), tools=TOOLS)
        compactions += raw.headers.get("x-workset-compacted") == "1"
        assert int(raw.headers["x-workset-tokens-sent"]) <= 3000
        sent.append(fake.chat_requests()[-1].body["messages"])
    assert 1 <= compactions <= 12
    assert int(raw.headers["x-workset-tokens-original"]) > 3 * int(raw.headers["x-workset-tokens-sent"])
    # between compactions the forwarded prefix is byte-identical (everything but the live state at the end)
    stable = sum(1 for before, after in zip(sent, sent[1:]) if after[: len(before) - 1] == before[:-1])
    assert stable >= len(sent) - 1 - compactions
    last = sent[-1]
    assert last[1]["content"] == "Fix the parser. Never edit tests."
    assert "Never edit tests" in last[-1]["content"]  # the live state repeats the constraint at the tail


def test_orphan_tool_messages_are_forwarded_as_sent(proxy, fake) -> None:
    messages = [{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "nope", "content": "orphan"}]
    proxy.client().chat.completions.create(model="small-model", messages=messages)
    assert fake.chat_requests()[-1].body["messages"] == messages


def test_passthrough_policy_header_forwards_unchanged(proxy, fake) -> None:
    messages = agent_messages(30)
    raw = proxy.client().chat.completions.with_raw_response.create(
        model="small-model", messages=messages, extra_headers={"x-workset-policy": "passthrough"})
    assert fake.chat_requests()[-1].body["messages"] == messages
    assert raw.headers["x-workset-policy"] == "passthrough"


def test_fail_open_forwards_original_request(proxy, fake, monkeypatch, capsys) -> None:
    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("boom inside workset")

    monkeypatch.setattr(proxy.engine, "prepare", broken)
    messages = agent_messages(3)
    completion = proxy.client().chat.completions.create(model="small-model", messages=messages)
    assert completion.choices[0].message.content
    assert fake.chat_requests()[-1].body["messages"] == messages
    assert "boom inside workset" in capsys.readouterr().err


# --- bad input and faults -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("body, needle", [
    (b"{not json", "not valid JSON"),
    (b"[1, 2]", "JSON object"),
    (b'{"messages": [{"role": "user", "content": "x"}]}', "'model'"),
    (b'{"model": 5, "messages": []}', "'model' must be"),
    (b'{"model": "m"}', "'messages'"),
    (b'{"model": "m", "messages": "hi"}', "'messages' must be an array"),
    (b'{"model": "m", "messages": [{"role": "wizard", "content": "x"}]}', "messages[0].role"),
    (b'{"model": "m", "messages": [{"role": "user", "content": 3}]}', "messages[0].content"),
])
def test_bad_input_gets_openai_style_400(proxy, fake, body: bytes, needle: str) -> None:
    response = httpx.post(proxy.url + "/v1/chat/completions", content=body, timeout=10,
                          headers={"content-type": "application/json"})
    assert response.status_code == 400
    error = response.json()["error"]
    assert needle in error["message"] and error["type"] == "invalid_request_error" and "code" in error
    assert not fake.chat_requests()


def test_sdk_surfaces_400_as_bad_request(proxy, fake) -> None:
    with pytest.raises(openai.BadRequestError, match="messages"):
        proxy.client().chat.completions.create(model="gpt-test", messages="oops")  # type: ignore[arg-type]


def test_body_over_limit_is_413(start_proxy, fake) -> None:
    proxy = start_proxy(server={"max_body_bytes": 2048})
    response = httpx.post(proxy.url + "/v1/chat/completions", timeout=10,
                          json={"model": "m", "messages": [{"role": "user", "content": "x" * 5000}]})
    assert response.status_code == 413 and "max_body_bytes" in response.json()["error"]["message"]


def test_unknown_policy_header_is_400(proxy, fake) -> None:
    with pytest.raises(openai.BadRequestError, match="unknown policy"):
        proxy.client().chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "x"}],
                                               extra_headers={"x-workset-policy": "nope"})


def test_upstream_error_keeps_status_and_message(proxy, fake) -> None:
    fake.script(Error(429, "slow down please", "rate_limit_error", "rate_limited"))
    with pytest.raises(openai.RateLimitError, match="slow down please"):
        proxy.client().chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "x"}])


def test_upstream_unreachable_is_502(start_proxy, fake) -> None:
    from servers import free_port

    proxy = start_proxy(upstream_url=f"http://127.0.0.1:{free_port()}")
    with pytest.raises(openai.APIStatusError) as caught:
        proxy.client().chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "x"}])
    assert caught.value.status_code == 502 and "unreachable" in caught.value.message


def test_upstream_timeout_is_504(start_proxy, fake) -> None:
    proxy = start_proxy(upstream={"timeout_s": 0.5, "connect_timeout_s": 2})
    fake.script(Hang(5))
    with pytest.raises(openai.APIStatusError) as caught:
        proxy.client().chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "x"}])
    assert caught.value.status_code == 504


def test_stream_cut_by_provider_ends_with_error_event(proxy, fake) -> None:
    fake.script(CutStream(pieces=["partial ", "answer"]))
    stream = proxy.client().chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "x"}],
                                                    stream=True)
    received: list[str] = []
    with pytest.raises(openai.APIError, match="cut the stream"):
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                received.append(chunk.choices[0].delta.content)
    assert received == ["partial ", "answer"]


def test_unknown_route_is_openai_style_404(proxy) -> None:
    response = httpx.get(proxy.url + "/v1/nothing", timeout=5)
    assert response.status_code == 404 and "error" in response.json()


def test_workset_paid_keys_require_workset_key(start_proxy, fake) -> None:
    proxy = start_proxy(
        model_list=[{"model_name": "*", "litellm_params": {"model": "openai/*", "api_base": fake.url + "/v1",
                                                           "api_key": "sk-provider-secret"}}],
        server={"api_keys": ["ws-team-key"]},
    )
    with pytest.raises(openai.AuthenticationError):
        proxy.client("sk-random").chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "x"}])
    assert not fake.chat_requests()
    proxy.client("ws-team-key").chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "x"}])
    assert fake.chat_requests()[-1].headers["authorization"] == "Bearer sk-provider-secret"


def test_logs_one_json_line_per_request_without_contents_or_keys(proxy, fake, capsys) -> None:
    capsys.readouterr()
    proxy.client("sk-secret-123").chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": "confidential words"}])
    err = capsys.readouterr().err
    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{") and '"request"' in line]
    assert len(lines) == 1
    line = lines[0]
    for field in ("session", "model", "policy", "tokens_original", "tokens_sent", "compacted", "latency_ms", "status"):
        assert field in line, field
    assert "confidential words" not in err and "sk-secret-123" not in err
