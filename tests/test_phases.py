"""Phase-aware compaction: past target_ratio, the end of a phase compacts without waiting for the trigger."""

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

COUNTER = TokenCounter()


def engine(tmp_path: Path, **phases: Any) -> Engine:
    phases = {"min_ratio": 0.3, **phases}
    policy = build(Policy, {"name": "p", "recent_turns": 2, "phases": phases,
                            "budget": {"max_input_tokens": 6000, "trigger_ratio": 0.9, "target_ratio": 0.3}})
    return Engine(Config(), {"p": policy}, open_store(store_location(tmp_path / "s.db")), COUNTER)


def exchange(call_id: str, tool: str, command: str, output: str) -> list[dict[str, Any]]:
    return [{"role": "assistant", "content": "", "tool_calls": [{"id": call_id, "type": "function", "function": {
        "name": tool, "arguments": json.dumps({"command": command})}}]},
            {"role": "tool", "tool_call_id": call_id, "content": output}]


def replay(eng: Engine, messages: list[dict[str, Any]]) -> list[Any]:
    prepared = []
    for end in range(2, len(messages) + 1, 2):
        result = eng.prepare({"model": "m", "messages": messages[:end]}, "caller", "s", "p")
        eng.settle(result)
        prepared.append(result)
    return prepared


def work(steps: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "agent"}, {"role": "user", "content": "fix it"}]
    for step in range(steps):
        messages += exchange(f"c{step}", "bash", f"cat f{step}.py", "<returncode>0</returncode>\n" + "code line\n" * 60)
    return messages


def test_a_passing_test_run_past_the_target_compacts(tmp_path: Path) -> None:
    messages = work(8) + exchange("t", "bash", "python -m pytest tests/test_fix.py",
                                  "<returncode>0</returncode>\n===== 3 passed in 0.2s =====")
    results = replay(engine(tmp_path), messages)
    assert not any(r.compacted for r in results[:-1])  # below the trigger all along
    assert results[-1].compacted and results[-1].epoch.reason == "phase: tests passed"
    assert results[-1].tokens_sent < results[-2].tokens_sent


def test_a_subagent_returning_ends_a_phase(tmp_path: Path) -> None:
    messages = work(9) + exchange("s", "Task", "explore the repo", "The subagent found the bug in f3.py.")
    results = replay(engine(tmp_path), messages)
    assert results[-1].compacted and results[-1].epoch.reason == "phase: Task returned"


def test_no_phase_compaction_below_the_target_or_when_disabled(tmp_path: Path) -> None:
    short = work(1) + exchange("t", "bash", "pytest", "<returncode>0</returncode>\n1 passed in 0.1s")
    assert not any(r.compacted for r in replay(engine(tmp_path / "a"), short))
    messages = work(8) + exchange("t", "bash", "python -m pytest", "<returncode>0</returncode>\n3 passed in 0.2s")
    assert not any(r.compacted for r in replay(engine(tmp_path / "b", enabled=False), messages))
    # past the target but below phases.min_ratio: the boundary waits
    assert not any(r.compacted for r in replay(engine(tmp_path / "c", min_ratio=0.8), messages))
