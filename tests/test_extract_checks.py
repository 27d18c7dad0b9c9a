"""Test runs and check scripts: the failing line exactly as printed, what a passing run shows passed, and in the
task state whether the same command (or the same test) has passed since."""

from __future__ import annotations

import json

from proxy.extract import extract
from proxy.policy import StateRules
from proxy.records import FAILING, PASSING, VERIFICATION, MessageContext, ToolCall
from proxy.state import TaskState, render_state

PYTEST_FAILING = """<returncode>1</returncode>
<output>
============================= test session starts ==============================
platform linux -- Python 3.11.5, pytest-7.4.0, pluggy-1.3.0 -- /opt/miniconda3/bin/python
cachedir: .pytest_cache
rootdir: /testbed
configfile: setup.cfg
collecting ... collected 14 items

tests/test_tz.py::test_utc PASSED                                         [  7%]
tests/test_tz.py::test_named_zone PASSED                                  [ 14%]
tests/test_tz.py::test_offset_bounds FAILED                               [ 21%]
tests/test_tz.py::test_dst_gap FAILED                                     [ 28%]

=================================== FAILURES ===================================
______________________________ test_offset_bounds ______________________________

    def test_offset_bounds():
>       assert parse_offset("+14:00") == timedelta(hours=14)

tests/test_tz.py:41:
_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _
src/tz/offsets.py:88: in parse_offset
    raise ValueError(f"ERR_TZ_0042 timezone offset out of range")
E   ValueError: ERR_TZ_0042 timezone offset out of range
=========================== short test summary info ============================
FAILED tests/test_tz.py::test_offset_bounds - ValueError: ERR_TZ_0042 timezone offset out of range
FAILED tests/test_tz.py::test_dst_gap - AssertionError: assert None == datetime(2024, 3, 10, 3, 0)
========================= 2 failed, 12 passed in 0.84s =========================
</output>"""

SCRIPT_TRACEBACK_AT_EXIT_0 = """<returncode>0</returncode>
<output>
Testing offsets...
  +05:30 -> 5:30:00 ok
  -08:00 -> -1 day, 16:00:00 ok
Test 1 passed
Traceback (most recent call last):
  File "/testbed/reproduce_tz.py", line 14, in <module>
    print(parse_offset("+14:00"))
          ^^^^^^^^^^^^^^^^^^^^^^
  File "/testbed/src/tz/offsets.py", line 88, in parse_offset
    raise ValueError(f"ERR_TZ_0042 timezone offset out of range")
ValueError: ERR_TZ_0042 timezone offset out of range
</output>"""  # `python reproduce_tz.py 2>&1 | head -40`: the pipe's exit status is head's


def bash(command: str) -> ToolCall:
    return ToolCall(id="call_1", name="bash", arguments=json.dumps({"command": command}))


def facts(command: str, output: str, index: int = 5) -> dict[tuple[str, str], str]:
    message = {"role": "tool", "tool_call_id": "call_1", "content": output}
    extraction = extract(message, MessageContext(index=index, ref=f"r{index}", call=bash(command)))
    return {(f.kind, f.key): f.value for f in extraction.facts if f.kind in (VERIFICATION, FAILING, PASSING)}


def test_a_traceback_at_exit_status_0_is_not_a_pass() -> None:
    found = facts("cd /testbed && python reproduce_tz.py 2>&1 | head -40", SCRIPT_TRACEBACK_AT_EXIT_0)
    assert found == {
        (VERIFICATION, "python reproduce_tz.py"): "failed",
        (FAILING, "python reproduce_tz.py"): "ValueError: ERR_TZ_0042 timezone offset out of range",
    }


def test_the_failing_tests_summary_line_is_kept_exactly() -> None:
    found = facts("cd /testbed && python -m pytest tests/test_tz.py -v 2>&1 | tail -60", PYTEST_FAILING)
    assert found[(VERIFICATION, "python -m pytest tests/test_tz.py -v")] == "failed"
    assert found[(FAILING, "python -m pytest tests/test_tz.py -v")] == (
        "FAILED tests/test_tz.py::test_offset_bounds - ValueError: ERR_TZ_0042 timezone offset out of range (+1 more)")
    # the tests this run shows passing are recorded too: a later failure of one of them is checked against it
    assert found[(PASSING, "tests/test_tz.py::test_utc")] == "passed"
    assert (PASSING, "tests/test_tz.py::test_offset_bounds") not in found


DJANGO_FAILING = """<returncode>1</returncode>
<output>
Testing against Django installed in '/testbed/django'
Creating test database for alias 'default'...
System check identified no issues (0 silenced).
..F.
======================================================================
FAIL: test_iso_offset (utils_tests.test_dateparse.DurationParseTests.test_iso_offset)
----------------------------------------------------------------------
Traceback (most recent call last):
  File "/testbed/tests/utils_tests/test_dateparse.py", line 131, in test_iso_offset
    self.assertEqual(parse_duration(source), expected)
AssertionError: datetime.timedelta(days=-1) != datetime.timedelta(seconds=-1)

----------------------------------------------------------------------
Ran 4 tests in 0.003s

FAILED (failures=1)
Destroying test database for alias 'default'...
</output>"""


def test_a_unittest_failure_shows_its_test_and_exception_line() -> None:
    output = DJANGO_FAILING
    found = facts("cd /testbed && python tests/runtests.py utils_tests.test_dateparse --verbosity 1", output)
    assert found[(FAILING, "python tests/runtests.py utils_tests.test_dateparse --verbosity 1")] == (
        "FAIL: test_iso_offset (utils_tests.test_dateparse.DurationParseTests.test_iso_offset) — "
        "AssertionError: datetime.timedelta(days=-1) != datetime.timedelta(seconds=-1)")


def test_an_error_a_script_prints_makes_a_pass_unclear() -> None:
    output = ("<returncode>0</returncode>\n<output>\n1. Q(a=1) & Exists(...):\n   Success\n"
              "2. Exists(...) & Q(a=1):\n   Error: TypeError: <Exists object at 0x7f>\n"
              "3. Q() & Exists(...):\n   Success\n</output>")
    found = facts("python test_q_exists.py", output)
    assert found == {(VERIFICATION, "python test_q_exists.py"): "unclear",
                     (FAILING, "python test_q_exists.py"): "Error: TypeError: <Exists object at 0x7f>"}


def test_a_passing_run_records_what_it_shows_passed() -> None:
    passing = "<returncode>0</returncode>\n<output>\n..\n============ 2 passed in 0.05s ============\n</output>"
    assert facts("cd /testbed && python -m pytest tests/test_tz.py::test_offset_bounds tests/utils/ -q", passing) == {
        (VERIFICATION, "python -m pytest tests/test_tz.py::test_offset_bounds tests/utils/ -q"): "passed",
        (PASSING, "python -m pytest tests/test_tz.py::test_offset_bounds tests/utils/ -q"): "passed",
        (PASSING, "tests/test_tz.py::test_offset_bounds"): "passed",
        (PASSING, "tests/utils"): "passed",
    }
    selected = facts("python -m pytest tests/test_tz.py -k utc -q", passing)
    assert [key for kind, key in selected if kind == PASSING] == ["python -m pytest tests/test_tz.py -k utc -q"]
    verbose = ("<returncode>0</returncode>\n<output>\ntest_iso_offset (utils_tests.test_dateparse.DurationParseTests"
               ".test_iso_offset) ... ok\ntest_days (utils_tests.test_dateparse.DurationParseTests) ... ok\n"
               "\n----------------------------------------------------------------------\nRan 2 tests in 0.001s\n\nOK\n"
               "</output>")
    shown = facts("python tests/runtests.py utils_tests -v 2", verbose)
    assert (PASSING, "utils_tests.test_dateparse.DurationParseTests.test_iso_offset") in shown
    assert (PASSING, "utils_tests.test_dateparse.DurationParseTests.test_days") in shown
    assert (PASSING, "utils_tests") in shown  # a Django label the passing command named


def fold(*runs: tuple[str, str]) -> TaskState:
    state = TaskState()
    for index, (command, output) in enumerate(runs):
        message = {"role": "tool", "tool_call_id": "call_1", "content": output}
        state.apply(extract(message, MessageContext(index=2 * index + 3, ref=f"r{2 * index + 3}", call=bash(command))))
    return state


def verification_lines(state: TaskState) -> list[str]:
    lines = render_state(state, "fix the offset bound", StateRules()).splitlines()
    start = lines.index("Verification:") + 1
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("- ")), len(lines))
    return lines[start:end]


PASSING_SCRIPT = "<returncode>0</returncode>\n<output>\n+14:00 -> 14:00:00\nAll offsets parsed\n</output>"


def test_the_same_command_passing_later_is_shown_on_the_failures_line() -> None:
    state = fold(("python reproduce_tz.py 2>&1 | head -40", SCRIPT_TRACEBACK_AT_EXIT_0),
                 ("sed -i 's/> 14/>= 14/' src/tz/offsets.py", "<returncode>0</returncode>\n<output>\n</output>"),
                 ("cd /testbed && python reproduce_tz.py", PASSING_SCRIPT))
    assert verification_lines(state) == [
        "- python reproduce_tz.py: ValueError: ERR_TZ_0042 timezone offset out of range [ref:r3] — "
        "passed since [ref:r7]"]
    again = fold(("python reproduce_tz.py", SCRIPT_TRACEBACK_AT_EXIT_0), ("python reproduce_tz.py", PASSING_SCRIPT),
                 ("python reproduce_tz.py", SCRIPT_TRACEBACK_AT_EXIT_0))
    assert verification_lines(again) == [  # failing again after the pass: where it stands now
        "- python reproduce_tz.py: failed: ValueError: ERR_TZ_0042 timezone offset out of range [ref:r7]"]


def test_the_same_test_passing_under_another_command_is_shown_too() -> None:
    single = PYTEST_FAILING.replace("FAILED tests/test_tz.py::test_dst_gap - AssertionError: assert None == "
                                    "datetime(2024, 3, 10, 3, 0)\n", "")
    passing = "<returncode>0</returncode>\n<output>\n..\n============ 1 passed in 0.05s ============\n</output>"
    state = fold(("python -m pytest tests/test_tz.py -v", single),
                 ("python -m pytest tests/test_tz.py::test_offset_bounds -q", passing))
    assert verification_lines(state) == [
        "- python -m pytest tests/test_tz.py -v: failed: FAILED tests/test_tz.py::test_offset_bounds - "
        "ValueError: ERR_TZ_0042 timezone offset out of range [ref:r3] — passed since [ref:r5]",
        "- python -m pytest tests/test_tz.py::test_offset_bounds -q: passed [ref:r5]",
    ]
    selected = fold(("python -m pytest tests/test_tz.py -v", single),
                    ("python -m pytest tests/test_tz.py -k utc -q", passing))
    assert "passed since" not in verification_lines(selected)[0]  # -k ran other tests of the file, not this one
    two_failed = fold(("python -m pytest tests/test_tz.py -v", PYTEST_FAILING),
                      ("python -m pytest tests/test_tz.py::test_offset_bounds -q", passing))
    assert "passed since" not in verification_lines(two_failed)[0]  # test_dst_gap has not passed since


def test_only_the_newest_failures_show_their_error_line() -> None:
    runs = [(f"python verify_{n}.py", f"<returncode>1</returncode>\n<output>\nRuntimeError: case {n}\n</output>")
            for n in range(12)]
    lines = verification_lines(fold(*runs))
    assert len(lines) == 12 and lines[0] == "- python verify_0.py: failed [ref:r3]"
    assert lines[-1] == "- python verify_11.py: failed: RuntimeError: case 11 [ref:r25]"
    assert sum("RuntimeError" in line for line in lines) == StateRules().max_failing_checks


def test_a_django_test_passing_under_its_class_label_is_shown_too() -> None:
    passing = ("<returncode>0</returncode>\n<output>\n....\n-----------------------------------------------------"
               "-----------------\nRan 4 tests in 0.002s\n\nOK\n</output>")
    state = fold(("python tests/runtests.py utils_tests.test_dateparse", DJANGO_FAILING),
                 ("python tests/runtests.py utils_tests.test_dateparse.DurationParseTests", passing))
    assert verification_lines(state)[0].endswith("AssertionError: datetime.timedelta(days=-1) != "
                                                 "datetime.timedelta(seconds=-1) [ref:r3] — passed since [ref:r5]")
    other = fold(("python tests/runtests.py utils_tests.test_dateparse", DJANGO_FAILING),
                 ("python tests/runtests.py utils_tests.test_timesince", passing))
    assert "passed since" not in verification_lines(other)[0]


def test_a_summary_line_pytest_cut_short_gets_the_failures_whole_exception_line() -> None:
    from proxy.extract.checks import check_facts
    from proxy.records import FAILING

    output = ("=================================== FAILURES ===================================\n"
              "___________________ test_nl_rounds_per_invoice_half_even ___________________\n"
              ">           raise ValueError(f\"ERR_TAX_{_code(rule)} unsupported rounding mode {rule.mode!r}\")\n"
              "E   ValueError: ERR_TAX_0042 unsupported rounding mode 'half_even' for region 'NL'\n"
              "=========================== short test summary info ============================\n"
              "FAILED tests/test_tax.py::test_nl_rounds_per_invoice_half_even - ValueError: unsupported rounding mode 'half...\n"
              "FAILED tests/test_tax.py::test_be_half_even_tie - ValueError: unsupported rounding mode 'half_even' for re...\n"
              "========================= 2 failed, 14 passed in 0.91s =========================\n")
    [(kind, key, line)] = [fact for fact in check_facts(("pytest -v", "failed"), output) if fact[0] == FAILING]
    assert line == ("FAILED tests/test_tax.py::test_nl_rounds_per_invoice_half_even - ValueError: unsupported rounding "
                    "mode 'half... — ValueError: ERR_TAX_0042 unsupported rounding mode 'half_even' for region 'NL' "
                    "(+1 more)")
