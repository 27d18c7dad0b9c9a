"""`workset eval --format`: a chat trace sent as Anthropic Messages and as OpenAI Responses (proxy.evaluate.formats)
is valid for the real APIs (the strict fakes' validators, tests/fakewire.py), reads back through the server's edges
as the same conversation, and replays to figures close to chat completions'."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from fakewire import (
    FakeAnthropic,
    FakeResponses,
    Violation,
    _check_cache_control,
    _check_request,
    _check_shape,
    _check_tool_pairing,
    _check_tools,
)
from traces import TRACES_DIR, load_traces, requires_traces

from proxy import anthropic, responses
from proxy.edges import Edge
from proxy.engine import Prepared
from proxy.evaluate.formats import call_ids, to_anthropic, to_responses, to_wire
from proxy.evaluate.run import MessageTokens, Row, agent_turns, evaluate
from proxy.evaluate.strategies import (
    WIRES,
    ForwardAll,
    PolicyStrategy,
    ThroughWire,
    policy_engine,
    text_blocks_apart,
    with_budget,
)
from proxy.messages import message_text
from proxy.policy import Policy
from proxy.records import Message
from proxy.tokens import TokenCounter

REPO = Path(__file__).resolve().parent.parent
COUNTER = TokenCounter()
MODEL = "gpt-4o"
FORMATS = ("anthropic", "responses")
BASH = {"type": "function", "function": {"name": "bash", "description": "run a shell command", "parameters": {
    "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}


def call(call_id: str, command: str, text: str | None = None) -> dict[str, Any]:
    arguments = json.dumps({"command": command})
    return {"role": "assistant", "content": text, "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": arguments}}]}


def result(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


MESSAGES: list[Message] = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Fix the parser in src/parse.py. Never edit the tests."},
    call("c1", "cat src/parse.py", "Reading the parser first."),  # 2
    result("c1", "def parse(text):\n    return text.split(',')"),
    call("c1", "pytest -q tests/test_parse.py"),  # 4: the trace reuses c1, as tau-bench's do
    result("c1", "1 failed: test_quoted_comma"),
    {"role": "user", "content": "Also keep the public signature."},  # a user message right after a tool result
    {"role": "assistant", "content": "", "tool_calls": [  # 7: two calls at once, no text
        {"id": "c2", "type": "function", "function": {"name": "bash", "arguments": '{"command": "git diff"}'}},
        {"id": "c3", "type": "function", "function": {"name": "bash", "arguments": '{"command":"git status"}'}}]},
    result("c2", ""),  # an empty output
    result("c3", "On branch main"),
    {"role": "assistant", "content": "The fix is to use the csv module. Shall I apply it?"},  # 10
    {"role": "user", "content": "Yes."},
    call("c4", "python -m pytest -q"),  # 12
]


# --- the strict fakes' validators, called directly ---------------------------------------------------------------


def anthropic_violation(body: dict[str, Any]) -> str | None:
    """What FakeAnthropic would refuse in this request (None: it is valid)."""
    try:
        _check_shape(body)
        _check_tools(body)
        _check_cache_control(body)
        _check_tool_pairing(body["messages"])
        FakeAnthropic()._check_thinking(body)
    except Violation as violation:
        return f"{violation.rule}: {violation}"
    return None


def responses_violation(body: dict[str, Any]) -> str | None:
    """What FakeResponses would refuse in this request (None: it is valid)."""
    try:
        FakeResponses()._check_history(body, _check_request(body))
    except Violation as violation:
        return f"{violation.rule}: {violation}"
    return None


VIOLATION = {"anthropic": anthropic_violation, "responses": responses_violation}
READ = {"anthropic": anthropic.to_internal, "responses": responses.to_internal}


def conversation(messages: list[Message]) -> list[tuple[Any, ...]]:
    """What a conversation says, without what the wire cannot carry (call ids' spelling, a tool message's name,
    the JSON spacing of arguments, string or block content, a later system message as a Responses developer one:
    both are pinned alike)."""
    out: list[tuple[Any, ...]] = []
    for message in messages:
        calls = tuple((c["function"]["name"], json.loads(c["function"]["arguments"] or "{}"))
                      for c in message.get("tool_calls") or ())
        role = "system" if message["role"] == "developer" else message["role"]
        out.append((role, message_text(message), calls))
    return out


def pairs(messages: list[Message]) -> list[tuple[int, str]]:
    """(index, id) of every call and result: which result answers which call."""
    out = []
    for index, message in enumerate(messages):
        out += [(index, c["id"]) for c in message.get("tool_calls") or ()]
        if message["role"] == "tool":
            out.append((index, message["tool_call_id"]))
    return out


# --- conversion ------------------------------------------------------------------------------------------------


def test_anthropic_body_as_claude_code_sends_it() -> None:
    body = to_anthropic(MODEL, MESSAGES[:12], [BASH])  # a request: up to the agent's next action
    assert body["system"] == "You are a coding agent." and body["max_tokens"] > 0
    assert body["tools"] == [{"name": "bash", "description": "run a shell command",
                              "input_schema": BASH["function"]["parameters"]}]
    wire = body["messages"]
    assert [m["role"] for m in wire] == ["user", "assistant", "user", "assistant", "user", "assistant", "user",
                                         "assistant", "user"]
    assert wire[1]["content"] == [{"type": "text", "text": "Reading the parser first."},
                                  {"type": "tool_use", "id": "c1", "name": "bash",
                                   "input": {"command": "cat src/parse.py"}}]
    assert wire[3]["content"][0]["id"] == "c1_2"  # unique, as the API requires
    # the result, then the user's words joined after it
    assert wire[4]["content"] == [
        {"type": "tool_result", "tool_use_id": "c1_2", "content": "1 failed: test_quoted_comma"},
        {"type": "text", "text": "Also keep the public signature."}]
    assert [b["type"] for b in wire[5]["content"]] == ["tool_use", "tool_use"]  # no empty text block
    assert wire[6]["content"] == [{"type": "tool_result", "tool_use_id": "c2"},  # no empty content
                                  {"type": "tool_result", "tool_use_id": "c3", "content": "On branch main"}]
    assert anthropic_violation(body) is None


def test_responses_body_as_codex_sends_it() -> None:
    body = to_responses(MODEL, MESSAGES[:12], [BASH])
    assert body["instructions"] == "You are a coding agent."
    assert body["tools"] == [{"type": "function", "name": "bash", "description": "run a shell command",
                              "parameters": BASH["function"]["parameters"], "strict": False}]
    items = body["input"]
    task = "Fix the parser in src/parse.py. Never edit the tests."
    assert items[0] == {"type": "message", "role": "user", "content": [{"type": "input_text", "text": task}]}
    assert items[1] == {"type": "message", "role": "assistant",
                        "content": [{"type": "output_text", "text": "Reading the parser first."}]}
    assert items[2] == {"type": "function_call", "call_id": "c1", "name": "bash",
                        "arguments": '{"command": "cat src/parse.py"}'}
    assert items[3] == {"type": "function_call_output", "call_id": "c1",
                        "output": "def parse(text):\n    return text.split(',')"}
    assert [i["type"] for i in items[4:10]] == ["function_call", "function_call_output", "message", "function_call",
                                                "function_call", "function_call_output"]
    assert items[4]["call_id"] == items[5]["call_id"] == "c1_2"
    assert responses_violation(body) is None


def test_a_later_system_message_stays_in_place() -> None:
    messages = [*MESSAGES[:2], {"role": "system", "content": "Be brief."}, *MESSAGES[2:4]]
    assert to_anthropic(MODEL, messages)["messages"][1] == {"role": "system", "content": "Be brief."}
    assert to_responses(MODEL, messages)["input"][1] == {
        "type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Be brief."}]}
    for wire in FORMATS:
        assert conversation(READ[wire](to_wire(wire, MODEL, messages))["messages"]) == conversation(messages)


@pytest.mark.parametrize("wire", FORMATS)
def test_round_trip_through_the_edge_is_the_same_conversation(wire: str) -> None:
    for t in agent_turns(MESSAGES):
        request = MESSAGES[:t]
        body = to_wire(wire, MODEL, request, [BASH])
        assert VIOLATION[wire](body) is None, (t, VIOLATION[wire](body))
        back = READ[wire](body)
        assert conversation(back["messages"]) == conversation(request)
        assert [index for index, _ in pairs(back["messages"])] == [index for index, _ in pairs(request)]
        ids = call_ids(request)
        assert [i for _, i in pairs(back["messages"])] == [
            ids[index, number] for index, message in enumerate(request)
            for number in ([-1] if message["role"] == "tool" else range(len(message.get("tool_calls") or ())))]
        assert back["tools"] == [BASH]
        assert to_wire(wire, MODEL, request, [BASH]) == body  # deterministic


@pytest.mark.parametrize("wire", FORMATS)
def test_a_request_is_the_previous_one_extended(wire: str) -> None:
    """What makes a session: the wire body of one turn starts with the previous turn's (the last Anthropic user
    message aside, which the next user message may join)."""
    turns = agent_turns(MESSAGES)
    for before, after in zip(turns, turns[1:]):
        old, new = to_wire(wire, MODEL, MESSAGES[:before]), to_wire(wire, MODEL, MESSAGES[:after])
        key = "messages" if wire == "anthropic" else "input"
        keep = len(old[key]) - (1 if wire == "anthropic" else 0)
        assert new[key][:keep] == old[key][:keep]


def test_text_blocks_apart_undoes_the_join_of_user_messages() -> None:
    joined = [{"role": "user", "content": [{"type": "text", "text": "task"}, {"type": "text", "text": "[workset] x"}]},
              {"role": "user", "content": [{"type": "text", "text": "one"}, {"type": "image", "source": {}}]}]
    apart = [{"role": "user", "content": "task"}, {"role": "user", "content": "[workset] x"}, joined[1]]
    assert text_blocks_apart(joined) == apart


# --- replay ----------------------------------------------------------------------------------------------------


@dataclass
class Recording:
    """A server edge that keeps every body it renders, to check them against the strict fakes."""

    edge: Edge
    sent: list[dict[str, Any]] = field(default_factory=list)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.edge, name)

    def render(self, body: dict[str, Any], prepared: Prepared) -> dict[str, Any]:
        out = self.edge.render(body, prepared)
        self.sent.append(out)
        return out


def replay(traces: list[dict[str, Any]], wire_name: str,
           policy: Policy) -> tuple[dict[str, Row], list[dict[str, Any]]]:
    wire = WIRES[wire_name]
    recording = Recording(wire.edge)
    recorded = replace(wire, edge=recording)  # type: ignore[arg-type]
    engine = policy_engine({policy.name: policy}, COUNTER)
    none = ForwardAll(engine.budget_tokens(MODEL, policy))
    strategies = [none if wire_name == "chat" else ThroughWire(none, wire, MODEL),
                  PolicyStrategy(policy, engine, MODEL, wire=recorded)]
    rows = evaluate(traces, strategies, COUNTER, tokens_of=MessageTokens(COUNTER)).rows
    return {row.policy: row for row in rows}, recording.sent


def test_replay_in_each_format_forwards_valid_bodies_and_compacts() -> None:
    long_run = {"id": "hand/long", "tools": [BASH], "messages": [
        *MESSAGES[:2],
        *[m for n in range(40) for m in (call(f"k{n}", f"grep -n case_{n} src/parse.py", f"Step {n}."),
                                         result(f"k{n}", "\n".join(f"src/parse.py:{n * 100 + i}: case_{n}_{i}"
                                                                   for i in range(60))))],
        call("end", "pytest -q")]}
    policy = with_budget(Policy(name="tight"), 6000)
    chat, _ = replay([long_run], "chat", policy)
    assert chat["tight"].compactions > 0
    for wire in FORMATS:
        rows, sent = replay([long_run], wire, policy)
        assert rows["tight"].compactions == chat["tight"].compactions, wire
        assert sent and all(VIOLATION[wire](body) is None for body in sent), wire
        assert rows["tight"].pairing_violations == 0
        assert abs(rows["tight"].cached_cost_vs_none - chat["tight"].cached_cost_vs_none) <= 0.02, wire
        assert rows["tight"].next_step_recall == pytest.approx(chat["tight"].next_step_recall, abs=0.02)
        assert rows["tight"].parts.keys() == chat["tight"].parts.keys()


def test_chat_format_is_the_eval_as_it_was() -> None:
    """--format chat sends the trace's own messages: the policy sees and forwards exactly what it did before."""
    wire = WIRES["chat"]
    body = wire.request(MODEL, MESSAGES, [BASH])
    assert body["messages"] is MESSAGES and wire.read(body) is MESSAGES


# --- the shared traces -------------------------------------------------------------------------------------------


@requires_traces
@pytest.mark.traces
@pytest.mark.parametrize("dataset", ["swe-dev", "tau-dev"])
@pytest.mark.parametrize("wire", FORMATS)
def test_shared_traces_convert_validly_and_read_back_the_same(dataset: str, wire: str) -> None:
    for trace in load_traces(dataset):
        messages = trace["messages"]
        last = agent_turns(messages)[-1]
        request = messages[:last]  # the run's last request holds all the others
        body = to_wire(wire, MODEL, request, trace["tools"])
        assert VIOLATION[wire](body) is None, (trace["id"], VIOLATION[wire](body))
        back = READ[wire](body)["messages"]
        assert conversation(back) == conversation(request), trace["id"]
        assert [index for index, _ in pairs(back)] == [index for index, _ in pairs(request)], trace["id"]


@requires_traces
@pytest.mark.traces
@pytest.mark.parametrize("dataset, budget", [("swe-dev", None), ("tau-dev", 5000)])
def test_shared_traces_replay_to_figures_close_to_chat(dataset: str, budget: int | None) -> None:
    """A small slice of each dataset (tau-dev at 5,000 tokens, where it compacts): the default policy's cached
    cost and next-step recall within 0.02 of chat completions' in either format, every forwarded body valid."""
    traces = load_traces(dataset, limit=4)
    policy = with_budget(Policy(), budget)
    chat, _ = replay(traces, "chat", policy)
    assert chat["default"].compactions > 0
    for wire in FORMATS:
        rows, sent = replay(traces, wire, policy)
        assert all(VIOLATION[wire](body) is None for body in sent), wire
        assert rows["default"].pairing_violations == 0 and rows["default"].over_budget == 0
        assert abs(rows["default"].cached_cost_vs_none - chat["default"].cached_cost_vs_none) <= 0.02, wire
        assert abs(rows["default"].next_step_recall - chat["default"].next_step_recall) <= 0.02, wire
        assert rows["none"].turns == chat["none"].turns


@requires_traces
@pytest.mark.traces
def test_eval_command_names_the_format(tmp_path: Path) -> None:
    out_json = tmp_path / "eval.json"
    done = subprocess.run(
        [sys.executable, "-m", "proxy", "eval", str(TRACES_DIR / "tau-dev.jsonl.gz"), "--limit", "2", "--policy",
         "default", "--baselines", "--format", "anthropic", "--json", str(out_json)],
        capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "### tau-dev-anthropic: 2 traces" in done.stdout and "anthropic format" in done.stdout
    data = json.loads(out_json.read_text())
    assert data["config"]["format"] == "anthropic"
    assert [row["policy"] for row in data["rows"]] == ["none", "truncate", "mask", "default"]
