"""Extraction over every message of every shared trace, and on odd or hostile input: it never raises, is
deterministic, prints nothing, and stays fast."""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from traces import load_traces, requires_traces

from proxy.extract import extract
from proxy.extract.checks import NO_ERROR_LINE
from proxy.messages import message_text, tool_calls
from proxy.extract.approvals import approval_status
from proxy.records import (
    APPROVAL,
    CHANGED,
    CONSTRAINT,
    DECISION,
    RULE,
    FACT_KINDS,
    FAILING,
    FAILURE,
    FINDING,
    PLAN,
    VERIFICATION,
    Extraction,
    Message,
    MessageContext,
)

TRACE_SETS = ("swe-dev", "tau-dev")
_RETURNCODE = re.compile(r"<returncode>(-?\d+)</returncode>")


def contexts(messages: list[Message]) -> Iterator[tuple[Message, MessageContext]]:
    """Each message with the context ingest would give it: the call a tool result answers (looked up in the
    nearest assistant turn: tau reuses call ids across turns) and the nearest assistant text."""
    first_user = next((i for i, m in enumerate(messages) if m.get("role") == "user"), None)
    assistant: Message | None = None
    for index, message in enumerate(messages):
        role = message.get("role")
        call = None
        if role in ("tool", "function") and assistant is not None:
            call = next((c for c in tool_calls(assistant) if c.id == message.get("tool_call_id")), None)
        previous = message_text(assistant) if assistant is not None else ""
        yield message, MessageContext(index, f"m{index}", call, previous, index == first_user)
        if role == "assistant":
            assistant = message
        elif role not in ("tool", "function"):
            assistant = None


def flat(text: str) -> str:
    return " ".join(text.split()).lower()


def check(extraction: Extraction, message: Message, context: MessageContext) -> None:
    for fact in extraction.facts:
        assert fact.kind in FACT_KINDS and fact.key and isinstance(fact.value, str)
        assert (fact.turn, fact.evidence_ref) == (context.index, context.ref)
        if fact.kind == APPROVAL:
            assert approval_status(fact.value) in ("requested", "granted", "denied")
        if fact.kind == PLAN:
            assert fact.value in ("pending", "completed", "step")
        if fact.kind == VERIFICATION:
            assert fact.value in ("passed", "failed", "unclear")
        if fact.kind == RULE and not fact.value.endswith("…"):
            assert flat(fact.value) in flat(message_text(message)), fact.value  # a rule is quoted, never made up
        if fact.kind == FAILING and fact.value != NO_ERROR_LINE:  # the error line as printed (unittest's: its
            for part in re.sub(r" \(\+\d+ more\)$", "", fact.value).split(" — "):  # header — its exception line)
                assert flat(part) in flat(message_text(message)), fact.value
        if fact.kind == CHANGED:
            assert not fact.key.startswith(("/tmp/", "/dev/")), fact.key
        if fact.kind in (CONSTRAINT, DECISION) or (fact.kind in (FAILURE, FINDING) and fact.source == "assistant"):
            # As written: the working-set invariants look for constraints in what is forwarded.
            assert flat(fact.value) in flat(message_text(message)), fact.value
    keys = [(f.kind, f.key) for f in extraction.facts]
    assert len(keys) == len(set(keys))
    if message.get("role") in ("tool", "function"):
        (action,) = extraction.actions
        assert action.outcome in ("ok", "error") and "\n" not in action.gist and action.turn == context.index
        # a failed call changed no file, but for the hunks a failed patch applied all the same; at exit status 0 an
        # error line is a script's (the shell's writes stand), and after a traceback no Python program's write counts
        code = _RETURNCODE.search(message_text(message))
        exit_0 = code is not None and code.group(1) == "0"
        crashed = "Traceback (most recent call last):" in message_text(message)
        assert action.outcome == "ok" or all("in part" in f.value or (exit_0 and not (crashed and "python" in f.value))
                                             for f in extraction.facts if f.kind == CHANGED)
        if code and code.group(1) != "0":
            assert action.outcome == "error" and action.gist.startswith(f"exit {code.group(1)}: ")
    else:
        assert extraction.actions == ()


@requires_traces
@pytest.mark.parametrize("name", TRACE_SETS)
def test_every_trace_message(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    count = 0
    started = time.perf_counter()
    for trace in load_traces(name):
        for message, context in contexts(trace["messages"]):
            extraction = extract(message, context)
            check(extraction, message, context)
            assert extract(message, context) == extraction  # deterministic, same order
            count += 1
    elapsed = time.perf_counter() - started
    assert capsys.readouterr() == ("", "")
    assert count > 4000
    assert elapsed / (2 * count) < 0.003  # mean per message; measured about 0.35 ms on the 2-core dev box


@requires_traces
def test_trace_totals() -> None:
    """Counts over all tau traces, so a regression that silences a whole extractor fails loudly."""
    found: Counter[tuple[str, str]] = Counter()
    for trace in load_traces("tau-dev"):
        for message, context in contexts(trace["messages"]):
            for fact in extract(message, context).facts:
                value = approval_status(fact.value) if fact.kind == APPROVAL else fact.value
                found[(fact.kind, value if fact.kind in (APPROVAL, PLAN) else "")] += 1
    assert found[(APPROVAL, "requested")] >= 200
    assert found[(APPROVAL, "granted")] >= 150
    assert found[(APPROVAL, "denied")] == 0  # no user in these traces refuses a confirmed action
    assert found[(CONSTRAINT, "")] >= 35
    assert found[(FINDING, "")] >= 30  # totals and price differences the agent works out
    assert found[(FAILURE, "")] >= 10  # "the flight HAT030 ... is not available for the upgrade"


def test_odd_messages_never_raise() -> None:
    context = MessageContext(index=1, call=None, previous_assistant_text="Shall I go ahead?")
    odd: list[object] = [
        None,
        "not a dict",
        {},
        {"role": None},
        {"role": "user", "content": None},
        {"role": "user", "content": 42},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}, "yes", {"text": 3}]},
        {"role": "assistant", "content": None, "tool_calls": [{"function": "x"}, "y", {"function": None}]},
        {"role": "assistant", "content": None, "tool_calls": "nope", "function_call": "nope"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": 1, "function": {"name": "todo_write", "arguments": {"a": 1}}}],
        },
        {"role": "tool", "content": None},
        {"role": "tool", "content": "[" * 100_000},
        {"role": "tool", "content": "[" * 5_000 + "]" * 5_000},
        {"role": "tool", "content": '{"error": ' + "[1," * 10 + "1" + "]" * 10 + "}"},
        {"role": "function", "name": 7, "content": "\x00\x01\ufffd" * 1000},
        {"role": "developer", "content": "You must never do this."},
        {"role": "weird", "content": "You must never do this."},
    ]
    for message in odd:
        extraction = extract(message, context)  # type: ignore[arg-type]
        assert isinstance(extraction, Extraction)


def test_pathological_text_stays_fast() -> None:
    samples = [
        "a/" * 25_000,
        "a." * 25_000,
        "1," * 25_000,
        "HAT136 " * 7_000,
        ("x" * 300 + "/") * 160,
        "- [ ] " * 8_000,
        "1. step\n" * 6_000,
        "key: value\n" * 5_000,
        "May 2" * 10_000,
        "$" * 50_000,
        "::: " * 12_000,
    ]
    context = MessageContext(index=3, call=None, previous_assistant_text="Please confirm (yes).")
    for text in samples:
        for role in ("user", "assistant", "tool"):
            started = time.perf_counter()
            extract({"role": role, "content": text}, context)
            assert time.perf_counter() - started < 0.25, (role, text[:20])


def test_fifty_kilobytes_of_tool_output_extract_quickly() -> None:
    lines = [
        f'  File "/srv/app/module_{n}.py", line {n}, in handler_{n}\n    value = compute(x{n}, 0x{n:x})'
        for n in range(700)
    ]
    output = "<returncode>1</returncode>\n<output>\n" + "\n".join(lines)[:50_000] + "\nValueError: boom\n</output>"
    call_json = json.dumps([{"reservation_id": f"R{n:05d}", "status": "active", "amount": n} for n in range(1500)])
    context = MessageContext(index=3)
    for text in (output, call_json):
        extract({"role": "tool", "content": text}, context)
        started = time.perf_counter()
        for _ in range(5):
            extraction = extract({"role": "tool", "content": text}, context)
        assert (time.perf_counter() - started) / 5 < 0.05  # measured 6-15 ms on the 2-core dev box
        assert extraction.actions[0].outcome == "error" if text is output else True


@settings(max_examples=150, deadline=None)
@given(
    role=st.sampled_from(["user", "assistant", "tool", "function", "system"]),
    text=st.text(max_size=600),
    previous=st.sampled_from(["", "Do you want me to proceed? (yes/no)", "确认删除吗？请确认"]),
)
def test_random_text_never_raises_and_is_deterministic(role: str, text: str, previous: str) -> None:
    message = {"role": role, "content": text}
    context = MessageContext(index=2, ref="r", previous_assistant_text=previous)
    first = extract(message, context)
    assert extract(message, context) == first
    check(first, message, context)
