"""Records of requests forwarded as sent while the store was down wait in memory, by conversation, bounded."""

from __future__ import annotations

from proxy.missed import MissedTurn, MissedTurns


def turn(n: int) -> MissedTurn:
    return MissedTurn(float(n), lambda: {"n": n})


def test_records_wait_by_conversation_oldest_first_and_the_oldest_go_beyond_the_limit() -> None:
    missed = MissedTurns(limit=3)
    for n, root in enumerate(("a", "b", "a", "c")):
        missed.add(root, turn(n))
    assert len(missed) == 3 and missed.dropped == 1  # a's first record went for room
    assert [t.created_at for t in missed.take("a")] == [2.0]
    assert missed.take("a") == [] and [t.row() for t in missed.take("b")] == [{"n": 1}]
    assert len(missed) == 1
