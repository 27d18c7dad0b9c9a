"""Real agent runs replayed turn by turn through the running proxy; the invariants are checked on every request
the provider received."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from properties import PathState, violations
from traces import load_traces, requires_traces

from proxy.evaluate.textagent import to_text_agent
from proxy.tokens import TokenCounter
from proxy.workingset import NAMES_HEADING, WORKSET_TAG

pytestmark = [pytest.mark.e2e, pytest.mark.traces, requires_traces]

COUNTER = TokenCounter()
BUDGETS = {"swe-dev": 16000, "tau-dev": 4000, "swe-dev-text": 16000}  # small enough to force compaction on the longer runs


def replay_policies(folder: Path) -> dict[str, str]:
    mapping = {}
    for name, budget in BUDGETS.items():
        path = folder / f"replay-{name}.yaml"
        path.write_text(yaml.safe_dump({"name": f"replay-{name}", "budget": {"max_input_tokens": budget},
                                        "state": {"position": "both"}}))
        mapping[f"trace-{name}"] = str(path)
    return mapping


BARE_NUMBER = re.compile(r"^[\d.,:+-]+$")  # numbers, dates and timestamps: the names index keeps none


def names_index(messages: list[dict[str, Any]]) -> list[str]:
    """The names of the compacted message's index of elided names."""
    for message in messages:
        text = str(message.get("content"))
        if text.startswith(WORKSET_TAG) and NAMES_HEADING in text:
            return text.split(NAMES_HEADING + "\n", 1)[1].split("\n\n", 1)[0].split()
    return []


@pytest.mark.parametrize("name", ["swe-dev", "tau-dev", "swe-dev-text"])
def test_traces_replayed_through_proxy_keep_every_invariant(name: str, start_proxy: Any, fake: Any, tmp_path: Path) -> None:
    """Real runs through the running proxy; swe-dev-text is swe-dev as a text-based agent sends it (commands in
    bash blocks, their output back as user messages), which must be compacted as tool output."""
    proxy = start_proxy(policy_by_model=replay_policies(tmp_path))
    client = proxy.client()
    text_agent = name.endswith("-text")
    traces = load_traces(name.removesuffix("-text"), limit=10)
    assert len(traces) == 10
    compactions = requests = masked_observations = 0
    for trace in traces:
        trace = to_text_agent(trace) if text_agent else trace
        messages, tools = trace["messages"], trace["tools"] or None
        expected = PathState(COUNTER)
        for end in range(2, len(messages)):
            if messages[end]["role"] != "assistant":
                continue  # the agent calls the model where the trace has its next assistant message
            request = messages[:end]
            extra = {"tools": tools} if tools else {}
            raw = client.chat.completions.with_raw_response.create(model=f"trace-{name}", messages=request, **extra)
            requests += 1
            compactions += raw.headers.get("x-workset-compacted") == "1"
            sent = fake.chat_requests()[-1].body
            # the client's tools reach the provider unchanged, workset_recall added once refs show
            assert [t for t in sent.get("tools") or [] if t["function"]["name"] != "workset_recall"] == (tools or [])
            problems = violations(sent["messages"], request, expected.update(request), BUDGETS[name],
                                  sent.get("tools"), COUNTER)
            assert not problems, f"{trace['id']} turn {end}: {problems}"
            assert int(raw.headers["x-workset-tokens-sent"]) <= max(BUDGETS[name], int(raw.headers["x-workset-tokens-original"]))
            numbers = [n for n in names_index(sent["messages"]) if BARE_NUMBER.match(n)]
            assert not numbers, f"{trace['id']} turn {end}: bare numbers in the names index: {numbers[:5]}"
            masked_observations += sum(1 for m in sent["messages"] if m["role"] == "user"
                                       and str(m["content"]).startswith(f"{WORKSET_TAG} bash output elided"))
        fake.reset()
    assert compactions > 0, "the replay budgets should force compaction on the longer runs"
    assert masked_observations > 0 or not text_agent, "command output sent as user messages is masked like tool output"
    print(f"{name}: {requests} requests, {compactions} compactions")
