"""The shared evaluation traces (../shared/traces/*.jsonl.gz), for tests that use real agent conversations.

    from traces import load_traces, requires_traces

    @requires_traces
    def test_something() -> None:
        trace = load_traces("tau-dev", limit=1)[0]

Each trace is a dict {"id", "tools", "messages", "probes"}; loaded traces are cached, do not mutate them.
"""

from __future__ import annotations

import gzip
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
TRACES_DIR = Path(os.environ.get("WORKSET_TRACES_DIR") or REPO.parent / "shared" / "traces")

requires_traces = pytest.mark.skipif(
    not TRACES_DIR.is_dir(), reason="../shared/traces not found: trace tests need the shared evaluation traces"
)


def load_traces(name: str, limit: int | None = None) -> list[dict[str, Any]]:
    """The traces of `name` ("swe-dev", "tau-dev", or a file name), in file order, at most `limit`."""
    return list(_load(name)[:limit])


@lru_cache(maxsize=8)
def _load(name: str) -> tuple[dict[str, Any], ...]:
    path = TRACES_DIR / (name if name.endswith(".jsonl.gz") else f"{name}.jsonl.gz")
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        return tuple(json.loads(line) for line in lines if line.strip())
