"""Policies: the working-set rules as data. Presets live in policies/*.yaml; every number is a key here."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import yaml

from .schema import ConfigError, build, setting


@dataclass(frozen=True)
class BudgetRules:
    max_input_tokens: int | Literal["auto"] = setting(
        "auto", "input tokens forwarded at most; auto = auto_share of the model's context window, at most auto_max_tokens",
        min=256,
    )
    auto_share: float = setting(0.5, "share of the model's context window used when max_input_tokens is auto", min=0.05, max=1.0)
    auto_max_tokens: int = setting(
        16000, "cap of an auto budget: a focused working set is cheaper and keeps the model on task, whatever the window", min=256
    )
    auto_fallback_tokens: int = setting(16000, "budget when the model's context window is unknown to litellm", min=256)
    trigger_ratio: float = setting(0.8, "compact when the working set passes this share of the budget", min=0.05, max=1.0)
    target_ratio: float = setting(0.5, "compaction brings the working set down to this share of the budget", min=0.01, max=1.0)


@dataclass(frozen=True)
class ToolOutputRules:
    max_tokens: int = setting(4000, "a single tool output above this keeps only a head and tail excerpt plus its ref, even when recent", min=64)
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
    max_share: float = setting(0.15, "largest share of the budget the task state may take; facts shrink to fit", min=0.01, max=0.9)
    max_facts: int = setting(40, "key facts listed in the task state (newest first); all stay in the store", min=0)
    max_decisions: int = setting(10, "decisions listed in the task state", min=0)
    max_completed: int = setting(20, "completed plan items listed (pending items are always listed)", min=0)
    max_failures: int = setting(8, "failed approaches listed, newest first", min=0)
    value_chars: int = setting(120, "longest fact value shown in the task state", min=10)


@dataclass(frozen=True)
class DigestRules:
    max_tokens: int = setting(1200, "longest extractive digest of removed turns; older lines fold into a count", min=0)
    max_share: float = setting(0.1, "largest share of the budget the digest may take (the smaller limit wins)", min=0.0, max=0.9)
    gist_chars: int = setting(100, "longest gist of a tool output in a digest line", min=10)
    names_share: float = setting(0.1, "largest share of the budget for the index of names (paths, identifiers) in elided turns", min=0.0, max=0.9)
    arguments_chars: int = setting(100, "longest tool-call arguments shown in a digest line", min=10)
    text_chars: int = setting(200, "longest user or assistant text shown in a digest line", min=10)


@dataclass(frozen=True)
class Policy:
    name: str = setting("default", "the policy's name, as used in config.yaml and the x-workset-policy header")
    description: str = setting("", "what the preset is for")
    passthrough: bool = setting(False, "forward the messages unchanged (still record and extract)")
    recent_turns: int = setting(6, "newest turns (an assistant message with its tool results, or a user message) kept verbatim", min=1)
    budget: BudgetRules = setting(BudgetRules(), "token budget with hysteresis")
    tool_outputs: ToolOutputRules = setting(ToolOutputRules(), "tool outputs")
    state: StateRules = setting(StateRules(), "the task-state message")
    digest: DigestRules = setting(DigestRules(), "the extractive digest of removed turns")

    def __post_init__(self) -> None:
        if self.budget.target_ratio > self.budget.trigger_ratio:
            raise ConfigError(
                f"policy {self.name!r}: budget.target_ratio ({self.budget.target_ratio}) must not exceed "
                f"budget.trigger_ratio ({self.budget.trigger_ratio})"
            )


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
