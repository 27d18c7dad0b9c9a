"""The provider misbehaving, plain and streamed: every fault reaches the client as the status docs/reference.md
("Statuses") promises, with an OpenAI-format error body and the provider's pacing headers, and workset goes on
serving (issue 9, items 4 and 6). Also the summariser and the workset_recall follow-up rounds failing."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from fakeupstream import Completion, CutStream, Error, Hang, Raw, ToolCall
from servers import free_port

pytestmark = pytest.mark.e2e

CHAT = "/v1/chat/completions"
UPSTREAM_TIMEOUT_S = 2  # the faults proxy's upstream.timeout_s: a hang costs this long
PACING = {"retry-after": "3", "retry-after-ms": "2500", "x-ratelimit-limit-requests": "60",
          "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "3s",
          "x-ratelimit-remaining-tokens": "0", "x-request-id": "req_fault_1"}
HTML_PAGE = (b"<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head>"
             b"<body><h1>Bad Gateway</h1><p>nginx</p></body></html>")
COMPLETION = {"id": "chatcmpl-raw", "object": "chat.completion", "created": 1, "model": "gpt-test",
              "choices": [{"index": 0, "message": {"role": "assistant", "content": "raw answer"},
                           "finish_reason": "stop"}]}
CHUNK = {"id": "chatcmpl-raw", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test",
         "choices": [{"index": 0, "delta": {"content": "raw answer"}, "finish_reason": "stop"}]}
SSE = b"data: " + json.dumps(CHUNK).encode() + b"\n\ndata: [DONE]\n\n"


@pytest.fixture
def faulty(start_proxy: Any) -> Any:
    """A proxy whose provider timeout is short, so a hang costs seconds."""
    return start_proxy(upstream={"timeout_s": UPSTREAM_TIMEOUT_S, "connect_timeout_s": 2})


def ask(proxy: Any, streamed: bool, content: str = "hi", **headers: str) -> httpx.Response:
    body = {"model": "gpt-test", "messages": [{"role": "user", "content": content}], "stream": streamed}
    return httpx.post(proxy.url + CHAT, json=body, timeout=30, headers={"authorization": "Bearer sk-test", **headers})


def assert_openai_error(response: httpx.Response, status: int, code: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert isinstance(error["message"], str) and error["message"] and error["type"] and "code" in error
    if code is not None:
        assert error["code"] == code, error
    return error


def events(text: str) -> list[dict[str, Any]]:
    """The JSON events of an SSE body."""
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: {")]


def streamed_text(text: str) -> str:
    return "".join(event["choices"][0]["delta"].get("content") or "" for event in events(text)
                   if event.get("choices"))


def error_events(text: str) -> list[dict[str, Any]]:
    return [event["error"] for event in events(text) if "error" in event]


def assert_still_serving(proxy: Any, fake: Any) -> None:
    """After the fault, an ordinary request (plain and streamed) goes through."""
    fake.script(Completion("back to normal"), Completion("back to normal"))
    assert ask(proxy, False).json()["choices"][0]["message"]["content"] == "back to normal"
    streamed = ask(proxy, True)
    assert streamed.status_code == 200 and streamed.text.rstrip().endswith("data: [DONE]")
    assert streamed_text(streamed.text) == "back to normal"


both = pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])


# --- the provider answers with an error status ------------------------------------------------------------------------


@both
@pytest.mark.parametrize("status", [500, 502, 503])
def test_a_provider_5xx_is_relayed_with_its_message_and_headers(faulty: Any, fake: Any, streamed: bool,
                                                                status: int) -> None:
    fake.script(Error(status, "The server is overloaded", "server_error", "overloaded", headers=PACING))
    response = ask(faulty, streamed)
    error = assert_openai_error(response, status, "overloaded")
    assert error["message"] == "The server is overloaded"
    for name, value in PACING.items():
        assert response.headers.get(name) == value, name
    assert response.headers["x-workset-session"]  # workset's own headers too: the request was workset's to route
    assert_still_serving(faulty, fake)


@both
def test_a_429_keeps_retry_after_and_the_rate_limit_headers(faulty: Any, fake: Any, streamed: bool) -> None:
    fake.script(Error(429, "Rate limit reached", "requests", "rate_limit_exceeded",
                      headers={**PACING, "set-cookie": "provider=1"}))
    client = faulty.client()
    with pytest.raises(openai.RateLimitError) as caught:
        reply = client.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "x"}],
                                               stream=streamed)
        list(reply) if streamed else None
    headers = caught.value.response.headers
    for name, value in PACING.items():
        assert headers.get(name) == value, name
    assert "set-cookie" not in headers  # pacing and request ids pass, nothing else
    assert caught.value.code == "rate_limit_exceeded"
    assert_still_serving(faulty, fake)


@both
@pytest.mark.parametrize("status", [500, 503])
def test_an_html_error_page_becomes_an_openai_error_with_the_same_status(faulty: Any, fake: Any, streamed: bool,
                                                                         status: int) -> None:
    fake.script(Raw(status, HTML_PAGE, "text/html", headers={"x-request-id": "req_html"}))
    response = ask(faulty, streamed)
    error = assert_openai_error(response, status)
    assert "Bad Gateway" in error["message"]  # the page's text is kept for whoever reads the error
    assert response.headers["x-request-id"] == "req_html"
    assert_still_serving(faulty, fake)


# --- the provider says 200 but its answer is unusable -----------------------------------------------------------------


@both
@pytest.mark.parametrize("body, content_type", [
    (HTML_PAGE, "text/html"),  # a proxy in front of the provider answered with its own page
    (b'{"id": "chatcmpl-1", "choices": [{"message": ', "application/json"),  # cut short
    (b"", "application/json"),
    (b"upstream connect error or disconnect/reset before headers", "text/plain"),
], ids=["html", "invalid-json", "empty", "text"])
def test_a_200_that_is_not_a_completion_is_a_502(faulty: Any, fake: Any, streamed: bool, body: bytes,
                                                 content_type: str) -> None:
    fake.script(Raw(200, body, content_type, headers={"x-request-id": "req_bad"}))
    response = ask(faulty, streamed)
    error = assert_openai_error(response, 502, "invalid_upstream_response")
    assert "not JSON" in error["message"]
    assert response.headers["x-request-id"] == "req_bad"  # the client can quote the provider's request id
    assert_still_serving(faulty, fake)


@pytest.mark.parametrize("content_type", ["text/plain", None, "application/octet-stream"])
def test_a_completion_with_a_wrong_content_type_is_relayed_as_json(faulty: Any, fake: Any,
                                                                   content_type: str | None) -> None:
    fake.script(Raw(200, json.dumps(COMPLETION).encode(), content_type))
    raw = faulty.client().chat.completions.with_raw_response.create(
        model="gpt-test", messages=[{"role": "user", "content": "x"}])
    assert raw.headers["content-type"] == "application/json"
    assert raw.parse().choices[0].message.content == "raw answer"


@pytest.mark.parametrize("content_type", ["text/plain", None, "text/html"])
def test_a_stream_with_a_wrong_content_type_is_relayed_as_a_stream(faulty: Any, fake: Any,
                                                                   content_type: str | None) -> None:
    fake.script(Raw(200, SSE, content_type))
    stream = faulty.client().chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "x"}],
                                                     stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "raw answer"


def test_a_provider_that_ignores_stream_gets_its_whole_answer_relayed(faulty: Any, fake: Any) -> None:
    fake.script(Raw(200, json.dumps(COMPLETION).encode(), "application/json"))
    response = ask(faulty, streamed=True)
    assert response.status_code == 200 and response.headers["content-type"] == "application/json"
    assert response.json()["choices"][0]["message"]["content"] == "raw answer"


# --- the connection fails ---------------------------------------------------------------------------------------------


def test_a_cut_stream_ends_with_an_error_event_not_silently(faulty: Any, fake: Any) -> None:
    fake.script(CutStream(pieces=["partial ", "answer"]))
    response = ask(faulty, streamed=True)
    assert response.status_code == 200  # the stream had started when the provider went away
    # what arrived before the cut, relayed (the last bytes may be lost with the connection), then the error
    assert "partial answer".startswith(streamed_text(response.text)) and "[DONE]" not in response.text
    [error] = error_events(response.text)
    assert error["code"] == "stream_cut"
    fake.script(CutStream(pieces=["partial ", "answer"]))
    with pytest.raises(openai.APIError):  # the SDK raises instead of returning a truncated answer
        list(faulty.client().chat.completions.create(model="gpt-test", stream=True,
                                                     messages=[{"role": "user", "content": "x"}]))
    assert_still_serving(faulty, fake)


def test_a_cut_plain_answer_is_a_502(faulty: Any, fake: Any) -> None:
    fake.script(CutStream())
    assert_openai_error(ask(faulty, streamed=False), 502, "upstream_error")
    assert_still_serving(faulty, fake)


@both
def test_a_provider_that_never_answers_is_a_504_after_the_upstream_timeout(faulty: Any, fake: Any,
                                                                           streamed: bool) -> None:
    fake.script(Hang(60))
    started = time.monotonic()
    response = ask(faulty, streamed)
    assert_openai_error(response, 504, "timeout")
    assert time.monotonic() - started < 30  # bounded by upstream.timeout_s, not by the provider
    assert fake.chat_requests()[-1].disconnected.wait(10)  # workset hung up on the provider
    assert_still_serving(faulty, fake)


def test_a_stream_that_stalls_ends_with_a_timeout_event(faulty: Any, fake: Any) -> None:
    fake.script(Completion(pieces=["first ", "second"], chunk_delay=UPSTREAM_TIMEOUT_S + 20))
    response = ask(faulty, streamed=True)
    assert response.status_code == 200 and "[DONE]" not in response.text
    [error] = error_events(response.text)
    assert error["code"] == "timeout" and "stalled" in error["message"]
    assert_still_serving(faulty, fake)


@both
def test_an_unreachable_provider_is_a_502(start_proxy: Any, fake: Any, streamed: bool) -> None:
    proxy = start_proxy(upstream_url=f"http://127.0.0.1:{free_port()}", upstream={"timeout_s": 5,
                                                                                   "connect_timeout_s": 2})
    error = assert_openai_error(ask(proxy, streamed), 502, "upstream_error")
    assert error["type"] == "upstream_unreachable"


def test_faults_of_one_caller_leave_other_callers_alone(faulty: Any, fake: Any) -> None:
    """A hanging request and a healthy one at the same time: the healthy one is answered at once."""
    fake.script(Hang(60))
    hanging: dict[str, httpx.Response] = {}
    thread = threading.Thread(target=lambda: hanging.setdefault("response", ask(faulty, False, "stuck")))
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not fake.chat_requests() and time.monotonic() < deadline:
            time.sleep(0.02)
        other = ask(faulty, False, "fine", authorization="Bearer sk-other")
        assert other.status_code == 200 and "response" not in hanging
    finally:
        thread.join(30)
    assert_openai_error(hanging["response"], 504)


class KeepAliveDropper:
    """A provider on a raw socket that answers the first request of each connection with keep-alive, then reads
    the next one and closes without a word: what a provider does when its keep-alive runs out just as workset
    picks the pooled connection. `drop_first` drops even a new connection's first request."""

    def __init__(self, drop_first: bool = False) -> None:
        self.drop_first = drop_first
        self.requests: list[tuple[int, int]] = []  # (connection, request number on it)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        connection_number = 0
        while not self._stopped.is_set():
            try:
                connection, _ = self._listener.accept()
            except (TimeoutError, OSError):
                continue
            connection_number += 1
            threading.Thread(target=self._answer, args=(connection, connection_number), daemon=True).start()

    def _answer(self, connection: socket.socket, number: int) -> None:
        connection.settimeout(30)
        with connection:
            for request_number in (1, 2):
                if not self._read_request(connection):
                    return
                self.requests.append((number, request_number))
                if request_number == 2 or self.drop_first:
                    return  # closed unanswered
                body = json.dumps(COMPLETION).encode()
                connection.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                                   b"content-length: %d\r\n\r\n%s" % (len(body), body))

    @staticmethod
    def _read_request(connection: socket.socket) -> bool:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = connection.recv(65536)
            if not chunk:
                return False
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:"))
        while len(body) < length:
            chunk = connection.recv(65536)
            if not chunk:
                return False
            body += chunk
        return True

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(5)
        self._listener.close()


@pytest.fixture
def dropper() -> Any:
    servers: list[KeepAliveDropper] = []

    def start(drop_first: bool = False) -> KeepAliveDropper:
        servers.append(KeepAliveDropper(drop_first))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


def test_a_pooled_connection_the_provider_closed_is_tried_again_on_a_new_one(start_proxy: Any,
                                                                             dropper: Any) -> None:
    provider = dropper()
    proxy = start_proxy(upstream_url=provider.url, upstream={"timeout_s": 10, "connect_timeout_s": 2})
    for turn in range(3):
        response = ask(proxy, streamed=turn == 1, content=f"turn {turn}")
        assert response.status_code == 200, response.text
        assert "raw answer" in response.text
    # each later request met the closed keep-alive first, then went out again on a new connection
    assert provider.requests == [(1, 1), (1, 2), (2, 1), (2, 2), (3, 1)]


def test_a_new_connection_the_provider_closes_is_a_502_sent_once(start_proxy: Any, dropper: Any) -> None:
    provider = dropper(drop_first=True)
    proxy = start_proxy(upstream_url=provider.url, upstream={"timeout_s": 10, "connect_timeout_s": 2})
    assert_openai_error(ask(proxy, streamed=False), 502, "upstream_error")
    assert provider.requests == [(1, 1)]  # a provider that fails on a fresh connection is not asked twice


# --- follow-up rounds: the summariser and workset_recall --------------------------------------------------------------


TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {}}}}]


def agent_run(steps: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."},
                                      {"role": "user", "content": "Read the config parts. Never edit them."}]
    for step in range(steps):
        messages.append({"role": "assistant", "content": f"Reading part {step}.", "tool_calls": [
            {"id": f"c{step}", "type": "function",
             "function": {"name": "bash", "arguments": json.dumps({"command": f"cat part{step}.txt"})}}]})
        messages.append({"role": "tool", "tool_call_id": f"c{step}",
                         "content": f"header of part {step}\n" + "filler words " * 120 + f"\nvalue = V{step}"})
    return messages


@pytest.mark.parametrize("fault", [Error(500, "summariser down"), Raw(200, HTML_PAGE, "text/html"),
                                   Raw(200, b"{not json", "application/json"), CutStream()],
                         ids=["500", "html", "invalid-json", "cut"])
def test_a_failing_summariser_never_fails_the_agent(start_proxy: Any, fake: Any, tmp_path: Path,
                                                    fault: Any) -> None:
    policy = tmp_path / "summ.yaml"
    policy.write_text("name: summ\nrecent_turns: 3\nbudget: {max_input_tokens: 3000, trigger_ratio: 0.8, "
                      "target_ratio: 0.4}\nsummarizer: {mode: llm, model: fake-summarizer, precompute_ratio: 0.45, "
                      "timeout_s: 5}\n")
    proxy = start_proxy(policy_by_model={"summ-*": str(policy)})
    fake.answer_model("fake-summarizer", fault)
    client = proxy.client()
    messages = agent_run(16)
    for end in range(4, len(messages) + 1, 2):
        reply = client.chat.completions.create(model="summ-model", messages=messages[:end], tools=TOOLS,
                                               extra_headers={"x-workset-session": "summ"})
        assert reply.choices[0].message.content  # every agent request answered
    assert any(r.body.get("model") == "fake-summarizer" for r in fake.requests)  # the summariser was asked
    proxy.flush()
    session = proxy.engine.store.sessions()[0]["id"]
    epochs = [row["epoch"] for row in proxy.engine.store.checkpoints(session)]
    assert epochs and not any(epoch["summary"] for epoch in epochs)  # the digest stood in for the summary
    assert_still_serving(proxy, fake)


def recalling_proxy(start_proxy: Any, fake: Any) -> tuple[Any, list[dict[str, Any]]]:
    """A session compacted far enough that workset offers workset_recall."""
    proxy = start_proxy(upstream={"timeout_s": UPSTREAM_TIMEOUT_S, "connect_timeout_s": 2})
    client = proxy.client()
    messages = agent_run(14)
    for end in range(4, len(messages) + 1, 2):
        client.chat.completions.create(model="small-test", messages=messages[:end], tools=TOOLS,
                                       extra_headers={"x-workset-session": "recall-faults"})
    assert any(t["function"]["name"] == "workset_recall" for t in fake.chat_requests()[-1].body.get("tools", []))
    return proxy, messages


RECALL_HEADERS = {"authorization": "Bearer sk-test", "x-workset-session": "recall-faults"}


def recall_call(body: dict[str, Any]) -> Completion:
    return Completion(content="Let me look that up. ",
                      tool_calls=[ToolCall("workset_recall", json.dumps({"query": "value = V0"}), "rc_1")])


@pytest.mark.parametrize("fault, status, code", [
    (Error(503, "overloaded", "server_error", "overloaded", headers={"retry-after": "4"}), 503, "overloaded"),
    (Hang(60), 504, "timeout"),
    (Raw(200, HTML_PAGE, "text/html"), 502, "invalid_upstream_response"),
], ids=["503", "hang", "html"])
def test_a_recall_follow_up_that_fails_is_the_clients_error_plain(start_proxy: Any, fake: Any, fault: Any,
                                                                  status: int, code: str) -> None:
    proxy, messages = recalling_proxy(start_proxy, fake)
    fake.script(recall_call, fault)
    response = httpx.post(proxy.url + CHAT, timeout=30, headers=RECALL_HEADERS,
                          json={"model": "small-test", "messages": messages, "tools": TOOLS})
    assert_openai_error(response, status, code)
    if status == 503:
        assert response.headers["retry-after"] == "4"
    assert len(fake.chat_requests()) >= 2 and fake.chat_requests()[-1].body["messages"][-1]["role"] == "tool"
    assert_still_serving(proxy, fake)


@pytest.mark.parametrize("fault", [Error(503, "overloaded"), Hang(60), CutStream(pieces=["The value"])],
                         ids=["503", "hang", "cut"])
def test_a_recall_follow_up_that_fails_ends_the_stream_with_an_error_event(start_proxy: Any, fake: Any,
                                                                          fault: Any) -> None:
    proxy, messages = recalling_proxy(start_proxy, fake)
    fake.script(recall_call, fault)
    response = httpx.post(proxy.url + CHAT, timeout=30, headers=RECALL_HEADERS,
                          json={"model": "small-test", "messages": messages, "tools": TOOLS, "stream": True})
    assert response.status_code == 200 and streamed_text(response.text).startswith("Let me look that up.")
    assert "[DONE]" not in response.text and len(error_events(response.text)) == 1
    assert_still_serving(proxy, fake)
