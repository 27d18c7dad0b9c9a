"""What is not a key fact: log lines, text-table rows and raw numeric series.

A key fact is short and labelled. A timestamped or INFO/DEBUG log line, a row or header of a text table
(`mean std min 25% 50%`, markdown, ASCII or pandas tables) and a series of numbers are data to recall by ref, not
facts to keep in view: free-text extraction skips such lines, and a numeric series in JSON becomes one labelled
summary (`rates: 12 points, week 1–12, rate 6.91–7.24`).
"""

from __future__ import annotations

import json
import re
from typing import Any

# A line that starts with a timestamp: "2024-05-14 10:44:24,120 ...", "[2024-05-14T10:44:24Z] ...", "10:44:24 ...".
_LOG_START = re.compile(r"\[?(?:\d{4}-\d\d-\d\d[T ]\d\d:\d\d|\d\d:\d\d:\d\d)")
_LOG_LEVEL = re.compile(r"\b(?:INFO|DEBUG|TRACE)\b")
LOG_LEVEL_CHARS = 80  # a level word this near the start of a line marks a log line
# A column gap: two or more spaces (or a tab) between two non-space characters.
_COLUMN_GAP = re.compile(r"\S(?: {2,}|\t)(?=\S)")
MIN_TABLE_GAPS = 3  # this many column gaps make a line a row of a whitespace-aligned table
MIN_TABLE_PIPES = 2

MIN_SERIES_POINTS = 5  # a shorter list of numbers is shown whole (`12.5, 41.9`), a longer one summarized
MAX_SERIES_FIELDS = 3  # fields of each point described in a summary
# The field that orders the points of a series ({week, rate}, {date, close}, {t, value}).
_AXIS_FIELDS = frozenset(
    "date day week month quarter year time timestamp ts t period x step epoch hour minute iteration iter".split()
)
_DATE_KEY = re.compile(r"\d{4}(?:-(?:W\d\d|\d\d(?:-\d\d(?:[T ][\d:.]{2,15}Z?)?)?))?")
_NOISE_TRIGGERS = ("|", "  ", "\t", ":", "INFO", "DEBUG", "TRACE", "+-", "+=")


def is_noise_line(line: str) -> bool:
    """True for a log line (timestamped, or with an INFO/DEBUG/TRACE level near its start) or a row, header or
    rule of a text table. Substring tests and bounded matches only: it runs on every line of an output."""
    stripped = line.lstrip()
    if not stripped:
        return False
    first = stripped[0]
    if first == "|" or (first == "+" and stripped[1:2] in ("-", "=")):
        return True  # markdown or ASCII table row, header or rule
    if (first.isdigit() or first == "[") and _LOG_START.match(stripped):
        return True
    head = stripped[:LOG_LEVEL_CHARS]
    if ("INFO" in head or "DEBUG" in head or "TRACE" in head) and _LOG_LEVEL.search(head):
        return True
    if stripped.count(" | ") >= MIN_TABLE_PIPES:
        return True  # "Supplier C | 14.40 | 30" (not a regex alternation "(html|json|xml)")
    if "  " not in stripped and "\t" not in stripped:
        return False
    gaps = 0
    for _ in _COLUMN_GAP.finditer(stripped):
        gaps += 1
        if gaps >= MIN_TABLE_GAPS:
            return True  # "   mean   std   min   25%", a pandas row
    return False


def without_noise_lines(text: str) -> str:
    """The text with its log lines and table lines emptied (line breaks kept, so headings stay above their
    lines)."""
    if not any(trigger in text for trigger in _NOISE_TRIGGERS):
        return text
    lines = text.split("\n")
    kept = ["" if is_noise_line(line) else line for line in lines]
    return "\n".join(kept)


# ---- numeric series in JSON -----------------------------------------------------------------------------------


def series_summary(value: Any) -> str | None:
    """One line for a numeric series, or None when `value` is not one: a list of numbers (`12.5, 41.9`, or past
    MIN_SERIES_POINTS `12 points, 6.91–7.24`), a list of points that share an axis field and otherwise hold only
    numbers (`12 points, week 1–12, rate 6.91–7.24`), or an object keyed by dates whose values are numbers or
    objects of numbers (`12 points, 2026-01-05–2026-03-23, CNY 6.91–7.24`)."""
    if isinstance(value, list) and value:
        if all(_is_number(item) for item in value):
            if len(value) < MIN_SERIES_POINTS:
                return ", ".join(_number_text(item) for item in value)
            return f"{len(value)} points, {_range(value)}"
        if len(value) >= MIN_SERIES_POINTS:
            return _points_summary(value)
        return None
    if isinstance(value, dict) and len(value) >= MIN_SERIES_POINTS:
        return _dated_summary(value)
    return None


def _points_summary(points: list[Any]) -> str | None:
    first = points[0]
    if not isinstance(first, dict) or len(first) < 2:
        return None
    fields = list(first)
    axis = next((name for name in fields if isinstance(name, str) and name.lower() in _AXIS_FIELDS), None)
    if axis is None:
        return None
    columns: dict[str, list[Any]] = {name: [] for name in fields}
    for point in points:
        if not isinstance(point, dict) or list(point) != fields:
            return None
        for name, item in point.items():
            if name != axis and not _is_number(item):
                return None  # a record with text fields (a supplier, a flight) is not a series
            columns[name].append(item)
    if not isinstance(columns[axis][0], (str, int, float)) or isinstance(columns[axis][0], bool):
        return None
    parts = [f"{len(points)} points", f"{axis} {_text(columns[axis][0])}–{_text(columns[axis][-1])}"]
    parts += [f"{name} {_range(column)}" for name, column in columns.items() if name != axis][:MAX_SERIES_FIELDS]
    return ", ".join(parts)


def _dated_summary(series: dict[Any, Any]) -> str | None:
    keys = list(series)
    if not all(isinstance(key, str) and _DATE_KEY.fullmatch(key) for key in keys):
        return None
    values = list(series.values())
    parts = [f"{len(keys)} points", f"{keys[0]}–{keys[-1]}"]
    if all(_is_number(item) for item in values):
        return ", ".join([*parts, _range(values)])
    if not all(isinstance(item, dict) for item in values):
        return None
    fields = list(values[0])
    columns: dict[str, list[Any]] = {str(name): [] for name in fields}
    for item in values:
        if list(item) != fields or not all(_is_number(number) for number in item.values()):
            return None
        for name, number in item.items():
            columns[str(name)].append(number)
    parts += [f"{name} {_range(column)}" for name, column in columns.items()][:MAX_SERIES_FIELDS]
    return ", ".join(parts)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _range(numbers: list[Any]) -> str:
    low, high = min(numbers), max(numbers)
    return _number_text(low) if low == high else f"{_number_text(low)}–{_number_text(high)}"


def _number_text(number: Any) -> str:
    return json.dumps(number)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else _number_text(value)
