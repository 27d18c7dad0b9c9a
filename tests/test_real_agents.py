"""The real agents through workset: Claude Code (`claude -p`), Codex (`codex exec`) and the OpenAI Agents SDK,
each doing a multi-turn task with real tools in a scratch folder, against the strict fake providers of
tests/fakewire.py. workset runs as `make run` runs it (`workset serve --config ...`, its own process) under a
small policy, so it compacts within the run.

Between each CLI and workset sits a tap (a recording relay), so a test sees both sides: what the client sent
and got back, and what the model was shown. The claims are the ones a user would notice: the task is done (the
files exist), every request was one the real provider accepts (tool pairing, signed thinking, reasoning items
byte for byte, at most four cache breakpoints), history was compacted and the compacted prefix was read from the
provider's cache, the model saw the client's history unchanged except where workset marked it, and a recall
stayed inside the proxy.

The CLIs come from package.json (`make install` runs `npm ci` when npm is on PATH); without npm these tests skip.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from conftest import REPO, write_config
from fakewire import (
    AnthropicReply,
    CustomToolCall,
    FakeAnthropic,
    FakeResponses,
    FunctionCall,
    OutputText,
    Reasoning,
    ResponsesReply,
    Text,
    Thinking,
    ToolUse,
)
from servers import ServerProcess, ServerThread, free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

BIN = REPO / "node_modules" / ".bin"
WORKSET = Path(sys.executable).parent / "workset"
AGENT_TIMEOUT = 150  # seconds for one CLI run; a healthy run takes a few
COMPACTED = "[workset] Earlier turns of this conversation were compacted"
RECALL = "workset_recall"
# Room for the conversation beyond the client's tools, system prompt and task, which weigh ~10k tokens for
# Claude Code and ~7k for Codex: an `auto` budget gives both the same room whatever their prompts weigh (the
# fallback keeps an unknown model's budget from capping it). A big tool output is cut to ~350 tokens (head,
# tail, ref) even while recent, so three or four tool turns pass the trigger (70% of 2,000) and compaction
# comes back every 3-5 turns: 2-3 times in an 11-turn run, with turns between whose prefix must stay cached.
POLICY: dict[str, Any] = {
    "name": "real-agents",
    "description": "tests/test_real_agents.py: compaction within a ten-turn run of a real CLI",
    "recent_turns": 2,
    "budget": {"max_input_tokens": "auto", "auto_max_tokens": 2000, "auto_fallback_tokens": 200000,
               "auto_share": 1.0, "trigger_ratio": 0.7, "target_ratio": 0.3},
    "tool_outputs": {"max_tokens": 600, "head_tokens": 200, "tail_tokens": 150},
}


def agent_binary(name: str) -> Path:
    """node_modules/.bin/<name>; skip only when npm is absent (make install then skips the CLIs)."""
    path = BIN / name
    if path.exists():
        return path
    if shutil.which("npm") is None:
        pytest.skip(f"{path.relative_to(REPO)} missing and npm not on PATH: make install installs the agent CLIs "
                    "from package.json only when npm is present")
    pytest.fail(f"{path.relative_to(REPO)} missing although npm is on PATH: run `make install` (npm ci)")


# --- the rig: fakes, workset as `make run` starts it, a tap in front -----------------------------------------


@dataclass
class Exchange:
    """One request a client sent to workset, and what came back."""

    path: str
    body: dict[str, Any]
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    answer: bytes = b""


class Tap:
    """A relay in front of workset that records each request and answer as the client sees them."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.exchanges: list[Exchange] = []
        methods = ["GET", "POST", "HEAD", "PUT", "DELETE"]
        self.app = Starlette(routes=[Route("/{path:path}", self._relay, methods=methods)])

    async def _relay(self, request: Request) -> Response:
        raw = await request.body()
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {}
        query = f"?{request.url.query}" if request.url.query else ""
        exchange = Exchange(request.url.path + query, body if isinstance(body, dict) else {})
        self.exchanges.append(exchange)
        # identity encoding, so the recorded answer is readable
        headers = {k: v for k, v in request.headers.items() if k not in ("host", "content-length", "accept-encoding")}
        client = httpx.AsyncClient(timeout=httpx.Timeout(120, connect=5))
        sent = client.build_request(request.method, self.target + exchange.path, content=raw, headers=headers)
        answer = await client.send(sent, stream=True)
        exchange.status, exchange.headers = answer.status_code, dict(answer.headers)
        kept = {k: v for k, v in answer.headers.items() if k not in ("content-length", "transfer-encoding")}

        async def relay() -> Any:
            chunks: list[bytes] = []
            try:
                async for chunk in answer.aiter_raw():
                    chunks.append(chunk)
                    yield chunk
            finally:
                exchange.answer = b"".join(chunks)
                await answer.aclose()
                await client.aclose()

        return StreamingResponse(relay(), status_code=answer.status_code, headers=kept)

    def posts(self, path: str) -> list[Exchange]:
        return [e for e in self.exchanges if e.path.split("?")[0] == path]


@dataclass
class Rig:
    fa: FakeAnthropic
    fr: FakeResponses
    workset: ServerProcess
    tap: Tap
    url: str  # the tap's: what the agents are pointed at
    folder: Path
    work: Path  # the agent's working directory
    model: Any  # the fake model's script


@pytest.fixture
def rig_for(tmp_path: Path) -> Iterator[Callable[..., Rig]]:
    """rig_for(anthropic=Script, responses=Script) -> Rig, a script made from the work folder; everything it
    started is stopped afterwards."""
    stack: list[Any] = []

    def start(anthropic: Callable[[Path], Any] | None = None, responses: Callable[[Path], Any] | None = None) -> Rig:
        work = tmp_path / "work"
        work.mkdir()
        model = (anthropic or responses or (lambda _: None))(work)
        fa = FakeAnthropic(model) if anthropic else FakeAnthropic()
        fr = FakeResponses(model) if responses else FakeResponses()
        a_server, r_server = ServerThread(fa.app), ServerThread(fr.app)
        stack.extend([a_server, r_server])
        a_server.start(), r_server.start()
        policy = tmp_path / "real-agents.yaml"
        policy.write_text(yaml.safe_dump(POLICY))
        port = free_port()
        config = write_config(tmp_path, r_server.url, policy=str(policy), policy_by_model={},
                              upstream={"timeout_s": 60, "connect_timeout_s": 5, "anthropic_base": a_server.url},
                              server={"port": port})
        # as `make run` starts it: the installed entry point, its own process, a config file
        workset = ServerProcess([str(WORKSET), "serve", "--config", str(config)], port, cwd=tmp_path)
        stack.append(workset)
        workset.start()
        tap = Tap(workset.url)
        tap_server = ServerThread(tap.app)
        stack.append(tap_server)
        tap_server.start()
        return Rig(fa, fr, workset, tap, tap_server.url, tmp_path, work, model)

    yield start
    for thing in reversed(stack):
        thing.stop()


def base_env(home: Path) -> dict[str, str]:
    """A scratch HOME and nothing of the host's own agent settings or keys."""
    home.mkdir(parents=True, exist_ok=True)
    keep = ("PATH", "LANG", "LC_ALL", "TERM", "TZ")
    return {**{k: os.environ[k] for k in keep if k in os.environ}, "HOME": str(home)}


def run_agent(argv: list[str], env: dict[str, str], cwd: Path,
              rig: Rig | None = None) -> subprocess.CompletedProcess[str]:
    """Run a CLI to its end, or kill its whole process group after AGENT_TIMEOUT (codex.js starts a binary)."""
    started = time.monotonic()
    with subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, start_new_session=True) as proc:
        try:
            out, err = proc.communicate(timeout=AGENT_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            # what it printed last says where it stopped (waiting for the proxy, or for itself); the rig says
            # what each request got and what workset logged
            pytest.fail(f"{argv[0]} still running after {AGENT_TIMEOUT}s; stdout: {out[-3000:]}\nstderr: {err[-2000:]}"
                        + (f"\n{rig_state(rig)}" if rig is not None else ""))
    print(f"{Path(argv[0]).name}: exit {proc.returncode} in {time.monotonic() - started:.1f}s")
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def rig_state(rig: Rig) -> str:
    """What the client's requests got (status, or none yet), what reached the fake providers, and workset's log."""
    exchanges = [f"{e.path} -> {e.status or 'no answer yet'} ({len(e.answer)} bytes)" for e in rig.tap.exchanges]
    return (f"requests to workset: {exchanges}\nat the providers: {len(rig.fa.requests)} Messages, "
            f"{len(rig.fr.requests)} Responses; violations: {rig.fa.violations + rig.fr.violations}\n"
            f"workset's log: {rig.workset.output()[-4000:]}")


def strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def epochs(bodies: list[Any]) -> list[int]:
    """For each request, the number of the compaction it was built on (0: none yet): a new text of workset's
    compacted message is a new compaction."""
    out, seen, current = [], None, 0
    for body in bodies:
        text = next((t for t in strings(body) if t.startswith(COMPACTED) or f"\n{COMPACTED}" in t), None)
        if text is not None and text != seen:
            seen, current = text, current + 1
        out.append(current)
    return out


def first_ref(text: str, near: str) -> str | None:
    """The [ref:ID] of the first workset marker after `near` in `text`."""
    start = text.find(near)
    found = re.search(r"\[ref:([^\]]+)\]", text[start:]) if start >= 0 else None
    return found.group(1) if found else None


# --- Claude Code ----------------------------------------------------------------------------------------------


CLAUDE_TASK = ("Write numbers.txt with the numbers 1 to 3000, read it back, write report.md saying status: draft, "
               "then make it final, and check a few more ranges.")


def claude_steps(work: Path) -> list[list[Any]]:
    """The tool turns of the Claude task: Bash, Read, Write, Edit, with big outputs among them."""
    def bash(command: str) -> ToolUse:
        return ToolUse("Bash", {"command": command, "description": "run a check"})

    report = str(work / "report.md")
    return [
        [Text("I'll write the numbers first."), bash("seq 1 3000 > numbers.txt && seq 1 3000")],
        [ToolUse("Read", {"file_path": str(work / "numbers.txt")})],
        [ToolUse("Write", {"file_path": report, "content": "# Report\n\nstatus: draft\n"})],
        [bash("seq 3001 6000")],
        [Text("Now I make the report final."),
         ToolUse("Edit", {"file_path": report, "old_string": "status: draft", "new_string": "status: final"})],
        [bash("seq 6001 9000")],
        [bash("wc -l numbers.txt && tail -n 2 numbers.txt")],
        [bash("seq 9001 12000")],
        [ToolUse("Read", {"file_path": report})],
        [bash("seq 12001 15000 | tail -n 1500")],
    ]


CLAUDE_DONE = "All done: numbers.txt holds 1 to 3000 and report.md is final."


@dataclass
class ClaudeModel:
    """The fake model's side of the Claude task, deciding from each request alone (retries get the same answer):
    the next step follows the newest answered tool call; once workset offers recall and shows a ref, it recalls
    the first command's output once, by query."""

    work: Path
    recall_asked: list[dict[str, Any]] = field(default_factory=list)
    recall_answered: list[dict[str, Any]] = field(default_factory=list)

    def __call__(self, body: dict[str, Any]) -> AnthropicReply:
        steps = claude_steps(self.work)
        results = [b for m in body["messages"] if isinstance(m.get("content"), list)
                   for b in m["content"] if b.get("type") == "tool_result"]
        done = [int(found.group(1)) for b in results if (found := re.fullmatch(r"toolu_s(\d+)", b["tool_use_id"]))]
        step = max(done, default=-1) + 1
        if results and results[-1]["tool_use_id"] == "toolu_recall":
            self.recall_answered.append(body)
        text = json.dumps(body["messages"], ensure_ascii=False)
        offered = any(t.get("name") == RECALL for t in body.get("tools") or ())
        ref = first_ref(text, "seq 1 3000")
        if offered and ref and not self.recall_asked and step >= 3:
            self.recall_asked.append(body)
            return AnthropicReply([Thinking("The first output was elided; read lines near 1500 back."),
                                   ToolUse(RECALL, {"ref": ref, "query": "1500"}, id="toolu_recall")])
        if step >= len(steps):
            return AnthropicReply([Thinking("Everything is checked."), Text(CLAUDE_DONE)])
        blocks = steps[step]
        *lead, use = blocks
        return AnthropicReply([Thinking(f"Step {step}: {use.name} next."), *lead,
                               ToolUse(use.name, use.input, id=f"toolu_s{step}")])


def claude_argv(prompt: str) -> list[str]:
    return [str(BIN / "claude"), "-p", prompt, "--dangerously-skip-permissions",
            "--output-format", "stream-json", "--verbose"]


def claude_env(rig: Rig) -> dict[str, str]:
    return {**base_env(rig.folder / "claude-home"), "IS_SANDBOX": "1",  # root may skip permissions in a sandbox
            "ANTHROPIC_BASE_URL": rig.url, "ANTHROPIC_API_KEY": "sk-claude-e2e",
            "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1", "DISABLE_ERROR_REPORTING": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "CLAUDE_CODE_MAX_RETRIES": "1"}


def events(stdout: str) -> list[dict[str, Any]]:
    out = []
    for line in stdout.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def plain(value: Any) -> Any:
    """A block as the model reads it: without cache_control (a transport hint) and without `is_error: false`
    (the default, which workset does not write back)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items() if k != "cache_control" and (k, v) != ("is_error", False)}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def blocks_of(body: dict[str, Any]) -> list[tuple[str, Any]]:
    """(role, block) for every block of every message, a string content as one text block."""
    out: list[tuple[str, Any]] = []
    for message in body.get("messages") or ():
        content = message.get("content")
        items = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        out += [(message["role"], plain(block)) for block in items]
    return out


def marked_by_workset(block: dict[str, Any]) -> bool:
    return "[workset]" in json.dumps(block, ensure_ascii=False)


EXCERPT_MARK = re.compile(r"\n…\n\[workset\] [^\n]*\[ref:[^\]]+\]\n…\n")


def output_of(block: dict[str, Any]) -> tuple[str | None, Any]:
    """A tool output's call id and text (Messages tool_result, Responses *_call_output)."""
    if block.get("type") == "tool_result":
        return block.get("tool_use_id"), block.get("content")
    return block.get("call_id"), block.get("output") if "output" in block else None


def excerpt_problem(block: dict[str, Any], own: list[tuple[str, Any]]) -> str | None:
    """An excerpted tool output must be the client's own output's head and tail around workset's marker."""
    call, text = output_of(block)
    parts = EXCERPT_MARK.split(text) if isinstance(text, str) else []
    if call is None or len(parts) != 2:
        return None
    original = next((t for _, b in own for c, t in [output_of(b)] if c == call and isinstance(t, str)), None)
    if not isinstance(original, str) or not (original.startswith(parts[0]) and original.endswith(parts[1])):
        return f"output of {call} is not the client's head and tail around workset's marker"
    return None


def unchanged_except_markers(own: list[tuple[str, Any]], seen: list[tuple[str, Any]]) -> list[str]:
    """What the model saw that is neither the client's own block or item (in the client's order) nor marked by
    workset nor a recall round; empty when the history reached the model unchanged but for workset's markers."""
    problems: list[str] = []
    position = -1
    for role, block in seen:
        if marked_by_workset(block):
            problem = excerpt_problem(block, own)
            problems += [problem] if problem else []
            continue
        if RECALL in json.dumps(block) or "_recall" in json.dumps(block):
            continue
        matches = [i for i, (r, b) in enumerate(own) if i > position and b == block]
        if not matches:
            problems.append(f"{role} block not sent by the client: {json.dumps(block)[:200]}")
            continue
        position = matches[0]
    return problems


def recall_follow_up(messages: list[dict[str, Any]]) -> bool:
    """A request workset sent itself, answering the model's recall call (the last message holds its result)."""
    content = messages[-1].get("content") if messages else None
    return isinstance(content, list) and any(b.get("tool_use_id") == "toolu_recall" for b in content)


def cache_problems(reads: list[int], epoch: list[int], tools: list[Any], turns: list[int]) -> list[str]:
    """Each turn's prefix extends the one before it, so it reads more from the cache than that turn did; a
    compaction, or a changed tool list (tools come first in the cache), starts a new prefix, read from the
    next turn on."""
    problems = []
    for a, b in zip(turns, turns[1:]):
        if epoch[b] == epoch[a] and tools[b] == tools[a] and reads[b] <= reads[a]:
            problems.append(f"request {b + 1} read {reads[b]} cached tokens after {reads[a]} (all: {reads})")
    return problems


def after_compactions(turns: list[int], epoch: list[int]) -> list[int]:
    """The turn after each compaction (a turn built on a newer compaction than the turn before it)."""
    return [c for a, b, c in zip(turns, turns[1:], turns[2:]) if epoch[b] != epoch[a]]


def workset_errors(rig: Rig) -> list[str]:
    """workset's own error and warning log lines (a step that failed open, a recall round that failed, ...)."""
    levels = ('"level": "error"', '"level": "warning"')
    return [line for line in rig.workset.output().splitlines() if any(level in line for level in levels)]


def claude_run(rig: Rig) -> tuple[subprocess.CompletedProcess[str], str]:
    """Claude Code's run of the task, checked to have ended well; and what to print when a claim fails."""
    result = run_agent(claude_argv(CLAUDE_TASK), claude_env(rig), rig.work, rig)
    diagnosis = f"stdout: {result.stdout[-1500:]}\nstderr: {result.stderr[-1500:]}\n{rig_state(rig)}"
    assert result.returncode == 0, diagnosis
    final = (events(result.stdout) or [{}])[-1]
    assert final.get("type") == "result" and final.get("subtype") == "success", diagnosis
    assert final.get("result") == CLAUDE_DONE
    return result, diagnosis


def test_claude_code_multi_turn_task_through_workset(rig_for: Callable[..., Rig]) -> None:
    agent_binary("claude")
    rig = rig_for(anthropic=ClaudeModel)
    model: ClaudeModel = rig.model
    result, diagnosis = claude_run(rig)

    # the task really ran: Bash wrote numbers.txt, Write and Edit made report.md final
    assert (rig.work / "numbers.txt").read_text().split() == [str(n) for n in range(1, 3001)]
    assert "status: final" in (rig.work / "report.md").read_text()

    fa = rig.fa
    assert fa.violations == []  # pairing, thinking signatures, at most four breakpoints, system messages placed
    assert workset_errors(rig) == []  # nothing failed open on the way
    bodies = [r.body for r in fa.requests]
    sent = rig.tap.posts("/v1/messages")
    assert all(e.status == 200 for e in sent)
    turns = [i for i, body in enumerate(bodies) if not recall_follow_up(body["messages"])]
    assert len(turns) == len(sent) == len(claude_steps(rig.work)) + 1  # each step and the answer (recall is inside one)

    # compaction: workset says so, and the model was shown workset's compacted message, twice in the run
    assert any(e.headers.get("x-workset-compacted") == "1" for e in sent)
    epoch = epochs(bodies)
    assert max(epoch) >= 2, f"compactions seen by the model: {epoch}"

    # the compacted prefix is read from the cache on the next turn; between compactions the cached prefix grows
    tools = [[t.get("name") for t in body.get("tools") or ()] for body in bodies]
    assert cache_problems(fa.cache_reads, epoch, tools, turns) == []
    # the client's own tools and workset_recall, from the first request on: the cached tool list never changes
    assert len({tuple(t) for t in tools}) == 1 and tools[0][-1] == RECALL
    assert after_compactions(turns, epoch)
    for k in after_compactions(turns, epoch):  # reads into the messages, not only tools and system
        hit = fa.cache_hits[k]
        assert hit is not None and hit.path.startswith("messages."), f"request {k + 1}, after a compaction: {hit}"

    # the model saw the client's own history, in its order, except where workset marked it
    for number, (exchange, i) in enumerate(zip(sent, turns), 1):
        assert unchanged_except_markers(blocks_of(exchange.body), blocks_of(bodies[i])) == [], f"request {number}"

    # recall: asked once, answered inside workset with the stored output, never shown to Claude Code
    assert len(model.recall_asked) == 1 and len(model.recall_answered) == 1
    answer = model.recall_answered[0]["messages"][-1]["content"][-1]
    recalled = json.dumps(answer.get("content"))
    assert "1499" in recalled and "1501" in recalled, recalled[:500]
    assert RECALL not in result.stdout and "toolu_recall" not in result.stdout
    assert not any(RECALL in json.dumps(e.body.get("messages")) or b"toolu_recall" in e.answer for e in sent)
    # nor the thinking that led to the call: sent back in the client's next turn, before that turn's own thinking,
    # it made the turn one the API refuses (its tool_use no longer led by the thinking it was issued with)
    assert "read lines near 1500" not in result.stdout


ROUNDS = 24  # tool rounds of the long Claude task: several compactions, with reminders ending requests between


@dataclass
class ShellRounds:
    """A long shell task for Claude Code: ROUNDS Bash calls, each chosen from the newest tool result the model was
    shown (as a real model would carry on from it), a short note to the user every third round (so Claude Code's
    silent-turn reminder comes back), then the answer. A request without the newest result gets a step the client
    already ran: the run stops after twice the rounds, so a broken working set cannot make it loop for ever."""

    work: Path
    calls: int = 0

    def __call__(self, body: dict[str, Any]) -> AnthropicReply:
        self.calls += 1
        results = [b for m in body["messages"] if isinstance(m.get("content"), list)
                   for b in m["content"] if b.get("type") == "tool_result"]
        newest = re.fullmatch(r"toolu_r(\d+)", results[-1]["tool_use_id"]) if results else None
        step = int(newest.group(1)) + 1 if newest else 0
        if step >= ROUNDS or self.calls > 2 * ROUNDS:
            return AnthropicReply([Text(CLAUDE_DONE)])
        note = [Text(f"Round {step}: still counting.")] if step % 3 == 0 else []
        command = {"command": f"seq {step * 1000} {step * 1000 + 400}", "description": f"round {step}"}
        return AnthropicReply([Thinking(f"Round {step}."), *note, ToolUse("Bash", command, id=f"toolu_r{step}")])


def newest_round(messages: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The newest tool_use block and the tool_result answering it, in a Messages request's messages."""
    results = [b for m in messages if m["role"] == "user" and isinstance(m.get("content"), list)
               for b in m["content"] if b.get("type") == "tool_result"]
    if not results:
        return None
    uses = [b for m in messages if m["role"] == "assistant" and isinstance(m.get("content"), list)
            for b in m["content"] if b.get("type") == "tool_use" and b.get("id") == results[-1]["tool_use_id"]]
    return (uses[-1], results[-1]) if uses else None


def as_sent_or_excerpted(shown: dict[str, Any], own: dict[str, Any]) -> bool:
    """A tool_result as the client sent it, or (over tool_outputs.max_tokens) its own head and tail around
    workset's marker; not a placeholder."""
    if shown == own:
        return True
    text, original = shown.get("content"), own.get("content")
    if isinstance(original, list):
        original = "\n".join(b.get("text", "") for b in original if b.get("type") == "text")
    parts = EXCERPT_MARK.split(text) if isinstance(text, str) else []
    return len(parts) == 2 and isinstance(original, str) and original.startswith(parts[0]) and \
        original.endswith(parts[1])


def system_texts(messages: list[dict[str, Any]]) -> list[str]:
    """The text of each system message among the messages (a string, or its text blocks)."""
    return [m["content"] if isinstance(m["content"], str) else
            "\n".join(b.get("text", "") for b in m["content"] if b.get("type") == "text")
            for m in messages if m["role"] == "system"]


def ends_with_reminder(messages: list[dict[str, Any]]) -> bool:
    """The request's last message is one Claude Code added after the newest tool result: a system message, or
    <system-reminder> text."""
    last = messages[-1]
    if newest_round(messages) is None:
        return False
    content = last.get("content")
    text = content if isinstance(content, str) else " ".join(b.get("text", "") for b in content or ()
                                                            if b.get("type") == "text")
    return last["role"] == "system" or text.strip().startswith("<system-reminder>")


def test_claude_code_reminders_never_take_the_place_of_the_newest_tool_round(rig_for: Callable[..., Rig]) -> None:
    """Claude Code ends many requests with a reminder after the newest tool result. Through compactions, the model
    is shown the newest Bash call and its output in every request (the issue: a compaction met a trailing reminder,
    kept it, and moved the call and its output into the digest, so the model ran the step again)."""
    agent_binary("claude")
    rig = rig_for(anthropic=ShellRounds)
    env = {**claude_env(rig), "CLAUDE_CODE_SILENT_TURN_REMINDER_TURNS": "2"}  # the reminder every other round
    result = run_agent(claude_argv("Count through the ranges, one Bash call per round."), env, rig.work, rig)
    diagnosis = f"stdout: {result.stdout[-1500:]}\nstderr: {result.stderr[-1500:]}\n{rig_state(rig)}"
    assert result.returncode == 0, diagnosis
    assert rig.fa.violations == [] and workset_errors(rig) == []
    sent = rig.tap.posts("/v1/messages")
    received = [r.body for r in rig.fa.requests]
    assert len(sent) == len(received)  # no recall rounds in this task: request i of the client is request i here
    for number, (exchange, body) in enumerate(zip(sent, received), 1):
        own = newest_round(exchange.body["messages"])
        if own is None:
            continue
        use, output = (plain(block) for block in own)
        shown = newest_round(body["messages"])
        assert shown is not None and plain(shown[0]) == use, f"request {number}: the newest tool_use is not shown"
        kept = plain(shown[1])
        assert as_sent_or_excerpted(kept, output), f"request {number}: the newest tool_result is not shown: {kept}"
    # the case of the issue happened: compactions of requests that end with a reminder after a tool result
    reminded = [int(ends_with_reminder(e.body["messages"])) for e in sent]
    compacted = [int(e.headers.get("x-workset-compacted") == "1") for e in sent]
    assert sum(r and c for r, c in zip(reminded, compacted)) >= 2, f"reminder ended: {reminded}, compacted: {compacted}"
    # a reminder sent again is shown once from a compaction on: before the newest round, one copy of each
    for number, (exchange, body) in enumerate(zip(sent, received), 1):
        if exchange.headers.get("x-workset-compacted") != "1":
            continue
        newest = max(i for i, m in enumerate(body["messages"]) if m["role"] == "assistant")
        shown = system_texts(body["messages"][:newest])
        assert len(shown) == len(set(shown)), f"request {number}: {shown}"
    assert any(len(set(texts)) < len(texts) for texts in (system_texts(e.body["messages"]) for e in sent)), \
        "Claude Code sent a reminder again"
    # and so the model carried on from it: every round ran once, then the answer
    rounds = [e for e in events(result.stdout) if e.get("type") == "assistant"
              for b in e["message"]["content"] if b.get("type") == "tool_use"]
    assert len(rounds) == ROUNDS, diagnosis
    assert (events(result.stdout) or [{}])[-1].get("result") == CLAUDE_DONE


# --- Codex ------------------------------------------------------------------------------------------------------


CODEX_TASK = "Write numbers.txt with 1 to 3000, add report.md with status: draft, make it final, check some ranges."
CODEX_DONE = "Done: numbers.txt holds 1 to 3000 and report.md is final."


def codex_steps() -> list[FunctionCall | CustomToolCall]:
    """The tool turns of the Codex task: exec_command with big outputs, and apply_patch (a custom tool)."""
    def run(cmd: str) -> FunctionCall:
        return FunctionCall("exec_command", json.dumps({"cmd": cmd}))

    patch = "*** Begin Patch\n*** Add File: report.md\n+# Report\n+status: draft\n*** End Patch\n"
    return [
        run("seq 1 3000 > numbers.txt && seq 1 3000"),
        run("wc -l numbers.txt"),
        CustomToolCall("apply_patch", patch),
        run("seq 3001 6000"),
        run("sed -i 's/status: draft/status: final/' report.md && cat report.md"),
        run("seq 6001 9000"),
        run("tail -n 2 numbers.txt"),
        run("seq 9001 12000"),
        run("ls"),
        run("seq 12001 15000"),
    ]


@dataclass
class CodexModel:
    """The fake model's side of the Codex task, deciding from each request alone: the next step follows the
    newest answered call; reasoning (with encrypted_content) leads every answer; once workset offers recall and
    shows a ref, the first command's output is recalled once, by query."""

    work: Path
    recall_asked: list[dict[str, Any]] = field(default_factory=list)
    recall_answered: list[dict[str, Any]] = field(default_factory=list)

    def __call__(self, body: dict[str, Any]) -> ResponsesReply:
        items = body["input"] if isinstance(body["input"], list) else []
        outputs = [i for i in items if i.get("type") in ("function_call_output", "custom_tool_call_output")]
        done = [int(found.group(1)) for i in outputs if (found := re.fullmatch(r"call_s(\d+)", i["call_id"]))]
        step = max(done, default=-1) + 1
        if outputs and outputs[-1]["call_id"] == "call_recall":
            self.recall_answered.append(body)
        offered = any(t.get("name") == RECALL for t in body.get("tools") or ())
        ref = first_ref(json.dumps(items, ensure_ascii=False), "seq 1 3000")
        if offered and ref and not self.recall_asked and step >= 3:
            self.recall_asked.append(body)
            return ResponsesReply([Reasoning("The first output was elided; read lines near 1500 back."),
                                   FunctionCall(RECALL, json.dumps({"ref": ref, "query": "1500"}), "call_recall")])
        steps = codex_steps()
        if step >= len(steps):
            return ResponsesReply([Reasoning("Everything is checked."), OutputText(CODEX_DONE)])
        call = steps[step]
        call.call_id = f"call_s{step}"
        return ResponsesReply([Reasoning(f"Step {step}: {call.name} next."), call])


def codex_argv(rig: Rig) -> list[str]:
    provider = (f'model_providers.fake={{name="fake",base_url="{rig.url}/v1",wire_api="responses",'
                'env_key="FAKE_KEY",request_max_retries=1,stream_max_retries=1}')
    return [str(BIN / "codex"), "exec", "-c", provider, "-c", "model_provider=fake", "-c", "model=gpt-5.5",
            "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "--json", CODEX_TASK]


def codex_env(rig: Rig) -> dict[str, str]:
    home = rig.folder / "codex-home"
    (home / ".codex").mkdir(parents=True, exist_ok=True)
    return {**base_env(home), "CODEX_HOME": str(home / ".codex"), "FAKE_KEY": "sk-codex-e2e"}


def items_of(body: dict[str, Any]) -> list[tuple[str, Any]]:
    items = body.get("input")
    return [(str(i.get("type") or i.get("role")), plain(i)) for i in items] if isinstance(items, list) else []


def test_codex_multi_turn_task_through_workset(rig_for: Callable[..., Rig]) -> None:
    agent_binary("codex")
    rig = rig_for(responses=CodexModel)
    model: CodexModel = rig.model
    result = run_agent(codex_argv(rig), codex_env(rig), rig.work, rig)
    diagnosis = f"stdout: {result.stdout[-1500:]}\nstderr: {result.stderr[-1500:]}\n{rig_state(rig)}"
    assert result.returncode == 0, diagnosis
    messages = [e["item"]["text"] for e in events(result.stdout)
                if e.get("type") == "item.completed" and e.get("item", {}).get("type") == "agent_message"]
    assert messages[-1:] == [CODEX_DONE], diagnosis

    # the commands really ran, and apply_patch wrote the file that sed then changed
    assert (rig.work / "numbers.txt").read_text().split() == [str(n) for n in range(1, 3001)]
    assert "status: final" in (rig.work / "report.md").read_text()

    fr = rig.fr
    assert fr.violations == []  # reasoning items byte for byte and followed by their call, every call answered
    assert workset_errors(rig) == []
    bodies = [r.body for r in fr.requests]
    sent = rig.tap.posts("/v1/responses")
    assert all(e.status == 200 for e in sent)
    turns = [i for i, body in enumerate(bodies) if not any(
        i.get("call_id") == "call_recall" for i in body["input"][-1:])]
    assert len(turns) == len(sent) == len(codex_steps()) + 1

    assert any(e.headers.get("x-workset-compacted") == "1" for e in sent)
    epoch = epochs(bodies)
    assert max(epoch) >= 2, f"compactions seen by the model: {epoch}"
    tools = [[t.get("name") or t.get("type") for t in body.get("tools") or ()] for body in bodies]
    assert cache_problems(fr.cached_tokens, epoch, tools, turns) == []
    assert after_compactions(turns, epoch)
    assert len({tuple(t) for t in tools}) == 1 and tools[0][-1] == RECALL

    for number, (exchange, i) in enumerate(zip(sent, turns), 1):
        assert unchanged_except_markers(items_of(exchange.body), items_of(bodies[i])) == [], f"request {number}"
    # the newest tool call and its result reach the model in every request, compacting or not (issue 30)
    newest_kept = 0
    for number, (exchange, i) in enumerate(zip(sent, turns), 1):
        items = [item for item in exchange.body["input"] if isinstance(item, dict)]
        calls = [item for item in items if str(item.get("type", "")).endswith("_call")]
        if not calls:
            continue
        output = next((item for item in items if str(item.get("type", "")).endswith("_call_output")
                       and item.get("call_id") == calls[-1].get("call_id")), None)
        received = [item for item in bodies[i]["input"] if isinstance(item, dict)]
        assert plain(calls[-1]) in [plain(item) for item in received], f"request {number}: newest call"
        # its result as sent, or as its head and tail with a ref when it is oversized
        assert output is None or any(str(item.get("type", "")).endswith("_call_output")
                                     and item.get("call_id") == output.get("call_id") for item in received), \
            f"request {number}: newest result"
        newest_kept += 1
    assert newest_kept >= len(codex_steps()) // 2

    assert len(model.recall_asked) == 1 and len(model.recall_answered) == 1
    recalled = model.recall_answered[0]["input"][-1]["output"]
    assert "1499" in recalled and "1501" in recalled, recalled[:500]
    assert RECALL not in result.stdout and "read lines near 1500" not in result.stdout
    assert not any(RECALL in json.dumps(e.body.get("input")) or b"call_recall" in e.answer for e in sent)


# --- OpenAI Agents SDK ----------------------------------------------------------------------------------------


def order_model(work: Path) -> Callable[[dict[str, Any]], ResponsesReply]:
    """Call order_status for A-17, then answer with what it returned."""
    def answer(body: dict[str, Any]) -> ResponsesReply:
        outputs = [i for i in body["input"] if isinstance(i, dict) and i.get("type") == "function_call_output"]
        if not outputs:
            return ResponsesReply([Reasoning("Look the order up."),
                                   FunctionCall("order_status", json.dumps({"order_id": "A-17"}))])
        return ResponsesReply([Reasoning("Report it."), OutputText(f"Order A-17: {outputs[-1]['output']}.")])
    return answer


def test_agents_sdk_default_responses_model_through_workset(rig_for: Callable[..., Rig],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    agents = pytest.importorskip("agents")
    import openai
    from agents.models import _openai_shared

    rig = rig_for(responses=order_model)
    # the SDK's default client and tracing are process-wide: put them back after the test
    monkeypatch.setattr(_openai_shared, "_default_openai_client", None)
    client = openai.AsyncOpenAI(base_url=rig.url + "/v1", api_key="sk-agents-e2e", timeout=30, max_retries=0)
    agents.set_default_openai_client(client, use_for_tracing=False)
    agents.set_tracing_disabled(True)
    looked_up: list[str] = []

    @agents.function_tool
    def order_status(order_id: str) -> str:
        """The shipping status of an order."""
        looked_up.append(order_id)
        return "shipped on 2026-11-28"

    agent = agents.Agent(name="support", instructions="Answer order questions with the order_status tool.",
                         tools=[order_status], model="gpt-5.5")
    result = asyncio.run(asyncio.wait_for(agents.Runner.run(agent, "Where is order A-17?"), timeout=60))

    assert result.final_output == "Order A-17: shipped on 2026-11-28."
    assert looked_up == ["A-17"]
    assert rig.fr.violations == [] and workset_errors(rig) == []
    sent = rig.tap.posts("/v1/responses")
    assert [e.status for e in sent] == [200, 200]
    sessions = {e.headers.get("x-workset-session", "") for e in sent}
    assert len(sessions) == 1 and sessions.pop().startswith("s_")  # one conversation in workset
    second = rig.fr.requests[-1].body
    assert second["instructions"] == agent.instructions
    assert any(i.get("type") == "function_call_output" and "shipped" in i["output"] for i in second["input"])
