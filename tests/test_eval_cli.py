"""`workset eval` as a user runs it: a table on stdout, --json with the documented fields, --plot a PNG."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from traces import TRACES_DIR, requires_traces

pytestmark = [pytest.mark.traces, requires_traces]

FIELDS = {"policy", "traces", "turns", "cum_tokens", "reduction", "peak_tokens", "cached_cost", "cached_cost_vs_none",
          "prefix_reuse", "next_step_recall", "probe_recall", "constraint_recall", "pairing_violations",
          "over_budget", "compactions", "ms_per_turn", "tokens_vs_none", "probes_kept", "probes_checked",
          "probes_by_kind", "probes_missed", "probe_turn_tokens", "probe_turn_tokens_vs_none", "parts"}


def test_eval_command_writes_table_json_and_plot(tmp_path: Path) -> None:
    out_json, out_png = tmp_path / "eval.json", tmp_path / "eval.png"
    result = subprocess.run(
        [sys.executable, "-m", "proxy", "eval", str(TRACES_DIR / "tau-dev.jsonl.gz"), "--limit", "3", "--baselines",
         "--budget", "5000", "--json", str(out_json), "--plot", str(out_png)],
        capture_output=True, text=True, timeout=300, cwd=Path(__file__).resolve().parent.parent)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "| strategy |" in result.stdout and "| default |" in result.stdout and "| mask |" in result.stdout
    data = json.loads(out_json.read_text())
    policies = [row["policy"] for row in data["rows"]]
    assert policies[:3] == ["none", "truncate", "mask"] and "default" in policies and "coding-agent" in policies
    for row in data["rows"]:
        assert FIELDS <= set(row), FIELDS - set(row)
        assert row["traces"] == 3 and row["pairing_violations"] == 0
    # tau-dev compacts at 5,000: the default policy's state is measured, forwarding everything has none
    rows = {row["policy"]: row for row in data["rows"]}
    assert rows["none"]["parts"] == {} and rows["default"]["parts"]["state"]["max"] > 0
    assert "| state tok mean/max | digest tok | names tok |" in result.stdout
    assert data["config"]["budget"] == 5000
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
