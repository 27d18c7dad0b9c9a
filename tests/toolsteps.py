"""An agent's tool call and its output, as the fault tests and benches send them: long enough to be excerpted
with its ref by a small budget."""

from __future__ import annotations

from typing import Any


def tool_step(agent: str, step: int, rows: int = 120) -> list[dict[str, Any]]:
    """Step `step` of agent `agent`: a read_file call and its `rows`-line output, each line its own."""
    call = f"call_{agent}_{step}"
    lines = "\n".join(f"row {n}: agent {agent} step {step} value {n * 37 + step} status ok" for n in range(rows))
    return [{"role": "assistant", "content": f"Step {step}: reading the next file.",
             "tool_calls": [{"id": call, "type": "function",
                             "function": {"name": "read_file", "arguments": f'{{"path": "data/{agent}/{step}.txt"}}'}}]},
            {"role": "tool", "tool_call_id": call, "content": lines}]
