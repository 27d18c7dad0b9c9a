"""The fake provider and server helpers, driven over real HTTP by the official openai SDK and httpx."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import openai
import pytest
from starlette.applications import Starlette

from fakeupstream import Completion, CutStream, Error, FakeUpstream, Hang, Recorded, ToolCall, Usage
from servers import ServerProcess, ServerThread, free_port

pytestmark = pytest.mark.e2e

MESSAGES: list[Any] = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[FakeUpstream, ServerThread]]:
    fake = FakeUpstream()
    with ServerThread(fake.app) as thread:
        yield fake, thread


@pytest.fixture
def fake(server: tuple[FakeUpstream, ServerThread]) -> FakeUpstream:
    server[0].reset()
    return server[0]


@pytest.fixture
def url(server: tuple[FakeUpstream, ServerThread]) -> str:
    return server[1].url


@pytest.fixture
def client(url: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=url + "/v1", api_key="k", timeout=10, max_retries=0) as c:
        yield c


def test_default_reply_echoes_and_request_is_recorded(fake: FakeUpstream, client: openai.OpenAI) -> None:
    r = client.chat.completions.create(model="m1", messages=MESSAGES, temperature=0)
    assert r.choices[0].message.content == "echo: hi"
    assert r.choices[0].finish_reason == "stop"
    assert (r.id, r.object, r.model) == ("chatcmpl-fake-1", "chat.completion", "m1")
    assert r.usage is not None and r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    [rec] = fake.requests
    assert (rec.method, rec.path) == ("POST", "/v1/chat/completions")
    assert rec.headers["authorization"] == "Bearer k"
    assert rec.body == {"model": "m1", "messages": MESSAGES, "temperature": 0}
    assert json.loads(rec.raw) == rec.body


def test_echo_reads_content_parts(fake: FakeUpstream, client: openai.OpenAI) -> None:
    parts = [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "x"}}, {"type": "text", "text": "b"}]
    r = client.chat.completions.create(model="m", messages=[{"role": "user", "content": parts}])
    assert r.choices[0].message.content == "echo: ab"


def test_script_is_fifo_then_default(fake: FakeUpstream, client: openai.OpenAI) -> None:
    fake.script(Completion("one", usage=Usage(100, 3, cached_tokens=80), model="served"), Completion("two"))
    assert fake.pending() == 2
    first = client.chat.completions.create(model="m", messages=MESSAGES)
    assert first.choices[0].message.content == "one"
    assert first.model == "served"
    assert first.usage is not None and (first.usage.prompt_tokens, first.usage.total_tokens) == (100, 103)
    assert first.usage.prompt_tokens_details is not None and first.usage.prompt_tokens_details.cached_tokens == 80
    assert client.chat.completions.create(model="m", messages=MESSAGES).choices[0].message.content == "two"
    assert client.chat.completions.create(model="m", messages=MESSAGES).choices[0].message.content == "echo: hi"
    assert fake.pending() == 0
    assert len(fake.chat_requests()) == 3


def test_callable_reply_decides_from_the_body(fake: FakeUpstream, client: openai.OpenAI) -> None:
    fake.script(lambda body: Completion(f"{len(body['messages'])} messages"))
    r = client.chat.completions.create(model="m", messages=MESSAGES)
    assert r.choices[0].message.content == "2 messages"


def test_stream_with_usage(fake: FakeUpstream, client: openai.OpenAI) -> None:
    fake.script(Completion(pieces=["Hel", "lo", " world"], usage=Usage(7, 3)))
    stream = client.chat.completions.create(
        model="m", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    assert all(c.object == "chat.completion.chunk" and c.id == chunks[0].id for c in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].delta.content for c in chunks[1:4]] == ["Hel", "lo", " world"]
    assert chunks[4].choices[0].finish_reason == "stop"
    assert all(c.usage is None for c in chunks[:-1])
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None and (chunks[-1].usage.prompt_tokens, chunks[-1].usage.total_tokens) == (7, 10)
    assert len(chunks) == 6
    assert fake.requests[0].body["stream_options"] == {"include_usage": True}


def test_stream_without_include_usage_splits_words(fake: FakeUpstream, client: openai.OpenAI) -> None:
    fake.script(Completion("a few  words"))
    chunks = list(client.chat.completions.create(model="m", messages=MESSAGES, stream=True))
    assert [c.choices[0].delta.content for c in chunks[1:-1]] == ["a ", "few  ", "words"]
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert all(c.usage is None and c.choices for c in chunks)


def test_stream_chunks_arrive_one_by_one(fake: FakeUpstream, url: str) -> None:
    fake.script(Completion(pieces=["a", "b", "c"], chunk_delay=0.15))
    body = {"model": "m", "messages": MESSAGES, "stream": True}
    arrivals: list[tuple[float, str]] = []
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=5) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line:
                arrivals.append((time.monotonic(), line))
    assert arrivals[-1][1] == "data: [DONE]"
    contents = [json.loads(line[6:])["choices"][0]["delta"].get("content") for _, line in arrivals[:-1]]
    assert contents == ["", "a", "b", "c", None]
    gaps = [later[0] - earlier[0] for earlier, later in zip(arrivals[1:4], arrivals[2:5])]
    assert all(gap > 0.1 for gap in gaps), gaps


def test_tool_calls_non_streamed(fake: FakeUpstream, client: openai.OpenAI) -> None:
    fake.script(Completion(tool_calls=[ToolCall("read_file", '{"path": "a.py"}'), ToolCall("ls", id="call_x")]))
    r = client.chat.completions.create(model="m", messages=MESSAGES)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    calls = choice.message.tool_calls or []
    assert [(c.id, c.function.name, c.function.arguments) for c in calls] == [  # type: ignore[union-attr]
        ("call_1_0", "read_file", '{"path": "a.py"}'),
        ("call_x", "ls", "{}"),
    ]


def test_tool_calls_streamed(fake: FakeUpstream, client: openai.OpenAI) -> None:
    fake.script(Completion("let me look", tool_calls=[ToolCall("read_file", '{"path": "a.py"}'), ToolCall("ls")]))
    content = ""
    calls: dict[int, dict[str, str]] = {}
    finish = None
    for chunk in client.chat.completions.create(model="m", messages=MESSAGES, stream=True):
        delta = chunk.choices[0].delta
        content += delta.content or ""
        for tc in delta.tool_calls or []:
            call = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
            call["id"] += tc.id or ""
            call["name"] += (tc.function and tc.function.name) or ""
            call["arguments"] += (tc.function and tc.function.arguments) or ""
        finish = chunk.choices[0].finish_reason or finish
    assert content == "let me look"
    assert calls == {
        0: {"id": "call_1_0", "name": "read_file", "arguments": '{"path": "a.py"}'},
        1: {"id": "call_1_1", "name": "ls", "arguments": "{}"},
    }
    assert finish == "tool_calls"


@pytest.mark.parametrize(
    ("status", "exc_type", "kind", "code"),
    [
        (400, openai.BadRequestError, "invalid_request_error", "context_length_exceeded"),
        (401, openai.AuthenticationError, "invalid_request_error", "invalid_api_key"),
        (429, openai.RateLimitError, "rate_limit_error", "rate_limit_exceeded"),
        (500, openai.InternalServerError, "server_error", None),
    ],
)
@pytest.mark.parametrize("stream", [False, True])
def test_error_statuses_surface_as_sdk_exceptions(
    fake: FakeUpstream,
    client: openai.OpenAI,
    status: int,
    exc_type: type[openai.APIStatusError],
    kind: str,
    code: str | None,
    stream: bool,
) -> None:
    fake.script(Error(status, f"boom {status}", kind, code, headers={"retry-after": "7"}))
    with pytest.raises(exc_type) as info:
        client.chat.completions.create(model="m", messages=MESSAGES, stream=stream)
    assert info.value.status_code == status
    assert f"boom {status}" in info.value.message
    assert info.value.body == {"message": f"boom {status}", "type": kind, "param": None, "code": code}
    assert (info.value.type, info.value.code) == (kind, code)
    assert info.value.response.headers["retry-after"] == "7"


def test_hang_times_out_the_client_and_sees_the_disconnect(fake: FakeUpstream, client: openai.OpenAI) -> None:
    fake.script(Hang(30))
    started = time.monotonic()
    with pytest.raises(openai.APITimeoutError):
        client.chat.completions.create(model="m", messages=MESSAGES, timeout=0.3)
    assert time.monotonic() - started < 1.5
    assert fake.requests[0].disconnected.wait(2)


def test_hang_then_answers(fake: FakeUpstream, client: openai.OpenAI) -> None:
    fake.script(Hang(0.3, then=Completion("late")))
    started = time.monotonic()
    r = client.chat.completions.create(model="m", messages=MESSAGES)
    assert 0.3 <= time.monotonic() - started < 1.5
    assert r.choices[0].message.content == "late"
    assert not fake.requests[0].disconnected.is_set()


def test_hang_does_not_block_other_requests(fake: FakeUpstream, url: str) -> None:
    fake.script(Hang(1.0, then=Completion("slow")))

    async def both() -> tuple[str | None, str | None, float]:
        async with openai.AsyncOpenAI(base_url=url + "/v1", api_key="k", timeout=5, max_retries=0) as c:
            slow = asyncio.create_task(c.chat.completions.create(model="m", messages=MESSAGES))
            await asyncio.sleep(0.1)  # let the hanging request take the first scripted reply
            started = time.monotonic()
            fast = await c.chat.completions.create(model="m", messages=MESSAGES)
            fast_took = time.monotonic() - started
            return (await slow).choices[0].message.content, fast.choices[0].message.content, fast_took

    slow, fast, fast_took = asyncio.run(asyncio.wait_for(both(), timeout=5))
    assert (slow, fast) == ("slow", "echo: hi")
    assert fast_took < 0.5


def test_cut_stream_raises_during_iteration(fake: FakeUpstream, client: openai.OpenAI) -> None:
    fake.script(CutStream(["par", "tial"]))
    seen: list[str] = []
    with pytest.raises(openai.APIConnectionError) as info:
        for chunk in client.chat.completions.create(model="m", messages=MESSAGES, stream=True):
            seen.append(chunk.choices[0].delta.content or "")
    assert seen == ["", "par", "tial"]
    assert "incomplete chunked read" in repr(info.value.__cause__)


def test_cut_stream_async(fake: FakeUpstream, url: str) -> None:
    fake.script(CutStream(["x"], chunk_delay=0.05))

    async def consume(seen: list[str]) -> None:
        async with openai.AsyncOpenAI(base_url=url + "/v1", api_key="k", timeout=5, max_retries=0) as c:
            stream = await c.chat.completions.create(model="m", messages=MESSAGES, stream=True)
            async for chunk in stream:
                seen.append(chunk.choices[0].delta.content or "")

    seen: list[str] = []
    with pytest.raises(openai.APIConnectionError):
        asyncio.run(asyncio.wait_for(consume(seen), timeout=5))
    assert seen == ["", "x"]


def test_cut_non_streamed_body_is_a_connection_error(fake: FakeUpstream, client: openai.OpenAI) -> None:
    fake.script(CutStream())
    with pytest.raises(openai.APIConnectionError):
        client.chat.completions.create(model="m", messages=MESSAGES)


def test_async_stream_with_usage(fake: FakeUpstream, url: str) -> None:
    fake.script(Completion("one two"))

    async def collect() -> list[Any]:
        async with openai.AsyncOpenAI(base_url=url + "/v1", api_key="k", timeout=5, max_retries=0) as c:
            stream = await c.chat.completions.create(
                model="m", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
            )
            return [chunk async for chunk in stream]

    chunks = asyncio.run(asyncio.wait_for(collect(), timeout=5))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "one two"
    assert chunks[-1].usage is not None and chunks[-1].choices == []


def test_client_leaving_a_slow_stream_is_seen(fake: FakeUpstream, url: str) -> None:
    fake.script(Completion(pieces=["a", "b", "c", "d"], chunk_delay=0.2))
    body = {"model": "m", "messages": MESSAGES, "stream": True}
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=5) as response:
        next(response.iter_lines())
    assert fake.requests[0].disconnected.wait(2)


@pytest.mark.parametrize("encoding", ["base64", "float"])
def test_embeddings(fake: FakeUpstream, client: openai.OpenAI, encoding: str) -> None:
    # The SDK asks for base64 unless told otherwise, and decodes it back to floats.
    kwargs: dict[str, Any] = {} if encoding == "base64" else {"encoding_format": "float"}
    r = client.embeddings.create(model="emb", input=["alpha", "beta"], **kwargs)
    assert r.model == "emb"
    assert [d.index for d in r.data] == [0, 1]
    assert all(len(d.embedding) == 8 for d in r.data)
    assert r.data[0].embedding != r.data[1].embedding
    again = client.embeddings.create(model="emb", input="alpha", encoding_format="float", dimensions=8)
    assert again.data[0].embedding == r.data[0].embedding  # deterministic, same in both encodings
    assert fake.requests[0].body["encoding_format"] == encoding
    assert len(client.embeddings.create(model="emb", input="x", dimensions=3).data[0].embedding) == 3


def test_models(fake: FakeUpstream, client: openai.OpenAI) -> None:
    assert [m.id for m in client.models.list()] == ["fake-model"]
    assert fake.requests[0] == Recorded("/v1/models", fake.requests[0].headers, {}, "GET", b"")


def test_unknown_path_and_bad_body_are_recorded(fake: FakeUpstream, url: str) -> None:
    with httpx.Client(base_url=url, timeout=5) as http:
        missing = http.post("/v1/completions", json={"prompt": "x"})
        bad = http.post("/v1/chat/completions", content=b"not json", headers={"x-trace": "1"})
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "unknown_url"
    assert bad.status_code == 400
    assert bad.json()["error"]["type"] == "invalid_request_error"
    assert [(r.path, r.body) for r in fake.requests] == [("/v1/completions", {"prompt": "x"}), ("/v1/chat/completions", {})]
    assert fake.requests[1].raw == b"not json"
    assert fake.requests[1].headers["x-trace"] == "1"


def test_pieces_must_match_content() -> None:
    with pytest.raises(ValueError):
        Completion("abc", pieces=["a", "b"])


def test_custom_default_reply() -> None:
    fake = FakeUpstream(default=Error(503, "down"), models=["a", "b"])
    with ServerThread(fake.app) as server, httpx.Client(base_url=server.url, timeout=5) as http:
        assert http.post("/v1/chat/completions", json={"model": "m", "messages": MESSAGES}).status_code == 503
        assert [m["id"] for m in http.get("/v1/models").json()["data"]] == ["a", "b"]


def test_server_stop_is_bounded_with_a_request_in_flight() -> None:
    fake = FakeUpstream(default=Hang(30))
    server = ServerThread(fake.app).start()  # graceful_timeout=1
    statuses: list[int] = []

    def call() -> None:
        body = {"model": "m", "messages": MESSAGES}
        statuses.append(httpx.post(server.url + "/v1/chat/completions", json=body, timeout=10).status_code)

    caller = threading.Thread(target=call)
    caller.start()
    while not fake.requests:
        time.sleep(0.01)
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < 2  # ~1 s graceful timeout, then the hang is cancelled
    caller.join(5)
    assert statuses == [500]  # uvicorn answers 500 for a request cancelled before its response started


def test_server_thread_reports_startup_failure() -> None:
    @asynccontextmanager
    async def broken(app: Starlette) -> Any:
        raise RuntimeError("no database")
        yield

    server = ServerThread(Starlette(lifespan=broken))
    with pytest.raises(RuntimeError, match="exited during startup"):
        server.start()


def test_server_thread_url_is_known_before_start() -> None:
    server = ServerThread(FakeUpstream().app)
    assert server.url == f"http://127.0.0.1:{server.port}"
    with server, httpx.Client(timeout=5) as http:
        assert http.get(server.url + "/v1/models").status_code == 200


def test_server_process_serves_and_captures_output(tmp_path: Any) -> None:
    (tmp_path / "hello.txt").write_text("hello")
    port = free_port()
    argv = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"]
    with ServerProcess(argv, port, cwd=tmp_path, start_timeout=10) as proc:
        assert httpx.get(proc.url + "/hello.txt", timeout=5).text == "hello"
    assert proc.proc is not None and proc.proc.returncode is not None
    assert "GET /hello.txt" in proc.output()


def test_server_process_start_failure_includes_output() -> None:
    argv = [sys.executable, "-c", "import sys; print('config missing'); sys.exit(2)"]
    with pytest.raises(RuntimeError, match="(?s)exited with 2.*config missing"):
        ServerProcess(argv, free_port(), start_timeout=10).start()


def test_server_process_start_timeout_kills_the_process() -> None:
    argv = [sys.executable, "-c", "import time; print('still booting'); time.sleep(60)"]
    proc = ServerProcess(argv, free_port(), env={"X": "1"}, start_timeout=0.5)
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="still booting"):
        proc.start()
    assert time.monotonic() - started < 2
    assert proc.proc is not None and proc.proc.poll() is not None
