"""The eval's metrics on small hand-made traces whose answers are known."""

from __future__ import annotations

import json
from typing import Any

import pytest

from proxy.evaluate.metrics import cached_cost, identifiers, leading_identical, probe_turns, probe_values
from proxy.evaluate.run import MessageTokens, evaluate
from proxy.evaluate.strategies import ForwardAll, Forwarded, Mask, Truncate
from proxy.tokens import TokenCounter

COUNTER = TokenCounter()


def call(call_id: str, command: str) -> dict[str, Any]:
    return {"role": "assistant", "content": "", "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": command})}}]}


def result(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


TRACE = {
    "id": "hand/1",
    "tools": [],
    "probes": {},
    "messages": [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the discount bug. Never edit the tests."},
        call("c1", "grep -rn discount src/"),
        result("c1", "src/pricing_rules.py:12:def apply_discount_rate(order):"),
        # uses two names seen only in c1's output
        call("c2", "grep -n apply_discount_rate src/pricing_rules.py"),
        result("c2", "12:def apply_discount_rate(order):"),
        call("c3", "python -c 'print(1)'"),
        result("c3", "1"),
        # uses a name the agent itself wrote at index 4
        call("c4", "echo apply_discount_rate fixed"),
    ],
}


class CacheBreaker:
    """Forwards everything, but with a system prompt that changes every turn (a clock in the prompt)."""

    name = "breaker"
    budget = 10_000

    def __init__(self) -> None:
        self.turn = 0

    def forward(self, trace_id: str, messages: list[dict[str, Any]], tools: Any) -> Forwarded:
        self.turn += 1
        return Forwarded([{"role": "system", "content": f"turn {self.turn}"}, *messages[1:]])

    def close(self) -> None:
        pass


class DropFirstOutput:
    """Forwards everything but the first tool output's text, where two names first appear."""

    name = "drop"
    budget = 10_000

    def forward(self, trace_id: str, messages: list[dict[str, Any]], tools: Any) -> Forwarded:
        return Forwarded([{**m, "content": "(gone)"} if m.get("tool_call_id") == "c1" else m for m in messages])

    def close(self) -> None:
        pass


def run(*strategies: Any) -> dict[str, Any]:
    evaluation = evaluate([TRACE], [ForwardAll(10_000), *strategies], COUNTER, tokens_of=MessageTokens(COUNTER))
    return {row.policy: row for row in evaluation.rows}


def test_identifiers_are_the_issue_kinds_of_four_characters_or_more() -> None:
    found = identifiers("cat ./src/a.py; use mia_li_3668 and fooBar with ABC123, line 1234, x_y and 12")
    assert found == {"./src/a.py", "mia_li_3668", "fooBar", "ABC123", "1234"}
    assert identifiers("created 2024-05-14T10:44:24 on HAT136") == {"2024", "HAT136"}  # no "14T10"


def test_cached_cost_prices_the_reused_prefix_at_the_cache_rate() -> None:
    assert cached_cost([10, 20, 30], 5, reused=2, tools_reused=True, cache_read_price=0.1) == pytest.approx(33.5)
    assert cached_cost([10, 20, 30], 5, reused=0, tools_reused=False, cache_read_price=0.1) == 65


def test_leading_identical_counts_the_shared_prefix() -> None:
    a, b, c = {"role": "user", "content": "a"}, {"role": "user", "content": "b"}, {"role": "user", "content": "c"}
    assert leading_identical([a, b], [a, b, c]) == 2
    assert leading_identical([a, b], [a, c]) == 1
    assert leading_identical(None, [a]) == 0


def test_forwarding_everything_is_the_reference() -> None:
    rows = run()
    none = rows["none"]
    assert none.turns == 4  # assistant messages at index 2, 4, 6, 8
    assert none.reduction == 0 and none.cached_cost_vs_none == 1
    assert none.next_step_recall == 1.0 and none.prefix_reuse == 1.0 and none.compactions == 0


def test_a_strategy_that_breaks_the_cache_every_turn_costs_more_than_forwarding_everything() -> None:
    rows = run(CacheBreaker())
    breaker = rows["breaker"]
    assert breaker.prefix_reuse == 0.0
    assert breaker.compactions == 3  # every request after the first rewrites the prefix
    assert breaker.cached_cost_vs_none > 1.5
    assert breaker.next_step_recall == 1.0


def test_a_strategy_that_drops_an_entity_the_next_action_uses_loses_recall() -> None:
    rows = run(DropFirstOutput())
    # Turn 4 needs apply_discount_rate and src/pricing_rules.py, seen only in c1's output: 0 of 2. Turn 8 needs
    # apply_discount_rate, still in view in the command at index 4: 1 of 1. Turns 2 and 6 need nothing.
    assert rows["drop"].next_step_recall == 0.5
    assert rows["none"].next_step_recall == 1.0


def test_truncate_and_mask_baselines_keep_tool_pairs() -> None:
    rows = run(Truncate(60, COUNTER), Mask(1, 10_000))
    assert rows["mask"].next_step_recall == 1.0  # at turn 4, c1's output is the newest: masking keeps it
    assert rows["mask"].compactions == 2  # turns 6 and 8 each mask one more output: the prefix changes
    assert rows["truncate"].pairing_violations == 0 and rows["mask"].pairing_violations == 0
    assert rows["truncate"].reduction > 0 and rows["mask"].reduction > 0


def test_constraint_recall_counts_constraints_missing_from_what_was_forwarded() -> None:
    class NoTask:
        name = "notask"
        budget = 10_000

        def forward(self, trace_id: str, messages: list[dict[str, Any]], tools: Any) -> Forwarded:
            return Forwarded([m for m in messages if m["role"] != "user"])

        def close(self) -> None:
            pass

    rows = run(NoTask())
    assert rows["none"].constraint_recall == 1.0
    assert rows["notask"].constraint_recall == 0.0


def test_probe_values_and_the_turn_that_uses_them() -> None:
    messages = [
        {"role": "system", "content": "airline agent"},
        {"role": "user", "content": "Book for user mia_li_3668."},
        call("c1", "lookup"),
        result("c1", '{"payment": "certificate_7504069", "amount": 250}'),
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c2", "type": "function", "function": {
            "name": "book", "arguments": json.dumps({"user_id": "mia_li_3668", "payment_id": "certificate_7504069",
                                                     "amount": 250, "insurance": False, "cabin": "economy"})}}]},
    ]
    actions = [{"name": "book", "kwargs": {"user_id": "mia_li_3668", "payment_id": "certificate_7504069",
                                           "amount": 250, "insurance": False, "cabin": "economy"}}]
    values = probe_values(actions)
    assert values == ["mia_li_3668", "certificate_7504069", "250", "economy"]
    # "economy" never occurs before the call: the agent did not need it from the history
    assert probe_turns(messages, values) == {4: ["mia_li_3668", "certificate_7504069", "250"]}
