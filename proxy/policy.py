"""Policies: the working-set rules as data. Presets live in policies/*.yaml; every number is a key here."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Literal

import yaml

from .observations import ObservationMatcher
from .schema import ConfigError, build, setting


@dataclass(frozen=True)
class BudgetRules:
    max_input_tokens: int | Literal["auto"] = setting(
        "auto", "input tokens forwarded at most; auto = auto_share of the model's context window, with at most auto_max_tokens of room",
        min=256,
    )
    auto_share: float = setting(0.5, "share of the model's context window used when max_input_tokens is auto", min=0.05, max=1.0)
    auto_max_tokens: int = setting(
        16000, "cap of an auto budget's room (beyond tool definitions, system prompt and task): a focused working set is "
        "cheaper and keeps the model on task, whatever the window", min=256
    )
    auto_fallback_tokens: int = setting(16000, "budget when the model's context window is unknown to litellm", min=256)
    trigger_ratio: float = setting(0.8, "compact when the working set passes this share of the room (the budget less tool definitions, system prompt and task; they count too)", min=0.05, max=1.0)
    target_ratio: float = setting(0.5, "compaction brings the working set down to this share of the room", min=0.01, max=1.0)


@dataclass(frozen=True)
class ToolOutputRules:
    max_tokens: int = setting(4000, "a single tool output above this keeps only a head and tail excerpt plus its ref, even when recent", min=64)
    max_share: float = setting(
        0.25, "largest share of the budget one tool output may take; under a small budget, max_tokens, head_tokens and "
        "tail_tokens shrink in proportion so that one output cannot crowd out the task state", min=0.01, max=1.0,
    )
    head_tokens: int = setting(1200, "tokens kept from the start of an oversized tool output", min=0)
    tail_tokens: int = setting(800, "tokens kept from the end of an oversized tool output", min=0)
    gist_chars: int = setting(160, "longest one-line gist in the placeholder of an elided tool output", min=20)


@dataclass(frozen=True)
class StateRules:
    position: Literal["head", "tail", "both"] = setting(
        "head",
        "where the task state goes: head (frozen at each compaction, inside the cached prefix), "
        "tail (live, after the newest message) or both",
    )
    before_compaction: bool = setting(False, "render the task state even while nothing has been elided yet")
    max_share: float = setting(0.15, "largest share of the room the task state may take; key facts shrink to fit", min=0.01, max=0.9)
    max_tokens: int = setting(
        1200, "largest task state in tokens (with max_share, the smaller applies); constraints, rules, pending items "
        "and awaited approvals are never cut, the rest is filled by importance and recency", min=64)
    changes_max_tokens: int = setting(
        200, "with position head: what changed in the state since it was frozen at the last compaction (closed "
        "items, checks passed, approvals settled, new decisions, rules and outcomes) is shown after the newest "
        "message, in at most this many tokens; 0: never",
        min=0)
    max_facts: int = setting(400, "key facts listed in the task state, counted by field; objects are shown whole, ranked by what the dialogue names; all stay in the store", min=0)
    max_decisions: int = setting(10, "decisions listed in the task state", min=0)
    max_settled_approvals: int = setting(
        10, "approvals no longer awaited (granted, denied, approved) listed, newest first; awaited ones always are",
        min=0)
    max_completed: int = setting(20, "completed plan items listed (pending items are always listed)", min=0)
    max_failures: int = setting(8, "failed approaches and limits learned listed, newest first", min=0)
    max_findings: int = setting(10, "the agent's own derived figures and conclusions listed, newest first", min=0)
    max_rules: int = setting(8, "rules tool outputs stated (a maintainer's comment, a policy's clause) listed, newest "
                             "first", min=0)
    max_outcomes: int = setting(12, "outcomes tool outputs established (bisect's first bad commit, an answer's "
                                "status fields, what is not known yet) listed, newest first", min=0)
    max_named_columns: int = setting(
        6, "columns of figures from tool outputs' tables that the dialogue names (p95 of each candidate, side by "
        "side) listed with the outcomes, newest first", min=0)
    max_files_changed: int = setting(
        40, "files the agent changed listed (one line each, its latest change), newest first; never cut for room",
        min=0)
    max_failing_checks: int = setting(
        8, "failed test runs and check scripts whose verification line shows their last error line (and whether "
        "they passed since), newest first; the others show their verdict only", min=0)
    max_passing_checks: int = setting(
        4, "checks whose every run passed listed, newest first; older ones fold into a count (failed checks, and "
        "those that failed and passed since, are always listed)", min=0)
    value_chars: int = setting(120, "longest fact value shown in the task state", min=10)

    def quota(self, room: int) -> int:
        """The task state's tokens under a budget whose room is `room`."""
        return min(self.max_tokens, int(self.max_share * room))


@dataclass(frozen=True)
class UserMessageRules:
    paste_tokens: int = setting(
        1500, "a user message (not the task) above this many tokens is a paste: once older than the recent turns it "
        "is shown as head, tail and ref; every other message the user wrote stays verbatim", min=64)
    head_tokens: int = setting(500, "tokens kept from the start of a paste", min=0)
    tail_tokens: int = setting(200, "tokens kept from the end of a paste", min=0)


@dataclass(frozen=True)
class ObservationRules:
    detect: bool = setting(
        True, "recognise command output that text-based agents (mini-swe-agent, SWE-agent) send back as user "
        "messages, and compact it like tool output")
    patterns: tuple[str, ...] = setting(
        (r"<returncode>", r"<output>", r"OBSERVATION:", r"Observation:", r"<observation>",
         r"Please always provide EXACTLY ONE action", r"The last command .{0,80} timed out",
         r"Exit code: ?-?\d+\s*\n", r"\[?Command (?:finished|exited|timed out)"),
        "regexes matched at the start of a user message that mark it as a tool observation")
    after_action: bool = setting(
        True, "also count a user message as an observation when it starts with a fenced block right after an "
        "assistant's command block")


@dataclass(frozen=True)
class DigestRules:
    max_tokens: int = setting(1200, "longest extractive digest of removed turns; older lines fold into a count", min=0)
    max_share: float = setting(0.1, "largest share of the room the digest may take (the smaller limit wins)", min=0.0, max=0.9)
    gist_chars: int = setting(100, "longest gist of a tool output in a digest line", min=10)
    names_share: float = setting(0.1, "largest share of the room for the index of names (paths, identifiers) in elided turns", min=0.0, max=0.9)
    names_seen_in: int = setting(
        2, "the index holds the names the dialogue used (the user's words, the assistant's text and tool-call "
        "arguments) first; then, as room allows, a name only tool outputs showed when at least this many elided "
        "messages showed it (0: none)", min=0)
    own_max_tokens: int = setting(
        2300, "largest text workset writes into a compacted request's prefix: the compacted message (task state, "
        "digest and names index, with max_share applying to each part) and the placeholders of the outputs in "
        "the turns it keeps; the names index gets only what the rest leaves; 0: no limit beyond each "
        "part's own", min=0)
    arguments_chars: int = setting(100, "longest tool-call arguments shown in a digest line", min=10)
    text_chars: int = setting(200, "longest user or assistant text shown in a digest line, when it is cut", min=10)
    prose_tokens: int = setting(
        120, "the assistant's own prose up to this many tokens is kept whole in the digest when its turn leaves "
        "(longer prose is cut to text_chars, with its ref); it is folded after the tool-call lines", min=0)


@dataclass(frozen=True)
class RecallRules:
    enabled: bool = setting(True, "offer the workset_recall tool (answered inside the proxy) to read elided content")
    offer: Literal["always", "with_refs"] = setting(
        "always", "from the first request (the tool list, which providers cache first, stays the same all session), "
                  "or only once the working set holds refs (the first offer then misses the prompt cache once)",
    )
    max_tokens: int = setting(2000, "longest answer to one recall call; a ref is read in pages of about this size", min=64)
    max_rounds: int = setting(3, "recall rounds the proxy answers itself before the model must reply", min=1, max=10)
    search_results: int = setting(3, "matches returned for a recall by query", min=1, max=20)
    context_lines: int = setting(2, "lines shown before and after each line a recall query matches", min=0, max=50)


@dataclass(frozen=True)
class RetrievalRules:
    enabled: bool = setting(True, "bring stored content back when an event calls for it (failures, elided names, irreversible calls)")
    max_share: float = setting(0.1, "largest share of the room for retrieved content in one request", min=0.0, max=0.5)
    irreversible_tools: tuple[str, ...] = setting(
        ("*book*", "*cancel*", "*delete*", "*remove*", "*refund*", "*transfer*", "*send*", "*pay*", "*purchase*",
         "*deploy*", "*drop*"),
        "tool-name globs whose calls cannot be undone: their constraints and approvals are repeated last before them",
    )


@dataclass(frozen=True)
class SummarizerRules:
    mode: Literal["llm", "extractive", "off"] = setting(
        "extractive", "what stands for removed turns: a verified model summary (falling back to the digest), the "
        "extractive digest, or nothing but the names index")
    model: str = setting("", "model that writes summaries, routed like any request (it may be cheaper than the agent's)")
    precompute_ratio: float = setting(0.7, "start summarising in the background past this share of the room", min=0.05, max=1.0)
    timeout_s: float = setting(30.0, "a summary not ready this long after it started is dropped (the digest is used)", min=0.1)
    max_tokens: int = setting(500, "longest summary", min=32)
    propose_facts: bool = setting(
        True, "with mode llm: the summariser also proposes facts the removed tool outputs state (rules, outcomes); "
        "one enters the task state only if its words occur verbatim in the output it cites")


@dataclass(frozen=True)
class PhaseRules:
    enabled: bool = setting(True, "compact at the end of a phase, not only at the trigger")
    min_ratio: float = setting(
        0.6, "a phase boundary compacts only past this share of the room (at least target_ratio): earlier, a "
        "compaction would cost a prefix rewrite the trigger may never have needed", min=0.0, max=1.0)
    subagent_tools: tuple[str, ...] = setting(
        ("task", "Task", "*subagent*", "*sub_agent*", "dispatch_agent", "delegate*"),
        "tool-name globs of subagent or task tools: their result ends a phase")
    tests_passing: bool = setting(True, "a passing test or check run ends a phase")
    plan_completed: bool = setting(True, "the last pending plan item completed ends a phase")
    approval_wait: bool = setting(True, "the agent asking for approval ends a phase")


@dataclass(frozen=True)
class Policy:
    name: str = setting("default", "the policy's name, as used in config.yaml and the x-workset-policy header")
    description: str = setting("", "what the preset is for")
    passthrough: bool = setting(False, "forward the messages unchanged (still record and extract)")
    recent_turns: int = setting(6, "newest turns (an assistant message with its tool results, or a user message; a reminder the client adds counts for none) kept verbatim", min=1)
    budget: BudgetRules = setting(BudgetRules(), "token budget with hysteresis")
    tool_outputs: ToolOutputRules = setting(ToolOutputRules(), "tool outputs")
    user_messages: UserMessageRules = setting(UserMessageRules(), "the user's own messages, always kept")
    observations: ObservationRules = setting(ObservationRules(), "tool observations sent as user messages")
    state: StateRules = setting(StateRules(), "the task-state message")
    digest: DigestRules = setting(DigestRules(), "the extractive digest of removed turns")
    recall: RecallRules = setting(RecallRules(), "recall by ref: the workset_recall tool")
    retrieval: RetrievalRules = setting(RetrievalRules(), "event-driven retrieval")
    summarizer: SummarizerRules = setting(SummarizerRules(), "verified summaries of removed turns")
    phases: PhaseRules = setting(PhaseRules(), "phase-aware compaction")

    def __post_init__(self) -> None:
        if self.summarizer.mode == "llm" and not self.summarizer.model:
            raise ConfigError(f"policy {self.name!r}: summarizer.model must name a model when summarizer.mode is llm")
        for number, pattern in enumerate(self.observations.patterns):
            try:
                re.compile(pattern)
            except re.error as error:
                raise ConfigError(f"policy {self.name!r}: observations.patterns[{number}] is not a valid regex "
                                  f"({error})") from error
        if self.budget.target_ratio > self.budget.trigger_ratio:
            raise ConfigError(
                f"policy {self.name!r}: budget.target_ratio ({self.budget.target_ratio}) must not exceed "
                f"budget.trigger_ratio ({self.budget.trigger_ratio})"
            )

    @cached_property
    def observation_matcher(self) -> ObservationMatcher:
        rules = self.observations
        return ObservationMatcher.of(rules.detect, rules.patterns, rules.after_action)

    def for_budget(self, max_input_tokens: int) -> Policy:
        """The rules as they apply under this budget: tool-output limits scaled down to tool_outputs.max_share."""
        rules = self.tool_outputs
        cap = int(rules.max_share * max_input_tokens)
        if cap >= rules.max_tokens:
            return self
        scale = cap / rules.max_tokens
        return replace(self, tool_outputs=replace(rules, max_tokens=max(cap, 64), head_tokens=int(rules.head_tokens * scale),
                                                  tail_tokens=int(rules.tail_tokens * scale)))


def load_policy_file(path: Path) -> Policy:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ConfigError(f"policy file {path}: {error.strerror or error}") from error
    except yaml.YAMLError as error:
        raise ConfigError(f"policy file {path}: not valid YAML ({error})") from error
    if isinstance(data, dict):
        data.setdefault("name", path.stem)
    try:
        return build(Policy, data)
    except ConfigError as error:
        raise ConfigError(f"policy {path.name}: {error}") from error


def resolve_policy_path(name_or_path: str, policies_dir: Path) -> Path:
    """A preset name (`coding-agent`) from policies_dir, or a path to a YAML file."""
    candidate = Path(name_or_path)
    if candidate.suffix in (".yaml", ".yml") or candidate.is_file():
        return candidate
    return policies_dir / f"{name_or_path}.yaml"


def load_policies(policies_dir: Path, extra: tuple[str, ...] = ()) -> dict[str, Policy]:
    """Every preset in policies_dir plus any named or given by path in `extra`, keyed by policy name."""
    policies: dict[str, Policy] = {}
    if policies_dir.is_dir():
        for path in sorted(policies_dir.glob("*.yaml")):
            policy = load_policy_file(path)
            policies[policy.name] = policy
    for item in extra:
        if item in policies:
            continue
        path = resolve_policy_path(item, policies_dir)
        if not path.is_file():
            known = ", ".join(sorted(policies)) or "none"
            raise ConfigError(f"policy {item!r} not found (no file {path}; presets: {known})")
        policy = load_policy_file(path)
        policies[policy.name] = policy
        policies[item] = policy
    return policies
