"""Text shapes of real tool output: JSON, pandas frames and describe tables, markdown tables, HTTP responses, log
timestamps, random ids. Pure functions of their arguments and of the caller's seeded random.Random."""

from __future__ import annotations

import json
import random
import statistics
import string
from datetime import datetime, timedelta
from typing import Any, Sequence


def json_text(value: Any, indent: int | None = 2) -> str:
    return json.dumps(value, indent=indent, ensure_ascii=False)


def cell(value: Any, decimals: int = 2) -> str:
    if isinstance(value, float):
        return f"{value:.{decimals}f}"
    return str(value)


def frame_text(headers: Sequence[str], rows: Sequence[Sequence[Any]], index: Sequence[Any] | None = None,
               decimals: int = 2) -> str:
    """A table as pandas prints a DataFrame: right-aligned columns, the index first."""
    labels = [str(i) for i in (index if index is not None else range(len(rows)))]
    columns = [[str(h)] + [cell(row[c], decimals) for row in rows] for c, h in enumerate(headers)]
    widths = [max(len(item) for item in column) for column in columns]
    index_width = max([len(label) for label in labels] + [0])
    lines = [" " * index_width + "".join("  " + column[0].rjust(width) for column, width in zip(columns, widths))]
    for r, label in enumerate(labels):
        lines.append(label.ljust(index_width) + "".join("  " + column[r + 1].rjust(width)
                                                        for column, width in zip(columns, widths)))
    return "\n".join(lines)


def describe_text(columns: dict[str, Sequence[float]], decimals: int = 6) -> str:
    """pandas' DataFrame.describe() of numeric columns."""
    stats = ("count", "mean", "std", "min", "25%", "50%", "75%", "max")
    rows = []
    for values in columns.values():
        ordered = sorted(values)
        quartiles = statistics.quantiles(ordered, n=4, method="inclusive")
        rows.append([float(len(ordered)), statistics.fmean(ordered), statistics.stdev(ordered), ordered[0],
                     quartiles[0], quartiles[1], quartiles[2], ordered[-1]])
    table = [[rows[c][s] for c in range(len(rows))] for s in range(len(stats))]
    return frame_text(list(columns), table, index=stats, decimals=decimals)


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], decimals: int = 2) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(value, decimals) for value in row) + " |" for row in rows]
    return "\n".join(lines)


def http_text(status: int, reason: str, headers: dict[str, str], body: str) -> str:
    """A raw HTTP response as curl -i shows it."""
    head = [f"HTTP/1.1 {status} {reason}"] + [f"{key}: {value}" for key, value in headers.items()]
    return "\n".join(head) + "\n\n" + body


def edge_headers(rng: random.Random, headers: dict[str, str]) -> dict[str, str]:
    """`headers` plus what API gateways and CDNs add to every response."""
    return {**headers, "Server": "envoy", "Strict-Transport-Security": "max-age=63072000; includeSubDomains",
            "X-Content-Type-Options": "nosniff", "Server-Timing": f"upstream;dur={rng.randint(8, 400)}, "
            f"edge;dur={rng.randint(1, 9)}", "X-Envoy-Upstream-Service-Time": str(rng.randint(8, 400)),
            "Vary": "Accept-Encoding, Authorization", "Traceparent": f"00-{hex_id(rng, 32)}-{hex_id(rng, 16)}-01",
            "Cache-Control": "no-store"}


def moments(rng: random.Random, start: datetime, count: int, min_gap: float, max_gap: float) -> list[datetime]:
    """Increasing timestamps with random gaps (seconds)."""
    times, now = [], start
    for _ in range(count):
        now += timedelta(seconds=rng.uniform(min_gap, max_gap))
        times.append(now)
    return times


def iso(moment: datetime, millis: bool = True) -> str:
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    return f"{text}.{moment.microsecond // 1000:03d}Z" if millis else f"{text}Z"


def hex_id(rng: random.Random, length: int) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(length))


def token_id(rng: random.Random, length: int) -> str:
    return "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(length))


def pick_float(rng: random.Random, low: float, high: float, decimals: int, avoid: Sequence[str] = ()) -> float:
    """A random value that, printed with `decimals`, is none of `avoid` (values a probe looks for)."""
    while True:
        value = round(rng.uniform(low, high), decimals)
        if f"{value:.{decimals}f}" not in avoid:
            return value
