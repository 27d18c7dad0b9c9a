"""Hostile texts cannot stall extraction: every entry point that reads a message's text finishes on each
adversarial text of 100 KB (a few at 1 MB) within a generous bound, never raises, and gives bounded output.

The bound (2 s per call) only catches super-linear work on a slow, busy machine: a quadratic pattern takes
minutes at these sizes. The real target (50 ms per call at 1 MB, issue #9) is measured by `make bench`
(bench/adversarial.py, which defines the texts and entry points used here).
"""

from __future__ import annotations

import random
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.adversarial import adversarial_texts, entry_points  # noqa: E402
from proxy.extract import extract  # noqa: E402
from proxy.extract import actions  # noqa: E402
from proxy.extract.names import names  # noqa: E402
from proxy.records import Extraction, MessageContext, ToolCall  # noqa: E402
from proxy.tokens import TokenCounter  # noqa: E402

LIMIT_SECONDS = 2.0
MAX_FACTS_PER_MESSAGE = 400  # the extractors' own caps add up to less; a flood of facts would pass it
SIZE = 100_000
BIG = 1_000_000

COUNTER = TokenCounter()
ENTRY_POINTS = entry_points(COUNTER)
TEXTS = adversarial_texts(SIZE)


def within_limit(call: Callable[[str], object], text: str, what: str) -> object:
    """The call's result; fails with the elapsed time when it took longer than LIMIT_SECONDS."""
    start = time.perf_counter()
    result = call(text)
    elapsed = time.perf_counter() - start
    assert elapsed <= LIMIT_SECONDS, f"{what}: {elapsed:.2f} s on {len(text):,} chars (limit {LIMIT_SECONDS} s)"
    return result


def _extractions(result: object) -> list[Extraction]:
    """The Extraction records in an entry point's result (extract gives one, extract_at one per message)."""
    items = result if isinstance(result, list) else [result]
    return [getattr(item, "extraction", item) for item in items if isinstance(getattr(item, "extraction", item),
                                                                             Extraction)]


@pytest.mark.timeout(240)
@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_every_adversarial_text_is_handled_in_bounded_time(entry: str) -> None:
    call = ENTRY_POINTS[entry]
    for name, text in TEXTS.items():
        result = within_limit(call, text, f"{entry} on {name!r}")
        for extraction in _extractions(result):
            assert len(extraction.facts) <= MAX_FACTS_PER_MESSAGE, f"{entry} on {name!r}: {len(extraction.facts)}"
            assert all(len(action.gist) <= 700 for action in extraction.actions), f"{entry} on {name!r}"


BIG_CASES = [  # the inputs issue #9 reported, at 1 MB
    ("extract tool", "dna"),
    ("extract user", "run a"),
    ("extract user", "run ["),
    ("extract assistant", "run dot"),
    ("ingest.extract_at", "hex blob"),
    ("runner_command", "run space"),
    ("tool_output_gist", "run space"),
    ("names", "run A"),
]


@pytest.mark.timeout(240)
@pytest.mark.parametrize(("entry", "text_name"), BIG_CASES)
def test_one_megabyte_inputs_are_handled_in_bounded_time(entry: str, text_name: str) -> None:
    text = adversarial_texts(BIG)[text_name] if text_name not in TEXTS else (
        (TEXTS[text_name] * (BIG // SIZE + 1))[:BIG])
    within_limit(ENTRY_POINTS[entry], text, f"{entry} on {text_name!r} at 1 MB")


def test_long_blank_runs_in_a_test_command_are_scanned_in_linear_time() -> None:
    """The separator and display-tail scans of a test command are linear (as `\\s*(?:&&|…)` patterns they took
    seconds on 20,000 blanks), and a blank run does not hide the runner."""
    blanks = " " * 200_000 + "x"
    within_limit(actions._separators, blanks, "_separators")
    within_limit(actions._without_display_tail, blanks, "_without_display_tail")
    command = "cd /repo && python -m pytest tests/test_x.py" + " " * 15_000 + "-q  2>&1 |   tail -5"
    key = within_limit(actions.runner_command, command, "runner_command")
    assert key == "python -m pytest tests/test_x.py -q"


def test_a_summary_line_is_still_read_after_a_hostile_tail() -> None:
    text = "=" * 3_000 + " 1 passed " * 100 + "\n===== 2 failed, 3 passed in 0.52s =====\n"
    outcome, gist = within_limit(lambda t: actions.tool_output_gist("<returncode>1</returncode>\n" + t, 600), text,
                                 "gist")
    assert outcome == "error" and gist.startswith("exit 1: 2 failed, 3 passed in 0.52s")


def test_digit_runs_do_not_fake_or_hide_a_test_count() -> None:
    call = ToolCall(id="c1", name="bash", arguments='{"command": "pytest -q"}')
    context = MessageContext(index=1, ref="r", call=call, previous_assistant_text="", is_first_user=False)
    hostile = "1" * 7_000 + " errors\n"
    failed = within_limit(lambda t: extract({"role": "tool", "content": t}, context), hostile, "extract tool")
    assert ("verification", "pytest -q", "failed") in {(f.kind, f.key, f.value) for f in failed.facts}


# The patterns the linear helpers replace, as a reference: the same results on short random texts.
_OLD_SEGMENT_SPLIT = re.compile(r"\s*(?:&&|\|\||;|\n)\s*")
_OLD_DISPLAY_TAIL = re.compile(r"\s*(?:\d?>&\d|2>\s*/dev/null)|\s*\|\s*(?:head|tail|grep|less|more|cat|tee)\b.*$")
_OLD_PYTEST_SUMMARY = re.compile(r"^=+ .*\b(?:passed|failed|errors?|skipped)\b.* in [\d.]+s.*=+$", re.M)
_PIECES = [" ", "\n", "\t", "&", "|", ";", "a", "2", ">", "&1", "/dev/null", "| tail", "|head", " tee", "x", "=",
           "passed", " in 0.1s", "==", "failed", "pytest"]


def test_linear_helpers_agree_with_the_patterns_they_replace() -> None:
    rng = random.Random(9)
    for _ in range(20_000):
        text = "".join(rng.choice(_PIECES) for _ in range(rng.randint(0, 14)))
        assert actions._separators(text) == [m.span() for m in _OLD_SEGMENT_SPLIT.finditer(text)], repr(text)
        assert actions._without_display_tail(text) == _OLD_DISPLAY_TAIL.sub("", text), repr(text)
        old = _OLD_PYTEST_SUMMARY.search(text)
        new = next((line for line in text.split("\n") if actions._is_pytest_summary(line)), None)
        assert new == (old.group() if old else None), repr(text)


def test_names_of_a_long_uppercase_run_are_found_in_linear_time() -> None:
    """`names('A' * 40000)` took 22.7 s before it was made linear (issue #9)."""
    assert within_limit(names, "A" * 400_000, "names") == set()


def test_a_megabyte_of_spaces_is_counted_and_excerpted_not_a_tokenizer_panic() -> None:
    """tiktoken panics (a BaseException) on about a megabyte of spaces: workset encodes long runs in pieces."""
    from proxy.tokens import Excerpter, TokenCounter

    counter = TokenCounter()
    text = "start" + " " * 1_000_000 + "end"
    assert 0 < counter.text(text) < 20_000
    head, tail, elided = Excerpter(counter)(text, 50, 20)
    assert head.startswith("start") and tail.endswith("end") and elided > 0
    assert counter.text("a normal sentence,  with two spaces") == len(counter.encoding.encode_ordinary(
        "a normal sentence,  with two spaces"))
