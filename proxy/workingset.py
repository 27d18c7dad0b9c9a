"""The working set: a pure function of (messages, what ingest learnt of them, the session's epoch, policy).

Layout of what is forwarded:
    system messages and the task (verbatim)
    · compacted message (task state frozen at the last compaction, digest of removed turns)
    · the rest in order: older tool outputs as placeholders, newer messages verbatim
    · live task state (when the policy puts it at the tail)

An Epoch fixes how messages up to a point are shown until the next compaction, so between compactions the
forwarded prefix is byte-identical and provider prompt caches keep hitting. plan_compaction() makes a new Epoch
when the budget trigger fires.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Sequence

from .extract.names import is_record_id
from .extract.text import flat, one_line
from .messages import PINNED_ROLES, is_tool_result, message_text, tool_call
from .observations import action_command, prose_of
from .policy import Policy
from .records import Message
from .tokens import MESSAGE_OVERHEAD, SECTION_BREAK, TokenCounter

WORKSET_TAG = "[workset]"
STATE_PREFIX = f"{WORKSET_TAG} Current task state"

Excerpt = Callable[[str, int, int], tuple[str, str, int]]


@dataclass(frozen=True)
class Conversation:
    """One request's messages and what ingest knows of each; all sequences are aligned with `messages`."""

    messages: Sequence[Message]
    hashes: Sequence[str]
    refs: Sequence[str]
    tokens: Sequence[int]  # tokens of each message as the client sent it
    tool_names: Sequence[str]  # for a tool result, the tool that was called; else ""
    gists: Sequence[str]  # for a tool result, its one-line gist; else ""
    outcomes: Sequence[str]  # for a tool result, "ok" or "error"; else ""
    names: Sequence[tuple[str, ...]] = ()  # names in each message (paths, identifiers), for the index
    observed: Sequence[bool] = ()  # user messages that are tool observations (text-based agents)

    def __len__(self) -> int:
        return len(self.messages)

    def is_output(self, index: int) -> bool:
        """A tool result, or a tool observation sent in the user role: compacted as tool output."""
        return is_tool_result(self.messages[index]) or self.is_observation(index)

    def is_observation(self, index: int) -> bool:
        return index < len(self.observed) and self.observed[index]

    def is_users(self, index: int) -> bool:
        """A message the user wrote: never compacted away."""
        return self.messages[index].get("role") == "user" and not self.is_observation(index)


@dataclass(frozen=True)
class Epoch:
    """One compaction: how messages up to `tip` are shown until the next one. Indices are positions on the
    path; the hashes pin them to the exact messages, so an epoch only applies to paths through them."""

    tip: int
    tip_hash: str
    removed_through: int = -1  # units after the task up to here leave the working set...
    removed_hash: str = ""
    kept: tuple[int, ...] = ()  # ...except these (pinned when the compaction happened)
    masked_through: int = -1  # tool outputs up to here become placeholders
    masked_hash: str = ""
    digest_lines: tuple[str, ...] = ()
    folded_steps: int = 0  # digest lines folded into a count to respect digest.max_tokens
    folded_failed: int = 0
    names: tuple[str, ...] = ()  # names of elided messages not shown elsewhere, most recently seen first
    summary: str = ""  # model-written, verified summary of removed turns up to summary_through
    summary_through: int = -1
    summary_hash: str = ""
    summary_check: str = ""  # outcome of the latest summary attempt: ok, rejected: ..., timeout, not ready
    pastes: tuple[int, ...] = ()  # the user's long messages shown as head, tail and ref
    dropped_users: tuple[str, ...] = ()  # "turn N [ref:ID]" of the user's messages left out for room (said plainly)
    repeats: tuple[int, ...] = ()  # earlier copies of a reminder sent again exactly: the latest copy stands for them
    state_check: str = ""  # "ok", or what the state lost (never expected: it is rendered from the ledger)
    head_state: str = ""  # task state as of this compaction (state.position head or both)
    tokens_before: int = 0
    tokens_after: int = 0
    parts: tuple[tuple[str, int], ...] = ()  # tokens of the compacted message's parts: state, digest, names
    reason: str = "budget"

    def applies_to(self, conversation: Conversation) -> bool:
        hashes = conversation.hashes
        for index, digest in ((self.tip, self.tip_hash), (self.removed_through, self.removed_hash),
                              (self.masked_through, self.masked_hash), (self.summary_through, self.summary_hash)):
            if index >= 0 and (index >= len(hashes) or hashes[index] != digest):
                return False
        return True

    def removed(self, task: int | None) -> list[int]:
        """Indices of the turns this epoch takes out of the working set (after the task, up to removed_through, not
        kept); the repeated reminders it leaves out are `repeats`."""
        kept = set(self.kept)
        return [i for i in range((task if task is not None else -1) + 1, self.removed_through + 1) if i not in kept]

    @property
    def key(self) -> str:
        """Identity of the epoch for caches of built prefixes (and the storage key of its compacted message: an
        epoch that leaves no repeat out keeps the key it had before repeats were)."""
        key = f"{self.tip_hash}:{self.removed_through}:{self.masked_through}"
        return f"{key}:r{len(self.repeats)}" if self.repeats else key


@dataclass
class WorkingSet:
    messages: list[Message]
    tokens: int
    tail_state: bool = False


@dataclass
class BuiltPrefix:
    """Working-set messages built so far for one path and epoch; extended with new messages only."""

    epoch_key: str
    upto: int = 0  # conversation messages consumed
    messages: list[Message] = field(default_factory=list)
    tokens: int = 0
    masked_tokens: int = 0  # of `tokens`, the placeholders standing for masked outputs (workset's own text)
    refs: bool = False  # whether any message shows a [ref:ID] (an elided or excerpted content)
    head: int = 0  # messages up to the one standing for the compacted turns (0 when there is none)
    # What became of each message, for the request's decision record (proxy.decisions), kept as the prefix grows so
    # that recording costs next to nothing: one code per conversation message consumed (VERBATIM, MASKED, EXCERPTED,
    # PASTE, REMOVED or REPEATED), and COMPACTED where the compacted turns stand; and what workset wrote, with its
    # storage key.
    codes: list[str] = field(default_factory=list)
    made: list[tuple[str, Message]] = field(default_factory=list)
    recorded: int = 0  # of `made`, how many a decision record has handed to the store
    tail_key: str = ""  # the live state last recorded with this prefix (stored once while it does not change)


# codes of BuiltPrefix.codes (one character each: a request's record is their string)
VERBATIM, MASKED, EXCERPTED, PASTE, REMOVED, COMPACTED = "k", "m", "x", "p", "-", "C"
REPEATED = "r"  # a reminder left out because the request sends it again, exactly, later on


def made_key(code: str, node: str) -> str:
    """The storage key of what workset wrote: its code and the node (or, for the compacted turns, the epoch) it
    stands for."""
    return f"{code}:{node}"


# --- structure --------------------------------------------------------------------------------------------------


@dataclass
class Pairing:
    """Tool-call pairing of a message sequence, fed incrementally (a request costs its new messages only).

    Units are (start, end) inclusive: an assistant message with all its tool results, or any other single
    message. Tool-call ids are matched within their unit only (some agents reuse ids across turns)."""

    units: list[tuple[int, int]] = field(default_factory=list)
    fed: int = 0
    broken: bool = False  # an orphan result, or a new turn before every call got its result
    _call_ids: frozenset[str] = frozenset()
    _answered: set[str] = field(default_factory=set)
    _expects_function: bool = False

    def feed(self, messages: Sequence[Message]) -> Pairing:
        for index in range(self.fed, len(messages)):
            if not self.broken:
                self._take(index, messages[index])
        self.fed = len(messages)
        return self

    @property
    def complete(self) -> bool:
        """Every call answered and no orphan: safe to rewrite."""
        return not self.broken and len(self._answered) >= len(self._call_ids) and not self._expects_function

    def _take(self, index: int, message: Message) -> None:
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in self._call_ids:
                self.broken = True
                return
            self._answered.add(call_id)
            self.units[-1] = (self.units[-1][0], index)
            return
        if role == "function":
            if not self._expects_function:
                self.broken = True
                return
            self._expects_function = False
            self.units[-1] = (self.units[-1][0], index)
            return
        if not self.complete:
            self.broken = True  # the previous assistant's calls did not all get results
            return
        self._call_ids, self._answered, self._expects_function = frozenset(), set(), False
        if role == "assistant":
            self._call_ids = frozenset(str(call.get("id")) for call in message.get("tool_calls") or ()
                                       if isinstance(call, dict))
            self._expects_function = isinstance(message.get("function_call"), dict)
        self.units.append((index, index))


def segment(messages: Sequence[Message]) -> list[tuple[int, int]] | None:
    """The units of a whole message list, or None when tool pairing is broken (such a history is not rewritten)."""
    pairing = Pairing().feed(messages)
    return pairing.units if pairing.complete else None


REMINDER_OPEN, REMINDER_CLOSE = "<system-reminder>", "</system-reminder>"


def is_reminder(message: Message) -> bool:
    """A message the client adds beside the work: a system or developer message, or a user message of nothing but
    <system-reminder> blocks (how Claude Code sends its reminders when it sends no system turns; after
    translation such text beside tool results is a user message of its own). Neither the agent's work nor the
    user's words."""
    role = message.get("role")
    if role in PINNED_ROLES:
        return True
    if role != "user":
        return False
    content = message.get("content")
    parts = [content] if isinstance(content, str) else content if isinstance(content, list) else []
    if not parts:
        return False
    for part in parts:
        text = part if isinstance(part, str) else part.get("text") if isinstance(part, dict) \
            and part.get("type") == "text" else None
        if not isinstance(text, str):
            return False
        text = text.strip()
        if not (text.startswith(REMINDER_OPEN) and text.endswith(REMINDER_CLOSE)):
            return False
    return True


def work_units(messages: Sequence[Message], units: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The units that are work (a tool call with its results, a user or assistant message): not those of
    reminders only, which must never count as one of the newest turns nor take the place of the newest."""
    return [unit for unit in units if not all(is_reminder(messages[i]) for i in range(unit[0], unit[1] + 1))]


def repeated_reminders(messages: Sequence[Message], after: int, before: int) -> set[int]:
    """The reminders after `after` and before `before` that a later message repeats exactly (the same role,
    content and fields): Claude Code sends the same reminder again every few turns, and the copies would pile up.
    The latest copy stays, at its place; a message that differs at all is no copy."""
    later: dict[str, list[Message]] = {}  # text -> the distinct reminders of that text seen so far, newest first
    repeats: set[int] = set()
    for index in range(len(messages) - 1, after, -1):
        message = messages[index]
        if not is_reminder(message):
            continue
        copies = later.setdefault(message_text(message), [])
        if any(message == copy for copy in copies):
            if index < before:
                repeats.add(index)
        else:
            copies.append(message)
    return repeats


def pinned_indices(messages: Sequence[Message], observed: Sequence[bool] = ()) -> set[int]:
    """System and developer messages, the task (first user turn), the latest user turn and the assistant reply
    it answers (a confirmation is meaningless without the question). Observations are not user turns, nor are
    reminders sent in the user role after the task."""
    pinned = {i for i, m in enumerate(messages) if m.get("role") in PINNED_ROLES}
    users = [i for i, m in enumerate(messages)
             if m.get("role") == "user" and not (i < len(observed) and observed[i])]
    if users:
        latest = next((i for i in reversed(users[1:]) if not is_reminder(messages[i])), users[0])
        pinned.update((users[0], latest))
        before = latest - 1
        if before > users[0] and messages[before].get("role") == "assistant" and not messages[before].get("tool_calls"):
            pinned.add(before)
    return pinned


def first_user(messages: Sequence[Message]) -> int | None:
    for index, message in enumerate(messages):
        if message.get("role") == "user":
            return index
    return None


# --- rendering of single messages -------------------------------------------------------------------------------


def placeholder(conversation: Conversation, index: int, policy: Policy) -> Message:
    """A tool output that left the working set: tool, one-line gist, ref."""
    message = conversation.messages[index]
    gist = one_line(conversation.gists[index], policy.tool_outputs.gist_chars)
    tool = conversation.tool_names[index] or "tool"
    text = f"{WORKSET_TAG} {tool} output elided: {gist} [ref:{conversation.refs[index]}]"
    return _with_content(message, text)


def excerpted(conversation: Conversation, index: int, policy: Policy, excerpt: Excerpt) -> Message:
    """A recent tool output over tool_outputs.max_tokens (or an old paste of the user's): head and tail plus
    its ref."""
    message = conversation.messages[index]
    rules = policy.user_messages if conversation.is_users(index) else policy.tool_outputs
    what = "message" if conversation.is_users(index) else "output"
    head, tail, elided = excerpt(message_text(message), rules.head_tokens, rules.tail_tokens)
    marker = f"\n…\n{WORKSET_TAG} {elided} tokens of this {what} elided; full {what}: [ref:{conversation.refs[index]}]\n…\n"
    return _with_content(message, head + marker + tail)


def is_paste(conversation: Conversation, index: int, policy: Policy) -> bool:
    """A long message of the user's (not the task): shown as head, tail and ref once it is older than the
    recent turns."""
    return conversation.is_users(index) and conversation.tokens[index] - MESSAGE_OVERHEAD > policy.user_messages.paste_tokens


def compacted_sections(epoch: Epoch) -> list[tuple[str, str]]:
    """(name, text) of each section of the message standing for what the epoch removed, its header first; only
    the header when nothing needs saying. Every section after the header starts with a heading ("## ")."""
    sections: list[tuple[str, str]] = [("header", COMPACTED_HEADER)]
    if epoch.head_state:
        sections.append(("state", epoch.head_state))
    if epoch.dropped_users:
        sections.append(("dropped users", f"{DROPPED_USERS}\n" + "; ".join(epoch.dropped_users)))
    if epoch.summary:
        sections.append(("summary", f"## Summary of turns up to {epoch.summary_through} (model-written, checked "
                                    "against the record)\n" + epoch.summary))
    digest = digest_text(epoch)
    if digest:
        sections.append(("digest", digest))
    if epoch.names:
        sections.append(("names", f"{NAMES_HEADING}\n" + " ".join(epoch.names)))
    return sections


def compacted_message(epoch: Epoch) -> Message | None:
    """The user-role message standing for everything the epoch removed; None when nothing needs saying."""
    return _compacted(compacted_sections(epoch))


def _compacted(sections: list[tuple[str, str]]) -> Message | None:
    if len(sections) == 1:
        return None
    return {"role": "user", "content": SECTION_BREAK.join(text for _, text in sections)}


def compacted_tokens(sections: list[tuple[str, str]], counter: TokenCounter) -> tuple[int, dict[str, int]]:
    """The tokens of the compacted message of these sections (0 when there is none), and of each section:
    counted section by section, so that a new state does not make workset encode the digest and names again."""
    if len(sections) == 1:
        return 0, {}
    shares = counter.sections([text for _, text in sections])
    return MESSAGE_OVERHEAD + sum(shares), {name: share for (name, _), share in zip(sections, shares)}


COMPACTED_HEADER = (f"{WORKSET_TAG} Earlier turns of this conversation were compacted by workset, the context proxy. "
                    "Nothing is lost: every [ref:ID] names stored content.")
NAMES_HEADING = "## Names in elided turns (recall by ref, or by query)"
DROPPED_USERS = ("## The user's earlier messages left out: they did not fit the budget (still binding unless "
                 "the user said otherwise; recall them by ref)")


def part_tokens(epoch: Epoch, counter: TokenCounter) -> tuple[tuple[str, int], ...]:
    """How many tokens the state, the digest and the names index take in the compacted message (reported per
    compaction: a state nobody would read is a cost, not a help)."""
    shares = compacted_tokens(compacted_sections(epoch), counter)[1]
    return tuple((part, shares.get(part, 0)) for part in ("state", "digest", "names"))


def digest_text(epoch: Epoch) -> str:
    """The digest lines of removed turns the summary does not cover."""
    lines = [line for line in epoch.digest_lines if _line_turn(line) > epoch.summary_through]
    folded = epoch.folded_steps if epoch.summary_through < 0 else 0
    if not lines:
        return ""  # a count alone tells the model nothing it can use (the lean pass, under a tight budget)
    out = ["## Earlier steps (extractive digest)"]
    if folded:
        out.append(f"- ({folded} earlier steps folded, {epoch.folded_failed} of them failed)")
    out.extend(lines)
    return "\n".join(out)


def state_message(text: str) -> Message:
    """Live task state and retrieved content, after the newest message. User role, not system: litellm's Anthropic
    path hoists system messages into the cached system prompt, where a changing state would break the cache."""
    return {"role": "user", "content": f"{STATE_PREFIX}, kept by the proxy (not a new request).\n{text}"}


def _with_content(message: Message, text: str) -> Message:
    copy = dict(message)
    copy["content"] = text
    return copy


# --- building ---------------------------------------------------------------------------------------------------


def extend_prefix(prefix: BuiltPrefix, conversation: Conversation, epoch: Epoch | None, policy: Policy,
                  counter: TokenCounter, excerpt: Excerpt) -> BuiltPrefix:
    """Append the shown form of messages[prefix.upto:] to the prefix (mutating it) and return it."""
    messages = conversation.messages
    start = prefix.upto
    removed_through = epoch.removed_through if epoch else -1
    masked_through = epoch.masked_through if epoch else -1
    kept = set(epoch.kept) if epoch else set()
    pastes = set(epoch.pastes) if epoch else set()
    repeats = set(epoch.repeats) if epoch else set()
    task = first_user(messages) if epoch is not None else None
    limit = policy.tool_outputs.max_tokens
    for index in range(start, len(messages)):
        message = messages[index]
        if index in repeats:
            prefix.codes.append(REPEATED)
            continue
        if task is not None and task < index <= removed_through and index not in kept:
            prefix.codes.append(REMOVED)
            continue
        tokens = conversation.tokens[index]
        form = VERBATIM
        if conversation.is_output(index):
            if index <= masked_through:
                message, form = placeholder(conversation, index, policy), MASKED
            elif tokens - MESSAGE_OVERHEAD > limit:
                message, form = excerpted(conversation, index, policy, excerpt), EXCERPTED
        elif index in pastes:
            message, form = excerpted(conversation, index, policy, excerpt), PASTE
        prefix.codes.append(form)
        if form != VERBATIM:
            tokens = counter.message(message, generated=True)
            prefix.masked_tokens += tokens if form == MASKED else 0
            prefix.refs = True
            prefix.made.append((made_key(form, conversation.hashes[index]), message))
        prefix.messages.append(message)
        prefix.tokens += tokens
        if index == task and epoch is not None:
            sections = compacted_sections(epoch)
            summary = _compacted(sections)
            if summary is not None:
                prefix.messages.append(summary)
                prefix.head = len(prefix.messages)
                prefix.tokens += compacted_tokens(sections, counter)[0]
                prefix.refs = True
                prefix.codes.append(COMPACTED)
                prefix.made.append((made_key(COMPACTED, epoch.key), summary))
    prefix.upto = len(messages)
    return prefix


def verbatim(conversation: Conversation, epoch: Epoch, policy: Policy) -> frozenset[int]:
    """Indices of the messages the epoch shows as sent (not removed, masked or excerpted)."""
    removed = set(epoch.removed(first_user(conversation.messages))) | set(epoch.repeats)
    return frozenset(index for index in range(len(conversation))
                     if not _elided(conversation, index, removed, epoch.masked_through, policy, epoch.pastes))


def _elided(conversation: Conversation, index: int, removed: set[int], masked_through: int, policy: Policy,
            pastes: Sequence[int] = ()) -> bool:
    """Whether the message leaves the working set or is shown only in part (a placeholder or an excerpt)."""
    return index in removed or index in pastes or (conversation.is_output(index) and (
        index <= masked_through or conversation.tokens[index] - MESSAGE_OVERHEAD > policy.tool_outputs.max_tokens))


def with_tail_state(messages: list[Message], tail: Message | None) -> list[Message]:
    """Place the live state last, or just before a trailing assistant message (a prefill), so it never sits
    between tool calls and their results."""
    if tail is None:
        return messages
    if messages and messages[-1].get("role") == "assistant" and not messages[-1].get("tool_calls"):
        return messages[:-1] + [tail, messages[-1]]
    return messages + [tail]


# --- planning a compaction --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Budget:
    """Token figures for one request. `room` is what the budget leaves after the parts compaction cannot touch
    (tool definitions, system prompt, task); trigger, target and every quota (state, digest, names, retrieval)
    are shares of it, so a large system prompt or tool list does not leave compaction with nothing to work on."""

    limit: int  # max input tokens
    trigger: int
    target: int
    room: int

    @staticmethod
    def of(policy: Policy, max_input_tokens: int, untouchable: int = 0) -> Budget:
        rules = policy.budget
        room = max(0, max_input_tokens - untouchable)
        budget = Budget(max_input_tokens, 0, 0, room)
        return replace(budget, trigger=budget.level(rules.trigger_ratio), target=budget.level(rules.target_ratio))

    def share(self, ratio: float) -> int:
        """A quota: this share of the room."""
        return int(ratio * self.room)

    def level(self, ratio: float) -> int:
        """A threshold on the whole request: the untouchable parts plus this share of the room."""
        return self.limit - self.room + self.share(ratio)


def plan_compaction(conversation: Conversation, units: list[tuple[int, int]], previous: Epoch | None,
                    policy: Policy, budget: Budget, fixed_tokens: int, state_tokens: int, counter: TokenCounter,
                    excerpt: Excerpt, reason: str = "budget", digest_limit: int | None = None,
                    names_limit: int | None = None) -> Epoch:
    """A new epoch that brings the working set to the budget's target (its head_state is filled in afterwards,
    knowing what stays in view; `state_tokens` is reserved for it).

    What leaves first is worth least (the seeds' order of value, kept from the end): every tool output older
    than the newest `recent_turns` units becomes a placeholder, and an old paste of the user's its head and tail.
    Then the oldest tool turns (an assistant message with its tool results, or a text-based agent's command with
    its observation) after the task leave, each replaced by digest lines: the assistant's own prose, whole
    where short, then one line per call. Then the assistant's replies in the dialogue, oldest first. Then the
    recent units give way, oldest first (masked, then removed), never the newest unit of work (nor the reminders
    after it) or a pinned message. Recent units are units of work: a unit of reminders only counts for none. The
    user's own messages stay through all of that: only when they alone would pass the budget do the oldest
    leave, and the compacted message names them. Whatever the budget, a reminder the request sends again exactly
    later on is left out (`repeats`): it is forwarded once, at its latest place. `fixed_tokens` are the parts
    outside the messages (tool definitions, live state)."""
    messages = conversation.messages
    count = len(messages)
    task = first_user(messages)
    pinned = pinned_indices(messages, conversation.observed)
    after_task = task if task is not None else -1
    units = tool_turns(conversation, units)
    work = work_units(messages, units)
    # the newest unit of work and whatever follows it (reminders) are never masked or removed
    newest = work[-1][0] if work else count
    # the system prompt (the first system message, and all before the task) is never a repeat
    system = next((i for i, m in enumerate(messages) if m.get("role") in PINNED_ROLES), -1)
    repeats = repeated_reminders(messages, max(after_task, system), newest)
    removed_through = max(previous.removed_through, after_task) if previous else after_task
    kept = set(previous.kept) if previous else set()
    lines = list(previous.digest_lines) if previous else []
    folded_steps = previous.folded_steps if previous else 0
    folded_failed = previous.folded_failed if previous else 0
    dropped = list(previous.dropped_users) if previous else []
    recent = work[-policy.recent_turns:]  # counted in units of work: reminders take no newest turn's place
    recent_start = recent[0][0] if recent else count
    masked_through = max(previous.masked_through if previous else -1, recent_start - 1)
    pastes = set(previous.pastes) if previous else set()
    pastes.update(i for i in range(after_task + 1, masked_through + 1)
                  if i not in pinned and is_paste(conversation, i, policy))

    def shown(index: int) -> int:
        if (after_task < index <= removed_through and index not in kept) or index in repeats:
            return 0
        return _shown_tokens(conversation, index, policy, counter, excerpt, masked=index <= masked_through,
                             paste=index in pastes)

    def is_dialogue(unit: tuple[int, int]) -> bool:
        return not any(conversation.is_output(i) for i in range(unit[0], unit[1] + 1))

    def is_users(unit: tuple[int, int]) -> bool:
        return unit[0] == unit[1] and conversation.is_users(unit[0])

    if names_limit is None:
        names_limit = budget.share(policy.digest.names_share)
    if digest_limit is None:
        digest_limit = digest_quota(policy, budget)
    header = compacted_message(Epoch(tip=0, tip_hash="", digest_lines=("-",), names=("-",)))
    # The state and the names index are sized after the plan, and the digest is folded to its quota: their
    # quotas are counted now, so the plan never underestimates.
    overhead = fixed_tokens + counter.message(header or {}, generated=True) + state_tokens + names_limit
    shown_total = sum(shown(i) for i in range(count))
    digest_total = sum(counter.cached_text(line) + 1 for line in lines)
    dropped_total = sum(counter.cached_text(item) + 2 for item in dropped)
    target = budget.target

    def total() -> int:
        return overhead + shown_total + min(digest_total, digest_limit) + dropped_total

    def remove(unit: tuple[int, int]) -> None:
        nonlocal removed_through, shown_total, digest_total
        stays = {i for i in range(unit[0], unit[1] + 1) if i in pinned or conversation.is_users(i)}
        shown_total -= sum(shown(i) for i in range(unit[0], unit[1] + 1) if i not in stays)
        for index in range(unit[0], unit[1] + 1):
            if index in stays:
                kept.add(index)
            else:
                kept.discard(index)
        removed_through = max(removed_through, unit[1])
        for line in digest_lines(conversation, unit, policy, counter.cached_text) if unit[0] not in stays else ():
            lines.append(line)
            digest_total += counter.cached_text(line) + 1

    def mask(unit: tuple[int, int]) -> None:
        nonlocal masked_through, shown_total
        before = sum(shown(i) for i in range(unit[0], unit[1] + 1))
        masked_through = max(masked_through, unit[1])
        pastes.update(i for i in range(unit[0], unit[1] + 1) if i not in pinned and is_paste(conversation, i, policy))
        shown_total += sum(shown(i) for i in range(unit[0], unit[1] + 1)) - before

    older = [unit for unit in units if after_task < unit[0] and unit[1] < recent_start]
    # Phase 1: the oldest tool turns leave; dialogue in between is kept for now.
    for unit in older:
        if total() <= target:
            break
        if removed_through >= unit[0]:
            continue
        if is_dialogue(unit):
            kept.update(range(unit[0], unit[1] + 1))
            removed_through = unit[1]
        else:
            remove(unit)
    # Phase 2: the assistant's replies in the kept dialogue leave too, oldest first (the user's words stay).
    for unit in older:
        if total() <= target:
            break
        if unit[1] <= removed_through and is_dialogue(unit) and not is_users(unit) and unit[0] in kept \
                and unit[0] not in pinned:
            remove(unit)
    # Phase 3: recent units give way, oldest first, the newest unit of work and what follows it always kept (the
    # reminders among them are kept as pinned messages are, wherever a unit is removed).
    giving = [unit for unit in units if recent_start <= unit[0] < newest]
    for unit in giving:
        if total() <= target:
            break
        mask(unit)
    for unit in giving:
        if total() <= target:
            break
        # not removed yet, or dialogue an earlier compaction kept that has since become recent
        if removed_through < unit[0] or (unit[0] in kept and unit[0] not in pinned and not is_users(unit)):
            remove(unit)
    # Phase 4: only when the user's messages alone pass the budget do the oldest of them leave, said plainly.
    for unit in units:
        if total() <= budget.limit:
            break
        if is_users(unit) and after_task < unit[0] <= removed_through and unit[0] in kept and unit[0] not in pinned \
                and unit[0] < newest and unit[0] not in repeats:
            shown_total -= shown(unit[0])
            kept.discard(unit[0])
            item = f"turn {unit[0]} [ref:{conversation.refs[unit[0]]}]"
            dropped.append(item)
            dropped_total += counter.cached_text(item) + 2
    lines.sort(key=_line_turn)
    lines, folded, failed = fold_digest(lines, digest_limit, counter.cached_text)
    folded_steps += folded
    folded_failed += failed
    removed = {i for i in range(after_task + 1, removed_through + 1) if i not in kept} | repeats
    index = names_index(conversation, removed, masked_through, policy, counter, names_limit, pastes)
    hashes = conversation.hashes
    return Epoch(
        tip=count - 1,
        tip_hash=hashes[-1],
        removed_through=removed_through,
        removed_hash=hashes[removed_through] if removed_through >= 0 else "",
        kept=tuple(sorted(i for i in kept if i <= removed_through)),
        masked_through=masked_through,
        masked_hash=hashes[masked_through] if masked_through >= 0 else "",
        digest_lines=tuple(lines),
        folded_steps=folded_steps,
        folded_failed=folded_failed,
        names=index,
        summary=previous.summary if previous else "",
        summary_through=previous.summary_through if previous else -1,
        summary_hash=previous.summary_hash if previous else "",
        pastes=tuple(sorted(pastes)),
        dropped_users=tuple(dropped),
        repeats=tuple(sorted(repeats)),
        reason=reason,
    )


def tool_turns(conversation: Conversation, units: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The units with each text-based action joined to its observation: an assistant message without tool
    calls followed by an observation sent in the user role is one tool turn, as a call and its result are."""
    if not any(conversation.observed):
        return units
    merged: list[tuple[int, int]] = []
    for unit in units:
        if merged and conversation.is_observation(unit[0]) and \
                conversation.messages[merged[-1][1]].get("role") == "assistant":
            merged[-1] = (merged[-1][0], unit[1])
        else:
            merged.append(unit)
    return merged


def fold_digest(lines: list[str], limit: int, count: Callable[[str], int]) -> tuple[list[str], int, int]:
    """The digest within `limit` tokens: the oldest tool-call lines fold into a count first, the assistant's
    prose last (its conclusions are worth more than what its old calls were). Returns (lines, steps folded,
    failed ones among them)."""
    costs = [count(line) + 1 for line in lines]
    total = sum(costs)
    if total <= limit:
        return lines, 0, 0
    gone: set[int] = set()
    folded = failed = 0
    for prose_pass in (False, True):
        for position, line in enumerate(lines):
            if total <= limit:
                break
            if _is_prose_line(line) != prose_pass:
                continue
            gone.add(position)
            total -= costs[position]
            folded += 1
            failed += " -> error:" in line
    return [line for position, line in enumerate(lines) if position not in gone], folded, failed


def _is_prose_line(line: str) -> bool:
    parts = line.split(" ", 4)
    return len(parts) > 3 and parts[3] in ("assistant:", "user:")


def _line_turn(line: str) -> int:
    """Digest lines read `- turn N ...`: sorted by N they tell the removed turns in order."""
    parts = line.split(" ", 3)
    return int(parts[2]) if len(parts) > 2 and parts[2].isdigit() else -1


def names_index(conversation: Conversation, removed: set[int], masked_through: int, policy: Policy,
                counter: TokenCounter, limit: int, pastes: Sequence[int] = ()) -> tuple[str, ...]:
    """Names that now live only in what the epoch elides (removed turns, masked or excerpted outputs), within
    `limit` tokens: first those the dialogue used (the user's words, the assistant's text, a tool call's arguments
    or a text-based agent's command), the work's own names; then, as room allows, the ids tools handed out
    (PO-2231, HAT136: what an agent cites and acts on later) and the names several elided messages showed
    (digest.names_seen_in), which the work keeps meeting. A name a single output showed (a listing's files, a
    traceback's frames, a test file's tests) is left to recall. Each group most recently seen first."""
    if limit <= 0 or not conversation.names:
        return ()
    messages = conversation.messages
    task = first_user(messages)
    shown: set[str] = set()
    used_in_dialogue: set[str] = set()
    last_seen: dict[str, int] = {}
    times: dict[str, int] = {}  # elided messages that showed the name
    for index, message in enumerate(messages):
        names = conversation.names[index]
        if message.get("role") == "assistant" or (conversation.is_users(index) and not is_reminder(message)):
            used_in_dialogue.update(names)
        if _elided(conversation, index, removed, masked_through, policy, pastes) and (task is None or index > task):
            for name in names:
                last_seen[name] = index
                times[name] = times.get(name, 0) + 1
        else:
            shown.update(names)
    recurring = policy.digest.names_seen_in

    def group(name: str) -> int:
        """0: the dialogue used it; 1: an id a tool handed out; 2: several elided messages showed it; 3: none."""
        if name in used_in_dialogue:
            return 0
        if is_record_id(name):
            return 1
        return 2 if recurring and times[name] >= recurring else 3

    candidates = (name for name in last_seen if name not in shown and group(name) < 3)
    return _leading_within(sorted(candidates, key=lambda n: (group(n), -last_seen[n], n)), limit, counter)


def _leading_within(names: Iterable[str], limit: int, counter: TokenCounter) -> tuple[str, ...]:
    """The first names, in order, that fit `limit` tokens as the index writes them."""
    chosen: list[str] = []
    used = 0
    for name in names:
        cost = counter.cached_text(" " + name)
        if used + cost > limit:
            break
        chosen.append(name)
        used += cost
    return tuple(chosen)


def head_room(own_max_tokens: int, prefix: BuiltPrefix) -> int:
    """What digest.own_max_tokens leaves the compacted message once the placeholders the prefix shows for outputs
    of its kept turns are counted (an excerpt is mostly the output's own text, so it does not count). 0: no limit;
    at least 1 when there is one (a head of the state and the digest alone)."""
    if own_max_tokens <= 0:
        return 0
    return max(1, own_max_tokens - prefix.masked_tokens)


def names_within(epoch: Epoch, limit: int, counter: TokenCounter) -> Epoch:
    """The epoch with its names index rid of the names its state or digest shows, and cut so that its compacted
    message stays within `limit` tokens (head_room; 0: no cut): the state and the digest come first, the names,
    most useful first, get what they leave."""
    shown = f"{epoch.head_state}\n{digest_text(epoch)}"
    names = tuple(name for name in epoch.names if name not in shown)
    if limit > 0 and names:
        without = compacted_tokens(compacted_sections(replace(epoch, names=())), counter)[0]
        room = limit - without - counter.cached_text(NAMES_HEADING) - 2
        names = _leading_within(names, room, counter) if room > 0 else ()
    return replace(epoch, names=names)


def digest_quota(policy: Policy, budget: Budget) -> int:
    return min(policy.digest.max_tokens, budget.share(policy.digest.max_share))


def digest_lines(conversation: Conversation, unit: tuple[int, int], policy: Policy,
                 count: Callable[[str], int]) -> list[str]:
    """What a removed unit said and did: the assistant's own prose (whole up to digest.prose_tokens, else cut,
    with its ref), then one line per tool call with its outcome (a text-based agent's command block counts as a
    call, its observation as the result)."""
    rules = policy.digest
    messages = conversation.messages
    first = messages[unit[0]]
    role = first.get("role")
    ref = conversation.refs[unit[0]]
    text = message_text(first)
    calls = first.get("tool_calls") or []
    if conversation.is_observation(unit[0]):  # output whose command left earlier: not the user's words
        gist = one_line(conversation.gists[unit[0]], rules.gist_chars)
        return [f"- turn {unit[0]} output -> {conversation.outcomes[unit[0]] or 'ok'}: {gist} [ref:{ref}]"]
    observed = role == "assistant" and not calls and unit[1] > unit[0] and conversation.is_observation(unit[0] + 1)
    command = action_command(first) if observed else None
    prose = prose_of(text) if command is not None else text
    lines: list[str] = []
    if prose.strip():
        whole = role == "assistant" and count(prose) <= rules.prose_tokens
        shown = flat(prose) if whole else one_line(prose, rules.text_chars)
        lines.append(f"- turn {unit[0]} {role}: {shown} [ref:{ref}]")
    if observed:
        result = unit[0] + 1
        gist = one_line(conversation.gists[result], rules.gist_chars)
        action = f"bash {one_line(command, rules.arguments_chars)}" if command is not None else "command"
        lines.append(f"- turn {unit[0]} {action} -> {conversation.outcomes[result] or 'ok'}: {gist} "
                     f"[ref:{conversation.refs[result]}]")
    if role != "assistant" or not calls:
        return lines
    results = {messages[i].get("tool_call_id"): i for i in range(unit[0] + 1, unit[1] + 1)}
    for entry in calls:
        call = tool_call(entry)  # function and custom calls alike
        if call is None:
            continue
        arguments = one_line(call.arguments, rules.arguments_chars)
        name = call.name or "tool"
        result = results.get(call.id)
        if result is None:
            lines.append(f"- turn {unit[0]} {name} {arguments}")
            continue
        outcome = conversation.outcomes[result] or "ok"
        gist = one_line(conversation.gists[result], rules.gist_chars)
        lines.append(f"- turn {unit[0]} {name} {arguments} -> {outcome}: {gist} [ref:{conversation.refs[result]}]")
    return lines


def _shown_tokens(conversation: Conversation, index: int, policy: Policy, counter: TokenCounter,
                  excerpt: Excerpt, masked: bool, paste: bool = False) -> int:
    tokens = conversation.tokens[index]
    if paste:
        return counter.message(excerpted(conversation, index, policy, excerpt), generated=True)
    if not conversation.is_output(index):
        return tokens
    if masked:
        return counter.message(placeholder(conversation, index, policy), generated=True)
    if tokens - MESSAGE_OVERHEAD > policy.tool_outputs.max_tokens:
        return counter.message(excerpted(conversation, index, policy, excerpt), generated=True)
    return tokens


def build(conversation: Conversation, epoch: Epoch | None, policy: Policy, counter: TokenCounter,
          excerpt: Excerpt, tail_state: str = "", tools_tokens: int = 0) -> WorkingSet:
    """The whole working set in one go (the server extends a cached BuiltPrefix instead; both give the same)."""
    prefix = extend_prefix(BuiltPrefix(epoch.key if epoch else ""), conversation, epoch, policy, counter, excerpt)
    tail = state_message(tail_state) if tail_state else None
    messages = with_tail_state(list(prefix.messages), tail)
    tokens = prefix.tokens + tools_tokens + (counter.message(tail, generated=True) if tail else 0)
    return WorkingSet(messages, tokens, tail is not None)


__all__ = [
    "Budget", "BuiltPrefix", "Conversation", "Epoch", "Pairing", "WorkingSet", "build", "compacted_message", "digest_lines",
    "extend_prefix", "pinned_indices", "placeholder", "plan_compaction", "segment", "state_message",
    "verbatim", "with_tail_state", "is_reminder", "repeated_reminders", "work_units",
]
