"""The last failure of each test run and check script, and what has passed since: FAILING and PASSING facts.

A failing run gives a FAILING fact keyed by its command (the VERIFICATION key), whose value is its error line as
printed: the first `FAILED tests/x.py::test_y - …` line of pytest's summary, unittest's `FAIL: test_y (app.T)`
with its exception line, else the exception line of the last traceback. A passing run gives PASSING facts: its
command, the tests and paths it names (`tests/x.py::test_y`, `tests/x.py`, `app.tests.T`) and the tests its
output lists as passed. The state folds both by key; `passed_since` reads them for one failure.

Linear in the output: lines are read once, each cut to a bounded length first.
"""

from __future__ import annotations

import itertools
import re
import shlex
from collections.abc import Iterator, Mapping

from ..records import FAILING, PASSING, Fact
from .actions import error_sign_line, failure_line

NO_ERROR_LINE = "(no error line printed)"  # a failure whose output is empty
MAX_PASSED_IDS = 32  # tests one output shows as passed that become PASSING facts
MAX_NAMED = 16  # tests and paths a passing command names that become PASSING facts
_LINE_CHARS = 1_000  # of a longer line only its start is read
_BLOCK_CHARS = 20_000  # after a unittest FAIL: header, where its exception line is looked for

# unittest / Django: "FAIL: test_y (app.tests.T)", 3.11+: "FAIL: test_y (app.tests.T.test_y)"; -v: "… ... ok".
_UNITTEST_HEADER = re.compile(r"^(?:FAIL|ERROR): (\w+) \(([\w.]+)\)")
_UNITTEST_OK = re.compile(r"^(\w+) \(([\w.]+)\)(?: \S.*?)? \.\.\. ok$")
_SELECTING = ("-k", "-m", "--deselect", "--lf", "--last-failed", "--ff", "--failed-first", "--sw", "--stepwise")
_PY_PATH = re.compile(r"[\w./-]+\.py$")
_TEST_PART = re.compile(r"[\w\[\]./:-]+$")
_TEST_DIR = re.compile(r"(?:[\w-]+/)+(?:[\w-]+/?)?$|tests?$")  # a directory of tests: `tests/utils/`, `test`
_DOTTED_TEST = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+$")
_LABEL = re.compile(r"[A-Za-z_]\w*$")


def check_facts(checked: tuple[str, str] | None, output: str) -> list[tuple[str, str, str]]:
    """(kind, key, value) facts of one test run or check script, given its verification (key, verdict)."""
    if checked is None:
        return []
    key, verdict = checked
    lines = [line[:_LINE_CHARS].rstrip() for line in output.split("\n")]
    passed = [(PASSING, test, "passed") for test in itertools.islice(_passed_tests(lines), MAX_PASSED_IDS)]
    if verdict == "passed":
        return [(PASSING, key, "passed"), *[(PASSING, name, "passed") for name in _named(key)], *passed]
    line = _test_failure(lines, output) or (
        error_sign_line(output) if verdict == "unclear" else failure_line(output)) or NO_ERROR_LINE
    return [(FAILING, key, line), *passed]


def _test_failure(lines: list[str], output: str) -> str | None:
    """The first failing test's line (and "(+N more)" when others failed too): pytest's summary line, else
    unittest's header with the exception line of its traceback."""
    failed = [line for line in lines if _pytest_failed(line)]
    if failed:
        more = f" (+{len(failed) - 1} more)" if len(failed) > 1 else ""
        if failed[0].endswith("..."):
            # pytest cut the message to the terminal's width: the error code it held is in the failure's `E` line
            exception = next((line[1:].strip() for line in lines if line.startswith("E   ") and line[1:].strip()), "")
            if exception:
                return f"{failed[0]} — {exception}{more}"
        return failed[0] + more
    headers = [index for index, line in enumerate(lines) if line.startswith(("FAIL: ", "ERROR: "))
               and _UNITTEST_HEADER.match(line)]
    if not headers:
        # pytest without its short summary: the first `E   ` line of the failure it reports
        return next((line[1:].strip() for line in lines if line.startswith("E   ") and line[1:].strip()), None)
    first = lines[headers[0]]
    start = output.find(first)
    block_end = output.find("\n=====", start + len(first)) if start >= 0 else -1
    block = output[start: block_end if block_end >= 0 else start + _BLOCK_CHARS] if start >= 0 else ""
    exception = failure_line(block) if "Traceback" in block else None
    more = f" (+{len(headers) - 1} more)" if len(headers) > 1 else ""
    return f"{first} — {exception}{more}" if exception else first + more


def _pytest_failed(line: str) -> str | None:
    """The test of a pytest summary line: "FAILED tests/x.py::test_y - AssertionError: …", "ERROR tests/x.py"."""
    if not line.startswith(("FAILED ", "ERROR ")):
        return None
    test, _, rest = line.partition(" ")[2].partition(" ")
    path = test.partition("::")[0]
    return test if path.endswith(".py") and (not rest or rest.startswith("- ")) else None


def _passed_tests(lines: list[str]) -> Iterator[str]:
    """Test ids the output shows as passed: pytest -v's `path::test PASSED`, unittest -v's `test (app.T) ... ok`."""
    for line in lines:
        if "PASSED" in line or "XPASS" in line:
            test, _, rest = line.partition(" ")
            if rest.startswith(("PASSED", "XPASS")) and test.partition("::")[0].endswith(".py") and "::" in test:
                yield test
        elif line.endswith("... ok"):
            match = _UNITTEST_OK.match(line)
            if match:
                yield unittest_id(match.group(1), match.group(2))


def unittest_id(method: str, where: str) -> str:
    """`app.tests.T.test_y` for unittest's `test_y (app.tests.T)` and 3.11's `test_y (app.tests.T.test_y)`."""
    return where if where.endswith("." + method) else f"{where}.{method}"


def _named(command: str) -> list[str]:
    """The tests and test paths a passing command names: pytest's `tests/x.py::test_y`, `tests/x.py`, `tests/`;
    unittest's and Django's labels (`app.tests.T`, and a bare `app` after runtests.py). None when it selects
    tests by expression (`-k`): a path it names did not pass whole then."""
    try:
        words = shlex.split(command[:_LINE_CHARS])
    except ValueError:
        words = command[:_LINE_CHARS].split()
    if len(words) > 2 and words[0].startswith("python") and words[1] == "-m":
        words = words[2:]  # `python -m pytest …`: python's -m names the runner, pytest's -m selects tests
    if any(word in _SELECTING or word.startswith(("-k=", "--deselect=")) for word in words):
        return []
    labels = any(runner in command for runner in ("runtests", "unittest", "manage.py"))
    names = [word.rstrip("/").removeprefix("./") for word in words[1:]
             if not word.startswith("-") and _is_test_name(word, labels)]
    return names[:MAX_NAMED]


def _is_test_name(word: str, labels: bool) -> bool:
    """`tests/x.py`, `tests/x.py::T::test_y`, `tests/utils/`, `app.tests.T` (and `app` when `labels`)."""
    path, separator, rest = word.partition("::")
    if _PY_PATH.match(path):
        return not separator or _TEST_PART.match(rest) is not None
    if separator:
        return False
    return bool(_TEST_DIR.match(word) or _DOTTED_TEST.match(word) or (labels and _LABEL.match(word)))


def test_of(line: str) -> str | None:
    """The test a FAILING line names when only one test failed: `tests/x.py::test_y`, `app.tests.T.test_y`."""
    if line.endswith(" more)"):
        return None
    pytest = _pytest_failed(line)
    if pytest:
        return pytest
    unittest = _UNITTEST_HEADER.match(line)
    return unittest_id(unittest.group(1), unittest.group(2)) if unittest else None


def passed_since(failure: Fact, facts: Mapping[tuple[str, str], Fact]) -> Fact | None:
    """The PASSING fact that shows `failure` has passed since: its own command passed again later, or the one test
    it names, or a test path or label that holds it (`tests/x.py` for `tests/x.py::test_y`). A few lookups."""
    candidates = [failure.key]
    test = test_of(failure.value)
    if test is not None and ("::" in test or test.endswith(".py")):  # pytest's: its file, then its directories
        parts = test.partition("::")[0].split("/")
        candidates += [test, *("/".join(parts[:end]) for end in range(len(parts), 0, -1))]
    elif test is not None:  # unittest's: its class, its module, its package
        parts = test.split(".")
        candidates += [test, *(".".join(parts[:end]) for end in range(len(parts) - 1, 0, -1))]
    found = [fact for name in candidates if (fact := facts.get((PASSING, name))) is not None
             and fact.turn > failure.turn]
    return max(found, key=lambda fact: fact.turn) if found else None


__all__ = ["NO_ERROR_LINE", "check_facts", "passed_since", "test_of", "unittest_id"]
