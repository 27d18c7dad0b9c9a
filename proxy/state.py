"""Task state: the key-facts ledger folded along one conversation path, and its rendering.

Pure: built from Extraction records in path order; the store keeps every record, the state keeps the latest value
of each (kind, key).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from collections.abc import Set as AbstractSet
from typing import Callable, Sequence

from .extract.approvals import is_settled
from .extract.changes import changed_files
from .extract.checks import passed_since
from .extract.plans import COMPLETED as DONE, NEXT, STEP
from .extract.text import flat, one_line
from .policy import StateRules
from .records import (
    AMOUNT,
    APPROVAL,
    CANDIDATE,
    CHANGED,
    COLUMN,
    CONSTRAINT,
    DATE,
    IDENTIFIER,
    OUTCOME,
    QUANTITY,
    REASON,
    RULE,
    SAID,
    URL,
    DECISION,
    FAILING,
    FAILURE,
    FIELD,
    FINDING,
    PASSING,
    PLAN,
    RAN,
    SCRIPT,
    VERIFICATION,
    Action,
    Extraction,
    Fact,
)

# Kinds rendered in their own sections (or read by them: scripts, runs and passes); the rest are "key facts".
SECTION_KINDS = frozenset({CONSTRAINT, PLAN, DECISION, APPROVAL, VERIFICATION, FAILURE, FINDING, RULE, OUTCOME,
                           CHANGED, SCRIPT, RAN, FAILING, PASSING, REASON, SAID})


MAX_CANDIDATES = 4_096  # rows of tool outputs remembered for promotion, per path: the oldest are let go first
# Kinds of the entities a message mentions: when the dialogue mentions one a tool output held, that row is a fact.
# Paths and files are names, not facts: a mention of `setup.cfg` does not make its `ls -la` row a fact (the names
# index carries names).
MENTION_KINDS = frozenset({AMOUNT, QUANTITY, DATE, IDENTIFIER, URL, FIELD})


@dataclass
class TaskState:
    """Latest fact per (kind, key), and every action, along one path."""

    facts: dict[tuple[str, str], Fact] = field(default_factory=dict)
    actions: list[Action] = field(default_factory=list)
    version: int = 0  # bumped on every change, so renderings can be cached
    # per object a tool output described: the turn of its latest snapshot and the keys it holds
    snapshots: dict[str, tuple[int, set[str]]] = field(default_factory=dict, repr=False)
    # keys of the plan items now marked as the agent's next step (so naming a new one costs no scan of the facts)
    next_steps: set[tuple[str, str]] = field(default_factory=set, repr=False)
    # rows of tool outputs (entities, `key: value` lines) by the (kind, key) they would have as facts: evidence, not
    # facts, until a later message of the dialogue uses one (then it is promoted, with its output's ref)
    candidates: dict[tuple[str, str], Fact] = field(default_factory=dict, repr=False)
    # facts by kind as of `version`: rendering asks for each kind several times, and a long run holds thousands
    _by_kind: tuple[int, dict[str, list[Fact]]] = field(default=(-1, {}), repr=False, compare=False)

    def apply(self, extraction: Extraction) -> None:
        if not extraction.facts and not extraction.actions:
            return
        for fact in extraction.facts:
            self.apply_fact(fact)
        self.actions.extend(extraction.actions)
        self.version += 1

    def apply_fact(self, fact: Fact) -> None:
        if fact.kind == CANDIDATE:
            self._remember(fact)
            return
        key = fact_key(fact)
        if fact.kind == REASON:
            if key in self.facts:
                return  # why a file was changed is said at its first change
            if not fact.value:  # the call's message said nothing: what the agent said last
                said = self.facts.get((SAID, "latest"))
                if said is None:
                    return
                fact = replace(fact, value=said.value)
        if fact.source in ("assistant", "user") and fact.kind in MENTION_KINDS:
            held = self.facts.get(key)
            if held is not None and held.source == "tool":
                return  # what the system knew stays, with its ref; the mention adds nothing
            candidate = self.candidates.get(key)
            if candidate is not None and candidate.turn < fact.turn:
                fact = candidate  # the dialogue singled the row out: it is a fact now, with its output's ref
        root = _group(fact) if fact.source == "tool" else ""
        if root:
            # An object read again is its new snapshot: fields the new read no longer has (a payment method
            # used up, a list that got shorter) leave the state with the old snapshot.
            turn, keys = self.snapshots.get(root, (fact.turn, set()))
            if turn < fact.turn:
                for old in keys:
                    self.facts.pop((FIELD, old), None)
                keys = set()
            keys.add(fact.key)
            self.snapshots[root] = (fact.turn, keys)
        if fact.kind == PLAN and fact.value == STEP:
            self._replan(fact)
        elif fact.kind == VERIFICATION and fact.source == "tool" and fact.value == "passed":
            self._close_steps(fact.turn)
        if fact.kind == PLAN and fact.value == NEXT:
            # the agent named its next step again: the step it named before is behind it, done or dropped
            for old in self.next_steps:
                self.facts.pop(old, None)
            self.next_steps = {key}
        else:
            self.next_steps.discard(key)
        # re-inserting moves the key to the end, so dict order is "last updated"
        self.facts.pop(key, None)
        self.facts[key] = fact
        self.version += 1

    def _replan(self, step: Fact) -> None:
        """A plan announced anew replaces the steps of the one before that are still open: the agent dropped them."""
        for key, fact in list(self.facts.items()):
            if fact.kind == PLAN and fact.value == STEP and fact.turn != step.turn:
                del self.facts[key]

    def _close_steps(self, turn: int) -> None:
        """A check that passes after a file changed closes the announced steps before that change: the work they
        named is done (the steps move to the completed items, with their own words)."""
        changed = max((f.turn for f in _files_changed(self) if f.turn < turn), default=-1)  # scripts run too
        for key, fact in list(self.facts.items()):
            if fact.kind == PLAN and fact.value == STEP and fact.turn < changed:
                self.facts[key] = replace(fact, value=DONE)

    def _remember(self, candidate: Fact) -> None:
        kind, _, key = candidate.key.partition(":")
        row = Fact(kind=kind, key=key, value=candidate.value, turn=candidate.turn,
                   evidence_ref=candidate.evidence_ref, source="tool")
        self.candidates.pop((kind, key), None)
        self.candidates[(kind, key)] = row
        if len(self.candidates) > MAX_CANDIDATES:
            del self.candidates[next(iter(self.candidates))]

    def of_kind(self, kind: str) -> list[Fact]:
        version, by_kind = self._by_kind
        if version != self.version:
            by_kind = {}
            for fact in self.facts.values():
                by_kind.setdefault(fact.kind, []).append(fact)
            self._by_kind = (self.version, by_kind)
        return list(by_kind.get(kind, ()))

    @property
    def constraints(self) -> list[Fact]:
        return self.of_kind(CONSTRAINT)

    @property
    def pending(self) -> list[Fact]:
        return [fact for fact in self.of_kind(PLAN) if fact.value != "completed"]


def fact_key(fact: Fact) -> tuple[str, str]:
    """The ledger key of a fact: its kind and key; a plan item's without case, so "Add CHANGELOG entry" and a later
    "add changelog entry done" name the same item (the item is shown as last written)."""
    return (fact.kind, fact.key.casefold() if fact.kind == PLAN else fact.key)


def render_state(state: TaskState, goal: str, rules: StateRules, max_tokens: int | None = None,
                 count: Callable[[str], int] | None = None, brief: bool = False,
                 in_view: AbstractSet[int] = frozenset(), focus: str = "", task: int | None = None) -> str:
    """The task-state text. Deterministic, and free of clocks and counters so it only changes when facts do.

    Goal, constraints, pending items, awaited approvals and verification are always complete. What room
    `max_tokens` leaves goes, in this order, to settled approvals, the agent's decisions, what it learned the hard
    way, what it worked out (each newest first), then to key facts, one card per object (objects the user named,
    then those the dialogue named most recently, then the most recently updated; the first card that does not fit
    is cut, marked with "…", and ends the list), then to completed items. Objects whose fields all come from
    messages shown verbatim (`in_view`, their indices) are left out: they are in view already. `focus` is what
    the user said, NUL, the dialogue in order (see engine._dialogue). `brief` keeps only what must never be
    forgotten (the tail reminder when the full state sits at the head). Neither the goal nor the constraints of the
    task message (index `task`) are copied: the task is always forwarded verbatim."""
    plan = state.of_kind(PLAN)
    essential = ["## Task state (kept by workset from this conversation; values are exact, [ref:ID] can be recalled)"]
    if goal and task is None:  # with the task forwarded verbatim, a goal line would only copy its start
        essential.append(f"Goal: {one_line(goal, 300)}")
    sections: dict[str, list[str]] = {
        # never cut: constraints and pending work are never compressed away
        CONSTRAINTS: [f"- {flat(f.value)}" for f in state.constraints if task is None or f.turn != task],
        # rules only a tool output stated (a maintainer's comment, a policy's clause): kept like constraints
        RULES: _newest(state.of_kind(RULE), rules.max_rules, 300)[::-1],
        PENDING: [f"- [ ] {flat(f.key)}" for f in plan if f.value != "completed"],
        # an approval still awaited is never cut; settled ones are listed as room allows, newest first
        APPROVALS: [_approval_line(f) for f in state.of_kind(APPROVAL) if not is_settled(f.value)],
        # an approval given (its ticket, approver, scope) always has a line too, the newest ones
        SETTLED: [_approval_line(f) for f in state.of_kind(APPROVAL) if is_settled(f.value)]
        [-rules.max_settled_approvals:] if rules.max_settled_approvals else [],
        # what only a tool output established (bisect's first bad commit, a status, figures compared), never cut;
        # brief: only the columns `focus` names (for the changes since a compaction)
        OUTCOMES: _newest([] if brief else state.of_kind(OUTCOME), rules.max_outcomes, 400)[::-1]
        + _newest(_named_columns(state, focus), rules.max_named_columns, 400)[::-1],
        VERIFIED: _verification_lines(state, rules.max_failing_checks, rules.max_passing_checks, counted=not brief),
        # never cut either (capped by a policy key): what a coding task has changed so far
        FILES_CHANGED: _files_changed_lines(state, rules.max_files_changed),
    }
    # What room is left goes first to the agent's conclusions (decisions, what failed, what it worked out), then
    # to key facts of tool outputs, then to completed items: the seeds' order of value.
    optional: list[tuple[str, list[str]]] = [] if brief else [
        (DECISIONS, _newest(state.of_kind(DECISION), rules.max_decisions, 300)),
        (FINDINGS, _newest(state.of_kind(FINDING), rules.max_findings, 240)),
        (FAILED, _newest(state.of_kind(FAILURE), rules.max_failures, 240)
         + [f"- {a.tool} {one_line(a.arguments, 160)} -> {one_line(a.gist, 200)}{_ref(a)}"
            for a in _failed_approaches(state.actions, rules.max_failures)][::-1]),
        (FACTS, _fact_lines(_key_facts(state, rules.max_facts, in_view, focus), rules.value_chars)),
        (COMPLETED, [f"- [x] {one_line(f.key, 200)}" for f in plan if f.value == "completed"][::-1]
         [: rules.max_completed]),
    ]
    room: int | None = None
    if max_tokens is not None and count is not None:
        fixed = essential + [line for title, lines in sections.items() if lines for line in (title, *lines)]
        room = max_tokens - count("\n".join(fixed))
    for title, lines in optional:
        chosen: list[str] = []
        for line in lines:  # in priority order; what does not fit is skipped, smaller ones may still fit
            if room is not None and room < MIN_LINE_TOKENS:
                break  # not even the shortest line fits: counting the rest would only skip them
            cost = 0
            if count is not None:
                cost = count(line) + 1 + (0 if chosen else count(title) + 1)
            if room is not None and cost > room:
                if title != FACTS:
                    continue
                if room < MIN_CUT_TOKENS:
                    break  # cards are ranked: the rest, a few hundred at most, are not worth counting for the crumbs
                # an object ranked above what fits is worth a partial card more than the next ones whole
                assert count is not None  # room is only known with a counter
                line = _cut(line, room - (cost - count(line)), count)
                cost = room
            chosen.append(line)
            if room is not None:
                room -= cost
        sections[title] = chosen if title == FACTS else chosen[::-1]  # shown oldest first
    out = list(essential)
    for title in SECTION_ORDER:
        if sections.get(title):
            out.append(title)
            out.extend(sections[title])
    return "\n".join(out)


CHANGES_TITLE = "## Task state since the compaction above (kept by workset)"
NO_LONGER_OPEN = "No longer open (done or dropped):"


def state_changes(frozen: str, now: str, newest: Sequence[str] = ()) -> str:
    """What the state `now` says that the state `frozen` (rendered at the last compaction) does not, in few words
    (it is sent after the newest message, uncached, with every request until the next compaction): the pending
    items `frozen` listed that are no longer open, the paths of the files changed since (with the `newest` files
    the latest tool results changed that neither state names yet), and the approvals and checks whose line
    changed (`pytest x: passed`; a check whose verdict is the one `frozen` gave, only written differently, is no
    change); "" when nothing changed. Files come before checks: the tail is cut at state.changes_max_tokens."""
    frozen_lines = _titled_lines(frozen)
    before = {line for _, line in frozen_lines}
    verdicts = {_verdict(line) for title, line in frozen_lines if title == VERIFIED}
    now_lines = _titled_lines(now)
    still_open = {line for _, line in now_lines if line.startswith("- [ ] ")}
    closed = [line[6:] for _, line in frozen_lines if line.startswith("- [ ] ") and line not in still_open]
    out: list[str] = [f"{NO_LONGER_OPEN} " + "; ".join(closed)] if closed else []
    files: list[str] = []
    changed: list[str] = []
    named_before = _changed_names(frozen_lines)
    for title, line in now_lines:
        if title not in CHANGE_SECTIONS or line in before:
            continue
        if title == FILES_CHANGED:
            if line.startswith(SCRATCH):
                files.extend(name for name in line[len(SCRATCH):].split(", ") if name not in named_before)
            else:
                files.append(line[2:].split(": ", 1)[0])
            continue
        if title == VERIFIED and _verdict(line) in verdicts:
            continue
        if title not in changed:
            changed.append(title)
        head, failed, rest = line.partition(": failed: ")  # the verdict and refs; the error line is in view
        changed.append(f"{head}: failed{rest[rest.find(' [ref:'):] if ' [ref:' in rest else ''}" if failed else line)
    named = named_before | _changed_names(now_lines)
    files += [path for path in newest if path not in files and path not in named]
    if files:
        out.append("Files changed since: " + ", ".join(files))
    out += changed
    return "\n".join([CHANGES_TITLE, *out]) if out else ""


def _titled_lines(text: str) -> list[tuple[str, str]]:
    """(section title, line) of each item line of a rendered state ("- " or "  " lines), its heading aside."""
    lines: list[tuple[str, str]] = []
    title = ""
    for line in text.split("\n")[1:]:
        if line.startswith(("- ", "  ")):
            lines.append((title, line))
        else:
            title = line
    return lines


def _verdict(line: str) -> tuple[str, bool]:
    """A check line's command and whether it stands passed (a plain pass, or a failure that passed since), however
    much of its error line the render shows."""
    command = line[2:].split(": ", 1)[0]
    return command, " — passed since [ref:" in line or line.split(" [ref:", 1)[0].endswith(": passed")


def _changed_names(lines: Sequence[tuple[str, str]]) -> set[str]:
    """The files the "Files changed" section of a rendered state's (title, line) pairs names."""
    names: set[str] = set()
    for title, line in lines:
        if title == FILES_CHANGED and line.startswith(SCRATCH):
            names.update(line[len(SCRATCH):].split(", "))
        elif title == FILES_CHANGED and line.startswith("- "):
            names.add(line[2:].split(": ", 1)[0])
    return names


MIN_CUT_TOKENS = 24  # room below this is not worth a partial card
MIN_LINE_TOKENS = 2  # a line costs at least one token and its newline


def _cut(line: str, tokens: int, count: Callable[[str], int]) -> str:
    """The start of `line` within `tokens`, marked as cut (its ref leads the line, so the rest can be recalled)."""
    end = len(line)
    while end > 0:
        end = min(end - 1, int(end * tokens / max(1, count(line[:end] + " …"))))
        if count(line[:end] + " …") <= tokens:
            break
    return line[:max(end, 0)] + " …"


CONSTRAINTS = "Constraints (always apply):"
RULES = "Rules stated in documents and comments (tool outputs; they apply too):"
OUTCOMES = "Established by tool outputs (exact; do not guess what they say is not known):"
PENDING = "Pending (open items):"
COMPLETED = "Completed:"
DECISIONS = "Decisions (the agent's own):"
FINDINGS = "Worked out so far (the agent's own figures and conclusions):"
APPROVALS = "Approvals awaited:"
SETTLED = "Approvals settled:"
VERIFIED = "Verification:"
FACTS = "Key facts (from tool outputs, by what they describe):"
FAILED = "Learned the hard way (failed approaches and limits; do not repeat as is):"
FILES_CHANGED = "Files changed (latest change of each):"
# What the frozen state says that may have stopped being so (a check, an approval) and what a coding task has done
# since: new decisions, rules and outcomes since the compaction are in view as sent.
CHANGE_SECTIONS = frozenset({APPROVALS, SETTLED, OUTCOMES, VERIFIED, FILES_CHANGED})
SECTION_ORDER = (CONSTRAINTS, RULES, PENDING, APPROVALS, SETTLED, OUTCOMES, DECISIONS, FAILED, FINDINGS, VERIFIED,
                 FILES_CHANGED, COMPLETED, FACTS)


_COPIES = (".backup", ".bak", ".orig", ".rej", ".old", "~")
SCRATCH = "- written at the root (scripts, notes; recall by name): "
MAX_SCRATCH_NAMES = 200


def _files_changed_lines(state: TaskState, limit: int) -> list[str]:
    """A line per project file (the newest `limit`: how it was last changed, its ref, why), and one line naming
    the files written at the root of where the agent works, which are its scripts and notes (a coding agent writes
    a dozen reproduction and check scripts a run): every file the agent changed is named, in few tokens."""
    if not limit:
        return []
    files = _files_changed(state)
    scratch = [f.key for f in files if "/" not in f.key.strip("./")]
    project = [f for f in files if "/" in f.key.strip("./")][-limit:]
    lines = [f"- {one_line(f.key, 200)}: {one_line(f.value, 160)}{_ref(f)}{_reason(state, f.key)}" for f in project]
    return lines + ([SCRATCH + ", ".join(scratch[-MAX_SCRATCH_NAMES:])] if scratch else [])


def _reason(state: TaskState, path: str) -> str:
    """Why the file was changed, for a file of the project: not a scratch file at the root of where the agent
    works (a reproduction or fix script), nor a backup copy."""
    reason = state.facts.get((REASON, path))
    if reason is None or "/" not in path.strip("./") or path.endswith(_COPIES):
        return ""
    return f" — why: {one_line(reason.value, 200)}"


def _named_columns(state: TaskState, focus: str) -> list[Fact]:
    """The table columns of tool outputs whose header the dialogue names ("p95", "吞吐"), oldest first: the
    figures the user or agent compares, side by side and exact."""
    dialogue = focus.split("\0", 1)[-1].lower()
    if not dialogue:
        return []
    # named as a word ("p95", "landed"), not inside one: "low" is not named by "below", nor "jul" by "july"
    words = {part.strip(".%-") for word in _DIALOGUE_WORD.findall(dialogue) for part in (word, *word.split("/"))}
    named = [fact for (kind, key), fact in state.candidates.items()
             if kind == COLUMN and (key in words if key.isascii() else key in dialogue)]
    return sorted(named, key=lambda fact: fact.turn)


_DIALOGUE_WORD = re.compile(r"[^\W_][\w.%/-]*")


def _approval_line(fact: Fact) -> str:
    return f"- {one_line(fact.key, 160)}: {one_line(fact.value, 400)}{_ref(fact)}"


def _newest(facts: list[Fact], limit: int, chars: int) -> list[str]:
    """The newest `limit` facts' sentences with their refs, newest first (shown oldest first)."""
    return [f"- {one_line(f.value, chars)}{_ref(f)}" for f in facts[::-1][:limit]]


def _files_changed(state: TaskState) -> list[Fact]:
    """One CHANGED fact per file, oldest first: those recorded, and those of scripts and patches run since."""
    scripts = {fact.key: fact for fact in state.of_kind(SCRIPT)}
    return changed_files(state.of_kind(CHANGED), scripts, state.of_kind(RAN))


def _verification_lines(state: TaskState, detailed: int, passing: int | None = None,
                        counted: bool = True) -> list[str]:
    """One line per check: its verdict, and for the newest `detailed` failures their error line as printed and
    the pass that came after, if one did (`pytest x: FAILED x::t - … [ref:a] — passed since [ref:b]`). With
    `passing`, only the newest that many checks that simply passed are listed; the older fold into a count (a
    long run re-runs many test commands, and a pass the agent has moved on from says little), unless not
    `counted` (the brief render whose lines are compared with the frozen state's: a count is not a change)."""
    newest = {fact.key for fact in state.of_kind(FAILING)[::-1][:detailed]}
    lines: list[str] = []
    plain: list[tuple[int, int]] = []  # (turn, position) of the lines that say only "passed"
    for fact in state.of_kind(VERIFICATION):
        failure = state.facts.get((FAILING, fact.key)) if fact.key in newest else None
        now = failure is not None and failure.turn == fact.turn  # failing as of its last run
        before = failure is not None and fact.value == "passed" and failure.turn < fact.turn
        if failure is None or not (now or before):  # never failed, or its error line was not read (a time cap)
            if fact.value == "passed" and (FAILING, fact.key) not in state.facts:
                plain.append((fact.turn, len(lines)))
            lines.append(f"- {one_line(fact.key, 160)}: {fact.value}{_ref(fact)}")
            continue
        passed = passed_since(failure, state.facts)
        since = f" — passed since{_ref(passed)}" if passed is not None else ""
        verdict = f"{fact.value}: " if now else ""
        lines.append(f"- {one_line(fact.key, 160)}: {verdict}{one_line(failure.value, 240)}{_ref(failure)}{since}")
    if passing is None or len(plain) <= passing:
        return lines
    folded = {position for _, position in sorted(plain)[:len(plain) - passing]}
    count = [f"- ({len(folded)} earlier checks passed)"] if counted else []
    return count + [line for i, line in enumerate(lines) if i not in folded]


def state_snapshot(state: TaskState, goal: str, next_action: str = "", summary: str = "",
                   summary_check: str = "") -> dict[str, object]:
    """The checkpoint's view of the state: everything needed to resume, as plain data."""
    plan = state.of_kind(PLAN)

    def rows(facts: list[Fact]) -> list[dict[str, object]]:
        return [{"key": f.key, "value": f.value, "turn": f.turn, "ref": f.evidence_ref} for f in facts]

    key_facts = [f for f in state.facts.values() if f.kind not in SECTION_KINDS]
    return {
        "goal": one_line(goal, 300),
        "next_action": next_action,
        "constraints": [f.value for f in state.constraints],
        "plan": [{"item": f.key, "status": f.value} for f in plan],
        "pending": [f.key for f in plan if f.value != "completed"],
        "completed": [f.key for f in plan if f.value == "completed"],
        "decisions": [f.value for f in state.of_kind(DECISION)],
        "findings": rows(state.of_kind(FINDING)),
        "learned": rows(state.of_kind(FAILURE)),
        "approvals": rows(state.of_kind(APPROVAL)),
        "verification": rows(state.of_kind(VERIFICATION)),
        "failures": [{**row, "passed_since": passed.evidence_ref if (passed := passed_since(f, state.facts)) else None}
                     for f, row in zip(state.of_kind(FAILING), rows(state.of_kind(FAILING)))],
        "files_changed": rows(_files_changed(state)),
        "facts": [{"kind": f.kind, **row} for f, row in zip(key_facts, rows(key_facts))],
        "failed": [{"tool": a.tool, "arguments": a.arguments, "gist": a.gist, "ref": a.evidence_ref}
                   for a in _failed_approaches(state.actions, 50)],
        "actions": len(state.actions),
        "summary": summary,
        "summary_check": summary_check,
    }


def _key_facts(state: TaskState, limit: int, in_view: AbstractSet[int], focus: str) -> list[list[Fact]]:
    """Groups of facts (the fields of one object, or one entity) to show, in priority order: not the model's own
    words, not already in view; groups about something the user named first, then about what the dialogue named
    most recently, then the most recently updated; `limit` facts in all (an object is cut only when it alone
    passes the limit)."""
    if limit <= 0:
        return []
    groups: dict[str, list[Fact]] = {}
    for fact in state.facts.values():  # oldest update first
        if fact.kind in SECTION_KINDS or fact.source == "assistant":
            continue
        groups.setdefault(_group(fact), []).append(fact)
    loose = [fact for fact in groups.pop("", []) if fact.turn not in in_view]
    if loose:
        groups[""] = loose
    said_by_user, dialogue = (part.lower() for part in (focus.split("\0", 1) + [""])[:2])

    def rank(item: tuple[str, list[Fact]]) -> tuple[int, int, int]:
        group = item[0].lower()
        last = dialogue.rfind(group) if group else -1
        named = 2 if group and group in said_by_user else 1 if last >= 0 else 0
        return named, last, max(f.turn for f in item[1])

    ranked = sorted(groups.items(), key=rank, reverse=True)
    chosen: list[list[Fact]] = []
    used = 0
    for group, facts in ranked:
        if used >= limit:
            break
        if group and all(fact.turn in in_view for fact in facts):
            continue  # the whole object is in view
        if group and chosen and used + len(facts) > limit:
            continue  # objects are shown whole; a smaller one may still fit
        facts = facts[-(limit - used):]
        chosen.append(facts)
        used += len(facts)
    return chosen


def _group(fact: Fact) -> str:
    """What a fact describes: the object that qualifies a field (`mia_li_3668.dob` -> mia_li_3668), else ""."""
    if fact.kind == FIELD and "." in fact.key:
        return fact.key.split(".", 1)[0]
    return ""


def _fact_lines(groups: list[list[Fact]], value_chars: int) -> list[str]:
    lines: list[str] = []
    for facts in groups:
        group = _group(facts[0])
        if group:
            lines.append(f"- {group}{_ref(facts[-1])}: {_card(group, facts, value_chars)}")
            continue
        for fact in facts:
            value = one_line(fact.value, value_chars)
            shown = value if fact.key.lower() in value.lower() else f"{fact.key} = {value}"
            lines.append(f"- {shown}{_ref(fact)}")
    return lines


_Tree = dict[str, "str | _Tree"]
_SEGMENT = re.compile(r"\[\d+\]|[^.\[]+")


def _card(group: str, facts: list[Fact], value_chars: int) -> str:
    """An object's fields in one line, nested parts in braces and lists in brackets:
    `name{first=Mia; last=Li}; reservations=[NO6JO3, AIXC49]`. A field that repeats its object's name
    (`flight_number=HAT057` under HAT057) is left out."""
    tree: _Tree = {}
    for fact in facts:
        parts = _SEGMENT.findall(fact.key[len(group) + 1:]) or ["value"]
        node = tree
        for part in parts[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        node[parts[-1]] = one_line(fact.value, value_chars)
    return _render_tree(tree, group)


def _render_tree(tree: _Tree, name: str) -> str:
    table = _table(tree)
    if table is not None:
        return table
    if tree and all(key.startswith("[") for key in tree):
        return "[" + ", ".join(child if isinstance(child, str) else "{" + _render_tree(child, "") + "}"
                               for child in tree.values()) + "]"
    items: list[str] = []
    for key, child in tree.items():
        if isinstance(child, str):
            if child != name:
                items.append(f"{key}={child}")
        elif all(part.startswith("[") for part in child):
            items.append(f"{key}={_render_tree(child, key)}")
        else:
            items.append(f"{key}{{{_render_tree(child, key)}}}")
    return "; ".join(items)


def _table(tree: _Tree) -> str | None:
    """Two or more items with the same plain fields, as a table: the field names once, then each item's values.
    `[(first_name, last_name) Mia, Li; Amelia, Ahmed]`, or keyed by their ids: `(date, price) HAT136: 2024-05-20,
    152; HAT039: 2024-05-20, 103`. None for anything else."""
    if len(tree) < 2 or not all(isinstance(item, dict) for item in tree.values()):
        return None
    rows: list[tuple[str, list[str]]] = []
    columns: tuple[str, ...] | None = None
    for key, item in tree.items():
        assert isinstance(item, dict)
        fields = {field: value for field, value in item.items() if value != key}  # not the id repeated
        if not all(isinstance(value, str) for value in fields.values()):
            return None
        if columns is None:
            columns = tuple(fields)
        if tuple(fields) != columns or not columns:
            return None
        rows.append((key, [str(value) for value in fields.values()]))
    assert columns is not None
    header = "(" + ", ".join(columns) + ") "
    if all(key.startswith("[") for key, _ in rows):
        return "[" + header + "; ".join(", ".join(values) for _, values in rows) + "]"
    return header + "; ".join(f"{key}: {', '.join(values)}" for key, values in rows)


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
