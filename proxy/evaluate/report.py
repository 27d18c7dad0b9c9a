"""The evaluation as a markdown table, a JSON file and a PNG plot."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Sequence

import orjson

from .metrics import PROBE_KINDS
from .run import SWE_REQUESTS, Evaluation, Row

Column = tuple[str, Callable[[Row], str]]  # title, the cell of a row


def field_cell(key: str, fmt: str) -> Callable[[Row], str]:
    """A row's field, formatted; n/a when it has no value."""
    def cell(row: Row) -> str:
        value = getattr(row, key)
        return "n/a" if value is None else fmt.format(value)

    return cell


def fraction(pair: Sequence[int]) -> str:
    return f"{pair[0]}/{pair[1]}" if pair[1] else "-"


def part_size(part: str) -> Callable[[Row], str]:
    """Mean and max tokens of one part over the requests that carry it."""
    def cell(row: Row) -> str:
        sizes = row.parts.get(part)
        return f"{sizes['mean']:,.0f}/{sizes['max']:,.0f}" if sizes else "-"

    return cell


COLUMNS: list[Column] = [
    ("strategy", field_cell("policy", "{}")), ("turns", field_cell("turns", "{}")), ("budget", field_cell("budget", "{}")),
    ("token reduction", field_cell("reduction", "{:.1%}")),
    ("cached cost vs none", field_cell("cached_cost_vs_none", "{:.3f}")),
    ("prefix reuse", field_cell("prefix_reuse", "{:.1%}")), ("next-step recall", field_cell("next_step_recall", "{:.3f}")),
    ("probe recall", field_cell("probe_recall", "{:.3f}")),
    ("probes kept", lambda row: fraction((row.probes_kept, row.probes_checked))),
    ("constraint recall", field_cell("constraint_recall", "{:.3f}")),
    ("median peak", field_cell("peak_tokens", "{:,.0f}")), ("pairing errors", field_cell("pairing_violations", "{}")),
    ("over budget", field_cell("over_budget", "{}")), ("prefix rewrites", field_cell("compactions", "{}")),
    ("state tok mean/max", part_size("state")), ("digest tok", part_size("digest")),
    ("names tok", part_size("names")), ("ms/turn", field_cell("ms_per_turn", "{:.2f}")),
]


def markdown_table(rows: Sequence[Row], columns: Sequence[Column] = COLUMNS) -> str:
    lines = ["| " + " | ".join(title for title, _ in columns) + " |",
             "|" + "|".join(" --- " for _ in columns) + "|"]
    lines += ["| " + " | ".join(cell(row) for _, cell in columns) + " |" for row in rows]
    return "\n".join(lines)


def has_probe_checks(rows: Sequence[Row]) -> bool:
    return any(row.probes_checked for row in rows)


def probe_table(rows: Sequence[Row]) -> str:
    """Probe checks kept by kind, beside the tokens forwarded at the probe turns and over all turns."""
    seen = {kind for row in rows for kind in row.probes_by_kind}
    kinds = [kind for kind in PROBE_KINDS if kind in seen] + sorted(seen - set(PROBE_KINDS))
    columns: list[Column] = [
        ("strategy", field_cell("policy", "{}")),
        ("probes kept", lambda row: fraction((row.probes_kept, row.probes_checked))),
        *[(kind, by_kind(kind)) for kind in kinds],
        ("tokens at probe turns", field_cell("probe_turn_tokens", "{:,}")),
        ("vs none", field_cell("probe_turn_tokens_vs_none", "{:.3f}")),
        ("tokens over all turns", field_cell("cum_tokens", "{:,}")), ("vs none", field_cell("tokens_vs_none", "{:.3f}")),
    ]
    return markdown_table(rows, columns)


def by_kind(kind: str) -> Callable[[Row], str]:
    return lambda row: fraction(row.probes_by_kind.get(kind, (0, 0)))


def has_workset_text(rows: Sequence[Row]) -> bool:
    return any(row.workset_requests for row in rows)


def dump_kinds_cell(row: Row) -> str:
    """Dump rows by kind, summed over requests, largest first."""
    kinds = sorted(row.dump_kinds.items(), key=lambda item: (-item[1], item[0]))
    return ", ".join(f"{kind} {number:,}" for kind, number in kinds) or "-"


def text_table(rows: Sequence[Row]) -> str:
    """What workset's own text is made of, per strategy that writes some: dump rows (lines copying raw output by
    its form) per request, and the task state's lines that are dump rows or copies of the task message."""
    columns: list[Column] = [
        ("strategy", field_cell("policy", "{}")),
        ("requests with workset text", field_cell("workset_requests", "{:,}")),
        ("dump rows mean", field_cell("dump_rows_mean", "{:,.1f}")),
        ("dump rows max", field_cell("dump_rows_max", "{:,}")),
        ("dump rows by kind", dump_kinds_cell), ("state lines", field_cell("state_lines", "{:,}")),
        ("state: dump rows", field_cell("state_dump_share", "{:.1%}")),
        ("state: task copies", field_cell("state_task_copy_share", "{:.1%}")),
        ("state tok mean/max", part_size("state")),
    ]
    return markdown_table([row for row in rows if row.workset_requests], columns)


def has_swe_checks(rows: Sequence[Row]) -> bool:
    return any(row.swe.get("requests") for row in rows)


def swe_cell(share: str, part: str, whole: str) -> Callable[[Row], str]:
    """A share of the SWE checks with its counts: `87.5% (14/16)`."""
    def cell(row: Row) -> str:
        value = row.swe.get(share)
        return "-" if value is None else f"{value:.1%} ({row.swe.get(part, 0)}/{row.swe.get(whole, 0)})"

    return cell


def swe_table(rows: Sequence[Row]) -> str:
    """The SWE checks at the last requests of each coding run (proxy/evaluate/swe.py)."""
    columns: list[Column] = [
        ("strategy", field_cell("policy", "{}")),
        ("requests (with state)", lambda row: f"{row.swe.get('requests', 0)} ({row.swe.get('stated', 0)})"),
        ("changed files in state", swe_cell("files_in_state", "files_named", "files")),
        ("repo files in state", swe_cell("repo_files_in_state", "repo_files_named", "repo_files")),
        ("decision in view", swe_cell("decision_kept", "decisions_kept", "decisions")),
        ("false passes", swe_cell("false_pass_share", "false_passes", "passes")),
    ]
    return markdown_table([row for row in rows if row.swe.get("requests")], columns)


def per_trace_table(rows: Sequence[Row]) -> str:
    """One line per trace and strategy: probes kept; the state's tokens and dump rows at its last request; the
    most tokens workset's own text took at one of its last SWE_REQUESTS requests; the tokens forwarded over all
    its turns as a share of forwarding everything."""
    lines = [f"| trace | strategy | probes kept | state tok (last) | dump rows (last) | workset tok (last {SWE_REQUESTS}, "
             "max) | tokens vs none |", "| --- | --- | --- | --- | --- | --- | --- |"]
    reference = next((row for row in rows if row.policy == "none"), None)
    everything = {item["trace"]: item.get("tokens", 0) for item in reference.per_trace} if reference else {}
    for row in rows:
        for item in row.per_trace:
            kept = fraction((item["probes_kept"], item["probes_checked"]))
            whole = everything.get(item["trace"], 0)
            share = f"{item.get('tokens', 0) / whole:.3f}" if whole else "-"
            lines.append(f"| {item['trace']} | {row.policy} | {kept} | {item['state_tokens']:,} "
                         f"| {item['dump_rows']:,} | {item.get('workset_tokens_last', 0):,} | {share} |")
    return "\n".join(lines)


def missed_lines(name: str, rows: Sequence[Row]) -> list[str]:
    """One tab-separated line per probe check a strategy missed: dataset, strategy, trace, check, kind, why."""
    return ["\t".join(("missed", name, row.policy, item["trace"], item["check"], item["kind"], item["why"]))
            for row in rows for item in row.probes_missed]


def write_json(path: Path, datasets: dict[str, Evaluation], config: dict[str, Any]) -> None:
    rows = [{"dataset": name, **asdict(row)} for name, evaluation in datasets.items() for row in evaluation.rows]
    path.write_bytes(orjson.dumps({"rows": rows, "config": config}, option=orjson.OPT_INDENT_2))


def plot(path: Path, datasets: dict[str, Evaluation]) -> None:
    """Per dataset: tokens forwarded per turn of its longest trace (one line per strategy), and cached cost
    against next-step recall, or against probes kept where the dataset has probe checks (one point per strategy)."""
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
        probes = has_probe_checks(evaluation.rows)  # with probe checks, they are the measure of what was kept
        measure = "probes kept (share of probe checks)" if probes else "next-step entity recall"
        points: dict[tuple[float, float], list[str]] = {}
        for row in evaluation.rows:
            if probes:
                recall = row.probes_kept / row.probes_checked if row.probes_checked else 0.0
            else:
                recall = row.next_step_recall if row.next_step_recall is not None else 0.0
            points.setdefault((round(row.cached_cost_vs_none, 3), round(recall, 4)), []).append(row.policy)
        for number, ((cost, recall), names) in enumerate(points.items()):  # one label per spot
            cost_axis.scatter(cost, recall, s=40, color=colors.get(names[0]))
            cost_axis.annotate(" = ".join(names), (cost, recall), fontsize=7, color=colors.get(names[0]),
                               xytext=(5, 10 - 11 * (number % 3)), textcoords="offset points")
        cost_axis.set_title(f"{name}: cost with prompt caching vs {measure.split(' (')[0]}", fontsize=9)
        cost_axis.set_xlabel("cached cost relative to forwarding everything")
        cost_axis.set_ylabel(measure)
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
