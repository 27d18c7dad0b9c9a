"""Constraints: rule-like sentences from user turns ("you must ...", "do not ...", "不要 ...")."""

from __future__ import annotations

import re

from .facts import head_and_tail
from .text import cut, normalize, sentences, trim, units

MAX_CONSTRAINTS = 30  # per message: a pasted spec must not flood the ledger
MAX_CONSTRAINT_CHARS = 300  # a longer "sentence" is a paragraph that failed to split; keep its head
MIN_CONSTRAINT_CHARS = 6
MAX_CONSTRAINT_HEAD_CHARS = 16_000  # a longer user message is mostly a paste: rules are read from its start
MAX_CONSTRAINT_TAIL_CHARS = 8_000  # and from its end (SWE tasks put their instructions after the issue text)

_APOS = "['’]"
# Strong markers state a rule on their own.
_STRONG = re.compile(
    rf"\b(?:must(?:n{_APOS}t)?|never|cannot|can{_APOS}t|can not|don{_APOS}t|do not|should not|shouldn{_APOS}t|"
    rf"no more than|make sure|avoid(?:s|ing)?|not allowed|forbidden|prohibited)\b"
    r"|必须|不要|不能|务必|禁止|不得"
    # 别 as "don't", not inside 特别 / 区别 / 别人 and friends.
    r"|(?<![特区类级分识告个差派性])别(?![人的处])",
    re.I,
)
# Weak markers make a rule only in a statement: "only", "before 11am", "at least 2".
_WEAK = re.compile(r"\b(?:only|always|before|until|at most|at least)\b|之前|只", re.I)
# "I don't know / remember / have ...", "I'll make sure to ..." describe the speaker; they are not rules.
_NOT_A_RULE = re.compile(
    rf"\b(?:(?:don{_APOS}t|do not|didn{_APOS}t|did not|can{_APOS}t|cannot)\s+(?:actually\s+|really\s+|even\s+)?"
    r"(?:know|remember|recall|have|think|see|seem|understand|mind|care|believe|recognize|find|tell|wait|thank)"
    rf"|(?:i{_APOS}ll|i will|let me|we{_APOS}ll|we will) make sure)\b",
    re.I,
)
# Weak markers in phrases that describe rather than restrict: "same as before", "the only passenger".
_WEAK_NOT_A_RULE = re.compile(r"\b(?:as|than|ever) before\b|\bthe only\b", re.I)
# Substrings of every marker above: a fast test before the regexes.
_MARKER_WORDS = (
    "must", "never", "not", "n't", "n’t", "no more", "make sure", "avoid", "forbidden", "prohibited", "only",
    "always", "before", "until", "at most", "at least", "必须", "不要", "不能", "务必", "禁止", "不得", "别", "之前", "只",
)  # fmt: skip
_QUESTION_END = re.compile(r"[?？]\s*[\"')\]]*$")


def _has_marker(text: str) -> bool:
    """A cheap superset test of the marker patterns (substring tests, no regex scan)."""
    lowered = text.lower()
    return any(word in lowered for word in _MARKER_WORDS)


def constraint_strength(sentence: str) -> int:
    """2 for a strong rule, 1 for a weak one, 0 for no rule at all."""
    if _QUESTION_END.search(sentence):
        return 0  # a question asks, it does not constrain
    strong = _STRONG.search(sentence)
    if strong and not _only_descriptive(sentence):
        return 2
    weak = len(_WEAK.findall(sentence))
    return 1 if weak > len(_WEAK_NOT_A_RULE.findall(sentence)) else 0


def _only_descriptive(sentence: str) -> bool:
    """True when every strong marker is part of "I don't know"-style self description."""
    strong_count = len(_STRONG.findall(sentence))
    return strong_count <= len(_NOT_A_RULE.findall(sentence))


def constraints(text: str, limit: int = MAX_CONSTRAINTS) -> list[tuple[str, str]]:
    """(key, value) pairs for the rule-like sentences of a user message, in text order.

    Past `limit`, strong rules are kept before weak ones (then earlier before later), so a long task
    statement keeps its "must"/"do not" instructions rather than its first mentions of "only".
    """
    found: list[tuple[int, int, str, str]] = []  # (strength, position, key, value)
    seen: set[str] = set()
    for unit in units(head_and_tail(text, MAX_CONSTRAINT_HEAD_CHARS, MAX_CONSTRAINT_TAIL_CHARS)):
        if not _has_marker(unit):
            continue  # most units hold no rule: skip splitting them
        for sentence in sentences(unit):
            if not _has_marker(sentence):
                continue
            value = cut(trim(sentence), MAX_CONSTRAINT_CHARS)  # as written: it must be found again when forwarded
            if len(value) < MIN_CONSTRAINT_CHARS:
                continue
            strength = constraint_strength(value)
            key = normalize(value)
            if strength and key and key not in seen:
                seen.add(key)
                found.append((strength, len(found), key, value))
    if len(found) > limit:
        found = sorted(sorted(found, key=lambda f: (-f[0], f[1]))[:limit], key=lambda f: f[1])
    return [(key, value) for _, _, key, value in found]
