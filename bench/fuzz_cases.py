"""The requests bench/fuzz.py sends: seeded, each case drawn from its own Random(seed, number) so any one of them
can be shown or replayed alone (`python -m bench.fuzz --seed S --show N`).

A case says what a correct workset does with it (`expect`):
- "forward": a valid (if unusual) request the provider accepts; it must reach the provider and come back 2xx;
- "reject": invalid; it must get one of `statuses` in OpenAI's error format and never reach the provider;
- "any": odd input workset may forward or refuse; it must not fail (no 5xx, no hang, no reset, errors well-formed);
- "http": a header with CR LF or NUL: the HTTP server refuses it or reads other headers; anything but a failure.
Header bytes no HTTP client sends go out on a plain socket; the HTTP server may refuse those itself, with a
plain-text 400 (counted apart), before workset sees them.
"""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

Expect = Literal["forward", "reject", "any", "http"]
Body = dict[str, Any]

CHAT = "/v1/chat/completions"
MAX_DEPTH = 1024  # the nesting validate.parse_json_object accepts (orjson's limit), the request object included
SMALL_MODEL = "small-fuzz"  # small-* models get the tests' small policy (tests/conftest.py): long conversations compact
MARKER_PREFIX = "fuzz"


def marker_of(seed: int, number: int) -> str:
    """A string no other case contains, sent in the request's `user` field and looked for at the provider."""
    return f"{MARKER_PREFIX}-{seed}-{number}-end"


@dataclass(frozen=True)
class Case:
    number: int
    kind: str
    expect: Expect
    body: bytes
    headers: tuple[tuple[bytes, bytes], ...] = ()
    statuses: frozenset[int] = frozenset()  # for "reject": the statuses that are right
    stream: bool = False
    marker: str | None = None  # in the body: reaching the provider or not is checked
    sdk: Body | None = None  # sent with the openai SDK: chat.completions.create(**sdk)
    chunked: bool = False  # no content-length: the body arrives in chunks
    raw_socket: bool = False  # headers no HTTP client library will send: written on a plain socket
    method: str = "POST"
    path: str = CHAT
    unchanged: bool = True  # a "forward" case the provider must get as sent when workset leaves it alone

    def describe(self) -> str:
        head = f"case {self.number} ({self.kind}, expect {self.expect}"
        head += f" {sorted(self.statuses)})" if self.statuses else ")"
        via = "openai SDK" if self.sdk is not None else ("raw socket" if self.raw_socket else "httpx")
        body = self.body if len(self.body) <= 600 else self.body[:400] + b" ... " + self.body[-150:]
        return (f"{head}: {self.method} {self.path} via {via}, {len(self.body)} bytes"
                f"{', chunked' if self.chunked else ''}{', stream' if self.stream else ''}\n"
                f"  headers: {list(self.headers)!r}\n  body: {body!r}")


# --- text ------------------------------------------------------------------------------------------------------------

WORDS = ("the parser returns None when tokens are empty fix test src/app.py ERROR def class import TypeError "
         "AssertionError tests/test_x.py::test_y passed failed booking order #A1B2C3 $250.00 2024-05-01 user_42 "
         "PAY-7F3K pending approved refund ledger ./run.sh --verbose 0x7ffd1234 SELECT * FROM t; {\"a\": 1} "
         "`cat f.py` https://example.com/a?b=c&d=e Traceback line 42 in <module> FAILED KeyError: 'id'").split()

UNICODE = (
    "مرحبا بالعالم", "שלום עולם", "\u202eevil\u202c", "\u200f\u200e", "a\u200bb\u200cc\u200dd\u2060e\ufeff",
    "\x00", "nul\x00byte", "\x07\x1b[31mred\x1b[0m", "😀", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇯🇵🇺🇸", "👍🏽", "中文字符没有空格",
    "日本語のテキスト", "한국어 문장", "e\u0301\u0302\u0303", "Z̴̡͇̈́a̸l̶g̵o̷", "\u2028\u2029", "\r\n\r", "\t\v\f",
    "\uffff\ufffe", "\ue000\U000f0000", "\U0010ffff", "𝐛𝐨𝐥𝐝 𝔣𝔯𝔞𝔨𝔱𝔲𝔯", "раураl.com", "ﷺ﷽", "ᚠᛇᚻ", "\\u0000",
    "\\ud800", "'\"`", "</script><script>", "${jndi:x}", "%s%n%x", "\u0085\u00a0\u1680",
)

PNG_1PX = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==")


def text(rng: random.Random, low: int = 1, high: int = 30, odd: float = 0.15) -> str:
    words = [rng.choice(UNICODE) if rng.random() < odd else rng.choice(WORDS) for _ in range(rng.randint(low, high))]
    return " ".join(words)


def long_text(rng: random.Random, size: int) -> str:
    """About `size` characters of one shape: prose, one repeated character, DNA, hex, CJK, lines."""
    shape = rng.choice(["prose", "run", "dna", "hex", "cjk", "lines", "emoji"])
    if shape == "prose":
        unit = text(rng, 50, 80) + "\n"
    elif shape == "run":
        unit = rng.choice("a.[=-#| 0A_/")
    elif shape == "dna":
        unit = "ACGT"
    elif shape == "hex":
        unit = "".join(rng.choice("0123456789abcdef") for _ in range(64))
    elif shape == "cjk":
        unit = "中文没有标点的长句子一直写下去"
    elif shape == "lines":
        unit = rng.choice(["FAILED tests/test_x.py::test_y - AssertionError\n", "Error: broke in module x\n",
                           "- [ ] item\n", "  File \"a.py\", line 1, in f\n"])
    else:
        unit = "😀👍🏽"
    return (unit * (size // len(unit) + 1))[:size]


def odd_string(rng: random.Random) -> str:
    return rng.choice([
        "", " ", "\x00", rng.choice(UNICODE), text(rng, 1, 5, odd=0.8), "x" * rng.choice([256, 4096, 70_000]),
        '{"a": 1}', "null", "[]", "\n" * 50, "call_" + "9" * 40, "😀" * 200,
    ])


def junk(rng: random.Random) -> Any:
    """A value of any JSON type, often the wrong one."""
    return rng.choice([
        None, True, False, 0, -1, 2**63 - 1, 1.5, -0.0, 1e308, "", "x", odd_string(rng), [], {}, [None], [[]],
        {"": None}, {"type": None}, [1, "a", {}], {"role": "user"}, [{"type": "text"}],
    ])


# --- valid messages --------------------------------------------------------------------------------------------------


def call_id(rng: random.Random, number: int) -> str:
    return rng.choice([f"call_{number}", f"call_{rng.getrandbits(64):x}", "", "调用-😀-" + str(number),
                       "id with spaces " + str(number), "x" * 1000 + str(number), f"toolu_{number:024d}",
                       "call_dup"])


def arguments(rng: random.Random) -> str:
    return rng.choice([
        "{}", "", json.dumps({"command": f"cat {rng.choice(WORDS)}"}), "not json at all", '{"a":', "null", "[]",
        '"str"', json.dumps({"text": rng.choice(UNICODE)}, ensure_ascii=rng.random() < 0.5),
        json.dumps({"blob": long_text(rng, rng.choice([1000, 50_000]))}),
        '{"a":' * 3000 + "1" + "}" * 3000, "[" * 5000 + "]" * 5000, '{"a": "\\u0000\\ud83d\\ude00"}',
    ])


def tool_call(rng: random.Random, number: int) -> Body:
    if rng.random() < 0.35:
        return {"id": call_id(rng, number), "type": "custom", "custom": {
            "name": rng.choice(["apply_patch", "sql", "shell", "工具"]),
            "input": rng.choice(["*** Begin Patch\n*** Update File: a.py\n@@\n-x\n+y\n*** End Patch", "",
                                 rng.choice(UNICODE), long_text(rng, 20_000), "SELECT 1;"])}}
    call: Body = {"id": call_id(rng, number), "type": "function",
                  "function": {"name": rng.choice(["bash", "read_file", "search", "book_flight", "f" * 64, "名前"]),
                               "arguments": arguments(rng)}}
    if rng.random() < 0.05:
        del call["type"]  # older clients leave it out
    return call


def user_part(rng: random.Random) -> Body:
    kind = rng.choice(["text", "text", "image_url", "input_audio", "file"])
    if kind == "text":
        return {"type": "text", "text": text(rng)}
    if kind == "image_url":
        image: Body = {"url": rng.choice([f"data:image/png;base64,{PNG_1PX}", "https://example.com/cat.png",
                                          "https://example.com/" + "x" * 3000 + ".jpg"])}
        if rng.random() < 0.5:
            image["detail"] = rng.choice(["auto", "low", "high"])
        return {"type": "image_url", "image_url": image}
    if kind == "input_audio":
        data = base64.b64encode(rng.randbytes(rng.choice([16, 2000]))).decode()
        return {"type": "input_audio", "input_audio": {"data": data, "format": rng.choice(["wav", "mp3"])}}
    file: Body = {}
    if rng.random() < 0.6:
        file["file_data"] = "data:application/pdf;base64," + base64.b64encode(rng.randbytes(300)).decode()
    if rng.random() < 0.5 or not file:
        file["file_id"] = f"file-{rng.getrandbits(48):x}"
    if rng.random() < 0.5:
        file["filename"] = rng.choice(["report.pdf", "отчёт.pdf", "a b.pdf", ""])
    return {"type": "file", "file": file}


def content(rng: random.Random, role: str) -> Any:
    """A content of the right shape for the role: a string, or parts of the types the role takes."""
    if rng.random() < 0.6:
        return text(rng)
    if role == "user":
        return [user_part(rng) for _ in range(rng.randint(1, 4))]
    if role == "assistant":
        return [rng.choice([{"type": "text", "text": text(rng)}, {"type": "refusal", "refusal": text(rng, 1, 8)}])
                for _ in range(rng.randint(1, 2))]
    return [{"type": "text", "text": text(rng)} for _ in range(rng.randint(1, 3))]


def conversation(rng: random.Random, turns: int, calls: float = 0.5) -> list[Body]:
    """A valid conversation: optional system/developer messages, a task, then turns of assistant replies, tool
    calls with their results, and user follow-ups."""
    messages: list[Body] = []
    if rng.random() < 0.8:
        messages.append({"role": rng.choice(["system", "developer"]), "content": content(rng, "system")})
    messages.append({"role": "user", "content": content(rng, "user")})
    for turn in range(turns):
        if rng.random() < calls:
            made = [tool_call(rng, turn * 10 + i) for i in range(rng.choice([1, 1, 1, 2, 3]))]
            assistant: Body = {"role": "assistant", "content": rng.choice([None, "", text(rng, 1, 10)]),
                               "tool_calls": made}
            if rng.random() < 0.1:
                assistant["refusal"] = None
            messages.append(assistant)
            for made_call in made:
                messages.append({"role": "tool", "tool_call_id": made_call["id"], "content": content(rng, "tool")})
        else:
            assistant = {"role": "assistant", "content": content(rng, "assistant")}
            if rng.random() < 0.1:
                assistant["name"] = rng.choice(["helper", "ассистент"])
            if rng.random() < 0.05:
                assistant["audio"] = {"id": f"audio_{rng.getrandbits(32):x}"}
            messages.append(assistant)
            user: Body = {"role": "user", "content": content(rng, "user")}
            if rng.random() < 0.1:
                user["name"] = rng.choice(["alice", "ユーザー", "a_b-c"])
            messages.append(user)
    if rng.random() < 0.05:  # the deprecated function-calling shape
        messages += [{"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "{}"}},
                     {"role": "function", "name": "f", "content": text(rng)}]
    return messages


def tools(rng: random.Random) -> list[Body]:
    out: list[Body] = []
    for number in range(rng.randint(1, 4)):
        if rng.random() < 0.3:
            custom: Body = {"name": f"custom_{number}", "description": text(rng, 1, 8)}
            if rng.random() < 0.5:
                custom["format"] = rng.choice([{"type": "text"}, {"type": "grammar", "grammar": {
                    "definition": 'start: "a"+', "syntax": rng.choice(["lark", "regex"])}}])
            out.append({"type": "custom", "custom": custom})
        else:
            function: Body = {"name": f"tool_{number}", "description": text(rng, 1, 8),
                              "parameters": {"type": "object", "properties": {"q": {"type": "string"}},
                                             "required": ["q"], "additionalProperties": False}}
            if rng.random() < 0.3:
                function["strict"] = True
            out.append({"type": "function", "function": function})
    return out


def tool_choice(rng: random.Random, offered: list[Body]) -> Any:
    first = offered[0]
    name = first.get("function", first.get("custom", {})).get("name")
    return rng.choice([
        "auto", "none", "required", {"type": first["type"], first["type"]: {"name": name}},
        {"type": "allowed_tools", "allowed_tools": {"mode": rng.choice(["auto", "required"]),
                                                    "tools": [{"type": first["type"], first["type"]: {"name": name}}]}},
    ])


def unusual_params(rng: random.Random) -> Body:
    """Documented parameters with valid but uncommon values; the provider accepts them all."""
    choices: dict[str, Callable[[], Any]] = {
        "n": lambda: rng.choice([1, 2, 5, 128]),
        "temperature": lambda: rng.choice([0, 0.0, 2, 1.3]),
        "top_p": lambda: rng.choice([0, 1, 0.5]),
        "max_tokens": lambda: rng.choice([1, 4096]),
        "max_completion_tokens": lambda: rng.choice([1, 100_000]),
        "stop": lambda: rng.choice(["\n", ["a", "b", "c", "d"], [], "😀"]),
        "presence_penalty": lambda: rng.choice([-2, 2, 0.5]),
        "frequency_penalty": lambda: rng.choice([-2, 2]),
        "logit_bias": lambda: {str(rng.randint(0, 100_000)): rng.choice([-100, 100])},
        "logprobs": lambda: True,
        "top_logprobs": lambda: rng.choice([0, 20]),
        "seed": lambda: rng.choice([0, -1, 2**62]),
        "response_format": lambda: rng.choice([{"type": "text"}, {"type": "json_object"}, {
            "type": "json_schema", "json_schema": {"name": "out", "strict": True, "schema": {
                "type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"],
                "additionalProperties": False}}}]),
        "metadata": lambda: rng.choice([{}, {"tag": "x", "ключ": "значение"}, {f"k{i}": "v" for i in range(16)}]),
        "store": lambda: rng.choice([True, False]),
        "reasoning_effort": lambda: rng.choice(["minimal", "low", "medium", "high"]),
        "verbosity": lambda: rng.choice(["low", "high"]),
        "modalities": lambda: rng.choice([["text"], ["text", "audio"]]),
        "audio": lambda: {"voice": "alloy", "format": "wav"},
        "prediction": lambda: {"type": "content", "content": text(rng)},
        "service_tier": lambda: rng.choice(["auto", "default", "flex", "priority"]),
        "parallel_tool_calls": lambda: rng.choice([True, False]),
        "web_search_options": lambda: {"search_context_size": "low"},
        "prompt_cache_key": lambda: odd_string(rng),
        "safety_identifier": lambda: "hashed-" + str(rng.getrandbits(32)),
        "custom_flag": lambda: {"nested": [1, {"x": None}]},
    }
    return {name: make() for name, make in choices.items() if rng.random() < 0.15}


# --- encoding --------------------------------------------------------------------------------------------------------


def encode(rng: random.Random, body: Any) -> bytes:
    """JSON bytes in one of the spellings a client may use: non-BMP characters as escaped surrogate pairs or raw
    UTF-8, compact or indented, with whitespace around."""
    spelling = rng.random()
    if spelling < 0.35:
        raw = json.dumps(body).encode()  # ensure_ascii: "😀" is written "\ud83d\ude00"
    elif spelling < 0.75:
        raw = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    elif spelling < 0.9:
        raw = json.dumps(body, ensure_ascii=False, indent=rng.choice([1, 2, "\t"])).encode()
    else:
        raw = b" \n\t" + json.dumps(body, ensure_ascii=False).encode() + b"\r\n "
    return raw


def nested(rng: random.Random, depth: int) -> str:
    """JSON text of exactly `depth` nested containers (arrays, objects or both) around a scalar; written by hand,
    as json.dumps stops near 1,000 levels."""
    shape = rng.choice(["array", "object", "mixed"])
    opening, closing = [], []
    for level in range(depth):
        if shape == "array" or (shape == "mixed" and level % 2):
            opening.append("[")
            closing.append("]")
        else:
            opening.append('{"k":')
            closing.append("}")
    return "".join(opening) + rng.choice(['"bottom"', "0", "null"]) + "".join(reversed(closing))


NEST = "__NEST__"
MARKER = "__MARKER__"  # in a builder's raw bytes: replaced by the case's marker


def nested_schema(rng: random.Random, depth: int) -> str:
    """A JSON schema of exactly `depth` containers: objects with one property and arrays of items, down to a
    string (the way a tool's parameters nest)."""
    remaining = depth - 1  # the innermost {"type": "string"}
    opening, closing = [], []
    while remaining > 0:
        if remaining >= 2 and rng.random() < 0.5:
            opening.append('{"type": "object", "properties": {"p": ')
            closing.append("}}")
            remaining -= 2
        else:
            opening.append('{"type": "array", "items": ')
            closing.append("}")
            remaining -= 1
    return "".join(opening) + '{"type": "string"}' + "".join(reversed(closing))


def placeholder_depth(value: Any, level: int = 1) -> int | None:
    """How many containers hold the NEST placeholder string (the body itself counts as one), or None."""
    if value == NEST:
        return level - 1
    children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    for child in children:
        found = placeholder_depth(child, level + 1)
        if found is not None:
            return found
    return None


# --- the cases -------------------------------------------------------------------------------------------------------


@dataclass
class Draft:
    """What a builder makes; Cases.case turns it into a Case."""

    body: Any
    expect: Expect
    statuses: frozenset[int] = frozenset()
    raw: bytes | None = None  # bytes to send instead of encode(body)
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    sdk: bool = False
    chunked: bool = False
    raw_socket: bool = False
    method: str = "POST"
    path: str = CHAT
    marked: bool = True  # put the marker in body["user"]
    unchanged: bool = True


BAD_REQUEST = frozenset({400})
Builder = Callable[[random.Random, "Cases"], Draft]


class Cases:
    """Case `number` of a seeded run. Conversation families (long agent runs that several cases continue, rewind
    or branch) are generated once per Cases and kept here."""

    def __init__(self, seed: int, max_body_bytes: int) -> None:
        self.seed = seed
        self.max_body_bytes = max_body_bytes  # the served workset's server.max_body_bytes
        self._families: dict[int, list[Body]] = {}
        self._builders: list[tuple[str, int, Builder]] = [
            # valid requests (forwarded), about half
            ("chat", 11, _chat), ("odd_order", 3, _odd_order), ("parts", 8, _parts), ("tool_calls", 8, _tool_calls),
            ("params", 8, _params), ("family", 10, _family), ("unicode", 6, _unicode), ("size", 3, _size),
            # both, by depth or by the session id
            ("nesting", 6, _nesting), ("session", 5, _session),
            # invalid, odd or mutated requests
            ("invalid_json", 6, _invalid_json), ("not_object", 2, _not_object), ("wrong_types", 11, _wrong_types),
            ("mutation", 10, _mutation), ("oversize", 1, _oversize), ("route", 1, _route), ("headers", 2, _headers),
        ]
        self._weights = [weight for _, weight, _ in self._builders]

    def case(self, number: int) -> Case:
        rng = random.Random(f"{self.seed}:{number}")
        kind, _, builder = rng.choices(self._builders, self._weights)[0]
        draft = builder(rng, self)
        marker = marker_of(self.seed, number) if draft.marked and isinstance(draft.body, dict) else None
        if marker is not None:
            draft.body["user"] = marker
        stream = isinstance(draft.body, dict) and draft.body.get("stream") is True
        if draft.raw is not None:  # raw bytes carry MARKER where the builder wants the marker
            raw = draft.raw.replace(MARKER.encode(), marker.encode()) if marker else draft.raw
        else:
            raw = encode(rng, draft.body)
        expect, statuses = draft.expect, draft.statuses
        if len(raw) > self.max_body_bytes and expect != "reject":  # escaping made it bigger than meant
            expect, statuses = "reject", frozenset({413})
        sdk = _sdk_kwargs(draft.body, draft.headers) if draft.sdk and rng.random() < 0.35 else None
        return Case(number, kind, expect, raw, tuple(draft.headers), statuses, stream, marker, sdk, draft.chunked,
                    draft.raw_socket, draft.method, draft.path, draft.unchanged)

    def family(self, index: int) -> list[Body]:
        if index not in self._families:
            rng = random.Random(f"{self.seed}:family:{index}")
            messages = [{"role": "system", "content": "You are a coding agent. " + text(rng, 10, 30, odd=0.05)},
                        {"role": "user", "content": f"Task {index}: " + text(rng, 10, 40, odd=0.05)}]
            for step in range(rng.randint(20, 60)):
                made = tool_call(rng, step)
                made["id"] = f"call_{index}_{step}"  # distinct ids: a family is an ordinary agent run
                messages.append({"role": "assistant", "content": text(rng, 0, 12, odd=0.05), "tool_calls": [made]})
                output = long_text(rng, rng.choice([200, 2000, 8000])) if rng.random() < 0.3 else text(rng, 20, 200)
                messages.append({"role": "tool", "tool_call_id": made["id"], "content": output})
            self._families[index] = messages
        return self._families[index]


def _sdk_kwargs(body: Body, headers: list[tuple[bytes, bytes]]) -> Body:
    """chat.completions.create arguments sending this body: the rest of the body goes in extra_body as is."""
    kwargs: Body = {"model": body["model"], "messages": body["messages"],
                    "extra_body": {k: v for k, v in body.items() if k not in ("model", "messages", "stream")}}
    if "stream" in body:
        kwargs["stream"] = body["stream"]
    if headers:
        kwargs["extra_headers"] = {name.decode(): value.decode() for name, value in headers}
    return kwargs


def _model(rng: random.Random) -> str:
    return rng.choice(["gpt-4.1", "gpt-5", "o3-mini", SMALL_MODEL, "openai/gpt-4o", "模型", "m" * 300, "a b c"])


def _request(rng: random.Random, messages: list[Body], **extra: Any) -> Body:
    body: Body = {"model": _model(rng), "messages": messages}
    if rng.random() < 0.4:
        body["stream"] = rng.random() < 0.8
        if body["stream"] and rng.random() < 0.5:
            body["stream_options"] = {"include_usage": rng.random() < 0.7}
    body.update(extra)
    return body


def _chat(rng: random.Random, cases: Cases) -> Draft:
    return Draft(_request(rng, conversation(rng, rng.randint(0, 6))), "forward", sdk=True)


def _odd_order(rng: random.Random, cases: Cases) -> Draft:
    """Histories in an unusual order, which workset forwards as sent when it cannot rewrite them safely: a tool
    result without its call, a call without its result, the assistant first, system messages midway, repeats."""
    messages = conversation(rng, rng.randint(0, 4))
    for _ in range(rng.randint(1, 3)):
        odd: Body = rng.choice([
            {"role": "tool", "tool_call_id": f"orphan_{rng.getrandbits(16)}", "content": text(rng)},
            {"role": "assistant", "content": None, "tool_calls": [tool_call(rng, 99)]},
            {"role": "assistant", "content": None},
            {"role": "system", "content": text(rng)},
            {"role": "developer", "content": ""},
            {"role": "user", "content": ""},
            {"role": "user", "content": []},
            {"role": "function", "name": "legacy", "content": text(rng)},
        ])
        messages.insert(rng.randint(0, len(messages)), odd)
    if rng.random() < 0.3:
        messages = messages * rng.randint(2, 3)  # the same turns again
    return Draft(_request(rng, messages), "forward", sdk=True)


def _parts(rng: random.Random, cases: Cases) -> Draft:
    messages = conversation(rng, rng.randint(0, 3))
    for message in messages:
        if message["role"] in ("user", "assistant", "system", "developer", "tool") and message.get("content"):
            message["content"] = content(rng, message["role"]) if rng.random() < 0.3 else message["content"]
    messages.append({"role": "user", "content": [user_part(rng) for _ in range(rng.randint(1, 6))]})
    if rng.random() < 0.3:
        messages.insert(-1, {"role": "assistant", "content": [{"type": "refusal", "refusal": "I can't."}],
                             "refusal": "I can't."})
    return Draft(_request(rng, messages), "forward", sdk=True)


def _tool_calls(rng: random.Random, cases: Cases) -> Draft:
    body = _request(rng, conversation(rng, rng.randint(1, 5), calls=0.9))
    if rng.random() < 0.5:
        offered = tools(rng)
        body["tools"] = offered
        if rng.random() < 0.5:
            body["tool_choice"] = tool_choice(rng, offered)
    return Draft(body, "forward", sdk=True)


def _params(rng: random.Random, cases: Cases) -> Draft:
    body = _request(rng, conversation(rng, rng.randint(0, 3)), **unusual_params(rng))
    if rng.random() < 0.5:
        offered = tools(rng)
        body["tools"] = offered
        body["tool_choice"] = tool_choice(rng, offered)
    return Draft(body, "forward", sdk=True)


def _family(rng: random.Random, cases: Cases) -> Draft:
    """A prefix of a long agent run at a turn boundary: the same family's cases continue, rewind and branch it."""
    messages = cases.family(rng.randrange(12))
    ends = [i for i in range(2, len(messages) + 1) if messages[i - 1]["role"] in ("user", "tool")]
    end = rng.choice(ends[-6:]) if rng.random() < 0.5 else rng.choice(ends)
    prefix = messages[:end]
    if rng.random() < 0.15:  # a branch: the last result differs from the family's
        prefix = [*prefix[:-1], {**prefix[-1], "content": "branch " + text(rng, 5, 20)}]
    headers = [(b"x-workset-policy", rng.choice([b"coding-agent", b"default"]))] if rng.random() < 0.2 else []
    body: Body = {"model": SMALL_MODEL, "messages": prefix}
    if rng.random() < 0.3:
        body["stream"] = True
    return Draft(body, "forward", headers=headers)


def _unicode(rng: random.Random, cases: Cases) -> Draft:
    pieces = list(UNICODE)
    rng.shuffle(pieces)
    messages: list[Body] = [{"role": "user", "content": "".join(pieces[: rng.randint(1, len(pieces))])}]
    if rng.random() < 0.5:
        messages.insert(0, {"role": "system", "content": rng.choice(UNICODE) * rng.randint(1, 500)})
    if rng.random() < 0.5:
        messages.append({"role": "assistant", "content": "\x00" * rng.randint(1, 100)})
        messages.append({"role": "user", "content": [{"type": "text", "text": rng.choice(UNICODE)}]})
    body = _request(rng, messages)
    if rng.random() < 0.2:  # a lone surrogate escape is not valid JSON text for a strict parser
        raw = json.dumps(body).replace('"user"', '"user\\ud800"', 1).encode()
        return Draft(body, "any", raw=raw, marked=False)
    return Draft(body, "forward", sdk=True)


def _size(rng: random.Random, cases: Cases) -> Draft:
    limit = cases.max_body_bytes
    shape = rng.choice(["one big message", "many messages", "many parts", "big tool output", "empty content"])
    if shape == "one big message":
        messages: list[Body] = [{"role": "user", "content": long_text(rng, rng.randint(1, int(limit * 0.8)))}]
    elif shape == "many messages":
        count = rng.choice([500, 3000, 10_000])
        messages = [{"role": rng.choice(["user", "assistant"]), "content": text(rng, 0, 3)} for _ in range(count)]
        messages[-1] = {"role": "user", "content": "last"}
    elif shape == "many parts":
        messages = [{"role": "user", "content": [{"type": "text", "text": text(rng, 0, 2)}
                                                 for _ in range(rng.choice([1000, 5000]))]}]
    elif shape == "big tool output":
        messages = [{"role": "user", "content": "run it"},
                    {"role": "assistant", "content": None, "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
                    {"role": "tool", "tool_call_id": "c1", "content": long_text(rng, rng.randint(100_000,
                                                                                             int(limit * 0.8)))}]
    else:
        messages = [{"role": "user", "content": rng.choice(["", [], None])}]
    return Draft(_request(rng, messages), "forward")


def _nesting(rng: random.Random, cases: Cases) -> Draft:
    """Containers nested up to and past the accepted depth, in the places a client puts structure."""
    where = rng.choice(["top", "tool schema", "tool parameters", "part", "message", "response schema"])
    body = _request(rng, conversation(rng, rng.randint(0, 2)))
    if where == "top":
        body["custom_field"] = NEST
    elif where == "tool schema":
        body["tools"] = [{"type": "function", "function": {"name": "t", "parameters": {
            "type": "object", "properties": {"deep": {"enum": [NEST]}}}}}]
    elif where == "tool parameters":
        body["tools"] = [{"type": "function", "function": {"name": "t", "description": "deep", "parameters": NEST}}]
    elif where == "part":
        body["messages"].append({"role": "user", "content": [{"type": "text", "text": "x", "extra": NEST}]})
    elif where == "message":
        body["messages"].append({"role": "user", "content": "see the schema", "schema": NEST})
    else:
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "o", "schema": NEST}}
    body["user"] = MARKER
    holders = placeholder_depth(body)
    assert holders is not None
    edge = MAX_DEPTH - holders  # the deepest nesting accepted here
    depth = max(1, rng.choice([rng.randint(1, 300), 253, 254, 255, 256, rng.randint(300, edge), edge - 1, edge,
                               edge + 1, edge + 2, rng.randint(edge + 1, 5000)]))
    inner = nested_schema(rng, depth) if where in ("tool parameters", "response schema") else nested(rng, depth)
    raw = json.dumps(body, ensure_ascii=rng.random() < 0.5).replace(f'"{NEST}"', inner).encode()
    if holders + depth > MAX_DEPTH:
        return Draft(body, "reject", BAD_REQUEST, raw=raw)
    return Draft(body, "forward", raw=raw, unchanged=False)


def _session(rng: random.Random, cases: Cases) -> Draft:
    """Explicit session ids, valid ones (padded, long, odd but printable) and ones that must be refused, in the
    x-workset-session header or in metadata.session_id."""
    good = rng.choice(["run-7", "  run-7\t", "a" * 512, "~!@#$%^&*()_+{}|:<>?", "s p a c e s",
                       f"sess-{rng.getrandbits(32):x}"])
    bad = rng.choice(["sessão-1", "会话", "run\x01", "r" * 513, "r" * 70_000, "tab\tinside", "\x7f", "😀",
                      "a\u200bb", "\u202eevil", "run\r\nx-evil: 1", "run\x00", "\x1b[31m"])
    valid = rng.random() < 0.5
    value = good if valid else bad
    body = _request(rng, conversation(rng, rng.randint(0, 2)))
    headers: list[tuple[bytes, bytes]] = []
    raw_socket = False
    if rng.random() < 0.5:
        headers.append((b"x-workset-session", value.encode()))
        # HTTP client libraries refuse control characters and surrounding blanks in a header: those go out on a
        # plain socket (the server strips the blanks). The HTTP server may refuse the request itself (h11 a NUL,
        # httptools any control character) and close without reading the body: a small body, so the close does
        # not reset the connection.
        raw_socket = value != value.strip() or any(char < " " or char == "\x7f" for char in value)
        if raw_socket:
            body = _request(rng, [{"role": "user", "content": text(rng)}])
        if any(char in value for char in "\r\n\x00"):  # CR LF splits the header in two: a valid id "run", another
            return Draft(body, "http", headers=headers, raw_socket=True)
    else:
        body["metadata"] = {"session_id": value, **({"tag": "x"} if rng.random() < 0.5 else {})}
    if not valid:
        return Draft(body, "reject", BAD_REQUEST, headers=headers, raw_socket=raw_socket)
    if rng.random() < 0.3:
        headers.append((b"x-workset-policy", rng.choice([b"default", b"coding-agent", b"support-agent",
                                                         b"passthrough"])))
    elif rng.random() < 0.1:
        headers.append((b"x-workset-policy", rng.choice([b"nope", b"../../etc/passwd", b"DEFAULT"])))
        return Draft(body, "reject", BAD_REQUEST, headers=headers, raw_socket=raw_socket)
    return Draft(body, "forward", headers=headers, sdk=not raw_socket and value.isascii(), raw_socket=raw_socket)


def _invalid_json(rng: random.Random, cases: Cases) -> Draft:
    body = _request(rng, conversation(rng, rng.randint(0, 2)), user=MARKER)
    good = encode(rng, body)
    cut = rng.randint(0, max(0, len(good) - 1))
    raw = rng.choice([
        good[:cut], good + b"}", good + b"garbage", good.replace(b'"', b"'"), b"\xef\xbb\xbf" + good,
        good.replace(b":", b":NaN,", 1), b"", b"   \n", b"{", b"}", b'{"model": "m", "messages": [}', b"\xff\xfe\xfd",
        good[:10] + b"\xc3\x28" + good[10:], b'{"model": "m", "messages": []} {"a": 1}', b"/* c */" + good,
        good.replace(b"[", b"[,", 1), b'{"model": "m",}', b'{"model": 1e400, "messages": []}', b"\x00" * 100,
        b'{"a": "\\ud800"}', b'{"model": "\\x41"}', good.replace(b'"role"', b'"role\n"', 1),
    ])
    try:
        json.loads(raw)
        valid_json = True
    except (ValueError, UnicodeDecodeError):
        valid_json = False
    # Python's json takes a little more than a strict parser (NaN, lone surrogates): those may go either way.
    return Draft(body, "any" if valid_json else "reject", frozenset() if valid_json else BAD_REQUEST, raw=raw)


def _not_object(rng: random.Random, cases: Cases) -> Draft:
    value = rng.choice([[], [{"model": "m"}], "a string", 42, -1.5, None, True, False, [[[]]]])
    return Draft(value, "reject", BAD_REQUEST, raw=json.dumps(value).encode(), marked=False)


def _wrong_types(rng: random.Random, cases: Cases) -> Draft:
    """One field workset checks given a wrong type or value: a 400 before the provider is called."""
    body = _request(rng, conversation(rng, rng.randint(0, 3)))
    messages = body["messages"]
    index = rng.randrange(len(messages))
    wrong = rng.choice([None, 0, 1.5, True, [], {}, "x"])
    problem = rng.choice(["model", "messages", "message", "role", "content", "tool_call_id", "tool_calls", "call",
                          "call name", "metadata", "session id type", "stream", "tools", "tool", "tool_choice"])
    if problem == "model":
        body["model"] = rng.choice([None, 0, 1.5, True, [], {}, "", "   ", ["gpt-4.1"]])
        if body["model"] is None and rng.random() < 0.5:
            del body["model"]
    elif problem == "messages":
        body["messages"] = rng.choice([None, 0, "hi", {}, {"role": "user", "content": "hi"}, []])
        if body["messages"] is None and rng.random() < 0.5:
            del body["messages"]
    elif problem == "message":
        messages[index] = rng.choice([None, 0, "hi", [], [{"role": "user", "content": "hi"}], True])
    elif problem == "role":
        messages[index] = {**messages[index], "role": rng.choice([None, 0, "", "User", "bot", "tool ", "系统", []])}
        if messages[index]["role"] is None and rng.random() < 0.5:
            del messages[index]["role"]
    elif problem == "content":
        messages[index] = {**messages[index], "content": rng.choice([0, 1.5, True, {}, {"type": "text", "text": "x"}])}
    elif problem == "tool_call_id":
        messages.append({"role": "tool", "content": "result"})
        if rng.random() < 0.5:
            messages[-1]["tool_call_id"] = rng.choice([None, 0, [], {}, True])
    elif problem in ("tool_calls", "call", "call name"):
        calls: Any
        if problem == "tool_calls":
            calls = rng.choice([{}, "call", 0, True])
        elif problem == "call":
            calls = [rng.choice([None, 0, "c", [], {"id": "c", "type": "function"},
                                 {"id": "c", "type": "function", "function": "bash"},
                                 {"id": "c", "type": "custom", "custom": "apply_patch"},
                                 {"id": "c", "type": "custom", "function": {"name": "f", "arguments": "{}"}}])]
        else:
            kind = rng.choice(["function", "custom"])
            calls = [{"id": "c", "type": kind, kind: {"name": rng.choice([None, 0, [], {}]), "arguments": "{}"}}]
        messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        messages.append({"role": "user", "content": "go on"})
    elif problem == "metadata":
        body["metadata"] = rng.choice([[], "m", 0, True])
    elif problem == "stream":
        body["stream"] = rng.choice([0, 1, "true", "false", [], {}])
    elif problem == "tools":
        body["tools"] = rng.choice([{}, "bash", 0, True])
    elif problem == "tool":
        body["tools"] = [*tools(rng), rng.choice([
            None, 0, "bash", [], {"type": "function"}, {"type": "function", "function": True},
            {"type": "function", "function": "bash"}, {"type": "function", "function": {"name": 7}},
            {"type": "custom", "custom": "apply_patch"}, {"type": "custom", "function": {"name": "f"}}])]
    elif problem == "tool_choice":
        body["tools"] = tools(rng)
        body["tool_choice"] = rng.choice([0, True, [], {"type": "function", "function": "bash"},
                                          {"type": "custom", "custom": True}])
    else:
        body["metadata"] = {"session_id": rng.choice([0, 1.5, True, [], {}, None])}
    return Draft(body, "reject", BAD_REQUEST)


def _mutation(rng: random.Random, cases: Cases) -> Draft:
    """A valid request with a few random nodes replaced, removed or added: workset forwards or refuses it."""
    body = _request(rng, conversation(rng, rng.randint(0, 4), calls=0.6))
    if rng.random() < 0.3:
        body["tools"] = tools(rng)
    for _ in range(rng.randint(1, 3)):
        _mutate(rng, body)
    return Draft(body, "any", marked=rng.random() < 0.8)


def _mutate(rng: random.Random, body: Body) -> None:
    node: Any = body
    for _ in range(rng.randint(0, 6)):
        keys = list(node.keys()) if isinstance(node, dict) else list(range(len(node))) if isinstance(node, list) else []
        if not keys:
            break
        key = rng.choice(keys)
        child = node[key]
        if not isinstance(child, (dict, list)) or rng.random() < 0.3:
            action = rng.random()
            if action < 0.6:
                node[key] = junk(rng)
            elif action < 0.8 and isinstance(node, dict):
                del node[key]
            elif isinstance(node, dict):
                node[rng.choice(["type", "role", "content", "tool_calls", "name", "id", "extra", "\x00"])] = junk(rng)
            else:
                node.insert(rng.randint(0, len(node)), junk(rng))
            return
        node = child


def _oversize(rng: random.Random, cases: Cases) -> Draft:
    size = cases.max_body_bytes + rng.choice([1, 1000, 2_000_000])
    body = {"model": "gpt-4.1", "messages": [{"role": "user", "content": "x" * size}], "user": MARKER}
    return Draft(body, "reject", frozenset({413}), raw=json.dumps(body).encode(), chunked=rng.random() < 0.5)


def _route(rng: random.Random, cases: Cases) -> Draft:
    """Other methods and paths near the chat route: JSON errors (404, 405) or the route itself."""
    method, path = rng.choice([
        ("GET", CHAT), ("PUT", CHAT), ("DELETE", CHAT), ("PATCH", CHAT), ("POST", "/v1/chat/completion"),
        ("POST", "/v1/chat/completions/"), ("POST", "/v1/../v1/chat/completions"), ("POST", "/chat/completions"),
        ("POST", "/v1/completions"), ("GET", "/v1/%00"), ("POST", "/v1/embeddings"), ("GET", "/v1/models"),
        ("POST", "/v1/chat/completions?x=%ff"), ("GET", "/v1/workset/sessions"),
    ])
    body = _request(rng, [{"role": "user", "content": "hi"}])
    return Draft(body, "any", method=method, path=path, marked=False)


def _headers(rng: random.Random, cases: Cases) -> Draft:
    """Odd request headers around a valid body: content types, encodings, keys."""
    body = _request(rng, [{"role": "user", "content": text(rng)}])
    name, value = rng.choice([
        (b"content-type", b"text/plain"), (b"content-type", b"application/x-www-form-urlencoded"),
        (b"content-type", b"application/json; charset=latin-1"), (b"authorization", b"Bearer"),
        (b"authorization", b"Basic dXNlcjpwYXNz"), (b"authorization", "Bearer ключ".encode()),
        (b"authorization", b"Bearer " + b"k" * 8000), (b"x-api-key", b"k"), (b"openai-organization", "组织".encode()),
        (b"openai-beta", b"assistants=v2"), (b"accept", b"text/html"), (b"accept-encoding", b"gzip, br"),
        (b"x-workset-policy", "политика".encode()), (b"x-workset-session", b""),
    ])
    return Draft(body, "any", headers=[(name, value)])
