"""Hostile texts cannot stall extraction: every entry point that reads a message's text finishes on each
adversarial text of 100 KB (a few at 1 MB) within a generous bound, never raises, and gives bounded output.

The bound (2 s per call) only catches super-linear work on a slow, busy machine: a quadratic pattern takes
minutes at these sizes. The real target (50 ms per call at 1 MB, issue #9) is measured by `make bench`
(bench/adversarial.py, which defines the texts and entry points used here).
"""

from __future__ import annotations

import json
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
from proxy.tokens import Excerpter, TokenCounter  # noqa: E402

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


# ---- token counts and recall of huge texts ------------------------------------------------------------------

def _mixed_text(size: int) -> str:
    """Prose, code, JSON, a log and Chinese in turns: a text whose parts differ, the hard case for an estimate."""
    parts = [
        "The rate limit is 100 requests per minute, so the batch job waits between pages of results.\n",
        "def parity(rate: float) -> float:\n    return round(rate * 7.1235, 4)  # central parity\n",
        json.dumps({"id": "ZFA04Y", "status": "pending_approval", "amounts": [1, 2.5, 300]}) + "\n",
        "2024-05-14 10:44:24,120 INFO worker-3 fetched 512 rows in 0.42s\n",
        "供应商C最新报价：每箱30件，单价14.40美元，已确认。\n",
        "a3f9c0e1" * 12 + "\n",
    ]
    rng = random.Random(11)
    out: list[str] = []
    total = 0
    while total < size:
        part = rng.choice(parts) * rng.randint(1, 40)
        out.append(part)
        total += len(part)
    return "".join(out)[:size]


def test_a_long_text_is_estimated_on_the_high_side_and_a_short_one_counted_exactly() -> None:
    counter = TokenCounter()
    short = _mixed_text(counter.exact_chars)
    assert counter.text(short) == len(counter.encoding.encode_ordinary(short))
    for size in (100_000, 1_000_000):
        text = _mixed_text(size)
        exact = len(counter.encode(text))
        assert exact <= counter.text(text) <= exact * 1.2, size


def test_a_huge_text_is_excerpted_from_its_ends() -> None:
    counter = TokenCounter()
    text = "START " + _mixed_text(1_000_000) + " END"
    head, tail, elided = Excerpter(counter)(text, 300, 100)
    assert text.startswith(head) and text.endswith(tail) and head.startswith("START") and tail.endswith("END")
    assert elided >= len(counter.encode(text)) - 400
    first, dropped = counter.head(text, 50)
    assert text.startswith(first) and dropped > 0


def test_every_line_of_a_megabyte_can_be_recalled() -> None:
    from proxy import passages

    lines = _mixed_text(1_000_000).split("\n")
    lines[len(lines) // 2] = "the checksum is 7f3a91c2"
    lines[100] = "x" * 30_000  # a line longer than a page
    text = "\n".join(lines)
    laid = passages.layout(text, 2_000, COUNTER)
    assert laid.lines == len(lines) and laid.pages[0][0] == 0 and laid.pages[-1][1] == len(laid.pieces)
    assert [start for start, _ in laid.pages][1:] == [end for _, end in laid.pages][:-1]
    assert all(sum(piece.tokens for piece in laid.pieces[a:b]) <= 2_000 for a, b in laid.pages[:50])
    long_line = [piece for piece in passages.in_range(laid.pieces, 101, 101, 10**9)[0]]
    assert len(long_line) > 1 and "".join(piece.text for piece in long_line) == lines[100]
    ranked, _ = passages.matching(laid.pieces, passages.query_words("checksum 7f3a91c2"))
    assert [laid.pieces[index].line for index in ranked] == [len(lines) // 2 + 1]
    shown, _ = passages.in_range(laid.pieces, 5_000, 5_002, 10**9)
    assert [(piece.line, piece.text) for piece in shown] == [(n, lines[n - 1]) for n in range(5_000, 5_003)]
