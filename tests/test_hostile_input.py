"""Odd but valid requests are forwarded, invalid ones get a clear OpenAI-style 400 before the provider is called,
and the provider's pacing and request-id headers reach the client (issue 9, items 3 and 4)."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import openai
import pytest
from fakeupstream import Completion, Error

from proxy.jsonbytes import IN_STEPS_OVER_BYTES

pytestmark = pytest.mark.e2e

CHAT = "/v1/chat/completions"
PATCH = "*** Begin Patch\n*** Update File: src/parser.py\n@@\n-    return None\n+    return tokens\n*** End Patch"


def custom_call_turns(step: int, words: int = 60) -> list[dict[str, Any]]:
    """One GPT-5 custom tool call (free-form input, no JSON arguments) and its result."""
    call_id = f"call_patch_{step}"
    return [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "custom", "custom": {"name": "apply_patch", "input": PATCH + f"\n# step {step}"}}]},
        {"role": "tool", "tool_call_id": call_id,
         "content": f"Done! Updated src/parser.py (step {step}). " + " ".join(f"line{step}x{i}" for i in range(words))},
    ]


def with_nesting(body: dict[str, Any], depth: int) -> bytes:
    """The body as JSON, every "NEST" string replaced by ["bottom"] nested `depth` levels deep (written by hand:
    json.dumps itself stops near 1,000 levels)."""
    return json.dumps(body).replace('"NEST"', "[" * depth + '"bottom"' + "]" * depth).encode()


def post(proxy: Any, body: dict[str, Any] | bytes, **headers: str) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(proxy.url + CHAT, content=content, timeout=20,
                      headers={"content-type": "application/json", "authorization": "Bearer sk-test", **headers})


def assert_openai_400(response: httpx.Response, needle: str) -> dict[str, Any]:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert needle in error["message"] and error["type"] == "invalid_request_error" and error["code"]
    return error


# --- custom tool calls ----------------------------------------------------------------------------------------------


def test_custom_tool_call_is_forwarded_as_sent(proxy: Any, fake: Any) -> None:
    messages = [{"role": "system", "content": "You are a coding agent."},
                {"role": "user", "content": "Fix the parser."}, *custom_call_turns(0)]
    tools = [{"type": "custom", "custom": {"name": "apply_patch", "description": "apply a patch"}}]
    completion = proxy.client().chat.completions.create(model="gpt-test", messages=messages, tools=tools)
    assert completion.choices[0].message.content
    received = fake.chat_requests()[-1].body
    assert received["messages"] == messages and received["tools"][:-1] == tools  # then workset_recall


def test_long_run_of_custom_tool_calls_is_compacted_with_its_patches_counted(proxy: Any, fake: Any,
                                                                             capsys: Any) -> None:
    client = proxy.client()
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."},
                                      {"role": "user", "content": "Fix the parser. Never edit tests."}]
    compacted = 0
    for step in range(30):
        messages += custom_call_turns(step)
        raw = client.chat.completions.with_raw_response.create(model="small-model", messages=messages)
        compacted += raw.headers.get("x-workset-compacted") == "1"
    err = capsys.readouterr().err
    assert "workset_step_failed" not in err and "ingest_failed" not in err  # workset's own steps ran, no fail open
    assert compacted >= 1
    sent = fake.chat_requests()[-1].body["messages"]
    # pairs stay whole: every tool result forwarded follows the custom call that asked for it
    asked = {c["id"] for m in sent if m.get("role") == "assistant" for c in m.get("tool_calls") or ()}
    assert all(m["tool_call_id"] in asked for m in sent if m.get("role") == "tool")
    assert any(c.get("type") == "custom" for m in sent for c in m.get("tool_calls") or ())
    assert "apply_patch *** Begin Patch" in json.dumps(sent)  # the digest names the folded calls and their input


def test_custom_tool_call_input_counts_toward_the_budget(proxy: Any, fake: Any) -> None:
    def tokens(patch: str) -> int:
        turns = custom_call_turns(0)
        turns[0]["tool_calls"][0]["custom"]["input"] = patch
        raw = proxy.client().chat.completions.with_raw_response.create(
            model="gpt-test", messages=[{"role": "user", "content": "Fix it."}, *turns])
        return int(raw.headers["x-workset-tokens-original"])

    big_patch = PATCH + "\n" + "\n".join(f"+    value_{i} = compute({i})" for i in range(300))
    assert tokens(big_patch) - tokens(PATCH) > 2000


@pytest.mark.parametrize("call, needle", [
    ({"id": "c1", "type": "custom", "custom": "apply_patch"}, "custom {name, input}"),
    ({"id": "c1", "type": "custom", "function": {"name": "bash", "arguments": "{}"}}, "custom {name, input}"),
    ({"id": "c1", "type": "function", "custom": {"name": "bash", "input": "ls"}}, "function {name, arguments}"),
])
def test_malformed_tool_call_is_a_400(proxy: Any, fake: Any, call: dict[str, Any], needle: str) -> None:
    body = {"model": "gpt-test", "messages": [{"role": "user", "content": "x"},
                                              {"role": "assistant", "tool_calls": [call]}]}
    assert_openai_400(post(proxy, body), needle)
    assert not fake.chat_requests()


# --- nesting --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [300, 1000])
def test_json_nested_deeper_than_orjson_writes_is_forwarded(proxy: Any, fake: Any, depth: int) -> None:
    schema_field = {"type": "object", "properties": {"deep": {"enum": ["NEST"]}}}
    body = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"},
                                              {"role": "user", "content": [{"type": "text", "text": "again",
                                                                            "extra": "NEST"}]}],
            "tools": [{"type": "function", "function": {"name": "t", "parameters": schema_field}}]}
    response = post(proxy, with_nesting(body, depth))
    assert response.status_code == 200, response.text
    raw = fake.chat_requests()[-1].raw
    assert raw.count(b"[") >= 2 * depth and b'"bottom"' in raw
    assert b"again" in raw and b'"name":"t"' in raw.replace(b" ", b"")


@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
def test_a_large_body_of_cjk_and_escapes_reaches_the_provider_as_sent(proxy: Any, fake: Any, streamed: bool) -> None:
    """A body over jsonbytes.IN_STEPS_OVER_BYTES is written as JSON again on a worker, in pieces, not by the event
    loop: what reaches the provider is what the client sent."""
    text = "".join(random.Random(3).choice(["中", "：", '"', "\\", "\n", "\x01", "😀", "a", "\u2028"])
                   for _ in range(400_000))
    messages = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": text}]
    fake.script(Completion("read it"))
    created = proxy.client().chat.completions.create(model="gpt-test", messages=messages, stream=streamed,
                                                      extra_headers={"x-workset-policy": "passthrough"})
    answer = "".join(chunk.choices[0].delta.content or "" for chunk in created if chunk.choices) if streamed \
        else created.choices[0].message.content
    assert answer == "read it"
    received = fake.chat_requests()[-1]
    assert received.body["messages"] == messages and received.body["stream"] is streamed
    assert len(received.raw) > IN_STEPS_OVER_BYTES


def test_json_nested_past_the_parser_limit_is_a_400(proxy: Any, fake: Any) -> None:
    body = b'{"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}], "x": ' + b"[" * 1100 + b"]" * 1100 + b"}"
    assert_openai_400(post(proxy, body), "depth limit")
    assert not fake.chat_requests()


# --- explicit session ids -------------------------------------------------------------------------------------------


def test_session_id_is_trimmed(proxy: Any, fake: Any) -> None:
    conversation = [{"role": "user", "content": "hi"}]
    for padded in ("  run-7\t", "run-7 "):  # the same id with other spaces around it: one session
        response = post(proxy, {"model": "gpt-test", "messages": conversation,
                                "metadata": {"session_id": padded, "tag": "x"}})
        assert response.headers["x-workset-session"] == "run-7"
        assert fake.chat_requests()[-1].body["metadata"] == {"tag": "x"}
        conversation = [*conversation, response.json()["choices"][0]["message"], {"role": "user", "content": "more"}]
    proxy.flush()
    assert len(proxy.engine.store.sessions()) == 1


def test_blank_session_id_means_an_implicit_session(proxy: Any, fake: Any) -> None:
    response = post(proxy, {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}],
                            "metadata": {"session_id": "   "}})
    assert response.status_code == 200 and response.headers["x-workset-session"].strip()
    assert "metadata" not in fake.chat_requests()[-1].body


@pytest.mark.parametrize("session_id, needle", [
    ("sessão-1", "printable ASCII"),
    ("会话", "printable ASCII"),
    ("run\r\nx-evil: 1", "printable ASCII"),
    ("run\x00", "printable ASCII"),
    ("r" * 600, "at most 512"),
])
def test_unusable_session_id_in_metadata_is_a_400_before_the_provider(proxy: Any, fake: Any, session_id: str,
                                                                      needle: str) -> None:
    body = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}], "metadata": {"session_id": session_id}}
    error = assert_openai_400(post(proxy, body), needle)
    assert error["param"] == "metadata.session_id"
    assert not fake.chat_requests()


def test_non_ascii_session_header_is_a_400_before_the_provider(proxy: Any, fake: Any) -> None:
    response = httpx.post(proxy.url + CHAT, timeout=20, json={"model": "gpt-test",
                                                               "messages": [{"role": "user", "content": "hi"}]},
                          headers=[(b"x-workset-session", "sessão".encode())])
    assert assert_openai_400(response, "printable ASCII")["param"] == "x-workset-session"
    assert not fake.chat_requests()


# --- provider headers -----------------------------------------------------------------------------------------------

PACING = {"retry-after": "7", "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-tokens": "6s",
          "x-request-id": "req_abc123", "openai-processing-ms": "12"}


def assert_relayed(headers: httpx.Headers) -> None:
    for name, value in PACING.items():
        assert headers.get(name) == value, name
    assert "x-provider-internal" not in headers  # only the pacing and request-id headers pass


def test_rate_limit_headers_reach_the_client_on_a_429(proxy: Any, fake: Any) -> None:
    fake.script(Error(429, "slow down", "rate_limit_error", "rate_limited",
                      headers={**PACING, "x-provider-internal": "secret"}))
    with pytest.raises(openai.RateLimitError) as caught:
        proxy.client().chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "x"}])
    assert_relayed(caught.value.response.headers)


def test_provider_headers_reach_the_client_on_success_plain_and_streamed(proxy: Any, fake: Any) -> None:
    fake.script(Completion("plain", headers={**PACING, "x-provider-internal": "secret"}),
                Completion("streamed", headers={**PACING, "x-provider-internal": "secret"}))
    client = proxy.client()
    raw = client.chat.completions.with_raw_response.create(model="gpt-test", messages=[{"role": "user", "content": "a"}])
    assert raw.parse().choices[0].message.content == "plain"
    assert_relayed(raw.headers)
    assert raw.headers["x-workset-session"]  # workset's own headers still there
    with client.chat.completions.with_streaming_response.create(
            model="gpt-test", messages=[{"role": "user", "content": "b"}], stream=True) as streamed:
        assert_relayed(streamed.headers)
        text = "".join(c.choices[0].delta.content or "" for c in streamed.parse() if c.choices)
    assert text == "streamed"


def test_provider_headers_that_cannot_be_written_back_are_dropped(proxy: Any, fake: Any) -> None:
    fake.script(Completion("ok", headers={"x-request-id": "req\u00e9", "x-ratelimit-limit-requests": "10"}))
    response = post(proxy, {"model": "gpt-test", "messages": [{"role": "user", "content": "x"}]})
    assert response.status_code == 200 and response.headers["x-ratelimit-limit-requests"] == "10"


# --- the litellm path -----------------------------------------------------------------------------------------------


def test_unreachable_anthropic_endpoint_is_502(start_proxy: Any, fake: Any) -> None:
    from servers import free_port

    proxy = start_proxy(model_list=[{"model_name": "anthropic/*", "litellm_params": {
        "model": "anthropic/*", "api_base": f"http://127.0.0.1:{free_port()}"}}],
        upstream={"timeout_s": 10, "connect_timeout_s": 2})
    with pytest.raises(openai.APIStatusError) as caught:
        proxy.client().chat.completions.create(model="anthropic/claude-test", max_tokens=5,
                                               messages=[{"role": "user", "content": "x"}])
    assert caught.value.status_code == 502 and "unreachable" in caught.value.message


def test_a_message_nested_past_orjsons_depth_hashes_like_any_other() -> None:
    """Hashing is what resolves a conversation: a deep message must hash (deterministically), not fail open."""
    from proxy.hashing import node_hash

    def deep(levels: int, leaf: str) -> dict:
        value: dict = {"leaf": leaf}
        for level in range(levels):
            value = {"level": level, "inner": value}
        return {"role": "user", "content": "see the schema", "schema": value}

    assert node_hash("root", deep(400, "a")) == node_hash("root", deep(400, "a"))
    assert node_hash("root", deep(400, "a")) != node_hash("root", deep(400, "b"))
    shallow = {"role": "user", "content": "hi", "name": "x"}
    assert node_hash("root", shallow) == node_hash("root", dict(reversed(list(shallow.items()))))  # keys in order


def test_a_deep_message_is_stored_like_any_other(tmp_path) -> None:
    """Forwarding and hashing take any depth the proxy accepts; the store's writes must too."""
    from stores import run_sql, store_location

    from proxy.config import Config
    from proxy.engine import Engine
    from proxy.policy import Policy
    from proxy.storage import open_store
    from proxy.tokens import TokenCounter

    schema: dict = {"leaf": "x"}
    for level in range(300):
        schema = {"level": level, "inner": schema}
    location = store_location(tmp_path / "store.db")
    engine = Engine(Config(), {"default": Policy()}, open_store(location), TokenCounter())
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "see the schema", "schema": schema}]
    prepared = engine.prepare({"model": "m", "messages": messages}, "key", policy_name="default")
    engine.settle(prepared)
    engine.store.flush()
    assert run_sql(location, "SELECT count(*) FROM messages") == [(2,)]
    engine.store.close()


# --- workset's own work runs off the event loop ---------------------------------------------------------------------


def test_a_request_stuck_in_workset_work_does_not_hold_up_another_tenant(proxy: Any, fake: Any) -> None:
    """Ingest, extraction and compaction run on worker threads: while one caller's request is held inside them,
    another caller's request goes through, and /healthz answers."""
    import threading

    engine = proxy.engine
    entered, release = threading.Event(), threading.Event()
    prepare = engine.prepare

    def held_prepare(body: dict[str, Any], caller: str, *args: Any, **kwargs: Any) -> Any:
        if body["messages"][-1].get("content") == "hold me":
            entered.set()
            release.wait(20)
        return prepare(body, caller, *args, **kwargs)

    engine.prepare = held_prepare
    results: dict[str, httpx.Response] = {}
    slow = threading.Thread(target=lambda: results.setdefault("slow", post(
        proxy, {"model": "gpt-test", "messages": [{"role": "user", "content": "hold me"}]})))
    slow.start()
    try:
        assert entered.wait(20)
        other = post(proxy, {"model": "gpt-test", "messages": [{"role": "user", "content": "hello"}]},
                     authorization="Bearer sk-other")
        assert other.status_code == 200 and "slow" not in results  # answered while the first is still held
        assert httpx.get(proxy.url + "/healthz", timeout=5).status_code == 200
    finally:
        release.set()
        slow.join(30)
    assert results["slow"].status_code == 200


def test_inspection_reads_waiting_for_the_store_do_not_hold_up_model_requests(start_proxy: Any, fake: Any) -> None:
    """The inspection routes and the dashboard read the store once the writes queued before them are in: behind
    other tenants' megabytes being indexed, that takes a while, and any key holder can send many. They wait on
    threads of their own: while every one of them waits, a model request still goes through, though workset has a
    single worker thread here."""
    proxy = start_proxy(server={"worker_threads": 1, "inspection_threads": 2})
    with held_listings(proxy, "sk-test") as results:
        answer = httpx.post(proxy.url + CHAT, timeout=10, headers={"authorization": "Bearer sk-other"},
                            json={"model": "gpt-test", "messages": [{"role": "user", "content": "hello"}]})
        assert answer.status_code == 200 and not results  # answered while the listings still wait
    assert [results[number].status_code for number in range(3)] == [200, 200, 200]


@contextmanager
def held_listings(proxy: Any, key: str, count: int = 3) -> Iterator[dict[int, httpx.Response]]:
    """`count` listings of `key`'s sessions, held inside the store until the block ends (as waiting for queued
    writes holds them); their answers, by number, once the block has ended."""
    import threading

    from proxy.hashing import key_hash

    store = proxy.engine.store
    entered, release = threading.Event(), threading.Event()
    listing = store.sessions

    def held_listing(caller: Any, *args: Any, **kwargs: Any) -> Any:
        if caller == key_hash(key):
            entered.set()
            release.wait(20)
        return listing(caller, *args, **kwargs)

    store.sessions = held_listing
    results: dict[int, httpx.Response] = {}
    readers = [threading.Thread(target=lambda number=number: results.setdefault(number, httpx.get(
        proxy.url + "/v1/workset/sessions", headers={"authorization": f"Bearer {key}"}, timeout=30)))
        for number in range(count)]
    for reader in readers:
        reader.start()
    try:
        assert entered.wait(20)
        yield results
    finally:
        release.set()
        for reader in readers:
            reader.join(30)


def test_one_keys_burst_of_inspections_leaves_another_key_a_thread(start_proxy: Any, fake: Any) -> None:
    """One key's listings wait their turn for one inspection thread (server.inspections_per_key): while three of
    them are held (each waiting for its key's writes, say), another key's listing is answered on the other
    thread, and the held ones are all answered once let go."""
    proxy = start_proxy(server={"inspection_threads": 2, "inspections_per_key": 1})
    with held_listings(proxy, "sk-burst") as results:
        other = httpx.get(proxy.url + "/v1/workset/sessions", headers={"authorization": "Bearer sk-other"}, timeout=10)
        assert other.status_code == 200 and not results  # answered while the burst still waits
    assert [results[number].status_code for number in range(3)] == [200, 200, 200]
    assert proxy.app.state.workset.inspection_turns.keys() == 0  # nothing kept of the keys once they are done


def test_workset_ms_counts_the_deferred_ingest(proxy: Any, fake: Any, capsys: Any) -> None:
    """Extraction runs after the request is sent, beside the provider's latency; the header and the log still
    count it."""
    import time

    engine = proxy.engine
    settle = engine.settle

    def slow_settle(prepared: Any) -> None:
        started = time.thread_time()
        while time.thread_time() - started < 0.3:  # stands in for a long extraction: 300 ms of CPU
            pass
        settle(prepared)

    engine.settle = slow_settle
    response = post(proxy, {"model": "gpt-test", "messages": [{"role": "user", "content": "count me"}]})
    assert response.status_code == 200
    assert float(response.headers["x-workset-ms"]) >= 300
    logged = next(json.loads(line) for line in capsys.readouterr().err.splitlines() if '"deferred_ms"' in line)
    assert logged["deferred_ms"] >= 300 and logged["workset_ms"] < logged["deferred_ms"]


TEAM_SYSTEM = {"role": "system", "content": "You are the team's agent."}


def answered_while_held(proxy: Any, entered: Any, release: Any,
                        other: list[dict[str, Any]]) -> tuple[httpx.Response, httpx.Response]:
    """A conversation of the team's key whose last message is "hold me" (the caller holds it inside workset's work
    until `release`, setting `entered` once there), then `other` of the same key: the other's answer, checked to
    come while the first is still held, and then the first's."""
    import threading

    results: dict[str, httpx.Response] = {}
    slow = threading.Thread(target=lambda: results.setdefault("slow", post(
        proxy, {"model": "gpt-test", "messages": [TEAM_SYSTEM, {"role": "user", "content": "hold me"}]})))
    slow.start()
    try:
        assert entered.wait(20)
        answered = post(proxy, {"model": "gpt-test", "messages": other})
        assert answered.status_code == 200 and "slow" not in results
    finally:
        release.set()
        slow.join(30)
    assert results["slow"].status_code == 200
    return answered, results["slow"]


def test_conversations_of_one_key_are_built_side_by_side(proxy: Any, fake: Any) -> None:
    """A team's agents share one key and one system prompt: while one conversation's working set is being built
    (a long compaction, say), another conversation of the same key is answered."""
    import threading

    engine = proxy.engine
    entered, release = threading.Event(), threading.Event()
    build = engine._build  # noqa: SLF001

    def held_build(body: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        if body["messages"][-1].get("content") == "hold me":
            entered.set()
            release.wait(20)
        return build(body, *args, **kwargs)

    engine._build = held_build  # noqa: SLF001
    other, held = answered_while_held(proxy, entered, release, [TEAM_SYSTEM, {"role": "user", "content": "other task"}])
    assert held.headers["x-workset-session"] != other.headers["x-workset-session"]


def test_a_conversations_new_message_is_measured_without_holding_up_the_keys_others(proxy: Any, fake: Any) -> None:
    """Counting a new message's tokens (a long tool output takes milliseconds) happens once the key's tree lock is
    let go: another conversation of the same key, with the same system prompt, goes on meanwhile."""
    import threading

    begun = [TEAM_SYSTEM, {"role": "user", "content": "other task"}]
    first = post(proxy, {"model": "gpt-test", "messages": begun})
    assert first.status_code == 200
    going_on = [*begun, first.json()["choices"][0]["message"], {"role": "user", "content": "and then?"}]
    counter = proxy.engine.sessions.counter
    entered, release = threading.Event(), threading.Event()
    count = counter.message

    def held_count(message: dict[str, Any], *args: Any, **kwargs: Any) -> int:
        if message.get("content") == "hold me" and not release.is_set():
            entered.set()
            release.wait(20)
        return count(message, *args, **kwargs)

    counter.message = held_count
    try:
        other, held = answered_while_held(proxy, entered, release, going_on)
    finally:
        del counter.message
    assert held.headers["x-workset-session"] != other.headers["x-workset-session"]


def test_an_integer_beyond_64_bits_reaches_the_provider_digit_for_digit(proxy: Any, fake: Any) -> None:
    """orjson would read it as a float: 123456789012345678901234567890 must not arrive as 1.2345678901234568e+29."""
    body = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}],
            "metadata": {"trace": 123456789012345678901234567890}, "seed": -9223372036854775809}
    response = post(proxy, body)
    assert response.status_code == 200, response.text
    raw = fake.chat_requests()[-1].raw
    assert b"123456789012345678901234567890" in raw and b"-9223372036854775809" in raw


def test_a_message_past_its_extraction_cap_is_skipped_not_waited_for(start_proxy: Any, fake: Any,
                                                                       capsys: Any) -> None:
    """ingest.extract_ms 0: every stage misses its cap. The request is answered, the skip is logged with the
    message's ref, and the message is stored whole (the session lists it)."""
    proxy = start_proxy(ingest={"extract_ms": 0})
    messages = [{"role": "user", "content": "Never touch prod. Ticket TCK-4411 is open."}]
    response = post(proxy, {"model": "gpt-test", "messages": messages})
    assert response.status_code == 200
    proxy.flush()
    skipped = [json.loads(line) for line in capsys.readouterr().err.splitlines() if '"extract_skipped"' in line]
    assert skipped and skipped[0]["stages"] and skipped[0]["ref"]
    session = httpx.get(f"{proxy.url}/v1/workset/sessions/{response.headers['x-workset-session']}", timeout=10,
                        headers={"authorization": "Bearer sk-test"}).json()
    assert session["branch"]["messages"] == 1


def test_a_body_parsed_in_an_extraction_process_is_forwarded_as_read_here(start_proxy: Any, fake: Any) -> None:
    """ingest.parse_inline_bytes 1000: every body past it is read in the extraction process. What it sends on is
    what the worker would have read (a large integer digit for digit, Chinese whole), and a body that is not JSON is
    the usual 400."""
    proxy = start_proxy(ingest={"extract_ms": 5000, "parse_inline_bytes": 1000})
    text = "检查订单 #W2378156 的退款状态。" * 200
    body = {"model": "gpt-test", "messages": [{"role": "user", "content": text}],
            "metadata": {"trace": 123456789012345678901234567890}}
    response = post(proxy, body)
    assert response.status_code == 200, response.text
    sent = fake.chat_requests()[-1]
    assert text in json.dumps(sent.body["messages"], ensure_ascii=False)
    assert b"123456789012345678901234567890" in sent.raw
    assert_openai_400(post(proxy, json.dumps(body).encode()[:-1]), "not valid JSON")


class _Backlog:
    """A store whose queued large writes drain by `step` characters each time they are looked at."""

    def __init__(self, chars: int, step: int) -> None:
        self.chars, self.step, self.looks = chars, step, 0

    def large_backlog(self) -> int:
        self.looks += 1
        chars = self.chars
        self.chars = max(0, self.chars - self.step)
        return chars


def _backlog_workset(store: _Backlog, wait_s: float) -> Any:
    from types import SimpleNamespace

    from proxy.config import StoreSettings

    settings = StoreSettings(max_backlog_chars=10_000, backlog_wait_s=wait_s)
    return SimpleNamespace(config=SimpleNamespace(store=settings), store=store)


def test_a_large_requests_work_runs_at_a_lower_priority_than_a_small_ones(start_proxy: Any, fake: Any) -> None:
    """server.large_request_nice: a request whose body holds store.large_write_chars or more is admitted and
    settled by threads that many nice steps down, so that the cores go first to the small requests beside it (a
    tenant's megabyte delays another's requests less); a small request's work keeps the server's priority."""
    import os
    import threading

    proxy = start_proxy(server={"large_request_nice": 5})
    large = proxy.app.state.workset.config.store.large_write_chars
    engine = proxy.engine
    prepare, settle = engine.prepare, engine.settle
    seen: list[tuple[str, int]] = []

    def noted(step: str, work: Any) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            seen.append((step, os.getpriority(os.PRIO_PROCESS, threading.get_native_id())))
            return work(*args, **kwargs)
        return run

    engine.prepare, engine.settle = noted("admit", prepare), noted("settle", settle)
    server = os.getpriority(os.PRIO_PROCESS, 0)
    for tool_output, nice in (("x" * large, 5), ("a short listing", 0)):
        seen.clear()
        call = {"id": "call_0", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
        response = post(proxy, {"model": "gpt-test", "messages": [
            {"role": "user", "content": f"Look at the dump ({nice})."},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_0", "content": tool_output}]})
        assert response.status_code == 200
        assert seen == [("admit", min(19, server + nice)), ("settle", min(19, server + nice))]


def test_a_large_request_waits_while_the_stores_large_writes_are_behind() -> None:
    """A tenant sending megabytes faster than the store indexes them is slowed down at its next large request
    (on the event loop, no worker held) until the backlog is back under store.max_backlog_chars; a request that
    finds the backlog under it does not wait at all."""
    import asyncio

    from proxy.app import _wait_for_backlog

    behind = _Backlog(30_000, 5_000)
    fields: dict[str, Any] = {}
    asyncio.run(asyncio.wait_for(_wait_for_backlog(_backlog_workset(behind, 60.0), fields), 30))
    assert behind.chars <= 10_000 and behind.looks >= 5 and fields["backlog_ms"] > 0
    under = _Backlog(9_000, 0)
    fields = {}
    asyncio.run(_wait_for_backlog(_backlog_workset(under, 60.0), fields))
    assert under.looks == 1 and "backlog_ms" not in fields


def test_a_large_request_goes_on_once_it_has_waited_backlog_wait_s() -> None:
    """A store that stops draining must not hold a request for ever: after store.backlog_wait_s it goes on."""
    import asyncio

    from proxy.app import _wait_for_backlog

    stuck = _Backlog(50_000, 0)
    fields: dict[str, Any] = {}
    asyncio.run(asyncio.wait_for(_wait_for_backlog(_backlog_workset(stuck, 0.2), fields), 30))
    assert fields["backlog_ms"] >= 200


def test_the_conversations_held_in_memory_are_bounded_by_their_tokens_too() -> None:
    """A tenant sending a megabyte in every conversation must not make workset hold cache.max_sessions megabytes:
    the least recently used conversations are let go once those held carry more than cache.max_tokens (they are
    read back from the store when they go on), and one conversation alone is always kept."""
    from proxy.session import Branch, BranchCache

    cache = BranchCache(max_branches=100, max_tokens=1000)
    first, second, third = (Branch(f"s{number}", f"root{number}", False, total_tokens=400) for number in range(3))
    assert cache.put(first) == [] and cache.put(second) == []
    assert cache.put(third) == [first]  # 1,200 tokens held: the oldest goes
    assert cache.all() == [second, third]
    huge = Branch("huge", "root-huge", False, total_tokens=5000)
    assert cache.put(huge) == [second, third] and cache.all() == [huge]
    by_count = BranchCache(max_branches=2, max_tokens=None)
    for branch in (first, second, third):
        by_count.put(branch)
    assert by_count.all() == [second, third]
    # A conversation's new messages are measured after it is put: recounted then, a one-shot megabyte counts at once.
    grows = BranchCache(max_branches=100, max_tokens=1000)
    small, one_shot = Branch("small", "root-small", False, total_tokens=300), Branch("one", "root-one", False)
    assert grows.put(small) == [] and grows.put(one_shot) == []
    one_shot.total_tokens = 900
    assert grows.recount(one_shot) == [small] and grows.all() == [one_shot]
    grows.drop(one_shot)  # what a dropped one held is let go with it
    assert grows.put(small) == [] and grows.put(first) == [] and grows.all() == [small, first]


def test_every_result_of_thousands_of_parallel_calls_gets_its_own_call() -> None:
    """A request of one assistant message with thousands of calls and their results: ingest and settling find
    each result's call through one lookup (result by result it was quadratic: 16 s of CPU for 4,000; see
    bench.adversarial), and find the same call a lookup of its own finds."""
    import json

    from proxy.ingest import CallLookup, context_for

    count = 3_000
    calls = [{"id": f"c{n}", "type": "function", "function": {"name": "bash", "arguments": json.dumps(
        {"command": f"sed -i 's/a/b/' src/m{n}.py"})}} for n in range(count)]
    messages = [{"role": "system", "content": "agent"}, {"role": "user", "content": "go"},
                {"role": "assistant", "content": "Editing all modules.", "tool_calls": calls},
                *({"role": "tool", "tool_call_id": f"c{n}", "content": "ok"} for n in range(count)),
                {"role": "user", "content": "thanks"}]
    lookup = CallLookup(messages)
    contexts = [context_for(messages, index, "", 1, lookup=lookup) for index in range(3, len(messages))]
    assert [c.call.id if c.call else None for c in contexts[:-1]] == [f"c{n}" for n in range(count)]
    # the user's turn after the results answers the assistant's message before them (an approval question)
    assert contexts[-1].call is None and contexts[-1].previous_assistant_text == "Editing all modules."
    for index in (3, 1_500, count + 2):
        assert context_for(messages, index, "", 1) == contexts[index - 3]
