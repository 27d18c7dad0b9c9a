"""Token counts workset takes from parts of a text must equal the count of the whole text it forwards."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.tokens import SECTION_BREAK, TokenCounter

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
