"""Tokens per request as an inline SVG, drawn on the server: one polyline per series (a session of thousands of
requests stays a few elements), compactions as one path of vertical marks."""

from __future__ import annotations

import math
from typing import Any, Sequence

from .html import esc, number

WIDTH, HEIGHT = 1300, 250
LEFT, RIGHT, TOP, BOTTOM = 64, 12, 12, 28
# (turn column, css class, legend): all in the provider's tokens, so that the lines compare
SERIES = (("whole_tokens", "whole", "forwarding everything (estimate)"),
          ("input_tokens", "sent", "sent by workset"),
          ("cached_tokens", "cached", "of which read from the provider's cache"))


def tokens_chart(turns: Sequence[dict[str, Any]]) -> str:
    """The chart and its legend, for a session's turn rows (report.session_turns)."""
    if not turns:
        return '<p class="muted">No forwarded requests recorded yet.</p>'
    top = _nice(max(max(int(turn[column] or 0) for turn in turns) for column, _, _ in SERIES))
    count = len(turns)
    span_x, span_y = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(index: int) -> float:
        return LEFT + (index / (count - 1) * span_x if count > 1 else span_x / 2)

    def y(value: int) -> float:
        return TOP + span_y - value / top * span_y

    parts = [f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="tokens per request">',
             "<title>Prompt tokens per request</title>"]
    for step in range(5):
        value = top * step // 4
        parts.append(f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y(value):.1f}" y2="{y(value):.1f}"/>'
                     f'<text class="axis" x="{LEFT - 6}" y="{y(value) + 4:.1f}" text-anchor="end">{number(value)}</text>')
    for index in sorted({0, (count - 1) // 2, count - 1}):
        parts.append(f'<text class="axis" x="{x(index):.1f}" y="{HEIGHT - 8}" text-anchor="middle">'
                     f'{esc(turns[index]["n"])}</text>')
    marks = " ".join(f"M{x(index):.1f} {TOP}V{TOP + span_y}" for index, turn in enumerate(turns) if turn["compaction"])
    if marks:
        parts.append(f'<path class="compaction" d="{marks}"/>')
    for column, cls, _ in SERIES:
        points = " ".join(f"{x(index):.1f},{y(int(turn[column] or 0)):.1f}" for index, turn in enumerate(turns))
        parts.append(f'<polyline class="series {cls}" points="{points}"/>')
    parts.append("</svg>")
    legend = "".join(f'<span class="key {cls}"></span>{esc(text)} ' for _, cls, text in SERIES)
    legend += '<span class="key compaction"></span>compaction'
    return "".join(parts) + f'<p class="legend">{legend} <span class="muted">· x: request number</span></p>'


def _nice(value: int) -> int:
    """The axis top: the value rounded up to a round number (that splits into round quarters)."""
    if value <= 0:
        return 4
    power = 10 ** max(0, int(math.floor(math.log10(value))) - 1)
    return next(int(step * power) for step in (10, 12, 16, 20, 24, 32, 40, 60, 80, 100) if step * power >= value)
