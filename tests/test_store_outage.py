"""A replica cut off from its PostgreSQL store under load (a TCP relay between them, stopped for 30 s): no request
fails, every one goes out (as the agent sent it while the store is away), /healthz says degraded and the log says
why, and once the store is back every conversation goes on and the store catches up with what it missed."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from relay import Relay
from conftest import write_config
from servers import workset_serve
from stores import once_per_make_test, requires_postgres, run_sql, schema_url

OUTAGE_S = float(os.environ.get("WORKSET_OUTAGE_S", "30"))
CONVERSATIONS = 4


pytestmark = [pytest.mark.e2e, once_per_make_test, requires_postgres]


def _through(relay: Relay, url: str) -> str:
    """The store URL with its host and port replaced by the relay's."""
    return url.replace("127.0.0.1:5432", f"127.0.0.1:{relay.port}", 1)


@pytest.mark.timeout(300)
def test_store_cut_off_under_load(tmp_path: Path, fake: Any) -> None:
    store = schema_url(tmp_path)
    assert "127.0.0.1:5432" in store, "the relay replaces 127.0.0.1:5432 in the store URL"
    with Relay(5432) as relay:
        # a lock wait is bounded by lock_timeout_s (then the request goes out as sent), well within the client's
        config = write_config(tmp_path, fake.url, store={"url": _through(relay, store), "timeout_s": 1.0,
                                                         "retry_s": 2.0, "lock_timeout_s": 5.0},
                              upstream={"timeout_s": 10, "connect_timeout_s": 2}, ingest={"extract_processes": 0})
        replica = workset_serve(config)
        try:
            outcome = asyncio.run(_load(replica.url, relay))
        finally:
            replica.stop()
        log = replica.output()

    assert outcome["failures"] == [], (outcome["failures"][:5], log[-6000:])
    # nothing waits longer than the store's bounds (timeout_s, lock_timeout_s) and then some for a busy machine
    assert outcome["slowest_s"] < 20, (outcome["slowest_s"], log[-6000:])
    during = outcome["during"]
    assert len(during) >= CONVERSATIONS * 3, "requests went on while the store was cut off"
    assert all(session is None for session in during[len(during) // 4:]), \
        "with the store away, requests go out as sent (no session: workset did not build a working set)"
    assert "degraded" in outcome["health_during"] and outcome["health_after"] == "ok"
    assert "store_degraded" in log and "store_recovered" in log
    # every conversation went on after the cut, in a session of its own, and the store holds all it said
    for session, messages in outcome["final"]:
        assert session is not None
        stored = run_sql(store, "SELECT count(*) FROM messages WHERE session_id = ?", (session,))[0][0]
        assert stored == messages, (session, stored, messages)


async def _load(url: str, relay: Relay) -> dict[str, Any]:
    """CONVERSATIONS agents talking without pause: a few seconds, the cut, then a few seconds more."""
    client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="sk-outage", timeout=60, max_retries=0)
    failures: list[str] = []
    during: list[str | None] = []
    final: list[tuple[str | None, int]] = []
    phase = {"now": "before"}
    slowest = [0.0]

    async def agent(number: int) -> None:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": f"You are agent {number}."},
            {"role": "user", "content": f"Task {number}: count the files, step by step."}]
        session = None
        step = 0
        while phase["now"] != "done" or step < 3:
            if phase["now"] == "done":
                step += 1
            began = time.monotonic()
            try:
                raw = await client.chat.completions.with_raw_response.create(model="fake-model", messages=messages)
                slowest[0] = max(slowest[0], time.monotonic() - began)
            except Exception as error:  # noqa: BLE001 - any failure is what the test counts
                failures.append(f"{phase['now']}: {error.__class__.__name__}: {error}")
                return
            session = raw.headers.get("x-workset-session")
            if phase["now"] == "cut":
                during.append(session)
            reply = raw.parse().choices[0].message.content or ""
            messages += [{"role": "assistant", "content": reply},
                         {"role": "user", "content": f"Step {len(messages)} of task {number}: go on."}]
            await asyncio.sleep(0.05)
        final.append((session, len(messages) - 2))

    async def health() -> str:
        async with httpx.AsyncClient(timeout=10) as http:
            return str((await http.get(url + "/healthz")).json()["status"])

    async def timeline() -> tuple[set[str], str]:
        await asyncio.sleep(3)
        await asyncio.to_thread(relay.cut)  # the relay's own loop does it: this one goes on serving the agents
        phase["now"] = "cut"
        seen: set[str] = set()
        until = time.monotonic() + OUTAGE_S
        while time.monotonic() < until:
            seen.add(await health())
            await asyncio.sleep(1)
        relay.restore()
        phase["now"] = "after"
        after = ""
        until = time.monotonic() + 30
        while time.monotonic() < until and after != "ok":
            await asyncio.sleep(0.5)
            after = await health()
        await asyncio.sleep(2)
        phase["now"] = "done"
        return seen, after

    (seen, after), *_ = await asyncio.gather(timeline(), *(agent(n) for n in range(CONVERSATIONS)))
    await client.close()
    return {"failures": failures, "during": during, "final": final, "health_during": seen, "health_after": after,
            "slowest_s": slowest[0]}
