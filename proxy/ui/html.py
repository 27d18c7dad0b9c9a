"""The dashboard's HTML helpers: escaping, links, numbers and the page shell. Everything read from the store is
hostile input (message contents above all): it reaches a page only through `esc`."""

from __future__ import annotations

import html
import re
import time
from typing import Iterable
from urllib.parse import quote, urlencode

from ..hashing import REF_LENGTH

ROOT = "/ui"
STYLESHEET = f"{ROOT}/static/ui.css"
_REF_TEXT = re.compile(rf"\[ref:([0-9a-f]{{{REF_LENGTH}}})\]")


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def url(*parts: object, **query: object) -> str:
    """A dashboard path from its segments, each quoted (ids come from the store), and an optional query."""
    path = "/".join([ROOT, *(quote(str(part), safe="") for part in parts)])
    shown = {name: value for name, value in query.items() if value not in (None, "")}
    return path + ("?" + urlencode(shown) if shown else "")


def link(href: str, text: object, cls: str = "") -> str:
    shown = f' class="{esc(cls)}"' if cls else ""
    return f'<a href="{esc(href)}"{shown}>{esc(text)}</a>'


def session_url(session: str) -> str:
    return url("sessions", session)


def turn_url(session: str, n: int) -> str:
    return url("sessions", session, "turns", n)


def evidence_url(session: str, ref: str) -> str:
    return url("sessions", session, "evidence", ref)


def ref_link(session: str, ref: str) -> str:
    return link(evidence_url(session, ref), f"ref:{ref}", "ref") if ref else ""


def linked_refs(session: str, escaped: str) -> str:
    """`[ref:ID]` in already escaped text made into links to its evidence (escaping leaves these characters alone)."""
    return _REF_TEXT.sub(lambda found: "[" + ref_link(session, found.group(1)) + "]", escaped)


def number(value: int | float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


def dollars(value: float | None) -> str:
    if value is None:
        return "–"
    return f"−${-value:.4f}" if round(value, 4) < 0 else f"${abs(value):.4f}"


def share(part: float | None, whole: float | None) -> str:
    return f"{part / whole * 100:.1f}%" if part is not None and whole else "–"


def when(timestamp: float | None, short: bool = False) -> str:
    """UTC, so that every viewer reads the same time whatever the server's zone (short: to the minute, for a
    column headed as UTC)."""
    if not timestamp:
        return "–"
    return time.strftime("%Y-%m-%d %H:%M" if short else "%Y-%m-%d %H:%M:%S UTC", time.gmtime(timestamp))


def clip(text: str, limit: int) -> tuple[str, int]:
    """The first `limit` characters of `text` and how many were left out."""
    return (text, 0) if len(text) <= limit else (text[:limit], len(text) - limit)


def table(header: Iterable[str], rows: Iterable[str], cls: str = "") -> str:
    """A table of already rendered rows (`<tr>...</tr>`) under escaped column titles."""
    head = "".join(f"<th>{esc(title)}</th>" for title in header)
    return f'<table class="{esc(cls)}"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def page(title: str, body: str, who: str = "", crumbs: Iterable[tuple[str, str]] = ()) -> str:
    """The page shell: title, navigation with the breadcrumbs (href, text), who is looking and a logout button."""
    trail = "".join(f' <span class="sep">/</span> {link(href, text)}' for href, text in crumbs)
    account = (f'<span class="who">{esc(who)}</span><form method="post" action="{url("logout")}" class="inline">'
               '<button type="submit" class="quiet">Log out</button></form>') if who else ""
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{esc(title)} · workset</title><link rel=\"stylesheet\" href=\"{STYLESHEET}\">"
            "<link rel=\"icon\" href=\"data:,\"></head><body>"
            f'<header class="top"><nav>{link(ROOT, "workset", "brand")}{trail}</nav>'
            f'<div class="account">{account}</div></header><main>{body}</main></body></html>')
