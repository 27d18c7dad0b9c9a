"""Probe checks (a trace's probes.checks), part sizes and the `scenarios` dataset of `workset eval`, on hand-made
traces whose answers are known."""

from __future__ import annotations

import gzip
import json
import sys
import tempfile
import types
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

import pytest

from proxy.cli import main as cli
from proxy.evaluate.metrics import part_tokens, probe_checks
from proxy.evaluate.run import MessageTokens, Row, evaluate
from proxy.evaluate.strategies import ForwardAll, Forwarded, PolicyStrategy, policy_engine, with_budget
from proxy.policy import Policy
from proxy.tokens import TokenCounter

COUNTER = TokenCounter()
REPO = Path(__file__).resolve().parent.parent


def call(call_id: str, name: str, arguments: dict[str, Any], content: str = "") -> dict[str, Any]:
    return {"role": "assistant", "content": content, "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]}


def result(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def check(check_id: str, turn: int, kind: str, strings: Sequence[str] = (), patterns: Sequence[str] = ()
          ) -> dict[str, Any]:
    return {"id": check_id, "turn": turn, "kind": kind, "must_contain_any": list(strings),
            "must_match_any": list(patterns), "why": f"why {check_id}"}


TRACE: dict[str, Any] = {
    "id": "hand/probes",
    "tools": [],
    "messages": [
        {"role": "system", "content": "You are a travel agent."},
        {"role": "user", "content": "Plan the trip. Budget is 500 EUR."},
        call("c1", "find_booking", {"user": "mia"}),  # 2
        result("c1", '{"booking": "BK-7781", "status": "confirmed"}'),
        call("c2", "pay", {"booking": "BK-7781"}, "Decision: we keep the Lisbon hotel."),  # 4
        result("c2", "Error: 429 Too Many Requests (rate limit)"),
        call("c3", "pay", {"booking": "BK-7781", "retry": True}),  # 6
        result("c3", "ok"),
        {"role": "assistant", "content": "Paid."},  # 8
    ],
    "probes": {"checks": [
        check("budget", 4, "constraint", strings=["BUDGET IS 500 eur"]),  # case-insensitive
        check("booking-id", 4, "fact", patterns=[r"bk-\d{4}"]),  # a regex, case-insensitive too
        check("booking-too-early", 2, "fact", strings=["BK-7781"]),  # messages[:2] cannot hold it
        check("hotel", 8, "decision", strings=["no such words", "lisbon hotel"]),  # any one string will do
        check("rate-limit", 8, "failure", patterns=[r"429.{0,30}rate limit"]),
        check("status-late", 8, "fact", strings=['"STATUS": "CONFIRMED"']),  # only a tool output holds it
        # "500 EUR." ends the task and "find_booking" starts the next message: together in no one message
        check("split", 8, "fact", patterns=[r"500 EUR\.\s+find_booking"]),
    ]},
}


class DropOutputs:
    """Forwards every message, but tool outputs' text once the request is longer than `after` messages."""

    name = "drop"
    budget = 10_000

    def __init__(self, after: int = 0) -> None:
        self.after = after

    def forward(self, trace_id: str, messages: list[dict[str, Any]], tools: Any) -> Forwarded:
        if len(messages) <= self.after:
            return Forwarded(messages)
        return Forwarded([{**m, "content": "(gone)"} if m["role"] == "tool" else m for m in messages])

    def close(self) -> None:
        pass


def rows_of(*strategies: Any, trace: dict[str, Any] = TRACE) -> dict[str, Row]:
    evaluation = evaluate([trace], [ForwardAll(10_000), *strategies], COUNTER, tokens_of=MessageTokens(COUNTER))
    return {row.policy: row for row in evaluation.rows}


def test_forwarding_everything_keeps_every_check_but_the_too_early_and_the_split_one() -> None:
    none = rows_of()["none"]
    assert (none.probes_kept, none.probes_checked) == (5, 7)
    assert none.probes_by_kind == {"constraint": [1, 1], "decision": [1, 1], "failure": [1, 1], "fact": [2, 4]}
    assert sorted(item["check"] for item in none.probes_missed) == ["booking-too-early", "split"]
    assert {"trace": "hand/probes", "check": "split", "kind": "fact", "why": "why split"} in none.probes_missed


def test_a_strategy_that_drops_tool_outputs_loses_the_facts_and_failures_they_held() -> None:
    drop = rows_of(DropOutputs())["drop"]
    assert drop.probes_by_kind == {"constraint": [1, 1], "decision": [1, 1], "failure": [0, 1], "fact": [0, 4]}
    assert {item["check"] for item in drop.probes_missed} == {
        "booking-id", "booking-too-early", "rate-limit", "status-late", "split"}


def test_a_check_is_scored_on_the_request_of_its_own_turn() -> None:
    # outputs are shown up to the request of turn 4 (4 messages) and dropped from turn 6 on
    late = rows_of(DropOutputs(after=4))["drop"]
    missed = {item["check"] for item in late.probes_missed}
    assert "booking-id" not in missed  # turn 4: still in view
    assert {"status-late", "rate-limit"} <= missed  # turn 8: gone


def test_tokens_at_the_probe_turns_and_over_all_turns_as_shares_of_none() -> None:
    rows = rows_of(DropOutputs())
    none, drop = rows["none"], rows["drop"]
    assert 0 < none.probe_turn_tokens < none.cum_tokens  # turns 2, 4 and 8 carry checks, turn 6 none
    assert none.probe_turn_tokens_vs_none == 1.0 and none.tokens_vs_none == 1.0
    assert drop.probe_turn_tokens_vs_none is not None and drop.probe_turn_tokens_vs_none < 1.0
    assert drop.tokens_vs_none == pytest.approx(drop.cum_tokens / none.cum_tokens, abs=1e-4)


def test_a_trace_without_probe_checks_reports_none() -> None:
    none = rows_of(trace={**TRACE, "probes": {}})["none"]
    assert (none.probes_kept, none.probes_checked, none.probes_missed) == (0, 0, [])
    assert none.probe_turn_tokens == 0 and none.probe_turn_tokens_vs_none is None


@pytest.mark.parametrize("bad, says", [
    (check("x", 3, "fact", strings=["a"]), "turn 3 is not an assistant message"),  # a tool output
    (check("x", 1, "fact", strings=["a"]), "turn 1"),
    (check("x", 4, "fact"), "neither must_contain_any nor must_match_any"),
    (check("x", 4, "fact", patterns=["(unclosed"]), "bad regex"),
])
def test_a_check_that_cannot_be_scored_is_named(bad: dict[str, Any], says: str) -> None:
    with pytest.raises(ValueError, match="probe check 'x'") as error:
        probe_checks({**TRACE, "probes": {"checks": [bad]}})
    assert says in str(error.value)


# --- part sizes ---------------------------------------------------------------------------------------------------

def lines(text: str) -> int:
    return len(text.splitlines())


COMPACTED = ("[workset] Earlier turns of this conversation were compacted by workset.\n\n"
             "## Task state (kept by workset)\nGoal: plan the trip\nConstraints (always apply):\n- budget 500 EUR\n\n"
             "## Summary of turns up to 5 (model-written)\n- looked up the booking\n\n"
             "## Earlier steps (extractive digest)\n- turn 2 find_booking -> ok\n- turn 4 pay -> error\n\n"
             "## Earlier decisions (a section the digest may grow)\n- keep the Lisbon hotel\n\n"
             "## Names in elided turns (recall by ref, or by query)\nBK-7781 find_booking\n\n"
             "## Something new\nwhatever it is")
LIVE = ("[workset] Current task state, kept by the proxy (not a new request).\n"
        "## Task state (kept by workset)\nGoal: plan the trip\n\n"
        "## Retrieved for this step (stored content the context no longer shows)\nError: 429")


def test_part_sizes_come_from_workset_sections_classified_by_heading() -> None:
    messages = [
        {"role": "system", "content": "## Task state\nnot workset's: the agent's own prompt"},
        {"role": "user", "content": COMPACTED},
        {"role": "tool", "tool_call_id": "c1", "content": "[workset] find_booking output elided: {...} [ref:abc]"},
        {"role": "user", "content": LIVE},
    ]
    assert part_tokens(messages, lines) == {
        "state": 4 + 2,  # head and tail states add up; the header lines before them count for nothing
        "summary": 2,
        "digest": 3 + 2,  # "## Earlier steps" and any other "## Earlier ..." section
        "names": 2,
        "other": 2,
        "retrieval": 2,
    }


def test_a_policy_that_compacts_reports_its_state_digest_and_names() -> None:
    trace: dict[str, Any] = {"id": "hand/parts", "tools": [], "messages": [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the bug in src/app.py. Never edit the tests."}]}
    for i in range(12):
        trace["messages"] += [
            call(f"c{i}", "bash", {"command": f"cat src/module_{i}.py"}, f"Step {i}: I will read module_{i}."),
            result(f"c{i}", "\n".join(f"line {j}: value_{i}_{j} = compute_{j}()" for j in range(30)))]
    trace["messages"].append({"role": "assistant", "content": "Done."})
    policy = with_budget(replace(Policy(), name="small", recent_turns=2), 1500)
    engine = policy_engine({"small": policy}, COUNTER, Path(tempfile.mkdtemp(prefix="workset-test-")))
    rows = rows_of(PolicyStrategy(policy, engine, "gpt-4o"), trace=trace)
    parts = rows["small"].parts
    assert {"state", "digest", "names"} <= set(parts), parts
    for sizes in parts.values():
        assert 0 < sizes["mean"] <= sizes["max"]
        assert 0 < sizes["requests"] < rows["small"].turns  # only requests after the first compaction carry them
    assert rows["none"].parts == {}


# --- the command --------------------------------------------------------------------------------------------------

def run_eval(*arguments: str) -> int:
    return cli(["eval", *arguments, "--policy", "default", "--config", str(REPO / "config.yaml")])


@pytest.mark.parametrize("package, says", [
    (None, "no built-in scenarios"),  # as if the package were not installed
    (types.ModuleType("proxy.evaluate.scenarios"), r"has no load\(\)"),  # a folder without its __init__.py
])
def test_scenarios_without_the_package_stop_with_a_clear_message(
        package: Any, says: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # no file named "scenarios" here
    monkeypatch.setitem(sys.modules, "proxy.evaluate.scenarios", package)
    with pytest.raises(SystemExit, match=says):
        run_eval("scenarios")


def test_scenarios_are_replayed_and_scored(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    package = types.ModuleType("proxy.evaluate.scenarios")
    package.load = lambda: [TRACE]  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "proxy.evaluate.scenarios", package)
    monkeypatch.chdir(REPO)
    out = tmp_path / "eval.json"
    assert run_eval("scenarios", "--json", str(out), "--show-missed") == 0
    printed = capsys.readouterr()
    assert "### scenarios: 1 traces" in printed.out
    assert "| strategy | probes kept | constraint | fact | decision |" in printed.out
    assert "| none | 5/7 | 1/1 | 2/4 | 1/1 |" in printed.out
    assert "missed\tscenarios\tnone\thand/probes\tsplit\tfact\twhy split" in printed.err.splitlines()
    rows = {row["policy"]: row for row in json.loads(out.read_text())["rows"]}
    assert rows["none"]["dataset"] == "scenarios" and rows["none"]["probes_checked"] == 7
    assert rows["default"]["probes_by_kind"]["constraint"] == [1, 1]


def test_a_trace_file_with_a_bad_check_stops_before_the_replay(monkeypatch: pytest.MonkeyPatch,
                                                               tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl.gz"
    bad = {**TRACE, "probes": {"checks": [check("x", 3, "fact", strings=["a"])]}}
    path.write_bytes(gzip.compress(json.dumps(bad).encode() + b"\n"))
    monkeypatch.chdir(REPO)
    with pytest.raises(SystemExit, match=r"bad\.jsonl\.gz: trace 'hand/probes', probe check 'x': turn 3"):
        run_eval(str(path))


def test_text_agent_replay_names_its_dataset(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "hand.jsonl.gz"
    path.write_bytes(gzip.compress(json.dumps(TRACE).encode() + b"\n"))
    monkeypatch.chdir(REPO)
    out = tmp_path / "eval.json"
    assert run_eval(str(path), "--text-agent", "--baselines", "--json", str(out)) == 0
    assert "### hand-text: 1 traces" in capsys.readouterr().out
    rows = {row["policy"]: row for row in json.loads(out.read_text())["rows"]}
    assert set(rows) == {"none", "truncate", "mask", "default"} and rows["none"]["dataset"] == "hand-text"
    # the converted assistant messages carry the call in their text: the turn-4 id check still finds it
    assert rows["none"]["probes_kept"] == 5
