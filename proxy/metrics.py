"""Prometheus metrics at GET /metrics: requests, tokens, compactions, recall, workset's own time and the
provider's, read from each request's log fields once they are final.

Every label takes a value from a small fixed set (routes, policies, reasons, providers, HTTP statuses), never a
session id, a key or free text: a label value seen once is a time series kept for the life of the process."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route as HttpRoute

from .auth import caller_key
from .config import MetricsSettings
from .edges import CHAT, COUNT_TOKENS, MESSAGES, RESPONSES, RESPONSES_COMPACT, AnthropicTarget
from .errors import WorksetError
from .logs import get_logger
from .upstream import OPENAI_COMPATIBLE, Route

OTHER = "other"  # any value outside a label's set
NONE = "none"  # no value yet (a request refused before its policy was known)
ROUTES = frozenset({edge.name for edge in (CHAT, MESSAGES, COUNT_TOKENS, RESPONSES, RESPONSES_COMPACT)}
                   | {"embeddings"})
REASONS = frozenset({"budget", "phase", "client"})  # the first word of a compaction's reason
FAIL_OPEN_STORE, FAIL_OPEN_ERROR = "store", "error"  # why a request failed open (log field and label)
FAIL_OPEN_REASONS = frozenset({FAIL_OPEN_STORE, FAIL_OPEN_ERROR})
# litellm's provider names for the providers people run workset in front of. A deployment's provider can come from
# the client's model name (model_name "*" -> "*"), so anything else is "other".
PROVIDERS = frozenset({
    "openai", "azure", "azure_ai", "anthropic", "bedrock", "vertex_ai", "gemini", "mistral", "groq", "together_ai",
    "openrouter", "ollama", "ollama_chat", "deepseek", "fireworks_ai", "cohere", "cohere_chat", "xai", "perplexity",
    "databricks", "watsonx", "sagemaker", "hosted_vllm", "vllm", "lm_studio", "huggingface", "cerebras",
    "sambanova", "deepinfra", "nvidia_nim", "dashscope", "moonshot", "github", "github_copilot",
})
STEPS = (("admit", "workset_ms"), ("settle", "deferred_ms"), ("queue", "queued_ms"))  # (label, log field)
CLIENT_GONE = 499  # the client went away mid-stream: not the provider's error

OWN_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
UPSTREAM_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)


def provider_label(target: Any) -> str:
    """Which provider a request's target (an OpenAI-shaped Route or an AnthropicTarget) is, from a bounded set."""
    if isinstance(target, AnthropicTarget):
        return "anthropic"
    if not isinstance(target, Route):
        return OTHER
    # a bare model name with an api_base is sent as OpenAI-compatible, as openai/, custom_openai/ ... are
    provider = target.provider
    if provider in OPENAI_COMPATIBLE or (not provider and target.deployment.litellm_params.get("api_base")):
        return "openai"
    return provider if provider in PROVIDERS else OTHER


class Metrics:
    """The process's metrics, in a registry of their own (one per app: two apps in one process, as in the tests,
    never add to each other's figures)."""

    def __init__(self, policies: Iterable[str], store_bytes: Callable[[], int] = lambda: 0,
                 queued_writes: Callable[[], int] = lambda: 0,
                 sessions_cached: Callable[[], int] = lambda: 0, store_up: Callable[[], bool] = lambda: True) -> None:
        self.registry = CollectorRegistry()
        self._policies = frozenset(policies)  # the loaded presets: fixed at start-up
        self._failed = False  # a metrics bug is logged once, not on every request
        registry = self.registry
        by_use = ("route", "policy")
        self.requests = Counter("workset_requests_total", "requests answered, by route, HTTP status and policy",
                                ("route", "status", "policy"), registry=registry)
        self.tokens_in = Counter("workset_tokens_in_total", "prompt tokens agents sent (workset's count)", by_use,
                                 registry=registry)
        self.tokens_sent = Counter("workset_tokens_sent_total", "prompt tokens workset forwarded (workset's count)",
                                   by_use, registry=registry)
        self.tokens_saved = Counter("workset_tokens_saved_total", "per request, tokens sent less tokens forwarded, "
                                    "when fewer were forwarded", by_use, registry=registry)
        self.tokens_added = Counter("workset_tokens_added_total", "per request, tokens forwarded less tokens sent, "
                                    "when more were forwarded (task state, recall tool)", by_use, registry=registry)
        self.tokens_cached = Counter("workset_tokens_cached_total", "prompt tokens the provider read from its cache "
                                     "(the provider's count)", by_use, registry=registry)
        self.tokens_cache_write = Counter("workset_tokens_cache_write_total", "prompt tokens the provider wrote to "
                                          "its cache (the provider's count)", by_use, registry=registry)
        self.compactions = Counter("workset_compactions_total", "compactions made, by reason", ("reason",),
                                   registry=registry)
        self.recall_calls = Counter("workset_recall_calls_total", "workset_recall calls answered", registry=registry)
        self.recall_rounds = Counter("workset_recall_rounds_total", "follow-up provider rounds after recall calls",
                                     registry=registry)
        self.own = Histogram("workset_own_seconds", "workset's own work per request, deferred part included",
                             buckets=OWN_BUCKETS, registry=registry)
        self.steps = Histogram("workset_step_seconds", "workset's own work per request by step: admit (read, session, "
                               "ingest, plan and build, before forwarding), settle (extraction and store writes while "
                               "the provider works), queue (waiting for a worker or the conversation's branch)",
                               ("step",), buckets=OWN_BUCKETS, registry=registry)
        self.added = Histogram("workset_added_latency_seconds", "latency workset added to a forwarded request: to "
                               "its answer (a stream: its first bytes) less the provider's time", buckets=OWN_BUCKETS,
                               registry=registry)
        self.upstream = Histogram("workset_upstream_seconds", "provider time per forwarded request, to its answer "
                                  "(a stream: its first bytes)", ("provider",), buckets=UPSTREAM_BUCKETS,
                                  registry=registry)
        self.upstream_errors = Counter("workset_upstream_errors_total", "forwarded requests the provider answered "
                                       "with an error, or workset with 502/504 for it", ("provider", "status"),
                                       registry=registry)
        self.failed_open = Counter("workset_failed_open_total", "requests forwarded as sent because workset failed: "
                                   "its store did not answer (store), or a step of its own failed (error)",
                                   ("reason",), registry=registry)
        registry.register(_Gauges(store_bytes, queued_writes, sessions_cached, store_up))

    def request(self, fields: Mapping[str, Any]) -> None:
        """Count one request from its final log fields (see proxy.app: _exchange, _embeddings). Never raises."""
        try:
            self._request(fields)
        except Exception as error:  # the request is answered already: a metrics bug must not touch it
            self._failure(error)

    def accounted(self, route: str, policy: str, cached: int, cache_write: int) -> None:
        """The provider's own figures for a response, once its usage is read."""
        try:
            labels = (_label(route, ROUTES), self._policy(policy))
            if cached > 0:
                self.tokens_cached.labels(*labels).inc(cached)
            if cache_write > 0:
                self.tokens_cache_write.labels(*labels).inc(cache_write)
        except Exception as error:
            self._failure(error)

    def _request(self, fields: Mapping[str, Any]) -> None:
        route = _label(fields.get("route"), ROUTES)
        policy = self._policy(fields.get("policy"))
        status = fields.get("status")
        self.requests.labels(route, _status(status), policy).inc()
        tokens_in = fields.get("tokens_original") or 0
        tokens_sent = fields.get("tokens_sent") or 0
        if tokens_in or tokens_sent:
            self.tokens_in.labels(route, policy).inc(tokens_in)
            self.tokens_sent.labels(route, policy).inc(tokens_sent)
            if tokens_in > tokens_sent:
                self.tokens_saved.labels(route, policy).inc(tokens_in - tokens_sent)
            elif tokens_sent > tokens_in:
                self.tokens_added.labels(route, policy).inc(tokens_sent - tokens_in)
        failed_open = fields.get("fail_open")
        if failed_open:
            self.failed_open.labels(_label(failed_open, FAIL_OPEN_REASONS)).inc()
        reason = fields.get("compaction")
        if reason:
            self.compactions.labels(_reason(str(reason))).inc()
        recalled = fields.get("recall")
        if recalled:
            self.recall_calls.inc(len(recalled))
        rounds = fields.get("recall_rounds")
        if rounds:
            self.recall_rounds.inc(rounds)
        if "workset_ms" in fields:
            self.own.observe((fields["workset_ms"] + fields.get("deferred_ms", 0.0)) / 1000)
            for step, field in STEPS:
                if field in fields:
                    self.steps.labels(step).observe(fields[field] / 1000)
        provider = fields.get("provider")  # set once workset forwards the request (see proxy.app)
        if provider is None:
            return
        provider = _label(provider, PROVIDERS)
        upstream_ms = fields.get("upstream_ms")
        if upstream_ms is not None:
            self.upstream.labels(provider).observe(upstream_ms / 1000)
            answered_ms = fields.get("relay_ms", fields.get("latency_ms", upstream_ms))
            self.added.observe(max(0.0, answered_ms - upstream_ms) / 1000)
        if isinstance(status, int) and status >= 400 and status != CLIENT_GONE:
            self.upstream_errors.labels(provider, _status(status)).inc()

    def _policy(self, name: Any) -> str:
        if not name:
            return NONE
        return name if name in self._policies else OTHER

    def _failure(self, error: Exception) -> None:
        if not self._failed:
            self._failed = True
            get_logger().error("metrics_failed", error=f"{error.__class__.__name__}: {error}", exc_info=True)


class _Gauges(Collector):
    """Figures read at scrape time rather than kept up to date on every request."""

    def __init__(self, store_bytes: Callable[[], int], queued_writes: Callable[[], int],
                 sessions_cached: Callable[[], int], store_up: Callable[[], bool]) -> None:
        self._gauges: tuple[tuple[str, str, Callable[[], float]], ...] = (
            ("workset_store_bytes", "size of the SQLite store on disk, write-ahead log included", store_bytes),
            ("workset_store_write_queue", "store writes queued for the writer thread", queued_writes),
            ("workset_sessions_cached", "conversation branches held in memory", sessions_cached),
            ("workset_store_up", "1 while the store answers, 0 while requests go out as sent because it does not",
             lambda: float(store_up())),
        )

    def collect(self) -> Iterator[Metric]:
        for name, documentation, read in self._gauges:
            yield GaugeMetricFamily(name, documentation, value=read())


def metrics_routes(settings: MetricsSettings, api_keys: tuple[str, ...], metrics: Metrics) -> list[HttpRoute]:
    """GET /metrics in Prometheus' text format; none when disabled (the app's own 404 answers)."""
    if not settings.enabled:
        return []

    async def endpoint(request: Request) -> Response:
        if settings.require_key and caller_key(request) not in api_keys:
            return WorksetError(401, "metrics.require_key: present one of workset's keys (server.api_keys) as the "
                                     "bearer token", "authentication_error", "invalid_api_key").response()
        return Response(generate_latest(metrics.registry), headers={"content-type": CONTENT_TYPE_LATEST})

    return [HttpRoute("/metrics", endpoint, methods=["GET"])]


def _label(value: Any, known: frozenset[str]) -> str:
    return value if value in known else OTHER


def _status(status: Any) -> str:
    return str(status) if isinstance(status, int) and 100 <= status <= 599 else OTHER


def _reason(text: str) -> str:
    """"budget" -> budget, "phase: tests passed" -> phase, "client compaction" -> client, anything else -> other."""
    word = text.split(":", 1)[0].split(" ", 1)[0]
    return word if word in REASONS else OTHER
