"""Calls to the provider.

OpenAI-compatible deployments (litellm provider `openai`, or a bare model name with an api_base) are sent as a
plain HTTP request on a pooled aiohttp session: the body reaches the provider with every parameter as the client
wrote it, and stream chunks are relayed as they arrive. This keeps litellm's per-call work (about 5 ms here) off
the hot path; aiohttp rather than httpx because its C parser saves another ~1.4 ms per call (measured here).
Every other deployment (anthropic/..., gemini/..., or any with `upstream.openai_fast_path: false`) goes through
litellm.acompletion / aembedding, which translates to the provider's own API.
"""

from __future__ import annotations

import asyncio
import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Iterable

import aiohttp
import orjson

from .config import Deployment, UpstreamSettings
from .errors import WorksetError, error_body, sse_error
from .tokens import litellm_tokenizers_dir
from .jsonbytes import encode_json

OPENAI_COMPATIBLE = frozenset({"openai", "custom_openai", "openai_like"})
DEFAULT_OPENAI_BASE = "https://api.openai.com/v1"
FORWARDED_HEADERS = ("openai-organization", "openai-project", "openai-beta")
# Provider reply headers the client needs to pace itself and to quote in a support ticket; nothing else (hop-by-hop
# headers, cookies, the provider's organisation) passes.
RELAYED_HEADERS = frozenset({"retry-after", "retry-after-ms", "x-request-id", "request-id", "openai-processing-ms",
                             "openai-version"})
RELAYED_PREFIXES = ("x-ratelimit-", "anthropic-ratelimit-")
# litellm_params that say where and how to connect; the others are defaults for the request body.
CONNECTION_PARAMS = frozenset({
    "model", "api_base", "base_url", "api_key", "custom_llm_provider", "extra_headers", "timeout",
    "stream_timeout", "max_retries", "organization", "api_version", "rpm", "tpm", "num_retries",
})


StreamError = Callable[[str, str, str, bytes], bytes]  # (message, type, code, tail) -> the event ending a stream


@dataclass(frozen=True)
class Route:
    """Where one request goes."""

    deployment: Deployment
    model: str  # the model name the provider receives (litellm form, e.g. anthropic/claude-...)
    provider: str  # litellm provider prefix, "" when none
    fast: bool

    @property
    def wire_model(self) -> str:
        """The model name in an OpenAI-compatible body: without litellm's provider prefix."""
        return self.model.split("/", 1)[1] if self.provider in OPENAI_COMPATIBLE and "/" in self.model else self.model


def route(deployment: Deployment, model: str, settings: UpstreamSettings) -> Route:
    target = deployment.upstream_model(model)
    params = deployment.litellm_params
    provider = str(params.get("custom_llm_provider") or (target.split("/", 1)[0] if "/" in target else ""))
    openai_like = provider in OPENAI_COMPATIBLE or (not provider and bool(params.get("api_base")))
    return Route(deployment, target, provider, settings.openai_fast_path and openai_like)


@dataclass
class Reply:
    """A whole (non-streamed) provider answer, or a provider error, to relay as is."""

    status: int
    body: bytes
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)  # the provider's RELAYED_HEADERS


@dataclass
class Stream:
    """A streamed answer: headers are in (status 200), chunks still to come."""

    chunks: AsyncIterator[bytes]
    headers: dict[str, str] = field(default_factory=dict)  # the provider's RELAYED_HEADERS


class Upstream:
    def __init__(self, settings: UpstreamSettings) -> None:
        self.settings = settings
        self._session: aiohttp.ClientSession | None = None

    def session(self) -> aiohttp.ClientSession:
        """One pooled session, made on first use inside the server's event loop."""
        if self._session is None or self._session.closed:
            s = self.settings
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=s.max_connections, limit_per_host=s.max_connections),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=s.connect_timeout_s, sock_read=s.timeout_s),
                skip_auto_headers=("User-Agent",),
                trace_configs=[_reuse_tracer()],
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    # --- chat completions -----------------------------------------------------------------------------------

    async def chat(self, target: Route, body: dict[str, Any], caller_key: str | None,
                   client_headers: dict[str, str]) -> Reply | Stream:
        if target.fast:
            return await self._http(target, "/chat/completions", body, caller_key, client_headers,
                                    stream=bool(body.get("stream")))
        return await self._litellm_chat(target, body, caller_key)

    async def responses(self, target: Route, body: dict[str, Any], caller_key: str | None,
                        client_headers: dict[str, str], path: str = "/responses",
                        stream_error: StreamError = sse_error) -> Reply | Stream:
        """A Responses API request to an OpenAI-compatible deployment, relayed as it comes."""
        return await self._http(target, path, body, caller_key, client_headers, stream=bool(body.get("stream")),
                                stream_error=stream_error)

    async def embeddings(self, target: Route, body: dict[str, Any], caller_key: str | None,
                         client_headers: dict[str, str]) -> Reply:
        if target.fast:
            reply = await self._http(target, "/embeddings", body, caller_key, client_headers, stream=False)
            assert isinstance(reply, Reply)
            return reply
        response = await self._litellm("aembedding", target, body, caller_key)
        return Reply(200, orjson.dumps(response.model_dump()))

    # --- plain HTTP to OpenAI-compatible APIs ---------------------------------------------------------------

    async def _http(self, target: Route, path: str, body: dict[str, Any], caller_key: str | None,
                    client_headers: dict[str, str], stream: bool, stream_error: StreamError = sse_error
                    ) -> Reply | Stream:
        params = target.deployment.litellm_params
        base = str(params.get("api_base") or params.get("base_url") or DEFAULT_OPENAI_BASE).rstrip("/")
        payload = {key: value for key, value in params.items() if key not in CONNECTION_PARAMS and key not in body}
        payload.update(body)
        payload["model"] = target.wire_model
        headers: dict[str, str] = {}
        key = params.get("api_key") or caller_key
        if key:
            headers["authorization"] = f"Bearer {key}"
        if params.get("organization"):
            headers["openai-organization"] = str(params["organization"])
        for name in FORWARDED_HEADERS:
            if name in client_headers and name not in headers:
                headers[name] = client_headers[name]
        headers.update({str(k).lower(): str(v) for k, v in (params.get("extra_headers") or {}).items()})
        return await self.post(base, path, payload, headers, stream, check=path != "/embeddings",
                               stream_error=stream_error)

    async def post(self, base: str, path: str, payload: dict[str, Any], headers: dict[str, str], stream: bool,
                   check: bool = True, stream_error: StreamError = sse_error) -> Reply | Stream:
        """POST `payload` to base + path and relay the answer: a Stream once its first bytes show an event stream,
        else a Reply (provider errors wrapped in OpenAI's shape unless they already carry an `error` object; with
        `check`, a successful answer that is not JSON is a 502). `stream_error` writes the event that ends a
        stream the provider cut or stalled."""
        headers = {"content-type": "application/json",
                   "accept": "text/event-stream" if stream else "application/json", **headers}
        try:
            response = await self._send(base + path, encode_json(payload), headers)
        except (aiohttp.ConnectionTimeoutError, aiohttp.ClientConnectorError) as error:
            raise WorksetError(502, f"upstream {base} unreachable: {error}", "upstream_unreachable",
                               "upstream_error") from error
        except (asyncio.TimeoutError, aiohttp.ServerTimeoutError) as error:
            raise WorksetError(504, f"upstream {base} timed out after {self.settings.timeout_s:g}s",
                               "upstream_timeout", "timeout") from error
        except aiohttp.ClientError as error:
            raise WorksetError(502, f"upstream {base} failed: {error.__class__.__name__}: {error}",
                               "upstream_unreachable", "upstream_error") from error
        relayed = relayed_headers(response.headers.items())
        content_type = response.headers.get("content-type", "")
        try:
            opening = b""
            # A stream is relayed as it comes, once its first bytes show it is one (whatever its content type says);
            # a provider that ignores `stream` answers with a whole JSON body, relayed as such.
            if stream and response.status < 400 and not content_type.startswith("application/json"):
                opening = await _opening(response)
                if _is_event_stream(opening):
                    return Stream(_relay(response, base, opening, stream_error), relayed)
            content = opening + await response.read()
        except (asyncio.TimeoutError, aiohttp.ServerTimeoutError) as error:
            response.release()
            raise WorksetError(504, f"upstream {base} timed out after {self.settings.timeout_s:g}s",
                               "upstream_timeout", "timeout", headers=relayed) from error
        except aiohttp.ClientError as error:
            response.release()
            raise WorksetError(502, f"upstream {base} broke off its answer: {error.__class__.__name__}",
                               "upstream_error", "upstream_error", headers=relayed) from error
        response.release()
        if response.status >= 400:
            return Reply(response.status, _as_openai_error(content, response.status), headers=relayed)
        # Completions are small enough to check whole; embeddings (megabytes of floats) when not labelled JSON.
        if check or not content_type.startswith("application/json"):
            _check_json(content, response.status, base, relayed)
        return Reply(response.status, content, "application/json", relayed)

    async def _send(self, url: str, data: bytes, headers: dict[str, str]) -> aiohttp.ClientResponse:
        """POST `data`, sent again when a pooled connection breaks before any answer: the provider ended that
        connection's keep-alive as it was picked (aiohttp retries only idempotent methods there; the OpenAI SDK
        retries a POST too). A new connection that breaks is the provider's fault, not retried. Bounded by the
        pool: each broken connection leaves it."""
        for _ in range(self.settings.max_connections):
            attempt = {"reused": False}
            try:
                return await self.session().post(url, data=data, headers=headers, trace_request_ctx=attempt)
            except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError):
                if not attempt["reused"]:
                    raise
        return await self.session().post(url, data=data, headers=headers)

    # --- litellm for every other provider -------------------------------------------------------------------

    async def _litellm(self, function: str, target: Route, body: dict[str, Any], caller_key: str | None) -> Any:
        """litellm.<function>(...) for this deployment, its exceptions mapped to workset's errors."""
        litellm = await load_litellm()
        try:
            return await getattr(litellm, function)(**self._litellm_kwargs(target, body, caller_key))
        except Exception as error:
            raise litellm_error(error) from error

    def _litellm_kwargs(self, target: Route, body: dict[str, Any], caller_key: str | None) -> dict[str, Any]:
        params = dict(target.deployment.litellm_params)
        kwargs = {key: value for key, value in params.items() if key not in ("model",)}
        kwargs.update(body)
        kwargs["model"] = target.model
        if not params.get("api_key") and caller_key:
            kwargs["api_key"] = caller_key
        kwargs.setdefault("timeout", self.settings.timeout_s)
        kwargs.setdefault("num_retries", 0)
        kwargs.setdefault("max_retries", 0)
        return kwargs

    async def _litellm_chat(self, target: Route, body: dict[str, Any], caller_key: str | None) -> Reply | Stream:
        response = await self._litellm("acompletion", target, body, caller_key)
        headers = _litellm_headers(response)
        if not body.get("stream"):
            return Reply(200, orjson.dumps(response.model_dump(exclude_none=True)), headers=headers)
        return Stream(_litellm_chunks(response, target.model), headers)


def _reuse_tracer() -> aiohttp.TraceConfig:
    """Marks a request's `trace_request_ctx` {"reused": True} when it goes out on a pooled connection."""
    async def reused(session: aiohttp.ClientSession, context: Any, params: Any) -> None:
        if isinstance(context.trace_request_ctx, dict):
            context.trace_request_ctx["reused"] = True

    tracer = aiohttp.TraceConfig()
    tracer.on_connection_reuseconn.append(reused)
    return tracer


SSE_FIELDS = (b"data:", b"event:", b"id:", b"retry:", b":")  # what an event stream's first line starts with


async def _opening(response: aiohttp.ClientResponse) -> bytes:
    """The first bytes of an answer, enough to tell an event stream from an error page (b"" when it is empty)."""
    opening = b""
    while len(opening) < 8:
        chunk = await response.content.readany()
        if not chunk:
            break
        opening += chunk
    return opening


def _is_event_stream(opening: bytes) -> bool:
    return opening.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(SSE_FIELDS)


async def _relay(response: aiohttp.ClientResponse, base: str, opening: bytes = b"",
                 stream_error: StreamError = sse_error) -> AsyncIterator[bytes]:
    """Provider bytes as they arrive (`opening`, already read, first). A cut or stalled stream ends with an
    OpenAI-style error event, on an event boundary, so SDK clients raise instead of waiting or silently
    truncating."""
    tail = opening[-2:] if opening else b"\n\n"
    if opening:
        yield opening
    try:
        async for chunk in response.content.iter_any():
            if chunk:
                tail = chunk[-2:]
                yield chunk
    except (asyncio.TimeoutError, aiohttp.ServerTimeoutError):
        yield stream_error(f"upstream {base} stalled mid-stream", "upstream_timeout", "timeout", tail)
    except aiohttp.ClientError as error:
        yield stream_error(f"upstream {base} cut the stream: {error.__class__.__name__}", "upstream_error",
                           "stream_cut", tail)
    finally:
        response.release()


async def _litellm_chunks(response: Any, model: str) -> AsyncIterator[bytes]:
    try:
        async for chunk in response:
            yield b"data: " + orjson.dumps(chunk.model_dump(exclude_none=True)) + b"\n\n"
        yield b"data: [DONE]\n\n"
    except Exception as error:  # litellm raises its own mapped exceptions mid-stream
        mapped = litellm_error(error)
        yield sse_error(mapped.message, mapped.type, mapped.code)


def relayed_headers(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The provider's headers a client should see (RELAYED_HEADERS, RELAYED_PREFIXES), names lowercased."""
    kept: dict[str, str] = {}
    for name, value in headers:
        lower = name.lower()
        # Printable Latin-1 only: anything else could not be written back as a header (a 500 after the answer).
        if (lower in RELAYED_HEADERS or lower.startswith(RELAYED_PREFIXES)) and _header_safe(value):
            kept[lower] = value
    return kept


def _header_safe(value: str) -> bool:
    return value.isprintable() and all(char <= "\xff" for char in value)


def _check_json(content: bytes, status: int, base: str, headers: dict[str, str]) -> None:
    """A successful answer that is not JSON (an HTML page from a proxy in between, a body cut short) is the
    provider's failure, a 502 the client's SDK can read, not a 200 it cannot parse."""
    try:
        orjson.loads(content)
    except orjson.JSONDecodeError as error:
        text = content[:200].decode("utf-8", "replace")
        raise WorksetError(502, f"upstream {base} answered HTTP {status} with a body that is not JSON ({error}): "
                                f"{text!r}", "upstream_error", "invalid_upstream_response", headers=headers) from error


def _as_openai_error(content: bytes, status: int) -> bytes:
    """Provider errors pass through when already OpenAI-shaped; anything else is wrapped, text kept."""
    try:
        parsed = orjson.loads(content)
    except orjson.JSONDecodeError:
        parsed = None
    if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict):
        return content
    text = content.decode("utf-8", "replace").strip()[:2000] or f"upstream answered HTTP {status}"
    return orjson.dumps(error_body(text, "upstream_error", str(status)))


def litellm_error(error: Exception) -> WorksetError:
    """litellm's exceptions carry the provider's status; timeouts and connection failures become 504 and 502."""
    name = error.__class__.__name__
    message = str(getattr(error, "message", "") or error)
    if name == "Timeout" or isinstance(error, asyncio.TimeoutError):
        return WorksetError(504, f"upstream timed out: {message}", "upstream_timeout", "timeout")
    if name == "APIConnectionError" or _connection_failed(error):
        return WorksetError(502, f"upstream unreachable: {message}", "upstream_unreachable", "upstream_error")
    status = getattr(error, "status_code", None)
    if isinstance(status, int) and 400 <= status < 600:
        kind = "invalid_request_error" if status == 400 else "upstream_error"
        headers = getattr(error, "litellm_response_headers", None) or getattr(getattr(error, "response", None),
                                                                              "headers", None)
        return WorksetError(status, message, kind, str(getattr(error, "code", None) or status),
                            headers=relayed_headers(headers.items()) if hasattr(headers, "items") else None)
    return WorksetError(502, f"upstream call failed: {name}: {message}", "upstream_error", "upstream_error")


def _litellm_headers(response: Any) -> dict[str, str]:
    """The provider's headers of a litellm answer: litellm keeps them as `llm_provider-<name>` in its hidden
    params."""
    hidden = getattr(response, "_hidden_params", None)
    extra = hidden.get("additional_headers") if isinstance(hidden, dict) else None
    if not isinstance(extra, dict):
        return {}
    prefix = "llm_provider-"
    return relayed_headers((str(k)[len(prefix):], str(v)) for k, v in extra.items() if str(k).startswith(prefix))


def _connection_failed(error: BaseException) -> bool:
    """Whether the provider could not be reached at all. litellm reports a refused connection to Anthropic as an
    InternalServerError (status 500); the connection error is further down its chain of causes."""
    link: BaseException | None = error
    for _ in range(8):  # a few links: litellm wraps the transport error two or three times
        if link is None:
            return False
        if isinstance(link, (ConnectionError, aiohttp.ClientConnectorError)) or type(link).__name__ == "ConnectError":
            return True
        link = link.__cause__ or link.__context__
    return False


_litellm_module: Any = None


async def load_litellm() -> Any:
    """litellm takes seconds to import: done once, off the event loop."""
    global _litellm_module
    if _litellm_module is None:
        _litellm_module = await asyncio.to_thread(importlib.import_module, "litellm")
        _litellm_module.suppress_debug_info = True
    return _litellm_module


# --- model info ---------------------------------------------------------------------------------------------------

_model_info: dict[str, Any] | None = None


def context_window(model: str) -> int | None:
    """max_input_tokens from litellm's model info (its bundled price and context-window map), without importing
    litellm: tries the name as given, then without its provider prefix."""
    global _model_info
    if _model_info is None:
        folder = litellm_tokenizers_dir()
        path = folder.parent.parent / "model_prices_and_context_window_backup.json" if folder else None
        _model_info = orjson.loads(Path(path).read_bytes()) if path and path.is_file() else {}
    names = [model]
    if "/" in model:
        names.append(model.split("/", 1)[1])
    for name in names:
        info = _model_info.get(name)
        if isinstance(info, dict):
            tokens = info.get("max_input_tokens") or info.get("max_tokens")
            if isinstance(tokens, int) and tokens > 0:
                return tokens
    return None
