"""Real agent runs replayed turn by turn through the running proxy; the invariants are checked on every request
the provider received."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from properties import PathState, violations
from traces import load_traces, requires_traces

from proxy.tokens import TokenCounter

pytestmark = [pytest.mark.e2e, pytest.mark.traces, requires_traces]

COUNTER = TokenCounter()
BUDGETS = {"swe-dev": 16000, "tau-dev": 4000}  # small enough to force compaction on the longer runs


def replay_policies(folder: Path) -> dict[str, str]:
    mapping = {}
    for name, budget in BUDGETS.items():
        path = folder / f"replay-{name}.yaml"
        path.write_text(yaml.safe_dump({"name": f"replay-{name}", "budget": {"max_input_tokens": budget},
                                        "state": {"position": "both"}}))
        mapping[f"trace-{name}"] = str(path)
    return mapping


@pytest.mark.parametrize("name", ["swe-dev", "tau-dev"])
def test_traces_replayed_through_proxy_keep_every_invariant(name: str, start_proxy: Any, fake: Any, tmp_path: Path) -> None:
    proxy = start_proxy(policy_by_model=replay_policies(tmp_path))
    client = proxy.client()
    traces = load_traces(name, limit=10)
    assert len(traces) == 10
    compactions = requests = 0
    for trace in traces:
        messages, tools = trace["messages"], trace["tools"]
        expected = PathState(COUNTER)
        for end in range(2, len(messages)):
            if messages[end]["role"] != "assistant":
                continue  # the agent calls the model where the trace has its next assistant message
            request = messages[:end]
            raw = client.chat.completions.with_raw_response.create(model=f"trace-{name}", messages=request, tools=tools)
            requests += 1
            compactions += raw.headers.get("x-workset-compacted") == "1"
            sent = fake.chat_requests()[-1].body
            # the client's tools reach the provider unchanged, workset_recall added once refs show
            assert [t for t in sent["tools"] if t["function"]["name"] != "workset_recall"] == tools
            problems = violations(sent["messages"], request, expected.update(request), BUDGETS[name], sent["tools"],
                                  COUNTER)
            assert not problems, f"{trace['id']} turn {end}: {problems}"
            assert int(raw.headers["x-workset-tokens-sent"]) <= max(BUDGETS[name], int(raw.headers["x-workset-tokens-original"]))
        fake.reset()
    assert compactions > 0, "the replay budgets should force compaction on the longer runs"
    print(f"{name}: {requests} requests, {compactions} compactions")
