"""Decision records: every forwarded request's record reads back into exactly what the provider received, each
message of the agent's request accounted for with the rule that decided it; pruned with its session."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from test_inspect import conversation, drive

from proxy.cli import main
from proxy.decisions import as_sent
from proxy.report import ADDED, KEPT, REMOVED, account_changes, session_turns, turn_detail

MASKED = "masked"
from proxy.retention import sweep
from proxy.storage import open_store

pytestmark = pytest.mark.e2e


def forwarded(changes: list[Any]) -> list[Any]:
    """The working set as the record tells it: what was sent for each change, in order (the tool list aside)."""
    return [change.sent for change in changes if change.sent is not None]


def test_every_request_s_record_reads_back_into_what_the_provider_received(start_proxy: Any, fake: Any,
                                                                         tmp_path: Path) -> None:
    policy = tmp_path / "roomy.yaml"  # room enough that old outputs are masked before turns are removed
    policy.write_text("name: roomy\nrecent_turns: 4\nbudget: {max_input_tokens: 5000, trigger_ratio: 0.8, "
                      "target_ratio: 0.75}\ntool_outputs: {max_tokens: 600}\n")
    proxy = start_proxy(policy_by_model={"small-*": str(policy)})
    responses = drive(proxy, range(1, 19))
    session = responses[-1].headers["x-workset-session"]
    received = [request.body for request in fake.chat_requests()]
    proxy.stop()
    store = open_store(proxy.store)
    try:
        turns = session_turns(store, session)
        assert [turn["n"] for turn in turns] == list(range(1, 19))
        assert any(turn["compaction"] for turn in turns), "the small policy should compact this run"
        every: list[Any] = []
        for turn, body in zip(turns, received):
            detail = turn_detail(store, session, turn["n"])
            every.extend(detail.changes)
            assert forwarded(detail.changes) == body["messages"], f"request {turn['n']}"
            agent = [change for change in detail.changes if change.index is not None]
            assert [change.index for change in agent] == list(range(len(conversation(turn["n"]))))
            assert all(change.rule for change in detail.changes)
            if body.get("tools") and any(t["function"]["name"] == "workset_recall" for t in body["tools"]):
                assert detail.changes[-1].into == "recall tool"
        last = turn_detail(store, session, 18)
    finally:
        store.close()
    assert {KEPT, MASKED, REMOVED, ADDED} <= {change.kind for change in every}
    masked = [change for change in every if change.kind == MASKED]
    assert all(f"[ref:{change.ref}]" in change.sent["content"] for change in masked)
    assert all("recent_turns" in change.rule for change in masked)
    removed = [change for change in last.changes if change.kind == REMOVED]
    assert all(change.into in ("digest", "summary", "dropped") and "compaction (budget" in change.rule
               for change in removed)
    assert any(change.into == "compacted turns" for change in last.changes)
    users = [change for change in last.changes if change.role == "user" and change.index is not None]
    assert users and all(change.kind == KEPT for change in users)  # the user's words stay
    assert last.turns == 18 and last.figures["tokens_sent"] < last.figures["tokens_original"]


def test_a_request_forwarded_as_sent_says_so_for_every_message() -> None:
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    decision = as_sent(["a", "b"], "passthrough policy")
    changes = account_changes(messages, ["a", "b"], ["", ""], decision.codes, "", {}, decision.why, None)
    assert [change.kind for change in changes] == [KEPT, KEPT]
    assert all(change.rule == "forwarded as sent: passthrough policy" for change in changes)


def test_records_are_pruned_with_their_session(proxy: Any) -> None:
    responses = drive(proxy, range(1, 8))
    session = responses[-1].headers["x-workset-session"]
    proxy.flush()
    engine = proxy.engine
    store = engine.store
    assert len(session_turns(store, session)) == 7
    # what workset wrote for the requests (the live state of each, under policy state.position both)
    keys = [orjson.loads(row["record"])["state"] for row in store.turns(session, ("record",))]
    assert store.shown_messages(session, keys)
    assert sweep(engine, 1.0, now=time.time() + 3 * 86400) == 1
    assert session_turns(store, session) == []
    assert store.shown_messages(session, keys) == {}


def test_cli_stats_and_show_turn_tell_the_savings_and_one_turn_s_changes(start_proxy: Any, tmp_path: Path,
                                                                        capsys: Any) -> None:
    proxy = start_proxy(prices={"small-*": {"input": 2.0, "cached_input": 0.2, "output": 8.0}})
    session = drive(proxy, range(1, 16))[-1].headers["x-workset-session"]
    proxy.stop()
    store = ["--store", proxy.store]
    assert main(["stats", *store]) == 0
    table = capsys.readouterr().out
    line = next(text for text in table.splitlines() if text.startswith(session))
    assert " 15 " in line and "small-test" in line  # one row per session: its 15 requests
    assert "workset saved $" in table or "workset cost $" in table
    assert main(["stats", *store, "--since", "1m"]) == 0 and session in capsys.readouterr().out
    assert main(["show-turn", session, "15", *store, "--no-color"]) == 0
    shown = capsys.readouterr().out
    assert "request 15 of 15" in shown
    removed = [text for text in shown.splitlines() if text.startswith("-")]
    assert removed, "a compacted turn shows what left the working set"
    assert "why: removed at compaction (budget" in shown and "[ref:" in shown
    assert any(text.startswith("+") and "compacted" in text for text in shown.splitlines())
    assert main(["show-turn", session, "99", *store]) == 2
    assert "no request 99" in capsys.readouterr().err
