"""Tool-call traces converted to the form text-based agents send (`workset eval --text-agent`)."""

from __future__ import annotations

import copy
import json
from typing import Any

from proxy.evaluate.run import MessageTokens, evaluate
from proxy.evaluate.strategies import ForwardAll, Forwarded, Mask
from proxy.evaluate.textagent import to_text_agent
from proxy.tokens import TokenCounter

COUNTER = TokenCounter()
OUTPUT = "<returncode>0</returncode>\n<output>\nsrc/app.py\n</output>"

TRACE: dict[str, Any] = {
    "id": "hand/text",
    "tools": [{"type": "function", "function": {"name": "bash", "parameters": {}}}],
    "messages": [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the bug. Never edit the tests."},
        {"role": "assistant", "content": "Let me look around.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": json.dumps(
                {"command": "find . -name '*.py' | head"})}}]},
        {"role": "tool", "tool_call_id": "c1", "content": OUTPUT},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c2", "type": "function", "function": {"name": "edit_file", "arguments": '{"path": "src/app.py"}'}}]},
        {"role": "tool", "tool_call_id": "c2", "content": "Note: you must never push to the main branch."},
        {"role": "assistant", "content": "Done."},
    ],
}


def test_tool_calls_become_fenced_blocks_and_outputs_user_messages() -> None:
    original = copy.deepcopy(TRACE)
    text = to_text_agent(TRACE)
    messages = text["messages"]
    assert TRACE == original  # the input is left as it was
    assert len(messages) == len(TRACE["messages"])  # one for one: probe turns stay valid
    assert text["tools"] == [] and text["id"] == "hand/text"
    assert messages[2] == {"role": "assistant",
                           "content": "Let me look around.\n\n```bash\nfind . -name '*.py' | head\n```"}
    assert messages[4] == {"role": "assistant", "content": '```edit_file\n{"path": "src/app.py"}\n```'}
    assert messages[3] == {"role": "user", "content": OUTPUT}
    assert messages[5]["role"] == "user" and "tool_call_id" not in messages[5]
    assert messages[:2] == TRACE["messages"][:2] and messages[6] == TRACE["messages"][6]
    assert text["observations"] == [3, 5]
    assert not any(m.get("tool_calls") or m["role"] == "tool" for m in messages)


def test_a_bash_call_without_a_command_keeps_its_arguments() -> None:
    trace = {"id": "odd", "messages": [{"role": "assistant", "content": "", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "bash", "arguments": '{"script": "ls"}'}}]}]}
    assert to_text_agent(trace)["messages"][0]["content"] == '```bash\n{"script": "ls"}\n```'


class HideObservations:
    """Forwards everything, but the text of each command output (a user message in text form)."""

    name = "hide"
    budget = 10_000

    def forward(self, trace_id: str, messages: list[dict[str, Any]], tools: Any) -> Forwarded:
        return Forwarded([{**m, "content": "(gone)"} if i in (3, 5) else m for i, m in enumerate(messages)])

    def close(self) -> None:
        pass


def test_command_output_in_the_user_role_is_not_taken_for_the_users_constraints() -> None:
    # "you must never push" comes from a tool: hiding it costs no constraint; the task's rule is still in view
    rows = {row.policy: row for row in evaluate([to_text_agent(TRACE)], [ForwardAll(10_000), HideObservations()],
                                                COUNTER, tokens_of=MessageTokens(COUNTER)).rows}
    assert rows["hide"].constraint_recall == 1.0


def test_the_mask_baseline_masks_a_text_agents_command_output() -> None:
    text = to_text_agent(TRACE)
    mask = Mask(1, 10_000, {text["id"]: frozenset(text["observations"])})
    sent = mask.forward(text["id"], text["messages"][:6], None).messages
    assert sent[3]["content"] == "[output omitted]"  # the older output
    assert sent[5]["content"] == text["messages"][5]["content"]  # the newest is kept
    assert sent[1] == text["messages"][1]  # the user's own message is never masked
