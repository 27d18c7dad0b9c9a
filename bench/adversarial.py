"""`make bench` (after the latency bench): the worst time of each extraction entry point on hostile texts.

Every entry point that reads a message's text (extraction by role, ingest, the tool-output gist, the names index,
retrieval, recall passages, token counting and the token excerpter) runs on each adversarial text: long runs of
one character, DNA, hex dumps, base64, one huge line, many short lines, nested brackets, Chinese without
punctuation, repeated error and test-runner lines, a markdown table. The worst time per entry point at 1 MB is
printed against issue #9's target of 50 ms (best of `--repeat` runs of each call: the machine's other work is not
the call's). `ingest.extract_at` extracts four messages of a conversation that each hold the text (one of them
three times), with the default window and the time cap of the request path (config ingest.extract_chars and
ingest.extract_ms). tests/test_adversarial_extraction.py runs the same inputs and entry points at 100 KB.
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.machine import speed_line  # noqa: E402
from proxy.config import IngestSettings  # noqa: E402
from proxy.extract import extract, tool_output_gist  # noqa: E402
from proxy.extract.actions import runner_command  # noqa: E402
from proxy.extract.names import message_names, names  # noqa: E402
from proxy.ingest import CallLookup, context_for, extract_at  # noqa: E402
from proxy.observations import action_command, prose_of  # noqa: E402
from proxy.passages import layout, matching, query_words  # noqa: E402
from proxy.records import Action, Message, MessageContext, ToolCall  # noqa: E402
from proxy.retrieval import elided_mentions, failure_advice  # noqa: E402
from proxy.tokens import Excerpter, TokenCounter  # noqa: E402

TARGET_MS = 50.0  # issue #9: no request's own work above 50 ms for 1 MB of any text

# A unit repeated (or a generator cut) to the wanted size: the shapes that made the old patterns backtrack.
_REPEATED: dict[str, str] = {
    "run a": "a",
    "run space": " ",
    "run dot": ".",
    "run [": "[",
    "run =": "=",
    "run -": "-",
    "run #": "#",
    "run |": "|",
    "run ：": "：",
    "run 0": "0",
    "run A": "A",
    "run _": "_",
    "run /": "/",
    "x space": "x ",
    "dna": "ACGT",
    "brackets pairs": "[]",
    "dotted": "a.",
    "snake": "a_",
    "path": "a/",
    "camel": "aB",
    "digits and dashes": "1-",
    "colon space": "a: ",
    "error lines": "Error: something broke in module x\n",
    "failed lines": "FAILED tests/test_x.py::test_y - AssertionError\n",
    "passed lines": "===== 3 passed in 0.12s =====\n",
    "pytest summary no end": "=",
    "traceback lines": "Traceback (most recent call last):\n",
    "exit notes": "exit code exit code exit code ",
    "returned": "returned ",
    "short lines": "ab\n",
    "chinese": "中文没有标点的长句子一直写下去",
    "checkbox": "- [ ] ",
    "numbered": "1. ",
    "next label": "Next: ",
    "shell separators": " && ; || ",
    "pipes": " | ",
    "tags": "<output>",
    "url": "http://",
    "email": "a@b.",
    "dollar": "$1,",
    "month": "May 1 ",
    "equals spaced": "x = 1 ",
    "fence": "```\n",
    "table row": "| cell | cell | cell |\n",
    # shapes that defeat a name scanner that is linear only on the texts above
    "slash dash": "-/",
    "camel accents": "aBcDé",
    "dotted digits": "1.a",
    "snake dots": "a_.",
}


def _nested(size: int) -> str:
    depth = size // 2
    return "[" * depth + "]" * depth


def _hex_dump(size: int) -> str:
    rng = random.Random(9)
    lines = []
    total = 0
    offset = 0
    while total < size:
        data = rng.randbytes(16)
        line = f"{offset:08x}  {data[:8].hex(' ')}  {data[8:].hex(' ')}  |{''.join(chr(b) if 32 <= b < 127 else '.' for b in data)}|"
        lines.append(line)
        total += len(line) + 1
        offset += 16
    return "\n".join(lines)[:size]


def _hex_blob(size: int) -> str:
    return random.Random(7).randbytes(size // 2 + 1).hex()[:size]


def _base64(size: int) -> str:
    return base64.b64encode(random.Random(5).randbytes(size)).decode()[:size]


def _huge_line(size: int) -> str:
    words = ["alpha", "beta_1", "Gamma.delta", "x/y/z.py", "HAT136", "12345", "$250", "2024-05-14", "fail", "use"]
    rng = random.Random(3)
    out: list[str] = []
    total = 0
    while total < size:
        word = rng.choice(words)
        out.append(word)
        total += len(word) + 1
    return " ".join(out)[:size]


def _markdown_table(size: int) -> str:
    header = "| id | name | price | status |\n|---|---|---|---|\n"
    row = "| {0} | item_{0} | ${0}.50 | pending |\n"
    out = [header]
    total = len(header)
    number = 0
    while total < size:
        line = row.format(number)
        out.append(line)
        total += len(line)
        number += 1
    return "".join(out)[:size]


def _json_nested(size: int) -> str:
    # 200 levels: deep, yet within what the json module parses
    inner = json.dumps({"id": "X1", "note": "a" * max(0, size - 2_000)})
    return '{"a":' * 200 + inner + "}" * 200


def _json_wide(size: int) -> str:
    items = []
    total = 0
    number = 0
    while total < size:
        item = {"id": f"ID{number}", "status": "pending_approval", "amount": number}
        items.append(item)
        total += 60
        number += 1
    return json.dumps({"items": items})


_GENERATED: dict[str, Callable[[int], str]] = {
    "nested brackets": _nested,
    "hex dump": _hex_dump,
    "hex blob": _hex_blob,
    "base64": _base64,
    "huge line": _huge_line,
    "markdown table": _markdown_table,
    "json nested": _json_nested,
    "json wide": _json_wide,
}


def adversarial_texts(size: int) -> dict[str, str]:
    """Every hostile text, each about `size` characters."""
    texts = {name: (unit * (size // len(unit) + 1))[:size] for name, unit in _REPEATED.items()}
    texts.update({name: make(size) for name, make in _GENERATED.items()})
    return texts


# ---- entry points --------------------------------------------------------------------------------------------


def _context(call: ToolCall | None = None, previous: str = "") -> MessageContext:
    return MessageContext(index=3, ref="r1", call=call, previous_assistant_text=previous, is_first_user=False)


def _calls(text: str) -> list[dict[str, Any]]:
    return [
        {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": text})}},
        {"id": "c2", "type": "function", "function": {"name": "todo_write", "arguments": text}},
        {"id": "c3", "type": "function", "function": {"name": "run", "arguments": json.dumps({"command": "pytest " + text})}},
    ]


@dataclass(frozen=True)
class EntryPoint:
    """One entry point: `prepare` makes its input from a text as a request would bring it (not timed: parsing the
    request is not extraction), `run` is workset's work on it. Called with a text, it does both."""

    run: Callable[[Any], object]
    prepare: Callable[[str], Any] = str

    def __call__(self, text: str) -> object:
        return self.run(self.prepare(text))


def _user_message(text: str) -> tuple[Message, MessageContext]:
    return {"role": "user", "content": text}, _context(previous=text + "\nShall I proceed?")


def _assistant_message(text: str) -> tuple[Message, MessageContext]:
    return {"role": "assistant", "content": text}, _context()


def _assistant_calls(text: str) -> tuple[Message, MessageContext]:
    return {"role": "assistant", "content": text, "tool_calls": _calls(text)}, _context()


def _tool_message(text: str) -> tuple[Message, MessageContext]:
    call = ToolCall(id="c1", name="bash", arguments=json.dumps({"command": "python -m pytest " + text}))
    return {"role": "tool", "tool_call_id": "c1", "content": text}, _context(call)


def _extract(prepared: tuple[Message, MessageContext]) -> object:
    return extract(*prepared)


def _conversation(text: str) -> list[Message]:
    return [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": text},
        {"role": "assistant", "content": text + "\n```bash\n" + text + "\n```", "tool_calls": _calls(text)[:1]},
        {"role": "tool", "tool_call_id": "c1", "content": text},
        {"role": "assistant", "content": "```bash\n" + text + "\n```"},
        {"role": "user", "content": text},
    ]


def _extract_at_conversation(messages: list[Message]) -> object:
    cap = IngestSettings().extract_ms  # as the request path runs it
    return [
        extract_at(messages, 1, "r1", 1, deadline_ms=cap),
        extract_at(messages, 2, "r2", 1, deadline_ms=cap),
        extract_at(messages, 3, "r3", 1, deadline_ms=cap),
        extract_at(messages, 5, "r5", 1, observed=True, deadline_ms=cap),
    ]


def _parallel_calls(text: str) -> list[Message]:
    """One assistant message with a call per 200 characters of the text, and a result for each."""
    count = max(1, len(text) // 200)
    calls = [{"id": f"c{n}", "type": "function",
              "function": {"name": "bash", "arguments": json.dumps({"command": text[n * 200:(n + 1) * 200]})}}
             for n in range(count)]
    return [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "go"},
            {"role": "assistant", "content": "", "tool_calls": calls},
            *({"role": "tool", "tool_call_id": f"c{n}", "content": "ok"} for n in range(count))]


def _contexts(messages: list[Message]) -> object:
    """What ingest and settling read for every result: each one's call (one lookup for all, as they run)."""
    lookup = CallLookup(messages)
    return [context_for(messages, index, "", 1, lookup=lookup) for index in range(3, len(messages))]


def _gist(text: str) -> object:
    return tool_output_gist(text, 600)


def _message_names(message: Message) -> object:
    return message_names(message, str(message["content"]))


def _runner(commands: tuple[str, str]) -> object:
    return runner_command(commands[0]), runner_command(commands[1])


def _failures(text: str) -> tuple[str, list[Action], list[tuple[str, str, str]]]:
    actions = [Action(turn=index, tool="bash", arguments=text, outcome="error", gist=text[:600]) for index in range(3)]
    return text, actions, [("bash", text, "error"), ("bash", text + " ", "error")]


def _retrieval(prepared: tuple[str, list[Action], list[tuple[str, str, str]]]) -> object:
    text, actions, recent = prepared

    def search(query: str) -> list[dict[str, Any]]:
        return [{"ref": "r1", "tool": "bash", "content": text}]

    return elided_mentions(text, "", search, 4_000), failure_advice(actions, recent)


def _observations(prepared: tuple[Message, str]) -> object:
    message, text = prepared
    return action_command(message), prose_of(text)


def entry_points(counter: TokenCounter) -> dict[str, EntryPoint]:
    """Name -> one entry point on a text (fresh caches per call: the text is new every time)."""

    def count(message: Message) -> object:
        return counter.message(message)

    def excerpt(text: str) -> object:
        return Excerpter(counter)(text, 400, 200)

    def passages(text: str) -> object:
        pieces = layout(text, 2_000, counter).pieces
        return matching(pieces, query_words("alpha HAT136 fail 中文 [x]"))

    return {
        "extract user": EntryPoint(_extract, _user_message),
        "extract assistant": EntryPoint(_extract, _assistant_message),
        "extract assistant+calls": EntryPoint(_extract, _assistant_calls),
        "extract tool": EntryPoint(_extract, _tool_message),
        "ingest.extract_at": EntryPoint(_extract_at_conversation, _conversation),
        "contexts of parallel calls": EntryPoint(_contexts, _parallel_calls),
        "tool_output_gist": EntryPoint(_gist),
        "names": EntryPoint(names),
        "message_names": EntryPoint(_message_names, lambda text: _assistant_calls(text)[0]),
        "runner_command": EntryPoint(_runner, lambda text: ("cd /repo && python -m pytest " + text,
                                                            text + " && pytest -x")),
        "retrieval": EntryPoint(_retrieval, _failures),
        "observations": EntryPoint(_observations, lambda text: (
            {"role": "assistant", "content": text + "\n```bash\n" + text + "\n```\n"}, text)),
        "tokens count": EntryPoint(count, lambda text: {"role": "tool", "tool_call_id": "c1", "content": text}),
        "tokens Excerpter": EntryPoint(excerpt),
        "passages": EntryPoint(passages),
    }


def timed(entry: EntryPoint, text: str) -> tuple[float, object]:
    """(seconds, result) of one run of the entry point (its input prepared first, untimed)."""
    prepared = entry.prepare(text)
    start = time.perf_counter()
    result = entry.run(prepared)
    return time.perf_counter() - start, result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1_000_000, help="characters per adversarial text")
    parser.add_argument("--only", default="", help="run only the entry points whose name holds this")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each call; the fastest one counts")
    args = parser.parse_args(argv)
    counter = TokenCounter()
    texts = adversarial_texts(args.size)
    print(speed_line())
    print(f"adversarial extraction, {len(texts)} texts of {args.size:,} chars; target {TARGET_MS:.0f} ms per call "
          f"(best of {args.repeat})")
    print(f"{'entry point':<26} {'worst ms':>9}  worst input")
    failed = 0
    for name in entry_points(counter):
        if args.only and args.only not in name:
            continue
        worst = (0.0, "")
        raised: list[str] = []
        for text_name, text in texts.items():
            try:
                # a fresh counter each run: it remembers the estimates of the last long texts it read, and a repeat
                # would time that memory instead of the reading
                seconds = min(timed(entry_points(TokenCounter(counter.encoding_name))[name], text)[0]
                              for _ in range(max(1, args.repeat)))
            except BaseException as error:  # tiktoken panics are BaseException: report them, go on
                if isinstance(error, KeyboardInterrupt):
                    raise
                raised.append(f"{text_name} ({type(error).__name__})")
                continue
            worst = max(worst, (seconds, text_name))
        mark = "ok" if worst[0] * 1000 <= TARGET_MS and not raised else "OVER"
        if raised:
            mark += f", raised on {', '.join(raised)}"
        failed += mark != "ok"
        print(f"{name:<26} {worst[0] * 1000:9.1f}  {worst[1]}  {mark}", flush=True)
    print(f"{failed} entry point(s) over the target" if failed else "every entry point within the target")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
