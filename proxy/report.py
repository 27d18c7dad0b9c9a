"""What workset did, read back from the store: the savings table, a session's requests, and one request's decision
record as a message-by-message account with the rule behind each change. The dashboard (proxy.ui) and the CLI
(`workset stats`, `workset show-turn`) both read these views; nothing here writes."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import orjson

from .accounting import Account, saving
from .decisions import FORWARDED_AS_SENT, STATE, unpack
from .messages import PINNED_ROLES
from .records import Message
from .storage import SUMMED_COUNTS, Store
from .workingset import COMPACTED, EXCERPTED, MASKED, PASTE, REPEATED, VERBATIM, first_user, made_key
from .workingset import REMOVED as REMOVED_CODE

KEPT, REMOVED, ADDED = "kept", "removed", "added"

FIGURES = ("n", "created_at", "route", "model", "policy", "messages", "tokens_original", "tokens_sent",
           "input_tokens", "cached_tokens", "cache_write_tokens", "output_tokens", "reported", "whole_tokens",
           "whole_cached_tokens", "whole_write_tokens", "cost", "cost_whole", "compaction", "recall_rounds", "status",
           "workset_ms", "latency_ms", "note")


def turn_row(route: str, model: str, prepared: Any, figures: Account, fields: dict[str, Any]) -> dict[str, Any]:
    """The stored row of one forwarded request (Store.add_turn)."""
    decision = prepared.decision
    return {
        "route": route, "model": model, "policy": prepared.policy, "messages": decision.messages, "tip": decision.tip,
        "tokens_original": prepared.tokens_original, "tokens_sent": prepared.tokens_sent,
        "input_tokens": figures.input, "cached_tokens": figures.cached,
        "cache_write_tokens": figures.written, "output_tokens": figures.output, "reported": int(figures.reported),
        "whole_tokens": figures.whole, "whole_cached_tokens": figures.whole_cached,
        "whole_write_tokens": figures.whole_written, "cost": figures.cost, "cost_whole": figures.cost_whole,
        "compaction": prepared.epoch.reason if prepared.compacted and prepared.epoch is not None else "",
        "recall_rounds": int(fields.get("recall_rounds") or 0), "status": int(fields.get("status") or 0),
        "workset_ms": float(fields.get("workset_ms", 0.0)) + float(fields.get("deferred_ms", 0.0)),
        "latency_ms": float(fields.get("latency_ms", 0.0)), "note": prepared.note,
        "record": decision.encoded().decode(),
    }


# --- savings ------------------------------------------------------------------------------------------------------


@dataclass
class Savings:
    """A session's requests summed (or all sessions' in `total`): tokens and dollars, sent and had-it-been-whole."""

    session: str
    label: str  # the id a client knows the session by, when it sent one
    model: str
    policy: str
    turns: int
    tokens_original: int  # workset's count of what the agents sent
    tokens_sent: int  # workset's count of what it forwarded
    input_tokens: int  # the provider's count of what was sent (all rounds)
    cached_tokens: int
    cache_write_tokens: int
    whole_tokens: int
    whole_cached_tokens: int
    cost: float | None
    cost_whole: float | None
    compactions: int
    reported: int  # requests whose provider reported usage
    first_at: float
    last_at: float

    @property
    def saved(self) -> float | None:
        return saving(self.cost, self.cost_whole)

    @property
    def saved_share(self) -> float | None:
        """The saving as a share of what forwarding everything would have cost (negative: workset cost more)."""
        saved = self.saved
        return saved / self.cost_whole if saved is not None and self.cost_whole else None

    @property
    def verdict(self) -> str:
        """Said plainly."""
        saved = self.saved
        if saved is None:
            return "no price known for this model: see tokens"
        if saved < 0:
            return f"workset cost ${-saved:.4f} more than forwarding everything"
        return f"workset saved ${saved:.4f} ({(self.saved_share or 0) * 100:.1f}%)"


def savings(store: Store, key_hash: str | None, since: float = 0.0, limit: int = 100) -> list[Savings]:
    """The savings table: one row per session active since `since`, most recent first (of one key; None: all)."""
    return [_savings(row) for row in store.turn_totals(key_hash, since, limit)]


def _savings(row: dict[str, Any]) -> Savings:
    """A session's row of summed figures (turn_totals' columns) as Savings: dollars only where a price was known."""
    priced = bool(row["priced"])
    return Savings(row["id"], row["client_id"] or row["explicit_id"] or "", row["model"] or "", row["policy"] or "",
                   row["turns"], *(row[name] or 0 for name in SUMMED_COUNTS), row["cost"] if priced else None,
                   row["cost_whole"] if priced else None, row["compactions"] or 0, row["reported"] or 0,
                   row["first_at"], row["last_at"])


def total(rows: list[Savings]) -> Savings:
    """All rows summed."""
    def add(name: str) -> Any:
        values = [getattr(row, name) for row in rows]
        known = [value for value in values if value is not None]
        return sum(known) if known else None

    return Savings("all", f"{len(rows)} sessions", "", "", add("turns") or 0, add("tokens_original") or 0,
                   add("tokens_sent") or 0, add("input_tokens") or 0, add("cached_tokens") or 0,
                   add("cache_write_tokens") or 0, add("whole_tokens") or 0, add("whole_cached_tokens") or 0,
                   add("cost"), add("cost_whole"), add("compactions") or 0, add("reported") or 0,
                   min((row.first_at for row in rows), default=0.0), max((row.last_at for row in rows), default=0.0))


def session_total(session: dict[str, Any], turns: list[dict[str, Any]]) -> Savings:
    """One session's savings row summed from its turn rows (session_turns), as `savings` sums them in SQL: a
    session's page reads its figures once."""
    priced = [turn for turn in turns if turn["cost"] is not None]
    return _savings({
        "id": session["id"], "client_id": session.get("client_id"), "explicit_id": session.get("explicit_id"),
        "model": session.get("model"), "policy": session.get("policy"), "turns": len(turns),
        **{name: sum(turn[name] or 0 for turn in turns) for name in SUMMED_COUNTS},
        "priced": len(priced), "cost": sum(turn["cost"] for turn in priced),
        "cost_whole": sum(turn["cost_whole"] or 0.0 for turn in priced),
        "compactions": sum(bool(turn["compaction"]) for turn in turns),
        "reported": sum(turn["reported"] or 0 for turn in turns),
        "first_at": min((turn["created_at"] for turn in turns), default=0.0),
        "last_at": max((turn["created_at"] for turn in turns), default=0.0)})


def session_turns(store: Store, session_id: str) -> list[dict[str, Any]]:
    """Every request of a session, figures only (no records): what its page charts and lists."""
    return store.turns(session_id, FIGURES)


# --- one request ----------------------------------------------------------------------------------------------------


@dataclass
class Change:
    """One row of a request's account: a message of the agent's request and what was forwarded for it, or a
    message workset added."""

    kind: str  # kept | masked | excerpted | paste | removed | added
    rule: str  # why, naming the policy key or trigger that decided it
    index: int | None  # position in the agent's request (None: added by workset)
    role: str
    ref: str  # the stored content's ref ("" for what workset added)
    original: Message | None  # as the agent sent it (None: added)
    sent: Message | None  # as forwarded (None: removed)
    into: str = ""  # removed: digest | summary | dropped; added: compacted turns | task state | recall tool


@dataclass
class TurnDetail:
    session: str
    n: int
    figures: dict[str, Any]
    changes: list[Change]
    why: dict[str, Any]
    checkpoint: dict[str, Any] | None  # the compaction in force (its epoch), if any
    turns: int  # requests in the session
    counts: dict[str, int] = field(default_factory=dict)  # changes by kind


class TurnNotFound(LookupError):
    pass


def turn_detail(store: Store, session_id: str, n: int) -> TurnDetail:
    """Request `n` of a session as an account: the agent's messages beside what was forwarded, each change with its
    rule. Raises TurnNotFound."""
    rows = store.turns(session_id, (*FIGURES, "tip", "record"), n, n)
    if not rows:
        raise TurnNotFound(f"request {n} of session {session_id}")
    row = rows[0]
    record = orjson.loads(row.pop("record") or b"{}")
    tip = row.pop("tip")
    path = (store.path_to(tip) if tip else [])[:row["messages"]]
    why: dict[str, Any] = record.get("why", {})
    codes = unpack(record.get("codes", ""))
    epoch = why.get("epoch") or {}
    keys = [made_key(code, node["hash"]) for code, node in zip((c for c in codes if c not in (COMPACTED, STATE)), path)
            if code in (MASKED, EXCERPTED, PASTE)]
    keys += [key for key in (epoch.get("compacted"), record.get("state")) if key]
    made = store.shown_messages(session_id, keys)
    checkpoint = store.epoch_at(session_id, epoch["tip"]) if epoch.get("tip") else None
    changes = account_changes([node["message"] for node in path], [node["hash"] for node in path],
                              [node.get("ref") or "" for node in path], codes, record.get("state", ""), made, why,
                              checkpoint)
    counts = dict(Counter(change.kind for change in changes))
    return TurnDetail(session_id, n, row, changes, why, checkpoint, store.turn_count(session_id), counts)


KINDS = {VERBATIM: KEPT, MASKED: "masked", EXCERPTED: "excerpted", PASTE: "paste", REMOVED_CODE: REMOVED,
         REPEATED: REMOVED}
REPEAT = "repeat"  # Change.into of a reminder left out because a later copy is forwarded


def account_changes(messages: list[Message], hashes: list[str], refs: list[str], codes: str, state: str,
                    made: dict[str, Any], why: dict[str, Any], epoch: dict[str, Any] | None) -> list[Change]:
    """The decision record read back: every message of the agent's request, in order, with what became of it, and
    what workset added where it added it."""
    rules = _Rules(messages, why, epoch)
    changes: list[Change] = []
    index = 0
    for code in codes:
        if code == COMPACTED:
            sent = made.get((why.get("epoch") or {}).get("compacted", ""))
            changes.append(Change(ADDED, rules.added(code), None, "user", "", None, sent, "compacted turns"))
            continue
        if code == STATE:
            changes.append(Change(ADDED, rules.added(code), None, "user", "", None, made.get(state), "task state"))
            continue
        if index >= len(messages):
            break  # a record longer than the stored path (never expected): show what is known
        kind = KINDS.get(code, KEPT)
        original = messages[index]
        sent = original if kind == KEPT else None if kind == REMOVED else made.get(made_key(code, hashes[index]))
        into = (REPEAT if code == REPEATED else rules.removed_into(index)) if kind == REMOVED else ""
        changes.append(Change(kind, rules.rule(index, kind, into), index, str(original.get("role", "")), refs[index],
                              original, sent, into))
        index += 1
    if why.get("recall"):
        changes.append(Change(ADDED, "workset_recall offered with the tools (policy recall.offer), so the model can "
                                     "fetch anything elided by its ref", None, "tool", "", None, None, "recall tool"))
    return changes


class _Rules:
    """Why each message was treated as it was, from the record's figures and the compaction in force."""

    def __init__(self, messages: list[Message], why: dict[str, Any], epoch: dict[str, Any] | None) -> None:
        self.messages = messages
        self.figures = why
        self.epoch = epoch or {}
        self.task = first_user(messages)
        self.reason = (why.get("epoch") or {}).get("reason") or self.epoch.get("reason") or ""
        self.dropped = {int(words[1]) for words in (item.split() for item in self.epoch.get("dropped_users", ()))
                        if len(words) > 1 and words[1].isdigit()}

    def rule(self, index: int, kind: str, into: str) -> str:
        figures, reason = self.figures, self.reason
        if figures.get("forwarded") == FORWARDED_AS_SENT:
            return f"forwarded as sent: {figures.get('note') or 'no working set built'}"
        if kind == "masked":
            return (f"tool output older than the {figures.get('recent_turns')} most recent turns (policy recent_turns), "
                    f"replaced by a placeholder with its ref at compaction ({reason})")
        if kind == "excerpted":
            return (f"tool output over tool_outputs.max_tokens ({figures.get('tool_output_tokens')}): head and tail "
                    "shown, the whole by its ref")
        if kind == "paste":
            return (f"the user's long message (over user_messages.paste_tokens, {figures.get('paste_tokens')}) older "
                    "than the recent turns: head and tail shown, the whole by its ref")
        if kind == REMOVED and into == REPEAT:
            repeats = set(self.epoch.get("repeats", ()))  # the first later copy not left out stands for it
            copies = [i for i in range(index + 1, len(self.messages))
                      if i not in repeats and self.messages[i] == self.messages[index]]
            at = f" (at [{copies[0]}])" if copies else ""
            return (f"a reminder the client sent again, exactly: left out at compaction ({reason}), forwarded once, at "
                    f"its latest place{at}")
        if kind == REMOVED:
            where = {"summary": "the model-written summary (summarizer)", "dropped":
                     "the list of the user's messages left out (they alone passed the budget)"}.get(into, "the digest")
            return f"removed at compaction ({reason}); told in {where}, recallable by its ref"
        role = self.messages[index].get("role") if index < len(self.messages) else ""
        if role in PINNED_ROLES:
            return "system prompt: never compacted"
        if index == self.task:
            return "the task (first user message): never compacted"
        epoch = figures.get("epoch")
        if not epoch:
            return f"no compaction yet: the request is under the budget's trigger ({figures.get('trigger')} tokens)"
        if role == "user":
            return "the user's own words: kept through compactions"
        if index > int(epoch.get("masked_through", -1)):
            return f"among the recent turns (policy recent_turns: {figures.get('recent_turns')}), or newer than the compaction"
        return f"kept at compaction ({reason}): pinned, or dialogue the budget left room for"

    def removed_into(self, index: int) -> str:
        if index in self.dropped:
            return "dropped"
        if index <= int(self.epoch.get("summary_through", -1)):
            return "summary"
        return "digest"

    def added(self, kind: str) -> str:
        if kind == COMPACTED:
            return (f"stands for the removed turns since the compaction ({self.reason}): task state, digest of steps, "
                    "names, refs")
        text = f"live task state after the newest message (policy state.position: {self.figures.get('state')})"
        return text + " and content event-driven retrieval brought back" if self.figures.get("retrieved") else text

