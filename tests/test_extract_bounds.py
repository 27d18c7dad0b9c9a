"""Extraction is bounded per message: it reads a window of a long message (head and tail), and a time cap skips
its remaining stages, naming them; the message is ingested all the same (whole evidence, its tokens counted)."""

from __future__ import annotations

import inspect
import json

from proxy.config import IngestSettings
from proxy.extract import extract
from proxy.ingest import extract_at
from proxy.records import CONSTRAINT, MessageContext
from proxy.tokens import TokenCounter

COUNTER = TokenCounter()


def _conversation(tool_output: str) -> list[dict[str, object]]:
    return [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "Fix the failing test. You must not touch setup.py."},
        {"role": "assistant", "content": "Running the tests.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "bash",
                                                          "arguments": json.dumps({"command": "pytest -q"})}}]},
        {"role": "tool", "tool_call_id": "c1", "content": tool_output},
    ]


OUTPUT = "tests/test_rates.py::test_parity FAILED\nE   AssertionError: 7.1235 != 7.1236\n==== 1 failed in 0.42s ===="


def test_the_window_is_the_config_default_and_the_cap_is_set_by_the_request_path() -> None:
    parameters = inspect.signature(extract_at).parameters
    assert parameters["max_chars"].default == IngestSettings().extract_chars
    # no cap unless the caller gives one: an evaluation extracts the same on a busy machine
    assert parameters["deadline_ms"].default is None and IngestSettings().extract_ms == 50.0


def test_a_cap_of_zero_skips_the_stages_and_the_message_is_still_ingested() -> None:
    messages = _conversation(OUTPUT)
    whole = extract_at(messages, 3, "r3", 1, deadline_ms=None)
    capped = extract_at(messages, 3, "r3", 1, deadline_ms=0)
    assert whole.skipped == () and ("verification", "pytest -q", "failed") in {
        (f.kind, f.key, f.value) for f in whole.extraction.facts}
    assert capped.skipped == ("verification", "checks", "changes", "http failures", "claims", "facts", "names")
    assert capped.extraction.facts == () and capped.names == ()
    # what the working set needs of a tool result stays: its action, outcome, gist and the whole text as evidence
    assert capped.extraction.actions == whole.extraction.actions
    assert (capped.tool, capped.outcome, capped.gist) == (whole.tool, whole.outcome, whole.gist)
    assert capped.outcome == "error" and "AssertionError: 7.1235 != 7.1236" in capped.gist
    assert capped.evidence == OUTPUT
    assert COUNTER.message(messages[3]) > 20  # its tokens are counted apart from extraction


def test_a_capped_user_message_names_every_stage_it_skipped() -> None:
    messages = _conversation(OUTPUT)
    capped = extract_at(messages, 1, "r1", 1, deadline_ms=0)
    assert capped.skipped == ("constraints", "approval", "plan", "facts", "names")
    assert capped.evidence == messages[1]["content"] and capped.extraction.facts == ()
    assert CONSTRAINT in {f.kind for f in extract_at(messages, 1, "r1", 1).extraction.facts}


def test_a_long_message_is_read_at_its_head_and_tail_and_stored_whole() -> None:
    filler = "".join(f"nothing to see here, row {n}\n" for n in range(40_000))  # about a megabyte
    text = "Deploy to HAT136 first.\n" + filler[:500_000] + "Ticket PO-7781 is in the middle.\n" + filler[500_000:] \
        + "Rollback plan: keep ZFA04Y.\n"
    extracted = extract_at([{"role": "user", "content": "task"}, {"role": "user", "content": text}], 1, "r1", 0,
                           deadline_ms=None)
    found = {f.key for f in extracted.extraction.facts}
    assert "HAT136" in found and "ZFA04Y" in found and "PO-7781" not in found
    assert "HAT136" in extracted.names and "PO-7781" not in extracted.names
    assert extracted.evidence == text
    assert extracted.skipped == ()


def test_a_wider_window_reads_more() -> None:
    text = "x\n" * 3_000 + "Flight HAT136 is booked.\n" + "x\n" * 3_000  # 12k characters, 6,001 lines
    context = MessageContext(index=1, ref="r1")
    narrow = extract({"role": "user", "content": text}, context)
    wide = extract({"role": "user", "content": text}, context, max_chars=200_000)
    assert "HAT136" not in {f.key for f in narrow.facts} and "HAT136" in {f.key for f in wide.facts}
