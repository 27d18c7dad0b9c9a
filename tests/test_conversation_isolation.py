"""Two conversations of one key that share a system prompt and first message share a session until they
diverge; from there neither may read what the other stored: not by ref, not by query, not through retrieval."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

from proxy.config import Config
from proxy.engine import Engine
from proxy.policy import BudgetRules, Policy
from proxy.recall import Resolver
from proxy.store import Store
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
    engine = Engine(Config(), {"tight": POLICY}, Store(tmp_path / "store.db"), COUNTER)
    alice, bob = conversation("acct_alice_1001", "SECRET_ALICE_9911"), conversation("acct_bob_2002", "SECRET_BOB_7722")
    prepared = {}
    for name, messages in (("alice", alice), ("bob", bob)):
        for end in range(4, len(messages) + 1, 2):
            prepared[name] = engine.prepare({"model": "m", "messages": messages[:end]}, "same-key", policy_name="tight")
            engine.settle(prepared[name])
    assert prepared["alice"].session_id == prepared["bob"].session_id  # one session, two branches
    shown = json.dumps(prepared["alice"].body["messages"])
    alice_refs = set(re.findall(r"\[ref:([0-9a-f]+)\]", shown))
    assert alice_refs, "alice's early outputs were elided with refs"
    bob_branch = prepared["bob"].branch
    bob = Resolver(engine.store, COUNTER, prepared["bob"].session_id, 2000, path=bob_branch.hashes)
    stolen = "account acct_alice_1001 balance"  # alice's stored output (an answer may echo the query itself)
    assert stolen not in bob(json.dumps({"query": "SECRET_ALICE_9911 balance"}))
    assert "account acct_bob_2002 balance SECRET_BOB_7722" in bob(json.dumps({"query": "SECRET_BOB_7722 balance"}))
    for ref in alice_refs:
        answer = bob(json.dumps({"ref": ref}))
        assert stolen not in answer and "acct_alice" not in answer, answer
    alice_branch = prepared["alice"].branch
    alice_resolver = Resolver(engine.store, COUNTER, prepared["alice"].session_id, 2000,
                              path=alice_branch.hashes)
    assert stolen in alice_resolver(json.dumps({"query": "SECRET_ALICE_9911"}))
    # retrieval on a user turn that names the other conversation's value brings nothing of it back
    asking = bob_branch.messages + [{"role": "assistant", "content": "Anything else?"},
                                    {"role": "user", "content": "What about SECRET_ALICE_9911 and acct_alice_1001?"}]
    retrieved = engine.prepare({"model": "m", "messages": asking}, "same-key", policy_name="tight")
    assert stolen not in json.dumps(retrieved.body["messages"])
    engine.store.close()
