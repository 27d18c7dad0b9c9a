"""`make soak`: malformed and odd chat-completions requests against a real `workset serve` (issue 9, item 6).

    python -m bench.fuzz --requests 10000 --seed 1   # exits 1 on any failure, after a summary
    python -m bench.fuzz --seed 1 --show 1234        # print case 1234 (every case can be drawn alone)
    python -m bench.fuzz --seed 1 --only 1234        # send case 1234 alone

workset runs as a subprocess (`python -m proxy serve`) in front of the tests' fake provider (tests/fakeupstream.py,
in a thread here), which answers every chat completion with 200 and tags each answer with an `x-request-id` of
its own, so a relayed provider status is told apart from workset's. Cases (bench/fuzz_cases.py) go out `--concurrency`
at a time with httpx (raw bytes), the openai SDK (a share of the valid ones) or a plain socket (headers clients
refuse to send). Checked and counted: statuses >= 500 workset caused, hangs (no answer within --timeout),
closed or reset connections, 4xx bodies not in OpenAI's error format, 2xx that are not a completion or an SSE
stream ending in [DONE], valid requests not forwarded (or changed when workset had nothing to change), invalid
requests not refused or reaching the provider, and tracebacks in workset's log other than logged fail-open events.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import re
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson

ROOT = Path(__file__).resolve().parent.parent
for folder in (ROOT, ROOT / "tests"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from conftest import write_config  # noqa: E402
from fakeupstream import Completion, FakeUpstream  # noqa: E402
from servers import ServerProcess, ServerThread, free_port  # noqa: E402
from starlette.types import Message, Receive, Scope, Send  # noqa: E402

from bench.fuzz_cases import CHAT, MARKER_PREFIX, Case, Cases  # noqa: E402
from proxy.recall import RECALL_DEFINITION  # noqa: E402
from proxy.tokens import TokenCounter  # noqa: E402

RECALL_TOKENS = TokenCounter().tools([RECALL_DEFINITION])  # what offering workset's recall tool adds to a request

PROVIDER_TAG = "fuzz-provider-"  # x-request-id of every provider answer: fuzz-provider-<status>
MARKER = re.compile(rb"\b" + MARKER_PREFIX.encode() + rb"-\d+-\d+-end\b")
FAIL_OPEN = frozenset({"workset_step_failed", "ingest_failed", "recall_failed", "summary_job_failed"})
KEYS = ("sk-fuzz-a", "sk-fuzz-b", "sk-fuzz-c")  # a few callers, so sessions of several namespaces interleave
PROGRESS_EVERY = 1000  # requests between two progress lines on stderr
FAKE_RESET_EVERY = 500  # the fake keeps every request it gets: drop them now and then (markers are kept here)

# The failures the summary counts, in the order it prints them.
CHECKS = {
    "workset_5xx": "5xx caused by workset",
    "hang": "hangs (no answer in time)",
    "closed": "closed or reset connections",
    "error_format": "4xx bodies not in OpenAI's error format",
    "bad_completion": "2xx that are not a valid completion or SSE stream ending in [DONE]",
    "not_forwarded": "valid requests not answered 2xx",
    "missing_at_provider": "valid requests that never reached the provider",
    "changed": "valid requests changed on the way though workset kept them whole",
    "not_refused": "invalid requests not refused with the documented status",
    "refused_but_sent": "refused requests that reached the provider",
    "log_traceback": "tracebacks or errors in workset's log (fail-open events aside)",
    "dead": "workset not serving after the run",
}


@dataclass(frozen=True)
class Options:
    requests: int = 10_000
    seed: int = 1
    concurrency: int = 8
    timeout_s: float = 60.0  # a request without a whole answer by then is a hang
    max_body_bytes: int = 4 * 1024 * 1024  # the served workset's server.max_body_bytes; cases go past it
    only: int | None = None


@dataclass
class Failure:
    check: str
    number: int
    kind: str
    detail: str


@dataclass
class Answer:
    """What came back for one case, whichever client sent it."""

    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    chunks: list[Any] | None = None  # the SDK's parsed stream chunks
    error: tuple[str, str] | None = None  # (check, detail) when there was no proper answer
    seconds: float = 0.0


@dataclass
class Summary:
    options: Options
    seconds: float = 0.0
    sent: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    kinds: Counter[str] = field(default_factory=Counter)
    via: Counter[str] = field(default_factory=Counter)
    failures: list[Failure] = field(default_factory=list)
    fail_open: Counter[str] = field(default_factory=Counter)
    http_layer: int = 0  # 4xx the HTTP layer answered before workset (not JSON)
    relayed_5xx: int = 0
    provider_crashes: int = 0
    forwarded: int = 0
    compared: int = 0  # forwarded bodies compared with what was sent
    latencies: list[tuple[float, int, str]] = field(default_factory=list)

    def ok(self) -> bool:
        return not self.failures

    def render(self) -> str:
        o = self.options
        rate = self.sent / self.seconds if self.seconds else 0.0
        lines = [f"workset fuzz: seed {o.seed}, {self.sent} requests, {o.concurrency} in flight, "
                 f"{self.seconds:.1f} s ({rate:.0f} req/s), timeout {o.timeout_s:g} s"]
        lines.append("kinds: " + ", ".join(f"{k} {n}" for k, n in sorted(self.kinds.items())))
        lines.append("sent with: " + ", ".join(f"{k} {n}" for k, n in sorted(self.via.items())))
        lines.append("statuses: " + ", ".join(f"{s or 'none'}: {n}" for s, n in sorted(self.statuses.items())))
        if self.latencies:
            seconds = sorted(latency for latency, _, _ in self.latencies)
            slowest = sorted(self.latencies, reverse=True)[:3]
            lines.append(f"latency: p50 {statistics.median(seconds) * 1000:.0f} ms, "
                         f"p99 {seconds[int(0.99 * (len(seconds) - 1))] * 1000:.0f} ms, slowest "
                         + ", ".join(f"{s:.2f} s (case {n}, {k})" for s, n, k in slowest))
        lines.append(f"forwarded {self.forwarded} valid requests; {self.compared} compared byte for byte at the "
                     "provider (parsed)")
        lines.append("checks:")
        counts = Counter(f.check for f in self.failures)
        for check, label in CHECKS.items():
            lines.append(f"  {label}: {counts.get(check, 0)}")
        lines.append("noted:")
        lines.append(f"  fail-open events logged: {sum(self.fail_open.values())}")
        for event, count in self.fail_open.most_common(10):
            lines.append(f"    {count} x {event}")
        lines.append(f"  4xx answered by the HTTP layer before workset (plain text): {self.http_layer}")
        lines.append(f"  5xx relayed from the provider: {self.relayed_5xx}; fake provider crashes: "
                     f"{self.provider_crashes}")
        if self.failures:
            lines.append(f"failures ({len(self.failures)}; replay one with: python -m bench.fuzz --seed {o.seed} "
                         "--only N):")
            for failure in self.failures[:30]:
                lines.append(f"  case {failure.number} ({failure.kind}) {failure.check}: {failure.detail[:300]}")
        lines.append("result: " + ("ok" if self.ok() else "FAILED"))
        return "\n".join(lines)


# --- the provider ----------------------------------------------------------------------------------------------------


def digest(body: Any) -> str | None:
    """A digest of a request body as parsed, model aside (workset names the provider's model) and workset's recall
    tool aside (offered from the first request); None past orjson's depth."""
    if not isinstance(body, dict):
        return None
    body = {k: v for k, v in body.items() if k != "model"}
    tools = body.get("tools")
    if isinstance(tools, list) and tools and tools[-1] == RECALL_DEFINITION:
        body["tools"] = tools[:-1]
        if not body["tools"]:
            del body["tools"]  # workset added the list for its tool alone
    try:
        canonical = orjson.dumps(body, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        return None
    return hashlib.sha256(canonical).hexdigest()


class RecordingProvider:
    """The fake provider behind a recorder: which markers reached it, with a digest of each body, and every answer
    tagged with x-request-id fuzz-provider-<status> (workset relays x-request-id)."""

    def __init__(self) -> None:
        # A short fixed answer: echoing a multi-megabyte message back, word by word when streamed, would make the
        # provider (in this process) the slowest part of the run.
        self.fake = FakeUpstream(default=lambda body: Completion(content="fuzz ok"))
        self._lock = threading.Lock()
        self._received: dict[str, str | None] = {}
        self._requests = 0
        self.crashes = 0

    def received(self, marker: str) -> tuple[bool, str | None]:
        with self._lock:
            return marker in self._received, self._received.get(marker)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.fake.app(scope, receive, send)
            return
        parts: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return
            parts.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        raw = b"".join(parts)
        markers = {m.decode() for m in MARKER.findall(raw)}
        if markers:
            try:
                body_digest = digest(orjson.loads(raw))
            except orjson.JSONDecodeError:
                body_digest = None
            with self._lock:
                self._received.update(dict.fromkeys(markers, body_digest))
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": raw, "more_body": False}

        async def tagged(message: Message) -> None:
            if message["type"] == "http.response.start":
                tag = (b"x-request-id", f"{PROVIDER_TAG}{message['status']}".encode())
                message = {**message, "headers": [*message.get("headers", []), tag]}
            await send(message)

        try:
            await self.fake.app(scope, replay, tagged)
        except Exception:  # the fake's own limits (odd bodies it cannot answer): it already sent its 500
            with self._lock:
                self.crashes += 1
        with self._lock:
            self._requests += 1
            reset = self._requests % FAKE_RESET_EVERY == 0
        if reset:
            self.fake.reset()


def workset_config(folder: Path, provider_url: str, max_body_bytes: int) -> Path:
    """The tests' config (every model to the fake provider; small-* models get a small budget, so long
    conversations compact), with the body limit the cases go past and room for slow moments."""
    return write_config(folder, provider_url, server={"max_body_bytes": max_body_bytes},
                        upstream={"timeout_s": 120, "connect_timeout_s": 30}, logging={"level": "info"})


# --- sending ---------------------------------------------------------------------------------------------------------


def _headers(case: Case) -> list[tuple[bytes, bytes]]:
    """Defaults a client sends, replaced by the case's own headers of the same names."""
    own = {name.lower() for name, _ in case.headers}
    defaults = [(b"content-type", b"application/json"),
                (b"authorization", b"Bearer " + KEYS[case.number % len(KEYS)].encode())]
    return [(n, v) for n, v in defaults if n not in own] + list(case.headers)


async def _chunks(body: bytes) -> AsyncIterator[bytes]:
    for start in range(0, len(body), 256 * 1024):
        yield body[start:start + 256 * 1024]


async def send_httpx(client: httpx.AsyncClient, url: str, case: Case) -> Answer:
    content: bytes | AsyncIterator[bytes] = _chunks(case.body) if case.chunked else case.body
    request = client.build_request(case.method, url + case.path, content=content, headers=_headers(case))
    response = await client.send(request, stream=True)
    try:
        body = await response.aread()
    finally:
        await response.aclose()
    return Answer(response.status_code, {k.lower(): v for k, v in response.headers.items()}, body)


async def send_sdk(client: openai.AsyncOpenAI, case: Case) -> Answer:
    assert case.sdk is not None
    kwargs = dict(case.sdk)
    key = KEYS[case.number % len(KEYS)]
    try:
        if kwargs.get("stream"):
            async with client.with_options(api_key=key).chat.completions.with_streaming_response.create(
                    **kwargs) as response:
                chunks = [chunk async for chunk in await response.parse()]
                return Answer(response.status_code, {k.lower(): v for k, v in response.headers.items()},
                              chunks=chunks)
        raw = await client.with_options(api_key=key).chat.completions.with_raw_response.create(**kwargs)
        raw.parse()  # the SDK's own reading of the completion
        return Answer(raw.status_code, {k.lower(): v for k, v in raw.headers.items()}, raw.http_response.content)
    except openai.APIStatusError as error:
        response = error.response
        return Answer(response.status_code, {k.lower(): v for k, v in response.headers.items()}, response.content)
    except openai.APITimeoutError as error:
        return Answer(error=("hang", f"openai SDK: {error!r}"))
    except openai.APIConnectionError as error:
        return Answer(error=("closed", f"openai SDK: {error!r} (cause {error.__cause__!r})"))
    except openai.APIError as error:  # e.g. an error event inside a 200 stream
        return Answer(200, error=("bad_completion", f"openai SDK: {error!r}"))


async def send_socket(port: int, case: Case) -> Answer:
    """The request written by hand on a socket (for header bytes HTTP libraries refuse), read to the close."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        head = [f"{case.method} {case.path} HTTP/1.1".encode(), b"host: 127.0.0.1", b"connection: close",
                b"content-length: " + str(len(case.body)).encode()]
        head += [name + b": " + value for name, value in _headers(case)]
        writer.write(b"\r\n".join(head) + b"\r\n\r\n" + case.body)
        await writer.drain()
        data = await reader.read()
    finally:
        writer.close()
    return parse_http_response(data)


def parse_http_response(data: bytes) -> Answer:
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    try:
        status = int(lines[0].split()[1])
    except (IndexError, ValueError):
        return Answer(error=("closed", f"no HTTP response: {data[:200]!r}"))
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        headers[name.decode("latin-1").strip().lower()] = value.decode("latin-1").strip()
    if headers.get("transfer-encoding") == "chunked":
        decoded, rest = [], body
        while rest:
            size_line, _, rest = rest.partition(b"\r\n")
            size = int(size_line.split(b";")[0] or b"0", 16)
            if size == 0:
                break
            decoded.append(rest[:size])
            rest = rest[size + 2:]
        body = b"".join(decoded)
    return Answer(status, headers, body)


async def send(case: Case, url: str, port: int, client: httpx.AsyncClient, sdk: openai.AsyncOpenAI,
               timeout_s: float) -> Answer:
    started = time.perf_counter()
    try:
        async with asyncio.timeout(timeout_s):
            if case.sdk is not None:
                answer = await send_sdk(sdk, case)
            elif case.raw_socket:
                answer = await send_socket(port, case)
            else:
                answer = await send_httpx(client, url, case)
    except TimeoutError:
        answer = Answer(error=("hang", f"no whole answer within {timeout_s:g} s"))
    except (httpx.TransportError, ConnectionError, OSError) as error:
        answer = Answer(error=("closed", f"{error.__class__.__name__}: {error}"))
    answer.seconds = time.perf_counter() - started
    return answer


# --- checking --------------------------------------------------------------------------------------------------------


def _loads(body: bytes) -> tuple[Any, str | None]:
    """(the parsed body, None), or (None, what is wrong)."""
    try:
        return orjson.loads(body), None
    except orjson.JSONDecodeError:
        return None, f"not JSON: {body[:200]!r}"


def error_format_problem(body: bytes) -> str | None:
    """None when `body` is OpenAI's error format {"error": {"message", "type", "code"}}, else what is wrong."""
    parsed, problem = _loads(body)
    if problem:
        return problem
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if not isinstance(error, dict):
        return f"no error object: {body[:200]!r}"
    if not isinstance(error.get("message"), str) or not error["message"]:
        return f"no message: {body[:200]!r}"
    if not isinstance(error.get("type"), str) or "code" not in error:
        return f"no type or code: {body[:200]!r}"
    return None


def completion_problem(body: bytes) -> str | None:
    parsed, problem = _loads(body)
    if problem:
        return problem
    choices = parsed.get("choices") if isinstance(parsed, dict) else None
    if parsed.get("object") != "chat.completion" or not isinstance(choices, list) or not choices:
        return f"not a chat.completion: {body[:200]!r}"
    if not all(isinstance(c, dict) and isinstance(c.get("message"), dict) for c in choices):
        return f"a choice without a message: {body[:200]!r}"
    return None


def stream_problem(body: bytes) -> str | None:
    """None when `body` is SSE events of chat.completion.chunk objects ending with data: [DONE]."""
    events = [event for event in body.replace(b"\r\n", b"\n").split(b"\n\n") if event.strip()]
    if not events or events[-1].strip() != b"data: [DONE]":
        return f"does not end with data: [DONE]: ...{body[-200:]!r}"
    for event in events[:-1]:
        data = b"\n".join(line[5:].strip() for line in event.split(b"\n") if line.startswith(b"data:"))
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError:
            return f"an event that is not JSON: {event[:200]!r}"
        if not isinstance(chunk, dict) or "error" in chunk or chunk.get("object") != "chat.completion.chunk":
            return f"an event that is not a chunk: {event[:200]!r}"
    return None


def expected_digest(case: Case) -> str | None:
    """The digest of what the provider should get when workset forwards the request untouched: the body as
    sent, without workset's metadata.session_id."""
    try:
        body = orjson.loads(case.body)
    except orjson.JSONDecodeError:
        return None
    metadata = body.get("metadata") if isinstance(body, dict) else None
    if isinstance(metadata, dict) and "session_id" in metadata:
        rest = {k: v for k, v in metadata.items() if k != "session_id"}
        body = {k: v for k, v in body.items() if k != "metadata"}
        if rest:
            body["metadata"] = rest
    return digest(body)


def check(case: Case, answer: Answer, provider: RecordingProvider, summary: Summary) -> list[Failure]:
    found: list[Failure] = []

    def fail(name: str, detail: str) -> None:
        found.append(Failure(name, case.number, case.kind, detail))

    if answer.error is not None and answer.status == 0:
        if case.raw_socket and answer.error[0] == "closed":
            summary.http_layer += 1  # the HTTP server refused the request and closed before reading it all
        else:
            fail(*answer.error)
        return found
    status = answer.status
    relayed = answer.headers.get("x-request-id", "") == f"{PROVIDER_TAG}{status}"
    if status >= 500:
        if relayed:
            summary.relayed_5xx += 1
        else:
            fail("workset_5xx", f"{status}: {answer.body[:300]!r}")
    elif 400 <= status < 500:
        problem = error_format_problem(answer.body)
        if problem and case.raw_socket and status == 400:
            summary.http_layer += 1  # bytes no HTTP client sends, refused by the HTTP server before workset
        elif problem:
            fail("error_format", f"{status}: {problem}")
    elif 200 <= status < 300 and case.path.split("?")[0].rstrip("/").endswith("chat/completions"):
        if answer.error is not None:
            fail(*answer.error)
        elif answer.chunks is not None:
            if not answer.chunks or not any(c.choices and c.choices[0].finish_reason for c in answer.chunks):
                fail("bad_completion", f"SDK stream of {len(answer.chunks)} chunks without a finish_reason")
        else:
            streamed = answer.headers.get("content-type", "").startswith("text/event-stream")
            problem = stream_problem(answer.body) if streamed else completion_problem(answer.body)
            if problem:
                fail("bad_completion", problem)
    reached, got = provider.received(case.marker) if case.marker else (False, None)
    if case.expect == "forward":
        if not 200 <= status < 300:
            fail("not_forwarded", f"{status}: {answer.body[:300]!r}")
        elif case.marker and not reached:
            fail("missing_at_provider", "answered 2xx but the provider never got the request")
        elif not relayed:
            fail("bad_completion", f"the provider's x-request-id was not relayed: {answer.headers}")
        else:
            summary.forwarded += 1
            added = int(answer.headers.get("x-workset-tokens-sent", 0)) - \
                int(answer.headers.get("x-workset-tokens-original", 0))
            untouched = added in (0, RECALL_TOKENS) and "x-workset-compacted" not in answer.headers
            want = expected_digest(case) if case.unchanged and untouched and case.marker else None
            if want is not None:
                summary.compared += 1
                if got != want:
                    fail("changed", "the provider got a different body (tokens original == sent, not compacted)")
    elif case.expect == "reject":
        if status not in case.statuses:
            fail("not_refused", f"expected {sorted(case.statuses)}, got {status}: {answer.body[:300]!r}")
        if reached:
            fail("refused_but_sent", f"answered {status}, yet the provider got the request")
    return found


def check_log(output: str, summary: Summary) -> None:
    """Tracebacks and error events in workset's log: fail-open events are counted, anything else fails."""
    stray: list[str] = []
    for line in output.splitlines():
        if not line.strip():
            continue
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            stray.append(line)
            continue
        if not isinstance(record, dict):
            stray.append(line)
            continue
        event = str(record.get("event"))
        if event in FAIL_OPEN:
            summary.fail_open[f"{event}: {str(record.get('error'))[:160]}"] += 1
        elif "exception" in record or record.get("level") in ("error", "critical"):
            summary.failures.append(Failure("log_traceback", -1, "log", line[:600]))
    text = "\n".join(stray)
    if "Traceback" in text or "Error" in text or "Exception" in text:
        summary.failures.append(Failure("log_traceback", -1, "log", text[:1500]))


# --- running ---------------------------------------------------------------------------------------------------------


async def drive(options: Options, cases: Cases, url: str, port: int, provider: RecordingProvider,
                summary: Summary) -> None:
    numbers = iter([options.only] if options.only is not None else range(options.requests))
    limits = httpx.Limits(max_connections=options.concurrency * 2, max_keepalive_connections=options.concurrency)
    timeout = httpx.Timeout(options.timeout_s)
    async with httpx.AsyncClient(timeout=timeout, limits=limits) as client:
        sdk = openai.AsyncOpenAI(base_url=url + "/v1", api_key=KEYS[0], max_retries=0, timeout=options.timeout_s,
                                 http_client=httpx.AsyncClient(timeout=timeout, limits=limits))

        began = time.perf_counter()

        async def worker() -> None:
            for number in numbers:  # one shared iterator: each number is taken once
                case = cases.case(number)
                answer = await send(case, url, port, client, sdk, options.timeout_s)
                summary.sent += 1
                summary.kinds[case.kind] += 1
                summary.via["openai SDK" if case.sdk else "socket" if case.raw_socket else "httpx"] += 1
                summary.statuses[answer.status] += 1
                summary.latencies.append((answer.seconds, number, case.kind))
                summary.failures.extend(check(case, answer, provider, summary))
                if summary.sent % PROGRESS_EVERY == 0:
                    print(f"{summary.sent}/{options.requests} sent in {time.perf_counter() - began:.0f} s, "
                          f"{len(summary.failures)} failures", file=sys.stderr, flush=True)

        try:
            await asyncio.gather(*(worker() for _ in range(options.concurrency)))
        finally:
            await sdk.close()


def run(options: Options, folder: Path | None = None) -> Summary:
    """Start the fake provider and `workset serve`, send the cases, check the log; always stops both."""
    summary = Summary(options)
    folder = folder or Path(tempfile.mkdtemp(prefix="workset-fuzz-"))
    provider = RecordingProvider()
    with ServerThread(provider) as upstream:
        config = workset_config(folder, upstream.url, options.max_body_bytes)
        port = free_port()
        argv = [sys.executable, "-m", "proxy", "serve", "--config", str(config), "--port", str(port)]
        with ServerProcess(argv, port, cwd=ROOT) as workset:
            started = time.perf_counter()
            asyncio.run(drive(options, Cases(options.seed, options.max_body_bytes), workset.url, port, provider,
                              summary))
            summary.seconds = time.perf_counter() - started
            if not still_serving(workset.url):
                summary.failures.append(Failure("dead", -1, "after", "a plain request failed after the run"))
        summary.provider_crashes = provider.crashes
        check_log(workset.output(), summary)
        (folder / "workset.log").write_text(workset.output())
    return summary


def still_serving(url: str) -> bool:
    try:
        health = httpx.get(url + "/healthz", timeout=10)
        reply = httpx.post(url + CHAT, timeout=30, headers={"authorization": "Bearer sk-fuzz-after"},
                           json={"model": "gpt-4.1", "messages": [{"role": "user", "content": "still there?"}]})
    except httpx.HTTPError:
        return False
    return health.status_code == 200 and reply.status_code == 200 and completion_problem(reply.content) is None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=Options.requests)
    parser.add_argument("--seed", type=int, default=Options.seed)
    parser.add_argument("--concurrency", type=int, default=Options.concurrency)
    parser.add_argument("--timeout", type=float, default=Options.timeout_s, help="seconds before a request is a hang")
    parser.add_argument("--only", type=int, help="send only this case")
    parser.add_argument("--show", type=int, help="print this case and exit")
    parser.add_argument("--folder", type=Path, help="keep the config, store and workset.log here")
    args = parser.parse_args(argv)
    options = Options(args.requests, args.seed, args.concurrency, args.timeout, only=args.only)
    if args.show is not None:
        print(Cases(args.seed, options.max_body_bytes).case(args.show).describe())
        return 0
    if args.folder:
        args.folder.mkdir(parents=True, exist_ok=True)
    summary = run(options, args.folder)
    print(summary.render())
    return 0 if summary.ok() else 1


if __name__ == "__main__":
    sys.exit(main())
