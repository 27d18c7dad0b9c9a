"""The honesty rules of probe checks, as a function a test runs over every scenario.

A probe tests something only if the item it asks for is old when asked: stated in the first half of the run, not
in the system prompt or the task (always forwarded), not in the newest 8 messages before the turn, and not in the
latest user turn (forwarded verbatim). It is specific only if it matches nowhere but where the item is stated.
"""

from __future__ import annotations

from ..metrics import PROBE_KINDS, probe_checks, readable_text
from .builder import Scenario

RECENT_MESSAGES = 8  # the newest messages before a probe turn, where its item must not occur


def probe_problems(scenario: Scenario) -> list[str]:
    """Every broken rule, one line each (an empty list when the scenario is sound)."""
    trace = scenario.trace
    messages = trace["messages"]
    count = len(messages)
    texts = [readable_text(message) for message in messages]
    problems: list[str] = []
    try:
        checks = probe_checks(trace)
    except ValueError as error:
        return [str(error)]
    for check in checks:
        where = f"{trace['id']} {check.id} (turn {check.turn})"
        turn = check.turn
        hits = [i for i in range(turn) if check.kept_in([texts[i]])]
        origins = set(scenario.origins.get(check.id, ()))
        if check.kind not in PROBE_KINDS:
            problems.append(f"{where}: unknown kind {check.kind!r}")
        if not hits:
            problems.append(f"{where}: matches nothing before its turn")
            continue
        if any(i < 2 for i in hits):
            problems.append(f"{where}: matches the system prompt or the task")
        if any(i >= turn - RECENT_MESSAGES for i in hits):
            problems.append(f"{where}: matches within the newest {RECENT_MESSAGES} messages: "
                            f"{[i for i in hits if i >= turn - RECENT_MESSAGES]}")
        stray = sorted(set(hits) - origins)
        if stray:
            problems.append(f"{where}: matches where the item is not stated (noise?): messages {stray}")
        if 3 * turn < 2 * count:
            problems.append(f"{where}: not in the last third of the run ({count} messages)")
        if 2 * min(hits) >= count:
            problems.append(f"{where}: the item is first stated at {min(hits)}, not in the first half")
        latest_user = max((i for i in range(turn) if messages[i].get("role") == "user"), default=-1)
        if latest_user in hits or latest_user - 1 in hits:
            problems.append(f"{where}: the latest user turn ({latest_user}) or the reply it answers holds the item")
    return problems
