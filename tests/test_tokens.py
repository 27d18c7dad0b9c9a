"""Token counts workset takes from parts of a text must equal the count of the whole text it forwards."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.tokens import EXCERPT_CHARS_PER_TOKEN, PIECE_CHARS, SECTION_BREAK, Excerpter, TokenCounter

COUNTERS = {name: TokenCounter(name) for name in ("o200k_base", "cl100k_base")}
# what state lines, digests and summaries end with: words, refs, numbers, CJK, punctuation, spaces, line breaks
TEXTS = st.lists(st.sampled_from([*"ab Z9]).…,-/\\#:\t\n中文", "[ref:1a2b]", "$250", "  ", "\n\n", "word"]),
                 max_size=30).map("".join)


@settings(max_examples=300, deadline=None)
@given(first=TEXTS, rest=st.lists(TEXTS, max_size=4), encoding=st.sampled_from(sorted(COUNTERS)))
def test_sections_after_a_heading_add_up_to_the_whole(first: str, rest: list[str], encoding: str) -> None:
    counter = COUNTERS[encoding]
    texts = [first, *("## " + text for text in rest)]
    assert sum(counter.sections(texts)) == counter.text(SECTION_BREAK.join(texts))


@settings(max_examples=100, deadline=None)
@given(texts=st.lists(TEXTS, min_size=1, max_size=4))
def test_sections_without_headings_are_counted_whole(texts: list[str]) -> None:
    counter = COUNTERS["o200k_base"]
    assert sum(counter.sections(texts)) == counter.text(SECTION_BREAK.join(texts))


def test_a_long_text_is_estimated_once_however_often_it_is_counted() -> None:
    counter = TokenCounter(exact_chars=4096)
    sampled: list[str] = []
    counter._sampled = lambda text: sampled.append(text) or len(text) // 4  # type: ignore[method-assign]
    text = "word " * 10_000
    assert counter.text(text) == counter.text(text) == 12_500
    assert len(sampled) == 1  # counted on arrival, then again when excerpted: read once


def test_an_excerpt_of_long_tokens_reads_a_bounded_head_and_tail_and_counts_what_it_left_out() -> None:
    """A megabyte of one punctuation mark is 64 characters a token: 1,200 tokens of head would be 77 KB read and
    shown. The excerpt keeps fewer tokens instead, and says how many it left out; prose keeps all it may."""
    counter = TokenCounter()
    excerpt = Excerpter(counter)
    dashes = "-" * 1_000_000
    head, tail, elided = excerpt(dashes, 1200, 800)
    assert 0 < len(head) <= 1200 * EXCERPT_CHARS_PER_TOKEN + PIECE_CHARS
    assert 0 < len(tail) <= 800 * EXCERPT_CHARS_PER_TOKEN + PIECE_CHARS
    assert elided == counter.estimate(dashes) - counter.text(head) - counter.text(tail)
    prose = "the order shipped on time " * 40_000
    head, tail, elided = excerpt(prose, 1200, 800)
    assert counter.text(head) == 1200 and counter.text(tail) == 800
    assert elided == counter.estimate(prose) - 2000


def test_the_excerpts_remembered_hold_a_bounded_number_of_characters() -> None:
    """Recent outputs recur every call, so their excerpts are remembered, keyed by the text: bounded by the texts'
    characters, not only their number (1,024 outputs of 32 MB would be held after their conversations are gone)."""
    counter = TokenCounter()
    excerpt = Excerpter(counter, cache_chars=50_000)
    texts = [f"output {number} " + "word " * 6_000 for number in range(2)]  # about 30,000 characters each
    read: list[int] = []
    encode = counter.encode
    counter.encode = lambda text: read.append(len(text)) or encode(text)  # type: ignore[method-assign]
    excerpt(texts[0], 10, 10)
    excerpt(texts[0], 10, 10)
    assert len(read) == 1  # remembered
    excerpt(texts[1], 10, 10)  # 60,000 characters would be held: what was held is let go first
    excerpt(texts[0], 10, 10)
    assert len(read) == 3  # read again
