"""ReadingBudget: the bytes of request bodies still arriving, bounded per caller and in all."""

from __future__ import annotations

import pytest

from proxy.errors import WorksetError
from proxy.reading import ReadingBudget


def test_a_caller_past_its_share_gets_429_and_the_others_go_on() -> None:
    budget = ReadingBudget(total=300, per_caller=100)
    budget.take("a", 80)
    with pytest.raises(WorksetError) as refused:
        budget.take("a", 30)
    assert refused.value.status == 429 and refused.value.headers == {"retry-after": "1"}
    budget.take("b", 100)
    assert budget.held() == 180  # the refused 30 were not counted


def test_past_the_total_every_caller_gets_503_until_bytes_are_given_back() -> None:
    budget = ReadingBudget(total=150, per_caller=100)
    budget.take("a", 100)
    budget.take("b", 50)
    with pytest.raises(WorksetError) as refused:
        budget.take("c", 1)
    assert refused.value.status == 503 and refused.value.code == "too_many_bytes_arriving"
    budget.give_back("a", 100)
    budget.take("c", 100)
    assert budget.held() == 150
    budget.give_back("b", 50)
    budget.give_back("c", 100)
    assert budget.held() == 0
