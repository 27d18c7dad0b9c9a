"""Task state: the key-facts ledger folded along one conversation path, and its rendering.

Pure: built from Extraction records in path order; the store keeps every record, the state keeps the latest value
of each (kind, key).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from .policy import StateRules
from .records import (
    APPROVAL,
    CONSTRAINT,
    DECISION,
    PLAN,
    VERIFICATION,
    Action,
    Extraction,
    Fact,
)

# Kinds rendered in their own sections; the rest are "key facts".
SECTION_KINDS = frozenset({CONSTRAINT, PLAN, DECISION, APPROVAL, VERIFICATION})


@dataclass
class TaskState:
    """Latest fact per (kind, key), and every action, along one path."""

    facts: dict[tuple[str, str], Fact] = field(default_factory=dict)
    actions: list[Action] = field(default_factory=list)
    version: int = 0  # bumped on every change, so renderings can be cached

    def apply(self, extraction: Extraction) -> None:
        if not extraction.facts and not extraction.actions:
            return
        for fact in extraction.facts:
            self.apply_fact(fact)
        self.actions.extend(extraction.actions)
        self.version += 1

    def apply_fact(self, fact: Fact) -> None:
        # re-inserting moves the key to the end, so dict order is "last updated"
        self.facts.pop((fact.kind, fact.key), None)
        self.facts[(fact.kind, fact.key)] = fact
        self.version += 1

    def of_kind(self, kind: str) -> list[Fact]:
        return [fact for fact in self.facts.values() if fact.kind == kind]

    @property
    def constraints(self) -> list[Fact]:
        return self.of_kind(CONSTRAINT)

    @property
    def pending(self) -> list[Fact]:
        return [fact for fact in self.of_kind(PLAN) if fact.value != "completed"]


def render_state(state: TaskState, goal: str, rules: StateRules, max_tokens: int | None = None,
                 count: Callable[[str], int] | None = None, brief: bool = False) -> str:
    """The task-state text. Deterministic, and free of clocks and counters so it only changes when facts do.

    Constraints, pending items and approvals are always complete. The elastic sections (key facts, completed
    items, decisions, failed approaches) shrink, oldest first, until the text fits `max_tokens`. `brief` keeps
    only what must never be forgotten (for the tail reminder when the full state sits at the head)."""
    for scale in (1.0, 0.5, 0.25, 0.1, 0.0):
        text = _render(state, goal, rules, 0.0 if brief else scale)
        if max_tokens is None or count is None or count(text) <= max_tokens:
            return text
    return text


def _render(state: TaskState, goal: str, rules: StateRules, scale: float) -> str:
    def take(items: list[Any], limit: int) -> list[Any]:
        keep = int(limit * scale)
        return items[-keep:] if keep else []

    lines = ["## Task state (kept by workset from this conversation; values are exact, [ref:ID] can be recalled)"]
    if goal:
        lines.append(f"Goal: {_one_line(goal, 300)}")
    constraints = state.constraints
    if constraints:
        lines.append("Constraints (always apply):")
        lines.extend(f"- {_flat(f.value)}" for f in constraints)  # never cut: constraints are never compressed
    plan = state.of_kind(PLAN)
    pending = [f for f in plan if f.value != "completed"]
    if pending:
        lines.append("Pending:")
        lines.extend(f"- [ ] {_flat(f.key)}" for f in pending)
    completed = take([f for f in plan if f.value == "completed"], rules.max_completed)
    if completed:
        lines.append("Completed:")
        lines.extend(f"- [x] {_one_line(f.key, 200)}" for f in completed)
    decisions = take(state.of_kind(DECISION), rules.max_decisions)
    if decisions:
        lines.append("Decisions:")
        lines.extend(f"- {_one_line(f.value, 300)}" for f in decisions)
    approvals = state.of_kind(APPROVAL)
    if approvals:
        lines.append("Approvals:")
        lines.extend(f"- {_one_line(f.key, 160)}: {f.value}{_ref(f)}" for f in approvals)
    checks = state.of_kind(VERIFICATION)
    if checks:
        lines.append("Verification:")
        lines.extend(f"- {_one_line(f.key, 160)}: {f.value}{_ref(f)}" for f in checks)
    facts = take([f for f in state.facts.values() if f.kind not in SECTION_KINDS], rules.max_facts)
    if facts:
        lines.append("Key facts (newest last):")
        for fact in facts:
            value = _one_line(fact.value, rules.value_chars)
            shown = value if fact.key.lower() in value.lower() else f"{fact.key} = {value}"
            lines.append(f"- {shown}{_ref(fact)}")
    failures = _failed_approaches(state.actions, int(rules.max_failures * scale))
    if failures:
        lines.append("Failed approaches (do not repeat as is):")
        for action in failures:
            lines.append(f"- {action.tool} {_one_line(action.arguments, 160)} -> {_one_line(action.gist, 200)}{_ref(action)}")
    return "\n".join(lines)


def state_snapshot(state: TaskState, goal: str) -> dict[str, object]:
    """The checkpoint's view of the state: everything needed to resume, as plain data."""
    plan = state.of_kind(PLAN)

    def rows(facts: list[Fact]) -> list[dict[str, object]]:
        return [{"key": f.key, "value": f.value, "turn": f.turn, "ref": f.evidence_ref} for f in facts]

    key_facts = [f for f in state.facts.values() if f.kind not in SECTION_KINDS]
    return {
        "goal": _one_line(goal, 300),
        "constraints": [f.value for f in state.constraints],
        "pending": [f.key for f in plan if f.value != "completed"],
        "completed": [f.key for f in plan if f.value == "completed"],
        "decisions": [f.value for f in state.of_kind(DECISION)],
        "approvals": rows(state.of_kind(APPROVAL)),
        "verification": rows(state.of_kind(VERIFICATION)),
        "facts": [{"kind": f.kind, **row} for f, row in zip(key_facts, rows(key_facts))],
        "failed": [{"tool": a.tool, "arguments": a.arguments, "gist": a.gist, "ref": a.evidence_ref}
                   for a in _failed_approaches(state.actions, 50)],
        "actions": len(state.actions),
    }


def _failed_approaches(actions: list[Action], limit: int) -> list[Action]:
    """Newest failures first in selection, shown oldest first; one per distinct call."""
    if not limit:
        return []
    seen: set[tuple[str, str]] = set()
    chosen: list[Action] = []
    for action in reversed(actions):
        if action.outcome != "error" or (action.tool, action.arguments) in seen:
            continue
        seen.add((action.tool, action.arguments))
        chosen.append(action)
        if len(chosen) == limit:
            break
    return chosen[::-1]


def _ref(item: Fact | Action) -> str:
    return f" [ref:{item.evidence_ref}]" if item.evidence_ref else ""


def _flat(text: str) -> str:
    return " ".join(text.split())


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
