"""The probe scenarios (issue 8, item 5; issue 30): they load as trace lines, are long in messages and tokens, pair
their tool calls, build the same bytes every time, and their probes are honest: each asks late for an item stated
early, matches nowhere else, and is out of reach of a proxy that keeps only the pinned and the newest messages. The
two long coding runs of issue 30 are as messy as real ones, and compact several times before their probes."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from proxy.cli import load_settings
from proxy.evaluate.metrics import PROBE_KINDS, probe_checks, readable_text
from proxy.evaluate.run import agent_turns
from proxy.evaluate.scenarios import build_all, load
from proxy.evaluate.scenarios.builder import Scenario
from proxy.evaluate.scenarios.selfcheck import RECENT_MESSAGES, probe_problems
from proxy.evaluate.strategies import PolicyStrategy, fake_summary, policy_engine
from proxy.messages import message_text
from proxy.tokens import TokenCounter
from proxy.workingset import COMPACTED_HEADER

ROOT = Path(__file__).resolve().parent.parent
MIN_HISTORY_TOKENS = 42_000  # each run ends well past 40,000 tokens (a 16,000-token room compacts several times)
MAX_OUTPUT_TOKENS = 3_000
MIN_OUTPUT_TOKENS = 300
MIN_SHARE_OF_LARGE_OUTPUTS = 0.7  # some real outputs are short (a calculator, an ack); most are not
SCENARIOS = 8
# issue 30's long coding runs: 60+ tool turns, as long as real coding agents' runs, the seeds' six are shorter
LONG_RUNS = ("scenario-sdk-coding-invoicekit", "scenario-zh-coding-metricsd")
MIN_TOOL_TURNS = 60
LS_ROW = re.compile(r"^[-d][rwx-]{9} +\d+ \S+ \S+ +\d+ ", re.MULTILINE)
OBSERVATION = re.compile(r"<returncode>-?\d+</returncode>\n<output>\n")
CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture(scope="module")
def scenarios() -> list[Scenario]:
    return build_all()


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return TokenCounter()


def outputs(trace: dict) -> list[dict]:
    """Tool results, or for a text-based agent (no tools), the observations it gets back as user messages."""
    if trace["tools"]:
        return [m for m in trace["messages"] if m["role"] == "tool"]
    return [m for m in trace["messages"] if m["role"] == "user" and OBSERVATION.match(m["content"])]


def test_load_returns_every_scenario_as_a_trace_line(scenarios: list[Scenario]) -> None:
    traces = load()
    assert len(traces) == SCENARIOS
    assert len({trace["id"] for trace in traces}) == SCENARIOS
    for trace in traces:
        assert set(trace) == {"id", "source", "license", "tools", "messages", "probes"}
        assert trace["source"] == "workset scenario" and trace["license"] == "same as workset"
        assert set(trace["probes"]) == {"checks"}
        assert [m["role"] for m in trace["messages"][:2]] == ["system", "user"]
        json.dumps(trace)  # plain data, as a traces file line


def test_runs_are_long_in_messages_and_tokens(scenarios: list[Scenario], counter: TokenCounter) -> None:
    for scenario in scenarios:
        trace = scenario.trace
        messages = trace["messages"]
        assert 60 <= len(messages) <= (160 if trace["id"] in LONG_RUNS else 120), trace["id"]
        history = sum(counter.message(m) for m in messages) + counter.tools(trace["tools"])
        assert history >= MIN_HISTORY_TOKENS, (trace["id"], history)


def test_the_long_coding_runs_are_as_messy_as_real_ones(scenarios: list[Scenario]) -> None:
    """60+ tool turns, `ls -la` of 40+ rows several times, a SDK-shaped run (bash, read_file, write_file, gh) and a
    run whose user writes Chinese."""
    long_runs = {s.trace["id"]: s.trace for s in scenarios if s.trace["id"] in LONG_RUNS}
    assert set(long_runs) == set(LONG_RUNS)
    for trace in long_runs.values():
        found = outputs(trace)
        assert len(found) >= MIN_TOOL_TURNS, trace["id"]
        big_listings = [m for m in found if len(LS_ROW.findall(m["content"])) >= 40]
        assert len(big_listings) >= 3, trace["id"]
    names = {tool["function"]["name"] for tool in long_runs[LONG_RUNS[0]]["tools"]}
    assert names == {"bash", "read_file", "write_file", "gh"}
    chinese_user_turns = [m for m in long_runs[LONG_RUNS[1]]["messages"] if m["role"] == "user"
                          and CJK.search(m["content"])]
    assert len(chinese_user_turns) >= 4


def test_the_long_runs_compact_several_times_before_their_probes(scenarios: list[Scenario]) -> None:
    """Under the default policy (16,000 tokens), each long run is compacted at least three times before its first
    probe turn: what its probes ask for has been through compactions, not merely fallen out of a window."""
    config, presets = load_settings(ROOT / "config.yaml")
    policy = presets[config.policy]
    counter = TokenCounter()
    strategy = PolicyStrategy(policy, policy_engine({policy.name: policy}, counter), "gpt-4o",
                              summarize=fake_summary)
    for scenario in scenarios:
        trace = scenario.trace
        if trace["id"] not in LONG_RUNS:
            continue
        first_probe = min(check.turn for check in probe_checks(trace))
        compacted: set[str] = set()  # each compaction writes a new compacted message
        for t in agent_turns(trace["messages"]):
            if t > first_probe:
                break
            sent = strategy.forward(trace["id"], trace["messages"][:t], trace["tools"]).messages
            compacted.update(text for text in map(message_text, sent) if text.startswith(COMPACTED_HEADER))
        assert len(compacted) >= 3, (trace["id"], len(compacted))


def test_tool_outputs_are_sized_like_real_ones(scenarios: list[Scenario], counter: TokenCounter) -> None:
    for scenario in scenarios:
        sizes = [counter.text(m["content"]) for m in outputs(scenario.trace)]
        assert len(sizes) >= 25, scenario.trace["id"]
        assert max(sizes) <= MAX_OUTPUT_TOKENS, scenario.trace["id"]
        large = sum(size >= MIN_OUTPUT_TOKENS for size in sizes)
        assert large >= MIN_SHARE_OF_LARGE_OUTPUTS * len(sizes), (scenario.trace["id"], large, len(sizes))


def test_every_tool_call_is_answered_right_after_with_unique_ids(scenarios: list[Scenario]) -> None:
    for scenario in scenarios:
        trace = scenario.trace
        if not trace["tools"]:
            continue
        names = {tool["function"]["name"] for tool in trace["tools"]}
        messages = trace["messages"]
        seen: set[str] = set()
        index = 0
        while index < len(messages):
            message = messages[index]
            assert message["role"] != "tool", (trace["id"], index, "tool result without its call")
            calls = message.get("tool_calls") or []
            for offset, call in enumerate(calls, 1):
                assert call["id"] not in seen, (trace["id"], call["id"])
                seen.add(call["id"])
                assert call["function"]["name"] in names
                json.loads(call["function"]["arguments"])
                answer = messages[index + offset]
                assert answer["role"] == "tool" and answer["tool_call_id"] == call["id"], (trace["id"], index)
            index += 1 + len(calls)


def test_the_text_based_run_has_no_tools_and_one_bash_block_per_step(scenarios: list[Scenario]) -> None:
    text_based = [s.trace for s in scenarios if not s.trace["tools"]]
    assert len(text_based) == 1
    messages = text_based[0]["messages"]
    for index, message in enumerate(messages[2:], 2):
        if message["role"] == "assistant":
            assert message["content"].startswith("THOUGHT:"), index
            assert message["content"].count("```bash\n") == 1, index
            assert "tool_calls" not in message
            follower = messages[index + 1] if index + 1 < len(messages) else None
            assert follower is None or (follower["role"] == "user" and OBSERVATION.match(follower["content"]))
    plain_user_turns = [m for m in messages[2:] if m["role"] == "user" and not OBSERVATION.match(m["content"])]
    assert len(plain_user_turns) >= 3  # the user's own words, mid-run, between observations


def test_languages_mix(scenarios: list[Scenario]) -> None:
    def user_text(scenario: Scenario) -> str:
        return "\n".join(m["content"] for m in scenario.trace["messages"] if m["role"] == "user")

    chinese = [s.trace["id"] for s in scenarios if CJK.search(user_text(s))]
    assert 3 <= len(chinese) < len(scenarios)


def test_probes_cover_every_kind(scenarios: list[Scenario]) -> None:
    kinds: Counter[str] = Counter()
    for scenario in scenarios:
        checks = probe_checks(scenario.trace)
        assert len(checks) >= 8, scenario.trace["id"]
        assert len({check.id for check in checks}) == len(checks)
        kinds.update(check.kind for check in checks)
    assert set(kinds) == set(PROBE_KINDS)
    assert min(kinds.values()) >= 4, kinds


def test_probe_self_check_holds(scenarios: list[Scenario]) -> None:
    for scenario in scenarios:
        assert probe_problems(scenario) == []


def test_probes_pass_on_the_whole_history_and_fail_on_pinned_plus_recent(scenarios: list[Scenario]) -> None:
    """What makes them probes: forwarding everything keeps every item; keeping only the system prompt, the task
    and the newest messages keeps none, so a proxy must carry them through its compactions."""
    for scenario in scenarios:
        messages = scenario.trace["messages"]
        texts = [readable_text(m) for m in messages]
        for check in probe_checks(scenario.trace):
            assert check.kept_in(texts[:check.turn]), (scenario.trace["id"], check.id)
            pinned_and_recent = texts[:2] + texts[check.turn - RECENT_MESSAGES:check.turn]
            assert not check.kept_in(pinned_and_recent), (scenario.trace["id"], check.id)


def test_self_check_reports_dishonest_probes(scenarios: list[Scenario]) -> None:
    scenario = scenarios[0]
    trace = scenario.trace
    check = trace["probes"]["checks"][0]
    origin = max(scenario.origins[check["id"]])

    def with_check(**changes: object) -> Scenario:
        broken = copy.deepcopy(trace)
        broken["probes"]["checks"] = [{**check, **changes}]
        return Scenario(broken, scenario.origins)

    too_recent = next(i for i in range(origin + 1, origin + RECENT_MESSAGES)
                      if trace["messages"][i]["role"] == "assistant")
    assert any("newest" in p for p in probe_problems(with_check(turn=too_recent)))
    tool_turn = next(i for i, m in enumerate(trace["messages"]) if m["role"] == "tool" and i > check["turn"])
    assert probe_problems(with_check(turn=tool_turn))
    assert any("not stated" in p for p in probe_problems(with_check(must_contain_any=["RFQ-2026-118"])))
    assert any("task" in p for p in probe_problems(with_check(must_contain_any=["PR-2026-0877"])))


def test_build_is_byte_identical_across_processes(scenarios: list[Scenario]) -> None:
    here = hashlib.sha256(json.dumps(load(), ensure_ascii=False, sort_keys=True).encode()).hexdigest()
    script = ("import hashlib, json; from proxy.evaluate.scenarios import load; "
              "print(hashlib.sha256(json.dumps(load(), ensure_ascii=False, sort_keys=True).encode()).hexdigest())")
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    there = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=120, check=True).stdout.strip()
    assert here == there
