"""Two conversations of one key that share a system prompt and first message are one session until they diverge;
from their first different message they are two sessions, and neither may read what the other stored: not by ref,
not by query, not through retrieval. Each still reads the beginning they shared."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

from stores import run_sql, store_location

from proxy.config import Config
from proxy.engine import Engine
from proxy.policy import BudgetRules, Policy
from proxy.recall import Resolver
from proxy.storage import NewMessage, Scope, open_store
from proxy.tokens import TokenCounter

COUNTER = TokenCounter()
POLICY = replace(Policy(name="tight"), recent_turns=2, budget=replace(BudgetRules(), max_input_tokens=2500))
SHARED = [{"role": "system", "content": "You are a support agent."},
          {"role": "user", "content": "Look up my account and tell me my balance."}]


def conversation(account: str, secret: str) -> list[dict]:
    messages = list(SHARED)
    for step in range(8):
        call = f"call_{step}"
        messages.append({"role": "assistant", "content": f"Step {step}.", "tool_calls": [
            {"id": call, "type": "function", "function": {"name": "get_account", "arguments": json.dumps({"id": account})}}]})
        detail = f"account {account} balance {secret}" if step == 0 else "nothing new " * 80
        messages.append({"role": "tool", "tool_call_id": call, "content": detail + " " + "padding " * 120})
    return messages


def test_a_conversation_cannot_recall_or_retrieve_what_another_stored(tmp_path: Path) -> None:
    engine = Engine(Config(), {"tight": POLICY}, open_store(store_location(tmp_path / "store.db")), COUNTER)
    alice, bob = conversation("acct_alice_1001", "SECRET_ALICE_9911"), conversation("acct_bob_2002", "SECRET_BOB_7722")
    prepared = {}
    for name, messages in (("alice", alice), ("bob", bob)):
        for end in range(4, len(messages) + 1, 2):
            prepared[name] = engine.prepare({"model": "m", "messages": messages[:end]}, "same-key", policy_name="tight")
            engine.settle(prepared[name])
    assert prepared["alice"].session_id != prepared["bob"].session_id  # two conversations, two sessions
    assert prepared["bob"].branch.scope().sessions == (prepared["alice"].session_id, prepared["bob"].session_id)
    shown = json.dumps(prepared["alice"].body["messages"])
    alice_refs = set(re.findall(r"\[ref:([0-9a-f]+)\]", shown))
    assert alice_refs, "alice's early outputs were elided with refs"
    bob_branch = prepared["bob"].branch
    bob = Resolver(engine.store, COUNTER, bob_branch.scope(), 2000)
    stolen = "account acct_alice_1001 balance"  # alice's stored output (an answer may echo the query itself)
    assert stolen not in bob(json.dumps({"query": "SECRET_ALICE_9911 balance"}))
    assert "account acct_bob_2002 balance SECRET_BOB_7722" in bob(json.dumps({"query": "SECRET_BOB_7722 balance"}))
    for ref in alice_refs:
        answer = bob(json.dumps({"ref": ref}))
        assert stolen not in answer and "acct_alice" not in answer, answer
    alice_branch = prepared["alice"].branch
    alice_resolver = Resolver(engine.store, COUNTER, alice_branch.scope(), 2000)
    assert stolen in alice_resolver(json.dumps({"query": "SECRET_ALICE_9911"}))
    # retrieval on a user turn that names the other conversation's value brings nothing of it back
    asking = bob_branch.messages + [{"role": "assistant", "content": "Anything else?"},
                                    {"role": "user", "content": "What about SECRET_ALICE_9911 and acct_alice_1001?"}]
    retrieved = engine.prepare({"model": "m", "messages": asking}, "same-key", policy_name="tight")
    assert stolen not in json.dumps(retrieved.body["messages"])
    engine.store.close()


def test_other_conversations_better_matches_do_not_crowd_out_this_ones(tmp_path: Path) -> None:
    """The path filter is part of the search, not applied to its top hits afterwards."""
    store = open_store(store_location(tmp_path / "store.db"))
    store.create_session("S", "key", None, "m", "p")
    others = [NewMessage(f"other{n}", None, 0, {"role": "tool", "content": "x"}, 5, f"r{n}", "t", "", "ok",
                         "invoice invoice invoice total") for n in range(40)]
    mine = NewMessage("mine", None, 0, {"role": "tool", "content": "y"}, 5, "rmine", "t", "", "ok",
                      "invoice " + "filler " * 200)
    store.record(Scope.whole("S"), [*others, mine], [], [], "m", "p", 1)
    assert [hit["ref"] for hit in store.search_evidence(Scope(("S",), ["mine"]), "invoice", 3)] == ["rmine"]
    assert len(store.search_evidence(Scope.whole("S"), "invoice", 3)) == 3  # without a path: the whole session
    store.close()


def test_an_explicit_session_recalls_across_its_edited_history(tmp_path: Path) -> None:
    """An explicit session id declares one conversation: a client that edits its history keeps its refs."""
    engine = Engine(Config(), {"tight": POLICY}, open_store(store_location(tmp_path / "store.db")), COUNTER)
    first = conversation("acct_carol_3003", "SECRET_CAROL_5533")
    edited = [*SHARED, {"role": "user", "content": "(history edited by the client)"}]
    for messages in (first, edited):
        prepared = engine.prepare({"model": "m", "messages": messages}, "key", "carol-session", policy_name="tight")
        engine.settle(prepared)
    resolver = Resolver(engine.store, COUNTER, prepared.branch.scope(), 2000)
    assert "account acct_carol_3003 balance" in resolver(json.dumps({"query": "SECRET_CAROL_5533"}))
    engine.store.close()


def test_conversations_that_share_their_beginning_are_sessions_from_where_they_diverge(tmp_path: Path) -> None:
    """Twenty users of one key whose agents send the same system prompt and first message: twenty sessions, each
    with the state it learnt on its own path, and the shared beginning recalled by all of them."""
    store_path = store_location(tmp_path / "store.db")
    engine = Engine(Config(), {"tight": POLICY}, open_store(store_path), COUNTER)
    ids: dict[int, str] = {}
    first = engine.prepare({"model": "m", "messages": SHARED}, "team-key", policy_name="tight")
    engine.settle(first)
    for number in range(20):
        messages = conversation(f"acct_{number:04d}", f"SECRET_{number:04d}")
        for end in (4, len(messages)):
            prepared = engine.prepare({"model": "m", "messages": messages[:end]}, "team-key", policy_name="tight")
            engine.settle(prepared)
        ids[number] = prepared.session_id
        assert prepared.branch.scope().sessions[0] == first.session_id  # the shared beginning is read from there
    assert len(set(ids.values())) == 20
    assert ids[0] == first.session_id  # the first to go on continues the session; the others fork from it
    engine.store.close()
    # After a restart (nothing in memory), each conversation resolves to its own session again, and a new one
    # that diverges from a stored conversation (the cache knows nothing of it) is a session of its own.
    engine = Engine(Config(), {"tight": POLICY}, open_store(store_path), COUNTER)
    for number in (0, 7):
        messages = conversation(f"acct_{number:04d}", f"SECRET_{number:04d}")
        again = engine.prepare({"model": "m", "messages": messages + [{"role": "user", "content": "thanks"}]},
                               "team-key", policy_name="tight")
        assert again.session_id == ids[number]
        assert any(fact.key == f"acct_{number:04d}" or f"acct_{number:04d}" in fact.value
                   for fact in again.branch.state.facts.values()) or again.branch.state.actions
    diverging = conversation("acct_0000", "SECRET_0000")[:6] + [{"role": "user", "content": "stop, other account"}]
    other = engine.prepare({"model": "m", "messages": diverging}, "team-key", policy_name="tight")
    assert other.session_id not in ids.values()
    engine.store.close()


def test_a_retry_of_the_same_request_stays_in_its_session(tmp_path: Path) -> None:
    engine = Engine(Config(), {"tight": POLICY}, open_store(store_location(tmp_path / "store.db")), COUNTER)
    messages = conversation("acct_x", "SECRET_X")
    sessions = set()
    for _ in range(3):
        prepared = engine.prepare({"model": "m", "messages": messages}, "k", policy_name="tight")
        engine.settle(prepared)
        sessions.add(prepared.session_id)
        shorter = engine.prepare({"model": "m", "messages": messages[:6]}, "k", policy_name="tight")  # an older turn again
        sessions.add(shorter.session_id)
    assert len(sessions) == 1
    engine.store.close()


def test_a_session_others_forked_from_lives_as_long_as_they_do(tmp_path: Path) -> None:
    import time

    store_path = store_location(tmp_path / "store.db")
    engine = Engine(Config(), {"tight": POLICY}, open_store(store_path), COUNTER)
    first = conversation("acct_a", "SECRET_A")
    second = conversation("acct_b", "SECRET_B")
    for messages in (first, second):
        engine.settle(engine.prepare({"model": "m", "messages": messages}, "k", policy_name="tight"))
    parent = engine.prepare({"model": "m", "messages": first}, "k", policy_name="tight").session_id
    child = engine.prepare({"model": "m", "messages": second}, "k", policy_name="tight").session_id
    engine.store.flush()
    # as if the parent's own conversation had stopped long ago
    run_sql(store_path, "UPDATE sessions SET updated_at = ? WHERE id = ?", (time.time() - 100 * 86400, parent))
    assert engine.store.delete_sessions_before(time.time() - 30 * 86400) == []  # the child still reads its start
    engine.store.close()
    engine = Engine(Config(), {"tight": POLICY}, open_store(store_path), COUNTER)
    again = engine.prepare({"model": "m", "messages": second + [{"role": "user", "content": "and now?"}]}, "k",
                           policy_name="tight")
    assert again.session_id == child and again.rewritten and not again.note
    run_sql(store_path, "UPDATE sessions SET updated_at = ?", (time.time() - 100 * 86400,))
    engine.store.flush()
    assert sorted(engine.store.delete_sessions_before(time.time() - 30 * 86400)) == sorted([parent, child])
    engine.store.close()


def test_writes_committed_together_fail_alone(tmp_path: Path) -> None:
    """The writer commits what queued up meanwhile in one transaction; a write that fails is undone alone (the
    backend's writer thread)."""
    store = open_store(store_location(tmp_path / "store.db"))
    store.create_session("S", "key", None, "m", "p")

    def stored(node: str) -> NewMessage:
        return NewMessage(node, None, 0, {"role": "tool", "content": node}, 5, "r" + node, "t", "", "ok", node)

    def broken() -> None:
        store._exec("INSERT INTO messages (hash, session_id, depth, role, body) VALUES"  # noqa: SLF001
                    " ('half', 'S', 0, 'tool', '{}')")  # a write that fails midway
        raise RuntimeError("disk on fire")

    store.record(Scope.whole("S"), [stored("before")], [], [], "m", "p", 1)
    store._submit(broken)  # noqa: SLF001
    store.record(Scope.whole("S"), [stored("after")], [], [], "m", "p", 1)
    store.flush()
    assert store.failed_writes == 1
    assert {node for node in ("before", "after", "half") if store.find_nodes([node])} == {"before", "after"}
    store.close()
