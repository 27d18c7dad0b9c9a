"""config.yaml: upstream deployments in LiteLLM's model_list format, plus workset's own settings."""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from .schema import ConfigError, build, setting

ENV_PREFIX = "os.environ/"


@dataclass(frozen=True)
class Deployment:
    """One model_list entry: requests whose model matches model_name go to litellm_params.model."""

    model_name: str = setting("*", "model name or glob the client sends")
    litellm_params: dict[str, Any] = setting({}, "litellm parameters: model, api_base, api_key, ...")

    def __post_init__(self) -> None:
        if not isinstance(self.litellm_params.get("model"), str) or not self.litellm_params["model"]:
            raise ConfigError(f"model_list entry {self.model_name!r}: litellm_params.model must be a non-empty string")

    def matches(self, model: str) -> bool:
        return self.model_name == model or fnmatch.fnmatchcase(model, self.model_name)

    def upstream_model(self, model: str) -> str:
        """litellm_params.model with a `*` standing for the client's model name."""
        target: str = self.litellm_params["model"]
        return target.replace("*", model) if "*" in target else target

    @property
    def holds_key(self) -> bool:
        return bool(self.litellm_params.get("api_key"))


@dataclass(frozen=True)
class ServerSettings:
    host: str = setting("127.0.0.1", "address to listen on")
    port: int = setting(4100, "port to listen on", min=0, max=65535)
    max_body_bytes: int = setting(32 * 1024 * 1024, "larger request bodies get 413", min=1024)
    api_keys: tuple[str, ...] = setting(
        (), "workset keys clients must present when a deployment holds a provider key (workset pays)"
    )
    max_reading_bytes: int = setting(
        1024 * 1024 * 1024, "bytes of request bodies still arriving, between all clients: a body is held whole while "
                            "it arrives, and a client may send its last byte late; past this a request gets 503 with "
                            "retry-after", min=1024,
    )
    max_reading_bytes_per_caller: int = setting(
        128 * 1024 * 1024, "the same for one caller (its key, or its address when it sends none), so that one cannot "
                           "take it all: past this its request gets 429 with retry-after (at least max_body_bytes)",
        min=1024,
    )
    keep_alive_s: float = setting(
        75.0, "seconds an idle client connection stays open: longer than the SDKs keep theirs (httpx, so the OpenAI "
              "and Anthropic Python SDKs, 5 s; Node's 4 s), so that a client never sends a request on a connection "
              "workset is closing at that moment (a reset, under load, when both time out together)", min=1.0,
    )
    request_read_s: float = setting(
        60.0, "a request's head and body must arrive within this many seconds of its first byte, or it gets a 408 "
              "and its connection is closed: a client trickling bytes cannot hold a connection (and its memory) for "
              "ever. 60 s lets a 32 MB body come at 0.6 MB/s", min=1.0,
    )
    worker_threads: int = setting(
        8, "threads that run workset's own work (ingest, extraction, compaction, store reads) off the event loop, "
           "so a large message never stalls other requests", min=1, max=256,
    )
    large_request_nice: int = setting(
        10, "a request whose body holds store.large_write_chars or more has its work done on threads of their own, "
            "this many steps below the server's priority (Linux nice), so that the cores go to small requests first "
            "(0: on the worker threads, at the server's priority)", min=0, max=19,
    )
    inspection_threads: int = setting(
        2, "threads that answer the inspection routes and the dashboard (their store reads wait for their key's "
           "queued writes): apart from worker_threads, so a burst of them never holds up a model request",
        min=1, max=64,
    )
    inspections_per_key: int = setting(
        1, "inspection threads one key may hold at once: the rest of its inspection requests and dashboard pages "
           "wait their turn, so that one key's burst leaves the other keys a thread", min=1, max=64,
    )
    gc_young_threshold: int = setting(
        50000, "allocations between the interpreter's collections of young objects (Python's default, 700, makes "
               "it scan a large heap of sessions so often that requests stall for tens of milliseconds)", min=700,
    )
    switch_interval_ms: float = setting(
        5.0, "longest a thread running Python keeps the interpreter lock while another waits for it (Python's "
             "default; 1 lets a small request wait less behind another tenant's large one, but the store's writer, "
             "at its lower priority, then falls behind under load: more answered turns lost at a kill)",
        min=0.1, max=100.0,
    )

    def __post_init__(self) -> None:
        # a body as large as server.max_body_bytes allows must be able to arrive, or its client retries for ever
        if self.max_reading_bytes_per_caller < self.max_body_bytes:
            raise ConfigError(f"server.max_reading_bytes_per_caller ({self.max_reading_bytes_per_caller}) must be at "
                              f"least server.max_body_bytes ({self.max_body_bytes})")
        if self.max_reading_bytes < self.max_reading_bytes_per_caller:
            raise ConfigError(f"server.max_reading_bytes ({self.max_reading_bytes}) must be at least "
                              f"server.max_reading_bytes_per_caller ({self.max_reading_bytes_per_caller})")


@dataclass(frozen=True)
class UpstreamSettings:
    timeout_s: float = setting(600.0, "longest wait for the provider (whole response, or between stream chunks); then 504", min=0.1)
    connect_timeout_s: float = setting(10.0, "longest wait to connect to the provider; then 502", min=0.1)
    openai_fast_path: bool = setting(
        True,
        "send requests for OpenAI-compatible deployments as plain HTTP (bytes and stream chunks relayed as they "
        "come); false sends everything through litellm.acompletion",
    )
    max_connections: int = setting(200, "pooled connections to the providers", min=1)
    anthropic_base: str = setting(
        "https://api.anthropic.com",
        "where Anthropic Messages requests (/v1/messages) go when no model_list entry names their model as "
        "anthropic/...: written like ANTHROPIC_BASE_URL, without /v1; the caller's own key is passed on",
    )


@dataclass(frozen=True)
class StoreSettings:
    path: str = setting(".workset/workset.db", "SQLite file of the sidecar store (created if missing), when url is empty")
    url: str = setting(
        "", "PostgreSQL store shared by workset replicas (postgresql://user@host:5432/db; its tables go in the first "
            "schema of the search path, created if missing); empty: the SQLite file at path")
    retention_days: float = setting(30.0, "sessions not updated for this many days are deleted whole", min=0.001)
    pool_size: int = setting(24, "PostgreSQL: pooled connections per replica (requests hold one while they build)",
                             min=2)
    timeout_s: float = setting(
        2.0, "PostgreSQL: longest wait for a connection or a statement; then the request goes out as sent", min=0.1)
    retry_s: float = setting(
        1.0, "while the store does not answer (PostgreSQL: the database; SQLite: its file cannot be written), how "
             "often it is probed (a fresh connection; a write); it is up again at the first probe that succeeds",
        min=0.1)
    check_idle_s: float = setting(
        1.0, "PostgreSQL: a pooled connection that sat idle this long is checked (an empty query) before it is "
             "handed out, and when one is found broken every idle one is checked: connections that died while idle "
             "(a database restart) are replaced, not used", min=0.0)
    missed_records: int = setting(
        10000, "records of requests forwarded as sent while the store was down, kept in memory until their "
               "conversation's next request writes them (the oldest go beyond this)", min=0)
    parked_writes: int = setting(
        10000, "writes lost while the store was down (their batch failed on its connection, or the file refused "
               "it) kept in memory, with at most max_backlog_chars of evidence, and written once it answers again",
        min=0)
    write_attempts: int = setting(
        3, "tries of a batch of writes whose connection failed (or whose file refused it), each on the connection "
           "then given (a fresh one), retry_s times the tries so far apart, before its writes are kept for later "
           "(parked_writes) and the store is down", min=1, max=10)
    lock_timeout_s: float = setting(
        10.0, "PostgreSQL: longest wait for another replica to finish building a request of the same conversation",
        min=0.1)
    migrate_timeout_s: float = setting(
        120.0, "PostgreSQL: longest the schema's creation or upgrade at start-up may take, a wait for another "
               "replica's included; then start-up fails", min=1.0)
    writer_nice: int = setting(
        10, "SQLite: how much lower the priority of the thread that writes the store is (Linux nice steps; 0: the "
            "server's): indexing a tenant's megabyte then takes the CPU requests leave", min=0, max=19)
    large_write_chars: int = setting(
        262144, "a write carrying at least this many characters of evidence (a large tool output to index) goes in "
                "a lane of its own: the writer lets the other writes queued pass it, so one tenant's megabytes never "
                "hold up another's answered turns or views", min=1024)
    max_backlog_chars: int = setting(
        268435456, "while the large writes queued carry more than this many characters, a request body of "
                   "large_write_chars bytes or more waits (up to backlog_wait_s) before workset takes it: a tenant "
                   "sending megabytes faster than they are indexed slows itself down, and memory stays bounded",
        min=1024)
    backlog_wait_s: float = setting(
        60.0, "longest a large request waits for the store's backlog (max_backlog_chars); then it goes on all the "
              "same, logged", min=0.0)

    @property
    def location(self) -> str:
        """Where the store is: the PostgreSQL URL, else the SQLite file."""
        return self.url or self.path


@dataclass(frozen=True)
class LoggingSettings:
    level: Literal["debug", "info", "warning", "error"] = setting("info", "lowest level written")
    content: bool = setting(False, "include message contents in the logs")
    repeat_s: float = setting(
        10.0, "a line that repeats for every request while the store is down (fail_open) is written at most once "
              "in this many seconds, with the count of those held back; the store's going down and coming back are "
              "each one line", min=0.0)


@dataclass(frozen=True)
class TokenSettings:
    encoding: str = setting("o200k_base", "tiktoken encoding used to count tokens")
    exact_chars: int = setting(
        32768, "a text up to this many characters is counted exactly; a longer one is estimated from an exact count "
               "of evenly spaced samples of this many characters in all (tiktoken reads a megabyte in 30 to 800 ms)",
        min=1024,
    )


@dataclass(frozen=True)
class IngestSettings:
    extract_chars: int = setting(
        32768, "extraction reads at most this many characters of a message, and a sixteenth as many lines (its head "
               "and tail), and half as much of its tool-call arguments; the whole message is still stored and recalled",
        min=1024,
    )
    extract_ms: float = setting(
        50.0, "after this many milliseconds on one message, extraction skips its remaining stages (logged as "
              "skipped); the cheap, valuable ones run first", min=0.0,
    )
    extract_processes: int = setting(
        1, "processes that extract what requests sent, at a lower priority than the server (0: on its worker "
           "threads): extraction then never holds up another request, and takes only the CPU the machine spares",
        min=0, max=64,
    )
    extract_nice: int = setting(10, "how much lower the extraction processes' priority is (Unix nice steps)", min=0, max=19)
    process_timeout_s: float = setting(
        30.0, "longest wait for an extraction process's answer; past it the process is taken for stuck, killed and "
              "replaced, and the work is done on the worker thread (the request never waits longer)", min=0.1,
    )
    extract_inline_tokens: int = setting(
        1000, "a request's new messages of at most this many tokens in all are extracted on the worker thread, not "
              "sent to the extraction processes: they take under a millisecond, less than the trip, and never wait "
              "there behind another tenant's megabyte", min=0,
    )
    parse_inline_bytes: int = setting(
        2_000_000, "a request body of more bytes than this is parsed in an extraction process: reading one holds "
                   "the interpreter lock, which every other request needs, for 5-15 ms (a megabyte of Chinese is 6 MB "
                   "of escapes); smaller bodies parse on the worker in about a millisecond (0: every body in the "
                   "process; with `ingest.extract_processes: 0`, every body on the worker)", min=0,
    )


@dataclass(frozen=True)
class CacheSettings:
    max_sessions: int = setting(512, "conversation branches kept in memory for fast lookup; others are read from the "
                                     "store (and as many Anthropic or Responses histories as last read, to read only "
                                     "what is new)", min=1)
    max_tokens: int = setting(64_000_000, "tokens of messages those branches hold at most between them (the least "
                                          "recently used are let go first): a path holds its messages, and a tenant "
                                          "may send megabytes in each", min=1000)
    max_read_chars: int = setting(256_000_000, "characters of text the Anthropic and Responses histories kept as last "
                                               "read hold at most between them (the least recently used are let go "
                                               "first, and read whole again at their next turn)", min=1000)


@dataclass(frozen=True)
class PriceSettings:
    input: float = setting(0.0, "dollars per million prompt tokens", min=0.0)
    output: float = setting(0.0, "dollars per million completion tokens", min=0.0)
    cached_input: float | None = setting(None, "dollars per million prompt tokens read from the provider's cache "
                                               "(null: the input price)", min=0.0)
    cache_write: float | None = setting(None, "dollars per million prompt tokens written to the provider's cache "
                                              "(null: the input price)", min=0.0)


@dataclass(frozen=True)
class MetricsSettings:
    enabled: bool = setting(True, "serve Prometheus metrics at GET /metrics (false: that route answers 404)")
    require_key: bool = setting(
        False, "/metrics asks for one of server.api_keys as the bearer token (401 otherwise); its figures name no "
               "session or key, so it is open by default, like /healthz",
    )


@dataclass(frozen=True)
class UiSettings:
    enabled: bool = setting(True, "serve the dashboard at /ui (false: its routes answer 404)")
    admin_keys: tuple[str, ...] = setting(
        (), "keys that see every key's sessions on the dashboard (any other key sees only the sessions it made; "
            "when workset pays, these may log in besides server.api_keys)",
    )


@dataclass(frozen=True)
class Config:
    model_list: tuple[Deployment, ...] = setting((), "upstream deployments, LiteLLM's format")
    env_defaults: dict[str, str] = setting({}, "values for os.environ/NAME references when NAME is unset")
    policy: str = setting("default", "default policy: a preset name from policies_dir or a YAML path")
    policy_by_model: dict[str, str] = setting({}, "model name glob -> policy, first match wins")
    policies_dir: str = setting("policies", "folder of policy presets (relative to config.yaml)")
    server: ServerSettings = setting(ServerSettings(), "HTTP server")
    upstream: UpstreamSettings = setting(UpstreamSettings(), "calls to the provider")
    store: StoreSettings = setting(StoreSettings(), "sidecar store")
    logging: LoggingSettings = setting(LoggingSettings(), "request logs")
    tokens: TokenSettings = setting(TokenSettings(), "token counting")
    ingest: IngestSettings = setting(IngestSettings(), "what workset reads of each new message")
    cache: CacheSettings = setting(CacheSettings(), "in-memory caches")
    metrics: MetricsSettings = setting(MetricsSettings(), "Prometheus metrics")
    ui: UiSettings = setting(UiSettings(), "the dashboard at /ui")
    prices: dict[str, PriceSettings] = setting(
        {}, "model name glob -> prices for the savings figures, first match wins; unlisted models use litellm's "
            "price map")

    def deployment_for(self, model: str) -> Deployment | None:
        """Exact model_name first, then globs in file order."""
        for deployment in self.model_list:
            if deployment.model_name == model:
                return deployment
        for deployment in self.model_list:
            if deployment.matches(model):
                return deployment
        return None

    def policy_name_for(self, model: str) -> str:
        for pattern, name in self.policy_by_model.items():
            if fnmatch.fnmatchcase(model, pattern):
                return name
        return self.policy

    @property
    def workset_pays(self) -> bool:
        return any(deployment.holds_key for deployment in self.model_list)


def resolve_env_refs(value: Any, env_defaults: dict[str, str], key: str) -> Any:
    """Replace `os.environ/NAME` strings, as LiteLLM does, anywhere in the value."""
    if isinstance(value, str) and value.startswith(ENV_PREFIX):
        name = value[len(ENV_PREFIX):]
        if name in os.environ:
            return os.environ[name]
        if name in env_defaults:
            return env_defaults[name]
        raise ConfigError(f"{key}: environment variable {name} is not set (and env_defaults has no value for it)")
    if isinstance(value, dict):
        return {k: resolve_env_refs(v, env_defaults, f"{key}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [resolve_env_refs(v, env_defaults, f"{key}[{i}]") for i, v in enumerate(value)]
    return value


def load_config(path: Path | str | None, overrides: dict[str, Any] | None = None) -> tuple[Config, Path]:
    """The validated config and the folder relative paths in it are resolved from."""
    data: dict[str, Any] = {}
    base = Path.cwd()
    if path is not None:
        path = Path(path)
        try:
            loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
        except OSError as error:
            raise ConfigError(f"config file {path}: {error.strerror or error}") from error
        except yaml.YAMLError as error:
            raise ConfigError(f"config file {path}: not valid YAML ({error})") from error
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"config file {path}: top level must be a mapping")
        data = loaded or {}
        base = path.resolve().parent
    env_defaults = data.get("env_defaults") or {}
    if not isinstance(env_defaults, dict):
        raise ConfigError("env_defaults must be a mapping")
    data = {k: (v if k == "env_defaults" else resolve_env_refs(v, env_defaults, k)) for k, v in data.items()}
    for dotted, value in (overrides or {}).items():
        _set_dotted(data, dotted, value)
    config = build(Config, data)
    return config, base


def _set_dotted(data: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    node = data
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
