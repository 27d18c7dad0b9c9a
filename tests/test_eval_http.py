"""The in-process replay of `workset eval` forwards exactly what the running proxy forwards over HTTP."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from fakeupstream import Completion, ToolCall
from traces import load_traces, requires_traces

from proxy.cli import load_settings
from proxy.evaluate.run import agent_turns
from proxy.evaluate.strategies import PolicyStrategy, policy_engine, session_for
from proxy.hashing import key_hash
from proxy.tokens import TokenCounter

pytestmark = [pytest.mark.e2e, pytest.mark.traces, requires_traces]


def next_message(message: dict[str, Any]) -> Completion:
    """The trace's real next assistant message, as the fake provider's answer."""
    calls = [ToolCall(c["function"]["name"], c["function"]["arguments"], c.get("id"))
             for c in message.get("tool_calls") or []]
    content = message.get("content") if isinstance(message.get("content"), str) else None
    return Completion(content=content or (None if calls else ""), tool_calls=calls)


def test_http_replay_equals_in_process_replay(start_proxy: Any, fake: Any, tmp_path: Path) -> None:
    policy_file = tmp_path / "replay.yaml"
    policy_file.write_text("name: replay\nbudget: {max_input_tokens: 9000}\nrecent_turns: 4\n")
    proxy = start_proxy(policy_by_model={"replay-*": str(policy_file)})
    traces = load_traces("swe-dev", limit=2) + load_traces("tau-dev", limit=1)
    client = proxy.client("sk-eval")
    over_http: list[list[dict[str, Any]]] = []
    compactions = 0
    for trace in traces:
        turns = agent_turns(trace["messages"])
        fake.script(*(next_message(trace["messages"][t]) for t in turns))
        for t in turns:
            raw = client.chat.completions.with_raw_response.create(
                model="replay-model", messages=trace["messages"][:t], tools=trace["tools"],
                extra_headers={"x-workset-session": session_for("replay", trace["id"])})
            reply = raw.parse().choices[0].message
            expected = trace["messages"][t]
            assert (reply.content or "") == (expected.get("content") or "")  # the fake answered with the trace
            compactions += raw.headers.get("x-workset-compacted") == "1"
            over_http.append(fake.chat_requests()[-1].body["messages"])
    assert compactions > 0, "the replay budget should force compaction"
    config, policies = load_settings(str(proxy.config_path))
    policy = policies["replay"]
    strategy = PolicyStrategy(policy, policy_engine({"replay": policy}, TokenCounter(), tmp_path / "inproc"),
                              "replay-model", caller=key_hash("sk-eval"))
    in_process = []
    for trace in traces:
        for t in agent_turns(trace["messages"]):
            in_process.append(strategy.forward(trace["id"], trace["messages"][:t], trace["tools"]).messages)
    assert len(in_process) == len(over_http)
    for number, (local, remote) in enumerate(zip(in_process, over_http)):
        assert orjson.loads(orjson.dumps(local)) == remote, f"request {number} differs"
