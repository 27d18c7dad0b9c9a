"""Resolve which conversation a request continues, and ingest what is new in it.

A request's messages form a path in the caller's conversation tree. The deepest node already known identifies the
session and branch; the messages beyond it are new: they are hashed, counted, extracted and stored once. Recently
seen paths stay in memory (Branch), so a request that extends one costs work for its new messages only; other
paths are rebuilt from the store.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Collection, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Sequence

from .config import IngestSettings
from .logs import get_logger
from .hashing import chain, ref_of, root_hash, session_id_for
from .extractors import Extractor, InlineExtractor, Job
from .ingest import CallLookup, context_for, tool_outcome
from .messages import PINNED_ROLES, is_tool_result
from .observations import NO_OBSERVATIONS, ObservationMatcher
from .records import Action, ClientSession, Fact, Message
from .state import TaskState, fact_key
from .storage import NewMessage, NodeRow, Scope, Store, StoreUnavailable
from .tokens import TokenCounter
from .workingset import BuiltPrefix, Conversation, Epoch, Pairing, first_user


@dataclass
class Branch:
    """One conversation path as last seen, with everything ingest learnt along it."""

    session_id: str  # the session of its newest messages (an implicit conversation is a session from where it forked)
    root: str
    explicit: bool
    messages: list[Message] = field(default_factory=list)
    hashes: list[str] = field(default_factory=list)
    node_sessions: list[str] = field(default_factory=list)  # the session each message was first stored in
    refs: list[str] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    tool_names: list[str] = field(default_factory=list)
    gists: list[str] = field(default_factory=list)
    outcomes: list[str] = field(default_factory=list)
    names: list[tuple[str, ...]] = field(default_factory=list)
    observed: list[bool] = field(default_factory=list)  # user messages that are tool observations (text agents)
    state: TaskState = field(default_factory=TaskState)
    fact_nodes: dict[tuple[str, str], str] = field(default_factory=dict)  # node of the latest value per key on this path
    epoch: Epoch | None = None
    built: BuiltPrefix | None = None  # working set built so far under `epoch` (policy name in built_for)
    built_for: str = ""
    total_tokens: int = 0
    tail_cache: tuple[object, str, Message, int] | None = None  # (key, live state text, its message, tokens)
    pairing: Pairing = field(default_factory=Pairing)  # tool-call pairing of `messages`, fed incrementally
    # (messages, tip hash, their tokens) of the previous request, for the cache model of the savings figures
    last_request: tuple[int, str, int] | None = None
    settled: int = 0  # messages before this index are extracted and recorded; the rest wait for settle()
    version: int = 0  # the session's compactions as last read from a store replicas share (see Sessions.claimed)
    recorded_as: tuple[str, str] = ("", "")  # model and policy of the latest request, for the session row
    untouchable: tuple[int, int, bool] = (0, 0, False)  # (messages counted, their tokens, task seen)
    client: bool = False  # in a session the client named in its own header (Claude Code's, Codex's)
    client_id: str = ""  # this conversation's own name in that session (a subagent's agent or thread id)
    caller: str = ""  # the key hash of its caller: what settling one key's conversations picks
    # held while messages are appended or settled: settling runs in a worker thread beside the next request
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    # held by the request building its working set on this branch (see Sessions.claimed)
    serial: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)

    def untouchable_tokens(self) -> int:
        """Tokens of what compaction never removes or rewrites (system and developer messages, the task),
        counted over the messages not seen before."""
        counted, total, task_seen = self.untouchable
        for index in range(counted, len(self.messages)):
            role = self.messages[index].get("role")
            if role in PINNED_ROLES or (role == "user" and not task_seen):
                total += self.tokens[index]
                task_seen = task_seen or role == "user"
        self.untouchable = (len(self.messages), total, task_seen)
        return total

    def current_epoch(self, conversation: Conversation) -> Epoch | None:
        """The latest compaction, if it applies to this exact path."""
        return self.epoch if self.epoch is not None and self.epoch.applies_to(conversation) else None

    def scope(self) -> Scope:
        """What recall and retrieval may read: the sessions along this path and, for an implicit session (where
        other conversations may have forked from this one or this one from others), only this path's nodes;
        an explicit session id declares one conversation (whose client may edit its history): all of it; in a session
        a client names in its own header, the whole of every session along the path (after a client's compaction,
        the conversation it compacted, whose refs the compaction item names)."""
        lineage = tuple(dict.fromkeys([*self.node_sessions, self.session_id]))
        return Scope(lineage, None if self.explicit or self.client else self.hashes)

    def conversation(self) -> Conversation:
        return Conversation(self.messages, self.hashes, self.refs, self.tokens, self.tool_names, self.gists, self.outcomes,
                            self.names, self.observed)

    def truncated(self, length: int) -> Branch:
        """The first `length` messages of this path, sharing nothing mutable with it (state is rebuilt)."""
        return Branch(
            self.node_sessions[length - 1] if length else self.session_id, self.root, self.explicit,
            self.messages[:length], self.hashes[:length], self.node_sessions[:length], self.refs[:length],
            self.tokens[:length], self.tool_names[:length], self.gists[:length], self.outcomes[:length],
            self.names[:length], self.observed[:length], total_tokens=sum(self.tokens[:length]), settled=length,
            client=self.client, client_id=self.client_id, caller=self.caller,
        )


@dataclass
class Resolved:
    branch: Branch
    new_messages: int  # messages of this request not seen before on this path


class BranchCache:
    """Recently seen paths by root, least recently used evicted first: at most `max_branches`, holding at most
    `max_tokens` of messages between them (a path holds its messages, a megabyte each if a tenant sends such).
    Safe to share between threads."""

    def __init__(self, max_branches: int, max_tokens: int | None = None) -> None:
        self._branches: OrderedDict[int, Branch] = OrderedDict()
        self._by_root: dict[str, list[int]] = {}
        self._max = max_branches
        self._max_tokens = max_tokens
        # the tokens held, kept as a running sum (not summed over every branch at each request): each branch's
        # size as last counted, when it was put or recounted
        self._counted: dict[int, int] = {}
        self._held = 0
        self._lock = threading.Lock()

    def candidates(self, root: str) -> list[Branch]:
        with self._lock:
            return [self._branches[key] for key in self._by_root.get(root, ())]

    def put(self, branch: Branch) -> list[Branch]:
        """Add or refresh `branch`; the branches evicted to make room (their unsettled messages still need
        writing)."""
        with self._lock:
            key = id(branch)
            if key not in self._branches:
                self._by_root.setdefault(branch.root, []).append(key)
            self._branches[key] = branch
            self._branches.move_to_end(key)
            return self._count(branch)

    def recount(self, branch: Branch) -> list[Branch]:
        """`branch` grew since it was put (its new messages measured): the branches evicted to make room, as by
        put(); nothing if it is no longer held."""
        with self._lock:
            if id(branch) not in self._branches:
                return []
            self._branches.move_to_end(id(branch))  # the one in use: the last to go
            return self._count(branch)

    def _count(self, branch: Branch) -> list[Branch]:
        key = id(branch)
        self._held += branch.total_tokens - self._counted.get(key, 0)
        self._counted[key] = branch.total_tokens
        evicted: list[Branch] = []
        while len(self._branches) > self._max or (self._max_tokens and self._held > self._max_tokens
                                                  and len(self._branches) > 1):
            _, old = self._branches.popitem(last=False)
            self._unlink(old)
            evicted.append(old)
        return evicted

    def drop(self, branch: Branch) -> None:
        with self._lock:
            if self._branches.pop(id(branch), None) is not None:
                self._unlink(branch)

    def all(self) -> list[Branch]:
        with self._lock:
            return list(self._branches.values())

    def _unlink(self, branch: Branch) -> None:
        self._held -= self._counted.pop(id(branch), 0)
        keys = self._by_root.get(branch.root, [])
        if id(branch) in keys:
            keys.remove(id(branch))
        if not keys:
            self._by_root.pop(branch.root, None)


def common_prefix(left: Sequence[Message], right: Sequence[Message]) -> int:
    """How many leading messages are equal. A path extended is checked in one C loop (dict equality); paths
    that part are walked with the hashes of their texts first, so that a request compared with many cached
    conversations reads each of its texts once (a str keeps its hash), not once per conversation: texts of one
    length that part late (a megabyte each) would otherwise be compared whole, again and again."""
    count = min(len(left), len(right))
    if count and not _differs(left[count - 1], right[count - 1]) and left[:count] == right[:count]:
        return count  # the common case: one path extends the other
    for index in range(count):
        if left[index] is not right[index] and (_differs(left[index], right[index]) or left[index] != right[index]):
            return index
    return count


def _differs(left: Message, right: Message) -> bool:
    """Cheap and sure when True: the two messages' text contents hash differently. (Anything may come in as a
    message here: it is checked once it is known to be new.)"""
    if not isinstance(left, dict) or not isinstance(right, dict):
        return False
    a, b = left.get("content"), right.get("content")
    return isinstance(a, str) and isinstance(b, str) and (len(a) != len(b) or hash(a) != hash(b))


def conversation_root(caller: str, explicit_session: str | None, client_session: ClientSession | None) -> str:
    """The root of the conversation tree a request belongs to (see hashing.root_hash): of the caller's key, the
    session it names, and the tree its client names."""
    return root_hash(caller, explicit_session, client_session.tree if client_session else None)


class Sessions:
    """Resolution and ingestion against the store, with the in-memory branch cache in front of it.

    Worker threads share it. Three locks, always taken in this order:
    - a conversation tree's (one caller, or one explicit session; `serial`): held while a request finds its branch
      and appends its new messages, which is short;
    - a branch's `serial`: held by the request that builds its working set on the branch, which may be long
      (compaction); only a request of the very same conversation waits for it;
    - a branch's `lock`: held while its messages are appended, measured (tokens, tool outcomes: after the tree's
      lock is let go) or settled, so settling one request (on a worker, beside the provider's latency) never races
      the next one, and nothing reads a new message's size before it is known.
    So the conversations of one key (one tree) are built side by side."""

    def __init__(self, store: Store, counter: TokenCounter, max_branches: int = 512, lock_stripes: int = 64,
                 ingest: IngestSettings = IngestSettings(), extractor: Extractor | None = None,
                 max_tokens: int | None = None) -> None:
        self.store = store
        self.counter = counter
        self.ingest = ingest  # how much of each message extraction reads, and for how long
        self.extractor: Extractor = extractor or InlineExtractor()
        self.cache = BranchCache(max_branches, max_tokens)
        store.on_lost_writes(self.writes_lost)
        # sessions whose writes were lost (the store failed): their next request stores what it shows first
        self._catching_up: set[str] = set()
        self._catching_up_lock = threading.Lock()
        # A fixed set of locks, a tree hashed to one: bounded memory; two trees sharing a stripe only wait in turn.
        self._stripes = [threading.RLock() for _ in range(lock_stripes)]

    def serial(self, root: str) -> threading.RLock:
        """The lock that puts the requests of the conversation tree `root` in line."""
        return self._stripes[int(root[:8], 16) % len(self._stripes)]

    def resolve(self, caller: str, explicit_session: str | None, messages: list[Message], model: str, policy: str,
                check: Callable[[list[Message], int], None] = lambda messages, start: None,
                observations: ObservationMatcher = NO_OBSERVATIONS, client_session: ClientSession | None = None) -> Resolved:
        """The branch this request continues, with its new messages ingested. `check(messages, start)` runs on the
        messages not seen before on this path, before anything is stored; what it raises propagates.
        `observations` tells which user messages are tool output sent in the user role."""
        with self.claimed(caller, explicit_session, messages, model, policy, check, observations,
                          client_session) as resolved:
            return resolved

    @contextmanager
    def claimed(self, caller: str, explicit_session: str | None, messages: list[Message], model: str, policy: str,
                check: Callable[[list[Message], int], None] = lambda messages, start: None,
                observations: ObservationMatcher = NO_OBSERVATIONS,
                client_session: ClientSession | None = None) -> Iterator[Resolved]:
        """resolve(), with the branch held for this request alone until the block ends. `client_session` is the
        session a client names in its own header (see hashing.root_hash)."""
        root = conversation_root(caller, explicit_session, client_session)
        # What this request holds until the request is built, let go in reverse order whatever any of them raises
        # (a lock left held would stall every later request of the conversation): the branch's serial lock, then
        # the session's lock among replicas sharing the store.
        held = ExitStack()
        # The branch's own lock, taken under the tree's, is kept past it: the new messages are measured (their
        # tokens counted, their tool outcomes read) while the key's other conversations find their paths.
        with ExitStack() as measuring:
            with self.serial(root):
                branch, known = self._from_cache(root, messages)
                hashes: list[str] | None = None  # of the request's whole path, when the store was asked for it
                if branch is None:
                    check(messages, 0)
                    branch, known, hashes = self._from_store(root, caller, explicit_session, messages, model, policy,
                                                             observations, client_session)
                else:
                    check(messages, known)
                # Waits only while a request of this very conversation is still being built on the branch (here,
                # or on another replica).
                branch.serial.acquire()
                held.callback(branch.serial.release)
                try:
                    held.enter_context(self.store.exclusive("session:" + branch.session_id))
                    if self._stale(branch):
                        # Another replica compacted this session since this one last read it: what the store holds
                        # now (read under the lock: all that replica's build wrote) replaces the cached path. (The
                        # dropped branch's lock is let go with the rest: no request of this process builds on it
                        # now.)
                        self.cache.drop(branch)
                        check(messages, 0)
                        branch, known, hashes = self._from_store(root, caller, explicit_session, messages, model,
                                                                 policy, observations, client_session)
                        branch.serial.acquire()
                        held.callback(branch.serial.release)
                    measuring.enter_context(branch.lock)
                    new = self._ingest(branch, caller, messages, known, model, policy, observations, hashes)
                except Exception:
                    self.cache.drop(branch)  # memory may be half-updated; the store is the truth
                    held.close()
                    raise
                evicted = self.cache.put(branch)
            try:
                self._measure(branch, len(branch.messages) - new)
                evicted += self.cache.recount(branch)  # its new messages' tokens count towards cache.max_tokens
            except Exception:
                self.cache.drop(branch)
                held.close()
                raise
        with held:
            for old in evicted:
                try:
                    self.settle(old)
                except Exception as error:  # its messages come again with its conversation's next request
                    get_logger().error("ingest_failed", error=f"{error.__class__.__name__}: {error}", exc_info=True)
            self._catch_up(branch)
            try:
                yield Resolved(branch, new)
            finally:
                if self.store.shared:  # what this build wrote is readable by the replica that takes the lock next
                    self.store.flush(branch.scope().sessions)

    def forget(self, branch: Branch) -> None:
        self.cache.drop(branch)

    def writes_lost(self, ids: Collection[str]) -> None:
        """The store lost these sessions' writes (it failed as they were made): their cached branches go (the store
        is the truth), and each one's next request stores the path again before it builds (see _catch_up)."""
        with self._catching_up_lock:
            self._catching_up.update(ids)
        self.forget_sessions(ids)

    def _catch_up(self, branch: Branch) -> None:
        """A branch of a session whose writes were lost is read again from the store, and what the store missed
        comes as new messages: they are extracted and stored now, before the working set is built, so that no ref
        it shows names content the store does not hold. If the store loses them again, StoreUnavailable: the
        request goes out as sent, showing no ref."""
        if not self._catching_up:  # every request asks: after an outage only do some have work here
            return
        sessions = set(branch.scope().sessions)
        with self._catching_up_lock:
            behind = sessions & self._catching_up
            self._catching_up -= behind
        if not behind:
            return
        self.settle(branch)
        self.store.flush(sessions)
        with self._catching_up_lock:
            if sessions & self._catching_up:
                raise StoreUnavailable("the store lost this conversation's writes again as it caught up")
        get_logger().info("session_caught_up", session=branch.session_id, messages=len(branch.messages))

    def forget_sessions(self, ids: Collection[str]) -> None:
        """Drop the cached branches of these sessions: the store is the truth (they were deleted, or their writes
        were lost while the store was cut off: the next request rebuilds them from it and writes what is missing)."""
        for branch in self.cache.all():
            if branch.session_id in ids:
                self.cache.drop(branch)

    def _stale(self, branch: Branch) -> bool:
        """Whether another replica compacted the branch's session since this process read it."""
        return self.store.shared and self.store.session_version(branch.session_id) != branch.version

    def settle(self, branch: Branch, wait: bool = True) -> None:
        """Extract and record the messages ingest deferred. Idempotent; run once the provider has the request,
        and before anything reads the branch's state. With wait=False, a branch a request is working on now is
        left to it."""
        if not branch.lock.acquire(blocking=wait):
            return
        try:
            if branch.settled >= len(branch.messages):
                return
            try:
                self._settle(branch)
            except Exception:
                self.cache.drop(branch)  # half-settled state must not be used; the next request rebuilds it
                raise
        finally:
            branch.lock.release()

    def save_fold(self, branch: Branch) -> None:
        """Save the branch's task state as folded so far (at a compaction), for the next cold start of its path."""
        with branch.lock:
            covered = branch.settled
            if covered:
                self.store.save_fold(branch.session_id, branch.hashes[covered - 1], covered,
                                     fold(branch.state, branch.fact_nodes, branch.hashes[:covered]))

    def settle_all(self, caller: str | None = None, wait: bool = True) -> set[str]:
        """settle() every cached conversation, or those of one caller's key (other keys' are not touched). With
        wait=False, one a request is working on now is passed over, not waited for: a request's answer waits for
        its own settling, so it holds nothing answered that is not in the store yet. The sessions of those
        conversations: the writes a view of the caller's sessions waits for."""
        sessions: set[str] = set()
        for branch in self.cache.all():
            if caller is None or branch.caller == caller:
                self.settle(branch, wait)
                sessions.update(branch.node_sessions)
                sessions.add(branch.session_id)
        return sessions

    # --- finding the path -----------------------------------------------------------------------------------

    def _from_cache(self, root: str, messages: list[Message]) -> tuple[Branch | None, int]:
        best, best_length = None, 0
        for candidate in self.cache.candidates(root):
            length = common_prefix(candidate.messages, messages)
            if length > best_length:
                best, best_length = candidate, length
        if best is None:
            return None, 0
        if best_length == len(best.messages):
            return best, best_length  # the common case: the request extends (or repeats) a known path
        # A fork or a retry from an earlier turn: the shared part is known, its state comes from the store.
        self.settle(best)
        fork = best.truncated(best_length)
        self._load_path(fork)
        return fork, best_length

    def _from_store(self, root: str, caller: str, explicit_session: str | None, messages: list[Message],
                    model: str, policy: str, observations: ObservationMatcher,
                    client_session: ClientSession | None = None) -> tuple[Branch, int, list[str]]:
        hashes = chain(root, messages)
        nodes = self.store.find_nodes(hashes)
        deepest = max((i for i, digest in enumerate(hashes) if digest in nodes), default=-1)
        if deepest >= 0:
            session_id = nodes[hashes[deepest]].session_id
            # its row was written apart from its messages: if that write was lost (the store cut off as it was
            # made), every key-scoped read of the conversation would answer 404; made again, or left as it is
            self.store.create_session(session_id, caller, explicit_session, model, policy)
        else:
            session_id = session_id_for(root, hashes[0], explicit_session)
            named = client_session if explicit_session is None else None
            parent = self._parent(root, caller, named.parent) if named is not None and named.parent else None
            self.store.create_session(session_id, caller, explicit_session, model, policy,
                                      client_id=named.own if named else None, parent_id=parent)
        branch = Branch(session_id, root, explicit_session is not None, client=client_session is not None,
                        client_id=client_session.own if client_session else "", caller=caller)
        rows = [nodes[digest] for digest in hashes[: deepest + 1]]
        self._adopt_rows(branch, messages[: deepest + 1], rows, observations)
        self._load_path(branch)
        return branch, deepest + 1, hashes

    def _parent(self, root: str, caller: str, named: str) -> str | None:
        """The session of the conversation the client names as a new one's parent: a recently seen one, else the
        store's latest of that name; None when there is none."""
        for branch in reversed(self.cache.candidates(root)):
            if branch.client_id == named:
                return branch.session_id
        found = self.store.find_sessions(named, caller)
        return str(found[0]["id"]) if found else None

    def _adopt_rows(self, branch: Branch, messages: Sequence[Message], rows: Sequence[NodeRow],
                    observations: ObservationMatcher) -> None:
        self._settle(branch)
        for message, row in zip(messages, rows):
            branch.messages.append(message)
            branch.hashes.append(row.hash)
            branch.node_sessions.append(row.session_id)
            branch.refs.append(row.ref)
            branch.tokens.append(row.tokens)
            branch.tool_names.append(row.tool or "")
            branch.gists.append(row.gist or "")
            branch.outcomes.append(row.outcome or "")
            branch.names.append(tuple(row.names.split()))
            branch.observed.append(observations.is_observation(branch.messages, len(branch.messages) - 1,
                                                               first_user(branch.messages)))
            branch.total_tokens += row.tokens
        branch.settled = len(branch.messages)

    def _load_path(self, branch: Branch) -> None:
        """State, ledger ids and the latest compaction, folded from the store along this path only."""
        sessions = branch.scope().sessions
        branch.state, branch.fact_nodes = path_state(self.store, sessions, branch.hashes)
        if self.store.shared:  # read first: a compaction meanwhile leaves it behind the checkpoint, never ahead
            branch.version = self.store.session_version(branch.session_id)
        checkpoint = self.store.latest_checkpoint_on_path(sessions, branch.hashes)
        branch.epoch = epoch_from_dict(checkpoint) if checkpoint else None
        branch.built = None
        branch.tail_cache = None  # keyed by the state's version, which a state read again may repeat

    # --- ingesting what is new ------------------------------------------------------------------------------

    def _ingest(self, branch: Branch, caller: str, messages: list[Message], known: int, model: str, policy: str,
                observations: ObservationMatcher, hashes: list[str] | None = None) -> int:
        """Append the request's messages after the branch's first `known` ones, their sizes left for _measure;
        `hashes` (of the whole path, when already made) spares hashing them again: a megabyte costs milliseconds
        to hash."""
        if known == len(messages) and known == len(branch.messages):
            branch.messages[:] = messages  # same content; keep the newest objects for identity checks
            return 0
        parent = branch.hashes[known - 1] if known else branch.root
        new_hashes = hashes[known:] if hashes is not None else chain(parent, messages[known:])
        stored = self.store.find_nodes(new_hashes)
        if stored:
            # Known to the store but not to this cache (another branch evicted, or another worker): adopt them.
            count = max(i for i, digest in enumerate(new_hashes) if digest in stored) + 1
            self._adopt_rows(branch, messages[known:known + count], [stored[d] for d in new_hashes[:count]],
                             observations)
            branch.session_id = branch.node_sessions[-1]  # the stored path may have forked into a session of its own
            self._load_path(branch)
            known += count
            new_hashes = new_hashes[count:]
        if new_hashes and known and not branch.explicit and self._diverges(branch, known, new_hashes[0]):
            # Another conversation went on differently from here: from this message on, this one is a session of
            # its own (its own id, refs, recall and state); it still reads its beginning from the session it forked
            # from. What the branch has not written yet belongs to that session, so it is written first.
            self._settle(branch)
            forked_from, branch.session_id = branch.session_id, session_id_for(branch.root, new_hashes[0], None)
            self.store.create_session(branch.session_id, caller, None, model, policy, forked_from=forked_from)
            branch.version = 0
        task = first_user(messages)
        for offset, digest in enumerate(new_hashes):
            index = known + offset
            branch.messages.append(messages[index])
            branch.observed.append(observations.is_observation(branch.messages, index, task))
            branch.hashes.append(digest)
            branch.node_sessions.append(branch.session_id)
            branch.refs.append(ref_of(digest))
            branch.tokens.append(0)  # counted by _measure, out of the tree's lock
            branch.tool_names.append("")
            branch.gists.append("")
            branch.outcomes.append("")
            branch.names.append(())
        branch.recorded_as = (model, policy)
        return len(new_hashes)

    def _measure(self, branch: Branch, start: int) -> None:
        """The token counts and tool outcomes of the messages _ingest appended from `start` on. Called once the
        tree's lock is let go (the key's other conversations find their paths meanwhile), under the branch's own,
        so that nothing reads these messages' sizes before they are known."""
        messages = branch.messages
        task = first_user(messages)
        lookup = CallLookup(messages)
        for index in range(start, len(messages)):
            message = messages[index]
            tokens = self.counter.message(message)
            branch.tokens[index] = tokens
            branch.total_tokens += tokens
            # A tool result's outcome is known at once (failures trigger retrieval); the rest waits for settle().
            if branch.observed[index] or is_tool_result(message):
                branch.tool_names[index], branch.gists[index], branch.outcomes[index] = \
                    tool_outcome(messages, index, task, branch.observed[index], lookup)

    def _diverges(self, branch: Branch, known: int, first_new: str) -> bool:
        """Whether the message after the branch's first `known` ones already went on differently in another
        conversation: a path in the cache, or a node in the store."""
        parent = branch.hashes[known - 1]
        for other in self.cache.candidates(branch.root):
            if other is not branch and len(other.hashes) > known and other.hashes[known - 1] == parent \
                    and other.hashes[known] != first_new:
                return True
        return self.store.other_child(parent, first_new)

    def _settle(self, branch: Branch) -> None:
        messages = branch.messages
        if branch.settled >= len(messages):
            return
        task = first_user(messages)
        records: list[NewMessage] = []
        facts: list[tuple[str, Fact, str | None]] = []
        actions: list[tuple[str, Action]] = []
        indices = range(branch.settled, len(messages))
        lookup = CallLookup(messages)
        items = self.extractor([Job(messages[index], context_for(messages, index, branch.refs[index], task,
                                                                 branch.observed[index], lookup),
                                    branch.observed[index], self.ingest.extract_chars, self.ingest.extract_ms,
                                    branch.tokens[index])
                                for index in indices])
        for index, item in zip(indices, items):
            digest, ref = branch.hashes[index], branch.refs[index]
            if item.skipped:  # never blocks: the message is stored and recallable, only these readings are missing
                get_logger().warning("extract_skipped", session=branch.session_id, message=index, ref=ref,
                                     stages=list(item.skipped), cap_ms=self.ingest.extract_ms)
            records.append(NewMessage(digest, branch.hashes[index - 1] if index else None, index, messages[index],
                                      branch.tokens[index], ref, item.tool, item.gist, item.outcome, item.evidence,
                                      item.names))
            for fact in item.extraction.facts:
                key = (fact.kind, fact.key)
                facts.append((digest, fact, branch.fact_nodes.get(key)))
                branch.fact_nodes[key] = digest
            actions.extend((digest, action) for action in item.extraction.actions)
            branch.state.apply(item.extraction)
            branch.tool_names[index], branch.gists[index], branch.outcomes[index] = item.tool, item.gist, item.outcome
            branch.names[index] = item.names
        model, policy = branch.recorded_as
        self.store.record(branch.scope(), records, facts, actions, model, policy, len(messages))
        branch.settled = len(messages)


def path_state(store: Store, sessions: Sequence[str], hashes: Sequence[str]) -> tuple[TaskState, dict[tuple[str, str], str]]:
    """The task state folded from the ledger along one path only (whose nodes lie in `sessions`), and the node of
    each key's latest value. It starts from the fold saved at the latest compaction on the path, when there is
    one: a cold start of a long session then reads the ledger of the messages after it only."""
    saved = store.fold_on_path(sessions, hashes)
    state, fact_nodes, covered = TaskState(), {}, 0
    if saved is not None:
        covered, data = saved
        state, fact_nodes = unfold(data, hashes)
    facts, actions = store.path_records(sessions, hashes[covered:])
    for node, fact in facts:
        state.apply_fact(fact)
        fact_nodes[(fact.kind, fact.key)] = node
    state.actions.extend(action for _, action in actions)
    return state, fact_nodes


def fold(state: TaskState, fact_nodes: dict[tuple[str, str], str], hashes: Sequence[str]) -> Callable[[], object]:
    """What path_state would fold from the ledger along `hashes`, as plain data made when called (by the store's
    writer): facts in the state's order, and each key's node as its index on the path. Takes copies now, so the
    branch may change meanwhile; the facts and actions themselves are immutable."""
    facts, actions, version = list(state.facts.values()), list(state.actions), state.version
    snapshots = [(root, turn, tuple(keys)) for root, (turn, keys) in state.snapshots.items()]
    next_steps, nodes = tuple(state.next_steps), dict(fact_nodes)
    candidates = list(state.candidates.values())

    def data() -> object:
        index = {digest: position for position, digest in enumerate(hashes)}
        return {"facts": [[f.kind, f.key, f.value, f.turn, f.evidence_ref, f.source] for f in facts],
                "actions": [[a.turn, a.tool, a.arguments, a.outcome, a.gist, a.call_id, a.evidence_ref] for a in actions],
                "snapshots": snapshots, "next_steps": next_steps, "version": version,
                "candidates": [[f.kind, f.key, f.value, f.turn, f.evidence_ref, f.source] for f in candidates],
                "nodes": [[kind, key, index[node]] for (kind, key), node in nodes.items()]}

    return data


def unfold(data: dict[str, Any], hashes: Sequence[str]) -> tuple[TaskState, dict[tuple[str, str], str]]:
    """The state and key nodes `fold` saved, on the path it was saved along."""
    candidates = [Fact(*f) for f in data.get("candidates", ())]
    state = TaskState(facts={fact_key(fact): fact for fact in (Fact(*f) for f in data["facts"])},
                      candidates={(fact.kind, fact.key): fact for fact in candidates},
                      actions=[Action(*a) for a in data["actions"]], version=data["version"],
                      snapshots={root: (turn, set(keys)) for root, turn, keys in data["snapshots"]},
                      next_steps={(kind, key) for kind, key in data["next_steps"]})
    return state, {(kind, key): hashes[position] for kind, key, position in data["nodes"]}


def epoch_to_dict(epoch: Epoch) -> dict[str, object]:
    return asdict(epoch)


def epoch_from_dict(data: dict[str, object]) -> Epoch:
    values = dict(data)
    values["kept"] = tuple(values.get("kept", ()))  # type: ignore[arg-type]
    values["digest_lines"] = tuple(values.get("digest_lines", ()))  # type: ignore[arg-type]
    for key in ("pastes", "dropped_users", "names", "repeats"):
        values[key] = tuple(values.get(key, ()))  # type: ignore[arg-type]
    values["parts"] = tuple(tuple(part) for part in values.get("parts", ()))  # type: ignore[union-attr]
    return Epoch(**values)  # type: ignore[arg-type]
