"""`make soak`: many tenants, isolation between conversations, and kill -9 under load (issue 9, items 2, 5, 6).

Runs a real `workset serve` subprocess in front of bench.recording_provider (a fake provider that plays each
conversation's model and checks every request it receives for other conversations' markers), driven through the
official openai SDK (AsyncOpenAI):

1. load: one session, then N concurrent sessions, T turns each (half of them streamed), under a 12k-token budget
   (compaction every dozen turns or so, as for a real agent; TEAM_POLICY). Every request must be
   answered and carry only its own conversation's markers. Reported: x-workset-ms p50/p95 and the added latency
   (the client's time on the wire less the provider's own time, from the openai-processing-ms header) for 1 and N
   sessions. Targets: x-workset-ms p95 <= 15 ms and added p50 at N <= 2x the single session's.
2. isolation (and 3.), under a 3k-token budget so that compaction happens within a few turns and refs abound:
   conversations of one key (and of callers without a key) that share the system prompt and first
   message, then diverge. Each model asks workset_recall for another conversation's ref and content, and its user
   names another conversation's account (event-driven retrieval); no other conversation's marker may reach the
   provider. Each conversation must get its own session id; listing sessions without a key must be refused.
3. kill -9: sessions under load while workset is SIGKILLed --kills times. Each time: PRAGMA integrity_check on the
   store, restart on the same store, the loss window (the oldest answered request whose messages are not on disk,
   counted back from the kill), the cold start of sessions of ~300 messages (target: x-workset-ms p50 < 50 ms),
   and every session's next request, which must succeed.

    python -m bench.load --sessions 50 --turns 30 --kills 5

Exits non-zero when a check fails or a target is missed (--no-targets: checks only). tests/test_load.py runs the
same code at a size CI affords.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import shutil
import signal
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from contextlib import closing
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx
import openai
import yaml

ROOT = Path(__file__).resolve().parent.parent
for folder in (ROOT, ROOT / "tests"):  # bench.* and the tests' server helpers, when run as a script
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from bench.latency import percentile  # noqa: E402
from bench.machine import CpuTicks, speed_line  # noqa: E402
from bench.recording_provider import REPORT_PATH, group_of, handle, marker, record_name, tool_output  # noqa: E402
from bench.settings import add_settings_option, apply_settings  # noqa: E402
from servers import ServerProcess, free_port  # noqa: E402

MODEL = "load-model"
TEAM_MODEL = "team-model"  # the load scenario's agents: a realistic budget (TEAM_POLICY)
# A budget small enough that a few tool outputs trigger a compaction (elisions with refs, the recall tool, the
# names index): the test config's "small" policy.
POLICY: dict[str, Any] = {
    "name": "load", "recent_turns": 3,
    "budget": {"max_input_tokens": 3000, "trigger_ratio": 0.8, "target_ratio": 0.5},
    "tool_outputs": {"max_tokens": 600, "head_tokens": 150, "tail_tokens": 100},
    "state": {"position": "both"},
}
# The load scenario measures many tenants at once, so its agents compact as real ones do: every dozen turns or
# so, not every other turn as under POLICY (which isolation and kill -9 keep, so that elisions and refs abound).
TEAM_POLICY: dict[str, Any] = {
    "name": "team", "recent_turns": 3,
    "budget": {"max_input_tokens": 12000},  # Options.load_budget
    "tool_outputs": {"max_tokens": 600, "head_tokens": 150, "tail_tokens": 100},
    "state": {"position": "both"},
}
SYSTEM = "You are an account auditor. Read records with read_record and report what you find."
SHARED_TASK = "Look up my account and tell me my balance."
TOOLS: list[dict[str, Any]] = [{"type": "function", "function": {
    "name": "read_record", "description": "read one record of an account",
    "parameters": {"type": "object", "properties": {"account": {"type": "string"}, "record": {"type": "string"}}}}}]
KEYS = {"load": "sk-load-tenants", "isolation": "sk-load-shared", "kill": "sk-load-kill"}
CONNECT_TIMEOUT_S = 5.0
WIRE_HEADER = "x-load-wire-ms"  # set by the client itself, see client_for
SESSIONS_ROUTE = "/v1/workset/sessions"
# Issue 9's targets.
WORKSET_P95_TARGET_MS = 15.0  # x-workset-ms p95 under N sessions
ADDED_RATIO_TARGET = 2.0  # added latency p50 under N sessions, as a multiple of one session's
COLD_START_TARGET_MS = 50.0  # first request of a ~300-message session after a restart
STEAL_NOTED = 0.05  # a miss during which the host stole this share of the CPU time says so (bench/machine.py)
ERROR_EVENTS = ("workset_step_failed", "ingest_failed", "recall_failed", "summary_job_failed", "inspection_failed")


def _option(default: Any, doc: str) -> Any:
    return field(default=default, metadata={"doc": doc})


@dataclass
class Options:
    sessions: int = _option(50, "concurrent sessions of the load and kill -9 runs")
    turns: int = _option(30, "requests per session of the load run")
    kills: int = _option(5, "SIGKILLs of workset under load")
    provider_ms: float = _option(500.0, "the model's own time per reply (the provider waits this long)")
    think_ms: float = _option(200.0, "the agent's time between a reply and its next request (its tools run), ±50%")
    output_lines: int = _option(20, "lines of each tool output (about 25 tokens each; 600 tokens are elided at once)")
    load_budget: int = _option(12000, "max_input_tokens of the load run's policy (compaction every dozen turns)")
    isolation_conversations: int = _option(20, "conversations of one key sharing system prompt and first message")
    isolation_turns: int = _option(12, "requests per conversation of the isolation run")
    no_key_conversations: int = _option(4, "the same, of callers without a key")
    long_sessions: int = _option(3, "sessions whose first request after each restart is timed (cold start)")
    long_messages: int = _option(300, "messages of those sessions before the first kill")
    kill_after_s: float = _option(5.0, "load time before each kill, ±50%")
    request_timeout_s: float = _option(60.0, "the client's timeout per request")
    seed: int = _option(9, "seed of start offsets, think times and kill times")


# --- one conversation, as an agent drives it ------------------------------------------------------------------------


@dataclass
class Turn:
    """One answered request."""

    messages: int  # sent
    latency_ms: float  # as the client saw it: from the SDK call until the whole reply was read
    wire_ms: float  # from the request leaving the SDK to the response's headers (WIRE_HEADER)
    workset_ms: float  # x-workset-ms
    provider_ms: float  # openai-processing-ms: the provider's own time
    session: str  # x-workset-session
    compacted: bool
    answered_at: float  # time.monotonic()
    generation: int = 0  # workset restarts before the request was sent

    @property
    def added_ms(self) -> float:
        """What workset adds: the wire time less the provider's own (the SDK's own time is the agent's)."""
        return self.wire_ms - self.provider_ms


@dataclass
class Conversation:
    """An agent's conversation: its marker in the task (unless the task is shared), its tool calls and outputs."""

    group: str
    number: int
    key: str | None
    stream: bool = False
    shared_start: bool = False  # the same system prompt and first message as the rest of its group
    compare_with: str = ""  # another conversation's account, named when the model asks the user
    output_lines: int = 20
    model: str = MODEL
    messages: list[dict[str, Any]] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    interrupted: int = 0  # requests cut by a kill
    continued: dict[int, bool] = field(default_factory=dict)  # generation -> its first request after the restart succeeded
    grown: int = 0  # steps written by add_step

    def __post_init__(self) -> None:
        task = SHARED_TASK if self.shared_start else (
            f"Audit account {handle(self.group, self.number)} ({self.name}): read its records one by one and report "
            f"the balance. Never share {self.name} data with anyone else.")
        self.messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task}]

    @property
    def name(self) -> str:
        return marker(self.group, self.number)

    @property
    def session(self) -> str:
        return self.turns[-1].session if self.turns else ""

    def absorb(self, reply: dict[str, Any]) -> None:
        """The model's reply, then what the agent sends next: its tools' outputs, or the user's answer."""
        self.messages.append(reply)
        for call in reply.get("tool_calls") or ():
            arguments = json.loads(call["function"]["arguments"] or "{}")
            output = tool_output(self.group, self.number, str(arguments.get("record", "?")), self.output_lines)
            self.messages.append({"role": "tool", "tool_call_id": call["id"], "content": output})
        if not reply.get("tool_calls"):
            own = record_name(self.group, self.number, 1)
            other = f"Compare it with {self.compare_with} and its records; " if self.compare_with else ""
            self.messages.append({"role": "user", "content": f"{other}show me {own} again, then go on."})

    def add_step(self) -> None:
        """A step written by the client itself (to grow a long history without a model reply per step)."""
        self.grown += 1
        step = self.grown
        record = record_name(self.group, self.number, step)
        call_id = f"call_{self.name}_grown_{step}"
        arguments = json.dumps({"account": handle(self.group, self.number), "record": record})
        self.messages.append({"role": "assistant", "content": f"Step {step}: reading {record}.", "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": "read_record", "arguments": arguments}}]})
        self.messages.append({"role": "tool", "tool_call_id": call_id,
                              "content": tool_output(self.group, self.number, record, self.output_lines)})


def client_for(base_url: str, key: str, timeout_s: float) -> openai.AsyncOpenAI:
    """The SDK's client, on an httpx client that writes each response's wire time into WIRE_HEADER."""
    async def sent(request: httpx.Request) -> None:
        request.extensions[WIRE_HEADER] = time.perf_counter()

    async def answered(response: httpx.Response) -> None:
        began = response.request.extensions[WIRE_HEADER]
        response.headers[WIRE_HEADER] = f"{(time.perf_counter() - began) * 1000:.3f}"

    http = openai.DefaultAsyncHttpxClient(event_hooks={"request": [sent], "response": [answered]})
    return openai.AsyncOpenAI(base_url=base_url + "/v1", api_key=key, max_retries=0, http_client=http,
                              timeout=httpx.Timeout(timeout_s, connect=CONNECT_TIMEOUT_S))


async def send(client: openai.AsyncOpenAI, conv: Conversation, generation: int = 0) -> tuple[Turn, dict[str, Any]]:
    """One request of the conversation as it stands; the reply is returned, not absorbed."""
    count = len(conv.messages)
    # A caller without a key sends no Authorization header at all.
    headers: dict[str, Any] = {} if conv.key else {"Authorization": openai.Omit()}
    began = time.perf_counter()
    # The messages go in extra_body, which the SDK sends as they are: its parameter transform costs about 20 ms of
    # CPU per request at 60 messages, and fifty agents in this one process would take a core from workset.
    raw = await client.chat.completions.with_raw_response.create(
        model=conv.model, messages=[], tools=TOOLS, user=conv.name,  # type: ignore[arg-type]
        stream=conv.stream, extra_headers=headers, extra_body={"messages": conv.messages})
    if conv.stream:
        reply = await _collect(raw.parse())  # type: ignore[arg-type]
    else:
        reply = _assistant(raw.parse().choices[0].message.model_dump())  # type: ignore[union-attr]
    latency_ms = (time.perf_counter() - began) * 1000
    header = raw.headers
    turn = Turn(count, latency_ms, float(header[WIRE_HEADER]), float(header.get("x-workset-ms", "nan")),
                float(header.get("openai-processing-ms", "nan")), header.get("x-workset-session", ""),
                header.get("x-workset-compacted") == "1", time.monotonic(), generation)
    return turn, reply


def _assistant(message: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    calls = [{"id": c["id"], "type": "function",
              "function": {"name": c["function"]["name"], "arguments": c["function"]["arguments"]}}
             for c in message.get("tool_calls") or ()]
    if calls:
        out["tool_calls"] = calls
    return out


async def _collect(stream: openai.AsyncStream[Any]) -> dict[str, Any]:
    """A streamed reply put together as the message it stands for (tool-call arguments come in pieces)."""
    content: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    async for chunk in stream:
        for choice in chunk.choices:
            delta = choice.delta
            content.append(delta.content or "")
            for call in delta.tool_calls or ():
                slot = calls.setdefault(call.index, {"id": "", "function": {"name": "", "arguments": ""}})
                slot["id"] = call.id or slot["id"]
                if call.function is not None:
                    slot["function"]["name"] += call.function.name or ""
                    slot["function"]["arguments"] += call.function.arguments or ""
    return _assistant({"content": "".join(content) or None, "tool_calls": [calls[i] for i in sorted(calls)]})


def describe(error: BaseException) -> str:
    status = getattr(error, "status_code", None)
    return f"{error.__class__.__name__}{f' {status}' if status else ''}: {str(error)[:200]}"


async def drive(client: openai.AsyncOpenAI, conv: Conversation, turns: int, think_s: float, start_s: float,
                rng: random.Random) -> None:
    """`turns` requests, one after the other, with the agent's think time between; stops at the first error."""
    await asyncio.sleep(start_s)
    for _ in range(turns):
        try:
            turn, reply = await send(client, conv)
        except Exception as error:  # every failure is a finding: recorded, and the conversation stops
            conv.errors.append(describe(error))
            return
        conv.turns.append(turn)
        conv.absorb(reply)
        await asyncio.sleep(think_s * rng.uniform(0.5, 1.5))


async def drive_all(base_url: str, convs: Sequence[Conversation], turns: int, opts: Options,
                    rng: random.Random) -> None:
    """Every conversation at once, each starting at a random point of its first cycle (agents do not start in
    step), bounded as a whole."""
    cycle_s = (opts.provider_ms + opts.think_ms) / 1000
    clients: dict[str, openai.AsyncOpenAI] = {}
    for conv in convs:
        if (conv.key or "") not in clients:
            clients[conv.key or ""] = client_for(base_url, conv.key or "none", opts.request_timeout_s)
    try:
        runs = [drive(clients[conv.key or ""], conv, turns, opts.think_ms / 1000, rng.uniform(0, cycle_s), rng)
                for conv in convs]
        await asyncio.wait_for(asyncio.gather(*runs), timeout=turns * (cycle_s * 2 + opts.request_timeout_s) + 60)
    finally:
        for client in clients.values():
            await client.close()


# --- the servers ------------------------------------------------------------------------------------------------------


class Suite:
    """The recording provider and one `workset serve` (on a fixed port and store, so it can be killed and
    restarted), both subprocesses, stopped on exit."""

    def __init__(self, folder: Path, provider_ms: float, load_budget: int = 12000,
                 start_timeout_s: float = 120.0, settings: Sequence[str] = ()) -> None:
        self.folder = folder
        self.start_timeout_s = start_timeout_s
        self.store = folder / "store.db"
        provider_port, self.port = free_port(), free_port()
        python = sys.executable
        self.provider = ServerProcess([python, "-m", "bench.recording_provider", str(provider_port),
                                       "--delay-ms", str(provider_ms)], provider_port, cwd=ROOT,
                                      start_timeout=start_timeout_s)
        (folder / "load.yaml").write_text(yaml.safe_dump(POLICY))
        team = {**TEAM_POLICY, "budget": {"max_input_tokens": load_budget}}
        (folder / "team.yaml").write_text(yaml.safe_dump(team))
        config = {
            "model_list": [{"model_name": "*", "litellm_params": {"model": "openai/*",
                                                                 "api_base": self.provider.url + "/v1"}}],
            "policies_dir": str(ROOT / "policies"),
            "policy": str(folder / "load.yaml"),
            "policy_by_model": {TEAM_MODEL: str(folder / "team.yaml")},
            "store": {"path": str(self.store)},
            "upstream": {"timeout_s": 60, "connect_timeout_s": CONNECT_TIMEOUT_S},
        }
        apply_settings(config, settings)
        (folder / "config.yaml").write_text(yaml.safe_dump(config))
        self.url = f"http://127.0.0.1:{self.port}"
        self.runs: list[ServerProcess] = []  # every workset process started, for their logs

    def start_workset(self) -> ServerProcess:
        run = ServerProcess([sys.executable, "-m", "proxy", "serve", "--config", str(self.folder / "config.yaml"),
                             "--port", str(self.port)], self.port, cwd=ROOT, start_timeout=self.start_timeout_s)
        self.runs.append(run)
        return run.start()

    def kill_workset(self) -> float:
        """SIGKILL the running workset; the time of the kill (time.monotonic())."""
        run = self.runs[-1]
        assert run.proc is not None
        killed_at = time.monotonic()
        os.kill(run.proc.pid, signal.SIGKILL)
        run.proc.wait(10)
        run.stop()  # keeps its output readable
        return killed_at

    def cpu(self) -> dict[str, float]:
        """CPU seconds used so far by workset (the running process), the provider and this process (the
        agents), and the time (wall)."""
        workset, provider = self.runs[-1].proc, self.provider.proc
        return {"workset": _process_cpu(workset.pid if workset else 0),
                "provider": _process_cpu(provider.pid if provider else 0),
                "agents": time.process_time(), "wall": time.monotonic()}

    def report(self) -> dict[str, Any]:
        return httpx.get(self.provider.url + REPORT_PATH, timeout=30).json()["conversations"]

    def workset_errors(self) -> list[str]:
        """Log lines of workset's own failures (fail open, ingest, recall) and tracebacks over every run, and the
        provider's tracebacks and errors."""
        found = []
        for run in self.runs:
            for line in run.output().splitlines():
                if any(event in line for event in ERROR_EVENTS) or line.startswith("Traceback"):
                    found.append(line[:300])
        found += [f"provider: {line[:300]}" for line in self.provider.output().splitlines()
                  if line.startswith(("Traceback", "ERROR"))]
        return found

    def __enter__(self) -> Self:
        self.provider.start()
        try:
            self.start_workset()
        except BaseException:
            self.provider.stop()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        try:
            for run in self.runs:
                run.stop()
        finally:
            self.provider.stop()


def _process_cpu(pid: int) -> float:
    """User and system CPU seconds of a running process (Linux /proc; NaN elsewhere)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return math.nan
    return (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")


def integrity_check(path: Path) -> str:
    """PRAGMA integrity_check of the store as the kill left it (its WAL included). Read-only, so that closing it
    does not checkpoint the WAL: the restarted workset recovers the store itself."""
    with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)) as db:
        return "; ".join(str(row[0]) for row in db.execute("PRAGMA integrity_check"))


def foreign_hits(report: dict[str, Any], group: str) -> list[dict[str, Any]]:
    return [{"to": name, **hit} for name, seen in report.items() if group_of(name) == group for hit in seen["foreign"]]


# --- scenario 1: load -------------------------------------------------------------------------------------------------


@dataclass
class Figures:
    """Per-request figures of one run, in ms."""

    requests: int
    workset_p50: float
    workset_p95: float
    added_p50: float
    added_p95: float
    latency_p50: float

    @classmethod
    def of(cls, turns: Sequence[Turn]) -> Figures:
        own = [t.workset_ms for t in turns]
        added = [t.added_ms for t in turns]
        if not turns:
            return cls(0, math.nan, math.nan, math.nan, math.nan, math.nan)
        return cls(len(turns), statistics.median(own), percentile(own, 0.95), statistics.median(added),
                   percentile(added, 0.95), statistics.median(t.latency_ms for t in turns))


@dataclass
class LoadResult:
    sessions: int
    turns: int
    single: Figures
    many: Figures
    errors: list[str]
    foreign: list[dict[str, Any]]
    compactions: int
    seconds: float
    cpu: dict[str, float]  # CPU seconds of each process during the N-session run, its wall time, the load average

    def failures(self) -> list[str]:
        out = [f"load: {error}" for error in self.errors[:5]]
        if self.many.requests != self.sessions * self.turns:
            out.append(f"load: {self.many.requests} of {self.sessions * self.turns} requests answered")
        out += [f"load: foreign marker {hit['markers']} reached {hit['to']} via {hit['via']}" for hit in self.foreign[:5]]
        if not self.compactions:
            out.append("load: no compaction happened (the marker check saw only verbatim histories)")
        return out

    def misses(self) -> list[str]:
        out = []
        if not self.many.workset_p95 <= WORKSET_P95_TARGET_MS:
            out.append(f"x-workset-ms p95 at {self.sessions} sessions {self.many.workset_p95:.1f} ms > "
                       f"{WORKSET_P95_TARGET_MS:.0f} ms")
        if not self.many.added_p50 <= ADDED_RATIO_TARGET * max(self.single.added_p50, 0.0):
            stolen = self.cpu.get("steal_many", 0.0)
            out.append(f"added p50 at {self.sessions} sessions {self.many.added_p50:.1f} ms > {ADDED_RATIO_TARGET:.0f} x "
                       f"{self.single.added_p50:.1f} ms (1 session)"
                       + (f"; the host stole {stolen:.0%} of the CPU time meanwhile" if stolen >= STEAL_NOTED else ""))
        return out


async def warm_up(url: str, number: int, opts: Options) -> list[str]:
    """One request of a throwaway conversation, so that first-request costs of a fresh process stay out of the
    figures; its errors."""
    client = client_for(url, KEYS["load"], opts.request_timeout_s)
    conv = Conversation("W", number, KEYS["load"])
    try:
        await timed_next(client, conv, 0, step=False)
    finally:
        await client.close()
    return conv.errors


async def run_load(suite: Suite, opts: Options) -> LoadResult:
    began = time.monotonic()
    rng = random.Random(opts.seed)
    warm_up_errors = await warm_up(suite.url, 0, opts)
    single = [Conversation("S", 0, KEYS["load"], output_lines=opts.output_lines, model=TEAM_MODEL)]
    ticks = CpuTicks.now()
    await drive_all(suite.url, single, opts.turns, opts, rng)
    many = [Conversation("L", n, KEYS["load"], stream=n % 2 == 1, output_lines=opts.output_lines, model=TEAM_MODEL)
            for n in range(opts.sessions)]
    cpu, single_ticks = suite.cpu(), CpuTicks.now()
    await drive_all(suite.url, many, opts.turns, opts, rng)
    cpu = {name: seconds - cpu[name] for name, seconds in suite.cpu().items()}
    cpu["load_average"] = os.getloadavg()[0]  # of the last minute: other work on the machine shows here
    # the machine's slow hours: the share of its CPU time the host gave to other machines, in each run
    cpu["steal_single"], cpu["steal_many"] = single_ticks.steal_since(ticks), CpuTicks.now().steal_since(single_ticks)
    report = suite.report()
    every = [*single, *many]
    return LoadResult(
        sessions=opts.sessions, turns=opts.turns, single=Figures.of(single[0].turns),
        many=Figures.of([t for c in many for t in c.turns]),
        errors=warm_up_errors + [f"{c.name}: {e}" for c in every for e in c.errors],
        foreign=foreign_hits(report, "S") + foreign_hits(report, "L"),
        compactions=sum(t.compacted for c in every for t in c.turns), seconds=time.monotonic() - began, cpu=cpu)


# --- scenario 2: isolation ----------------------------------------------------------------------------------------------


@dataclass
class IsolationResult:
    conversations: int
    no_key_conversations: int
    session_ids: int  # distinct final x-workset-session ids, keyed conversations
    no_key_session_ids: int
    errors: list[str]
    foreign: list[dict[str, Any]]
    recall_attacks: int  # conversations whose model asked for another's ref and content
    recall_answers: dict[str, int]  # kind -> answers workset gave
    own_recall_hits: int  # controls: recalls of a conversation's own content that brought its marker back
    user_asks: int  # conversations whose user named another conversation's account
    retrieval_seen: int  # requests that carried retrieved lines
    listing_without_key: tuple[int, str]  # GET /v1/workset/sessions: status, body
    session_without_key: tuple[int, str]  # GET /v1/workset/sessions/{a no-key conversation's id}
    id_changes: int  # times a conversation's session id changed from its second request on (it forks at the first)
    seconds: float

    def failures(self) -> list[str]:
        out = [f"isolation: {error}" for error in self.errors[:5]]
        out += [f"isolation: foreign marker {hit['markers']} reached {hit['to']} via {hit['via']}: "
                f"...{hit['snippet'][-120:]}" for hit in self.foreign[:5]]
        if self.session_ids != self.conversations:
            out.append(f"isolation: {self.conversations} conversations of one key got {self.session_ids} session ids")
        if self.no_key_session_ids != self.no_key_conversations:
            out.append(f"isolation: {self.no_key_conversations} conversations without a key got "
                       f"{self.no_key_session_ids} session ids")
        everyone = self.conversations + self.no_key_conversations
        if self.recall_attacks < everyone:
            out.append(f"isolation: only {self.recall_attacks} of {everyone} models got to call workset_recall "
                       "on another conversation (no compaction, or the tool was not offered)")
        if self.own_recall_hits == 0:
            out.append("isolation: no recall of a conversation's own content found it (the attack proves nothing)")
        if self.user_asks < everyone:
            out.append(f"isolation: only {self.user_asks} of {everyone} users named another conversation's account")
        for route, (status, body) in (("GET /v1/workset/sessions", self.listing_without_key),
                                      ("GET /v1/workset/sessions/{id}", self.session_without_key)):
            if not (400 <= status < 500 and _openai_error(body)):
                out.append(f"isolation: {route} without a key answered {status} {body[:120]!r}")
        return out


def _openai_error(body: str) -> bool:
    try:
        error = json.loads(body)["error"]
        return isinstance(error["message"], str) and isinstance(error["type"], str)
    except (ValueError, KeyError, TypeError):
        return False


async def run_isolation(suite: Suite, opts: Options) -> IsolationResult:
    began = time.monotonic()
    rng = random.Random(opts.seed + 1)

    def group(letter: str, count: int, key: str | None) -> list[Conversation]:
        return [Conversation(letter, n, key, stream=n % 3 == 2, shared_start=True, output_lines=opts.output_lines,
                             compare_with=handle(letter, (n + 1) % count)) for n in range(count)]

    keyed = group("I", opts.isolation_conversations, KEYS["isolation"])
    no_key = group("N", opts.no_key_conversations, None)
    await drive_all(suite.url, [*keyed, *no_key], opts.isolation_turns, opts, rng)
    report = suite.report()
    seen = [seen for name, seen in report.items() if group_of(name) in ("I", "N")]
    answers: dict[str, int] = {}
    for conversation in seen:
        for kind, count in conversation["recall_answers"].items():
            answers[kind] = answers.get(kind, 0) + count
    async with httpx.AsyncClient(base_url=suite.url, timeout=opts.request_timeout_s) as http:
        listing = await http.get(SESSIONS_ROUTE)
        some = next((c.session for c in no_key if c.session), "none")
        detail = await http.get(f"{SESSIONS_ROUTE}/{some}")
    everyone = [*keyed, *no_key]
    return IsolationResult(
        conversations=len(keyed), no_key_conversations=len(no_key),
        session_ids=len({c.session for c in keyed if c.session}),
        no_key_session_ids=len({c.session for c in no_key if c.session}),
        errors=[f"{c.name}: {e}" for c in everyone for e in c.errors],
        foreign=foreign_hits(report, "I") + foreign_hits(report, "N"),
        recall_attacks=sum(1 for one in seen if one["recall_attacks"]), recall_answers=answers,
        own_recall_hits=sum(one["own_recall_hits"] for one in seen),
        user_asks=sum(1 for one in seen if one["asked_user"]),
        retrieval_seen=sum(one["retrieval_seen"] for one in seen),
        listing_without_key=(listing.status_code, listing.text), session_without_key=(detail.status_code, detail.text),
        id_changes=sum(len({t.session for t in c.turns[1:]}) - 1 for c in everyone if len(c.turns) > 1),
        seconds=time.monotonic() - began)


# --- scenario 3: kill -9 under load -------------------------------------------------------------------------------------


@dataclass
class Kill:
    """One SIGKILL of workset under load, and what the restart found."""

    integrity: str
    answered_requests: int  # answered before the kill
    lost_requests: int  # of those, requests whose messages were not on disk after the restart
    window_ms: float  # the oldest lost request, counted back from the kill (0: none lost)
    newest_ms: float  # the newest answered request, counted back from the kill (on disk unless lost)
    messages_answered: int  # over sessions: messages of their latest answered request
    messages_on_disk: int
    cold: list[Turn] = field(default_factory=list)  # first request of each long session after the restart
    warm: list[Turn] = field(default_factory=list)  # the request after it
    continued: int = 0  # sessions whose first request after the restart succeeded
    restart_s: float = 0.0  # from the kill until workset listened again
    errors: list[str] = field(default_factory=list)  # of the warm-up request after the restart


@dataclass
class KillResult:
    sessions: int
    kills: list[Kill]
    errors: list[str]
    interrupted: int
    history_kept: int  # sessions whose stored branch holds their last answered request at the end
    foreign: list[dict[str, Any]]
    seconds: float

    def cold(self) -> Figures:
        return Figures.of([t for k in self.kills for t in k.cold])

    def warm(self) -> Figures:
        return Figures.of([t for k in self.kills for t in k.warm])

    def window_ms(self) -> float:
        return max((k.window_ms for k in self.kills), default=0.0)

    def failures(self) -> list[str]:
        out = [f"kill: {error}" for error in [*self.errors, *(e for k in self.kills for e in k.errors)][:5]]
        out += [f"kill {n + 1}: integrity_check {k.integrity!r}" for n, k in enumerate(self.kills) if k.integrity != "ok"]
        out += [f"kill {n + 1}: {self.sessions - k.continued} of {self.sessions} sessions did not continue"
                for n, k in enumerate(self.kills) if k.continued != self.sessions]
        if self.kills and self.history_kept != self.sessions:  # without a kill there is no history to check
            out.append(f"kill: {self.sessions - self.history_kept} sessions lost their history")
        out += [f"kill: foreign marker {hit['markers']} reached {hit['to']} via {hit['via']}" for hit in self.foreign[:5]]
        return out


@dataclass
class Control:
    """What the kill loop shares with the sessions' workers."""

    client: openai.AsyncOpenAI
    up: asyncio.Event = field(default_factory=asyncio.Event)
    generation: int = 0  # restarts so far
    stopping: bool = False


async def keep_going(ctl: Control, conv: Conversation, opts: Options, start_s: float, rng: random.Random) -> None:
    """A session that runs until told to stop; a request cut by a kill is sent again once workset is back."""
    await asyncio.sleep(start_s)
    while not ctl.stopping:
        await ctl.up.wait()
        if ctl.stopping:
            return
        generation = ctl.generation
        try:
            turn, reply = await send(ctl.client, conv, generation)
        except Exception as error:  # a kill's casualty, or a finding
            if generation != ctl.generation or not ctl.up.is_set():
                conv.interrupted += 1
                continue
            conv.errors.append(describe(error))
            conv.continued.setdefault(generation, False)
            if len(conv.errors) >= 3:
                return
            await asyncio.sleep(0.5)
            continue
        conv.continued.setdefault(generation, True)
        conv.turns.append(turn)
        conv.absorb(reply)
        await asyncio.sleep(opts.think_ms / 1000 * rng.uniform(0.5, 1.5))


async def stored_messages(http: httpx.AsyncClient, session: str) -> int:
    """Messages on the session's stored branch, as GET /v1/workset/sessions/{id} shows them (0: no such session)."""
    response = await http.get(f"{SESSIONS_ROUTE}/{session}")
    if response.status_code == 404:
        return 0
    response.raise_for_status()
    return int(response.json()["branch"]["messages"])


async def grow(client: openai.AsyncOpenAI, conv: Conversation, length: int, every: int = 20) -> None:
    """A history of `length` messages, sent `every` messages at a time (workset stores it as it goes)."""
    while len(conv.messages) < length:
        conv.add_step()
        if len(conv.messages) % every == 0 or len(conv.messages) >= length:
            await timed_next(client, conv, 0, step=False)


async def timed_next(client: openai.AsyncOpenAI, conv: Conversation, generation: int, step: bool = True) -> list[Turn]:
    """The conversation's next request (a step added first, unless `step` is False): [its turn], or [] and the
    error recorded."""
    if step:
        conv.add_step()
    try:
        turn, _ = await send(client, conv, generation)
    except Exception as error:  # a finding: recorded, and the run goes on
        conv.errors.append(describe(error))
        return []
    conv.turns.append(turn)
    return [turn]


async def wait_until(condition: Any, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


async def run_kills(suite: Suite, opts: Options) -> KillResult:
    began = time.monotonic()
    rng = random.Random(opts.seed + 2)
    key = KEYS["kill"]
    ctl = Control(client_for(suite.url, key, opts.request_timeout_s))
    ctl.up.set()
    convs = [Conversation("K", n, key, stream=n % 2 == 1, output_lines=opts.output_lines) for n in range(opts.sessions)]
    long = [Conversation("C", n, key, output_lines=opts.output_lines) for n in range(opts.long_sessions)]
    await asyncio.gather(*(grow(ctl.client, conv, opts.long_messages) for conv in long))
    cycle_s = (opts.provider_ms + opts.think_ms) / 1000
    workers = [asyncio.create_task(keep_going(ctl, conv, opts, rng.uniform(0, cycle_s), rng)) for conv in convs]
    kills: list[Kill] = []
    http = httpx.AsyncClient(base_url=suite.url, timeout=opts.request_timeout_s, headers={"authorization": f"Bearer {key}"})
    try:
        for _ in range(opts.kills):
            await asyncio.sleep(opts.kill_after_s * rng.uniform(0.5, 1.5))
            kills.append(await kill_and_restart(suite, ctl, convs, long, http, opts))
            await wait_until(lambda: all(ctl.generation in c.continued for c in convs), opts.request_timeout_s + 30)
            kills[-1].continued = sum(c.continued.get(ctl.generation, False) for c in convs)
    finally:
        ctl.stopping = True
        ctl.up.set()
        _, pending = await asyncio.wait(workers, timeout=opts.request_timeout_s + 10)
        for task in pending:
            task.cancel()
    kept = 0
    for conv in convs:
        stored = await stored_messages(http, conv.session) if conv.turns else 0
        if conv.turns and stored >= conv.turns[-1].messages:
            kept += 1
        elif conv.turns:
            conv.errors.append(f"after the run, session {conv.session} shows {stored} messages stored, its last "
                               f"answered request had {conv.turns[-1].messages}")
    await http.aclose()
    await ctl.client.close()
    report = suite.report()
    return KillResult(sessions=opts.sessions, kills=kills, errors=[f"{c.name}: {e}" for c in [*convs, *long] for e in c.errors],
                      interrupted=sum(c.interrupted for c in convs), history_kept=kept,
                      foreign=foreign_hits(report, "K") + foreign_hits(report, "C"), seconds=time.monotonic() - began)


async def kill_and_restart(suite: Suite, ctl: Control, convs: Sequence[Conversation], long: Sequence[Conversation],
                           http: httpx.AsyncClient, opts: Options) -> Kill:
    ctl.up.clear()
    ctl.generation += 1
    killed_at = await asyncio.to_thread(suite.kill_workset)
    integrity = await asyncio.to_thread(integrity_check, suite.store)
    await ctl.client.close()
    ctl.client = client_for(suite.url, KEYS["kill"], opts.request_timeout_s)
    await asyncio.to_thread(suite.start_workset)
    restart_s = time.monotonic() - killed_at
    errors = await warm_up(suite.url, ctl.generation, opts)
    cold: list[Turn] = []
    warm: list[Turn] = []
    for conv in long:  # one at a time, before the load comes back: the cost of a cold session alone
        cold += await timed_next(ctl.client, conv, ctl.generation)
        warm += await timed_next(ctl.client, conv, ctl.generation)
    answered = lost = messages = on_disk = 0
    window, newest = 0.0, math.inf
    for conv in convs:
        before = [t for t in conv.turns if t.generation < ctl.generation]
        if not before:
            continue
        stored = await stored_messages(http, before[-1].session)
        answered += len(before)
        messages += before[-1].messages
        on_disk += min(stored, before[-1].messages)
        missing = [t for t in before if t.messages > stored]
        lost += len(missing)
        # A reply workset sent just before it died may be read just after: 0 ms before the kill.
        window = max([window, *(max(0.0, killed_at - t.answered_at) * 1000 for t in missing)])
        newest = min(newest, max(0.0, killed_at - before[-1].answered_at) * 1000)
    ctl.up.set()
    return Kill(integrity=integrity, answered_requests=answered, lost_requests=lost, window_ms=window, newest_ms=newest,
                messages_answered=messages, messages_on_disk=on_disk, cold=cold, warm=warm, restart_s=restart_s,
                errors=errors)


# --- the whole suite ---------------------------------------------------------------------------------------------------


@dataclass
class Results:
    load: LoadResult
    isolation: IsolationResult
    kill: KillResult
    workset_errors: list[str]
    seconds: float

    def failures(self) -> list[str]:
        out = self.load.failures() + self.isolation.failures() + self.kill.failures()
        out += [f"workset logged: {line}" for line in self.workset_errors[:5]]
        return out


async def run_suite(opts: Options, folder: Path, settings: Sequence[str] = ()) -> Results:
    began = time.monotonic()
    with Suite(folder, opts.provider_ms, opts.load_budget, settings=settings) as suite:
        load = await run_load(suite, opts)
        isolation = await run_isolation(suite, opts)
        kill = await run_kills(suite, opts)
        errors = suite.workset_errors()
    return Results(load, isolation, kill, errors, time.monotonic() - began)


def summary(results: Results, opts: Options) -> list[str]:
    load, iso, kill = results.load, results.isolation, results.kill
    lines = [f"{'run':<34} {'requests':>8} {'errors':>6} {'foreign':>7} {'wms p50':>8} {'wms p95':>8} "
             f"{'added p50':>9} {'added p95':>9} {'lat p50':>8}"]

    def row(label: str, figures: Figures, errors: int | str = "", foreign: int | str = "") -> str:
        return (f"{label:<34} {figures.requests:>8} {errors:>6} {foreign:>7} {figures.workset_p50:>8.2f} "
                f"{figures.workset_p95:>8.2f} {figures.added_p50:>9.2f} {figures.added_p95:>9.2f} "
                f"{figures.latency_p50:>8.1f}")

    lines.append(f"{'':<34} (ms; wms: x-workset-ms; added: time on the wire less the provider's own; lat: the "
                 "SDK call)")
    lines.append(row(f"load, 1 session x {opts.turns} turns", load.single))
    lines.append(row(f"load, {load.sessions} sessions x {load.turns} turns", load.many, len(load.errors),
                     len(load.foreign)))
    lines.append(row(f"cold start, ~{opts.long_messages} messages", kill.cold()))
    lines.append(row("  next request (warm)", kill.warm()))
    lines.append(f"load: {load.compactions} compactions, {load.seconds:.0f} s; provider {opts.provider_ms:.0f} ms, "
                 f"think {opts.think_ms:.0f} ms per turn")
    cpu = load.cpu
    lines.append(f"  CPU during the {load.sessions}-session run ({cpu['wall']:.0f} s): workset {cpu['workset']:.1f} s, "
                 f"provider {cpu['provider']:.1f} s, agents {cpu['agents']:.1f} s; load average "
                 f"{cpu['load_average']:.1f} on {os.cpu_count()} CPUs at its end; CPU time stolen by the host "
                 f"{cpu['steal_single']:.0%} in the 1-session run, {cpu['steal_many']:.0%} in this one")
    lines.append(f"isolation: {iso.conversations} conversations of one key -> {iso.session_ids} session ids; "
                 f"{iso.no_key_conversations} without a key -> {iso.no_key_session_ids} (an id changed after the "
                 f"second request {iso.id_changes} times); foreign markers "
                 f"{len(iso.foreign)}; errors {len(iso.errors)}")
    lines.append(f"  recall attacks {iso.recall_attacks} (answers {iso.recall_answers}), own recalls found "
                 f"{iso.own_recall_hits}; users naming another account {iso.user_asks}, requests with retrieved "
                 f"lines {iso.retrieval_seen}")
    lines.append(f"  without a key: GET /v1/workset/sessions -> {iso.listing_without_key[0]}, "
                 f"GET /v1/workset/sessions/{{id}} -> {iso.session_without_key[0]}")
    lines.append(f"kill -9 x {len(kill.kills)} under {kill.sessions} sessions ({kill.seconds:.0f} s, "
                 f"{kill.interrupted} requests cut and sent again, errors {len(kill.errors)}, foreign "
                 f"{len(kill.foreign)}, history kept {kill.history_kept}/{kill.sessions}):")
    for n, k in enumerate(kill.kills, 1):
        lines.append(f"  kill {n}: integrity {k.integrity}; restart {k.restart_s:.1f} s; continued "
                     f"{k.continued}/{kill.sessions}; answered so far {k.answered_requests} requests, "
                     f"{k.lost_requests} not on disk; messages on disk {k.messages_on_disk}/{k.messages_answered}; "
                     f"loss window {k.window_ms:.0f} ms; newest answered {k.newest_ms:.0f} ms before the kill")
    lines.append(f"loss window (worst of {len(kill.kills)} kills): {kill.window_ms():.0f} ms")
    lines.append(f"workset error log lines: {len(results.workset_errors)}")
    return lines


def targets(results: Results, opts: Options) -> list[str]:
    cold = results.kill.cold()
    misses = results.load.misses()
    for what, value in (("x-workset-ms", cold.workset_p50), ("added", cold.added_p50)):
        if not math.isnan(value) and value >= COLD_START_TARGET_MS:  # nan: no kill, so no cold start measured
            misses.append(f"cold start at ~{opts.long_messages} messages: {what} p50 {value:.1f} ms >= "
                          f"{COLD_START_TARGET_MS:.0f} ms")
    return misses


def main(argv: Iterable[str] | None = None) -> int:
    defaults = Options()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for option in fields(Options):
        value = getattr(defaults, option.name)
        parser.add_argument("--" + option.name.replace("_", "-"), type=type(value), default=value,
                            help=f"{option.metadata['doc']} (default {value})".replace("%", "%%"))
    parser.add_argument("--no-targets", action="store_true", help="check correctness only, not the timing targets")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (store, config)")
    add_settings_option(parser)
    args = parser.parse_args(list(argv) if argv is not None else None)
    opts = Options(**{name: getattr(args, name) for name in vars(defaults)})
    speed = speed_line()  # before any server runs: the machine alone
    folder = Path(tempfile.mkdtemp(prefix="workset-load-"))
    try:
        results = asyncio.run(run_suite(opts, folder, args.set))
    except BaseException:
        print(f"the run broke off; its store and config are in {folder}", file=sys.stderr)
        raise
    print(speed)
    print("\n".join(summary(results, opts)))
    failures = results.failures()
    misses = [] if args.no_targets else targets(results, opts)
    for line in failures:
        print("FAILED " + line)
    for line in misses:
        print("MISSED " + line)
    if not failures and not misses:
        print("all checks passed" + ("" if args.no_targets else ", all targets met"))
    print(f"wall time {results.seconds:.0f} s; store {folder / 'store.db'}" if args.keep else
          f"wall time {results.seconds:.0f} s")
    if not args.keep:
        shutil.rmtree(folder, ignore_errors=True)
    return 1 if failures or misses else 0


if __name__ == "__main__":
    sys.exit(main())
