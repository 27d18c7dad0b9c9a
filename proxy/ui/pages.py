"""The dashboard's pages, rendered from the report views (proxy.report, proxy.inspect): plain data in, HTML out.
Nothing here reads the store."""

from __future__ import annotations

import re
from typing import Any, Sequence

from ..extract.text import one_line
from ..messages import message_text, tool_calls
from ..passages import query_words
from ..accounting import saving
from ..records import Message
from ..report import ADDED, KEPT, REMOVED, Change, Savings, TurnDetail, total
from .access import Viewer
from .chart import tokens_chart
from .html import (ROOT, clip, dollars, esc, evidence_url, link, linked_refs, number, page, ref_link, session_url,
                   share, table, turn_url, url, when)

CLIP_CHARS = 3000  # of one message's text on a request's page; the whole is on its evidence page
ARGUMENT_CHARS = 400  # of a tool call's arguments shown
CELL_CHARS = 240  # of a value in the ledger, actions and search tables
STATE_FACTS = 40  # key facts listed under the task state (the ledger lists them all)
SEARCH_RESULTS = 20

KINDS = {  # change kind -> what it means, for the legend
    KEPT: "forwarded as the agent sent it",
    "masked": "tool output replaced by a placeholder with its ref",
    "excerpted": "oversized tool output: head and tail, the whole by its ref",
    "paste": "a long message of the user's: head and tail, the whole by its ref",
    REMOVED: "left out of the working set, told in the compacted turns",
    ADDED: "written by workset: compacted turns, task state, recall tool",
}
INTO = {"digest": "told in the digest of the compacted turns", "summary": "told in the model-written summary",
        "dropped": "named in the list of the user's messages left out",
        "repeat": "a reminder sent again: forwarded once, at its latest place"}


# --- sessions -----------------------------------------------------------------------------------------------------


def sessions_page(rows: list[Savings], viewer: Viewer) -> str:
    whole = total(rows)
    if not rows:
        body = ('<h1>Sessions</h1><p class="empty">No forwarded requests recorded yet for this key. Point your agent '
                "at workset (its base URL) with this key, and its sessions appear here.</p>")
        return page("Sessions", body, viewer.label)
    cards = _cards([
        ("Sessions", number(len(rows)), f"{number(whole.turns)} requests, {number(whole.compactions)} compactions"),
        ("Tokens", f"{number(whole.tokens_original)} → {number(whole.tokens_sent)}",
         f"sent {share(whole.tokens_sent, whole.tokens_original)} of what agents sent (workset's count)"),
        ("Provider cache", number(whole.cached_tokens),
         f"of {number(whole.input_tokens)} prompt tokens; {number(whole.whole_cached_tokens)} had everything been "
         "forwarded"),
        ("Cost", dollars(whole.cost), f"{dollars(whole.cost_whole)} forwarding everything"),
    ])
    lines = [_savings_line(row) for row in rows]
    body = (f"<h1>Sessions</h1>{_verdict(whole, 'Across these sessions, ')}{cards}<div class=\"wide\">"
            + table(("Session", "Model · policy", "Requests", "Compactions", "Tokens in", "Sent", "Cached",
                     "Whole cached", "Cost", "Whole cost", "Saved", "Verdict", "Last active (UTC)"),
                    lines + [_savings_line(whole, "total")], "data sessions") + "</div>"
            + f'<p class="muted">The {len(rows)} most recently active sessions. Tokens in and sent are workset\'s '
              "count; cached, cost and saved are the provider's, with its prompt cache counted on both sides.</p>")
    return page("Sessions", body, viewer.label)


def _savings_line(row: Savings, cls: str = "") -> str:
    name = (link(session_url(row.session), row.label or row.session)
            + (f'<div class="id">{esc(row.session)}</div>' if row.label else "")) if not cls else "All sessions"
    return (f'<tr class="{cls}"><td>{name}</td><td>{esc(row.model or "–")}<div class="id">{esc(row.policy)}</div></td>'
            f'<td class="num">{number(row.turns)}</td><td class="num">{number(row.compactions)}</td>'
            f'<td class="num">{number(row.tokens_original)}</td><td class="num">{number(row.tokens_sent)}</td>'
            f'<td class="num">{number(row.cached_tokens)}</td><td class="num">{number(row.whole_cached_tokens)}</td>'
            f'<td class="num">{dollars(row.cost)}</td><td class="num">{dollars(row.cost_whole)}</td>'
            f'<td class="num {_tone(row.saved)}">{dollars(row.saved)}</td>'
            f'<td class="verdict {_tone(row.saved)}">{esc(row.verdict)}</td><td class="when">{when(row.last_at, short=True)}</td></tr>')


def _verdict(row: Savings, lead: str = "") -> str:
    return f'<p class="verdict {_tone(row.saved)}">{esc(lead)}{esc(row.verdict)}.</p>'


def _tone(saved: float | None) -> str:
    """Red for a loss, green for a saving, as `dollars` shows them (to the hundredth of a cent)."""
    shown = None if saved is None else round(saved, 4)
    return "" if not shown else "loss" if shown < 0 else "gain"


def _cards(cards: Sequence[tuple[str, str, str]]) -> str:
    return '<div class="cards">' + "".join(
        f'<div class="card"><div class="label">{esc(label)}</div><div class="value">{esc(value)}</div>'
        f'<div class="note">{esc(note)}</div></div>' for label, value, note in cards) + "</div>"


# --- one session --------------------------------------------------------------------------------------------------


def session_page(row: dict[str, Any], totals: Savings, turns: list[dict[str, Any]], view: dict[str, Any],
                 checkpoints: list[dict[str, Any]], query: str, hits: list[dict[str, Any]] | None,
                 viewer: Viewer) -> str:
    session = row["id"]
    names = " · ".join(esc(value) for value in (row.get("explicit_id"), row.get("client_id")) if value)
    related = "".join(f' · {label} {link(session_url(row[name]), row[name])}'
                      for name, label in (("forked_from", "forked from"), ("parent_id", "started from"))
                      if row.get(name))
    head = (f'<h1>Session <span class="id">{esc(session)}</span></h1>'
            f'<p class="sub">{names + " · " if names else ""}{esc(row.get("model") or "–")} · policy '
            f'{esc(row.get("policy") or "–")} · {number(row.get("messages"))} messages · started '
            f'{when(row.get("created_at"))} · updated {when(row.get("updated_at"))}{related}</p>')
    cards = _cards([
        ("Requests", number(totals.turns), f"{number(totals.compactions)} compactions, {len(checkpoints)} checkpoints"),
        ("Tokens", f"{number(totals.tokens_original)} → {number(totals.tokens_sent)}",
         f"sent {share(totals.tokens_sent, totals.tokens_original)} of what the agent sent"),
        ("Provider cache", number(totals.cached_tokens), f"of {number(totals.input_tokens)} prompt tokens sent"),
        ("Cost", dollars(totals.cost), f"{dollars(totals.cost_whole)} forwarding everything"),
    ])
    body = (head + _verdict(totals) + cards
            + f'<section><h2>Prompt tokens per request</h2>{tokens_chart(turns)}</section>'
            + _search(session, query, hits)
            + f'<section><h2>Requests</h2><div class="scroll">{_turns_table(session, turns)}</div></section>'
            + '<div class="columns">'
            + f'<section><h2>Task state</h2>{_state(session, view.get("state") or {})}</section>'
            + f'<section><h2>Checkpoints</h2>{_checkpoints(checkpoints)}</section></div>'
            + _ledger(session, view.get("facts") or [])
            + _actions(session, view.get("actions") or []))
    return page(f"Session {session}", body, viewer.label, [(session_url(session), session)])


def _turns_table(session: str, turns: list[dict[str, Any]]) -> str:
    if not turns:
        return '<p class="muted">No forwarded requests recorded yet.</p>'
    rows = []
    base = url("sessions", session, "turns")  # quoted once: thousands of rows link below it
    for turn in turns:
        saved = saving(turn["cost"], turn["cost_whole"])
        compaction = f'<span class="badge k-compaction">{esc(turn["compaction"])}</span>' if turn["compaction"] else ""
        number_link = link(f"{base}/{turn['n']}", turn["n"])
        rows.append(
            f'<tr class="{"compacted" if turn["compaction"] else ""}"><td>{number_link}'
            f'</td><td class="when">{when(turn["created_at"])}</td><td>{esc(turn["route"])}</td>'
            f'<td class="num">{number(turn["messages"])}</td><td class="num">{number(turn["tokens_original"])}</td>'
            f'<td class="num">{number(turn["tokens_sent"])}</td><td class="num">{number(turn["input_tokens"])}</td>'
            f'<td class="num">{number(turn["cached_tokens"])}</td><td class="num">{number(turn["whole_tokens"])}</td>'
            f'<td class="num">{dollars(turn["cost"])}</td><td class="num {_tone(saved)}">{dollars(saved)}</td>'
            f'<td>{compaction}</td><td class="num">{number(turn["recall_rounds"])}</td>'
            f'<td class="num">{esc(turn["status"])}</td><td class="num">{turn["workset_ms"] or 0:.1f}</td>'
            f'<td class="note">{esc(turn["note"] or "")}</td></tr>')
    return table(("#", "When", "Route", "Messages", "Tokens in", "Sent", "Provider in", "Cached", "Whole", "Cost",
                  "Saved", "Compaction", "Recall", "Status", "workset ms", "Note"), rows, "data turns")


def _search(session: str, query: str, hits: list[dict[str, Any]] | None) -> str:
    form = (f'<form method="get" action="{esc(session_url(session))}" class="search" role="search">'
            f'<input type="search" name="q" value="{esc(query)}" placeholder="Search this session\'s stored content"'
            ' aria-label="search the session"><button type="submit">Search</button></form>')
    if hits is None:
        return f"<section><h2>Search</h2>{form}</section>"
    if not hits:
        found = f'<p class="muted">Nothing stored in this session matches “{esc(query)}”.</p>'
    else:
        words = query_words(query)
        found = table(("Ref", "From", "Match"), (
            f'<tr><td>{ref_link(session, hit["ref"])}</td><td>{esc(hit["role"])}'
            f'{" · " + esc(hit["tool"]) if hit.get("tool") else ""}</td>'
            f'<td class="snippet">{_snippet(hit["content"] or "", words)}</td></tr>' for hit in hits), "data hits")
    return f"<section><h2>Search</h2>{form}{found}</section>"


def _snippet(content: str, words: list[str], width: int = 320) -> str:
    """The part of `content` around the first word found, flat, with the words marked."""
    low = content.lower()
    found = [at for at in (low.find(word) for word in words) if at >= 0]
    start = max(0, min(found) - width // 3) if found else 0
    window = one_line(content[start:start + width * 2], width)
    marked = re.compile("|".join(re.escape(word) for word in words), re.IGNORECASE) if words else None
    out, last = [], 0
    for match in marked.finditer(window) if marked else ():
        out += [esc(window[last:match.start()]), f"<mark>{esc(match.group())}</mark>"]
        last = match.end()
    return ("…" if start else "") + "".join(out) + esc(window[last:])


def _state(session: str, state: dict[str, Any]) -> str:
    if not state:
        return '<p class="muted">No task state stored.</p>'

    def items(values: list[Any], render: Any) -> str:
        return "<ul>" + "".join(f"<li>{render(value)}</li>" for value in values) + "</ul>"

    def fact(item: dict[str, Any]) -> str:
        kind = f'<span class="tag">{esc(item["kind"])}</span> ' if item.get("kind") else ""
        return (f'{kind}<b>{esc(item.get("key", ""))}</b>: {esc(one_line(str(item.get("value", "")), CELL_CHARS))} '
                f'{ref_link(session, item.get("ref") or "")}')

    sections = [("Goal", state.get("goal"), lambda text: f"<p>{esc(text)}</p>"),
                ("Next action", state.get("next_action"), lambda text: f"<p>{esc(text)}</p>"),
                ("Constraints", state.get("constraints"), lambda values: items(values, esc)),
                ("Plan", state.get("plan"), lambda values: items(
                    values, lambda step: f'{esc(step["item"])} <span class="tag">{esc(step["status"])}</span>')),
                ("Decisions", state.get("decisions"), lambda values: items(values, esc))]
    for name, title in (("findings", "Findings"), ("learned", "Learned"), ("approvals", "Approvals"),
                        ("verification", "Verification")):
        sections.append((title, state.get(name), lambda values: items(values, fact)))
    sections.append(("Failed approaches", state.get("failed"), lambda values: items(values, lambda failed: (
        f'{esc(failed["tool"])}({esc(one_line(str(failed["arguments"]), 120))}): {esc(failed["gist"])} '
        f'{ref_link(session, failed.get("ref") or "")}'))))
    facts = state.get("facts") or []
    more = f'<p class="muted">and {len(facts) - STATE_FACTS} more in the ledger</p>' if len(facts) > STATE_FACTS else ""
    sections.append(("Key facts", facts[:STATE_FACTS], lambda values: items(values, fact) + more))
    sections.append(("Summary", state.get("summary"), lambda text: f'<pre class="msg">{esc(text)}</pre>'))
    shown = "".join(f"<h3>{esc(title)}</h3>{render(value)}" for title, value, render in sections if value)
    return shown + f'<p class="muted">{number(state.get("actions"))} actions along the latest branch.</p>'


def _checkpoints(checkpoints: list[dict[str, Any]]) -> str:
    if not checkpoints:
        return '<p class="muted">No compaction yet.</p>'
    return table(("#", "When", "Reason", "Tokens before → after", "At message"), (
        f'<tr><td class="num">{index}</td><td class="when">{when(point["created_at"])}</td>'
        f'<td>{esc(point["reason"])}</td><td class="num">{number(point["tokens_before"])} → '
        f'{number(point["tokens_after"])}</td><td class="num">{number(point["depth"])}</td></tr>'
        for index, point in enumerate(checkpoints, 1)), "data")


def _ledger(session: str, facts: list[dict[str, Any]]) -> str:
    rows = (f'<tr class="{"superseded" if fact.get("superseded") else ""}"><td class="num">{number(fact["turn"])}</td>'
            f'<td><span class="tag">{esc(fact["kind"])}</span></td><td>{esc(one_line(fact["key"], 80))}</td>'
            f'<td>{esc(one_line(str(fact["value"]), CELL_CHARS))}</td><td>{esc(fact.get("source") or "")}</td>'
            f'<td>{ref_link(session, fact.get("evidence_ref") or "")}</td></tr>' for fact in facts)
    return (f'<section><details><summary><h2>Ledger: {number(len(facts))} facts</h2></summary>'
            '<p class="muted">Every fact read from the conversation, in order; a struck-out one was superseded by a '
            "later value.</p>"
            + table(("Turn", "Kind", "Key", "Value", "Source", "Evidence"), rows, "data") + "</details></section>")


def _actions(session: str, actions: list[dict[str, Any]]) -> str:
    rows = (f'<tr><td class="num">{number(action["turn"])}</td><td>{esc(action["tool"])}</td>'
            f'<td class="code">{esc(one_line(str(action["arguments"]), CELL_CHARS))}</td>'
            f'<td><span class="outcome {esc(action["outcome"])}">{esc(action["outcome"])}</span></td>'
            f'<td>{esc(one_line(str(action["gist"] or ""), CELL_CHARS))}</td>'
            f'<td>{ref_link(session, action.get("evidence_ref") or "")}</td></tr>' for action in actions)
    return (f'<section><details><summary><h2>Actions: {number(len(actions))}</h2></summary>'
            + table(("Turn", "Tool", "Arguments", "Outcome", "Gist", "Result"), rows, "data") + "</details></section>")


# --- one request --------------------------------------------------------------------------------------------------


def turn_page(row: dict[str, Any], detail: TurnDetail, viewer: Viewer) -> str:
    session, n, figures = row["id"], detail.n, detail.figures
    steps = (link(turn_url(session, n - 1), "← previous") if n > 1 else '<span class="muted">← previous</span>') + \
        " · " + (link(turn_url(session, n + 1), "next →") if n < detail.turns else '<span class="muted">next →</span>')
    head = (f'<h1>Request {n} <span class="muted">of {detail.turns}</span></h1>'
            f'<p class="sub">{when(figures["created_at"])} · {esc(figures["route"])} · {esc(figures["model"])} · '
            f'policy {esc(figures["policy"])} · status {esc(figures["status"])}'
            f'{" · " + esc(figures["note"]) if figures["note"] else ""}</p><p class="steps">{steps}</p>')
    saved = saving(figures["cost"], figures["cost_whole"])
    cards = _cards([
        ("Tokens", f'{number(figures["tokens_original"])} → {number(figures["tokens_sent"])}',
         f'sent {share(figures["tokens_sent"], figures["tokens_original"])} of the agent\'s request'),
        ("Provider", number(figures["input_tokens"]), f'prompt tokens, {number(figures["cached_tokens"])} cached; '
                                                      f'{number(figures["whole_tokens"])} forwarding everything'),
        ("Cost", dollars(figures["cost"]), f'{dollars(figures["cost_whole"])} forwarding everything, saved '
                                           f'{dollars(saved)}'),
        ("Compaction", figures["compaction"] or "none this request", _in_force(detail.checkpoint)),
    ])
    legend = "".join(f'<span class="badge k-{esc(kind)}">{esc(kind)} {number(detail.counts.get(kind, 0))}</span>'
                     f'<span class="meaning">{esc(meaning)}</span>' for kind, meaning in KINDS.items())
    rows = "".join(_change_row(session, change) for change in detail.changes)
    body = (head + cards + f'<div class="legend kinds">{legend}</div>'
            + '<label class="toggle"><input type="checkbox" id="hide-kept"> hide messages forwarded as sent</label>'
            + '<table class="changes"><thead><tr><th>#</th><th>As the agent sent it</th><th>As workset forwarded it'
              f"</th><th>Why</th></tr></thead><tbody>{rows}</tbody></table><p class=\"steps\">{steps}</p>")
    return page(f"Request {n} of {session}", body, viewer.label,
                [(session_url(session), session), (turn_url(session, n), f"request {n}")])


def _in_force(checkpoint: dict[str, Any] | None) -> str:
    if not checkpoint:
        return "no compaction in force"
    return (f'in force: the compaction at message {checkpoint.get("tip", "–")} ({checkpoint.get("reason") or "budget"}'
            f'), {number(checkpoint.get("tokens_before"))} → {number(checkpoint.get("tokens_after"))} tokens')


def _change_row(session: str, change: Change) -> str:
    where = "+" if change.index is None else str(change.index)
    if change.original is None:
        agent = '<span class="muted">not in the agent\'s request: added by workset</span>'
    else:
        agent = _message(session, change.original, change.ref)
    if change.kind == KEPT:
        forwarded = '<span class="muted">forwarded as sent</span>'
    elif change.kind == REMOVED:
        forwarded = f'<span class="into">→ {esc(INTO.get(change.into, change.into))}</span>'
    elif change.into == "recall tool":
        forwarded = '<span class="muted">the workset_recall tool, added to the request\'s tools</span>'
    elif change.sent is None:
        forwarded = '<span class="muted">what workset wrote here is no longer stored</span>'
    else:
        forwarded = _message(session, change.sent, "")
    into = f'<div class="into">{esc(change.into)}</div>' if change.kind == ADDED and change.into else ""
    reference = f'<div>{ref_link(session, change.ref)}</div>' if change.ref and change.kind != KEPT else ""
    return (f'<tr class="change {esc(change.kind)}"><td class="where">{esc(where)}<div class="role">'
            f'{esc(change.role)}</div></td><td class="agent">{agent}</td><td class="sent">{forwarded}</td>'
            f'<td class="why"><span class="badge k-{esc(change.kind)}">{esc(change.kind)}</span>{into}'
            f'<p class="rule">{esc(change.rule)}</p>{reference}</td></tr>')


def _message(session: str, message: Message, ref: str) -> str:
    """A message's text (clipped, refs in it linked) and tool calls; the whole text is on its ref's page."""
    text, more = clip(message_text(message), CLIP_CHARS)
    shown = linked_refs(session, esc(text))
    if more:
        whole = f": the whole at {ref_link(session, ref)}" if ref else ""
        shown += f'<span class="clipped">… {number(more)} more characters{whole}</span>'
    calls = "".join(f'<div class="call">→ {esc(call.name)}({esc(_clipped(call.arguments, ARGUMENT_CHARS))})</div>'
                    for call in tool_calls(message))
    content = message.get("content")
    other = [str(part.get("type")) for part in content if isinstance(part, dict) and "text" not in part] \
        if isinstance(content, list) else []
    parts = f'<div class="muted">{len(other)} non-text part(s): {esc(", ".join(other))}</div>' if other else ""
    answered = f'<div class="muted">answers {esc(message["tool_call_id"])}</div>' if message.get("tool_call_id") else ""
    return f'{answered}<pre class="msg">{shown}</pre>{calls}{parts}' if shown else f"{answered}{calls}{parts}"


def _clipped(text: str, limit: int) -> str:
    shown, more = clip(text, limit)
    return shown + ("…" if more else "")


# --- evidence, login, errors --------------------------------------------------------------------------------------


def evidence_page(row: dict[str, Any], evidence: dict[str, Any], viewer: Viewer) -> str:
    session, ref = row["id"], evidence["ref"]
    origin = evidence.get("session") or session
    where = "" if origin == session else f" · stored in {link(session_url(origin), origin)}"
    body = (f'<h1>Evidence <span class="id">ref:{esc(ref)}</span></h1>'
            f'<p class="sub">{esc(evidence["role"])}{" · " + esc(evidence["tool"]) if evidence.get("tool") else ""} · '
            f'{number(evidence["tokens"])} tokens · {number(len(evidence["content"]))} characters{where}</p>'
            '<p class="muted">The whole content stored under this ref: what workset_recall returns to the model.</p>'
            f'<pre class="msg evidence">{esc(evidence["content"])}</pre>')
    return page(f"ref:{ref}", body, viewer.label, [(session_url(session), session), (evidence_url(session, ref),
                                                                                    f"ref:{ref}")])


def login_page(message: str, then: str, failed: bool = False) -> str:
    body = (f'<div class="login"><h1>workset</h1><p class="{"error" if failed else "muted"}">{esc(message)}</p>'
            f'<form method="post" action="{url("login")}"><input type="hidden" name="next" value="{esc(then)}">'
            '<label for="key">API key</label><input type="password" id="key" name="key" autocomplete="current-password"'
            ' required autofocus><button type="submit">Log in</button></form>'
            '<p class="muted">The key is kept in a cookie of this site only. You see the sessions your key made; '
            "admin keys (ui.admin_keys) see every key's. Scripts may send the key as a bearer header instead.</p>"
            "</div>")
    return page("Log in", body)


def error_page(status: int, message: str, viewer: Viewer | None) -> str:
    title = {404: "Not found", 400: "Bad request"}.get(status, "Error")
    body = f'<h1>{esc(title)}</h1><p class="error">{esc(message)}</p><p>{link(ROOT, "← all sessions")}</p>'
    return page(title, body, viewer.label if viewer else "")
