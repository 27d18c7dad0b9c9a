"""Replay agent traces turn by turn through each strategy and measure what was forwarded.

For each trace and each assistant message at index t >= 2 (the real agent's next action), the input is
messages[:t] with the trace's tools, in one session per trace and strategy, in order, exactly as the proxy
would receive them. A trace may carry `observations` (indices of user messages that are command output, see
textagent.py) and `probes.checks` (see metrics.ProbeCheck).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..ingest import extract_at
from ..messages import message_text
from ..records import CONSTRAINT, Message
from ..tokens import TokenCounter
from ..workingset import STATE_PREFIX, WORKSET_TAG, Pairing, first_user
from .metrics import (
    ProbeCheck,
    action_text,
    TextCounts,
    cached_cost,
    flat,
    identifiers,
    leading_identical,
    message_texts,
    part_tokens,
    probe_checks,
    probe_turns,
    probe_values,
    readable_text,
    text_counts,
    workset_sections,
)
from .strategies import Strategy
from .swe import looks_like_coding, swe_check

SWE_REQUESTS = 3  # the SWE checks look at each coding run's last requests, where the agent writes and submits


@dataclass
class Row:
    """One strategy's figures over all traces (the --json field names)."""

    policy: str
    traces: int = 0
    turns: int = 0
    budget: int = 0
    cum_tokens: int = 0
    reduction: float = 0.0
    peak_tokens: float = 0.0
    cached_cost: float = 0.0
    cached_cost_vs_none: float = 1.0
    prefix_reuse: float = 0.0
    next_step_recall: float | None = None
    probe_recall: float | None = None
    constraint_recall: float | None = None
    pairing_violations: int = 0
    over_budget: int = 0
    compactions: int = 0
    ms_per_turn: float = 0.0
    tokens_vs_none: float | None = None  # cum_tokens as a share of forwarding everything
    probes_kept: int = 0  # probe checks (trace probes.checks) kept, of probes_checked
    probes_checked: int = 0
    probes_by_kind: dict[str, list[int]] = field(default_factory=dict)  # kind -> [kept, checked]
    probes_missed: list[dict[str, str]] = field(default_factory=list)  # {trace, check, kind, why}
    probe_turn_tokens: int = 0  # tokens forwarded at the turns that carry probe checks
    probe_turn_tokens_vs_none: float | None = None
    # tokens of workset's state, digest, names index... over the requests that carry each: {mean, max, requests}
    parts: dict[str, dict[str, float]] = field(default_factory=dict)
    # workset's own text, over the requests that carry some: lines that copy raw output by its form (dump rows)
    workset_requests: int = 0
    dump_rows_mean: float | None = None
    dump_rows_max: int = 0
    dump_kinds: dict[str, int] = field(default_factory=dict)  # kind -> rows, summed over requests
    state_lines: int = 0  # the task state's content lines, summed over requests
    state_dump_share: float | None = None  # of those, dump rows
    state_task_copy_share: float | None = None  # of those, copies of the task message (forwarded anyway)
    # coding runs, at their last SWE_REQUESTS requests (see swe.py)
    swe: dict[str, float | int | None] = field(default_factory=dict)
    # per trace: probes kept and checked, the state's tokens and dump rows at its last request
    per_trace: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class _Tally:
    """Running sums for one strategy."""

    traces: int = 0
    turns: int = 0
    tokens: int = 0
    cost: float = 0.0
    peaks: list[int] = field(default_factory=list)
    reuse: list[float] = field(default_factory=list)
    recall: list[float] = field(default_factory=list)
    probes: list[int] = field(default_factory=lambda: [0, 0])
    constraints: list[int] = field(default_factory=lambda: [0, 0])
    checks: dict[str, list[int]] = field(default_factory=dict)  # kind -> [kept, checked]
    missed: list[dict[str, str]] = field(default_factory=list)
    probe_tokens: int = 0
    parts: dict[str, list[int]] = field(default_factory=dict)  # part -> [sum, requests, max]
    workset_requests: int = 0
    dump_rows: list[int] = field(default_factory=lambda: [0, 0])  # [sum, max]
    dump_kinds: dict[str, int] = field(default_factory=dict)
    state: list[int] = field(default_factory=lambda: [0, 0, 0])  # [lines, dump rows, task copies]
    swe: dict[str, int] = field(default_factory=dict)  # see _SweTally
    per_trace: list[dict[str, Any]] = field(default_factory=list)
    pairing: int = 0
    over: int = 0
    compactions: int = 0
    seconds: float = 0.0

    def probes_total(self) -> tuple[int, int]:
        """Probe checks kept and checked so far, over every kind."""
        return sum(kept for kept, _ in self.checks.values()), sum(checked for _, checked in self.checks.values())


@dataclass
class TurnRecord:
    """How much one strategy forwarded at one turn (for the plot)."""

    trace: str
    turn: int
    tokens: int


@dataclass
class Evaluation:
    rows: list[Row]
    records: dict[str, list[TurnRecord]]  # strategy -> its turns, in replay order


class MessageTokens:
    """Tokens per message object: trace messages and built messages recur every turn, so count them once."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self._by_id: dict[int, tuple[Message, int]] = {}

    def __call__(self, message: Message) -> int:
        held = self._by_id.get(id(message))
        if held is not None and held[0] is message:
            return held[1]
        tokens = self.counter.message(message, generated=True)
        if len(self._by_id) > 200_000:
            self._by_id.clear()
        self._by_id[id(message)] = (message, tokens)
        return tokens


def agent_turns(messages: Sequence[Message]) -> list[int]:
    """Indexes t >= 2 where the trace has the agent's next action (an assistant message)."""
    return [t for t in range(2, len(messages)) if messages[t].get("role") == "assistant"]


def evaluate(traces: Sequence[dict[str, Any]], strategies: Sequence[Strategy], counter: TokenCounter,
             cache_read_price: float = 0.1, progress: Callable[[int], None] = lambda done: None,
             tokens_of: Callable[[Message], int] | None = None) -> Evaluation:
    tokens_of = tokens_of or MessageTokens(counter)
    tallies = {s.name: _Tally() for s in strategies}
    records: dict[str, list[TurnRecord]] = {s.name: [] for s in strategies}
    for trace in traces:
        messages, tools = trace["messages"], trace.get("tools") or None
        tools_tokens = counter.tools(tools)
        turns = agent_turns(messages)
        expected = _TraceExpectations(trace)
        previous: dict[str, list[Message] | None] = {s.name: None for s in strategies}
        peaks = {s.name: 0 for s in strategies}
        last = {s.name: TraceLast() for s in strategies}
        kept_before = {s.name: list(tallies[s.name].probes_total()) for s in strategies}
        counted = _TextCounter(message_text(messages[expected.task]) if expected.task is not None else "")
        last_turns = set(turns[-SWE_REQUESTS:])
        swe_turns = last_turns if looks_like_coding(messages) else set()
        for t in turns:
            request = messages[:t]
            checks = expected.at(t)
            for strategy in strategies:
                tally = tallies[strategy.name]
                started = time.perf_counter()
                forwarded = strategy.forward(trace["id"], request, tools)
                tally.seconds += time.perf_counter() - started
                sent = forwarded.messages
                sizes = [tokens_of(m) for m in sent]
                total = sum(sizes) + tools_tokens
                before = previous[strategy.name]
                reused = leading_identical(before, sent)
                tally.turns += 1
                tally.tokens += total
                tally.cost += cached_cost(sizes, tools_tokens, reused, before is not None, cache_read_price)
                peaks[strategy.name] = max(peaks[strategy.name], total)
                if before is not None:
                    tally.reuse.append(reused / len(before) if before else 1.0)
                    if not _extends(before, sent):
                        tally.compactions += 1
                tally.over += total > (forwarded.budget or strategy.budget)
                tally.pairing += not Pairing().feed(sent).complete
                checks.score(sent, tally)
                tally.probe_tokens += total if checks.probe_checks else 0
                parts = part_tokens(sent, counter.cached_text)
                for part, tokens in parts.items():
                    held = tally.parts.setdefault(part, [0, 0, 0])
                    held[0], held[1], held[2] = held[0] + tokens, held[1] + 1, max(held[2], tokens)
                dump_rows = counted.add(sent, tally)
                held = last[strategy.name]
                own = sum(tokens for message, tokens in zip(sent, sizes)
                          if message_text(message).startswith(WORKSET_TAG)) if t in last_turns else 0
                last[strategy.name] = TraceLast(parts.get("state", 0), dump_rows, max(held.workset_tokens, own),
                                                held.tokens + total)
                if t in swe_turns:
                    _add_swe(tally, request, sent)
                previous[strategy.name] = sent
                records[strategy.name].append(TurnRecord(trace["id"], t, total))
            progress(1)
        for strategy in strategies:
            tally = tallies[strategy.name]
            tally.traces += 1
            tally.peaks.append(peaks[strategy.name])
            kept, checked = (now - before for now, before in zip(tally.probes_total(), kept_before[strategy.name]))
            tally.per_trace.append({"trace": str(trace["id"]), "probes_kept": kept, "probes_checked": checked,
                                    "state_tokens": last[strategy.name].state_tokens,
                                    "dump_rows": last[strategy.name].dump_rows, "coding": bool(swe_turns),
                                    "workset_tokens_last": last[strategy.name].workset_tokens,
                                    "tokens": last[strategy.name].tokens})
    rows = [_row(strategy, tallies[strategy.name]) for strategy in strategies]
    reference = next((row for row in rows if row.policy == "none"), None)
    for row in rows:
        if reference is not None and reference.cum_tokens:
            row.reduction = round(1 - row.cum_tokens / reference.cum_tokens, 4)
            row.tokens_vs_none = round(row.cum_tokens / reference.cum_tokens, 4)
            row.cached_cost_vs_none = round(row.cached_cost / reference.cached_cost, 4)
        if reference is not None and reference.probe_turn_tokens:
            row.probe_turn_tokens_vs_none = round(row.probe_turn_tokens / reference.probe_turn_tokens, 4)
    return Evaluation(rows, records)


def _extends(before: list[Message], after: list[Message]) -> bool:
    """Whether `after` keeps every message of `before` in place (workset's trailing live state aside)."""
    if leading_identical(before, after) == len(before):
        return True
    live_state = bool(before) and message_text(before[-1]).startswith(STATE_PREFIX)
    return live_state and leading_identical(before[:-1], after) == len(before) - 1


@dataclass(frozen=True)
class TraceLast:
    """A strategy's figures at the latest request of a trace."""

    state_tokens: int = 0
    dump_rows: int = 0
    workset_tokens: int = 0  # the most workset's own text took at one of the trace's last SWE_REQUESTS requests
    tokens: int = 0  # forwarded over all the trace's turns


class _TextCounter:
    """TextCounts of workset's messages in one trace (the task is the trace's), counted once per message text:
    the compacted message recurs unchanged until the next compaction."""

    def __init__(self, task_text: str) -> None:
        self.task_text = task_text
        self._by_text: dict[str, TextCounts] = {}

    def counts(self, message: Message) -> TextCounts:
        text = message_text(message)
        held = self._by_text.get(text)
        if held is None:
            held = self._by_text[text] = text_counts(workset_sections([message]), self.task_text)
        return held

    def add(self, sent: Sequence[Message], tally: _Tally) -> int:
        """Adds one request's counts to the tally; returns its dump rows."""
        mine = [self.counts(m) for m in sent if message_text(m).startswith(WORKSET_TAG)]
        if not mine:
            return 0
        rows = sum(c.dump_rows for c in mine)
        tally.workset_requests += 1
        tally.dump_rows[0] += rows
        tally.dump_rows[1] = max(tally.dump_rows[1], rows)
        for counts in mine:
            for kind, number in counts.kinds:
                tally.dump_kinds[kind] = tally.dump_kinds.get(kind, 0) + number
            tally.state[0] += counts.state_lines
            tally.state[1] += counts.state_dump_rows
            tally.state[2] += counts.state_task_copies
        return rows


SWE_KEYS = ("requests", "stated", "files", "files_named", "repo_files", "repo_files_named", "decisions",
            "decisions_kept", "passes", "false_passes")


def _add_swe(tally: _Tally, request: Sequence[Message], sent: Sequence[Message]) -> None:
    """One of a coding run's last requests: files changed (counted where the request carries a task state: with
    none, nothing was removed), the decision's key sentence, and the state's `passed` lines."""
    state_lines = [line for part, line in workset_sections(sent) if part == "state"]
    check = swe_check(request, sent, state_lines)
    swe = tally.swe
    for key in SWE_KEYS:
        swe.setdefault(key, 0)
    swe["requests"] += 1
    if state_lines:
        swe["stated"] += 1
        swe["files"] += check.files
        swe["files_named"] += check.files_named
        swe["repo_files"] += check.repo_files
        swe["repo_files_named"] += check.repo_files_named
    if check.decision is not None:
        swe["decisions"] += 1
        swe["decisions_kept"] += check.decision
    swe["passes"] += check.passes
    swe["false_passes"] += check.false_passes


def swe_figures(counts: dict[str, int]) -> dict[str, float | int | None]:
    """The SWE checks' figures from their counts: shares where they have a denominator."""
    if not counts:
        return {}

    def share(part: str, whole: str) -> float | None:
        return round(counts[part] / counts[whole], 4) if counts[whole] else None

    return {**counts, "files_in_state": share("files_named", "files"),
            "repo_files_in_state": share("repo_files_named", "repo_files"),
            "decision_kept": share("decisions_kept", "decisions"), "false_pass_share": share("false_passes", "passes")}


def _row(strategy: Strategy, tally: _Tally) -> Row:
    def mean(values: list[float]) -> float | None:
        return round(sum(values) / len(values), 4) if values else None

    def share(pair: list[int]) -> float | None:
        return round(pair[0] / pair[1], 4) if pair[1] else None

    return Row(
        policy=strategy.name, traces=tally.traces, turns=tally.turns, budget=strategy.budget,
        cum_tokens=tally.tokens, peak_tokens=statistics.median(tally.peaks) if tally.peaks else 0,
        cached_cost=round(tally.cost, 1), prefix_reuse=mean(tally.reuse) or 0.0, next_step_recall=mean(tally.recall),
        probe_recall=share(tally.probes), constraint_recall=share(tally.constraints),
        pairing_violations=tally.pairing, over_budget=tally.over, compactions=tally.compactions,
        ms_per_turn=round(tally.seconds * 1000 / tally.turns, 3) if tally.turns else 0.0,
        probes_kept=sum(kept for kept, _ in tally.checks.values()),
        probes_checked=sum(checked for _, checked in tally.checks.values()),
        probes_by_kind={kind: list(pair) for kind, pair in sorted(tally.checks.items())},
        probes_missed=tally.missed, probe_turn_tokens=tally.probe_tokens,
        parts={part: {"mean": round(total / requests, 1), "max": peak, "requests": requests}
               for part, (total, requests, peak) in sorted(tally.parts.items())},
        workset_requests=tally.workset_requests,
        dump_rows_mean=round(tally.dump_rows[0] / tally.workset_requests, 1) if tally.workset_requests else None,
        dump_rows_max=tally.dump_rows[1], dump_kinds=dict(sorted(tally.dump_kinds.items())),
        state_lines=tally.state[0], state_dump_share=share([tally.state[1], tally.state[0]]),
        state_task_copy_share=share([tally.state[2], tally.state[0]]), swe=swe_figures(tally.swe),
        per_trace=tally.per_trace,
    )


class _TraceExpectations:
    """What must be in view at each turn of one trace, independent of any strategy."""

    def __init__(self, trace: dict[str, Any]) -> None:
        self.trace_id = str(trace["id"])
        self.messages: list[Message] = trace["messages"]
        self.observations = frozenset(trace.get("observations") or ())  # command output, not the user's words
        self.head_text = "\n".join(readable_text(m) for m in self.messages[:2])
        self.history: list[str] = []  # texts of messages[2:t]
        self.seen_upto = 2
        self.constraints: list[str] = []
        self.constraints_upto = 0
        self.task = first_user(self.messages)
        probes = (trace.get("probes") or {}).get("expected_actions") or []
        self.probes = probe_turns(self.messages, probe_values(probes)) if probes else {}
        self.checks: dict[int, list[ProbeCheck]] = {}
        for check in probe_checks(trace):
            self.checks.setdefault(check.turn, []).append(check)

    def at(self, t: int) -> _TurnChecks:
        for index in range(self.seen_upto, t):
            self.history.append(readable_text(self.messages[index]))
        self.seen_upto = max(self.seen_upto, t)
        for index in range(self.constraints_upto, t):
            if self.messages[index].get("role") == "user" and index not in self.observations:
                extraction = extract_at(self.messages, index, "", self.task).extraction
                self.constraints.extend(f.value for f in extraction.facts if f.kind == CONSTRAINT)
        self.constraints_upto = max(self.constraints_upto, t)
        used = identifiers(action_text(self.messages[t]))
        wanted = sorted(item for item in used
                        if item not in self.head_text and any(item in text for text in self.history))
        return _TurnChecks(wanted, list(dict.fromkeys(self.constraints)), self.probes.get(t, []),
                           self.checks.get(t, []), self.trace_id)


@dataclass
class _TurnChecks:
    identifiers: list[str]
    constraints: list[str]
    probes: list[str]
    probe_checks: list[ProbeCheck]
    trace_id: str

    def score(self, sent: list[Message], tally: _Tally) -> None:
        if not (self.identifiers or self.constraints or self.probes or self.probe_checks):
            return
        texts = message_texts(sent)
        text = "\n".join(texts)
        for check in self.probe_checks:
            kept = check.kept_in(texts)
            counts = tally.checks.setdefault(check.kind, [0, 0])
            counts[0] += kept
            counts[1] += 1
            if not kept:
                tally.missed.append({"trace": self.trace_id, "check": check.id, "kind": check.kind, "why": check.why})
        if self.identifiers:
            tally.recall.append(sum(1 for item in self.identifiers if item in text) / len(self.identifiers))
        if self.probes:
            tally.probes[0] += sum(1 for item in self.probes if item in text)
            tally.probes[1] += len(self.probes)
        if self.constraints:
            flat_text: str | None = None
            for constraint in self.constraints:
                if constraint in text:
                    tally.constraints[0] += 1
                    continue
                flat_text = flat_text if flat_text is not None else flat(text)
                tally.constraints[0] += flat(constraint) in flat_text
            tally.constraints[1] += len(self.constraints)
