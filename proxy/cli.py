"""Command line: `workset serve` (also `python -m proxy serve`), `reference`, `eval`, and the local admin commands
`sessions`, `inspect`, `stats`, `show-turn`, `show` and `migrate`, which open the store file directly (every key)."""

from __future__ import annotations

import argparse
import gc
import sqlite3
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Sequence

from .config import Config, ServerSettings, load_config
from .errors import WorksetError
from .policy import Policy, load_policies
from .schema import ConfigError


def load_settings(config_path: str | None, overrides: dict[str, object] | None = None,
                  policy: str | None = None) -> tuple[Config, dict[str, Policy]]:
    """Config and every policy it can name, validated; ConfigError names the bad key."""
    config, base = load_config(config_path, overrides)
    if policy:
        config = _replace(config, policy=policy)
    policies_dir = Path(config.policies_dir)
    if not policies_dir.is_absolute():
        policies_dir = base / policies_dir
    wanted = (config.policy, *config.policy_by_model.values())
    policies = load_policies(policies_dir, wanted)
    # A policy given by path is known by its file's `name`; point the config at that name.
    if config.policy not in policies:
        raise ConfigError(f"policy {config.policy!r} not found")
    return config, policies


def _replace(config: Config, **changes: object) -> Config:
    from dataclasses import replace

    return replace(config, **changes)


def serve(args: argparse.Namespace) -> int:
    overrides: dict[str, object] = {}
    if args.host:
        overrides["server.host"] = args.host
    if args.port is not None:
        overrides["server.port"] = args.port
    overrides.update(_store_override(args.store))
    config, policies = load_settings(args.config, overrides, args.policy)

    import uvicorn

    from .app import create_app
    from .httpserver import answer_when_cancelled, http_protocol
    from .storage import StoreOpenError

    try:
        app = create_app(config, policies)
    except StoreOpenError as error:  # one line, not a traceback
        raise CommandError(str(error)) from error
    tune_interpreter(config.server)
    uvicorn.run(answer_when_cancelled(app), host=config.server.host, port=config.server.port, log_level="warning",
                access_log=False, timeout_keep_alive=config.server.keep_alive_s, timeout_graceful_shutdown=5,
                http=http_protocol(config.server.request_read_s))
    return 0


def tune_interpreter(server: ServerSettings) -> None:
    """For a server process, not a library: collect young objects less often, and never scan what start-up built
    (modules, tokenizer, policies): a request allocates thousands of short-lived objects, and each collection that
    reaches the old generation walks every session held in memory. And hand the interpreter lock over as often as
    server.switch_interval_ms says (a small request's steps each wait for it while a large one's work runs)."""
    _, middle, old = gc.get_threshold()
    gc.set_threshold(server.gc_young_threshold, middle, old)
    gc.freeze()
    sys.setswitchinterval(server.switch_interval_ms / 1000)


def reference(args: argparse.Namespace) -> int:
    """Markdown tables of every config.yaml and policy key with its default and meaning (the README's)."""
    from .schema import describe

    for title, schema in (("config.yaml", Config), ("policies/*.yaml", Policy)):
        print(f"| {title} key | default | meaning |\n| --- | --- | --- |")
        for key, default, doc in describe(schema):
            shown = "[]" if default == () else ("{}" if default == {} else default)
            print(f"| `{key}` | `{shown}` | {doc} |")
        print()
    return 0


# --- local admin commands: read the store file, every key ---------------------------------------------------------


class CommandError(Exception):
    """Bad input to an admin command (unknown session or ref, no store): one line, exit status 2."""


def list_sessions(args: argparse.Namespace) -> int:
    with _open_store(_store_path(args)) as store:
        rows = store.sessions(None, args.limit)
    _print_table(("id", "explicit id", "key", "updated", "model", "policy", "messages"),
                 [(row["id"], row["explicit_id"] or "-", row["key_hash"][:8], _when(row["updated_at"]),
                   row["model"] or "-", row["policy"] or "-", str(row["messages"])) for row in rows])
    return 0


def _print_table(header: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[int] = ()) -> None:
    """Columns padded to their widest cell; the `right` columns (numbers) aligned right."""
    table = [tuple(header), *map(tuple, rows)]
    widths = [max(len(line[column]) for line in table) for column in range(len(header))]
    for line in table:
        cells = (cell.rjust(width) if column in right else cell.ljust(width)
                 for column, (cell, width) in enumerate(zip(line, widths)))
        print("  ".join(cells).rstrip())


def stats(args: argparse.Namespace) -> int:
    """The savings table: per session, tokens and dollars as sent and had everything been forwarded."""
    from .report import savings, total

    with _open_store(_store_path(args)) as store:
        rows = savings(store, None, args.since, args.limit)
    if not rows:
        print("no forwarded requests recorded" + (" in that period" if args.since else ""))
        return 0
    numbers = range(3, 11)
    _print_table(("session", "model", "policy", "turns", "tokens in", "sent", "cached", "whole cached", "cost $",
                  "whole $", "saved $", "saved"),
                 [_savings_line(row) for row in rows] + [_savings_line(total(rows))], right=numbers)
    whole = total(rows)
    print(f"\n{whole.verdict}" + ("" if whole.reported == whole.turns else
                                  f" ({whole.turns - whole.reported} requests without the provider's usage: "
                                  "workset's own token count stands in, nothing counted as cached)"))
    return 0


def _savings_line(row: Any) -> tuple[str, ...]:
    share = row.saved_share
    return (row.session, row.model or "-", row.policy or "-", str(row.turns), str(row.tokens_original),
            str(row.input_tokens), str(row.cached_tokens), str(row.whole_cached_tokens), _dollars(row.cost),
            _dollars(row.cost_whole), _dollars(row.saved), f"{share * 100:.1f}%" if share is not None else "-")


def _dollars(value: float | None) -> str:
    return f"{value:.4f}" if value is not None else "-"


_MARKS = {"kept": " ", "removed": "-", "added": "+"}  # masked, excerpted and paste: "~" (shown in part)


def show_turn(args: argparse.Namespace) -> int:
    """One request as a diff: the agent's messages, what became of each and why, and what workset added."""
    from .report import TurnNotFound, turn_detail

    with _open_store(_store_path(args)) as store:
        row = _find_session(store, args.session)
        try:
            detail = turn_detail(store, row["id"], args.n)
        except TurnNotFound as error:
            raise CommandError(f"no request {args.n} in session {row['id']}") from error
    figures = detail.figures
    color = sys.stdout.isatty() and not args.no_color
    print(f"session {row['id']}  request {detail.n} of {detail.turns}  {_when(figures['created_at'])}  "
          f"{figures['route']}  {figures['model']}  policy {figures['policy']}")
    print(f"tokens: {figures['tokens_original']} sent by the agent, {figures['tokens_sent']} forwarded "
          f"(provider: {figures['input_tokens']} in, {figures['cached_tokens']} cached); cost "
          f"${_dollars(figures['cost'])} vs ${_dollars(figures['cost_whole'])} forwarded whole"
          + (f"; compaction: {figures['compaction']}" if figures["compaction"] else ""))
    print("  ".join(f"{kind} {count}" for kind, count in sorted(detail.counts.items())) + "\n")
    for change in detail.changes:
        mark = _MARKS.get(change.kind, "~")
        where = f"[{change.index}]" if change.index is not None else "[+]"
        message = change.sent if change.sent is not None else change.original
        text = _clipped(message, args.width) if message is not None else ""
        if change.into == "recall tool":
            text = "tool definition: workset_recall"
        line = f"{mark} {where:>6} {change.role:<9} {change.kind:<9} {text}"
        if color:
            line = _COLORS.get(change.kind, "\033[33m") + line + "\033[0m"
        print(line)
        if change.kind != "kept" or args.reasons:
            print(f"{'':>10}why: {change.rule}" + (f" [ref:{change.ref}]" if change.ref and change.kind != "kept" else ""))
    return 0


_COLORS = {"kept": "", "removed": "\033[31m", "added": "\033[32m"}


def inspect_session(args: argparse.Namespace) -> int:
    """The session's task state and the working set its next call would get, computed on a copy of the store."""
    from .engine import Engine, UnknownPolicy
    from .inspect import latest_branch
    from .tokens import TokenCounter
    from .upstream import context_window

    store_path = _store_path(args)
    config, policies = load_settings(*_admin_config(args), args.policy)
    with _store_copy(store_path) as store:
        row = _find_session(store, args.session)
        branch = latest_branch(store, row["id"])
        if not branch.messages:
            raise CommandError(f"session {row['id']} has no stored messages")
        counter = TokenCounter(config.tokens.encoding, exact_chars=config.tokens.exact_chars)
        engine = Engine(config, policies, store, counter, context_window)
        try:
            policy = engine.policy_for(row["model"], args.policy or row["policy"])
        except UnknownPolicy as error:
            raise CommandError(f"{error}; pick one with --policy") from error
        # The latest request again, as the proxy would prepare it (the reply is not stored: the next request
        # carries it), under the session's own key and explicit id so it resolves to the same nodes.
        body = {"model": row["model"], "messages": branch.messages}
        prepared = engine.prepare(body, row["key_hash"], row["explicit_id"], policy.name)
        _print_inspection(row, branch, policy, prepared)
    return 0


def _print_inspection(row: dict[str, Any], branch: Any, policy: Policy, prepared: Any) -> None:
    from .state import render_state

    explicit = f" (explicit id {row['explicit_id']})" if row["explicit_id"] else ""
    print(f"session {row['id']}{explicit}  key {row['key_hash'][:8]}  model {row['model']}  policy {policy.name}"
          f"  updated {_when(row['updated_at'])}")
    print(f"latest branch: {len(branch.messages)} messages, tip {branch.hashes[-1]}\n")
    print(render_state(branch.state, branch.goal, policy.state))
    sent = prepared.body["messages"]
    notes = ("; this call compacts" if prepared.compacted else "") + (f"; {prepared.note}" if prepared.note else "")
    print(f"\n## Working set of the next call: {len(sent)} messages, {prepared.tokens_sent} tokens sent of "
          f"{prepared.tokens_original} (budget {prepared.budget or '-'}){notes}")
    for index, message in enumerate(sent):
        print(f"[{index}] {str(message.get('role')):<9} {_clipped(message)}")
    print("(tool definitions are not stored: the token figures leave them out)")


def migrate(args: argparse.Namespace) -> int:
    """Create or upgrade the store's schema and exit (workset serve does it too, at start-up): for an operator who
    upgrades before starting the new version."""
    from .sqlstore import SCHEMA_VERSION
    from .storage import without_password

    settings = load_config(*_admin_config(args))[0].store
    with _open_store(settings.location, settings):
        pass
    print(f"store {without_password(settings.location)}: schema {SCHEMA_VERSION}")
    return 0


def show_ref(args: argparse.Namespace) -> int:
    from .inspect import evidence_view

    with _open_store(_store_path(args)) as store:
        row = evidence_view(store, args.ref, None)
    print(f"# ref {row['ref']}: {row['role']}{' ' + row['tool'] if row['tool'] else ''}, session {row['session']}, "
          f"{row['tokens']} tokens", file=sys.stderr)
    print(row["content"])
    return 0


def _admin_config(args: argparse.Namespace) -> tuple[str | None, dict[str, object]]:
    """The config file (default: ./config.yaml when present) and the --store override."""
    return args.config or ("config.yaml" if Path("config.yaml").is_file() else None), _store_override(args.store)


def _store_override(store: str | None) -> dict[str, object]:
    """--store: a postgresql:// URL (store.url), or a SQLite file (store.path, and no URL)."""
    from .storage import is_database_url

    if not store:
        return {}
    return {"store.url": store} if is_database_url(store) else {"store.path": store, "store.url": ""}


def _store_path(args: argparse.Namespace) -> str:
    """--store, else store.url or store.path; a SQLite file must exist: admin commands never create a store."""
    settings = load_config(*_admin_config(args))[0].store
    if not settings.url and not Path(settings.path).is_file():
        raise CommandError(f"no store at {settings.path} (give --store PATH or URL, or --config)")
    return settings.location


@contextmanager
def _open_store(location: str | Path, settings: Any = None) -> Iterator[Any]:
    from .storage import StoreOpenError, open_store

    try:
        store = open_store(location, settings)
    except StoreOpenError as error:
        raise CommandError(str(error)) from error
    try:
        yield store
    finally:
        store.close()


@contextmanager
def _store_copy(location: str) -> Iterator[Any]:
    """A private copy of the store (SQLite's online backup, consistent even while workset writes), so that what
    inspect runs (ingest, compaction checkpoints) never writes to the real one."""
    from .storage import is_database_url

    if is_database_url(location):
        raise CommandError("workset inspect works on a copy of a SQLite store; a PostgreSQL store is not copied "
                           "(use workset show-turn, or the dashboard at /ui)")
    path = Path(location)
    with tempfile.TemporaryDirectory(prefix="workset-inspect-") as folder:
        copy = Path(folder) / "store.db"
        try:
            source = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
            target = sqlite3.connect(copy)
            try:
                source.backup(target)
            finally:
                target.close()
                source.close()
        except sqlite3.Error as error:
            raise CommandError(f"cannot read the store {path}: {error}") from error
        with _open_store(copy) as store:
            yield store


def _find_session(store: Any, ident: str) -> dict[str, Any]:
    """By internal id, else by explicit id, which several keys may share: then the internal id is needed."""
    matches = store.find_sessions(ident)
    if not matches:
        raise CommandError(f"no session {ident!r} in the store")
    if len(matches) > 1 and matches[0]["id"] != ident:
        ids = ", ".join(row["id"] for row in matches)
        raise CommandError(f"explicit id {ident!r} is used by {len(matches)} sessions ({ids}): give the internal id")
    return matches[0]


def _when(timestamp: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(timestamp)) if timestamp else "-"


def _clipped(message: dict[str, Any], limit: int = 160) -> str:
    """One line: the text, then the tool calls, clipped."""
    from .extract.text import one_line
    from .messages import message_text

    parts = [message_text(message)]
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        parts.append(f"-> {function.get('name')}({function.get('arguments')})")
    return one_line(" ".join(parts), limit)


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return int(text)


def _since(text: str) -> float:
    """Epoch seconds of `30m`, `24h`, `7d` ago, or of a date (local midnight)."""
    units = {"m": 60, "h": 3600, "d": 86400}
    if text[:-1].isdigit() and text[-1:] in units:
        return time.time() - int(text[:-1]) * units[text[-1]]
    try:
        return time.mktime(time.strptime(text, "%Y-%m-%d"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a duration like 24h or 7d, or a date like 2026-11-30; got {text!r}")


def _admin_parser(commands: Any, name: str, help_text: str) -> argparse.ArgumentParser:
    parser = commands.add_parser(name, help=help_text)
    parser.add_argument("--config", help="config file (default: config.yaml when present)")
    parser.add_argument("--store", help="the store: a SQLite file (overrides store.path) or a postgresql:// URL (store.url)")
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="workset", description="OpenAI-compatible proxy forwarding a budgeted working set")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("serve", help="serve the proxy")
    run.add_argument("--config", default="config.yaml", help="config file (default: config.yaml)")
    run.add_argument("--host", help="address to listen on (overrides server.host)")
    run.add_argument("--port", type=int, help="port to listen on (overrides server.port)")
    run.add_argument("--policy", help="default policy: a preset name or a YAML path (overrides policy)")
    run.add_argument("--store", help="the store: a SQLite file (overrides store.path) or a postgresql:// URL (store.url)")
    run.set_defaults(handler=serve)
    from .evaluate.command import add_parser as add_eval

    add_eval(commands)
    keys = commands.add_parser("reference", help="print every config and policy key with its default and meaning")
    keys.set_defaults(handler=reference)
    listing = _admin_parser(commands, "sessions", "list stored sessions, newest first (every key)")
    listing.add_argument("--limit", type=_positive, default=50, help="sessions listed at most (default: 50)")
    listing.set_defaults(handler=list_sessions)
    inspecting = _admin_parser(commands, "inspect", "a session's task state and the working set of its next call")
    inspecting.add_argument("session", help="internal session id, or an explicit session id")
    inspecting.add_argument("--policy", help="policy to build with (default: the session's)")
    inspecting.set_defaults(handler=inspect_session)
    stat = _admin_parser(commands, "stats", "the savings table: tokens and dollars per session, cache counted")
    stat.add_argument("--since", type=_since, default=0.0,
                      help="only requests since then: a duration back from now (30m, 24h, 7d) or a date (2026-11-30)")
    stat.add_argument("--limit", type=_positive, default=50, help="sessions listed at most (default: 50)")
    stat.set_defaults(handler=stats)
    turn = _admin_parser(commands, "show-turn", "one forwarded request as a diff: what workset changed and why")
    turn.add_argument("session", help="internal session id, or an explicit session id")
    turn.add_argument("n", type=_positive, help="the request's number in its session (1 is the first)")
    turn.add_argument("--width", type=_positive, default=140, help="characters shown of each message (default: 140)")
    turn.add_argument("--reasons", action="store_true", help="give the reason for kept messages too")
    turn.add_argument("--no-color", action="store_true", help="no colors, even on a terminal")
    turn.set_defaults(handler=show_turn)
    migrating = _admin_parser(commands, "migrate", "create or upgrade the store's schema, then exit")
    migrating.set_defaults(handler=migrate)
    showing = _admin_parser(commands, "show", "print the stored content of a [ref:ID]")
    showing.add_argument("ref", help="the 12 hex digits of a ref")
    showing.set_defaults(handler=show_ref)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except ConfigError as error:
        print(f"workset: configuration error: {error}", file=sys.stderr)
        return 2
    except (CommandError, WorksetError) as error:
        print(f"workset: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
