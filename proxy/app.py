"""HTTP routes. A chat completion goes: read and check the body -> Engine.prepare (session, ingest, plan,
build) -> Upstream.chat -> relay. If workset's own steps fail, the original request is forwarded (fail open)."""

from __future__ import annotations

import asyncio
import functools
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Coroutine, Mapping, TypeVar

import litellm
import orjson
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route as HttpRoute

from . import recall
from .accounting import Usage, UsageTap, account, prices_for, usage_of
from .auth import caller_key as _caller_key
from .config import Config
from .decisions import as_sent
from .edges import CHAT, COUNT_TOKENS, MESSAGES, RESPONSES, RESPONSES_COMPACT, Edge, openai_route
from .engine import Engine, Prepared, UnknownPolicy
from .extractors import Extractor, InlineExtractor, ProcessExtractor
from .errors import WorksetError, error_body, json_response
from .hashing import chain, key_hash
from .httpserver import READ_TIMED_OUT
from .inspect import inspection_routes
from .jsonbytes import IN_STEPS_OVER_BYTES
from .logs import Throttled, configure, get_logger
from .metrics import FAIL_OPEN_ERROR, FAIL_OPEN_STORE, Metrics, metrics_routes, provider_label
from .missed import MissedTurn, MissedTurns
from .policy import Policy
from .priority import lower_thread_priority
from .reading import ReadingBudget
from .recall import Resolver
from .records import ClientSession
from .report import turn_row
from .retention import start_retention
from .session import conversation_root
from .storage import Scope, Store, StoreUnavailable, open_store
from .sse import json_object
from .summarize import Job, summary_text
from .tokens import TokenCounter
from .translation import Translations
from .turns import TurnsPerKey
from .ui import ui_routes
from .upstream import Reply, Stream, Upstream, context_window, route
from .validate import SESSION_HEADER, check_model, explicit_session

POLICY_HEADER = "x-workset-policy"
STORE_DOWN_NOTE = "forwarded as sent: the store did not answer"
DEGRADED_HEADER = "x-workset-degraded"  # on an answer workset forwarded as sent because its store did not answer
BACKLOG_POLL_S = 0.05  # how often a large request waiting for the store's backlog looks again
SHUTDOWN_WAIT_S = 10.0  # longest wait at shutdown for answered requests' settling and records (they take ms)


T = TypeVar("T")


@dataclass
class Workset:
    """Everything a request needs, made once at start-up."""

    config: Config
    engine: Engine
    upstream: Upstream
    store: Store
    workers: ThreadPoolExecutor  # workset's own CPU and store work runs here, never on the event loop
    large_workers: ThreadPoolExecutor  # the same for large requests, at a lower priority (server.large_request_nice)
    inspectors: ThreadPoolExecutor  # the inspection routes' and dashboard's, never in the model requests' way
    inspection_turns: TurnsPerKey  # how many of those threads one key may hold at once
    translations: Translations  # each conversation's last request in its wire format, as read (only a cache)
    metrics: Metrics  # counted once per request, as it is logged; served at /metrics
    reading: ReadingBudget  # the bytes of request bodies still arriving, per caller and in all
    fail_open_log: Throttled  # one line per logging.repeat_s while requests fail open on a store that is down
    missed: MissedTurns  # records of those requests, until their conversation reaches the store again
    tasks: set[asyncio.Task[Any]] = field(default_factory=set)  # background work in flight (settling, records, summaries)
    optional: set[asyncio.Task[Any]] = field(default_factory=set)  # of those, what shutdown cancels (summaries)

    @property
    def extractor(self) -> Extractor:
        """Where extraction and the parsing of huge bodies run (the engine's sessions own it)."""
        return self.engine.sessions.extractor

    async def run(self, work: Callable[..., T], *args: Any) -> T:
        """`work(*args)` on a worker thread: the event loop goes on relaying other requests meanwhile."""
        return await _off_loop(self.workers, work, *args)

    async def run_sized(self, large: bool, work: Callable[..., T], *args: Any) -> T:
        """`work(*args)` for a request, on the large requests' threads if it is one (see `run`)."""
        return await _off_loop(self.large_workers if large else self.workers, work, *args)

    async def inspect(self, caller: str | None, work: Callable[..., T], *args: Any) -> T:
        """`work(*args)` for an inspection route or the dashboard, on a thread of their own: a burst of them, each
        waiting for the store, takes no worker a model request needs. `caller` (a key hash; None: an admin) waits
        for its turn first: one key's burst takes no more than server.inspections_per_key of those threads."""
        async with self.inspection_turns.turn(caller or ""):
            return await _off_loop(self.inspectors, work, *args)

    def background(self, work: Coroutine[Any, Any, T], finish: bool = True) -> asyncio.Task[T]:
        """A task kept referenced until it finishes (the event loop holds tasks only weakly). At shutdown the
        server waits for it, unless `finish` is False (a summary job: the next compaction uses the digest)."""
        task = asyncio.get_running_loop().create_task(work)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        if not finish:
            self.optional.add(task)
            task.add_done_callback(self.optional.discard)
        return task


async def _off_loop(threads: ThreadPoolExecutor, work: Callable[..., T], *args: Any) -> T:
    return await asyncio.get_running_loop().run_in_executor(threads, functools.partial(work, *args))


def create_app(config: Config, policies: dict[str, Policy], store_location: str | Path | None = None) -> Starlette:
    configure(config.logging.level)
    counter = TokenCounter(config.tokens.encoding, exact_chars=config.tokens.exact_chars)
    location = str(store_location or config.store.location)
    store = open_store(location, config.store)
    # forked first, while this process has one thread
    extractor = ProcessExtractor(config.ingest.extract_processes, config.ingest.extract_nice,
                                 config.ingest.extract_inline_tokens, config.ingest.parse_inline_bytes,
                                 config.ingest.process_timeout_s) \
        if config.ingest.extract_processes else InlineExtractor()
    engine = Engine(config, policies, store, counter, context_window, extractor)
    upstream = Upstream(config.upstream)
    workers = ThreadPoolExecutor(config.server.worker_threads, thread_name_prefix="workset-worker")
    inspectors = ThreadPoolExecutor(config.server.inspection_threads, thread_name_prefix="workset-inspector")
    # the cores go to small requests first: a large one's work waits for them, a small one's not for it
    nice = config.server.large_request_nice
    large_workers = ThreadPoolExecutor(config.server.worker_threads, thread_name_prefix="workset-large",
                                       initializer=lower_thread_priority, initargs=(nice,)) if nice else workers
    metrics = Metrics({policy.name for policy in policies.values()}, store.size_bytes, store.queued_writes,
                      lambda: len(engine.sessions.cache.all()), lambda: not store.unavailable())
    translations = Translations(config.cache.max_sessions, config.cache.max_read_chars)
    workset = Workset(config, engine, upstream, store, workers, large_workers, inspectors,
                      TurnsPerKey(config.server.inspections_per_key), translations, metrics,
                      ReadingBudget(config.server.max_reading_bytes, config.server.max_reading_bytes_per_caller),
                      Throttled(config.logging.repeat_s), MissedTurns(config.store.missed_records))
    log = get_logger()

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # a database URL may hold a password: the log names the backend only
        log.info("started", store="postgresql" if store.shared else location, policy=config.policy,
                 models=[d.model_name for d in config.model_list])
        retention = start_retention(engine, config.store.retention_days)
        try:
            yield
        finally:
            retention.cancel()
            for task in list(workset.optional):  # summary jobs in flight: the next compaction uses the digest
                task.cancel()
            # what answered requests left to do (settling, their records): finished, not lost
            if workset.tasks:
                await asyncio.wait(list(workset.tasks), timeout=SHUTDOWN_WAIT_S)
            await upstream.close()
            workers.shutdown(wait=True)
            large_workers.shutdown(wait=True)
            inspectors.shutdown(wait=True)
            engine.sessions.settle_all()
            extractor.close()
            store.close()

    async def chat_completions(request: Request) -> Response:
        return await _exchange(workset, request, CHAT)

    async def messages(request: Request) -> Response:
        return await _exchange(workset, request, MESSAGES)

    async def count_tokens(request: Request) -> Response:
        return await _exchange(workset, request, COUNT_TOKENS)

    async def responses(request: Request) -> Response:
        return await _exchange(workset, request, RESPONSES)

    async def responses_compact(request: Request) -> Response:
        return await _exchange(workset, request, RESPONSES_COMPACT)

    async def embeddings(request: Request) -> Response:
        return await _embeddings(workset, request)

    async def models(request: Request) -> Response:
        created = int(time.time())
        data = [{"id": d.model_name, "object": "model", "created": created, "owned_by": "workset"}
                for d in config.model_list]
        return json_response(200, {"object": "list", "data": data})

    async def health(request: Request) -> Response:
        """200 either way: a replica whose store is cut off still forwards every request (as sent), so a load
        balancer must keep it. The store is asked for real; "degraded" tells the operator, the driver's words go to
        the log only (this route needs no key)."""
        problem = await workset.run(store.unavailable, True)
        return json_response(200, {"status": "degraded", "store": "down"} if problem else {"status": "ok"})

    routes = [
        HttpRoute("/v1/chat/completions", chat_completions, methods=["POST"]),
        HttpRoute("/chat/completions", chat_completions, methods=["POST"]),
        HttpRoute("/v1/messages", messages, methods=["POST"]),
        HttpRoute("/v1/messages/count_tokens", count_tokens, methods=["POST"]),
        HttpRoute("/v1/responses", responses, methods=["POST"]),
        HttpRoute("/responses", responses, methods=["POST"]),
        HttpRoute("/v1/responses/compact", responses_compact, methods=["POST"]),
        HttpRoute("/responses/compact", responses_compact, methods=["POST"]),
        HttpRoute("/v1/embeddings", embeddings, methods=["POST"]),
        HttpRoute("/embeddings", embeddings, methods=["POST"]),
        HttpRoute("/v1/models", models, methods=["GET"]),
        HttpRoute("/models", models, methods=["GET"]),
        HttpRoute("/healthz", health, methods=["GET"]),
        *inspection_routes(workset),
        *ui_routes(workset),
        *metrics_routes(config.metrics, config.server.api_keys, metrics),
    ]
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={404: _not_found, 405: _not_allowed})
    app.state.workset = workset
    return app


# --- chat completions ---------------------------------------------------------------------------------------------


@dataclass
class Admitted:
    """A request ready to go: where, under which session id, what workset made of it, and the body to forward."""

    target: Any
    explicit: str | None
    prepared: Prepared
    outgoing: dict[str, Any]
    answer: Reply | Stream | None = None  # answered by workset itself: nothing goes to the provider
    sent: dict[str, Any] | None = None  # outgoing with its JSON made ahead (Edge.encoded_for): what goes out first
    large: bool = False  # the client's body was large: what goes out is written in steps (recall rounds too)
    # forwarded as sent because the store did not answer: its conversation tree and path, for its record
    missed: tuple[str, list[str]] | None = None


async def _exchange(workset: Workset, request: Request, edge: Edge) -> Response:
    """One model call in any wire format: admit (check, session, working set) on a worker, forward, settle what is
    new while the provider works, answer recall calls, relay."""
    started = time.perf_counter()
    log = get_logger()
    config = workset.config
    fields: dict[str, Any] = {"route": edge.name}
    try:
        caller_key = _caller_key(request)
        raw = await _read_body(workset, request, caller_key)
        large = len(raw) >= config.store.large_write_chars
        if large:
            await _wait_for_backlog(workset, fields)
        waited = time.perf_counter()
        admitted, own_ms = await workset.run_sized(large, _cpu_timed, workset, _admit, workset, edge, raw,
                                                   request.headers, caller_key, fields)
        prepared = admitted.prepared
        if admitted.answer is None:  # it goes to the provider: which one, as a bounded label (logs, metrics)
            fields["provider"] = provider_label(admitted.target)
        # what the request waited for (a free worker, the interpreter, its conversation's branch) under load
        fields["queued_ms"] = round(max(0.0, (time.perf_counter() - waited) * 1000 - own_ms), 3)
        fields.update(session=prepared.session_id, policy=prepared.policy, tokens_original=prepared.tokens_original,
                      tokens_sent=prepared.tokens_sent, compacted=prepared.compacted, new_messages=prepared.new_messages)
        if prepared.epoch is not None:
            fields.update(compaction=prepared.epoch.reason, summary=prepared.epoch.summary_check or "none",
                          state_check=prepared.epoch.state_check, **{f"{part}_tokens": tokens
                                                                     for part, tokens in prepared.epoch.parts})
        if prepared.note:
            fields["note"] = prepared.note
        if config.logging.content:
            fields["messages"] = prepared.body.get("messages", prepared.body.get("input"))
        fields["workset_ms"] = round(own_ms, 3)
        # Deferred ingest (extraction, store writes) and the start of a background summary run on a worker while
        # the request is on its way to the provider: they overlap its latency instead of adding to it.
        settling = workset.background(_after_sending(workset, prepared, caller_key, large))
        called = time.perf_counter()
        client_headers = _lower_headers(request)
        query = request.url.query
        result = admitted.answer or await edge.send(workset.upstream, admitted.target,
                                                    admitted.sent or admitted.outgoing, caller_key, client_headers,
                                                    query)
        fields["upstream_ms"] = round((time.perf_counter() - called) * 1000, 3)  # headers in (whole body if not streamed)
        # x-workset-ms counts all of workset's own work for the request, the deferred part included: it is done by
        # now unless it took longer than the provider did. Recall reads what it stored, so it waits for it too.
        fields["deferred_ms"] = await settling
        if workset.store.shared and prepared.session_id is not None:
            # The conversation's next request may go to another replica: it must find what this one stored.
            waited = time.perf_counter()
            await workset.run(workset.store.flush, (prepared.session_id,))
            fields["durable_ms"] = round((time.perf_counter() - waited) * 1000, 3)
        if prepared.recall and edge.model_turn:
            result = await _answer_recall(workset, edge, admitted, large, caller_key, client_headers, query, result,
                                          fields)
        headers = _workset_headers(prepared, admitted.explicit, fields["workset_ms"] + fields["deferred_ms"],
                                   fields["queued_ms"], fields.get("fail_open"))
    except WorksetError as error:
        fields.update(status=error.status, error=error.message)
        _log_request(workset.metrics, log, fields, started)
        return edge.error_response(error)
    if isinstance(result, Reply):
        fields["status"] = result.status
        _log_request(workset.metrics, log, fields, started)
        body = result.body
        _record_turn(workset, edge, admitted, fields, lambda: usage_of(json_object(body)))
        return Response(result.body, status_code=result.status, media_type=result.content_type,
                        headers={**result.headers, **headers})
    tap = UsageTap()
    recorded = functools.partial(_record_turn, workset, edge, admitted, fields, tap.usage)
    return StreamingResponse(_logged_stream(workset.metrics, Stream(tap.watch(result.chunks), result.headers), log,
                                            fields, started, recorded),
                             media_type="text/event-stream", headers={**result.headers, **headers, "cache-control": "no-cache"})


def _record_turn(workset: Workset, edge: Edge, admitted: Admitted, fields: dict[str, Any],
                 usage: Callable[[], Usage | None]) -> None:
    """Store the request's decision record with its accounting, once the answer is complete. Queued as it is: the
    row (reading the provider's usage parses its answer) is made by the store's writer thread, off the request's path,
    and a reader that flushes the store sees it. A request workset forwarded without building a working set (fail
    open, a compaction it answered itself, a token count) has no record, but for those the store did not answer:
    theirs wait (Workset.missed) for their conversation's next request that reaches it, and are written first."""
    prepared = admitted.prepared
    if admitted.missed is not None:
        root, hashes = admitted.missed
        forwarded = replace(prepared, decision=as_sent(hashes, STORE_DOWN_NOTE), note=STORE_DOWN_NOTE)
        workset.missed.add(root, MissedTurn(time.time(), _turn_row(workset, edge, admitted, forwarded, fields, usage)))
        return
    decision = prepared.decision
    if decision is None or prepared.session_id is None or not edge.model_turn:
        return
    if prepared.branch is not None:
        for missed in workset.missed.take(prepared.branch.root):
            workset.store.add_turn(prepared.session_id, missed.row, {}, missed.created_at)
    workset.store.add_turn(prepared.session_id, _turn_row(workset, edge, admitted, prepared, fields, usage),
                           decision.made)


def _turn_row(workset: Workset, edge: Edge, admitted: Admitted, prepared: Prepared, fields: dict[str, Any],
              usage: Callable[[], Usage | None]) -> Callable[[], dict[str, Any]]:
    """The stored row of a request's record, made when the writer writes it (reading usage parses the answer)."""
    config = workset.config
    model = str(fields.get("model", ""))

    def row() -> dict[str, Any]:
        status = int(fields.get("status", 0))
        billed = 200 <= status < 300
        prices = prices_for(model, str(getattr(admitted.target, "model", model)), config.prices, litellm.model_cost) \
            if billed else None
        rounds = int(fields.get("recall_rounds") or (1 if fields.get("recall") else 0))
        figures = account(usage() if billed else None, prepared.tokens_sent, prepared.tokens_original,
                          prepared.whole_reused, rounds, prices)
        workset.metrics.accounted(edge.name, prepared.policy, figures.cached, figures.written)
        return turn_row(edge.name, model, prepared, figures, fields)

    return row


async def _wait_for_backlog(workset: Workset, fields: dict[str, Any]) -> None:
    """A large request waits on the event loop (no worker held) while the store's queued large writes carry more
    than store.max_backlog_chars: a tenant sending megabytes faster than they are indexed slows itself down, not
    the others, and what waits in memory stays bounded. After store.backlog_wait_s it goes on all the same."""
    settings = workset.config.store
    began = time.perf_counter()
    while (backlog := workset.store.large_backlog()) > settings.max_backlog_chars:
        if (waited_s := time.perf_counter() - began) > settings.backlog_wait_s:
            get_logger().warning("store_backlog_full", backlog_chars=backlog, waited_s=round(waited_s, 3))
            break
        await asyncio.sleep(BACKLOG_POLL_S)
        fields["backlog_ms"] = round((time.perf_counter() - began) * 1000, 3)


def _admit(workset: Workset, edge: Edge, raw: bytes, headers: Mapping[str, str], caller_key: str | None,
           fields: dict[str, Any]) -> Admitted:
    """All of workset's work before the provider is called, in one go on a worker (parsing megabytes is work
    too, and so is writing them as JSON again): the body parsed and checked, routed, its session ids read, the
    working set built and written back in the client's wire format."""
    admitted = _admitted(workset, edge, raw, headers, caller_key, fields)
    if admitted.answer is None:
        admitted.large = len(raw) > IN_STEPS_OVER_BYTES
        admitted.sent = _encoded(edge, admitted.target, admitted.outgoing, admitted.large)
    return admitted


def _encoded(edge: Edge, target: Any, body: dict[str, Any], in_steps: bool) -> dict[str, Any] | None:
    """`body` with its JSON made now, on a worker (Edge.encoded_for), so that the event loop only copies bytes as it
    sends; None when orjson cannot write it (a lone surrogate): it is then sent as it is, or refused there."""
    try:
        return edge.encoded_for(target, body, in_steps)
    except Exception as error:
        get_logger().warning("encode_ahead_failed", error=f"{error.__class__.__name__}: {error}"[:200])
        return None


def _admitted(workset: Workset, edge: Edge, raw: bytes, headers: Mapping[str, str], caller_key: str | None,
              fields: dict[str, Any]) -> Admitted:
    body = workset.extractor.parse(raw)
    edge.check(body)
    model = body["model"]
    fields["model"] = model
    target = edge.target(workset.config, model, caller_key)
    explicit = explicit_session(headers.get(SESSION_HEADER), body)
    client = edge.client_session(headers, body)
    if client is not None:
        fields["client_session"] = client.own
    policy_name = headers.get(POLICY_HEADER)
    try:
        workset.engine.policy_for(model, policy_name)
    except UnknownPolicy as error:
        raise WorksetError(400, str(error), "invalid_request_error", "unknown_policy") from error
    conversation = edge.handoff(body, target)
    if conversation is not None:
        answered = _handoff(workset, edge, body, conversation, key_hash(caller_key), explicit, client, policy_name,
                            fields)
        if answered is not None:
            return Admitted(target, explicit, answered[0], body, answered[1])
    passthrough = edge.passthrough(body)
    if passthrough:
        fields["note"] = passthrough
        return Admitted(target, explicit, _as_sent(workset, body, policy_name, passthrough), body)
    caller = key_hash(caller_key)
    prepared = _prepare(workset, edge, body, caller, explicit, client, policy_name, fields)
    try:
        outgoing = edge.render(body, prepared)
    except Exception as error:  # fail open: the request as the client sent it
        _failed_open(workset, error, model, fields)
        prepared = replace(prepared, rewritten=False, note="fail open", recall=False)
        outgoing = body
    missed = None
    if fields.get("fail_open") == FAIL_OPEN_STORE and edge.model_turn:
        root = conversation_root(caller, explicit, client)
        missed = (root, chain(root, prepared.body.get("messages") or []))
    return Admitted(target, explicit, prepared, outgoing, missed=missed)


def _prepare(workset: Workset, edge: Edge, body: dict[str, Any], caller: str, explicit: str | None,
             client: ClientSession | None, policy_name: str | None, fields: dict[str, Any]) -> Prepared:
    """Engine.prepare on the request's internal form, failing open: any error in workset's own steps forwards
    the request as sent."""
    internal: dict[str, Any] | None = None
    try:
        named = explicit or (client.own if client else "")
        internal = edge.to_internal(body, workset.translations, f"{edge.name}\0{caller}\0{named}")
        return workset.engine.prepare(internal, caller, explicit, policy_name, client, edge.check_messages)
    except WorksetError:
        raise  # the client's own error (a malformed message): a 400, not a workset failure
    except Exception as error:  # fail open by design: the agent must never pay for a workset bug
        _failed_open(workset, error, body.get("model"), fields)
        try:
            original = sum(workset.engine.counter.message(m) for m in (internal or body)["messages"])
        except Exception:
            original = 0
        return Prepared(internal or body, None, policy_name or "", original, original, note="fail open")


def _handoff(workset: Workset, edge: Edge, body: dict[str, Any], conversation: dict[str, Any], caller: str,
             explicit: str | None, client: ClientSession | None, policy_name: str | None,
             fields: dict[str, Any]) -> tuple[Prepared, Reply | Stream] | None:
    """A client's compaction answered from workset's record (see proxy.responses); None when workset fails (the
    request then goes to the provider as sent)."""
    try:
        text, session = workset.engine.handoff(edge.to_internal(conversation), caller, explicit, policy_name, client,
                                               edge.check_messages)
        answer = edge.handoff_answer(body, text)
    except WorksetError:
        raise
    except Exception as error:  # fail open
        _failed_open(workset, error, body.get("model"), fields)
        return None
    note = "compaction answered by workset"
    fields["note"] = note
    return _as_sent(workset, body, policy_name, note, session), answer


def _as_sent(workset: Workset, body: dict[str, Any], policy_name: str | None, note: str,
             session: str | None = None) -> Prepared:
    """A request workset forwards, or answers itself, without a working set: under which policy, and why."""
    policy = workset.engine.policy_for(str(body["model"]), policy_name).name
    return Prepared(body, session, policy, 0, 0, note=note)


def _failed_open(workset: Workset, error: Exception, model: Any, fields: dict[str, Any]) -> None:
    """The request goes out as the client sent it. A store that does not answer is said once when it goes down
    (by the store) and here at most once per logging.repeat_s; any other failure is a bug of workset's: logged
    with its traceback."""
    if isinstance(error, StoreUnavailable):
        fields["fail_open"] = FAIL_OPEN_STORE
        held = workset.fail_open_log.passes()
        if held is not None:
            get_logger().warning("fail_open", reason=FAIL_OPEN_STORE, model=model, held_back=held,
                                 error=f"{error.__class__.__name__}: {str(error)[:200]}")
        return
    fields["fail_open"] = FAIL_OPEN_ERROR
    get_logger().error("workset_step_failed", error=f"{error.__class__.__name__}: {error}", exc_info=True, model=model)


async def _answer_recall(workset: Workset, edge: Edge, admitted: Admitted, large: bool, caller_key: str | None,
                         client_headers: dict[str, str], query: str, result: Reply | Stream,
                         fields: dict[str, Any]) -> Reply | Stream:
    """The model may call workset_recall: answer it from the store and ask again (see proxy.recall); each round's
    body is written on the threads the request's own work ran on (`large`: the large requests')."""
    prepared = admitted.prepared
    policy = workset.engine.policies[prepared.policy]
    scope = prepared.branch.scope() if prepared.branch is not None else Scope(())
    resolver = Resolver(workset.store, workset.engine.counter, scope, policy.recall.max_tokens,
                        policy.recall.search_results, policy.recall.context_lines, policy.digest.arguments_chars)

    async def ask(body: dict[str, Any]) -> Reply | Stream:
        sent = await workset.run_sized(large, _encoded, edge, admitted.target, body, admitted.large)
        return await edge.send(workset.upstream, admitted.target, sent or body, caller_key, client_headers, query)

    async def resolve(arguments: str) -> str:
        return await workset.run(resolver, arguments)

    def later(texts: list[str]) -> None:
        workset.engine.deliver_later(prepared, texts)

    fields["recall"] = resolver.resolved  # filled in as calls are answered (the log line is written at the end)
    rounds = policy.recall.max_rounds
    if isinstance(result, Reply):
        first = Reply(result.status, result.body, result.content_type, result.headers)
        try:
            result, done = await recall.complete(result, admitted.outgoing, ask, resolve, rounds, later,
                                                 edge.recall_dialect())
        except WorksetError:
            raise  # the provider failed a follow-up round: the client gets that error
        except Exception as error:  # a workset bug: the provider's own first answer goes back as it came
            get_logger().error("recall_failed", error=f"{error.__class__.__name__}: {error}", exc_info=True)
            return first
        fields["recall_rounds"] = done
        return result
    return Stream(recall.stream(result, admitted.outgoing, ask, resolve, rounds, later, edge.recall_relay()),
                  result.headers)


async def _summarize(workset: Workset, prepared: Prepared, job: Job, caller_key: str | None) -> None:
    """Ask the summariser model (routed like any request), within summarizer.timeout_s; record the result."""
    policy = workset.engine.policies[prepared.policy]
    started = time.perf_counter()
    text: str | None = None
    failure = ""
    try:
        model = str(job.body["model"])
        deployment = workset.config.deployment_for(model)
        if deployment is None:
            failure = f"no model_list entry matches summarizer.model {model!r}"
        else:
            target = route(deployment, model, workset.config.upstream)
            reply = await asyncio.wait_for(workset.upstream.chat(target, job.body, caller_key, {}),
                                           policy.summarizer.timeout_s)
            if isinstance(reply, Reply) and reply.status == 200:
                text = summary_text(orjson.loads(reply.body))
            else:
                failure = f"summariser answered HTTP {getattr(reply, 'status', '?')}"
    except asyncio.TimeoutError:
        failure = "timeout"
    except Exception as error:  # the provider failing the summariser must not touch the agent's requests
        failure = f"{error.__class__.__name__}: {error}"[:200]
    result = await workset.run(workset.engine.summary_done, prepared, job, text, failure)
    get_logger().info("summary", session=prepared.session_id, check=result.check, through=job.through,
                      latency_ms=round((time.perf_counter() - started) * 1000, 3))


async def _after_sending(workset: Workset, prepared: Prepared, caller_key: str | None, large: bool) -> float:
    """Settle the request's new messages and decide on a background summary, in one job on a worker (each hand-over
    to a worker waits for the interpreter while other requests' work runs), then start the summary if one is due;
    the milliseconds of workset's own work this took."""
    try:
        job, spent = await workset.run_sized(large, _cpu_timed, workset, _settled, workset, prepared)
    except Exception as error:  # the request already went out; a failed ingest is logged, never raised
        get_logger().error("ingest_failed", error=f"{error.__class__.__name__}: {error}", exc_info=True)
        return 0.0
    if job is not None:
        workset.background(_summarize(workset, prepared, job, caller_key), finish=False)
    return round(spent, 3)


def _settled(workset: Workset, prepared: Prepared) -> Job | None:
    """The request's new messages settled; then the summary to precompute for the next compaction, if the policy
    wants one now."""
    workset.engine.settle(prepared)
    try:
        return workset.engine.summary_job(prepared)
    except Exception as error:  # a summary is an optimisation: never fail the request for it
        get_logger().error("summary_job_failed", error=f"{error.__class__.__name__}: {error}")
        return None


def _cpu_timed(workset: Workset, work: Callable[..., T], *args: Any) -> tuple[T, float]:
    """`work(*args)` and the milliseconds of CPU it took, on its thread and in the extraction processes: workset's
    own work, not the time it waited for the interpreter while other requests' work ran (that shows in queued_ms
    and the latency)."""
    offloaded = workset.extractor.offloaded_ms
    started, elsewhere = time.thread_time(), offloaded()
    result = work(*args)
    return result, (time.thread_time() - started) * 1000 + offloaded() - elsewhere


async def _logged_stream(metrics: Metrics, stream: Stream, log: Any, fields: dict[str, Any], started: float,
                         finished: Callable[[], None] = lambda: None) -> AsyncIterator[bytes]:
    # the headers are out: a streamed answer's added latency is measured to here, not to its last chunk
    fields["relay_ms"] = round((time.perf_counter() - started) * 1000, 3)
    status = 200
    try:
        async for chunk in stream.chunks:
            yield chunk
    except BaseException:
        status = 499  # the client went away mid-stream
        raise
    finally:
        fields["status"] = status
        fields["stream"] = True
        _log_request(metrics, log, fields, started)
        finished()


def _workset_headers(prepared: Prepared, explicit: str | None, own_ms: float, queued_ms: float,
                     failed_open: str | None = None) -> dict[str, str]:
    headers = {
        "x-workset-tokens-original": str(prepared.tokens_original),
        "x-workset-tokens-sent": str(prepared.tokens_sent),
        "x-workset-policy": prepared.policy,
        "x-workset-ms": f"{own_ms:.3f}",  # workset's own work for the request, deferred part included
        "x-workset-queue-ms": f"{queued_ms:.3f}",  # what it waited for before forwarding, under load
    }
    session = explicit or prepared.session_id
    if session:
        headers[SESSION_HEADER] = session
    if prepared.compacted:
        headers["x-workset-compacted"] = "1"
    if failed_open == FAIL_OPEN_STORE:  # forwarded as sent: the store did not answer (a session id may be echoed)
        headers[DEGRADED_HEADER] = "store"
    return headers


# --- embeddings ---------------------------------------------------------------------------------------------------


async def _embeddings(workset: Workset, request: Request) -> Response:
    started = time.perf_counter()
    log = get_logger()
    fields: dict[str, Any] = {"route": "embeddings"}
    try:
        raw = await _read_body(workset, request, _caller_key(request))
        body = await workset.run(workset.extractor.parse, raw)  # documents to embed can be megabytes
        model = check_model(body)
        fields["model"] = model
        caller_key = _caller_key(request)
        target = openai_route(workset.config, model, caller_key)
        fields["provider"] = provider_label(target)
        called = time.perf_counter()
        reply = await workset.upstream.embeddings(target, body, caller_key, _lower_headers(request))
        fields["upstream_ms"] = round((time.perf_counter() - called) * 1000, 3)
    except WorksetError as error:
        fields.update(status=error.status, error=error.message)
        _log_request(workset.metrics, log, fields, started)
        return error.response()
    fields["status"] = reply.status
    _log_request(workset.metrics, log, fields, started)
    return Response(reply.body, status_code=reply.status, media_type=reply.content_type, headers=reply.headers)


# --- helpers ------------------------------------------------------------------------------------------------------


async def _read_body(workset: Workset, request: Request, caller_key: str | None) -> bytes:
    """The whole body, counted while it arrives against what one caller (its key, else its address) and everyone may
    have arriving at once (ReadingBudget)."""
    limit = workset.config.server.max_body_bytes
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise WorksetError(413, f"request body of {declared} bytes exceeds server.max_body_bytes ({limit})",
                           "invalid_request_error", "request_too_large")
    caller = key_hash(caller_key) if caller_key else "address " + (request.client.host if request.client else "")
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            if size + len(chunk) > limit:
                raise WorksetError(413, f"request body exceeds server.max_body_bytes ({limit})",
                                   "invalid_request_error", "request_too_large")
            workset.reading.take(caller, len(chunk))
            size += len(chunk)
            chunks.append(chunk)
    except ClientDisconnect as error:  # nobody is left to answer: logged (as nginx does, 499; 408 past the limit)
        if request.scope.get(READ_TIMED_OUT):
            raise WorksetError(408, "the request did not arrive whole within server.request_read_s",
                               "invalid_request_error", "request_timeout") from error
        raise WorksetError(499, "the client closed the connection before its request arrived whole",
                           "invalid_request_error", "client_closed_request") from error
    finally:
        workset.reading.give_back(caller, size)
    return b"".join(chunks)


def _lower_headers(request: Request) -> dict[str, str]:
    return {key.lower(): value for key, value in request.headers.items()}


def _log_request(metrics: Metrics, log: Any, fields: dict[str, Any], started: float) -> None:
    """The request's log line and its metrics, once its fields are final."""
    fields["latency_ms"] = round((time.perf_counter() - started) * 1000, 3)
    log.info("request", **fields)
    metrics.request(fields)


async def _not_found(request: Request, exc: Exception) -> Response:
    return json_response(404, error_body(f"no route {request.method} {request.url.path}", "invalid_request_error", "not_found"))


async def _not_allowed(request: Request, exc: Exception) -> Response:
    return json_response(405, error_body(f"method {request.method} not allowed on {request.url.path}",
                                 "invalid_request_error", "method_not_allowed"))
