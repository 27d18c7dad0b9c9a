"""The request path inside workset: resolve the session, ingest, plan, build. The server and the in-process eval
both call Engine.prepare, so what the eval measures is what the proxy forwards."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

from .config import Config
from .messages import message_text
from .policy import Policy
from .records import Message
from .session import Branch, Sessions, epoch_to_dict
from .state import TaskState, render_state, state_snapshot
from .store import Store
from .validate import check_messages
from .tokens import Excerpter, TokenCounter
from .workingset import (
    WORKSET_TAG,
    Budget,
    BuiltPrefix,
    Conversation,
    Epoch,
    extend_prefix,
    first_user,
    plan_compaction,
    state_message,
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
    compacted: bool = False
    rewritten: bool = False
    note: str = ""  # why the messages were forwarded unchanged, when they were
    new_messages: int = 0
    branch: Branch | None = field(default=None, repr=False)  # for settle() once the provider has the request


class Engine:
    def __init__(self, config: Config, policies: dict[str, Policy], store: Store, counter: TokenCounter,
                 context_window: Callable[[str], int | None] = lambda model: None) -> None:
        self.config = config
        self.policies = policies
        self.store = store
        self.counter = counter
        self.excerpt = Excerpter(counter)
        self.sessions = Sessions(store, counter, config.cache.max_sessions)
        self._context_window = context_window
        self._budgets: dict[tuple[str, str], int] = {}

    def policy_for(self, model: str, override: str | None = None) -> Policy:
        if override:
            policy = self.policies.get(override)
            if policy is None:
                raise UnknownPolicy(f"unknown policy {override!r} (known: {', '.join(sorted(self.policies))})")
            return policy
        return self.policies[self.config.policy_name_for(model)]

    def budget_tokens(self, model: str, policy: Policy) -> int:
        rules = policy.budget
        if rules.max_input_tokens != "auto":
            return int(rules.max_input_tokens)
        key = (model, policy.name)
        if key not in self._budgets:
            window = self._context_window(model)
            share = int(window * rules.auto_share) if window else rules.auto_fallback_tokens
            self._budgets[key] = min(share, rules.auto_max_tokens)
        return self._budgets[key]

    def settle(self, prepared: Prepared) -> None:
        """Finish ingesting the request's new messages (extraction, store writes): called once the provider has
        the request, so this work overlaps the provider's latency instead of adding to it."""
        if prepared.branch is not None:
            self.sessions.settle(prepared.branch)

    def prepare(self, body: dict[str, Any], caller: str, explicit_session: str | None = None,
                policy_name: str | None = None) -> Prepared:
        """What to forward for one chat request. Raises WorksetError when a message not seen before is malformed."""
        model = str(body["model"])
        policy = self.policy_for(model, policy_name)
        messages: list[Message] = body["messages"]
        resolved = self.sessions.resolve(caller, explicit_session, messages, model, policy.name, check_messages)
        branch = resolved.branch
        try:
            tools_tokens = self.counter.tools(body.get("tools"))
            original = branch.total_tokens + tools_tokens
            unchanged = Prepared(body, branch.session_id, policy.name, original, original,
                                 new_messages=resolved.new_messages, branch=branch)
            if policy.passthrough:
                unchanged.note = "passthrough policy"
                return unchanged
            pairing = branch.pairing.feed(messages)
            if not pairing.complete:
                unchanged.note = "tool calls and results not paired: forwarded as sent"
                return unchanged
            budget = Budget.of(policy, self.budget_tokens(model, policy))
            conversation = branch.conversation()
            epoch = branch.epoch if branch.epoch is not None and branch.epoch.applies_to(conversation) else None
            built_for = f"{policy.name}|{epoch.key if epoch else ''}"
            prefix = branch.built
            if prefix is None or branch.built_for != built_for or prefix.upto > len(messages):
                prefix = BuiltPrefix(built_for)
            extend_prefix(prefix, conversation, epoch, policy, self.counter, self.excerpt)
            goal = _goal(messages)
            tail, tail_tokens = self._tail(branch, goal, policy, budget, epoch is not None)
            total = prefix.tokens + tools_tokens + tail_tokens
            compacted = False
            if total > budget.trigger:
                self.sessions.settle(branch)  # compaction reads the state and the tool-output gists
                result = self._compact(branch, conversation, pairing.units, epoch, goal, policy, budget,
                                       tools_tokens, total)
                if result is not None:
                    epoch, prefix, tail, tail_tokens = result
                    built_for, compacted = prefix.epoch_key, True
                    total = prefix.tokens + tools_tokens + tail_tokens
            branch.built, branch.built_for = prefix, built_for
            out = dict(body)
            out["messages"] = with_tail_state(list(prefix.messages), tail)
            return Prepared(out, branch.session_id, policy.name, original, total, budget.limit, compacted,
                            rewritten=True, new_messages=resolved.new_messages, branch=branch)
        except Exception:
            self.sessions.forget(branch)
            raise

    def _compact(self, branch: Branch, conversation: Conversation, units: list[tuple[int, int]],
                 epoch: Epoch | None, goal: str, policy: Policy, budget: Budget, tools_tokens: int,
                 before: int) -> tuple[Epoch, BuiltPrefix, Message | None, int] | None:
        """A new epoch down to the target, recorded as a checkpoint. If the parts that cannot shrink (state,
        digest) keep it over the budget, it is planned again with the brief state and no digest. None when
        compaction would not shrink the working set (what is left is pinned): then nothing changes, and the
        prefix stays cached."""
        state_limit = int(policy.state.max_share * budget.limit)
        for brief in (False, True):
            tail, tail_tokens = self._tail(branch, goal, policy, budget, True)
            reserved = state_limit if policy.state.position != "tail" else 0
            new_epoch = plan_compaction(conversation, units, epoch, policy, budget, tools_tokens + tail_tokens,
                                        reserved, self.counter, self.excerpt,
                                        digest_limit=0 if brief else None, names_limit=0 if brief else None)
            key = f"{policy.name}|{new_epoch.key}"
            prefix = extend_prefix(BuiltPrefix(key), conversation, new_epoch, policy, self.counter, self.excerpt)
            if reserved:
                # The frozen state lists the facts that are no longer in view elsewhere first.
                visible = "\n".join(message_text(m) for m in prefix.messages if not _is_workset(m))
                head_state = render_state(branch.state, goal, policy.state, state_limit, self.counter.cached_text,
                                          brief, visible, _dialogue(conversation.messages))
                new_epoch = replace(new_epoch, head_state=head_state)
                prefix = extend_prefix(BuiltPrefix(key), conversation, new_epoch, policy, self.counter, self.excerpt)
            after = prefix.tokens + tools_tokens + tail_tokens
            if after <= budget.limit:
                break
        if after >= before:
            return None
        new_epoch = replace(new_epoch, tokens_before=before, tokens_after=after)
        self.store.add_checkpoint(branch.session_id, new_epoch.tip_hash, new_epoch.tip, new_epoch.reason, before,
                                  after, epoch_to_dict(new_epoch), state_snapshot(branch.state, goal))
        branch.epoch = new_epoch
        return new_epoch, prefix, tail, tail_tokens

    def _tail(self, branch: Branch, goal: str, policy: Policy, budget: Budget,
              after_compaction: bool) -> tuple[Message | None, int]:
        """The live state message for the tail (full for position tail, the brief reminder for both), cached
        until the state changes."""
        rules = policy.state
        if rules.position == "head" or (not after_compaction and not rules.before_compaction):
            return None, 0
        self.sessions.settle(branch)
        key = (branch.state.version, policy.name, budget.limit, goal[:64])
        cached = branch.tail_cache
        if cached is not None and cached[0] == key:
            return cached[1], cached[2]
        text = render_state(branch.state, goal, rules, int(rules.max_share * budget.limit), self.counter.cached_text,
                            brief=rules.position == "both")
        message = state_message(text)
        tokens = self.counter.message(message, generated=True)
        branch.tail_cache = (key, message, tokens)
        return message, tokens


def _dialogue(messages: Sequence[Message]) -> str:
    """What the user said, NUL, what the assistant said (not tool outputs): names in it are what the task is
    about, the user's first."""
    said = {"user": [], "assistant": []}  # type: dict[str, list[str]]
    for message in messages:
        role = message.get("role")
        if role in said:
            said[role].append(message_text(message))
    return "\n".join(said["user"]) + "\0" + "\n".join(said["assistant"])


def _is_workset(message: Message) -> bool:
    return message.get("role") == "user" and message_text(message).startswith(WORKSET_TAG)


def _goal(messages: list[Message]) -> str:
    index = first_user(messages)
    return message_text(messages[index]) if index is not None else ""
