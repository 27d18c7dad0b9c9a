"""The load suite (bench/load.py) at a size CI affords: concurrent sessions through a real `workset serve`, each
checked at the provider for other conversations' markers; conversations that share their start, attacking each
other through recall and retrieval; kill -9 under load. `make soak` runs the same code at full size, with timing
targets; here only what must hold on any machine is asserted."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.load import Options, Suite, run_isolation, run_kills, run_load  # noqa: E402

pytestmark = pytest.mark.e2e

CI = Options(sessions=8, turns=6, kills=1, provider_ms=5, think_ms=20, isolation_conversations=20, isolation_turns=10,
             no_key_conversations=2, long_sessions=1, long_messages=60, kill_after_s=1.5, request_timeout_s=30,
             load_budget=3000)  # six turns: a small budget, so that the load run compacts too


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    with Suite(Path(tmp_path_factory.mktemp("load")), CI.provider_ms, CI.load_budget, start_timeout_s=60) as running:
        yield running


def test_concurrent_sessions_are_answered_and_see_only_their_own_markers(suite: Suite) -> None:
    result = asyncio.run(run_load(suite, CI))
    assert result.failures() == []
    assert result.many.requests == CI.sessions * CI.turns and result.single.requests == CI.turns
    assert suite.workset_errors() == []


def test_conversations_sharing_their_start_get_their_own_sessions_and_never_read_each_other(suite: Suite) -> None:
    result = asyncio.run(run_isolation(suite, CI))
    assert result.failures() == []
    everyone = CI.isolation_conversations + CI.no_key_conversations
    # every model asked recall for another conversation's ref and account, and for its own (found: the control)
    assert result.recall_answers["foreign_ref"] == result.recall_answers["foreign_query"] == everyone
    assert result.own_recall_hits >= everyone
    assert result.session_ids == CI.isolation_conversations
    assert suite.workset_errors() == []


def test_kill_9_under_load_leaves_an_intact_store_and_every_session_continues(suite: Suite) -> None:
    result = asyncio.run(run_kills(suite, CI))
    assert result.failures() == []
    kill = result.kills[0]
    assert kill.integrity == "ok" and kill.continued == CI.sessions and result.history_kept == CI.sessions
    assert kill.answered_requests > 0 and kill.messages_answered > 0
    assert len(kill.cold) == CI.long_sessions and kill.cold[0].messages >= CI.long_messages
    assert suite.workset_errors() == []
