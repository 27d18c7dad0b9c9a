"""The request path inside workset: resolve the session, ingest, plan, build. The server and the in-process eval
both call Engine.prepare, so what the eval measures is what the proxy forwards."""

from __future__ import annotations

import fnmatch
import time
import uuid
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable

from .config import Config
from .decisions import Decision, as_sent, decide, epoch_why
from .extract.actions import verification
from .extract.approvals import approval_subject
from .extract.text import flat, normalize
from .extractors import Extractor
from .ingest import context_for, newest_changes
from .messages import is_tool_result, message_text, tool_calls
from .recall import RECALL_DEFINITION, offer_tool
from .policy import Policy
from .records import APPROVAL, OUTCOME, PLAN, RULE, ClientSession, Fact, Message
from .retrieval import elided_mentions, failure_advice, irreversible_guard, latest_user_text, recent_tool_outcomes
from .session import Branch, Resolved, Sessions, epoch_to_dict
from .summarize import Job, Proposal, Summary, anchored, job_for, proposed_facts, split_facts, state_kept, verify
from .state import render_state, state_changes, state_snapshot
from .storage import Store
from .tokens import Excerpter, TokenCounter
from .validate import check_messages
from .workingset import (
    WORKSET_TAG,
    Budget,
    BuiltPrefix,
    Conversation,
    Epoch,
    compacted_message,
    digest_quota,
    extend_prefix,
    first_user,
    head_room,
    names_within,
    part_tokens,
    plan_compaction,
    state_message,
    verbatim,
    with_tail_state,
)


class UnknownPolicy(LookupError):
    """The x-workset-policy header names no loaded policy."""


@dataclass
class Prepared:
    """What to forward, and the figures reported in headers and logs."""

    body: dict[str, Any]
    session_id: str | None
    policy: str
    tokens_original: int
    tokens_sent: int
    budget: int = 0
    room: int = 0  # of the budget, what the untouchable parts (tools, system prompt, task) leave
    compacted: bool = False
    rewritten: bool = False
    note: str = ""  # why the messages were forwarded unchanged, when they were
    new_messages: int = 0
    branch: Branch | None = field(default=None, repr=False)  # for settle() once the provider has the request
    recall: bool = False  # the workset_recall tool was offered: the answer must go through proxy.recall
    retrieved: bool = False  # event-driven retrieval added content to this request
    epoch: Epoch | None = None  # the compaction this request made, if any (reason, summary and state checks)
    # Leading messages of body["messages"] that stay byte-identical until the next compaction (what a provider's
    # prompt cache can hold), and of those the frozen head (system, task, compacted turns): where a wire format
    # that marks cache breakpoints puts them. 0 when the messages were forwarded as sent.
    stable: int = 0
    head: int = 0
    decision: Decision | None = field(default=None, repr=False)  # what workset did, message by message, and why
    # of tokens_original, what a prompt cache would have held had every request of the session been forwarded
    # whole (the leading messages shared with the previous request, and the tools): for the savings figures
    whole_reused: int = 0


class Engine:
    def __init__(self, config: Config, policies: dict[str, Policy], store: Store, counter: TokenCounter,
                 context_window: Callable[[str], int | None] = lambda model: None,
                 extractor: Extractor | None = None) -> None:
        self.config = config
        self.policies = policies
        self.store = store
        self.counter = counter
        self.excerpt = Excerpter(counter)
        self.sessions = Sessions(store, counter, config.cache.max_sessions, ingest=config.ingest, extractor=extractor,
                                 max_tokens=config.cache.max_tokens)
        self._context_window = context_window
        self._budgets: dict[tuple[str, str], int] = {}
        self.recall_tokens = counter.tools([RECALL_DEFINITION])

    def policy_for(self, model: str, override: str | None = None) -> Policy:
        if override:
            policy = self.policies.get(override)
            if policy is None:
                raise UnknownPolicy(f"unknown policy {override!r} (known: {', '.join(sorted(self.policies))})")
            return policy
        return self.policies[self.config.policy_name_for(model)]

    def budget_tokens(self, model: str, policy: Policy, untouchable: int = 0) -> int:
        """The request's budget: max_input_tokens, or for auto a share of the model's window with the room (what
        `untouchable` tokens of tools, system prompt and task leave) capped at auto_max_tokens, so an agent with
        a large system prompt still gets a working set."""
        rules = policy.budget
        if rules.max_input_tokens != "auto":
            return int(rules.max_input_tokens)
        key = (model, policy.name)
        if key not in self._budgets:
            window = self._context_window(model)
            self._budgets[key] = int(window * rules.auto_share) if window else rules.auto_fallback_tokens
        return min(self._budgets[key], untouchable + rules.auto_max_tokens)

    def settle(self, prepared: Prepared) -> None:
        """Finish ingesting the request's new messages (extraction, store writes): called once the provider has
        the request, so this work overlaps the provider's latency instead of adding to it."""
        if prepared.branch is not None:
            self.sessions.settle(prepared.branch)

    def prepare(self, body: dict[str, Any], caller: str, explicit_session: str | None = None,
                policy_name: str | None = None, client_session: ClientSession | None = None,
                check: Callable[[list[Message], int], None] = check_messages) -> Prepared:
        """What to forward for one request in the internal (chat) form. Raises WorksetError when a message not seen
        before is malformed (`check`: a wire format translated at the edge was checked there). Safe to call from
        several threads: the request holds its conversation's branch while it is built (see Sessions.claimed);
        other conversations go on meanwhile."""
        model = str(body["model"])
        policy = self.policy_for(model, policy_name)
        with self.sessions.claimed(caller, explicit_session, body["messages"], model, policy.name, check,
                                   policy.observation_matcher, client_session) as resolved:
            return self._build(body, resolved, model, policy)

    def handoff(self, body: dict[str, Any], caller: str, explicit_session: str | None = None,
                policy_name: str | None = None, client_session: ClientSession | None = None,
                check: Callable[[list[Message], int], None] = check_messages) -> tuple[str, str]:
        """What stands for the conversation when its client drops the history (Codex compacting through a provider
        that cannot): the compacted-turns message of a compaction that removes everything it may (all but the
        task, the user's words and the newest turn), with the task state, the digest of every step and the refs
        to recall them by; and the session id. The conversation is ingested as for any request (in the client's
        session tree, so those refs are recalled from the next request); nothing else changes (its working set and
        cache stay as they were)."""
        model = str(body["model"])
        policy = self.policy_for(model, policy_name)
        with self.sessions.claimed(caller, explicit_session, body["messages"], model, policy.name, check,
                                   policy.observation_matcher, client_session) as resolved:
            branch = resolved.branch
            self.sessions.settle(branch)
            conversation = branch.conversation()
            pairing = branch.pairing.feed(body["messages"])
            untouchable = self.counter.tools(body.get("tools")) + branch.untouchable_tokens()
            budget = Budget.of(policy, self.budget_tokens(model, policy, untouchable), untouchable)
            everything = Budget.of(policy, untouchable + 1, untouchable)  # a target nothing removable fits under
            policy = replace(policy.for_budget(budget.limit), recent_turns=1)
            goal = _goal(conversation.messages)
            epoch = plan_compaction(conversation, pairing.units if pairing.complete else [], None, policy, everything,
                                    0, 0, self.counter, self.excerpt, "client compaction",
                                    digest_limit=digest_quota(policy, budget),
                                    names_limit=budget.share(policy.digest.names_share))
            state = render_state(branch.state, goal, policy.state, policy.state.quota(budget.room),
                                 self.counter.cached_text, in_view=verbatim(conversation, epoch, policy),
                                 focus=_dialogue(conversation), task=first_user(conversation.messages))
            message = compacted_message(names_within(replace(epoch, head_state=state), policy.digest.own_max_tokens,
                                                     self.counter))
            return (message_text(message) if message else ""), branch.session_id

    def _build(self, body: dict[str, Any], resolved: Resolved, model: str, policy: Policy) -> Prepared:
        messages: list[Message] = body["messages"]
        branch = resolved.branch
        try:
            tools_tokens = self.counter.tools(body.get("tools"))
            original = branch.total_tokens + tools_tokens
            whole_reused = _whole_reused(branch, tools_tokens)
            unchanged = Prepared(body, branch.session_id, policy.name, original, original,
                                 new_messages=resolved.new_messages, branch=branch, whole_reused=whole_reused)
            if policy.passthrough:
                unchanged.note = "passthrough policy"
                unchanged.decision = as_sent(branch.hashes, unchanged.note)
                return unchanged
            pairing = branch.pairing.feed(messages)
            if not pairing.complete:
                unchanged.note = "tool calls and results not paired: forwarded as sent"
                unchanged.decision = as_sent(branch.hashes, unchanged.note)
                return unchanged
            if policy.recall.enabled:
                tools_tokens += self.recall_tokens  # offered whenever refs show; reserved so the budget holds
            conversation = branch.conversation()
            untouchable = tools_tokens + branch.untouchable_tokens()
            budget = Budget.of(policy, self.budget_tokens(model, policy, untouchable), untouchable)
            policy = policy.for_budget(budget.limit)
            epoch = branch.current_epoch(conversation)
            built_for = _prefix_key(policy, budget, epoch)
            prefix = branch.built
            if prefix is None or branch.built_for != built_for or prefix.upto > len(messages):
                prefix = BuiltPrefix(built_for)
            extend_prefix(prefix, conversation, epoch, policy, self.counter, self.excerpt)
            goal = _goal(messages)
            retrieved = self._retrieve(branch, body, policy, budget, prefix, resolved.new_messages)
            tail, tail_tokens = self._tail(branch, goal, policy, budget, epoch is not None, retrieved, epoch)
            total = prefix.tokens + tools_tokens + tail_tokens
            compacted = False
            reason = "budget" if total > budget.trigger else ""
            phase_floor = max(budget.target, budget.level(policy.phases.min_ratio))
            if not reason and total > phase_floor and policy.phases.enabled and resolved.new_messages:
                boundary = phase_boundary(branch, policy)
                reason = f"phase: {boundary}" if boundary else ""
            if reason:
                self.sessions.settle(branch)  # compaction reads the state and the tool-output gists
                result = self._compact(branch, conversation, pairing.units, epoch, goal, policy, budget,
                                       tools_tokens, total, retrieved, reason)
                if result is not None:
                    epoch, prefix, tail, tail_tokens = result
                    built_for, compacted = prefix.epoch_key, True
                    total = prefix.tokens + tools_tokens + tail_tokens
            branch.built, branch.built_for = prefix, built_for
            out = dict(body)
            out["messages"] = with_tail_state(list(prefix.messages), tail)
            tail_last = tail is None or out["messages"][-1] is tail
            stable = len(prefix.messages) - (0 if tail_last else 1)
            recall = False
            if policy.recall.enabled:
                offered = offer_tool(out) if prefix.refs or policy.recall.offer == "always" else None
                recall = offered is not None
                out = offered or out
                if not recall:
                    total -= self.recall_tokens
            why = {"policy": policy.name, "recent_turns": policy.recent_turns,
                   "tool_output_tokens": policy.tool_outputs.max_tokens, "paste_tokens": policy.user_messages.paste_tokens,
                   "budget": budget.limit, "trigger": budget.trigger, "epoch": epoch_why(epoch),
                   "compacted": epoch.reason if compacted and epoch else "", "recall": recall,
                   "retrieved": bool(retrieved), "state": policy.state.position}
            return Prepared(out, branch.session_id, policy.name, original, total, budget.limit, budget.room, compacted,
                            rewritten=True, new_messages=resolved.new_messages, branch=branch, recall=recall,
                            retrieved=bool(retrieved), epoch=epoch if compacted else None, stable=stable,
                            head=prefix.head, decision=decide(prefix, branch.hashes, tail, tail_last, why),
                            whole_reused=whole_reused)
        except Exception:
            self.sessions.forget(branch)
            raise

    def _compact(self, branch: Branch, conversation: Conversation, units: list[tuple[int, int]],
                 epoch: Epoch | None, goal: str, policy: Policy, budget: Budget, tools_tokens: int,
                 before: int, retrieved: str, reason: str = "budget") -> tuple[Epoch, BuiltPrefix, Message | None, int] | None:
        """A new epoch down to the target, recorded as a checkpoint. If the parts that cannot shrink (state,
        digest, names index) keep it over the budget, it is planned again without digest and names, and the
        state's key facts are cut to what the budget leaves (constraints and pending items stay whole). None when
        compaction would not shrink the working set (what is left is pinned): then nothing changes, and the
        prefix stays cached."""
        state_limit = policy.state.quota(budget.room)
        task = first_user(conversation.messages)
        no_digest = policy.summarizer.mode == "off"
        waiting = self._finished_summary(branch, policy)
        focus = _dialogue(conversation)
        for lean in (False, True):
            tail, tail_tokens = self._tail(branch, goal, policy, budget, True, retrieved)
            reserved = state_limit if policy.state.position != "tail" else 0
            summary_room = policy.summarizer.max_tokens if policy.summarizer.mode == "llm" else 0
            new_epoch = plan_compaction(conversation, units, epoch, policy, budget,
                                        tools_tokens + tail_tokens + summary_room, reserved, self.counter,
                                        self.excerpt, reason, digest_limit=0 if lean or no_digest else None,
                                        names_limit=0 if lean else None)
            new_epoch = _with_summary(new_epoch, waiting, conversation)
            key = _prefix_key(policy, budget, new_epoch)
            prefix = extend_prefix(BuiltPrefix(key), conversation, new_epoch, policy, self.counter, self.excerpt)
            if reserved:
                # The frozen state lists the facts that are no longer in view elsewhere first. It gets its quota;
                # on the lean pass (no digest, no names index), what the budget leaves: facts give way last.
                in_view = verbatim(conversation, new_epoch, policy)
                limit, names = state_limit, new_epoch.names
                head_limit = head_room(policy.digest.own_max_tokens, prefix)
                for _ in range(3 if lean else 1):
                    head_state = render_state(branch.state, goal, policy.state, limit, self.counter.cached_text,
                                              in_view=in_view, focus=focus, task=task)
                    # names the state or the digest shows need no place in the index of elided names, which gets
                    # what the state and the digest leave of workset's text at the head
                    new_epoch = names_within(replace(new_epoch, head_state=head_state, names=names), head_limit,
                                             self.counter)
                    prefix = extend_prefix(BuiltPrefix(key), conversation, new_epoch, policy, self.counter,
                                           self.excerpt)
                    over = prefix.tokens + tools_tokens + tail_tokens - budget.limit
                    if over <= 0:
                        break
                    limit -= over
            after = prefix.tokens + tools_tokens + tail_tokens
            if after <= budget.limit:
                break
        if after >= before:
            return None
        state_text = new_epoch.head_state or (message_text(tail) if tail else "")
        lost = state_kept(branch.state, state_text, task) if policy.state.position != "head" or new_epoch.head_state else []
        new_epoch = replace(new_epoch, tokens_before=before, tokens_after=after,
                            state_check="ok" if not lost else "lost: " + "; ".join(lost[:3]),
                            parts=part_tokens(new_epoch, self.counter))
        if waiting is not None and waiting.used(new_epoch, epoch):  # the next job starts from it
            self.store.summary_used(branch.session_id, waiting.job_id)
        snapshot = state_snapshot(branch.state, goal, next_action(branch), new_epoch.summary, new_epoch.summary_check)
        self.store.add_checkpoint(branch.session_id, new_epoch.tip_hash, new_epoch.tip, new_epoch.reason, before,
                                  after, epoch_to_dict(new_epoch), snapshot)
        self.sessions.save_fold(branch)
        branch.epoch = new_epoch
        branch.version += 1  # as the checkpoint's write bumps the session's (this request holds the session)
        return new_epoch, prefix, tail, tail_tokens

    def _finished_summary(self, branch: Branch, policy: Policy) -> Waiting | None:
        """The session's summary jobs in the store (whichever replica ran them); None when the policy wants no
        summary."""
        return Waiting.of(self.store.summary_jobs(branch.session_id)) if policy.summarizer.mode == "llm" else None

    def summary_job(self, prepared: Prepared) -> Job | None:
        """A summary to precompute for this request's branch, or None: only with summarizer.mode llm, past
        precompute_ratio of the budget, when no job of the session runs and no usable candidate waits; or the job
        of a replica that died running it (its lease ran out). Claimed in the store for this process to run."""
        branch = prepared.branch
        policy = self.policies.get(prepared.policy)
        if branch is None or policy is None or policy.summarizer.mode != "llm" or not prepared.rewritten:
            return None
        budget = Budget.of(policy, prepared.budget, prepared.budget - prepared.room)
        if prepared.tokens_sent <= budget.level(policy.summarizer.precompute_ratio):
            return None
        waiting = Waiting.of(self.store.summary_jobs(branch.session_id))
        now, claim = time.time(), uuid.uuid4().hex
        lease_until = now + policy.summarizer.timeout_s  # its runner has given up by then
        if waiting.lease_until is not None:
            if waiting.lease_until > now:
                return None  # running here or on another replica
            taken = self.store.take_over_summary(branch.session_id, claim, lease_until)
            return None if taken is None else replace(Job(**taken), claim=claim)
        with branch.serial:  # the branch's state is read; the store's claim below needs no lock of ours
            job = self._summary_job(branch, policy.for_budget(budget.limit), budget, waiting.candidate)
        if job is None:
            return None
        job = replace(job, claim=claim)
        return job if self.store.start_summary(branch.session_id, asdict(job), claim, lease_until) else None

    def _summary_job(self, branch: Branch, policy: Policy, budget: Budget, waiting: Summary | None) -> Job | None:
        self.sessions.settle(branch)
        conversation = branch.conversation()
        pairing = branch.pairing
        if not pairing.complete:
            return None
        epoch = branch.current_epoch(conversation)
        if waiting is not None and waiting.usable and waiting.start == (epoch.summary_through if epoch else -1):
            return None  # a usable summary that continues the current one waits for the next compaction
        planned = plan_compaction(conversation, pairing.units, epoch, policy, budget, 0, 0, self.counter, self.excerpt)
        removed = planned.removed(first_user(conversation.messages))
        state_text = render_state(branch.state, _goal(conversation.messages), policy.state)
        return job_for(conversation, branch.session_id, removed, epoch.summary if epoch else "",
                       epoch.summary_through if epoch else -1, state_text, policy.summarizer.model,
                       policy.summarizer.max_tokens, policy.summarizer.propose_facts)

    def summary_done(self, prepared: Prepared, job: Job, text: str | None, failure: str = "") -> Summary:
        """Record a finished job in the store: verified, it waits there for the session's next compaction (on
        whichever replica it comes)."""
        branch = prepared.branch
        assert branch is not None
        with branch.serial:
            return self._summary_done(prepared, branch, job, text, failure)

    def _summary_done(self, prepared: Prepared, branch: Branch, job: Job, text: str | None, failure: str) -> Summary:
        if text is None:
            result = Summary(job.start, job.through, job.through_hash, "", failure or "failed")
        else:
            text, proposals = split_facts(text)
            self._add_proposed(branch, proposed_facts(job, proposals))
            state_text = render_state(branch.state, _goal(branch.messages), self.policies[prepared.policy].state)
            result = Summary(job.start, job.through, job.through_hash, text, verify(job, text, state_text))
        self.store.finish_summary(job.session_id, job.claim, result.text, result.check)
        return result

    def _add_proposed(self, branch: Branch, proposals: list[Proposal]) -> None:
        """Facts the summariser proposed and verification found word for word in the outputs they cite: into the
        ledger (stored at the message that holds them), as a tool output's facts."""
        facts: list[tuple[str, Fact, str | None]] = []
        for proposal in proposals:
            turn = proposal.turn
            if turn >= len(branch.refs) or branch.refs[turn] != proposal.ref:
                continue  # the branch is not the path the job read
            kind = RULE if proposal.kind == "rule" else OUTCOME
            fact = Fact(kind, f"proposed: {normalize(proposal.quote)[:160]}", proposal.quote, turn, proposal.ref, "tool")
            key = (fact.kind, fact.key)
            if key in branch.state.facts:
                continue
            facts.append((branch.hashes[turn], fact, branch.fact_nodes.get(key)))
            branch.fact_nodes[key] = branch.hashes[turn]
            branch.state.apply_fact(fact)
        if facts:
            model, policy = branch.recorded_as
            self.store.record(branch.scope(), [], facts, [], model, policy, len(branch.messages))

    def _tail(self, branch: Branch, goal: str, policy: Policy, budget: Budget, after_compaction: bool,
              retrieved: str = "", frozen: Epoch | None = None) -> tuple[Message | None, int]:
        """The message after the newest one: the live state (full for position tail, the brief reminder for both;
        for position head, what changed since the state was frozen at the compaction `frozen`) and whatever
        event-driven retrieval brought back. The state part is cached until the state changes."""
        rules = policy.state
        state_text = ""
        changes = rules.position == "head" and frozen is not None and bool(frozen.head_state) and \
            rules.changes_max_tokens > 0
        if changes or (rules.position != "head" and (after_compaction or rules.before_compaction)):
            if not changes:
                self.sessions.settle(branch)
            # the changes are read from the state as of the last settled request (settling this request's messages
            # waits until the provider has it), and the files the newest tool results changed from their calls
            newest = tuple(newest_changes(branch.messages, branch.settled, branch.observed)) if changes else ()
            key = (branch.state.version, policy.name, budget.room, goal[:64], frozen.key if frozen else "", newest)
            cached = branch.tail_cache
            if cached is None or cached[0] != key:
                text = self._changes(branch, goal, policy, frozen, newest) if changes and frozen is not None else \
                    render_state(branch.state, goal, rules, rules.quota(budget.room), self.counter.cached_text,
                                 brief=rules.position == "both")  # at the tail the task's constraints are repeated:
                # the seeds put constraints at the head and the tail of what a model reads
                message = state_message(text) if text else None
                tokens = self.counter.message(message, generated=True) if message else 0
                cached = branch.tail_cache = (key, text, message, tokens)
            if not retrieved:
                return cached[2], cached[3]
            state_text = cached[1]
        if not retrieved:
            return None, 0
        message = state_message("\n\n".join(part for part in (state_text, RETRIEVED + "\n" + retrieved) if part))
        return message, self.counter.message(message)

    def _changes(self, branch: Branch, goal: str, policy: Policy, frozen: Epoch, newest: tuple[str, ...]) -> str:
        """What the state holds now that the state frozen into the cached prefix at the last compaction does not
        (closed items, checks' verdicts, approvals, files changed), within state.changes_max_tokens: the model never
        reads a stale state, and the prefix stays byte-identical."""
        # only the sections that are never cut are compared (state.CHANGE_SECTIONS, and pending items): rendered as
        # at the compaction, without the ranking of key facts, so a request pays for those sections only
        # the figures a column holds, when the dialogue since the compaction names it ("p95 of both?")
        said_since = "\n".join(message_text(m) for m in branch.messages[frozen.tip + 1:]
                                if m.get("role") in ("user", "assistant"))
        now = render_state(branch.state, goal, policy.state, brief=True, task=first_user(branch.messages),
                           focus="\0" + said_since)
        text = state_changes(frozen.head_state, now, newest)
        cut, dropped = self.counter.head(text, policy.state.changes_max_tokens)
        return cut.rsplit("\n", 1)[0] + "\n- … (more changes: recall by ref or query)" if dropped else cut

    def _retrieve(self, branch: Branch, body: dict[str, Any], policy: Policy, budget: Budget, prefix: BuiltPrefix,
                  new_messages: int) -> str:
        """What event-driven retrieval brings into this request (see proxy.retrieval), within its quota."""
        rules = policy.retrieval
        parts: list[str] = []
        answers = self.store.take_pending_recall(branch.session_id)
        if answers:
            parts.append("Answers to the workset_recall calls made with your last tool calls:\n" + "\n\n".join(answers))
        if not rules.enabled or not new_messages:
            return "\n\n".join(parts)
        messages = branch.messages
        if is_tool_result(messages[-1]):
            outcomes = recent_tool_outcomes(messages, branch.outcomes, branch.tool_names)
            parts.append(failure_advice(branch.state.actions, outcomes))
        # the user's words, not a command's output sent in the user role (a text-based agent's observation)
        user_text = latest_user_text(messages) if not (branch.observed and branch.observed[-1]) else ""
        if user_text:
            # content in view: messages shown as sent before this user turn (names in workset's digest or
            # placeholders are not content)
            visible = "\n".join(t for t in map(message_text, prefix.messages[:-1]) if not t.startswith(WORKSET_TAG))
            limit = budget.share(rules.max_share) * 3  # characters, about three per token
            scope = branch.scope()
            search = lambda query: self.store.search_evidence(scope, query, 3)  # noqa: E731
            parts.append(elided_mentions(user_text, visible, search, limit))
            asked = len(messages) > 1 and approval_subject(message_text(messages[-2])) is not None
            parts.append(irreversible_guard(body.get("tools") or [], rules.irreversible_tools, asked,
                                            branch.state.constraints, branch.state.of_kind(APPROVAL)))
        text = "\n\n".join(part for part in parts if part)
        text, dropped = self.counter.head(text, budget.share(rules.max_share))
        return text + " …" if dropped else text

    def deliver_later(self, prepared: Prepared, texts: list[str]) -> None:
        """Recall answers the model asked for alongside the agent's own calls: shown with the conversation's next
        request (kept in the store: that request may come to another replica, or after a restart)."""
        if prepared.session_id is not None and texts:
            self.store.add_pending_recall(prepared.session_id, texts)


RETRIEVED = "## Retrieved for this step (stored content the context no longer shows)"


def next_action(branch: Branch) -> str:
    """What the agent is to do next, as the record shows it: the first pending plan item, else the latest user
    request, else carrying on after the newest tool result."""
    pending = branch.state.pending
    if pending:
        return f"pending: {pending[0].key}"
    messages = branch.messages
    if messages and messages[-1].get("role") == "user":
        return "answer the user: " + flat(message_text(messages[-1]))[:200]
    if messages and is_tool_result(messages[-1]):
        last = len(messages) - 1
        return f"continue after {branch.tool_names[last] or 'tool'} -> {branch.outcomes[last] or 'ok'}"
    return ""


def phase_boundary(branch: Branch, policy: Policy) -> str:
    """The phase the newest messages end, if any: a subagent returned, a test run passed, the last pending plan
    item was completed, or the agent asked for approval. Cheap: reads what ingest knows at once."""
    rules = policy.phases
    messages = branch.messages
    last = len(messages) - 1
    if is_tool_result(messages[last]):
        tool = branch.tool_names[last]
        if any(fnmatch.fnmatchcase(tool, pattern) for pattern in rules.subagent_tools):
            return f"{tool} returned"
        if rules.tests_passing and branch.outcomes[last] == "ok":
            context = context_for(messages, last, "", None)
            checked = verification(context.call, message_text(messages[last]), "ok")
            if checked is not None and checked[1] == "passed":
                return "tests passed"
    if rules.plan_completed:
        plan = branch.state.of_kind(PLAN)  # as of the last settled request: one turn late at most
        if plan and all(fact.value == "completed" for fact in plan) and plan[-1].turn >= branch.settled - 2:
            return "plan completed"
    if rules.approval_wait and messages[last].get("role") == "user" and last > 0 and \
            messages[last - 1].get("role") == "assistant" and approval_subject(message_text(messages[last - 1])):
        return "approval asked"
    return ""


def _dialogue(conversation: Conversation) -> str:
    """What the user said, NUL, the dialogue in order: what the user said, what the assistant said and called
    tools with (not tool outputs). Names in it are what the task is about: the user's first, then the latest."""
    said_by_user: list[str] = []
    dialogue: list[str] = []
    for index, message in enumerate(conversation.messages):
        role = message.get("role")
        if conversation.is_users(index):
            said_by_user.append(message_text(message))
            dialogue.append(said_by_user[-1])
        elif role == "assistant":
            dialogue.append(message_text(message))
            dialogue.extend(call.arguments for call in tool_calls(message))
    return "\n".join(said_by_user) + "\0" + "\n".join(dialogue)


def _whole_reused(branch: Branch, tools_tokens: int) -> int:
    """Of the agent's request, what a prompt cache would hold had the session's requests been forwarded whole:
    `workset eval`'s cache model (the leading messages shared with the previous request, and the tool definitions
    once there was one). Remembers this request as the previous one."""
    previous = branch.last_request
    branch.last_request = (len(branch.hashes), branch.hashes[-1] if branch.hashes else "", branch.total_tokens)
    if previous is None:
        return 0
    count, tip, tokens = previous
    shared = 0 < count <= len(branch.hashes) and branch.hashes[count - 1] == tip
    return tools_tokens + (tokens if shared else 0)


def _prefix_key(policy: Policy, budget: Budget, epoch: Epoch | None) -> str:
    """What a built prefix depends on besides the messages: the policy, the budget (it scales tool-output
    limits) and the epoch."""
    return f"{policy.name}|{budget.limit}|{epoch.key if epoch else ''}"


@dataclass(frozen=True)
class Waiting:
    """A session's background summaries as the store holds them: the newest finished job (its row id, to drop it
    once used) and the lease of the one running, if one runs."""

    candidate: Summary | None
    job_id: int
    lease_until: float | None

    @staticmethod
    def of(jobs: list[dict[str, Any]]) -> Waiting:
        """From Store.summary_jobs' rows (at most one running)."""
        done = [job for job in jobs if job["state"] == "done"]
        lease = next((job["lease_until"] for job in jobs if job["state"] == "running"), None)
        if not done:
            return Waiting(None, 0, lease)
        newest = done[-1]
        return Waiting(Summary(newest["start"], newest["through"], newest["through_hash"], newest["text"] or "",
                               newest["verdict"]), newest["id"], lease)

    def used(self, new_epoch: Epoch, epoch: Epoch | None) -> bool:
        """Whether the new epoch took the candidate in (its summary moved on)."""
        return self.candidate is not None and new_epoch.summary_check == "ok" and \
            new_epoch.summary_through > (epoch.summary_through if epoch else -1)


def _with_summary(epoch: Epoch, waiting: Waiting | None, conversation: Conversation) -> Epoch:
    """The epoch with the newest usable summary: the waiting candidate when it continues the previous summary and
    covers only removed turns, else the previous one; summary_check says what happened (None: no summaries)."""
    if waiting is None:
        return epoch
    previous = Summary(-1, epoch.summary_through, epoch.summary_hash, epoch.summary, "ok") if epoch.summary else None
    candidate = waiting.candidate
    chosen = anchored(previous, candidate, epoch.removed_through, conversation.hashes)
    if chosen is not None and chosen is candidate:
        return replace(epoch, summary=chosen.text, summary_through=chosen.through, summary_hash=chosen.through_hash,
                       summary_check="ok")
    check = candidate.check if candidate is not None else ("running" if waiting.lease_until is not None else "not ready")
    if candidate is not None and candidate.usable:
        check = "not applicable (covers other turns)"
    return replace(epoch, summary_check=check)


def _goal(messages: list[Message]) -> str:
    index = first_user(messages)
    return message_text(messages[index]) if index is not None else ""
