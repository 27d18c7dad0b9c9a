"""The evaluation as a markdown table, a JSON file and a PNG plot."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any, Sequence

import orjson

from .run import Evaluation, Row

COLUMNS = [
    ("policy", "strategy", "{}"), ("turns", "turns", "{}"), ("budget", "budget", "{}"),
    ("reduction", "token reduction", "{:.1%}"), ("cached_cost_vs_none", "cached cost vs none", "{:.3f}"),
    ("prefix_reuse", "prefix reuse", "{:.1%}"), ("next_step_recall", "next-step recall", "{:.3f}"),
    ("probe_recall", "probe recall", "{:.3f}"), ("constraint_recall", "constraint recall", "{:.3f}"),
    ("peak_tokens", "median peak", "{:,.0f}"), ("pairing_violations", "pairing errors", "{}"),
    ("over_budget", "over budget", "{}"), ("compactions", "prefix rewrites", "{}"), ("ms_per_turn", "ms/turn", "{:.2f}"),
]


def markdown_table(rows: Sequence[Row]) -> str:
    lines = ["| " + " | ".join(title for _, title, _ in COLUMNS) + " |",
             "|" + "|".join(" --- " for _ in COLUMNS) + "|"]
    for row in rows:
        cells = []
        for key, _, fmt in COLUMNS:
            value = getattr(row, key)
            cells.append("n/a" if value is None else fmt.format(value))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_json(path: Path, datasets: dict[str, Evaluation], config: dict[str, Any]) -> None:
    rows = [{"dataset": name, **asdict(row)} for name, evaluation in datasets.items() for row in evaluation.rows]
    path.write_bytes(orjson.dumps({"rows": rows, "config": config}, option=orjson.OPT_INDENT_2))


def plot(path: Path, datasets: dict[str, Evaluation]) -> None:
    """Per dataset: tokens forwarded per turn of its longest trace (one line per strategy), and cached cost
    against next-step recall (one point per strategy)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as error:  # an optional extra: the proxy itself does not need it
        raise SystemExit("--plot needs matplotlib: pip install 'workset[eval]'") from error
    figure, axes = plt.subplots(len(datasets), 2, figsize=(13, 4.6 * len(datasets)), squeeze=False)
    palette = plt.get_cmap("tab10").colors
    for row_axes, (name, evaluation) in zip(axes, datasets.items()):
        colors = {strategy: palette[i % len(palette)] for i, strategy in enumerate(evaluation.records)}
        turns_axis, cost_axis = row_axes
        longest = _longest_trace(evaluation)
        for strategy, records in evaluation.records.items():
            points = [r for r in records if r.trace == longest]
            style = {"none": (":", 2.4), "passthrough": ("--", 1.0)}.get(strategy, ("-", 1.4))
            turns_axis.plot([r.turn for r in points], [r.tokens for r in points], label=strategy,
                            linestyle=style[0], linewidth=style[1], color=colors[strategy])
        turns_axis.set_title(f"{name}: tokens forwarded per turn ({longest})", fontsize=9)
        turns_axis.set_xlabel("message index of the agent's next action")
        turns_axis.set_ylabel("input tokens")
        turns_axis.legend(fontsize=8)
        points: dict[tuple[float, float], list[str]] = {}
        for row in evaluation.rows:
            recall = row.next_step_recall if row.next_step_recall is not None else 0.0
            points.setdefault((round(row.cached_cost_vs_none, 3), round(recall, 4)), []).append(row.policy)
        for number, ((cost, recall), names) in enumerate(points.items()):  # one label per spot
            cost_axis.scatter(cost, recall, s=40, color=colors.get(names[0]))
            cost_axis.annotate(" = ".join(names), (cost, recall), fontsize=7, color=colors.get(names[0]),
                               xytext=(5, 10 - 11 * (number % 3)), textcoords="offset points")
        cost_axis.set_title(f"{name}: cost with prompt caching vs next-step recall", fontsize=9)
        cost_axis.set_xlabel("cached cost relative to forwarding everything")
        cost_axis.set_ylabel("next-step entity recall")
        cost_axis.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _longest_trace(evaluation: Evaluation) -> str:
    counts: dict[str, int] = {}
    for records in evaluation.records.values():
        for record in records:
            counts[record.trace] = counts.get(record.trace, 0) + 1
        break
    return max(counts, key=lambda trace: counts[trace]) if counts else ""
