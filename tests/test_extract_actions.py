"""Tool results: action outcome and gist, and verification states of test runs."""

from __future__ import annotations

import json

from traces import load_traces, requires_traces

from proxy.extract import extract, tool_output_gist
from proxy.extract.actions import MAX_GIST_CHARS, runner_command, runner_verdict
from proxy.records import VERIFICATION, Action, MessageContext, ToolCall

SWE = "swe/deepseek_chat_test_1-100/astropy__astropy-12907"


def bash(command: str) -> ToolCall:
    return ToolCall(id="call_1", name="bash", arguments=json.dumps({"command": command}))


def run(output: str, call: ToolCall | None = None, index: int = 4) -> tuple[Action, dict[str, str]]:
    message = {"role": "tool", "tool_call_id": call.id if call else "call_1", "content": output}
    extraction = extract(message, MessageContext(index=index, ref=f"ev{index}", call=call))
    return extraction.actions[0], {f.key: f.value for f in extraction.facts if f.kind == VERIFICATION}


def swe_result(index: int) -> tuple[Action, dict[str, str]]:
    messages = next(t for t in load_traces("swe-dev") if t["id"] == SWE)["messages"]
    function = messages[index - 1]["tool_calls"][0]["function"]
    call = ToolCall(id=messages[index]["tool_call_id"], name=function["name"], arguments=function["arguments"])
    return run(messages[index]["content"], call, index)


def test_gist_of_a_listing() -> None:
    output = "<returncode>0</returncode>\n<output>\n./astropy/modeling/separable.py\n./astropy/modeling/tests/test_separable.py\n</output>"
    assert tool_output_gist(output, 160) == ("ok", "./astropy/modeling/separable.py (2 lines)")


def test_gist_skips_blank_and_brace_lines_and_cuts_long_lines() -> None:
    output = "\n\n{\n  " + "x" * 500 + "\n}\n"
    outcome, gist = tool_output_gist(output, 40)
    assert outcome == "ok"
    assert gist == "xxxxxxxxxxxxxxxxxxxxxx … xxxxxxxxxxxxxxx (3 lines)"


def test_gist_of_empty_outputs() -> None:
    assert tool_output_gist("", 100) == ("ok", "(no output)")
    assert tool_output_gist("<returncode>1</returncode>\n<output>\n</output>", 100) == ("error", "exit 1: (no output)")


def test_gist_notes_size_of_large_outputs() -> None:
    assert tool_output_gist("line\n" * 400, 100) == ("ok", "line (400 lines, 2.0k chars)")


@requires_traces
def test_swe_failing_command_is_an_error_with_its_exception_line() -> None:
    action, verification = swe_result(9)
    assert action.outcome == "error"
    assert action.gist == "exit 1: ModuleNotFoundError: No module named 'erfa' (22 lines, 1.2k chars)"
    assert (action.turn, action.tool, action.call_id, action.evidence_ref) == (
        9,
        "bash",
        "call_00_g2NPdXJUEqvSM5SVXWD40p1d",
        "ev9",
    )
    assert action.arguments.startswith('{"command": "cd /testbed && python3 -c')
    assert verification == {}  # a python -c snippet is not a test run


@requires_traces
def test_swe_pip_failure_shows_its_error_line() -> None:
    action, _ = swe_result(11)
    assert (
        action.gist
        == "exit 1: ERROR: Could not find a version that satisfies the requirement erfa (from versions: none) (2 lines)"
    )


@requires_traces
def test_swe_timeout_has_its_return_code_after_the_exception() -> None:
    action, _ = swe_result(13)
    assert action.outcome == "error"
    assert action.gist.startswith("exit -1: An error occurred while executing the command")
    assert action.gist.endswith("timed out after 60 seconds (1 line)")


@requires_traces
def test_swe_pytest_missing_behind_a_pipe_is_a_failed_verification() -> None:
    action, verification = swe_result(17)
    assert (action.outcome, action.gist) == ("error", "/opt/miniconda3/bin/python3: No module named pytest (1 line)")
    assert verification == {"python3 -m pytest astropy/modeling/tests/test_separable.py -v": "failed"}


@requires_traces
def test_swe_successful_listing_is_ok() -> None:
    action, _ = swe_result(3)
    assert (action.outcome, action.gist) == ("ok", "./astropy/modeling/separable.py (2 lines)")


@requires_traces
def test_tau_error_string_and_json_success() -> None:
    messages = next(t for t in load_traces("tau-dev") if t["id"] == "tau-airline/task0/trial0")["messages"]
    failed = extract(messages[21], MessageContext(index=21)).actions[0]
    assert failed.tool == "book_reservation"  # from the message's name when no call is known
    assert (failed.outcome, failed.gist) == (
        "error",
        "Error: payment amount does not add up, total price is 305, but paid 255 (1 line)",
    )
    booked = extract(messages[29], MessageContext(index=29)).actions[0]
    assert booked.outcome == "ok" and booked.gist.startswith("reservation_id=HATHAT user_id=mia_li_3668")


def test_json_error_fields() -> None:
    assert tool_output_gist('{"error": "not found", "id": 3}', 100) == ("error", "error: not found (1 line)")
    assert tool_output_gist('{"success": false, "message": "quota exceeded"}', 100) == (
        "error",
        "quota exceeded (1 line)",
    )
    assert tool_output_gist('{"status": "error"}', 100) == ("error", "status: error (1 line)")
    assert tool_output_gist('{"status": "ok", "errors": []}', 100)[0] == "ok"


def test_error_lines_without_an_exit_code() -> None:
    assert tool_output_gist("bash: foo: command not found", 100) == ("error", "bash: foo: command not found (1 line)")
    assert tool_output_gist("cat: x.txt: No such file or directory", 100)[0] == "error"
    assert tool_output_gist("Exit status: 2\nsomething broke", 100) == ("error", "exit 2: something broke (2 lines)")
    assert tool_output_gist("all good\nexit code 0", 100) == ("ok", "all good (2 lines)")


def test_traceback_exception_line_is_the_gist() -> None:
    output = "Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\nKeyError: 'a'\n"
    assert tool_output_gist(output, 100) == ("error", "KeyError: 'a' (3 lines)")


def test_zero_exit_code_is_ok_even_when_text_mentions_errors() -> None:
    output = "<returncode>0</returncode>\n<output>\n12: raise ValueError('bad')\nERROR handling is fine\n</output>"
    assert tool_output_gist(output, 100)[0] == "ok"


def test_unknown_tool_without_call() -> None:
    action = extract({"role": "tool", "content": "done"}, MessageContext(index=3)).actions[0]
    assert (action.tool, action.arguments, action.call_id, action.outcome) == ("unknown", "", "", "ok")
    legacy = extract({"role": "function", "name": "lookup", "content": "x"}, MessageContext(index=3)).actions[0]
    assert legacy.tool == "lookup"


def test_gist_is_bounded_and_one_line() -> None:
    outcome, gist = tool_output_gist("Error: " + "word " * 1000 + "\n" * 3, MAX_GIST_CHARS)
    assert outcome == "error" and "\n" not in gist and len(gist) <= MAX_GIST_CHARS + 30


def test_runner_command_keys() -> None:
    assert (
        runner_command("cd /testbed && python -m pytest tests/x.py -xvs 2>&1 | tail -100")
        == "python -m pytest tests/x.py -xvs"
    )
    assert (
        runner_command("cat > test_fix.py << 'EOF'\nimport pytest\nEOF\npython test_fix.py 2>&1")
        == "python test_fix.py"
    )
    assert runner_command("cat > test_fix.py << 'EOF'\nimport pytest\nEOF") is None  # written, not run
    assert runner_command("grep -rn pytest . && cat tox.ini") is None
    assert (
        runner_command('cd /testbed && python -c "\nimport unittest\nunittest.main()\n"')
        == 'python -c " import unittest'
    )
    assert (
        runner_command("./tests/runtests.py forms_tests --verbosity 2")
        == "./tests/runtests.py forms_tests --verbosity 2"
    )
    assert runner_command("npm test -- --watch=false") == "npm test -- --watch=false"
    assert runner_command("go test ./... && cargo test") == "go test ./..."
    assert runner_command("python reproduce_issue.py") == "python reproduce_issue.py"
    assert runner_command("ls -la") is None


def test_verdicts_from_runner_summaries() -> None:
    assert runner_verdict("===== 3 passed, 1 warning in 0.52s =====", "ok") == "passed"
    assert runner_verdict("===== 1 failed, 3 passed in 0.52s =====", "ok") == "failed"
    assert runner_verdict("Ran 4 tests in 0.010s\n\nOK", "ok") == "passed"
    assert runner_verdict("Ran 1 test in 0.000s\n\nFAILED (errors=1)", "ok") == "failed"
    assert runner_verdict("Ran 0 tests in 0.000s\n\nOK", "ok") == "failed"
    assert runner_verdict("Some tests failed!", "ok") == "failed"
    assert runner_verdict("done", "error") == "failed"
    assert runner_verdict("done", "ok") == "passed"


def test_verification_fact_from_a_pytest_run() -> None:
    output = "<returncode>1</returncode>\n<output>\ntests/x.py F.\n===== 1 failed, 1 passed in 0.10s =====\n</output>"
    action, verification = run(output, bash("cd /repo && python -m pytest tests/x.py"))
    assert action.gist == "exit 1: 1 failed, 1 passed in 0.10s (2 lines)"
    assert verification == {"python -m pytest tests/x.py": "failed"}
    _, again = run(
        "<returncode>0</returncode>\n<output>\n== 2 passed in 0.1s ==\n</output>",
        bash("cd /r && python -m pytest tests/x.py"),
    )
    assert again == {"python -m pytest tests/x.py": "passed"}  # same key: the later state supersedes


def test_verdicts_say_passed_only_when_the_output_shows_success() -> None:
    assert runner_verdict("Ran 12 tests in 0.2s\n\nOK", "ok") == "passed"
    logged = "ERROR:django.request:boom\nTraceback (most recent call last):\nKeyError: 'x'\n" \
             "----------------------------------------------------------------------\nRan 3 tests in 0.1s\n\nOK"
    assert runner_verdict(logged, "ok") == "failed"  # "\nERROR:" is unittest's failure mark, as before
    # a runner's own pass summary outweighs a traceback the tests printed on purpose
    assert runner_verdict("Traceback (most recent call last):\nKeyError: 'x'\nRan 3 tests in 0.1s\n\nOK",
                          "ok") == "passed"
    script = ("Test 1 passed\nTraceback (most recent call last):\n  File \"/testbed/reproduce_tz.py\", line 14\n"
              "ValueError: ERR_TZ_0042 timezone offset out of range\n")  # `| head -40` hid the exit status
    assert runner_verdict(script, "ok") == "failed"  # "Test 1 passed" is no runner summary
    assert runner_verdict("check 3: AssertionError caught\nall done", "ok") == "failed"
    assert runner_verdict("=== 3 passed, 1 warning in 0.52s ===", "ok") == "passed"
    assert runner_verdict("Tests:       4 passed, 4 total", "ok") == "passed"
    assert runner_verdict("ERROR: could not connect", "ok") == "failed"
    assert runner_verdict("warning: ERROR level logging is on", "ok") == "unclear"
    assert runner_verdict("All tests passed!", "error") == "failed"  # exit status 1 is not hidden by a word
    assert runner_verdict("All tests passed!", "ok") == "passed"
