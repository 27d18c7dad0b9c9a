"""Recall by ref end to end: a scripted provider calls workset_recall; the proxy answers it from the store and asks
again; the client sees one ordinary response, streamed or not."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from fakeupstream import Completion, ToolCall
from stores import store_settings

pytestmark = pytest.mark.e2e

REF = re.compile(r"\[ref:([0-9a-f]+)\]")
TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {}}}}]


def long_run(steps: int = 14, marker: str = "SECRET_VALUE_4471") -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."},
                                      {"role": "user", "content": "Find the config value. Never guess it."}]
    for step in range(steps):
        call_id = f"call_{step}"
        messages.append({"role": "assistant", "content": f"Step {step}.", "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": f"cat part{step}.txt"})}}]})
        text = f"header of part {step}\n" + ("filler text " * 120) + f"\nvalue = {marker}"
        messages.append({"role": "tool", "tool_call_id": call_id, "content": text})
    return messages


STEP_LINE = re.compile(r"^- turn \d+ assistant: Step (\d+)\. \[ref:([0-9a-f]+)\]$")


def step_refs(body: dict[str, Any]) -> dict[int, str]:
    """Step number -> ref of its assistant message, for the removed steps the provider was shown in the digest
    (`- turn N assistant: Step k. [ref:A]`): the digest folds the tool-call lines (which carry the outputs' refs)
    first, so the assistant's ref is what stays in view, and recalling it must bring back the step's output."""
    found = (STEP_LINE.match(line) for message in body["messages"]
             for line in str(message.get("content")).splitlines())
    return {int(match.group(1)): match.group(2) for match in found if match}


def step_ref(body: dict[str, Any]) -> tuple[str, int]:
    """(ref, step) of the earliest removed step, checking that the step's output is not in view."""
    refs = step_refs(body)
    assert refs, "no removed step was shown with the ref of its assistant message"
    step = min(refs)
    assert not any(f"header of part {step}\n" in str(m.get("content")) for m in body["messages"]), \
        "the output of the step is still in view"
    return refs[step], step


def drive_to_compaction(client: Any, fake: Any, session: str, marker: str = "SECRET_VALUE_4471") -> list[dict[str, Any]]:
    """A run long enough for the small test policy to elide its first tool outputs."""
    messages = long_run(marker=marker)
    for end in range(4, len(messages) + 1, 2):
        client.chat.completions.create(model="small-test", messages=messages[:end], tools=TOOLS,
                                       extra_headers={"x-workset-session": session})
    step_ref(fake.chat_requests()[-1].body)  # raises unless a step was removed, its ref in the digest
    return messages


def recall_then_answer(seen: dict[str, Any], ref: str | None = None) -> list[Any]:
    """Round 1: call workset_recall on the ref of the earliest removed step (or `ref`). Round 2: answer with what
    came back."""
    def ask(body: dict[str, Any]) -> Completion:
        assert any(t["function"]["name"] == "workset_recall" for t in body["tools"])
        seen["ref"], seen["step"] = (ref, -1) if ref else step_ref(body)
        return Completion(content="Let me look that up. ",
                          tool_calls=[ToolCall("workset_recall", json.dumps({"ref": seen["ref"]}), "rc_1")])

    def answer(body: dict[str, Any]) -> Completion:
        result = body["messages"][-1]
        assert result["role"] == "tool" and result["tool_call_id"] == "rc_1"
        seen["recalled"] = result["content"]
        found = re.search(r"value = (\w+)", result["content"])
        return Completion(content=f"The value is {found.group(1) if found else 'unknown'}.")

    return [ask, answer]


def test_recall_is_answered_by_the_proxy_and_invisible_to_the_client(proxy: Any, fake: Any) -> None:
    client = proxy.client()
    messages = drive_to_compaction(client, fake, "recall-1")
    seen: dict[str, Any] = {}
    fake.script(*recall_then_answer(seen))
    before = len(fake.chat_requests())
    reply = client.chat.completions.create(model="small-test", messages=messages, tools=TOOLS,
                                           extra_headers={"x-workset-session": "recall-1"})
    message = reply.choices[0].message
    assert message.content == "The value is SECRET_VALUE_4471."
    assert not message.tool_calls and reply.choices[0].finish_reason == "stop"
    assert len(fake.chat_requests()) - before == 2  # one client call, two provider rounds
    assert "SECRET_VALUE_4471" in seen["recalled"] and f"[ref:{seen['ref']}]" in seen["recalled"]
    assert f"header of part {seen['step']}\n" in seen["recalled"]  # the output of the step recalled


def test_recall_in_a_stream_continues_the_same_stream(proxy: Any, fake: Any) -> None:
    client = proxy.client()
    messages = drive_to_compaction(client, fake, "recall-2")
    seen: dict[str, Any] = {}
    fake.script(*recall_then_answer(seen))
    stream = client.chat.completions.create(model="small-test", messages=messages, tools=TOOLS, stream=True,
                                            stream_options={"include_usage": True},
                                            extra_headers={"x-workset-session": "recall-2"})
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Let me look that up. The value is SECRET_VALUE_4471."
    assert not any(c.choices and c.choices[0].delta.tool_calls for c in chunks)
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["stop"]
    usage = [c.usage for c in chunks if c.usage]
    assert len(usage) == 1 and usage[0].prompt_tokens > 0  # both rounds, summed, reported once
    assert f"header of part {seen['step']}\n" in seen["recalled"] and "SECRET_VALUE_4471" in seen["recalled"]


def test_recall_alongside_the_agents_own_call_returns_the_agents_call(proxy: Any, fake: Any) -> None:
    client = proxy.client()
    messages = drive_to_compaction(client, fake, "recall-3")
    seen: dict[str, Any] = {}

    def both(body: dict[str, Any]) -> Completion:
        seen["ref"] = step_ref(body)[0]
        # the step's last line only (its output's last): the answer comes in the next request's tail, within
        # retrieval.max_share
        asked = json.dumps({"ref": seen["ref"], "lines": "6"})
        return Completion(tool_calls=[ToolCall("workset_recall", asked, "rc_9"),
                                      ToolCall("bash", json.dumps({"command": "ls"}), "own_1")])

    fake.script(both)
    reply = client.chat.completions.create(model="small-test", messages=messages, tools=TOOLS,
                                           extra_headers={"x-workset-session": "recall-3"})
    calls = reply.choices[0].message.tool_calls
    assert [c.function.name for c in calls] == ["bash"] and calls[0].id == "own_1"
    # the recall answer comes with the next request of the session
    follow = messages + [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "own_1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]},
        {"role": "tool", "tool_call_id": "own_1", "content": "part0.txt"}]
    client.chat.completions.create(model="small-test", messages=follow, tools=TOOLS,
                                   extra_headers={"x-workset-session": "recall-3"})
    tail = fake.chat_requests()[-1].body["messages"][-1]["content"]
    assert "SECRET_VALUE_4471" in tail and "workset_recall" in tail


def test_unknown_ref_and_another_sessions_ref_answer_not_found(proxy: Any, fake: Any) -> None:
    client = proxy.client()
    messages = drive_to_compaction(client, fake, "recall-a")
    fake.script(lambda body: Completion(content=step_ref(body)[0]))  # learn a ref of session A
    ref_of_a = client.chat.completions.create(model="small-test", messages=messages, tools=TOOLS,
                                              extra_headers={"x-workset-session": "recall-a"}).choices[0].message.content
    other = drive_to_compaction(client, fake, "recall-b", marker="OTHER_VALUE")
    for ref in (ref_of_a, "0123456789ab"):
        seen: dict[str, Any] = {}
        fake.script(*recall_then_answer(seen, ref=ref))
        reply = client.chat.completions.create(model="small-test", messages=other, tools=TOOLS,
                                               extra_headers={"x-workset-session": "recall-b"})
        assert "No stored content has ref" in seen["recalled"]
        assert "SECRET_VALUE_4471" not in seen["recalled"]
        assert reply.choices[0].message.content == "The value is unknown."


def test_a_model_that_keeps_calling_recall_gets_at_most_max_rounds() -> None:
    """Unit level: after max_rounds the tool is withdrawn; a model still calling it gets its text returned."""
    import asyncio

    import orjson

    from proxy import recall
    from proxy.upstream import Reply

    def reply(text: str) -> Reply:
        call = {"id": "r", "type": "function", "function": {"name": "workset_recall", "arguments": '{"query": "x"}'}}
        return Reply(200, orjson.dumps({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": text, "tool_calls": [call]}}], "usage": {"prompt_tokens": 10,
                                                                                     "completion_tokens": 1}}))

    asked: list[dict[str, Any]] = []

    async def ask(body: dict[str, Any]) -> Reply:
        asked.append(body)
        return reply(f"round {len(asked)}")

    async def nothing(arguments: str) -> str:
        return "nothing"

    body = recall.offer_tool({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    assert body is not None
    final, rounds = asyncio.run(recall.complete(reply("round 0"), body, ask, nothing, 2, lambda t: None))
    data = orjson.loads(final.body)
    assert rounds == 2 and len(asked) == 2
    assert "tools" not in asked[-1]  # the last round had no recall tool to call
    assert data["choices"][0]["message"]["content"] == "round 2" and "tool_calls" not in data["choices"][0]["message"]
    assert data["choices"][0]["finish_reason"] == "stop" and data["usage"]["prompt_tokens"] == 30


# --- a line in the middle of a large output: by query, by page, across the session -----------------------------

CHECKSUM = "checksum = 7f3a91c2 for lane 118"


def lanes_report() -> str:
    """About 2,900 tokens: one line per lane, and the checksum line in the middle (about 1,400 tokens in)."""
    lines = [f"lane {lane:03d} ok p95 {(lane * 37) % 90 + 10}ms q{(lane * 7) % 13}" for lane in range(1, 241)]
    lines[117] = CHECKSUM
    return "\n".join(lines)


def lanes_run(checks: int = 0) -> list[dict[str, Any]]:
    """A run whose second tool output is the lanes report, followed by more steps: three short ones, or `checks`
    outputs of about 300 tokens each (ten of them take the report's whole turn out of the working set)."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are an ops agent."},
                                      {"role": "user", "content": "Audit the lanes and report the checksum."}]
    after = [f"check {n}: " + " ".join(f"node{k} ok" for k in range(120)) for n in range(checks)] if checks \
        else ["ok: 240 lanes", "no alerts", "disk 41% used"]
    outputs = ["lanes.log written", lanes_report(), *after]
    for step, output in enumerate(outputs):
        messages.append({"role": "assistant", "content": f"Step {step}.", "tool_calls": [{
            "id": f"call_{step}", "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": f"step {step}"})}}]})
        messages.append({"role": "tool", "tool_call_id": f"call_{step}", "content": output})
    return messages


@pytest.fixture
def lanes_proxy(start_proxy: Any, tmp_path: Any) -> Any:
    """A proxy whose `lanes-*` models get a small budget and recall answers of 600 tokens: a page of the report
    does not reach its middle."""
    import yaml

    policy = tmp_path / "lanes.yaml"
    policy.write_text(yaml.safe_dump({
        "name": "lanes", "recent_turns": 3,
        "budget": {"max_input_tokens": 3000, "trigger_ratio": 0.8, "target_ratio": 0.5},
        "tool_outputs": {"max_tokens": 600, "head_tokens": 150, "tail_tokens": 100},
        "recall": {"max_tokens": 600, "context_lines": 2},
    }))
    return start_proxy(policy_by_model={"lanes-*": str(policy)})


def report_ref(body: dict[str, Any]) -> str:
    """The ref under which the provider was shown the lanes report, checking that its middle was elided."""
    assert any(t["function"]["name"] == "workset_recall" for t in body["tools"])
    assert not any(CHECKSUM in str(m.get("content")) for m in body["messages"])
    excerpts = [REF.search(str(m.get("content"))) for m in body["messages"]
                if str(m.get("content")).startswith("lane 001")]
    assert excerpts and excerpts[0], "the lanes report was not shown as an excerpt with its ref"
    return excerpts[0].group(1)


def recall_rounds(seen: dict[str, Any], *calls: dict[str, Any] | None,
                  ref_of: Callable[[dict[str, Any]], str] = report_ref) -> list[Any]:
    """Round 1: the given workset_recall calls (None in "ref" is filled with `ref_of` the provider's request: the
    report's ref). Round 2: the tool messages that came back are kept in `seen["results"]`, and the answer quotes
    the checksum if found."""
    def ask(body: dict[str, Any]) -> Completion:
        seen["ref"] = ref_of(body)
        made = [ToolCall("workset_recall", json.dumps({**call, **({"ref": seen["ref"]} if "ref" in call else {})}),
                         f"rc_{number}") for number, call in enumerate(calls) if call is not None]
        return Completion(content="Checking. ", tool_calls=made)

    def answer(body: dict[str, Any]) -> Completion:
        seen["results"] = [m["content"] for m in body["messages"] if m.get("role") == "tool"
                           and str(m.get("tool_call_id", "")).startswith("rc_")]
        found = re.search(r"checksum = (\w+)", "\n".join(seen["results"]))
        return Completion(content=f"Checksum {found.group(1) if found else 'unknown'}.")

    return [ask, answer]


@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
def test_ref_and_query_bring_back_a_line_from_the_middle_of_an_elided_output(lanes_proxy: Any, fake: Any,
                                                                             streamed: bool) -> None:
    client = lanes_proxy.client()
    messages = lanes_run()
    seen: dict[str, Any] = {}
    fake.script(*recall_rounds(seen, {"ref": None, "query": "checksum lane 118"}))
    if streamed:
        chunks = list(client.chat.completions.create(model="lanes-test", messages=messages, tools=TOOLS, stream=True,
                                                     extra_headers={"x-workset-session": "lanes-q"}))
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    else:
        text = client.chat.completions.create(model="lanes-test", messages=messages, tools=TOOLS,
                                              extra_headers={"x-workset-session": "lanes-q"}).choices[0].message.content
    assert text.endswith("Checksum 7f3a91c2.")
    [result] = seen["results"]
    assert f"118| {CHECKSUM}" in result  # the line, numbered
    assert "117| lane 117" in result and "120| lane 120" in result  # with two lines of context either side
    assert "lane 001" not in result  # not the head of the output


def test_paging_a_ref_returns_the_page_after_the_first(lanes_proxy: Any, fake: Any) -> None:
    client = lanes_proxy.client()
    seen: dict[str, Any] = {}
    fake.script(*recall_rounds(seen, {"ref": None}, {"ref": None, "page": 2}))
    client.chat.completions.create(model="lanes-test", messages=lanes_run(), tools=TOOLS,
                                   extra_headers={"x-workset-session": "lanes-p"})
    first, second = seen["results"]
    where = re.search(r"\(lines 1-(\d+) of 240, page 1 of (\d+); ask \{\"ref\": \"(\w+)\", \"page\": 2\} for more\)",
                      first)
    assert where is not None and where.group(3) == seen["ref"], first
    last = int(where.group(1))
    assert first.splitlines()[1] == "1| lane 001 ok p95 47ms q7"
    assert second.splitlines()[1].startswith(f"{last + 1}| lane {last + 1:03d}")  # page 2 follows page 1
    assert "lane 001" not in second
    assert f"page 2 of {where.group(2)}" in second
    assert len(lanes_proxy.engine.counter.encoding.encode(second)) <= 600


def test_a_query_across_the_session_shows_the_matching_passage(lanes_proxy: Any, fake: Any) -> None:
    client = lanes_proxy.client()
    seen: dict[str, Any] = {}
    fake.script(*recall_rounds(seen, {"query": "checksum lane 118"}))
    reply = client.chat.completions.create(model="lanes-test", messages=lanes_run(), tools=TOOLS,
                                           extra_headers={"x-workset-session": "lanes-s"})
    assert reply.choices[0].message.content.endswith("Checksum 7f3a91c2.")
    [result] = seen["results"]
    assert f"[ref:{seen['ref']}] bash, 240 lines:" in result
    assert f"118| {CHECKSUM}" in result and "lane 001" not in result


def report_step_ref(body: dict[str, Any]) -> str:
    """The ref of the assistant message whose call returned the lanes report (step 1), from its digest line,
    checking that its whole turn left the working set and no line of the report is in view."""
    assert any(t["function"]["name"] == "workset_recall" for t in body["tools"])
    assert not any(str(m.get("content")).startswith("lane 001") for m in body["messages"]), \
        "the lanes report (or an excerpt of it) is still in view"
    assert not any(CHECKSUM in str(m.get("content")) for m in body["messages"])
    refs = step_refs(body)
    assert 1 in refs, "the report's step was not removed with its assistant's ref in the digest"
    return refs[1]


@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
def test_the_assistant_ref_of_a_removed_step_and_a_query_reach_a_line_in_the_middle_of_its_output(
        lanes_proxy: Any, fake: Any, streamed: bool) -> None:
    client = lanes_proxy.client()
    messages = lanes_run(checks=10)
    session = {"x-workset-session": f"lanes-a-{streamed}"}
    for end in range(4, len(messages), 2):  # the run so far, request by request
        client.chat.completions.create(model="lanes-test", messages=messages[:end], tools=TOOLS, extra_headers=session)
    seen: dict[str, Any] = {}
    fake.script(*recall_rounds(seen, {"ref": None, "query": "checksum lane 118"}, ref_of=report_step_ref))
    if streamed:
        chunks = list(client.chat.completions.create(model="lanes-test", messages=messages, tools=TOOLS, stream=True,
                                                     extra_headers=session))
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    else:
        text = client.chat.completions.create(model="lanes-test", messages=messages, tools=TOOLS,
                                              extra_headers=session).choices[0].message.content
    assert text.endswith("Checksum 7f3a91c2.")  # the recalled line reached the provider in the next round
    [result] = seen["results"]
    assert result.startswith(f"[ref:{seen['ref']}] assistant, ")  # read through the assistant's ref
    # the report's lines follow the step's text, its call and the result's heading: line 118 of it is line 121
    assert f"121| {CHECKSUM}" in result and "120| lane 117" in result and "123| lane 120" in result
    assert "lane 001" not in result


def test_recall_waits_for_the_request_it_answers_to_be_stored(lanes_proxy: Any, fake: Any) -> None:
    """The request's own messages are stored on a worker beside the provider's latency; a recall call in the
    provider's answer must still find them, however slow that storing is."""
    import threading

    engine = lanes_proxy.engine
    settle = engine.settle

    def slow_settle(prepared: Any) -> None:
        threading.Event().wait(0.5)
        settle(prepared)

    engine.settle = slow_settle
    seen: dict[str, Any] = {}
    fake.script(*recall_rounds(seen, {"ref": None, "query": "checksum lane 118"}))
    text = lanes_proxy.client().chat.completions.create(
        model="lanes-test", messages=lanes_run(), tools=TOOLS, extra_headers={"x-workset-session": "lanes-slow"}
    ).choices[0].message.content
    assert text.endswith("Checksum 7f3a91c2.") and f"118| {CHECKSUM}" in seen["results"][0]


def test_a_recall_answer_waiting_for_the_next_request_survives_a_restart(start_proxy: Any, fake: Any) -> None:
    """Answers for the conversation's next request are kept in the store, not in the process: the next request may
    come to another replica, or after a restart."""
    proxy = start_proxy()
    client = proxy.client()
    messages = drive_to_compaction(client, fake, "recall-r")

    def both(body: dict[str, Any]) -> Completion:
        asked = json.dumps({"ref": step_ref(body)[0], "lines": "6"})
        return Completion(tool_calls=[ToolCall("workset_recall", asked, "rc_1"),
                                      ToolCall("bash", json.dumps({"command": "ls"}), "own_1")])

    fake.script(both)
    client.chat.completions.create(model="small-test", messages=messages, tools=TOOLS,
                                   extra_headers={"x-workset-session": "recall-r"})
    proxy.stop()
    restarted = start_proxy(store=store_settings(proxy.store))
    follow = messages + [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "own_1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]},
        {"role": "tool", "tool_call_id": "own_1", "content": "part0.txt"}]
    restarted.client().chat.completions.create(model="small-test", messages=follow, tools=TOOLS,
                                               extra_headers={"x-workset-session": "recall-r"})
    tail = fake.chat_requests()[-1].body["messages"][-1]["content"]
    assert "SECRET_VALUE_4471" in tail and "workset_recall" in tail
    # shown once: the request after it does not carry it again
    again = follow + [{"role": "assistant", "content": "Done."}, {"role": "user", "content": "Thanks. Next?"}]
    restarted.client().chat.completions.create(model="small-test", messages=again, tools=TOOLS,
                                               extra_headers={"x-workset-session": "recall-r"})
    assert "Answers to the workset_recall calls" not in json.dumps(fake.chat_requests()[-1].body["messages"])
