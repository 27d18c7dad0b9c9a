"""Verified summaries through the running proxy: a summariser model (the fake provider) writes the summary in the
background; a verified one replaces the digest, an invented number is rejected, a hanging one never delays."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from fakeupstream import Completion, Hang

pytestmark = pytest.mark.e2e

TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {}}}}]


def summarising_policy(folder: Path, timeout_s: float) -> Path:
    """A policy for models `summ-*` whose removed turns a summariser (fake-summarizer) writes in the background."""
    policy = folder / "summ.yaml"
    policy.write_text(
        "name: summ\nrecent_turns: 3\nbudget: {max_input_tokens: 3000, trigger_ratio: 0.8, target_ratio: 0.4}\n"
        f"summarizer: {{mode: llm, model: fake-summarizer, precompute_ratio: 0.45, timeout_s: {timeout_s}}}\n")
    return policy


def summarising_proxy(start_proxy: Any, tmp_path: Path, timeout_s: float = 5.0) -> Any:
    return start_proxy(policy_by_model={"summ-*": str(summarising_policy(tmp_path, timeout_s))})


def turns(count: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."},
                                      {"role": "user", "content": "Read the config parts. Never edit them."}]
    for step in range(count):
        messages.append({"role": "assistant", "content": f"Reading part {step}.", "tool_calls": [
            {"id": f"c{step}", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": f"cat part{step}.txt"})}}]})
        messages.append({"role": "tool", "tool_call_id": f"c{step}", "content": f"part {step}\n" + "words " * 150})
    return messages


def wait_for_summary(proxy: Any, timeout: float = 10.0) -> dict[str, Any]:
    """The first finished summary job in the store (its row: text, verdict)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for session in proxy.engine.store.sessions():
            done = [job for job in proxy.engine.store.summary_jobs(session["id"]) if job["state"] == "done"]
            if done:
                return done[0]
        time.sleep(0.05)
    raise AssertionError("no summary finished in time")


def drive(proxy: Any, fake: Any, count: int, stop_for_summary: bool) -> list[dict[str, Any]]:
    """Send the run turn by turn; optionally wait once for the background summary before going on."""
    client = proxy.client()
    messages = turns(count)
    waited = False
    for end in range(4, len(messages) + 1, 2):
        client.chat.completions.create(model="summ-model", messages=messages[:end], tools=TOOLS,
                                       extra_headers={"x-workset-session": "summ"})
        if stop_for_summary and not waited and any(r.body.get("model") == "fake-summarizer" for r in fake.requests):
            wait_for_summary(proxy)
            waited = True
    return messages


def compaction_checkpoints(proxy: Any) -> list[dict[str, Any]]:
    proxy.flush()
    session = proxy.engine.store.sessions()[0]["id"]
    return [row["epoch"] for row in proxy.engine.store.checkpoints(session)]


def test_a_verified_summary_stands_for_the_removed_turns(start_proxy: Any, fake: Any, tmp_path: Path) -> None:
    proxy = summarising_proxy(start_proxy, tmp_path)
    fake.answer_model("fake-summarizer", Completion(content="- The agent read the config parts one by one; nothing failed."))
    drive(proxy, fake, 16, stop_for_summary=True)
    asked = [r.body for r in fake.requests if r.body.get("model") == "fake-summarizer"]
    assert asked and "Turns to summarise" in asked[0]["messages"][1]["content"]
    epochs = compaction_checkpoints(proxy)
    assert any(epoch["summary_check"] == "ok" and epoch["summary"] for epoch in epochs)
    forwarded = [r.body for r in fake.chat_requests() if r.body["model"] == "summ-model"][-1]
    compacted = next(m["content"] for m in forwarded["messages"] if "Earlier turns" in str(m.get("content")))
    assert "## Summary of turns up to" in compacted and "read the config parts one by one" in compacted
    assert all(epoch["state_check"] == "ok" for epoch in epochs)


def test_a_summary_that_invents_a_number_is_rejected_and_the_digest_used(start_proxy: Any, fake: Any,
                                                                         tmp_path: Path) -> None:
    proxy = summarising_proxy(start_proxy, tmp_path)
    fake.answer_model("fake-summarizer", Completion(content="- The agent found 98765 broken settings in part 3."))
    drive(proxy, fake, 16, stop_for_summary=True)
    epochs = compaction_checkpoints(proxy)
    assert any(epoch["summary_check"].startswith("rejected: invented 98765") for epoch in epochs)
    assert not any(epoch["summary"] for epoch in epochs)
    forwarded = [r.body for r in fake.chat_requests() if r.body["model"] == "summ-model"][-1]
    compacted = next(m["content"] for m in forwarded["messages"] if "Earlier turns" in str(m.get("content")))
    assert "98765" not in compacted and "## Earlier steps (extractive digest)" in compacted


def test_a_hanging_summariser_never_delays_the_agent(start_proxy: Any, fake: Any, tmp_path: Path) -> None:
    proxy = summarising_proxy(start_proxy, tmp_path, timeout_s=3.0)
    fake.answer_model("fake-summarizer", Hang(30))
    client = proxy.client()
    messages = turns(16)
    slowest = 0.0
    for end in range(4, len(messages) + 1, 2):
        started = time.monotonic()
        client.chat.completions.create(model="summ-model", messages=messages[:end], tools=TOOLS,
                                       extra_headers={"x-workset-session": "summ"})
        slowest = max(slowest, time.monotonic() - started)
    assert slowest < 3.0  # requests never wait for the summariser (it runs in the background)
    time.sleep(3.5)  # past summarizer.timeout_s the job is dropped
    assert wait_for_summary(proxy)["verdict"] == "timeout"
    epochs = compaction_checkpoints(proxy)
    assert epochs and not any(epoch["summary"] for epoch in epochs)
