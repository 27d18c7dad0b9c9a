"""The request fuzzer (bench/fuzz.py) at a size CI affords: 1,200 malformed and odd requests against a real
`workset serve` get no 5xx, no hang, no reset connection, OpenAI-format errors, valid completions, and valid
requests reach the provider as sent (issue 9, item 6). `make soak` runs the same fuzzer at 10,000 requests."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.fuzz import (Answer, Options, RecordingProvider, Summary, check, check_log, completion_problem,  # noqa: E402
                        error_format_problem, run, stream_problem)
from bench.fuzz_cases import Cases, marker_of  # noqa: E402

SEED = 20260601
MAX_BODY = 1024 * 1024  # the served workset's server.max_body_bytes: size cases scale to it (4 MiB in make soak)


@pytest.mark.e2e
def test_a_thousand_odd_requests_find_no_failure(tmp_path: Path) -> None:
    summary = run(Options(requests=1200, seed=SEED, max_body_bytes=MAX_BODY), tmp_path)
    assert summary.sent == 1200
    assert summary.ok(), summary.render()
    assert not summary.fail_open, summary.render()  # forwarded as sent, but each one is a workset bug
    assert summary.forwarded >= 500 and summary.compared >= 300, summary.render()  # valid ones went through
    assert summary.statuses[400] >= 200 and summary.statuses[413] >= 1, summary.render()  # invalid ones refused
    assert len(summary.kinds) >= 17 and summary.via["openai SDK"] >= 50, summary.render()


def test_a_case_is_the_same_whenever_it_is_drawn() -> None:
    first, second = Cases(7, MAX_BODY), Cases(7, MAX_BODY)
    drawn = [first.case(number) for number in range(40)]
    assert [second.case(number) for number in reversed(range(40))][::-1] == drawn
    assert Cases(8, MAX_BODY).case(3) != drawn[3]
    assert all(case.marker is None or case.marker == marker_of(7, case.number) for case in drawn)


def test_the_checks_catch_what_they_look_for() -> None:
    assert error_format_problem(b'{"error": {"message": "m", "type": "t", "code": null}}') is None
    assert error_format_problem(b"Internal Server Error")
    assert error_format_problem(b'{"error": "m"}')
    assert error_format_problem(b'{"error": {"message": "", "type": "t", "code": "c"}}')
    assert completion_problem(b'{"object": "chat.completion", "choices": [{"message": {"content": "x"}}]}') is None
    assert completion_problem(b'{"object": "chat.completion", "choices": []}')
    chunk = b'data: {"object": "chat.completion.chunk", "choices": []}\n\n'
    assert stream_problem(chunk + b"data: [DONE]\n\n") is None
    assert stream_problem(chunk)  # cut: no [DONE]
    assert stream_problem(chunk + b'data: {"error": {"message": "cut"}}\n\ndata: [DONE]\n\n')


def test_a_failure_is_counted_and_a_relayed_provider_error_is_not() -> None:
    cases, provider = Cases(3, MAX_BODY), RecordingProvider()
    forward = next(case for case in map(cases.case, range(200)) if case.expect == "forward" and case.marker)
    reject = next(case for case in map(cases.case, range(200)) if case.expect == "reject")
    summary = Summary(Options())
    failed = check(forward, Answer(500, {}, b"Internal Server Error"), provider, summary)
    assert [f.check for f in failed] == ["workset_5xx", "not_forwarded"]
    relayed = Answer(503, {"x-request-id": "fuzz-provider-503"}, b'{"error": {"message": "m", "type": "t", "code": 1}}')
    assert [f.check for f in check(reject, relayed, provider, summary)] == ["not_refused"]
    assert summary.relayed_5xx == 1
    completion = b'{"object": "chat.completion", "choices": [{"message": {}}]}'
    ok = Answer(200, {"x-request-id": "fuzz-provider-200"}, completion)
    assert [f.check for f in check(forward, ok, provider, summary)] == ["missing_at_provider"]
    hang = Answer(error=("hang", "no answer"))
    assert [f.check for f in check(forward, hang, provider, summary)] == ["hang"]


def test_tracebacks_in_the_log_fail_and_fail_open_events_are_counted() -> None:
    summary = Summary(Options())
    check_log('{"event": "workset_step_failed", "error": "TypeError: x", "exception": "Traceback ..."}\n'
              '{"event": "request", "status": 200}\n', summary)
    assert summary.ok() and sum(summary.fail_open.values()) == 1
    check_log("Exception in ASGI application\nTraceback (most recent call last):\n", summary)
    check_log('{"event": "recall_answer", "level": "error", "exception": "Traceback ..."}\n', summary)
    assert [f.check for f in summary.failures] == ["log_traceback", "log_traceback"]


# --- what the fuzzer found, pinned ----------------------------------------------------------------------------------

FOUND = [  # (what the request had, the parameter the 400 names): each was forwarded by a fail open, or relayed as
    # an event stream the provider never sent, before it was a 400
    ({"messages": [{"role": ["user"], "content": "hi"}]}, "messages[0].role"),
    ({"stream": "yes"}, "stream"),
    ({"stream": 1}, "stream"),
    ({"tools": [{"type": "function", "function": True}]}, "tools[0]"),
    ({"tools": [{"type": "custom", "custom": "apply_patch"}]}, "tools[0]"),
    ({"tools": [None]}, "tools[0]"),
    ({"tools": "bash"}, "tools"),
    ({"tool_choice": {"type": "function", "function": "bash"}}, "tool_choice"),
]


@pytest.mark.e2e
@pytest.mark.parametrize("extra, param", FOUND)
def test_a_request_the_fuzzer_found_mishandled_is_a_400_before_the_provider(proxy: Any, fake: Any,
                                                                            extra: dict[str, Any], param: str) -> None:
    body = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}], **extra}
    response = httpx.post(proxy.url + "/v1/chat/completions", json=body, timeout=20,
                          headers={"authorization": "Bearer sk-test"})
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == param
    assert not fake.chat_requests()


@pytest.mark.e2e
def test_tools_of_other_types_and_deep_schemas_are_forwarded(proxy: Any, fake: Any) -> None:
    """A provider's own tool types pass as they are; a tool schema nested 500 levels is counted, not failed open."""
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(500):
        schema = {"type": "array", "items": schema}
    tools = [{"type": "bash_20250124", "name": "bash"},
             {"type": "function", "function": {"name": "deep", "parameters": {"type": "object",
                                                                             "properties": {"x": schema}}}}]
    body = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}], "tools": tools}
    response = httpx.post(proxy.url + "/v1/chat/completions", json=body, timeout=20,
                          headers={"authorization": "Bearer sk-test"})
    assert response.status_code == 200 and response.headers["x-workset-session"]  # not a fail open
    assert fake.chat_requests()[-1].body["tools"][:2] == tools  # then workset's recall tool
