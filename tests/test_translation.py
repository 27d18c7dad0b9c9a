"""Reading a conversation's history once: what Translations reuses is exactly what reading the whole request again
gives, turn after turn, with Claude Code's moving breakpoint and a Responses turn split across requests."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from proxy import anthropic, responses
from proxy.evaluate.formats import to_wire
from proxy.translation import Translations


def chat_run(steps: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "agent"}, {"role": "user", "content": "Fix it."}]
    for step in range(steps):
        messages.append({"role": "assistant", "content": f"step {step}", "tool_calls": [
            {"id": f"c{step}", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "ls"}'}}]})
        messages.append({"role": "tool", "tool_call_id": f"c{step}", "content": f"output {step}"})
        if step % 3 == 2:
            messages.append({"role": "user", "content": f"note {step}"})
    return messages


def test_anthropic_history_read_incrementally_equals_read_whole() -> None:
    translations = Translations(8)
    run = chat_run(9)
    for end in range(3, len(run) + 1):
        body = to_wire("anthropic", "m", run[:end])
        wire = copy.deepcopy(body["messages"])
        last = wire[-1]
        if isinstance(last["content"], list) and last["content"]:  # the client's breakpoint, on the newest block
            last["content"][-1] = {**last["content"][-1], "cache_control": {"type": "ephemeral"}}
        assert translations.read("k", wire, anthropic.read_messages) == anthropic.read_messages(wire)[0]


def test_responses_history_read_incrementally_equals_read_whole() -> None:
    translations = Translations(8)
    run = chat_run(9)
    for end in range(2, len(run) + 1):
        items = to_wire("responses", "m", run[:end])["input"]
        # a model turn cut between requests (its function call arrives with the next) is read again whole
        for cut in (len(items), max(1, len(items) - 1)):
            assert translations.read("k", items[:cut], responses.read_messages) == \
                responses.read_messages(items[:cut])[0]


def test_conversations_of_one_key_do_not_share_what_they_read() -> None:
    translations = Translations(8)
    one = to_wire("anthropic", "m", chat_run(2))["messages"]
    other = [{"role": "user", "content": "Another task."}, *one[1:]]
    translations.read("k", one, anthropic.read_messages)
    assert translations.read("k", other, anthropic.read_messages) == anthropic.read_messages(other)[0]


def long_conversation(number: int, chars: int) -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"task {number}: " + "x" * chars}, {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "go on"}]


def recorded_reads() -> tuple[list[int], Callable[[list[Any], int], Any]]:
    """anthropic.read_messages, noting where each read starts (0: the whole history)."""
    read_from: list[int] = []

    def recording(wire: list[Any], start: int = 0) -> Any:
        read_from.append(start)
        return anthropic.read_messages(wire, start)

    return read_from, recording


def test_the_histories_kept_are_bounded_by_their_text_the_oldest_read_whole_again() -> None:
    translations = Translations(8, max_chars=250_000)
    read_from, recording = recorded_reads()
    for number in range(3):  # 300,000 characters of histories: more than the bound, fewer than 8 conversations
        translations.read("k", long_conversation(number, 100_000), recording)
    read_from.clear()
    for number in (2, 1, 0):
        assert translations.read("k", long_conversation(number, 100_000), recording) == \
            anthropic.read_messages(long_conversation(number, 100_000))[0]
    # the two newest were kept (nothing read again); the oldest was let go, so it is read from its first message
    assert read_from[:2] == [3, 3] and read_from[2] == 0


def test_one_history_over_the_bound_is_still_kept_for_its_next_turn() -> None:
    translations = Translations(8, max_chars=1_000)
    read_from, recording = recorded_reads()
    translations.read("k", long_conversation(1, 1_000_000), recording)
    translations.read("k", long_conversation(1, 1_000_000) + [{"role": "assistant", "content": "done"}], recording)
    assert read_from == [0, 3]
