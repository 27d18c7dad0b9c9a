"""Long probe scenarios: six written from the seeds (issue 8, item 5) and two coding runs as long and messy as
real ones (issue 30): deterministic agent runs in the format of a line of /work/shared/traces/*.jsonl.gz, each
with probe checks late in the run for items stated early.

`load()` is what `workset eval` reads; `build_all()` also returns where each probed item is stated, for the
self-check in selfcheck.py."""

from __future__ import annotations

from typing import Any

from . import analysis, coding, incident, migration, procurement, refund, sdkcoding, zhcoding
from .builder import Scenario

MODULES = (procurement, coding, incident, refund, analysis, migration, sdkcoding, zhcoding)


def build_all() -> list[Scenario]:
    return [module.build() for module in MODULES]


def load() -> list[dict[str, Any]]:
    """The traces: {"id", "source", "license", "tools", "messages", "probes": {"checks": [...]}}."""
    return [scenario.trace for scenario in build_all()]
