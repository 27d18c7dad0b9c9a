"""Replicas on one PostgreSQL store: three `workset serve` processes share a database; a client sends each request
of 20 concurrent conversations (SWE traces replayed turn by turn) to a random replica, and one replica is killed
(-9) halfway. Every request must be forwarded exactly as one process with a SQLite store forwards it, and the
ledger must hold no duplicate rows.

The provider answers each request with the SHA-256 of the bytes it received, so the client learns what was
forwarded for the very request it sent (a request cut off by the kill and sent again to another replica is
compared by its final answer)."""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
from pathlib import Path
from typing import Any

import openai
import pytest
from conftest import write_config
from servers import ServerProcess, ServerThread, workset_serve
from stores import once_per_make_test, requires_postgres, schema_url
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from traces import load_traces, requires_traces

from proxy.evaluate.run import agent_turns
from proxy.storage import open_store

SESSIONS = int(os.environ.get("WORKSET_REPLICA_SESSIONS", "20"))
TURNS = int(os.environ.get("WORKSET_REPLICA_TURNS", "16"))  # per conversation (make test); the traces have 31-165
POLICY = "name: replay\nbudget: {max_input_tokens: 9000}\nrecent_turns: 4\n"


pytestmark = [pytest.mark.e2e, pytest.mark.traces, requires_traces, requires_postgres, once_per_make_test]


def digest_provider(received: dict[str, bytes]) -> Starlette:
    """An OpenAI-compatible provider whose answer is the SHA-256 of the request bytes it received (kept in
    `received` by digest, to show how two requests differ)."""

    async def chat(request: Request) -> JSONResponse:
        raw = await request.body()
        received[hashlib.sha256(raw).hexdigest()] = raw
        return JSONResponse({
            "id": "chatcmpl-digest", "object": "chat.completion", "created": 1_700_000_000, "model": "replay-model",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": hashlib.sha256(raw).hexdigest()}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])


def replay_config(folder: Path, provider: str, store: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "replay.yaml").write_text(POLICY)
    return write_config(folder, provider, policy_by_model={"replay-*": str(folder / "replay.yaml")}, store=store,
                        upstream={"timeout_s": 30, "connect_timeout_s": 5},
                        ingest={"extract_ms": 5000, "extract_processes": 0}, logging={"level": "warning"})


class Replay:
    """The conversations' requests, each conversation in order, all of them at once; each request to a random
    replica still up (one that fails to answer is out, and the request goes to another)."""

    def __init__(self, traces: list[dict[str, Any]], replicas: list[ServerProcess], seed: int) -> None:
        self.traces = traces
        self.up = list(replicas)
        self.random = random.Random(seed)
        self.clients = {id(r): openai.AsyncOpenAI(base_url=r.url + "/v1", api_key="sk-team", timeout=60,
                                                 max_retries=0) for r in replicas}
        self.answers: dict[tuple[str, int], str] = {}
        self.resent: set[tuple[str, int]] = set()
        self.done = 0
        self.total = sum(len(agent_turns(t["messages"])[:TURNS]) for t in traces)

    async def run(self, halfway: Any = None) -> None:
        async def kill_halfway() -> None:
            while self.done < self.total // 2:
                await asyncio.sleep(0.01)
            await halfway()

        tasks = [self.conversation(trace) for trace in self.traces]
        await asyncio.gather(*tasks, *([kill_halfway()] if halfway else []))
        for client in self.clients.values():
            await client.close()

    async def conversation(self, trace: dict[str, Any]) -> None:
        for turn in agent_turns(trace["messages"])[:TURNS]:
            key = (trace["id"], turn)
            while True:
                replica = self.random.choice(self.up)
                try:
                    reply = await self.clients[id(replica)].chat.completions.create(
                        model="replay-model", messages=trace["messages"][:turn], tools=trace["tools"])
                    break
                except (openai.APIConnectionError, openai.InternalServerError):
                    assert replica.proc is not None and replica.proc.poll() is not None, "a live replica failed"
                    if replica in self.up:
                        self.up.remove(replica)
                    self.resent.add(key)
            self.answers[key] = str(reply.choices[0].message.content)
            self.done += 1


def ledger(location: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Every session's facts and actions, by the node they came from (session ids depend on which conversation
    came first, the nodes do not)."""
    store = open_store(location)
    try:
        sessions = [row["id"] for row in store.sessions(None, 1000)]
        return (sorted((f["node"], f["kind"], f["key"], f["value"], f["superseded"])
                       for session in sessions for f in store.facts(session, 100_000)),
                sorted((a["node"], a["tool"], a["arguments"], a["call_id"])
                       for session in sessions for a in store.actions(session, 100_000)))
    finally:
        store.close()


@pytest.mark.timeout(900)
def test_three_replicas_forward_what_one_process_forwards(tmp_path: Path) -> None:
    traces = [t for t in load_traces("swe-dev") if len(agent_turns(t["messages"])) >= TURNS][:SESSIONS]
    received: dict[str, bytes] = {}
    with ServerThread(digest_provider(received)) as provider:
        # one process, one SQLite file: what the replicas must forward, byte for byte
        single_store = str(tmp_path / "single" / "store.db")
        single = workset_serve(replay_config(tmp_path / "single", provider.url, {"path": single_store}))
        try:
            alone = Replay(traces, [single], seed=1)
            asyncio.run(alone.run())
        finally:
            single.stop()

        shared = schema_url(tmp_path)
        config = replay_config(tmp_path / "replicas", provider.url, {"url": shared})
        replicas = [workset_serve(config) for _ in range(3)]
        try:
            async def kill_one() -> None:
                victim = replicas[1]
                assert victim.proc is not None
                victim.proc.kill()  # -9: nothing flushed, nothing said goodbye
                victim.proc.wait(10)

            together = Replay(traces, replicas, seed=2)
            asyncio.run(together.run(halfway=kill_one))
        finally:
            for replica in replicas:
                replica.stop()
            outputs = "\n".join(r.output()[-3000:] for r in replicas)

    assert together.total == alone.total == len(alone.answers) == len(together.answers)
    assert replicas[1].proc is not None and replicas[1].proc.returncode == -9
    different = [key for key in alone.answers if alone.answers[key] != together.answers[key]]
    assert not different, (f"{len(different)} of {alone.total} requests forwarded differently by the replicas "
                           f"(first: {different[:5]}; resent after the kill: {sorted(together.resent)[:5]})\n"
                           + _difference(received[alone.answers[different[0]]],
                                         received[together.answers[different[0]]]) + outputs)

    import psycopg

    with psycopg.connect(shared, connect_timeout=5) as conn:
        for table, columns in (("facts", "session_id, node, kind, md5(key), md5(value)"),
                               ("actions", "session_id, node, call_id, tool, md5(arguments)"),
                               ("messages", "hash"), ("evidence", "session_id, ref")):
            duplicated = conn.execute(f"SELECT count(*) FROM (SELECT 1 FROM {table} GROUP BY {columns}"
                                      " HAVING count(*) > 1) d").fetchone()
            assert duplicated == (0,), f"duplicate rows in {table}"
        sessions = conn.execute("SELECT count(*) FROM sessions").fetchone()
        compactions = conn.execute("SELECT count(*), count(DISTINCT session_id) FROM checkpoints").fetchone()
    assert compactions is not None and compactions[1] >= len(traces) // 2, \
        f"too few compactions to test replicas taking over each other's epochs: {compactions}"
    assert sessions == (len(traces),)
    facts, actions = ledger(shared)
    assert (facts, actions) == ledger(single_store) and facts and actions


def _difference(one: bytes, other: bytes) -> str:
    """Where two forwarded requests part, as a diff of their messages."""
    import difflib
    import json

    def lines(raw: bytes) -> list[str]:
        return json.dumps(json.loads(raw)["messages"], indent=1, ensure_ascii=False)[:200_000].splitlines()

    return "\n".join(list(difflib.unified_diff(lines(one), lines(other), "one process", "replicas", n=2))[:80]) + "\n"
