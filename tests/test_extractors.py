"""Extraction in a pool of lower-priority processes gives what extraction on the calling thread gives, counts its
CPU for x-workset-ms, and survives its processes being killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from proxy.errors import WorksetError
from proxy.extractors import InlineExtractor, Job, ProcessExtractor
from proxy.ingest import context_for
from proxy.jsonbytes import encode_json
from proxy.validate import parse_json_object

MESSAGES = [
    {"role": "system", "content": "You are a support agent."},
    {"role": "user", "content": "Refund order #W2378156. Never refund above $500. 不要修改地址。"},
    {"role": "assistant", "content": "Checking the order.", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_order", "arguments": '{"order_id": "#W2378156"}'}}]},
    {"role": "tool", "tool_call_id": "c1", "content": '{"order_id": "#W2378156", "status": "delivered", "total": 412.5}'},
    {"role": "assistant", "content": "Decision: refund the full $412.50. Next: confirm with the user."},
    {"role": "user", "content": "<returncode>1</returncode>\nTraceback (most recent call last):\nValueError: boom"},
]


def jobs() -> list[Job]:
    return [Job(MESSAGES[i], context_for(MESSAGES, i, f"r{i}", 1, observed=i == 5), i == 5, 32768, None, 40)
            for i in range(1, len(MESSAGES))]


def test_a_pool_extracts_what_the_calling_thread_would_and_counts_its_cpu() -> None:
    pool = ProcessExtractor(1, 10)
    try:
        before = pool.offloaded_ms()
        assert pool(jobs()) == InlineExtractor()(jobs())
        assert pool.offloaded_ms() > before  # its CPU shows in x-workset-ms
        assert pool([]) == []
    finally:
        pool.close()


def test_a_small_batch_is_extracted_on_the_calling_thread_and_a_large_one_in_the_pool() -> None:
    """A request's usual few messages never take the trip (nor wait there behind another tenant's megabyte)."""
    pool = ProcessExtractor(1, 10, inline_tokens=200)  # the batch below holds 5 x 40 tokens
    try:
        before = pool.offloaded_ms()
        assert pool(jobs()) == InlineExtractor()(jobs())
        assert pool.offloaded_ms() == before  # nothing was done elsewhere
        large = jobs() + jobs()[:1]  # 240 tokens
        assert pool(large) == InlineExtractor()(large)
        assert pool.offloaded_ms() > before
    finally:
        pool.close()


def test_a_killed_pool_is_replaced_and_nothing_is_lost() -> None:
    pool = ProcessExtractor(1, 10)
    try:
        assert pool._pool is not None
        for process in list(pool._pool._processes.values()):  # as the OOM killer or an operator would
            os.kill(process.pid, signal.SIGKILL)
            process.join(30)
        expected = InlineExtractor()(jobs())
        assert pool(jobs()) == expected  # extracted on the calling thread meanwhile
        assert pool(jobs()) == expected  # and by the new pool after
        assert pool._pool is not None
    finally:
        pool.close()


def _stuck(jobs: object) -> list[object]:
    time.sleep(3600)  # a process that never answers (a deadlock, a runaway loop)
    return []


def test_a_stuck_process_holds_no_request_past_the_timeout_and_is_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    """What an extraction process does not answer within its timeout is extracted here; the stuck process is
    killed, and the pool that replaces it works."""
    import proxy.extractors

    monkeypatch.setattr(proxy.extractors, "extract_jobs", _stuck)
    pool = ProcessExtractor(1, 10, timeout_s=1.0)  # forked now: its process has the stuck extraction
    monkeypatch.undo()  # this process extracts as usual
    try:
        assert pool._pool is not None
        stuck = list(pool._pool._processes.values())
        expected = InlineExtractor()(jobs())
        started = time.monotonic()
        assert pool(jobs()) == expected
        assert time.monotonic() - started < 20  # the timeout, the replacement's start-up, the work: not an hour
        # by its pid: the pool's own thread may reap a killed process while process.is_alive() asks, and then
        # waitpid's ECHILD reads as "alive"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(process.pid) for process in stuck):
            time.sleep(0.05)
        assert not any(_alive(process.pid) for process in stuck)
        before = pool.offloaded_ms()
        assert pool(jobs()) == expected  # by the new pool
        assert pool.offloaded_ms() > before
    finally:
        pool.close()


def test_extraction_processes_end_with_a_server_killed_with_sigkill(tmp_path: Path) -> None:
    """No orphans: a server killed with -9 leaves no extraction process behind."""
    script = tmp_path / "server.py"
    script.write_text("import time\nfrom proxy.extractors import ProcessExtractor\n"
                      "pool = ProcessExtractor(2, 10)\n"
                      "print(' '.join(str(p.pid) for p in pool._pool._processes.values()), flush=True)\n"
                      "time.sleep(600)\n")
    server = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                              cwd=str(Path(__file__).resolve().parent.parent))
    try:
        children = [int(pid) for pid in server.stdout.readline().split()]  # type: ignore[union-attr]
        assert len(children) == 2
    finally:
        server.kill()
        server.wait(30)
    deadline = time.monotonic() + 30  # bounds a hang; they go within about a second
    while time.monotonic() < deadline and any(_alive(pid) for pid in children):
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in children)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has ended, its parent gone
    except FileNotFoundError:
        return False


def test_a_message_too_deep_to_send_to_a_process_is_extracted_here() -> None:
    deep: object = "leaf"
    for _ in range(5000):  # a client may nest this deep; pickling it exceeds the recursion limit
        deep = [deep]
    message = {"role": "user", "content": [{"type": "text", "text": "Never touch prod."}], "extra": deep}
    job = Job(message, context_for([message], 0, "r0", 0), False, 32768, None, 1)
    pool = ProcessExtractor(1, 10)
    try:
        assert pool([job]) == InlineExtractor()([job])
    finally:
        pool.close()


def big_body(text: str) -> bytes:
    return orjson.dumps({"model": "m", "messages": [{"role": "tool", "tool_call_id": "c", "content": text}]})


def test_a_large_body_is_parsed_in_the_pool_and_a_small_one_on_the_calling_thread() -> None:
    """A body of megabytes holds the interpreter lock while it is read: in the pool it holds no other request up."""
    pool = ProcessExtractor(1, 10, inline_bytes=1000)
    try:
        small, large = big_body("short"), big_body("中文" * 5000 + " 12345678901234567890123")
        before = pool.offloaded_ms()
        assert pool.parse(small) == parse_json_object(small)
        assert pool.offloaded_ms() == before
        assert pool.parse(large) == parse_json_object(large)
        assert pool.offloaded_ms() > before  # its CPU shows in x-workset-ms
        exact = b'{"model": "m", "n": 123456789012345678901234567890, "pad": "' + b"x" * 2000 + b'"}'
        assert pool.parse(exact)["n"] == 123456789012345678901234567890  # beyond 64 bits, digit for digit
    finally:
        pool.close()


@pytest.mark.parametrize("raw, message", [
    (b'{"model": "m", "messages": [' + b'"x", ' * 1000 + b'}', "not valid JSON"),
    (b'[' + b'"x", ' * 1000 + b'"x"]', "must be a JSON object"),
])
def test_a_large_body_that_is_not_a_json_object_is_refused_as_on_the_calling_thread(raw: bytes, message: str) -> None:
    pool = ProcessExtractor(1, 10, inline_bytes=1000)
    try:
        processes = pool._pool
        with pytest.raises(WorksetError) as elsewhere:
            pool.parse(raw)
        assert pool._pool is processes  # the error travelled back as it was: no broken pool, no second reading
        with pytest.raises(WorksetError) as here:
            parse_json_object(raw)
        assert message in elsewhere.value.message
        assert (elsewhere.value.status, elsewhere.value.message, elsewhere.value.code) == \
            (here.value.status, here.value.message, here.value.code) == (400, here.value.message, "invalid_json")
    finally:
        pool.close()


def test_a_large_body_too_deep_to_travel_back_is_parsed_on_the_calling_thread() -> None:
    """Pickling the parsed body back recurses once per level: past its limit the body is read here instead."""
    raw = b'{"model": "m", "deep": ' + b'[' * 1000 + b']' * 1000 + b', "pad": "' + b"x" * 2000 + b'"}'
    pool = ProcessExtractor(1, 10, inline_bytes=1000)
    try:
        assert encode_json(pool.parse(raw)) == encode_json(parse_json_object(raw))
        assert pool._pool is not None  # the pool still serves
        assert pool.parse(big_body("x" * 2000))["model"] == "m"
    finally:
        pool.close()
