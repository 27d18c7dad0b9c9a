"""Context strategies compared by `workset eval`: the usual baselines, and workset's own policies run through the
same Engine the server uses, in any of the wire formats the server speaks (`Wire`)."""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Collection, Mapping, Protocol

from ..config import Config, IngestSettings
from ..edges import CHAT, MESSAGES, RESPONSES, Edge
from ..engine import Engine
from ..hashing import key_hash
from ..policy import Policy
from ..records import Message
from ..storage import open_store
from ..tokens import TokenCounter
from ..upstream import context_window
from ..workingset import Pairing, first_user
from .formats import to_wire

MASK_PLACEHOLDER = "[output omitted]"
EVAL_CALLER = key_hash("workset-eval")


def session_for(policy: str, trace_id: str) -> str:
    """One session per trace and policy."""
    return f"{policy}:{trace_id}"


@dataclass
class Forwarded:
    messages: list[Message]
    compacted: bool = False
    budget: int = 0  # this request's budget when it differs per request (an auto budget's room), else 0


@dataclass(frozen=True)
class Wire:
    """A wire format as the eval replays it: the trace's request as that format's client sends it
    (evaluate.formats), and the server's edge for it (proxy.edges), which reads a body into the internal (chat)
    messages the metrics are computed on and writes the working set back."""

    name: str  # chat, anthropic, responses
    edge: Edge
    # Anthropic's render joins consecutive user messages into one (the task and workset's compacted message), and
    # the edge reads the joined text blocks back as one message; the provider caches them block by block all the
    # same. Measured as one message each, as chat sends them, so the cached cost counts what a cache would reuse.
    split_text_blocks: bool = False

    def request(self, model: str, messages: list[Message], tools: list[Any] | None) -> dict[str, Any]:
        return to_wire(self.name, model, messages, tools)

    def read(self, body: dict[str, Any]) -> list[Message]:
        """The messages of a wire body, as workset reads them."""
        messages = self.edge.to_internal(body)["messages"]
        return text_blocks_apart(messages) if self.split_text_blocks else messages


def text_blocks_apart(messages: list[Message]) -> list[Message]:
    """Each user message made only of text blocks, as one user message per block."""
    out: list[Message] = []
    for message in messages:
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, list) and len(content) > 1 and all(
                isinstance(block, dict) and block.keys() == {"type", "text"} and block["type"] == "text"
                for block in content):
            out.extend({"role": "user", "content": block["text"]} for block in content)
        else:
            out.append(message)
    return out


WIRES = {wire.name: wire for wire in (Wire("chat", CHAT), Wire("anthropic", MESSAGES, split_text_blocks=True),
                                      Wire("responses", RESPONSES))}


class Strategy(Protocol):
    name: str
    budget: int

    def forward(self, trace_id: str, messages: list[Message], tools: list[Any] | None) -> Forwarded: ...

    def close(self) -> None: ...


class ForwardAll:
    """`none`: the whole history, every turn (the reference)."""

    name = "none"

    def __init__(self, budget: int) -> None:
        self.budget = budget

    def forward(self, trace_id: str, messages: list[Message], tools: list[Any] | None) -> Forwarded:
        return Forwarded(messages)

    def close(self) -> None:
        pass


class Truncate:
    """`truncate`: system prompt and task, then the newest whole turns that fit the budget (LiteLLM's
    trim_messages, without breaking tool-call pairs)."""

    name = "truncate"

    def __init__(self, budget: int, counter: TokenCounter, tokens_of: Callable[[Message], int] | None = None) -> None:
        self.budget = budget
        self.counter = counter
        self.tokens_of = tokens_of or counter.message

    def forward(self, trace_id: str, messages: list[Message], tools: list[Any] | None) -> Forwarded:
        task = first_user(messages)
        head = messages[: (task if task is not None else -1) + 1]
        used = sum(self.tokens_of(m) for m in head) + self.counter.tools(tools)
        units = Pairing().feed(messages).units
        kept: list[Message] = []
        for start, end in reversed(units):
            if end < len(head):
                break
            unit = messages[start:end + 1]
            cost = sum(self.tokens_of(m) for m in unit)
            if used + cost > self.budget:
                break
            kept[:0] = unit
            used += cost
        return Forwarded(head + kept)

    def close(self) -> None:
        pass


class Mask:
    """`mask`: observation masking ("The Complexity Trap", 2025): tool outputs older than the newest `keep`
    become a one-line placeholder, recomputed every turn. `observations` gives, per trace id, the indices of user
    messages that are command output (a text agent's trace): they are masked like tool outputs."""

    name = "mask"

    def __init__(self, keep: int, budget: int, observations: Mapping[str, Collection[int]] | None = None) -> None:
        self.keep = keep
        self.budget = budget
        self.observations = observations or {}

    def forward(self, trace_id: str, messages: list[Message], tools: list[Any] | None) -> Forwarded:
        observed = self.observations.get(trace_id, ())
        outputs = [i for i, m in enumerate(messages) if m.get("role") == "tool" or i in observed]
        hidden = set(outputs[: max(0, len(outputs) - self.keep)])
        return Forwarded([{**m, "content": MASK_PLACEHOLDER} if i in hidden else m for i, m in enumerate(messages)])

    def close(self) -> None:
        pass


class ThroughWire:
    """A baseline given each request as workset reads it from a wire format (the trace sent in that format, read
    back by the edge), so its figures compare with a policy's in that format like with like."""

    def __init__(self, inner: Strategy, wire: Wire, model: str) -> None:
        self.inner = inner
        self.wire = wire
        self.model = model
        self.name = inner.name
        self.budget = inner.budget

    def forward(self, trace_id: str, messages: list[Message], tools: list[Any] | None) -> Forwarded:
        return self.inner.forward(trace_id, self.wire.read(self.wire.request(self.model, messages, tools)), tools)

    def close(self) -> None:
        self.inner.close()


class PolicyStrategy:
    """A workset policy, through the server's own code path (app._admit): the request in the client's wire format,
    read by its edge, Engine.prepare and Engine.settle, written back by the edge; what is forwarded is measured as
    the edge reads that body back."""

    def __init__(self, policy: Policy, engine: Engine, model: str, caller: str = EVAL_CALLER,
                 summarize: Callable[[dict[str, Any]], str] | None = None, wire: Wire = WIRES["chat"]) -> None:
        self.name = policy.name
        self.policy = policy
        self.engine = engine
        self.model = model
        self.caller = caller  # a key hash, as the server computes from the bearer key
        self.budget = engine.budget_tokens(model, policy)
        self.summarize = summarize  # stands in for summarizer.model: called in line where the server runs a job
        self.wire = wire

    def forward(self, trace_id: str, messages: list[Message], tools: list[Any] | None) -> Forwarded:
        edge = self.wire.edge
        body = self.wire.request(self.model, messages, tools)
        edge.check(body)
        prepared = self.engine.prepare(edge.to_internal(body), self.caller, session_for(self.name, trace_id),
                                       self.name, None, edge.check_messages)
        self.engine.settle(prepared)
        if self.summarize is not None:
            job = self.engine.summary_job(prepared)
            if job is not None:
                self.engine.summary_done(prepared, job, self.summarize(job.body))
        return Forwarded(self.wire.read(edge.render(body, prepared)), prepared.compacted, prepared.budget)

    def close(self) -> None:
        pass


def fake_summary(body: dict[str, Any]) -> str:
    """The local fake summariser model of the eval (and CI): one bullet per removed assistant turn, its first
    sentence, and the failures among the tool outputs. Deterministic; it invents nothing, so it passes the check
    whenever a real model would that stays with the record."""
    prompt = str(body["messages"][-1]["content"])
    turns = prompt.split("Turns to summarise:\n", 1)[-1]
    previous = prompt.split("Previous summary (merge it in):\n", 1)[1].split("\n\nTurns to summarise:", 1)[0] \
        if "Previous summary (merge it in):" in prompt else ""
    bullets = [line for line in previous.splitlines() if line.startswith("- ")][-12:]
    for block in turns.split("\n[turn ")[0:]:
        head = block.split("\n", 1)[0]
        if " assistant: " in head:
            sentence = head.split(" assistant: ", 1)[1].split(". ")[0].strip()
            if sentence:
                bullets.append(f"- {sentence[:160]}")
        elif " output [ref:" in head and ("Error" in block or "error" in block):
            failed = next((line for line in block.splitlines() if "rror" in line), "")
            bullets.append(f"- a tool call failed: {failed.strip()[:160]}")
    facts = [f"- [ref:{ref}] rule: {line.strip()}" for ref, line in _quotable(turns)][:6]
    return "\n".join(bullets[-24:] + (["FACTS:", *facts] if facts else []))


def _quotable(turns: str) -> list[tuple[str, str]]:
    """(ref, line) of the output lines the fake summariser proposes as facts: those with a rule word."""
    found: list[tuple[str, str]] = []
    for block in turns.split("\n[turn ")[1:]:
        head, _, body = block.partition("\n")
        if " output [ref:" not in head:
            continue
        ref = head.rsplit("[ref:", 1)[1].rstrip("]:")
        found.extend((ref, line) for line in body.splitlines()
                     if any(word in line for word in (" must ", " never ", "必须", "不得")) and len(line) < 300)
    return found


def part_variants(default: Policy) -> list[Policy]:
    """The default policy with one part changed at a time, to measure what each part brings."""
    return [
        replace(default, name=f"{default.name}-no-names", digest=replace(default.digest, names_share=0.0)),
        replace(default, name=f"{default.name}-no-retrieval", retrieval=replace(default.retrieval, enabled=False)),
        replace(default, name=f"{default.name}-no-phases", phases=replace(default.phases, enabled=False)),
        replace(default, name=f"{default.name}-summary", summarizer=replace(
            default.summarizer, mode="llm", model="fake-summarizer")),
    ]


def policy_engine(policies: dict[str, Policy], counter: TokenCounter, folder: Path | None = None) -> Engine:
    """An Engine over a fresh store, for replaying traces in-process. Without extraction's time cap
    (ingest.extract_ms), so the figures do not depend on how busy the machine is: on real messages the cap never
    bites, it is there for hostile ones."""
    folder = folder or Path(tempfile.mkdtemp(prefix="workset-eval-"))
    config = Config(ingest=IngestSettings(extract_ms=math.inf))
    return Engine(config, policies, open_store(folder / "eval.db"), counter, context_window)


def with_budget(policy: Policy, budget: int | None) -> Policy:
    if budget is None:
        return policy
    return replace(policy, budget=replace(policy.budget, max_input_tokens=budget))
