"""A budget the tool definitions and the system prompt take most of: compaction still holds the budget, keeps the
facts of what the user named, and does not compact on every turn."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from stores import store_location

from proxy.config import Config
from proxy.engine import Engine
from proxy.policy import Policy
from proxy.schema import build
from proxy.storage import open_store
from proxy.tokens import TokenCounter
from proxy.workingset import Budget

COUNTER = TokenCounter()
BUDGET = 4000
SYSTEM = "# Airline agent policy\n" + "\n".join(f"- Rule {n}: check the booking rules before acting." for n in range(150))
TOOLS = [{"type": "function", "function": {"name": name, "description": "Airline tool. " * 40, "parameters": {
    "type": "object", "properties": {"user_id": {"type": "string"}, "origin": {"type": "string"}}}}}
    for name in ("get_user_details", "search_direct_flight", "book_reservation")]
USER = {"name": {"first_name": "Mia", "last_name": "Li"}, "dob": "1990-04-05",
        "payment_methods": {"certificate_7504069": {"source": "certificate", "amount": 250, "id": "certificate_7504069"}}}


def engine(tmp_path: Path, **rules: Any) -> Engine:
    policy = build(Policy, {"name": "p", "budget": {"max_input_tokens": BUDGET}, **rules})
    return Engine(Config(), {"p": policy}, open_store(store_location(tmp_path / "s.db")), COUNTER)


def call(call_id: str, name: str, arguments: dict[str, Any], output: Any) -> list[dict[str, Any]]:
    return [{"role": "assistant", "content": None, "tool_calls": [{"id": call_id, "type": "function", "function": {
        "name": name, "arguments": json.dumps(arguments)}}]},
            {"role": "tool", "tool_call_id": call_id, "content": json.dumps(output)}]


def conversation(searches: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Book me a flight from JFK. My user id is mia_li_3668."},
        *call("u", "get_user_details", {"user_id": "mia_li_3668"}, USER),
    ]
    for n in range(searches):
        flights = [{"flight_number": f"HAT{n}{k:02d}", "origin": "JFK", "destination": "SEA", "date": f"2024-05-{n + 10}",
                    "price": 100 + k} for k in range(6)]
        messages += call(f"s{n}", "search_direct_flight", {"origin": "JFK"}, flights)
        messages += [{"role": "assistant", "content": f"I found {len(flights)} flights on May {n + 10}. Another day?"},
                     {"role": "user", "content": "Yes, try the next day please."}]
    return messages


def replay(eng: Engine, messages: list[dict[str, Any]]) -> list[Any]:
    results = []
    for end in range(3, len(messages) + 1):
        if messages[end - 1]["role"] == "assistant":
            continue  # requests end with the user's turn or a tool result
        result = eng.prepare({"model": "m", "messages": messages[:end], "tools": TOOLS}, "caller", "s", "p")
        eng.settle(result)
        results.append(result)
    return results


def forwarded_text(result: Any) -> str:
    return "\n".join(str(message.get("content") or "") for message in result.body["messages"])


def test_requests_stay_within_the_budget_and_keep_what_the_user_named(tmp_path: Path) -> None:
    results = replay(engine(tmp_path), conversation(12))
    assert all(r.tokens_sent <= BUDGET for r in results)
    compacted = [i for i, r in enumerate(results) if r.compacted]
    assert compacted, "the run should outgrow the budget"
    for result in results[compacted[0]:]:
        text = forwarded_text(result)
        # the user card survives every compaction: a booking needs the passenger and the payment method
        assert "dob=1990-04-05" in text and "certificate_7504069{source=certificate; amount=250}" in text


def test_compaction_leaves_room_to_grow_when_fixed_parts_take_most_of_the_budget(tmp_path: Path) -> None:
    results = replay(engine(tmp_path), conversation(12))
    compactions = sum(r.compacted for r in results)
    assert 0 < compactions <= len(results) // 3  # not on every turn: each one frees a share of what is left


def test_quotas_and_thresholds_are_shares_of_what_the_untouchable_parts_leave() -> None:
    policy = build(Policy, {"name": "p", "budget": {"trigger_ratio": 0.8, "target_ratio": 0.3}})
    budget = Budget.of(policy, 5000, untouchable=3000)
    assert (budget.room, budget.trigger, budget.target) == (2000, 4600, 3600)
    assert budget.share(0.15) == 300
    plain = Budget.of(policy, 5000)
    assert (plain.room, plain.trigger, plain.target) == (5000, 4000, 1500)


def test_one_tool_output_takes_at_most_its_share_of_a_small_budget(tmp_path: Path) -> None:
    policy = build(Policy, {"name": "p", "tool_outputs": {"max_share": 0.25}})
    scaled = policy.for_budget(4000).tool_outputs
    assert scaled.max_tokens == 1000 and scaled.head_tokens + scaled.tail_tokens <= 1000
    assert policy.for_budget(40000) is policy
    messages = conversation(0)[:2] + call("big", "search_direct_flight", {"origin": "JFK"},
                                          [{"flight_number": f"HAT{k:03d}", "price": k} for k in range(400)])
    result = engine(tmp_path).prepare({"model": "m", "messages": messages, "tools": TOOLS}, "caller", "s", "p")
    assert result.tokens_sent <= BUDGET
    assert "tokens of this output elided; full output: [ref:" in forwarded_text(result)


def test_an_auto_budget_caps_the_room_not_the_whole_request(tmp_path: Path) -> None:
    """An agent whose tools and system prompt alone pass auto_max_tokens still gets that much room for its work."""
    policy = build(Policy, {"name": "p", "budget": {"max_input_tokens": "auto", "auto_max_tokens": 1500}})
    eng = Engine(Config(), {"p": policy}, open_store(store_location(tmp_path / "s.db")), COUNTER,
                 context_window=lambda model: 200_000)
    messages = conversation(12)
    results = []
    for end in range(3, len(messages) + 1):
        if messages[end - 1]["role"] != "assistant":
            result = eng.prepare({"model": "m", "messages": messages[:end], "tools": TOOLS}, "caller", "s", "p")
            eng.settle(result)
            results.append(result)
    untouchable = COUNTER.tools(TOOLS) + sum(COUNTER.message(m) for m in messages[:2])
    assert untouchable > 1500  # the fixed parts alone pass the cap
    assert all(r.room == 1500 and r.budget == r.room + untouchable + eng.recall_tokens for r in results)
    assert all(r.tokens_sent <= r.budget for r in results)
    assert 0 < sum(r.compacted for r in results) <= len(results) // 3
