"""A small builder for long, deterministic agent runs written as OpenAI chat traces, with probe checks.

A scenario module drives a RunBuilder: system prompt, task, then assistant turns with tool calls and their
outputs (or, for a text-based agent, THOUGHT + one bash block answered by an observation in the user role). Each
item a probe will ask for is tagged with a label where it is stated (or restated); the self-check compares every
place a probe matches with those labels, so noise that matches by accident is caught.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Sequence

from ...records import Message

SOURCE = "workset scenario"
LICENSE = "same as workset"


@dataclass(frozen=True)
class Call:
    """One tool call and what the tool returned; `labels` tag the output as a place where a probed item is stated."""

    name: str
    arguments: dict[str, Any]
    output: str
    labels: tuple[str, ...] = ()


@dataclass(frozen=True)
class Scenario:
    """A built trace (a line of a traces file) and, per probe id, the message indices where its item is stated."""

    trace: dict[str, Any]
    origins: dict[str, tuple[int, ...]]


@dataclass
class RunBuilder:
    """Appends messages in order; probes are registered just before the assistant message they look at."""

    trace_id: str
    tools: list[dict[str, Any]] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    labels: dict[str, list[int]] = field(default_factory=dict)
    checks: list[dict[str, Any]] = field(default_factory=list)
    check_labels: dict[str, tuple[str, ...]] = field(default_factory=dict)
    calls_made: int = 0

    @classmethod
    def opened(cls, trace_id: str, tools: list[dict[str, Any]], system: str, task: str) -> RunBuilder:
        """A run that starts, as every agent run does, with its system prompt and the user's task."""
        run = cls(trace_id, tools)
        run.system(system)
        run.user(task)
        return run

    # --- messages -----------------------------------------------------------------------------------------------

    def _add(self, message: Message, labels: Sequence[str]) -> int:
        index = len(self.messages)
        self.messages.append(message)
        for label in labels:
            self.labels.setdefault(label, []).append(index)
        return index

    def system(self, text: str) -> None:
        self._add({"role": "system", "content": text}, ())

    def user(self, text: str, labels: Sequence[str] = ()) -> None:
        self._add({"role": "user", "content": text}, labels)

    def say(self, text: str, labels: Sequence[str] = ()) -> None:
        """An assistant message without tool calls (a question to the user, a report)."""
        self._add({"role": "assistant", "content": text}, labels)

    def act(self, text: str, *calls: Call, labels: Sequence[str] = ()) -> None:
        """An assistant message with one or more (parallel) tool calls, each answered right after, in order."""
        ids = [self._call_id() for _ in calls]
        self._add({"role": "assistant", "content": text or None, "tool_calls": [
            {"id": call_id, "type": "function",
             "function": {"name": call.name, "arguments": json.dumps(call.arguments, ensure_ascii=False)}}
            for call_id, call in zip(ids, calls)]}, labels)
        for call_id, call in zip(ids, calls):
            self._add({"role": "tool", "tool_call_id": call_id, "content": call.output}, call.labels)

    def bash(self, thought: str, command: str, output: str, returncode: int = 0, labels: Sequence[str] = (),
             output_labels: Sequence[str] = ()) -> None:
        """A text-based agent's step (mini-swe-agent): THOUGHT and one bash block; the environment answers as the
        user with the return code and output."""
        self._add({"role": "assistant", "content": f"THOUGHT: {thought}\n\n```bash\n{command}\n```"}, labels)
        body = output if output.endswith("\n") or not output else output + "\n"
        self._add({"role": "user", "content": f"<returncode>{returncode}</returncode>\n<output>\n{body}</output>"},
                  output_labels)

    def _call_id(self) -> str:
        self.calls_made += 1
        digest = hashlib.sha256(f"{self.trace_id}:{self.calls_made}".encode()).hexdigest()
        return f"call_{digest[:24]}"

    # --- probes -------------------------------------------------------------------------------------------------

    def probe(self, check_id: str, kind: str, why: str, origins: Sequence[str], contains: Sequence[str] = (),
              matches: Sequence[str] = ()) -> None:
        """A check on the next message (which must be the assistant's): the request before it must still show the
        item stated at the messages labelled `origins`."""
        self.checks.append({"id": check_id, "turn": len(self.messages), "kind": kind,
                            "must_contain_any": list(contains), "must_match_any": list(matches), "why": why})
        self.check_labels[check_id] = tuple(origins)

    def probes(self, *specs: tuple[str, str, str, Sequence[str], Sequence[str], Sequence[str]]) -> None:
        """Several checks on the same next message: (id, kind, why, origins, contains, matches) each."""
        for check_id, kind, why, origins, contains, matches in specs:
            self.probe(check_id, kind, why, origins, contains=contains, matches=matches)

    def finish(self) -> Scenario:
        trace = {"id": self.trace_id, "source": SOURCE, "license": LICENSE, "tools": self.tools,
                 "messages": self.messages, "probes": {"checks": self.checks}}
        origins = {check_id: tuple(sorted({i for label in labels for i in self.labels.get(label, ())}))
                   for check_id, labels in self.check_labels.items()}
        return Scenario(trace, origins)


def tool(name: str, description: str, parameters: dict[str, str | dict[str, Any]],
         optional: Sequence[str] = ()) -> dict[str, Any]:
    """An OpenAI function tool definition; each parameter is a description (a string parameter) or a JSON schema."""
    properties = {key: value if isinstance(value, dict) else {"type": "string", "description": value}
                  for key, value in parameters.items()}
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": properties, "required": [key for key in parameters if key not in optional]}}}
