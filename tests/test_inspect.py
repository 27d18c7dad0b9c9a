"""Session inspection (HTTP and CLI), retention, and a restart that must not change what is forwarded."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import subprocess
import sys
import time
from contextlib import nullcontext
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from stores import POSTGRES, run_sql, sqlite_only, store_location, store_settings

from proxy.retention import DAY_S, start_retention, sweep
from proxy.storage import Scope

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parent.parent
TASK = "Fix the parser in src/parser.py. Never edit the tests."
TOOLS = [{"type": "function", "function": {"name": "bash", "description": "run a command",
                                           "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}]
REF = re.compile(r"\[ref:([0-9a-f]{12})\]")


def conversation(steps: int, word: str = "tok", task: str = TASK) -> list[dict[str, Any]]:
    """A deterministic agent run: tool calls with plain, failing and oversized outputs, `key: value` facts, and
    a user interjection now and then. Step k's request is conversation(k)."""
    # the system prompt names `word`: runs that share their first message share their session (forks)
    messages: list[dict[str, Any]] = [{"role": "system", "content": f"You are a coding agent ({word})."},
                                      {"role": "user", "content": task}]
    for step in range(steps):
        call = f"call_{step}"
        command = f"python -m pytest tests/test_{step}.py" if step % 5 == 4 else f"cat src/mod{step}.py"
        messages.append({"role": "assistant", "content": f"Step {step}: checking.", "tool_calls": [
            {"id": call, "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": command})}}]})
        if step % 5 == 4:
            output = f"<returncode>1</returncode>\nTraceback (most recent call last):\nValueError: bad token at line {step}"
        else:
            size = 700 if step % 7 == 6 else 90
            output = (f"<returncode>0</returncode>\nstatus: ok\nversion: 1.{step}\nowner: team-{step % 3}\n"
                      + " ".join(f"{word}{step}x{i}" for i in range(size)))
        messages.append({"role": "tool", "tool_call_id": call, "content": output})
        if step % 6 == 3:
            messages.append({"role": "user", "content": f"Note {step}: keep the public API of module {step} stable."})
    return messages


def drive(proxy: Any, steps: range, key: str = "sk-test", tools: bool = True, **kwargs: Any) -> list[Any]:
    """One request per step; the raw responses."""
    client = proxy.client(key)
    extra = {"tools": TOOLS} if tools else {}
    return [client.chat.completions.with_raw_response.create(model="small-test", messages=conversation(step, **kwargs),
                                                             **extra)
            for step in steps]


def get(proxy: Any, path: str, key: str = "sk-test") -> httpx.Response:
    return httpx.get(proxy.url + path, headers={"authorization": f"Bearer {key}"}, timeout=10)


def count(store: str, table: str, session: str, column: str = "session_id") -> int:
    return run_sql(store, f"SELECT count(*) FROM {table} WHERE {column} = ?", (session,))[0][0]


def set_updated_at(store: str, session: str, when: float) -> None:
    run_sql(store, "UPDATE sessions SET updated_at = ? WHERE id = ?", (when, session))


# --- HTTP ---------------------------------------------------------------------------------------------------------


def test_sessions_are_listed_for_their_own_key_only(proxy, fake) -> None:
    session = drive(proxy, range(1, 3), key="sk-one")[-1].headers["x-workset-session"]
    mine = get(proxy, "/v1/workset/sessions", "sk-one").json()
    assert mine["object"] == "list"
    assert [row["id"] for row in mine["data"]] == [session]
    row = mine["data"][0]
    assert set(row) == {"id", "explicit_id", "client_id", "parent_id", "forked_from", "created_at", "updated_at",
                        "model", "policy", "messages"}
    assert row["model"] == "small-test" and row["policy"] == "small" and row["messages"] == len(conversation(2))
    assert get(proxy, "/v1/workset/sessions", "sk-two").json()["data"] == []
    for path in (f"/v1/workset/sessions/{session}", f"/v1/workset/sessions/{session}/checkpoints"):
        other = get(proxy, path, "sk-two")
        assert other.status_code == 404 and other.json()["error"]["code"] == "not_found"


def test_session_details_hold_the_state_along_the_latest_branch(proxy, fake) -> None:
    client = proxy.client()
    messages = conversation(5)
    client.chat.completions.create(model="small-test", messages=messages, extra_headers={"x-workset-session": "run-7"})
    by_explicit = get(proxy, "/v1/workset/sessions/run-7")
    assert by_explicit.status_code == 200
    details = by_explicit.json()
    assert details["explicit_id"] == "run-7" and details["id"].startswith("x_")
    assert get(proxy, f"/v1/workset/sessions/{details['id']}").json() == details
    state = details["state"]
    assert state["goal"] == TASK
    assert any("Never edit the tests" in constraint for constraint in state["constraints"])
    assert state["actions"] == 5 and details["branch"]["messages"] == len(messages)
    assert {"kind", "key", "value", "node"} <= set(details["facts"][0])
    assert {(a["tool"], a["outcome"]) for a in details["actions"]} == {("bash", "ok"), ("bash", "error")}


def test_checkpoints_appear_after_a_compaction(proxy, fake) -> None:
    responses = drive(proxy, range(1, 16))
    assert any(r.headers.get("x-workset-compacted") == "1" for r in responses)
    session = responses[-1].headers["x-workset-session"]
    checkpoints = get(proxy, f"/v1/workset/sessions/{session}/checkpoints").json()
    assert checkpoints["object"] == "list" and checkpoints["data"]
    first = checkpoints["data"][0]
    assert first["tokens_after"] < first["tokens_before"]
    assert first["state"]["goal"] == TASK and first["epoch"]["tip_hash"] == first["node"]


def test_evidence_of_a_forwarded_ref_is_for_its_key_only(proxy, fake) -> None:
    drive(proxy, range(1, 16))
    forwarded = json.dumps(fake.chat_requests()[-1].body["messages"])
    ref = REF.search(forwarded).group(1)  # type: ignore[union-attr]
    evidence = get(proxy, f"/v1/workset/evidence/{ref}").json()
    assert evidence["ref"] == ref and evidence["role"] == "tool" and evidence["tool"] == "bash"
    assert evidence["session"].startswith("s_") and evidence["tokens"] > 0
    assert evidence["content"] in [m["content"] for m in conversation(15) if m["role"] == "tool"]
    other = get(proxy, f"/v1/workset/evidence/{ref}", "sk-other")
    unknown = get(proxy, "/v1/workset/evidence/000000000000", "sk-other")
    assert other.status_code == unknown.status_code == 404
    assert other.json()["error"] == {**unknown.json()["error"], "message": f"ref {ref!r} not found"}


@pytest.mark.parametrize("path, status, code", [
    ("/v1/workset/sessions/s_nope", 404, "not_found"),
    ("/v1/workset/sessions/s_nope/checkpoints", 404, "not_found"),
    ("/v1/workset/evidence/0123456789ab", 404, "not_found"),
    ("/v1/workset/evidence/xyz", 400, "invalid_ref"),
    ("/v1/workset/evidence/0123456789AB", 400, "invalid_ref"),
    ("/v1/workset/sessions?limit=0", 400, "invalid_request"),
    ("/v1/workset/sessions?limit=x", 400, "invalid_request"),
])
def test_bad_or_unknown_ids_get_openai_style_4xx(proxy, path: str, status: int, code: str) -> None:
    response = get(proxy, path)
    assert response.status_code == status
    error = response.json()["error"]
    assert error["code"] == code and error["type"] == "invalid_request_error" and error["message"]


def test_inspection_needs_a_workset_key_when_workset_pays(start_proxy, fake) -> None:
    proxy = start_proxy(
        model_list=[{"model_name": "*", "litellm_params": {"model": "openai/*", "api_base": fake.url + "/v1",
                                                           "api_key": "sk-provider-secret"}}],
        server={"api_keys": ["ws-team-key"]},
    )
    refused = get(proxy, "/v1/workset/sessions", "sk-random")
    assert refused.status_code == 401 and refused.json()["error"]["type"] == "authentication_error"
    assert get(proxy, "/v1/workset/sessions", "ws-team-key").status_code == 200


# --- retention ------------------------------------------------------------------------------------------------------


def test_store_deletes_old_sessions_with_everything_they_own(proxy, fake) -> None:
    old = drive(proxy, range(1, 16), word="zebra")[-1].headers["x-workset-session"]
    recent = drive(proxy, range(1, 16), word="yak", task="Port the lexer. Never use regex.")[-1].headers["x-workset-session"]
    proxy.flush()
    db, store = proxy.store, proxy.engine.store
    for session in (old, recent):
        for table in ("messages", "facts", "actions", "evidence", "checkpoints"):
            assert count(db, table, session), (table, session)
    set_updated_at(db, old, time.time() - 40 * DAY_S)

    assert store.delete_sessions_before(time.time() - 30 * DAY_S) == [old]

    for table in ("messages", "facts", "actions", "evidence", "checkpoints", "sessions"):
        column = "id" if table == "sessions" else "session_id"
        assert not count(db, table, old, column), table
        assert table == "sessions" or count(db, table, recent), table
    assert store.search_evidence(Scope.whole(old), "zebra3x5") == [] and store.search_evidence(Scope.whole(recent), "yak3x5")
    if not POSTGRES:  # SQLite's FTS index itself, not only its join with evidence (PostgreSQL's is a column of it)
        with sqlite3.connect(db) as conn:
            matches = "SELECT count(*) FROM evidence_fts WHERE evidence_fts MATCH ?"
            assert conn.execute(matches, ("zebra3x5",)).fetchone()[0] == 0
            assert conn.execute(matches, ("yak3x5",)).fetchone()[0] == 1
            conn.execute("INSERT INTO evidence_fts(evidence_fts) VALUES('integrity-check')")
    assert store.delete_sessions_before(time.time() - 30 * DAY_S) == []


def test_startup_sweep_deletes_old_sessions_and_logs_the_count(start_proxy, fake, tmp_path, capsys) -> None:
    db = store_location(tmp_path / "shared.db")
    first = start_proxy(store=store_settings(db))
    old = drive(first, range(1, 4), word="zebra")[-1].headers["x-workset-session"]
    recent = drive(first, range(1, 4), word="yak", task="Port the lexer.")[-1].headers["x-workset-session"]
    first.stop()
    set_updated_at(db, old, time.time() - 3600)
    capsys.readouterr()

    second = start_proxy(store={**store_settings(db), "retention_days": 0.001})  # 86 seconds
    assert [row["id"] for row in get(second, "/v1/workset/sessions").json()["data"]] == [recent]
    assert count(db, "messages", old) == 0 and count(db, "messages", recent)
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines() if '"retention"' in line]
    assert [(line["deleted"], line["retention_days"]) for line in lines] == [(1, 0.001)]


def test_a_deleted_session_is_not_served_from_the_cache(proxy, fake) -> None:
    session = drive(proxy, range(1, 4))[-1].headers["x-workset-session"]
    assert any(branch.session_id == session for branch in proxy.engine.sessions.cache.all())
    assert sweep(proxy.engine, 30, now=time.time() + 31 * DAY_S) == 1
    assert not proxy.engine.sessions.cache.all()
    # the conversation goes on: its session is recreated from this request alone
    again = drive(proxy, range(4, 5))[-1]
    assert again.headers["x-workset-session"] == session
    assert get(proxy, f"/v1/workset/sessions/{session}").json()["branch"]["messages"] == len(conversation(4))


def test_retention_sweeps_again_every_interval_until_cancelled() -> None:
    cutoffs: list[float] = []
    engine = SimpleNamespace(sessions=SimpleNamespace(settle_all=lambda: None, cache=SimpleNamespace(all=list),
                                                      forget_sessions=lambda ids: None),
                             store=SimpleNamespace(exclusive=lambda name: nullcontext(),
                                                   delete_sessions_before=lambda cutoff: cutoffs.append(cutoff) or []))

    async def run() -> None:
        task = start_retention(engine, 2.0, every_s=0.01)  # type: ignore[arg-type]
        assert len(cutoffs) == 1  # the start-up sweep runs before serving
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    started = time.time()
    asyncio.run(asyncio.wait_for(run(), 10))
    assert len(cutoffs) >= 3
    assert all(started - 2 * DAY_S - 1 < cutoff < time.time() - 2 * DAY_S for cutoff in cutoffs)


# --- CLI ------------------------------------------------------------------------------------------------------------


def workset(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "proxy", *args], capture_output=True, text=True, timeout=120,
                          cwd=REPO)


def rows(store: str) -> dict[str, int]:
    return {table: run_sql(store, f"SELECT count(*) FROM {table}")[0][0]
            for table in ("sessions", "messages", "facts", "actions", "evidence", "checkpoints")}


def test_cli_lists_inspects_and_shows(proxy, fake, tmp_path) -> None:
    responses = drive(proxy, range(1, 16), tools=False)
    session = responses[-1].headers["x-workset-session"]
    proxy.flush()
    config = str(proxy.config_path)
    forwarded = fake.chat_requests()[-1].body["messages"]

    listing = workset("sessions", "--config", config)
    assert listing.returncode == 0, listing.stderr
    assert session in listing.stdout and "small-test" in listing.stdout

    inspected = workset("inspect", session, "--config", config)
    if POSTGRES:  # inspect works on a copy of a SQLite store: it says so, in one line
        assert inspected.returncode == 2 and "PostgreSQL store is not copied" in inspected.stderr, inspected.stderr
    else:
        assert inspected.returncode == 0, inspected.stderr
        out = inspected.stdout
        assert "Never edit the tests" in out and "Goal: " + TASK in out
        # replaying the latest request gives what the proxy forwarded for it
        assert f"{len(forwarded)} messages, {responses[-1].headers['x-workset-tokens-sent']} tokens sent" in out
        assert len(re.findall(r"^\[\d+\] ", out, re.M)) == len(forwarded)

    ref = REF.search(json.dumps(forwarded)).group(1)  # type: ignore[union-attr]
    shown = workset("show", ref, "--store", proxy.store)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.rstrip("\n") == proxy.engine.store.evidence_by_ref(ref)["content"]


@sqlite_only  # inspect copies the SQLite file (a PostgreSQL store is refused: see the test above)
def test_cli_inspect_never_writes_the_store(proxy, fake, tmp_path) -> None:
    session = drive(proxy, range(1, 16), tools=False)[-1].headers["x-workset-session"]
    proxy.flush()
    before = rows(proxy.store)
    tiny = tmp_path / "tiny.yaml"  # a budget this small compacts the next call: a checkpoint, on the copy only
    tiny.write_text(json.dumps({"name": "tiny", "recent_turns": 2, "budget": {"max_input_tokens": 1000}}))
    inspected = workset("inspect", session, "--config", str(proxy.config_path), "--policy", str(tiny))
    assert inspected.returncode == 0, inspected.stderr
    assert "policy tiny" in inspected.stdout and "this call compacts" in inspected.stdout
    assert rows(proxy.store) == before


@pytest.mark.parametrize("args, needle", [
    (("show", "000000000000"), "'000000000000' not found"),
    (("show", "nope"), "12 lowercase hex digits"),
    # inspect works on a copy of a SQLite store, and says so of a PostgreSQL one
    (("inspect", "s_nope"), "PostgreSQL store is not copied" if POSTGRES else "no session 's_nope'"),
])
def test_cli_bad_input_exits_2_with_one_line(proxy, fake, args: tuple[str, ...], needle: str) -> None:
    drive(proxy, range(1, 2))
    proxy.flush()
    result = workset(*args, "--config", str(proxy.config_path))
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], result.stderr


def test_cli_without_a_store_exits_2(tmp_path) -> None:
    result = workset("sessions", "--store", str(tmp_path / "missing.db"))
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        f"workset: no store at {tmp_path / 'missing.db'} (give --store PATH or URL, or --config)"]
    assert not (tmp_path / "missing.db").exists()


# --- restart ----------------------------------------------------------------------------------------------------------


def forwarded_turns(fake: Any, responses: list[Any], since: int) -> list[tuple[Any, ...]]:
    """Per turn: what the provider received and the figures workset reported."""
    bodies = [r.body for r in fake.chat_requests()[since:]]
    assert len(bodies) == len(responses)
    return [(body["messages"], r.headers["x-workset-session"], r.headers["x-workset-tokens-sent"],
             r.headers.get("x-workset-compacted")) for body, r in zip(bodies, responses)]


@pytest.mark.parametrize("restart_at", [8, 15])  # right after a compaction (turn 7), and between two
def test_after_a_restart_the_session_continues_with_byte_identical_working_sets(start_proxy, fake, tmp_path,
                                                                               restart_at: int) -> None:
    before, after = range(1, restart_at), range(restart_at, 29)
    db = store_location(tmp_path / "restarted.db")
    first = start_proxy(store=store_settings(db))
    responses = drive(first, before)
    first.stop()  # lifespan shutdown: deferred ingest settled, store closed
    second = start_proxy(store=store_settings(db))
    responses += drive(second, after)
    restarted = forwarded_turns(fake, responses, 0)

    seen = len(fake.chat_requests())
    straight = forwarded_turns(fake, drive(start_proxy(), range(1, 29)), seen)

    compactions = [turn for turn, figures in zip(range(1, 29), straight) if figures[3] == "1"]
    assert compactions and min(compactions) < after.start <= max(compactions) and len(compactions) >= 2, compactions
    for turn, (got, want) in enumerate(zip(restarted, straight), start=1):
        assert got == want, f"turn {turn} differs after the restart at turn {after.start}"


def test_an_inspection_settles_its_own_keys_conversations_and_waits_for_no_others(tmp_path: Path) -> None:
    """Before it reads the store, an inspection settles what its key's conversations deferred (so every answered
    request is there). It leaves other keys' conversations alone, and passes over one a request is working on
    now (whose answer waits for its own settling): it waits for neither."""
    import threading

    from proxy.session import Sessions
    from proxy.storage import open_store
    from proxy.tokens import TokenCounter

    store = open_store(store_location(tmp_path / "store.db"))
    sessions = Sessions(store, TokenCounter())
    mine = sessions.resolve("key-a", None, [{"role": "user", "content": "mine"}], "m", "p").branch
    busy = sessions.resolve("key-a", None, [{"role": "user", "content": "mine too"}], "m", "p").branch
    theirs = sessions.resolve("key-b", None, [{"role": "user", "content": "theirs"}], "m", "p").branch
    idle = sessions.resolve("key-b", None, [{"role": "user", "content": "theirs too"}], "m", "p").branch
    assert (mine.settled, busy.settled, theirs.settled, idle.settled) == (0, 0, 0, 0)  # deferred until forwarded
    release = threading.Event()

    def working_on(branch: Any, held: threading.Event) -> None:
        with branch.lock:
            held.set()
            release.wait(30)

    holders = []
    for branch in (busy, theirs):
        held = threading.Event()
        holders.append(threading.Thread(target=working_on, args=(branch, held), daemon=True))
        holders[-1].start()
        assert held.wait(10)
    try:
        inspection = threading.Thread(target=sessions.settle_all, args=("key-a", False), daemon=True)
        inspection.start()
        inspection.join(10)
        assert not inspection.is_alive(), "the inspection waited for a conversation a request is working on"
    finally:
        release.set()
        for holder in holders:
            holder.join(10)
    assert (mine.settled, busy.settled, theirs.settled, idle.settled) == (1, 0, 0, 0)  # no other key's work done
    store.flush()
    stored = {row["id"]: row["messages"] for key in ("key-a", "key-b") for row in store.sessions(key)}
    assert (stored[mine.session_id], stored[busy.session_id], stored[theirs.session_id]) == (1, 0, 0)
    store.close()


def test_a_view_whose_settling_fails_waits_for_every_queued_write() -> None:
    """If settling the caller's conversations fails, which of their answered turns were queued for the store is
    unknown: the view then waits for every queued write (slower, never missing a turn already answered), and
    when settling works, for the caller's own conversations' writes only."""
    from contextlib import contextmanager

    from proxy.inspect import settled_reads

    scopes: list[Any] = []

    class Store:
        @contextmanager
        def reads_waiting_for(self, sessions: Any) -> Any:
            scopes.append(sessions)
            yield

    def failing(*args: Any, **kwargs: Any) -> set[str]:
        raise RuntimeError("a branch failed to settle")

    for settle_all, expected in ((failing, None), (lambda *args, **kwargs: {"s1", "s2"}, {"s1", "s2"})):
        workset = SimpleNamespace(engine=SimpleNamespace(sessions=SimpleNamespace(settle_all=settle_all)),
                                  store=Store())
        with settled_reads(workset, "caller-hash"):
            pass
        assert scopes.pop() == expected
