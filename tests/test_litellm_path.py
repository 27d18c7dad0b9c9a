"""Deployments that go through litellm instead of the plain-HTTP fast path: provider-prefixed models
(anthropic/...) and OpenAI-compatible ones with upstream.openai_fast_path off."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytestmark = pytest.mark.e2e


def test_openai_compatible_through_litellm_streamed_and_not(start_proxy: Any, fake: Any) -> None:
    proxy = start_proxy(upstream={"openai_fast_path": False, "timeout_s": 30})
    client = proxy.client()
    completion = client.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "hello"}],
                                                temperature=0.2, seed=3)
    assert completion.choices[0].message.content == "echo: hello"
    received = fake.chat_requests()[-1]
    assert received.body["temperature"] == 0.2 and received.body["seed"] == 3
    assert received.headers["authorization"] == "Bearer sk-test"  # the caller's key, through litellm
    stream = client.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "again"}],
                                            stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "echo: again"


def test_anthropic_path_keeps_the_live_state_out_of_the_system_prompt(start_proxy: Any, fake: Any, tmp_path: Any) -> None:
    policy = tmp_path / "tail.yaml"
    policy.write_text("name: tail\nbudget: {max_input_tokens: 1500}\nrecent_turns: 2\nstate: {position: tail}\n")
    proxy = start_proxy(
        model_list=[{"model_name": "anthropic/*", "litellm_params": {"model": "anthropic/*", "api_base": fake.url}}],
        policy_by_model={"anthropic/*": str(policy)},
        upstream={"timeout_s": 30},
    )
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a booking agent."},
                                      {"role": "user", "content": "Book me a flight. Never book basic economy."}]
    for turn in range(8):
        messages.append({"role": "assistant", "content": f"Option {turn}: " + "details " * 200})
        messages.append({"role": "user", "content": f"Tell me more about option {turn}."})
        proxy.client().chat.completions.create(model="anthropic/claude-test", messages=messages, max_tokens=50)
    sent = [r for r in fake.requests if r.path == "/v1/messages"][-1].body
    assert json.dumps(sent["system"]).count("You are a booking agent.") == 1
    assert "Task state" not in json.dumps(sent["system"])  # not hoisted: the system prompt stays cacheable
    assert "Task state" in json.dumps(sent["messages"][-1])
    assert sent["messages"][0]["role"] == "user"
