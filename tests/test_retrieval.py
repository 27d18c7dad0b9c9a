"""Event-driven retrieval: stored content comes back into the working set only when its event happens."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from stores import store_location

from proxy.config import Config
from proxy.engine import Engine
from proxy.policy import Policy
from proxy.records import Action
from proxy.retrieval import failure_advice
from proxy.schema import build
from proxy.storage import open_store
from proxy.tokens import TokenCounter
from proxy.workingset import STATE_PREFIX

COUNTER = TokenCounter()
POLICY = build(Policy, {"name": "r", "budget": {"max_input_tokens": 3000}, "recent_turns": 2})


def engine(tmp_path: Path) -> Engine:
    return Engine(Config(), {"r": POLICY}, open_store(store_location(tmp_path / "s.db")), COUNTER)


def call(call_id: str, command: str) -> dict[str, Any]:
    return {"role": "assistant", "content": "", "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": command})}}]}


def result(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def tail(prepared: Any) -> str:
    last = prepared.body["messages"][-1]
    return last["content"] if str(last.get("content", "")).startswith(STATE_PREFIX) else ""


def run(eng: Engine, messages: list[dict[str, Any]], tools: list[Any] | None = None) -> Any:
    """Every turn of the conversation in order, as an agent would send it; the last prepared request."""
    prepared = None
    for end in range(2, len(messages) + 1):
        if messages[end - 1]["role"] in ("user", "tool") and (end == len(messages) or messages[end]["role"] != "tool"):
            body: dict[str, Any] = {"model": "m", "messages": messages[:end]}
            if tools:
                body["tools"] = tools
            prepared = eng.prepare(body, "caller", "s", "r")
            eng.settle(prepared)
    return prepared


def test_failure_advice_names_the_similar_failure_and_its_fix() -> None:
    actions = [
        Action(2, "bash", '{"command": "python -m pytest tests/test_io.py"}', "error", "exit 4: ERROR: file not found"),
        Action(4, "bash", '{"command": "cd repo && python -m pytest tests/test_io.py"}', "ok", "5 passed"),
        Action(6, "bash", '{"command": "ls"}', "ok", "repo"),
    ]
    recent = [("bash", '{"command": "make build"}', "error"),
              ("bash", '{"command": "python -m pytest tests/test_net.py"}', "error")]
    advice = failure_advice(actions, recent)
    assert "python -m pytest tests/test_io.py" in advice and "exit 4" in advice
    assert "What worked after it" in advice and "cd repo" in advice
    assert failure_advice(actions, recent[:1] + [("bash", "{}", "ok")]) == ""  # one failure is no event


def test_two_failures_in_a_row_bring_back_the_earlier_fix(tmp_path: Path) -> None:
    messages = [
        {"role": "system", "content": "agent"}, {"role": "user", "content": "run the tests"},
        call("a", "python -m pytest tests/test_io.py"), result("a", "<returncode>4</returncode>\nERROR: file not found: tests/test_io.py"),
        call("b", "cd repo && python -m pytest tests/test_io.py"), result("b", "<returncode>0</returncode>\n5 passed in 0.1s"),
        call("c", "cat setup.cfg"), result("c", "<returncode>0</returncode>\n[tool:pytest]"),
        call("d", "python -m pytest tests/test_net.py"), result("d", "<returncode>4</returncode>\nERROR: file not found: tests/test_net.py"),
    ]
    eng = engine(tmp_path)
    quiet = run(eng, messages)
    assert "similar failure" not in tail(quiet)  # one failure: nothing retrieved
    messages += [call("e", "python -m pytest tests/test_net.py -x"),
                 result("e", "<returncode>4</returncode>\nERROR: file not found: tests/test_net.py")]
    loud = run(eng, messages)
    assert "An earlier similar failure" in tail(loud) and "cd repo && python -m pytest" in tail(loud)
    assert loud.retrieved


def test_a_user_turn_naming_elided_content_brings_back_its_lines(tmp_path: Path) -> None:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "agent"}, {"role": "user", "content": "explore"}]
    for step in range(12):
        body = f"line one of file {step}\n" + "padding words here " * 80
        if step == 1:
            body += "\ndef compute_refund_total(order): return order.total * 0.9"
        messages += [call(f"c{step}", f"cat f{step}.py"), result(f"c{step}", body)]
    eng = engine(tmp_path)
    run(eng, messages)
    messages += [{"role": "assistant", "content": "Explored."},
                 {"role": "user", "content": "What does compute_refund_total do?"}]
    prepared = run(eng, messages)
    text = tail(prepared)
    assert "compute_refund_total(order): return order.total * 0.9" in text and "[ref:" in text


def test_an_irreversible_call_after_an_approval_repeats_constraints_and_approvals_last(tmp_path: Path) -> None:
    tools = [{"type": "function", "function": {"name": "book_reservation", "parameters": {}}},
             {"type": "function", "function": {"name": "search_flights", "parameters": {}}}]
    messages = [
        {"role": "system", "content": "airline agent"},
        {"role": "user", "content": "Book me a flight to Seattle. I do not want travel insurance."},
        {"role": "assistant", "content": "I found HAT136 for $250. Do you want me to proceed with the booking (yes/no)?"},
        {"role": "user", "content": "Yes, please."},
    ]
    prepared = run(engine(tmp_path), messages, tools)
    text = tail(prepared)
    assert "irreversible call (book_reservation)" in text
    assert "I do not want travel insurance" in text
    assert prepared.body["messages"][-1]["content"] == text  # placed last
    without = run(engine(tmp_path / "b"), messages, tools[1:])
    assert "irreversible" not in tail(without)
