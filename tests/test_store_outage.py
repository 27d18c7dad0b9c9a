"""A replica cut off from its PostgreSQL store (a TCP relay between them, stopped for WORKSET_OUTAGE_S seconds, 8 by
default) while agents with tool outputs talk without pause: no request fails, each goes out as the agent sent it and
says so (`x-workset-degraded: store`); /healthz says the store is down without the driver's words, the inspection
routes answer 503 with retry-after, `workset_store_up` is 0; once the store is back, working sets are built again
within seconds, every ref they show resolves, and the store holds every message and every tool output.

And the restart seen idle: every pooled connection dies while the replica waits, the database answers again at once.
The next requests find the dead connections replaced, not an outage: no request fails open, no write is lost.

A database actually stopped and started again is `make soak`'s (bench.store_faults, a PostgreSQL of its own)."""

from __future__ import annotations

import asyncio
import os
import re
import time
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from relay import Relay
from conftest import write_config
from servers import workset_serve
from toolsteps import tool_step
from stores import once_per_make_test, requires_postgres, run_sql, schema_url

OUTAGE_S = float(os.environ.get("WORKSET_OUTAGE_S", "8"))
CONVERSATIONS = 4
KEY = "sk-outage"
RECOVERY_S = 10  # the bound on building working sets again once the database is back
REF = re.compile(r"\[ref:([0-9a-f]{6,})\]")

pytestmark = [pytest.mark.e2e, once_per_make_test, requires_postgres]


def _through(relay: Relay, url: str) -> str:
    """The store URL with its host and port replaced by the relay's."""
    return url.replace("127.0.0.1:5432", f"127.0.0.1:{relay.port}", 1)


def _config(tmp_path: Path, fake: Any, relay: Relay, store: str) -> Path:
    # a lock wait is bounded by lock_timeout_s (then the request goes out as sent), well within the client's
    return write_config(tmp_path, fake.url, store={"url": _through(relay, store), "timeout_s": 1.0, "retry_s": 0.5,
                                                   "lock_timeout_s": 5.0},
                        upstream={"timeout_s": 10, "connect_timeout_s": 2}, ingest={"extract_processes": 0})


@pytest.mark.timeout(300)
def test_store_cut_off_under_load(tmp_path: Path, fake: Any) -> None:
    store = schema_url(tmp_path)
    assert "127.0.0.1:5432" in store, "the relay replaces 127.0.0.1:5432 in the store URL"
    with Relay(5432) as relay:
        replica = workset_serve(_config(tmp_path, fake, relay, store))
        try:
            outcome = asyncio.run(_load(replica.url, relay))
            unresolved = asyncio.run(_unresolved_refs(replica.url, fake, outcome["restored_at"]))
        finally:
            replica.stop()
        log = replica.output()

    assert outcome["failures"] == [], (outcome["failures"][:5], log[-6000:])
    # nothing waits longer than the store's bounds (timeout_s, lock_timeout_s) and then some for a busy machine
    assert outcome["slowest_s"] < 20, (outcome["slowest_s"], log[-6000:])
    during = outcome["during"]
    assert len(during) >= CONVERSATIONS * 3, "requests went on while the store was cut off"
    late = during[len(during) // 4:]
    assert all(session is None and degraded == "store" for session, degraded in late), \
        ("with the store away, requests go out as sent and say so", [item for item in late if item != (None, "store")])
    assert outcome["health_during"] == [{"status": "degraded", "store": "down"}], outcome["health_during"]
    assert outcome["inspect_during"] and all(status == 503 and retry == "1" and code == "store_unavailable"
                                             for status, retry, code in outcome["inspect_during"]), \
        outcome["inspect_during"]
    assert outcome["up_during"] == {0.0} and outcome["up_after"] == 1.0, (outcome["up_during"], outcome["up_after"])
    assert outcome["health_after"] == {"status": "ok"}
    assert outcome["rebuilt_s"] is not None and outcome["rebuilt_s"] <= RECOVERY_S, (outcome["rebuilt_s"], log[-6000:])
    # one line when the store went down, one when it came back; failed-open requests without a traceback each
    assert log.count('"event": "store_down"') == 1 and log.count('"event": "store_up"') == 1, log[-6000:]
    assert "Traceback" not in log and "workset_step_failed" not in log, log[-6000:]
    assert unresolved == [], unresolved[:5]
    # every request has its record, those forwarded as sent while the store was away included (written once their
    # conversation reached the store again), in the order they were made
    recorded = run_sql(store, "SELECT count(*), sum(CASE WHEN note LIKE 'forwarded as sent%' THEN 1 ELSE 0 END)"
                              " FROM turns")[0]
    assert recorded[0] == outcome["requests"] and recorded[1] >= len(late), (recorded, outcome["requests"],
                                                                            outcome["degraded"], [l[:600] for l in log.splitlines() if "store_write_failed" in l])
    for session, _, _ in outcome["final"]:
        times = [row[0] for row in run_sql(store, "SELECT created_at FROM turns WHERE session_id = ? ORDER BY n",
                                           (session,))]
        assert times == sorted(times), session
    # every conversation went on after the cut, in a session of its own, and the store holds all it said
    for session, messages, outputs in outcome["final"]:
        assert session is not None
        stored = run_sql(store, "SELECT count(*) FROM messages WHERE session_id = ?", (session,))[0][0]
        assert stored == messages, (session, stored, messages)
        kept = run_sql(store, "SELECT count(*) FROM evidence WHERE session_id = ? AND role = 'tool'", (session,))[0][0]
        assert kept == outputs, ("no tool output lost", session, kept, outputs)


async def _load(url: str, relay: Relay) -> dict[str, Any]:
    """CONVERSATIONS agents calling tools without pause: a few seconds, the cut, then until each has had a few
    requests with working sets built again."""
    client = openai.AsyncOpenAI(base_url=url + "/v1", api_key=KEY, timeout=60, max_retries=0)
    failures: list[str] = []
    during: list[tuple[str | None, str | None]] = []
    final: list[tuple[str | None, int, int]] = []
    phase: dict[str, Any] = {"now": "before", "rebuilt_at": None}
    slowest = [0.0]
    requests = [0]
    degraded_total = [0]

    async def agent(number: int) -> None:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": f"You are agent {number}."},
            {"role": "user", "content": f"Task {number}: read every data file of folder {number}, step by step."}]
        session = None
        built_after = 0
        step = 0
        while phase["now"] != "done" or built_after < 3:
            step += 1
            messages += tool_step(str(number), step)
            began, began_in = time.monotonic(), phase["now"]
            try:
                raw = await client.chat.completions.with_raw_response.create(model="small-model", messages=messages)
                slowest[0] = max(slowest[0], time.monotonic() - began)
            except Exception as error:  # noqa: BLE001 - any failure is what the test counts
                failures.append(f"{phase['now']}: {error.__class__.__name__}: {error}")
                return
            requests[0] += 1
            degraded_total[0] += raw.headers.get("x-workset-degraded") == "store"
            session = raw.headers.get("x-workset-session")
            if began_in == "cut" and phase["now"] == "cut":  # made and answered while the store was away
                during.append((session, raw.headers.get("x-workset-degraded")))
            elif phase["now"] in ("after", "done") and session is not None:
                built_after += 1
                if phase["rebuilt_at"] is None:
                    phase["rebuilt_at"] = time.monotonic()
            await asyncio.sleep(0.05)
        final.append((session, len(messages), step))  # the store holds all the last request sent

    async def observe(http: httpx.AsyncClient) -> tuple[dict[str, Any], tuple[int, str | None, str | None], float]:
        health = (await http.get(url + "/healthz")).json()
        seen = await http.get(url + "/v1/workset/sessions", headers={"authorization": f"Bearer {KEY}"})
        code = seen.json().get("error", {}).get("code") if seen.status_code != 200 else None
        up = re.search(r"^workset_store_up ([0-9.]+)$", (await http.get(url + "/metrics")).text, re.M)
        return health, (seen.status_code, seen.headers.get("retry-after"), code), float(up.group(1)) if up else -1.0

    async def timeline() -> dict[str, Any]:
        async with httpx.AsyncClient(timeout=10) as http:
            await asyncio.sleep(3)
            await asyncio.to_thread(relay.cut)  # the relay's own loop does it: this one goes on serving the agents
            phase["now"] = "cut"
            health: list[dict[str, Any]] = []
            inspected: list[tuple[int, str | None, str | None]] = []
            up: set[float] = set()
            await asyncio.sleep(1.5)  # the store is found down by a request, or by /healthz's own probe
            until = time.monotonic() + OUTAGE_S - 1.5
            while time.monotonic() < until:
                seen = await observe(http)
                health += [seen[0]] if seen[0] not in health else []
                inspected.append(seen[1])
                up.add(seen[2])
                await asyncio.sleep(1)
            relay.restore()
            restored_at = time.monotonic()
            phase["now"] = "after"
            after: dict[str, Any] = {}
            until = time.monotonic() + 30
            while time.monotonic() < until and (after != {"status": "ok"} or phase["rebuilt_at"] is None):
                await asyncio.sleep(0.25)
                after = (await http.get(url + "/healthz")).json()
            up_after = (await observe(http))[2]
            await asyncio.sleep(2)
            phase["now"] = "done"
        return {"health_during": health, "inspect_during": inspected, "up_during": up, "health_after": after,
                "up_after": up_after, "restored_at": restored_at}

    seen, *_ = await asyncio.gather(timeline(), *(agent(n) for n in range(CONVERSATIONS)))
    await client.close()
    rebuilt = phase["rebuilt_at"]
    return {**seen, "failures": failures, "during": during, "final": final, "slowest_s": slowest[0],
            "requests": requests[0], "degraded": degraded_total[0],
            "rebuilt_s": None if rebuilt is None else rebuilt - seen["restored_at"]}


async def _unresolved_refs(url: str, fake: Any, since: float) -> list[str]:
    """The refs shown in the requests forwarded once the store was back that the store cannot answer for."""
    shown: set[str] = set()
    for recorded in fake.chat_requests():
        if recorded.at >= since:
            shown.update(REF.findall(str(recorded.body.get("messages"))))
    missing: list[str] = []
    async with httpx.AsyncClient(timeout=10) as http:
        for ref in sorted(shown):
            answer = await http.get(f"{url}/v1/workset/evidence/{ref}", headers={"authorization": f"Bearer {KEY}"})
            if answer.status_code != 200:
                missing.append(f"{ref}: {answer.status_code}")
    assert shown, "the working sets after the outage showed refs (tool outputs excerpted or compacted)"
    return missing


@pytest.mark.timeout(180)
def test_connections_that_died_while_idle_are_replaced_not_an_outage(tmp_path: Path, fake: Any) -> None:
    """A database restart while the replica was idle: every pooled connection (and the writer's) is dead, the
    database answers. The next requests are built as usual, nothing fails open, no write is lost."""
    store = schema_url(tmp_path)
    with Relay(5432) as relay:
        replica = workset_serve(_config(tmp_path, fake, relay, store))
        try:
            sessions = asyncio.run(_idle_restart(replica.url, relay))
        finally:
            replica.stop()
        log = replica.output()
    assert all(session is not None and degraded is None for session, degraded in sessions), (sessions, log[-6000:])
    assert '"event": "store_down"' not in log and "store_write_failed" not in log, log[-6000:]
    session = sessions[-1][0]
    stored = run_sql(store, "SELECT count(*) FROM messages WHERE session_id = ?", (session,))[0][0]
    assert stored == 2 + 2 * len(sessions), (stored, len(sessions))


async def _idle_restart(url: str, relay: Relay) -> list[tuple[str | None, str | None]]:
    client = openai.AsyncOpenAI(base_url=url + "/v1", api_key=KEY, timeout=60, max_retries=0)
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are an agent."},
                                      {"role": "user", "content": "Read the data files, step by step."}]
    seen: list[tuple[str | None, str | None]] = []
    for step in range(1, 9):
        if step == 5:
            await asyncio.sleep(1.0)  # idle: the writes of the last answer are in
            await asyncio.to_thread(relay.cut)  # every connection through the relay dies...
            relay.restore()  # ...and the database answers again at once
            await asyncio.sleep(1.5)  # idle longer than store.check_idle_s
        messages += tool_step("0", step)
        raw = await client.chat.completions.with_raw_response.create(model="small-model", messages=messages)
        seen.append((raw.headers.get("x-workset-session"), raw.headers.get("x-workset-degraded")))
    await client.close()
    return seen
