"""The load suite's fake provider: it plays every conversation's model and checks what workset forwards.

A conversation is named by its marker (`wsmarkL007`: group letter, number), sent as the request's `user` field
and written into its task, tool calls and tool outputs. Every request the provider receives is scanned for markers:
any marker but the sender's own is a foreign hit, recorded with where it was found. GET /_report returns what was
seen per conversation. Replies are those of an agent working through records (one `read_record` call per turn);
conversations of the isolation groups (ISOLATION_GROUPS) also attack: once workset offers `workset_recall`, the
model asks it for another conversation's ref and content (and, as a control, for its own), then asks its user a
question, which the client answers by naming another conversation's account (event-driven retrieval).

Replies wait `delay_ms` (a model's own time) and report it with the time spent here in `openai-processing-ms`, a
header workset relays, so the client can tell workset's added latency from the provider's.

    python -m bench.recording_provider PORT [--delay-ms 500]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from fakeupstream import Completion, FakeUpstream, Hang, ToolCall  # noqa: E402

MARKER = re.compile(r"wsmark([A-Z])(\d{3})(?!\d)")
REF = re.compile(r"\[ref:([0-9a-f]+)\]")
RECALL_TOOL = "workset_recall"
RECALL_ID = "wsrecall"  # prefix of the recall calls this provider makes: their answers come back under these ids
RETRIEVAL_NOTE = "names content that left the context"  # the heading of workset's retrieved lines (retrieval.py)
ASK_USER = "Which other account should I compare?"
ISOLATION_GROUPS = frozenset("IN")  # I: one key, N: no key
REPORT_PATH = "/_report"


def marker(group: str, number: int) -> str:
    return f"wsmark{group}{number:03d}"


def parse(name: str) -> tuple[str, int] | None:
    """(group, number) of a conversation's marker; None when `name` is not one."""
    found = MARKER.fullmatch(name)
    return (found.group(1), int(found.group(2))) if found else None


def group_of(name: str) -> str:
    parsed = parse(name)
    return parsed[0] if parsed else ""


def handle(group: str, number: int) -> str:
    """The conversation's account id: a name workset extracts (snake_case with digits)."""
    return f"acct_{group.lower()}{number:03d}_ledger"


def record_name(group: str, number: int, step: int) -> str:
    return f"rec_{group.lower()}{number:03d}_s{step:02d}"


def tool_output(group: str, number: int, record: str, lines: int) -> str:
    """What the client's read_record tool returns: every line names the account and carries the marker, so any
    line of it that reaches another conversation is caught."""
    owner, account = marker(group, number), handle(group, number)
    return "\n".join(f"{account} {record} line {i}: {owner} balance {1000 + 7 * i} status ok" for i in range(lines))


@dataclass
class Seen:
    """What the provider saw of one conversation."""

    requests: int = 0
    steps: int = 0  # read_record calls made
    refs: set[str] = field(default_factory=set)  # refs shown in its requests
    foreign: list[dict[str, Any]] = field(default_factory=list)  # {markers, via, snippet}
    recall_attacks: int = 0  # replies that called workset_recall on another conversation's ref and content
    recall_answers: dict[str, int] = field(default_factory=dict)  # kind -> answers received
    own_recall_hits: int = 0  # control: answers to recalls of its own content that hold its marker
    asked_user: int = 0
    retrieval_seen: int = 0  # requests holding workset's retrieved lines

    def report(self) -> dict[str, Any]:
        out = asdict(self)
        out["refs"] = len(self.refs)
        return out


class RecordingProvider:
    def __init__(self, delay_ms: float = 0.0) -> None:
        self.delay_s = delay_ms / 1000
        self.seen: dict[str, Seen] = {}
        self.unowned = 0  # chat requests without a marker in `user`
        self.fake = FakeUpstream(default=self.reply)
        self.app = Starlette(routes=[Route(REPORT_PATH, self._report, methods=["GET"]), Mount("", app=self.fake.app)])

    async def _report(self, request: Request) -> JSONResponse:
        return JSONResponse({"unowned": self.unowned,
                             "conversations": {name: seen.report() for name, seen in self.seen.items()}})

    def reply(self, body: dict[str, Any]) -> Completion | Hang:
        """The model's reply to one request of a conversation, after checking what the request carries."""
        began = time.perf_counter()
        owner = body.get("user")
        parsed = parse(owner) if isinstance(owner, str) else None
        if parsed is None:
            self.unowned += 1
            return self._timed(Completion(content="ok"), began)
        assert isinstance(owner, str)
        group, number = parsed
        seen = self.seen.setdefault(owner, Seen())
        seen.requests += 1
        messages = [m for m in body.get("messages", []) if isinstance(m, dict)]
        self._check(owner, seen, messages)
        offered = any(((t or {}).get("function") or {}).get("name") == RECALL_TOOL for t in body.get("tools") or ())
        answering = bool(messages) and _is_recall_answer(messages[-1])
        if group in ISOLATION_GROUPS and offered and not seen.recall_attacks and not answering:
            attack = self._recall_attack(owner, group, number, seen)
            if attack is not None:
                return self._timed(attack, began)
        if answering:
            self._read_answers(owner, seen, messages)
        if group in ISOLATION_GROUPS and seen.recall_attacks and not seen.asked_user:
            seen.asked_user += 1
            return self._timed(Completion(content=ASK_USER), began)
        seen.steps += 1
        record = record_name(group, number, seen.steps)
        account = handle(group, number)
        text = f"Step {seen.steps} for {account}: reading {record}. Next: compare the {owner} totals."
        call = ToolCall("read_record", json.dumps({"account": account, "record": record}),
                        f"call_{owner}_{seen.steps}_{seen.requests}")
        return self._timed(Completion(content=text, tool_calls=[call]), began)

    def _timed(self, completion: Completion, began: float) -> Hang:
        own_ms = self.delay_s * 1000 + (time.perf_counter() - began) * 1000
        completion.headers["openai-processing-ms"] = f"{own_ms:.3f}"
        return Hang(self.delay_s, then=completion)

    def _check(self, owner: str, seen: Seen, messages: list[dict[str, Any]]) -> None:
        """Record the refs shown and every marker that is not the sender's, with the message it came in."""
        for index, message in enumerate(messages):
            text = orjson.dumps(message).decode()
            seen.refs.update(REF.findall(text))
            foreign = sorted({m.group(0) for m in MARKER.finditer(text)} - {owner})
            if foreign:
                at = text.find(foreign[0])
                seen.foreign.append({"markers": foreign, "via": _via(message), "message": index,
                                     "snippet": text[max(0, at - 120): at + 60]})
        if any(RETRIEVAL_NOTE in orjson.dumps(m).decode() for m in messages[-3:]):
            seen.retrieval_seen += 1

    def _recall_attack(self, owner: str, group: str, number: int, seen: Seen) -> Completion | None:
        """Ask workset_recall for another conversation's ref and for its account by query; and, as controls, for
        a ref and the account of this conversation (their answers must hold its own marker)."""
        victims = sorted(name for name, other in self.seen.items()
                         if name != owner and group_of(name) == group and other.refs - seen.refs)
        if not victims or not seen.refs:
            return None
        victim = victims[number % len(victims)]
        foreign_ref = sorted(self.seen[victim].refs - seen.refs)[0]
        own_ref = sorted(seen.refs - set().union(*(o.refs for n, o in self.seen.items() if n != owner)))
        foreign_account = handle(*parse(victim))  # type: ignore[misc]
        calls = {
            "foreign_ref": {"ref": foreign_ref},
            "foreign_query": {"query": f"{foreign_account} balance"},
            "foreign_ref_query": {"ref": foreign_ref, "query": "balance status"},
            "own_query": {"query": f"{handle(group, number)} balance"},
        }
        if own_ref:
            calls["own_ref"] = {"ref": own_ref[0]}
        seen.recall_attacks += 1
        return Completion(content="Let me check the stored records.", tool_calls=[
            ToolCall(RECALL_TOOL, json.dumps(arguments), f"{RECALL_ID}_{kind}_{seen.requests}")
            for kind, arguments in calls.items()])

    def _read_answers(self, owner: str, seen: Seen, messages: list[dict[str, Any]]) -> None:
        """The answers to this provider's recall calls, which end the request."""
        answers = []
        for message in reversed(messages):
            if not _is_recall_answer(message):
                break
            answers.append(message)
        for answer in answers:
            kind = str(answer["tool_call_id"])[len(RECALL_ID) + 1:].rsplit("_", 1)[0]
            seen.recall_answers[kind] = seen.recall_answers.get(kind, 0) + 1
            if kind.startswith("own") and owner in str(answer.get("content")):
                seen.own_recall_hits += 1


def _is_recall_answer(message: dict[str, Any]) -> bool:
    return message.get("role") == "tool" and str(message.get("tool_call_id", "")).startswith(RECALL_ID)


def _via(message: dict[str, Any]) -> str:
    """Which way a foreign marker came: a recall answer, retrieved lines, or elsewhere in the working set."""
    if _is_recall_answer(message):
        return "recall"
    if RETRIEVAL_NOTE in orjson.dumps(message).decode():
        return "retrieval"
    return f"{message.get('role')} message"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("port", type=int)
    parser.add_argument("--delay-ms", type=float, default=0.0, help="the model's own time per reply")
    args = parser.parse_args()
    provider = RecordingProvider(args.delay_ms)
    uvicorn.run(provider.app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
