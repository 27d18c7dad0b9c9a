"""Hypothesis: the working-set invariants hold for every turn of generated agent conversations."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from properties import PathState, repeat_problems, violations
from stores import run_sql, store_location

from proxy.config import Config
from proxy.engine import Engine
from proxy.policy import BudgetRules, Policy, StateRules, ToolOutputRules
from proxy.session import path_state
from proxy.storage import open_store
from proxy.tokens import TokenCounter
from proxy.workingset import STATE_PREFIX

COUNTER = TokenCounter()

WORDS = ["alpha", "parser.py", "PO-2231", "$250", "mia_li_3668", "error", "retry", "config", "token", "42 ms",
         "tests/test_x.py", "2024-05-20", "build", "flight", "HAT136", "refund", "cache"]
CONSTRAINTS = ["You must keep the API stable.", "Never delete user data.", "Do not book basic economy.",
               "Only use the certificate first.", "不要修改测试文件。", "Always run the tests before committing."]


@st.composite
def conversations(draw: Any) -> tuple[list[dict[str, Any]], list[int]]:
    """An agent run and the indexes where the agent calls the model (after each tool result or user turn)."""
    words = st.lists(st.sampled_from(WORDS), min_size=1, max_size=40).map(" ".join)
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are an agent."},
                                      {"role": "user", "content": draw(words) + " " + draw(st.sampled_from(CONSTRAINTS))}]
    calls_at: list[int] = [len(messages)]
    reuse_ids = draw(st.booleans())
    for turn in range(draw(st.integers(1, 28))):
        kind = draw(st.sampled_from(["tools", "tools", "tools", "user", "plan", "text"]))
        if kind == "text":  # a text-based agent's action, its output sent back in the user role
            messages.append({"role": "assistant", "content": f"{draw(words)}\n```bash\n{draw(words)}\n```"})
            size = draw(st.sampled_from([1, 30, 200, 1500]))
            messages.append({"role": "user", "content": "<returncode>0</returncode>\n<output>\n"
                             + " ".join(draw(st.sampled_from(WORDS)) for _ in range(size)) + "\n</output>"})
        elif kind == "user":
            messages.append({"role": "assistant", "content": draw(words)})
            extra = draw(st.sampled_from(CONSTRAINTS)) if draw(st.booleans()) else ""
            messages.append({"role": "user", "content": f"{draw(words)} {extra}".strip()})
        elif kind == "plan":
            items = draw(st.lists(st.sampled_from(["write the fix", "run the tests", "update docs"]), min_size=1,
                                  max_size=3, unique=True))
            checklist = "\n".join(f"- [{'x' if draw(st.booleans()) else ' '}] {item}" for item in items)
            messages.append({"role": "assistant", "content": "Plan:\n" + checklist})
            messages.append({"role": "user", "content": "ok"})
        else:
            count = draw(st.integers(1, 3))
            ids = [("call_0" if reuse_ids and count == 1 else f"call_{turn}_{n}") for n in range(count)]
            messages.append({"role": "assistant", "content": draw(words), "tool_calls": [
                {"id": ids[n], "type": "function",
                 "function": {"name": "bash", "arguments": json.dumps({"command": draw(words)})}} for n in range(count)]})
            for n in range(count):
                size = draw(st.sampled_from([1, 5, 30, 200, 1500]))
                messages.append({"role": "tool", "tool_call_id": ids[n],
                                 "content": f"<returncode>{draw(st.sampled_from([0, 0, 1]))}</returncode>\n"
                                            + " ".join(draw(st.sampled_from(WORDS)) for _ in range(size))})
        calls_at.append(len(messages))
    return messages, calls_at


# Claude Code's reminders: system messages among the others, or (when it sends no system turns) user messages of
# <system-reminder> text after the tool results; the same ones come back every few turns.
REMINDERS = ["The user hasn't heard from you in a while. Keep them updated.",
             "The task tools haven't been used recently. Consider using TaskCreate to track progress.",
             "Note: parser.py was modified by the user."]


def reminder(text: str, as_system: bool) -> dict[str, Any]:
    if as_system:
        return {"role": "system", "content": text}
    return {"role": "user", "content": [{"type": "text", "text": f"<system-reminder>\n{text}\n</system-reminder>"}]}


@st.composite
def reminded(draw: Any) -> tuple[list[dict[str, Any]], list[int]]:
    """A generated agent run in which one to three reminders often follow a tool result or a user turn: they end
    the request the agent then makes, and sit in the middle of every later one."""
    messages, calls_at = draw(conversations())
    as_system = draw(st.booleans())
    out: list[dict[str, Any]] = []
    at: list[int] = []
    start = 0
    for end in calls_at:
        out.extend(messages[start:end])
        start = end
        if end > 2 and draw(st.integers(0, 2)):
            for _ in range(draw(st.integers(1, 3))):
                out.append(reminder(draw(st.sampled_from(REMINDERS)), as_system or draw(st.booleans())))
        at.append(len(out))
    return out, at


policies = st.builds(
    lambda budget, recent, position, trigger: replace(
        Policy(name="prop"), recent_turns=recent,
        budget=BudgetRules(max_input_tokens=budget, trigger_ratio=trigger, target_ratio=trigger * 0.6),
        tool_outputs=ToolOutputRules(max_tokens=400, head_tokens=100, tail_tokens=60),
        state=replace(StateRules(), position=position)),
    st.integers(1200, 6000), st.integers(1, 6), st.sampled_from(["head", "tail", "both"]), st.floats(0.6, 0.95),
)


def replay(policy: Policy, messages: list[dict[str, Any]], calls_at: list[int], folder: Path) -> list[bytes]:
    engine = Engine(Config(), {policy.name: policy}, open_store(store_location(folder / "store.db")), COUNTER)
    sent = []
    expected = PathState(COUNTER)
    try:
        for end in calls_at:
            request = orjson.loads(orjson.dumps(messages[:end]))  # a fresh copy, as a client sends it
            prepared = engine.prepare({"model": "m", "messages": request}, "caller", policy_name=policy.name)
            state = expected.update(request)
            problems = violations(prepared.body["messages"], request, state, policy.budget.max_input_tokens, None, COUNTER)
            if prepared.decision is not None and prepared.rewritten:
                problems += repeat_problems(request, prepared.decision.codes, prepared.compacted)
            assert not problems, (end, problems)
            sent.append(orjson.dumps(prepared.body["messages"]))
    finally:
        engine.store.close()
    return sent


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(conversation=conversations(), policy=policies)
def test_invariants_hold_on_every_turn_and_output_is_deterministic(conversation, policy, tmp_path_factory) -> None:
    messages, calls_at = conversation
    first = replay(policy, messages, calls_at, tmp_path_factory.mktemp("a"))
    again = replay(policy, messages, calls_at, tmp_path_factory.mktemp("b"))
    assert first == again  # same input and same store state: byte-identical output


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(conversation=reminded(), policy=policies)
def test_prefix_is_byte_identical_between_compactions(conversation, policy, tmp_path_factory) -> None:
    messages, calls_at = conversation
    store = open_store(store_location(tmp_path_factory.mktemp("c") / "store.db"))
    engine = Engine(Config(), {policy.name: policy}, store, COUNTER)
    previous: list[dict[str, Any]] | None = None
    try:
        for end in calls_at:
            prepared = engine.prepare({"model": "m", "messages": orjson.loads(orjson.dumps(messages[:end]))}, "caller",
                                      policy_name=policy.name)
            sent = prepared.body["messages"]
            if previous is not None and not prepared.compacted:
                # the live tail (state, retrieved content) changes by design; everything before it may not
                kept = previous[:-1] if previous and _is_state(previous[-1]) else previous
                assert sent[: len(kept)] == kept
            previous = sent
    finally:
        engine.store.close()


# A failing example is reported as found: shrinking one replays it through the engine hundreds of times (minutes).
@settings(max_examples=60, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(conversation=reminded(), policy=policies)
def test_reminders_never_take_the_place_of_the_newest_turn(conversation, policy, tmp_path_factory) -> None:
    """With reminders after the newest tool result (one or several, and more in the middle), every request, compacted
    or not, holds the newest tool call with its result and the newest user message as sent (violations checks it
    with the other invariants), and a reminder sent again is forwarded once, at its latest place, from the
    compaction on (repeat_problems, on the decision record)."""
    messages, calls_at = conversation
    replay(policy, messages, calls_at, tmp_path_factory.mktemp("r"))


def _is_state(message: dict[str, Any]) -> bool:
    return message.get("role") == "user" and str(message.get("content", "")).startswith(STATE_PREFIX)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(conversation=conversations(), policy=policies, data=st.data())
def test_a_restart_forwards_what_the_running_process_would(conversation, policy, data, tmp_path_factory) -> None:
    """The state a restarted process folds from the store (from the fold saved at the last compaction, then the
    ledger after it) is the state the running process held: every later request is forwarded byte for byte alike."""
    messages, calls_at = conversation
    running = replay(policy, messages, calls_at, tmp_path_factory.mktemp("running"))
    restart_at = data.draw(st.integers(1, len(calls_at)), label="restart before call")
    folder = tmp_path_factory.mktemp("restarted")
    before = replay(policy, messages, calls_at[:restart_at], folder)  # its store closed: a stopped process
    after = replay(policy, messages, calls_at[restart_at:], folder) if restart_at < len(calls_at) else []
    assert before + after == running


def test_the_fold_saved_at_a_compaction_is_the_state_the_ledger_folds_to(tmp_path: Path) -> None:
    policy = replace(Policy(name="fold"), recent_turns=2, budget=BudgetRules(max_input_tokens=1500))
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are an agent."},
                                      {"role": "user", "content": "Reconcile the orders. Never refund above $500."}]
    calls_at = []
    for step in range(12):
        messages.append({"role": "assistant", "content": f"Plan:\n- [x] read order {step}\n- [ ] refund order {step}",
                         "tool_calls": [{"id": f"call_{step}", "type": "function", "function": {
                             "name": "get_order", "arguments": json.dumps({"order_id": f"#W{step % 4}"})}}]})
        fields = "\n".join(f"{name}: {name}_{step}_{n}" for n, name in enumerate(["status", "total", "item", "owner"]))
        messages.append({"role": "tool", "tool_call_id": f"call_{step}",
                         "content": f'{{"order_id": "#W{step % 4}", "amount": {100 + step}}}\n{fields}\n' + "log " * 150})
        calls_at.append(len(messages))
    location = store_location(tmp_path / "store.db")
    store = open_store(location)
    engine = Engine(Config(), {policy.name: policy}, store, COUNTER)
    for end in calls_at:
        prepared = engine.prepare({"model": "m", "messages": orjson.loads(orjson.dumps(messages[:end]))}, "caller",
                                  policy_name=policy.name)
        engine.settle(prepared)
    branch = prepared.branch
    sessions, hashes = branch.scope().sessions, list(branch.hashes)
    assert store.fold_on_path(sessions, hashes) is not None, "the conversation compacted"
    from_fold = path_state(store, sessions, hashes)
    store.flush()
    run_sql(location, "DELETE FROM folds")
    from_ledger = path_state(store, sessions, hashes)
    for state, nodes in (from_fold, from_ledger):
        assert list(state.facts.items()) == list(branch.state.facts.items())
        assert state.actions == branch.state.actions and state.snapshots == branch.state.snapshots
        assert state.next_steps == branch.state.next_steps and nodes == branch.fact_nodes
    store.close()
