"""A per-message time cap for extraction, kept cooperatively: stages run in order (the cheap, valuable ones first)
and once the cap has passed, each remaining stage is skipped and named instead of run. A stage is never
interrupted: the cap bounds when the last stage starts, and each stage is bounded by the text it reads."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")


@dataclass
class Stages:
    """The stages of one message's extraction: which ran, and which the cap made it skip."""

    deadline: float | None = None  # time.perf_counter() after which stages are skipped; None: no cap
    skipped: list[str] = field(default_factory=list)

    @staticmethod
    def within(milliseconds: float | None) -> Stages:
        """Stages that start only within `milliseconds` from now (None: no cap; 0: none of them)."""
        if milliseconds is None:
            return Stages()
        return Stages(time.perf_counter() + milliseconds / 1000)

    def run(self, name: str, stage: Callable[[], T], skipped: T) -> T:
        """The stage's result, or `skipped` when the cap has passed (the stage is then recorded by name)."""
        if self.deadline is not None and time.perf_counter() >= self.deadline:
            self.skipped.append(name)
            return skipped
        return stage()
