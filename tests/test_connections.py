"""The connections clients hold, against `workset serve` itself (its HTTP protocol is set up there): an idle
connection outlives the SDKs' own keep-alive, and a client that connects and says nothing, or trickles a request,
cannot hold a connection for ever."""

from __future__ import annotations

import http.client
import json
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fakeupstream import Hang
from servers import ServerProcess, free_port
from stores import store_location

REPO = Path(__file__).resolve().parent.parent
CHAT_HEAD = (b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
             b"content-length: 200\r\n\r\n")

pytestmark = pytest.mark.e2e


def serve(tmp_path: Path, fake: Any, config: Path) -> ServerProcess:
    port = free_port()
    argv = [str(Path(sys.executable).parent / "workset"), "serve", "--config", str(config), "--port", str(port),
            "--store", store_location(tmp_path / "store.db")]
    return ServerProcess(argv, port, env={"WORKSET_UPSTREAM_BASE": fake.url + "/v1"}, cwd=tmp_path)


@pytest.fixture
def strict(tmp_path: Path, fake: Any) -> Iterator[ServerProcess]:
    """workset with 1 s to read a request, 2 s of keep-alive, bodies up to 100 KB, and 100 KB of them arriving per
    caller, 150 KB in all."""
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["policies_dir"] = str(REPO / "policies")
    config["server"] = {**config.get("server", {}), "request_read_s": 1, "keep_alive_s": 2,
                        "max_body_bytes": 100_000, "max_reading_bytes_per_caller": 100_000,
                        "max_reading_bytes": 150_000}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    with serve(tmp_path, fake, path) as proxy:
        yield proxy


def connect(proxy: ServerProcess) -> socket.socket:
    return socket.create_connection(("127.0.0.1", proxy.port), timeout=10)


def healthy(proxy: ServerProcess) -> bool:
    connection = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
    try:
        connection.request("GET", "/healthz")
        return connection.getresponse().status == 200
    finally:
        connection.close()


def read_response(sock: socket.socket) -> tuple[bytes, bytes]:
    """One response's head and body (by its content-length)."""
    answer = b""
    while b"\r\n\r\n" not in answer and (chunk := sock.recv(65536)):
        answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
    while len(body) < length and (chunk := sock.recv(65536)):
        body += chunk
    return head, body


def read_until_closed(sock: socket.socket) -> tuple[bytes, float]:
    """What the server sends until it closes the connection, and how long that took."""
    began, answer = time.monotonic(), b""
    while chunk := sock.recv(65536):
        answer += chunk
    return answer, time.monotonic() - began


def test_an_idle_connection_outlives_the_sdks_keep_alive(tmp_path: Path, fake: Any) -> None:
    """The OpenAI and Anthropic Python SDKs (httpx) reuse an idle connection for 5 s. Were workset to close it at
    the same moment (uvicorn's default, 5 s), a request sent just then would meet a reset: under load, about one
    reuse in 200. workset keeps it open longer, so the client always lets go first."""
    with serve(tmp_path, fake, REPO / "config.yaml") as proxy:
        connection = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
        try:
            connection.request("GET", "/healthz")
            assert connection.getresponse().read() == b'{"status":"ok"}'
            first = connection.sock
            time.sleep(6.0)  # past the SDK's 5 s: the connection is still workset's to answer on
            connection.request("GET", "/healthz")  # were it closed, this would raise (http.client does not retry)
            assert connection.getresponse().read() == b'{"status":"ok"}' and connection.sock is first
        finally:
            connection.close()


def test_a_connection_that_sends_nothing_is_closed_after_the_keep_alive(strict: ServerProcess) -> None:
    with connect(strict) as sock:
        answer, took = read_until_closed(sock)
    assert answer == b"" and took < 8  # 2 s of keep-alive; uvicorn alone would wait for ever


@pytest.mark.parametrize("sent", [b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n", CHAT_HEAD + b'{"model": "m"'],
                         ids=["half a head", "half a body"])
def test_a_request_trickled_in_gets_a_408_and_its_connection_closed(strict: ServerProcess, sent: bytes) -> None:
    with connect(strict) as sock:
        sock.sendall(sent)
        answer, took = read_until_closed(sock)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408") and b"application/json" in head and took < 8
    error = json.loads(body)["error"]
    assert error["code"] == "request_timeout" and "server.request_read_s" in error["message"]
    assert healthy(strict)  # and the server serves the next client


def test_a_client_that_hangs_up_mid_body_is_logged_not_a_traceback(strict: ServerProcess) -> None:
    with connect(strict) as sock:
        sock.sendall(CHAT_HEAD + b'{"model": "m", "mess')
        time.sleep(0.3)
    assert healthy(strict)
    deadline = time.monotonic() + 10
    while '"status": 499' not in strict.output() and time.monotonic() < deadline:
        time.sleep(0.1)
    output = strict.output()
    assert '"status": 499' in output and "closed the connection before its request arrived whole" in output
    assert "Traceback" not in output and "Exception in ASGI application" not in output


def trickle(proxy: ServerProcess, key: str, sent: int, declared: int = 90_000) -> socket.socket:
    """A connection of `key` that sent the head of a chat request and `sent` bytes of its body, then waits."""
    sock = connect(proxy)
    sock.sendall(f"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {key}\r\n"
                 f"content-type: application/json\r\ncontent-length: {declared}\r\n\r\n".encode() + b" " * sent)
    return sock


def test_one_caller_cannot_hold_the_memory_of_bodies_arriving_slowly(strict: ServerProcess, fake: Any) -> None:
    import openai

    with trickle(strict, "sk-slow", 80_000) as slow:
        time.sleep(0.3)  # its 80 KB are read and held
        with trickle(strict, "sk-slow", 50_000) as more:
            head, body = read_response(more)
        assert head.startswith(b"HTTP/1.1 429") and b"retry-after: 1" in head.lower()
        assert json.loads(body)["error"]["code"] == "too_many_bytes_arriving"
        # another key is served meanwhile
        client = openai.OpenAI(base_url=strict.url + "/v1", api_key="sk-other", timeout=20, max_retries=0)
        reply = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "ping"}])
        assert reply.choices[0].message.content == "echo: ping"
        assert read_until_closed(slow)[0].startswith(b"HTTP/1.1 408")  # and the slow one times out, freeing its bytes
    client = openai.OpenAI(base_url=strict.url + "/v1", api_key="sk-slow", timeout=20, max_retries=0)
    reply = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "x" * 60_000}])
    assert reply.choices[0].message.content.startswith("echo: x")


def test_a_request_still_running_at_shutdown_gets_a_503_to_send_again(tmp_path: Path, fake: Any) -> None:
    """uvicorn cancels what still runs 5 s into a shutdown, and answered it with a plain-text 500 and a traceback in
    the log: now a 503 in OpenAI's format with retry-after (the SDKs send it again, to a server that is up)."""
    import threading

    import openai

    fake.script(Hang(60))
    proxy = serve(tmp_path, fake, REPO / "config.yaml")
    outcome: dict[str, Any] = {}

    def ask() -> None:
        client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-user", timeout=30, max_retries=0)
        try:
            client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "slow"}])
        except openai.APIStatusError as error:
            outcome["error"] = error

    with proxy:
        asking = threading.Thread(target=ask)
        asking.start()
        deadline = time.monotonic() + 10
        while not fake.chat_requests() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert fake.chat_requests(), "the request did not reach the provider"
    asking.join(30)  # the server stopped (ServerProcess.stop: SIGTERM, then its grace) and answered
    error = outcome["error"]
    assert error.status_code == 503 and error.response.headers["retry-after"] == "1"
    assert error.body["code"] == "shutting_down"
    assert "Traceback" not in proxy.output() and "request_cancelled" in proxy.output()
