"""The wire formats clients speak, as the request path sees them: how a request is checked, which session it
names, how it is read into the internal (chat) form and written back, where it is sent, how recall rounds read its
answers and how errors look. One class each; the translations themselves are proxy.anthropic and proxy.responses,
and the core (proxy.engine) never asks which format spoke."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import orjson
from starlette.responses import Response

from . import anthropic, recall, responses
from .config import Config
from .engine import Prepared
from .errors import WorksetError, json_response
from .jsonbytes import encoded_ahead
from .records import ClientSession, Message
from .translation import Translations
from .upstream import DEFAULT_OPENAI_BASE, Reply, Route, Stream, Upstream, route
from .validate import check_chat, check_messages

class Edge:
    """One wire format at the edge. What a format does not have (a client's own session ids, requests forwarded
    without a working set, compactions workset answers itself) it need not say: these defaults say "none"."""

    name = ""  # in the logs: "chat", "messages", "responses", ...
    # the provider answers with a model's turn (not a token count, not a compaction): it may hold recall calls, and
    # it is billed, so it gets a decision record and its accounting
    model_turn = True

    def check(self, body: dict[str, Any]) -> None:
        """What workset reads of the request, well-typed (a 400 otherwise)."""
        raise NotImplementedError

    def client_session(self, headers: Mapping[str, str], body: dict[str, Any]) -> ClientSession | None:
        """The session the client names in its own headers (Claude Code's, Codex's), if any."""
        return None

    def to_internal(self, body: dict[str, Any], translations: Translations | None = None,
                    key: str = "") -> dict[str, Any]:
        """The request in the internal (chat) form the core works on (`translations`: what the conversation
        `key` was read as last time, to read only what is new)."""
        raise NotImplementedError

    def check_messages(self, messages: list[Message], start: int) -> None:
        """Checks of internal messages not seen before; a translated request's messages were checked in its own
        format as they were read."""
        return None

    def passthrough(self, body: dict[str, Any]) -> str:
        """Why the request goes out as sent, without a working set ("" when it does not)."""
        return ""

    def target(self, config: Config, model: str, caller_key: str | None) -> Any:
        """Where the request goes."""
        raise NotImplementedError

    def handoff(self, body: dict[str, Any], target: Any) -> dict[str, Any] | None:
        """The conversation whose compaction the client asks for and workset answers itself (the provider cannot),
        or None: the request goes to the provider."""
        return None

    def handoff_answer(self, body: dict[str, Any], text: str) -> Reply | Stream:
        """The answer to such a request, standing for the conversation with `text`."""
        raise NotImplementedError

    def render(self, body: dict[str, Any], prepared: Prepared) -> dict[str, Any]:
        """The request to forward, in the client's wire format."""
        raise NotImplementedError

    def encoded_for(self, target: Any, body: dict[str, Any], in_steps: bool) -> dict[str, Any]:
        """`body` as send() takes it, its JSON made now (on a worker) rather than by the event loop as it sends."""
        return encoded_ahead(body, in_steps)

    async def send(self, upstream: Upstream, target: Any, body: dict[str, Any], caller_key: str | None,
                   client_headers: dict[str, str], query: str = "") -> Reply | Stream:
        """The provider's answer to `body` (`query`: the client's query string, for formats that pass it on)."""
        raise NotImplementedError

    def recall_dialect(self) -> recall.Dialect:
        """How recall rounds read a whole answer."""
        raise NotImplementedError

    def recall_relay(self) -> recall.Relay:
        """How recall rounds relay a stream (a new one per client stream)."""
        raise NotImplementedError

    def error_response(self, error: WorksetError) -> Response:
        """workset's own error (bad input, provider unreachable) as this format's clients read errors."""
        return error.response()


def openai_route(config: Config, model: str, caller_key: str | None) -> Route:
    """The model_list deployment for an OpenAI-shaped request (chat completions, embeddings, Responses)."""
    deployment = config.deployment_for(model)
    if deployment is None:
        raise WorksetError(404, f"model {model!r} matches no model_name in model_list", "invalid_request_error",
                           "model_not_found", "model")
    _check_payer(config, deployment.holds_key, caller_key)
    return route(deployment, model, config.upstream)


def _check_payer(config: Config, holds_key: bool, caller_key: str | None) -> None:
    if holds_key and caller_key not in config.server.api_keys:
        raise WorksetError(401, "this workset pays the provider: present one of its keys (server.api_keys) as the "
                                "bearer token", "authentication_error", "invalid_api_key")


# --- chat completions -----------------------------------------------------------------------------------------


class ChatEdge(Edge):
    """OpenAI chat completions: the internal form itself."""

    name = "chat"
    def check(self, body: dict[str, Any]) -> None:
        check_chat(body)

    def to_internal(self, body: dict[str, Any], translations: Translations | None = None,
                    key: str = "") -> dict[str, Any]:
        return body

    def check_messages(self, messages: list[Message], start: int) -> None:
        check_messages(messages, start)

    def target(self, config: Config, model: str, caller_key: str | None) -> Any:
        return openai_route(config, model, caller_key)

    def render(self, body: dict[str, Any], prepared: Prepared) -> dict[str, Any]:
        return strip_session_metadata(prepared.body)

    def encoded_for(self, target: Any, body: dict[str, Any], in_steps: bool) -> dict[str, Any]:
        return super().encoded_for(target, body, in_steps) if target.fast else body  # litellm reads plain data

    async def send(self, upstream: Upstream, target: Any, body: dict[str, Any], caller_key: str | None,
                   client_headers: dict[str, str], query: str = "") -> Reply | Stream:
        return await upstream.chat(target, body, caller_key, client_headers)

    def recall_dialect(self) -> recall.Dialect:
        return recall.CHAT

    def recall_relay(self) -> recall.Relay:
        return recall.ChatRelay()


def strip_session_metadata(body: dict[str, Any]) -> dict[str, Any]:
    """metadata.session_id is workset's; providers that do not store completions reject unknown metadata."""
    metadata = body.get("metadata")
    if not isinstance(metadata, dict) or "session_id" not in metadata:
        return body
    rest = {k: v for k, v in metadata.items() if k != "session_id"}
    out = {k: v for k, v in body.items() if k != "metadata"}
    if rest:
        out["metadata"] = rest
    return out


# --- Anthropic Messages ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AnthropicTarget:
    """Where a Messages request goes: a model_list entry for anthropic/..., else upstream.anthropic_base."""

    base: str  # without /v1
    model: str  # as the provider names it
    api_key: str | None  # workset's own key for the provider; None: the caller's headers pass on
    path: str = "/v1/messages"


class MessagesEdge(Edge):
    """Anthropic Messages (Claude Code): /v1/messages and /v1/messages/count_tokens."""

    def __init__(self, path: str = "/v1/messages") -> None:
        self.path = path
        self.name = "messages" if path == "/v1/messages" else "count_tokens"
        self.model_turn = path == "/v1/messages"

    def check(self, body: dict[str, Any]) -> None:
        anthropic.check(body)

    def client_session(self, headers: Mapping[str, str], body: dict[str, Any]) -> ClientSession | None:
        return anthropic.client_session(headers, body)

    def to_internal(self, body: dict[str, Any], translations: Translations | None = None,
                    key: str = "") -> dict[str, Any]:
        read = translations.read(key, body["messages"], anthropic.read_messages) if translations else None
        return anthropic.to_internal(body, read)

    def target(self, config: Config, model: str, caller_key: str | None) -> AnthropicTarget:
        deployment = config.deployment_for(model)
        if deployment is not None:
            found = route(deployment, model, config.upstream)
            if found.provider == "anthropic":
                _check_payer(config, deployment.holds_key, caller_key)
                params = deployment.litellm_params
                base = str(params.get("api_base") or config.upstream.anthropic_base)
                return AnthropicTarget(_without_v1(base), found.model.removeprefix("anthropic/"),
                                       str(params["api_key"]) if params.get("api_key") else None, self.path)
        return AnthropicTarget(_without_v1(config.upstream.anthropic_base), model, None, self.path)

    def render(self, body: dict[str, Any], prepared: Prepared) -> dict[str, Any]:
        if not prepared.rewritten:
            return body  # forwarded as sent (a passthrough policy, unpaired tool calls, or workset failing open)
        return anthropic.render(body, prepared.body, prepared.stable, prepared.head)

    async def send(self, upstream: Upstream, target: Any, body: dict[str, Any], caller_key: str | None,
                   client_headers: dict[str, str], query: str = "") -> Reply | Stream:
        headers = {name: client_headers[name] for name in anthropic.FORWARDED_HEADERS if name in client_headers}
        headers.setdefault("anthropic-version", anthropic.DEFAULT_VERSION)
        if target.api_key:
            headers["x-api-key"] = target.api_key
        elif "x-api-key" in client_headers:
            headers["x-api-key"] = client_headers["x-api-key"]
        elif "authorization" in client_headers:
            headers["authorization"] = client_headers["authorization"]
        payload = {**body, "model": target.model} if body.get("model") != target.model else body
        stream = bool(body.get("stream")) and target.path == "/v1/messages"
        return await upstream.post(target.base, target.path + (f"?{query}" if query else ""), payload, headers, stream,
                                   stream_error=anthropic.error_event)

    def recall_dialect(self) -> recall.Dialect:
        return anthropic.DIALECT

    def recall_relay(self) -> recall.Relay:
        return anthropic.Relay()

    def error_response(self, error: WorksetError) -> Response:
        return json_response(error.status, anthropic.error_body(error), error.headers)


def _without_v1(base: str) -> str:
    """A base URL as ANTHROPIC_BASE_URL is written: without a trailing /v1 (accepted with one all the same)."""
    base = base.rstrip("/")
    return base[:-3] if base.endswith("/v1") else base


# --- OpenAI Responses -----------------------------------------------------------------------------------------


class ResponsesEdge(Edge):
    """OpenAI Responses (Codex, the Agents SDK): /v1/responses (and /v1/responses/compact), to OpenAI-compatible
    deployments."""

    def __init__(self, path: str = "/responses") -> None:
        self.path = path
        self.name = "responses" if path == "/responses" else "responses_compact"
        self.model_turn = path == "/responses"

    def check(self, body: dict[str, Any]) -> None:
        responses.check(body)

    def client_session(self, headers: Mapping[str, str], body: dict[str, Any]) -> ClientSession | None:
        return responses.client_session(headers, body)

    def to_internal(self, body: dict[str, Any], translations: Translations | None = None,
                    key: str = "") -> dict[str, Any]:
        items = body["input"]
        read = translations.read(key, items, responses.read_messages) \
            if translations and isinstance(items, list) else None
        return responses.to_internal(body, read)

    def passthrough(self, body: dict[str, Any]) -> str:
        if responses.provider_holds_history(body):
            return "previous_response_id: the provider holds the history, forwarded as sent"
        return ""

    def target(self, config: Config, model: str, caller_key: str | None) -> Route:
        found = openai_route(config, model, caller_key)
        if not found.fast:
            raise WorksetError(400, f"model {model!r} goes to a {found.provider or 'litellm'} deployment; the Responses "
                                    "API is forwarded to OpenAI-compatible deployments only", "invalid_request_error",
                               "unsupported_deployment", "model")
        return found

    def handoff(self, body: dict[str, Any], target: Any) -> dict[str, Any] | None:
        if native_compaction(target):
            return None  # OpenAI writes its own compaction items
        if self.path != "/responses":
            return body
        return responses.without_trigger(body) if responses.compaction_requested(body) else None

    def handoff_answer(self, body: dict[str, Any], text: str) -> Reply | Stream:
        if self.path != "/responses":
            return Reply(200, orjson.dumps(responses.compact_output(body, text)))
        response = responses.compaction_response(body, text, 0)
        if body.get("stream"):
            return Stream(_replay(responses.compaction_events(response)))
        return Reply(200, orjson.dumps(response))

    def render(self, body: dict[str, Any], prepared: Prepared) -> dict[str, Any]:
        if not prepared.rewritten:
            return body
        return responses.render(body, prepared.body)

    async def send(self, upstream: Upstream, target: Any, body: dict[str, Any], caller_key: str | None,
                   client_headers: dict[str, str], query: str = "") -> Reply | Stream:
        return await upstream.responses(target, body, caller_key, client_headers, self.path, responses.stream_error)

    def recall_dialect(self) -> recall.Dialect:
        return responses.DIALECT

    def recall_relay(self) -> recall.Relay:
        return responses.Relay()


def native_compaction(target: Route) -> bool:
    """Whether the deployment is OpenAI itself (or Azure OpenAI), which compacts a Responses conversation on its
    own; any other OpenAI-compatible provider gets workset's answer."""
    params = target.deployment.litellm_params
    host = urlsplit(str(params.get("api_base") or params.get("base_url") or DEFAULT_OPENAI_BASE)).hostname or ""
    return host == "api.openai.com" or host.endswith(".openai.azure.com")


async def _replay(chunks: list[bytes]) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


CHAT = ChatEdge()
RESPONSES = ResponsesEdge()
RESPONSES_COMPACT = ResponsesEdge("/responses/compact")
MESSAGES = MessagesEdge()
COUNT_TOKENS = MessagesEdge("/v1/messages/count_tokens")
