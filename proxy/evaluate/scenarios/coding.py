"""Scenario 2: a text-based coding agent (mini-swe-agent's default mode) fixing a timezone bug in a Python repo.

No tools list: the assistant writes a THOUGHT and exactly one bash block; the environment answers in the user role
with `<returncode>…</returncode><output>…</output>`. Mid-run the user says prod is frozen on Python 3.8 (the
agent decides to stay on pytz), asks to keep next_run's signature, and names the keys of the final JSON report;
the agent learns the hard way that pytz ignores `fold`.
"""

from __future__ import annotations

import difflib
import random
from datetime import datetime

from .builder import RunBuilder, Scenario
from .noise import hex_id, moments

SEED = 3808
TRACE_ID = "scenario-coding-pytz-textbased"

SYSTEM = """You are a helpful assistant that can interact multiple times with a computer shell to solve programming tasks.
Your response must contain exactly ONE bash code block with ONE command (or commands connected with && or ||).

Include a THOUGHT section before your command where you explain your reasoning process.
Format your response as shown in <format_example>.

<format_example>
THOUGHT: Your reasoning and analysis here

```bash
your_command_here
```
</format_example>

Failure to follow these rules will cause your response to be rejected."""

TASK = """<pr_description>
Consider the following PR description:
Scheduled jobs in Europe/Berlin fire at the wrong local time

Since 1.14.0, `next_run()` returns times that are off for zones like Europe/Berlin: a job scheduled for
`30 2 * * *` fires at 02:37 local time in winter and 03:37 in summer. Around the October DST change the
02:30 job also fires twice in the same night. UTC schedules are fine.

Expected: a daily 02:30 job runs at 02:30 local time, once per day, including on DST change days (on the
spring-forward day, when 02:30 does not exist, it should run at 03:00).
</pr_description>

<instructions>
# Task Instructions

## Overview
You're a software engineer interacting continuously with a computer by submitting commands.
You'll be helping implement necessary changes to meet requirements in the PR description.
Your task is specifically to make changes to non-test files in the current directory in order to fix the issue
described in the PR description in a way that is general and consistent with the codebase.

IMPORTANT: This is an interactive process where you will think and issue ONE command, see its result, then think
and issue your next command.

## Recommended Workflow
1. Analyze the codebase by finding and reading relevant files
2. Create a script to reproduce the issue
3. Edit the source code to resolve the issue
4. Verify your fix works by running your script again
5. Test edge cases to ensure your fix is robust

## Submission
When you've completed your work, issue exactly: `echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A &&
git diff --cached`. You cannot continue working on this task after submitting.
</instructions>"""

SCHEDULE_PY = '''"""Compute run times of cron-style schedules in a given time zone."""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Iterator, Optional

import pytz

from .cron import CronExpr, parse
from .errors import ScheduleError

__all__ = ["Schedule", "next_run", "previous_run", "upcoming"]

# A minute-by-minute scan finds any cron time within a year.
_MAX_STEPS = 366 * 24 * 60
_MINUTE = dt.timedelta(minutes=1)


def _to_aware(naive: dt.datetime, tz: dt.tzinfo) -> dt.datetime:
    """Attach the schedule's time zone to a wall-clock time."""
    return naive.replace(tzinfo=tz)


def _wall(moment: dt.datetime, tz: dt.tzinfo) -> dt.datetime:
    """The wall-clock time of an aware moment in `tz`, naive, to the minute."""
    return moment.astimezone(tz).replace(tzinfo=None, second=0, microsecond=0)


@dataclass(frozen=True)
class Schedule:
    expr: CronExpr
    tz: dt.tzinfo

    @classmethod
    def from_string(cls, text: str, tz: str = "UTC") -> "Schedule":
        return cls(parse(text), pytz.timezone(tz))

    def matches(self, wall: dt.datetime) -> bool:
        e = self.expr
        return (
            wall.minute in e.minutes
            and wall.hour in e.hours
            and wall.day in e.days
            and wall.month in e.months
            and wall.isoweekday() % 7 in e.weekdays
        )


def next_run(schedule: Schedule, after: dt.datetime, inclusive: bool = False) -> dt.datetime:
    """The first run time after `after` (or at it, if `inclusive`), as an aware datetime."""
    if after.tzinfo is None:
        raise ScheduleError("after must be timezone-aware")
    wall = _wall(after, schedule.tz)
    if not inclusive or wall != after.astimezone(schedule.tz).replace(tzinfo=None):
        wall += _MINUTE
    for _ in range(_MAX_STEPS):
        if schedule.matches(wall):
            return _to_aware(wall, schedule.tz)
        wall += _MINUTE
    raise ScheduleError(f"no run time within a year after {after.isoformat()}")


def previous_run(schedule: Schedule, before: dt.datetime) -> dt.datetime:
    """The last run time strictly before `before`, as an aware datetime."""
    if before.tzinfo is None:
        raise ScheduleError("before must be timezone-aware")
    wall = _wall(before, schedule.tz) - _MINUTE
    for _ in range(_MAX_STEPS):
        if schedule.matches(wall):
            return wall.replace(tzinfo=schedule.tz)
        wall -= _MINUTE
    raise ScheduleError(f"no run time within a year before {before.isoformat()}")


def upcoming(schedule: Schedule, start: dt.datetime, count: Optional[int] = None) -> Iterator[dt.datetime]:
    """Run times after `start`, in order; endless unless `count` is given."""
    moment = start
    produced = 0
    while count is None or produced < count:
        moment = next_run(schedule, moment)
        yield moment
        produced += 1
'''


def tail(text: str, lines: int) -> str:
    """What `| tail -N` leaves of a command's output."""
    return "".join(text.splitlines(keepends=True)[-lines:])


def numbered(source: str, start: int = 1) -> str:
    return "".join(f"{n:6d}\t{line}\n" for n, line in enumerate(source.splitlines(), start))


def pytest_header(rng: random.Random, collected: int) -> str:
    return ("============================= test session starts ==============================\n"
            "platform linux -- Python 3.11.9, pytest-8.2.2, pluggy-1.5.0\n"
            f"rootdir: /repo\nconfigfile: setup.cfg\nplugins: cov-5.0.0, xdist-3.6.1, randomly-3.15.0\n"
            f"Using --randomly-seed={rng.randint(10**8, 10**9)}\ncollected {collected} items\n\n")


def dots(rng: random.Random, files: list[tuple[str, int]], failing: dict[str, int]) -> str:
    lines = []
    total = sum(n for _, n in files)
    done = 0
    for name, n in files:
        marks = ["." for _ in range(n)]
        for position in range(failing.get(name, 0)):
            marks[rng.randrange(n)] = "F"
        done += n
        lines.append(f"{name} {''.join(marks)}".ljust(70) + f" [{100 * done // total:3d}%]")
    return "\n".join(lines) + "\n"


SCHEDULE_TESTS = ["test_naive_after_is_rejected", "test_next_run_utc", "test_next_run_berlin_winter",
                  "test_next_run_berlin_summer", "test_inclusive_returns_after_itself",
                  "test_fall_back_first_occurrence", "test_spring_forward_shifts_to_0300",
                  "test_daily_job_keeps_local_hour_for_a_year[zone0-9]",
                  "test_daily_job_keeps_local_hour_for_a_year[zone1-7]",
                  "test_daily_job_keeps_local_hour_for_a_year[zone2-18]", "test_new_york_daily",
                  "test_previous_run_berlin"]
KNOWN_TESTS = {"tests/test_schedule.py": SCHEDULE_TESTS,
               "tests/test_cron.py": ["test_parse_dow_names[MON-FRI-expected0]", "test_parse_dow_names[SUN-expected1]",
                                      "test_parse_dow_names[sat,sun-expected2]"]}
SUN = "test_parse_dow_names[SUN-expected1]"
LMT_FAILURES = ["test_next_run_berlin_winter", "test_next_run_berlin_summer", "test_fall_back_first_occurrence",
                "test_spring_forward_shifts_to_0300", "test_new_york_daily", "test_previous_run_berlin"]


def verbose(rng: random.Random, files: list[tuple[str, int]], failing: dict[str, list[str]]) -> str:
    """pytest -v lines: the tests we know by name, then others named with the words such tests use."""
    words = ["parse", "range", "step", "alias", "names", "list", "wildcard", "month", "weekday", "hour", "minute",
             "utc", "berlin", "new_york", "sydney", "inclusive", "naive", "error", "json", "digest", "count",
             "order", "dst", "gap", "leap_day", "end_of_month", "cli_next", "cli_upcoming"]
    total = sum(n for _, n in files)
    lines, done = [], 0
    for name, n in files:
        tests = list(KNOWN_TESTS.get(name, []))
        while len(tests) < n:
            test = f"test_{rng.choice(words)}_{rng.choice(words)}"
            if rng.random() < 0.3:
                test += f"[{rng.choice(words)}-{rng.randint(0, 9)}]"
            tests.append(test)
        for test in tests:
            done += 1
            state = "FAILED" if test in failing.get(name, []) else "PASSED"
            lines.append(f"{name}::{test} {state}".ljust(72) + f" [{100 * done // total:3d}%]")
    return "\n".join(lines) + "\n"


def previous_failure() -> str:
    return traceback_block("test_previous_run_berlin", [
        "    def test_previous_run_berlin():",
        '        s = Schedule.from_string("30 2 * * *", tz="Europe/Berlin")',
        "        run = previous_run(s, BERLIN.localize(datetime(2026, 1, 15, 12, 0)))",
        '>       assert run.isoformat() == "2026-01-15T02:30:00+01:00"',
        "E       AssertionError: assert '2026-01-15T02:30:00+00:53' == '2026-01-15T02:30:00+01:00'"], "",
        "tests/test_schedule.py:92: AssertionError")


PREVIOUS_SUMMARY = ("FAILED tests/test_schedule.py::test_previous_run_berlin - AssertionError: assert "
                    "'2026-01-15T02:30:0...")


TEST_FILES = [("tests/test_cron.py", 48), ("tests/test_schedule.py", 37), ("tests/test_upcoming.py", 22),
              ("tests/test_report.py", 19), ("tests/test_cli.py", 26), ("tests/test_errors.py", 9)]


def traceback_block(test: str, lines: list[str], error: str, where: str) -> str:
    bar = "_" * ((78 - len(test) - 2) // 2)
    return f"{bar} {test} {bar}\n\n" + "\n".join(lines) + f"\nE   {error}\n\n{where}\n"


def lmt_failure(test: str, expected: str, got: str, line: int) -> str:
    return traceback_block(test, [
        f"    def {test.split('::')[-1]}():",
        '        s = Schedule.from_string("30 2 * * *", tz="Europe/Berlin")',
        "        after = BERLIN.localize(datetime(2026, 1, 14, 12, 0))",
        "        run = next_run(s, after)",
        f"        assert run.isoformat() == \"{expected}\"",
        f"E       AssertionError: assert '{got}' == '{expected}'",
        "E         ",
        f"E         - {expected}",
        f"E         ?                     ^^^^^",
        f"E         + {got}",
        f"E         ?                     ^^^^^"], "", f"tests/test_schedule.py:{line}: AssertionError")


def warnings_summary(rng: random.Random) -> str:
    return ("=============================== warnings summary ===============================\n"
            "tests/test_report.py::test_weekly_digest\n"
            "  /repo/tidewater/report.py:41: DeprecationWarning: datetime.datetime.utcnow() is deprecated and "
            "scheduled for removal in a future version. Use timezone-aware objects to represent datetimes in UTC: "
            "datetime.datetime.now(datetime.UTC).\n    generated = datetime.utcnow()\n\n"
            "tests/test_cli.py: 6 warnings\n"
            "  /repo/.venv/lib/python3.11/site-packages/click/core.py:1223: DeprecationWarning: The "
            "'autocompletion' parameter is deprecated. Use 'shell_complete' instead.\n\n"
            "-- Docs: https://docs.pytest.org/en/stable/how-to/capture-warnings.html\n")


def repo_listing(rng: random.Random) -> str:
    entries = [("drwxr-xr-x", 4096, ".git"), ("drwxr-xr-x", 4096, ".github"), ("-rw-r--r--", 1893, ".gitignore"),
               ("-rw-r--r--", 612, ".pre-commit-config.yaml"), ("drwxr-xr-x", 4096, ".venv"),
               ("-rw-r--r--", 14022, "CHANGELOG.md"), ("-rw-r--r--", 1067, "LICENSE"), ("-rw-r--r--", 5210, "README.md"),
               ("drwxr-xr-x", 4096, "docs"), ("-rw-r--r--", 1844, "setup.cfg"), ("-rw-r--r--", 92, "setup.py"),
               ("drwxr-xr-x", 4096, "tests"), ("drwxr-xr-x", 4096, "tidewater"), ("-rw-r--r--", 488, "tox.ini")]
    lines = [f"total {rng.randint(60, 90)}"]
    for mode, size, name in entries:
        lines.append(f"{mode} {rng.randint(1, 8):2d} root root {size:6d} Jun {rng.randint(1, 28):2d} "
                     f"{rng.randint(8, 19):02d}:{rng.randint(0, 59):02d} {name}")
    history = ["9b1e4d0 Merge pull request #431 from ops/cli-json-output", "77c02aa cli: --json output for upcoming",
               "e41f9b2 docs: document DST behaviour of upcoming()", "5d0c3f1 bump version to 1.14.2",
               "c2a81e7 report: weekly digest groups by zone", "0f3d9aa tests: speed up upcoming tests",
               "41b7c90 bump version to 1.14.1", "d8e2f65 cron: accept @weekly and @monthly aliases"]
    return "\n".join(lines) + "\n" + "\n".join(history) + "\n"


def setup_and_pip(rng: random.Random) -> str:
    setup = """[metadata]
name = tidewater
version = 1.14.2
description = Cron-style schedules with time zones
long_description = file: README.md
license = MIT
classifiers =
    Programming Language :: Python :: 3.8
    Programming Language :: Python :: 3.11

[options]
packages = find:
python_requires = >=3.8
install_requires =
    pytz>=2021.1
    click>=8.0

[options.extras_require]
dev =
    pytest>=7
    pytest-cov
    pytest-randomly
    mypy
    flake8

[options.entry_points]
console_scripts =
    tidewater = tidewater.cli:main

[tool:pytest]
testpaths = tests
addopts = -ra

[flake8]
max-line-length = 110
exclude = .venv,build,docs
"""
    packages = [("attrs", "23.2.0"), ("click", "8.1.7"), ("coverage", "7.5.3"), ("exceptiongroup", "1.2.1"),
                ("execnet", "2.1.1"), ("flake8", "7.0.0"), ("iniconfig", "2.0.0"), ("mccabe", "0.7.0"),
                ("mypy", "1.10.0"), ("mypy-extensions", "1.0.0"), ("packaging", "24.1"), ("pip", "24.0"),
                ("pluggy", "1.5.0"), ("pycodestyle", "2.11.1"), ("pyflakes", "3.2.0"), ("pytest", "8.2.2"),
                ("pytest-cov", "5.0.0"), ("pytest-randomly", "3.15.0"), ("pytest-xdist", "3.6.1"),
                ("pytz", "2024.1"), ("setuptools", "70.0.0"), ("tidewater", "1.14.2 /repo"), ("tomli", "2.0.1"),
                ("typing_extensions", "4.12.2"), ("wheel", "0.43.0")]
    table = "Package            Version\n------------------ ---------\n" + "\n".join(
        f"{name:<18} {version}" for name, version in packages)
    return setup + table + "\n"


def grep_tz(rng: random.Random) -> str:
    hits = [
        "./tidewater/schedule.py:20:def _to_aware(naive: dt.datetime, tz: dt.tzinfo) -> dt.datetime:",
        "./tidewater/schedule.py:22:    return naive.replace(tzinfo=tz)",
        "./tidewater/schedule.py:25:def _wall(moment: dt.datetime, tz: dt.tzinfo) -> dt.datetime:",
        "./tidewater/schedule.py:27:    return moment.astimezone(tz).replace(tzinfo=None, second=0, microsecond=0)",
        "./tidewater/schedule.py:55:    if after.tzinfo is None:",
        "./tidewater/schedule.py:58:    if not inclusive or wall != after.astimezone(schedule.tz).replace(tzinfo=None):",
        "./tidewater/schedule.py:70:    if before.tzinfo is None:",
        "./tidewater/schedule.py:75:            return wall.replace(tzinfo=schedule.tz)",
        "./tidewater/report.py:12:from pytz import utc",
        "./tidewater/report.py:41:    generated = datetime.utcnow().replace(tzinfo=utc)",
        "./tidewater/report.py:58:        local = run.astimezone(zone)",
        "./tidewater/report.py:77:    return moment.astimezone(utc).strftime(\"%Y-%m-%dT%H:%MZ\")",
        "./tidewater/cli.py:48:    start = utc.localize(datetime.utcnow()) if start is None else start",
        "./tidewater/cli.py:63:        click.echo(run.astimezone(zone).isoformat())",
        "./tests/conftest.py:9:BERLIN = pytz.timezone(\"Europe/Berlin\")",
        "./tests/conftest.py:10:NEW_YORK = pytz.timezone(\"America/New_York\")",
        "./tests/conftest.py:11:SYDNEY = pytz.timezone(\"Australia/Sydney\")",
    ]
    for n in range(24):
        zone = rng.choice(["BERLIN", "NEW_YORK", "SYDNEY", "utc"])
        hits.append(f"./tests/test_{rng.choice(['schedule', 'upcoming', 'report', 'cli'])}.py:{rng.randint(12, 240)}:"
                    f"    after = {zone}.localize(datetime(2026, {rng.randint(1, 12)}, {rng.randint(1, 28)}, "
                    f"{rng.randint(0, 23)}, {rng.choice([0, 15, 30, 45])}))")
    return "\n".join(hits) + "\n"


REPRO = """python - <<'EOF'
from datetime import datetime
import pytz
from tidewater.schedule import Schedule, next_run
s = Schedule.from_string("30 2 * * *", tz="Europe/Berlin")
berlin = pytz.timezone("Europe/Berlin")
for label, day in [("winter", (2026, 1, 14)), ("summer", (2026, 7, 14)), ("fall-back", (2026, 10, 24)),
                   ("spring-fwd", (2026, 3, 28)), ("jan-1", (2026, 1, 1)), ("jun-21", (2026, 6, 21)),
                   ("dec-31", (2026, 12, 31)), ("leap", (2028, 2, 28))]:
    after = berlin.localize(datetime(*day, 12, 0))
    run = next_run(s, after)
    print(f"{label:10} {run.isoformat():28} utc={run.astimezone(pytz.utc):%H:%M} "
          f"local={run.astimezone(berlin):%H:%M %Z} tz={run.tzinfo!r}")
EOF"""


def repro_output() -> str:
    rows = [("winter", "2026-01-15", "01:37", "02:37 CET"), ("summer", "2026-07-15", "01:37", "03:37 CEST"),
            ("fall-back", "2026-10-25", "01:37", "02:37 CET"), ("spring-fwd", "2026-03-29", "01:37", "03:37 CEST"),
            ("jan-1", "2026-01-02", "01:37", "02:37 CET"), ("jun-21", "2026-06-22", "01:37", "03:37 CEST"),
            ("dec-31", "2027-01-01", "01:37", "02:37 CET"), ("leap", "2028-02-29", "01:37", "02:37 CET")]
    return "".join(f"{label:10} {day}T02:30:00+00:53".ljust(40) + f" utc={utc} local={local} "
                   "tz=<DstTzInfo 'Europe/Berlin' LMT+0:53:00 STD>\n" for label, day, utc, local in rows)


def repro_fixed_output() -> str:
    rows = [("winter", "2026-01-15T02:30:00+01:00", "01:30", "02:30 CET"),
            ("summer", "2026-07-15T02:30:00+02:00", "00:30", "02:30 CEST"),
            ("fall-back", "2026-10-25T02:30:00+02:00", "00:30", "02:30 CEST"),
            ("spring-fwd", "2026-03-29T03:00:00+02:00", "01:00", "03:00 CEST"),
            ("jan-1", "2026-01-02T02:30:00+01:00", "01:30", "02:30 CET"),
            ("jun-21", "2026-06-22T02:30:00+02:00", "00:30", "02:30 CEST"),
            ("dec-31", "2027-01-01T02:30:00+01:00", "01:30", "02:30 CET"),
            ("leap", "2028-02-29T02:30:00+01:00", "01:30", "02:30 CET")]
    return "".join(f"{label:10} {stamp:28} utc={utc} local={local} tz=<DstTzInfo 'Europe/Berlin' "
                   f"{'CEST+2:00:00 DST' if 'CEST' in local else 'CET+1:00:00 STD'}>\n"
                   for label, stamp, utc, local in rows)


def git_log(rng: random.Random) -> str:
    entries = [("5d0c3f1", "bump version to 1.14.2"), ("e41f9b2", "docs: document DST behaviour of upcoming()"),
               ("41b7c90", "bump version to 1.14.1"), ("b3c19e0", "schedule: previous_run() (#420)"),
               ("a3f9c2e", "refactor: simplify tz handling in schedule (#412)"), ("8c4d2b1", "bump version to 1.14.0"),
               ("f02a6d3", "schedule: inclusive flag for next_run (#405)"), ("6e9b0c4", "tests: Sydney DST cases"),
               ("19aa7f2", "schedule: raise ScheduleError for naive datetimes"), ("c7d1e55", "bump version to 1.13.0"),
               ("3b8f0e9", "schedule: minute scan instead of field arithmetic (#377)"),
               ("0d4c6a1", "typing: annotate schedule module"), ("a91b3f7", "bump version to 1.12.0"),
               ("72e5d0b", "schedule: upcoming() generator"), ("e0c2b94", "initial schedule module")]
    authors = ["Sara Brandt", "Jonas Albrecht", "Ana Ruiz", "Tomasz Nowak"]
    out = []
    for n, (sha, title) in enumerate(entries):
        plus, minus = rng.randint(1, 40), rng.randint(0, 30)
        out.append(f"{sha} 2026-{6 - n // 3:02d}-{rng.randint(1, 28):02d} {rng.choice(authors)}\n    {title}\n\n"
                   f" tidewater/schedule.py | {plus + minus:3d} {'+' * min(plus, 25)}{'-' * min(minus, 15)}\n"
                   f" 1 file changed, {plus} insertions(+), {minus} deletions(-)\n")
    return "\n".join(out)


def git_show(rng: random.Random) -> str:
    return """commit a3f9c2e71d04b6c2f5e8a9d3b1c0f7e6d5a4b3c2
Author: Jonas Albrecht <jonas.albrecht@example.org>
Date:   Tue Mar 3 16:42:11 2026 +0100

    refactor: simplify tz handling in schedule (#412)

    Schedules now keep a tzinfo instead of a zone name; attaching the zone
    is a plain replace(). Removes the pytz-specific code paths so that
    zoneinfo can be dropped in later.

diff --git a/tidewater/schedule.py b/tidewater/schedule.py
index 4be01c2..9f3a7d8 100644
--- a/tidewater/schedule.py
+++ b/tidewater/schedule.py
@@ -14,22 +14,14 @@ __all__ = ["Schedule", "next_run", "upcoming"]
 _MAX_STEPS = 366 * 24 * 60
 _MINUTE = dt.timedelta(minutes=1)


-def _to_aware(naive: dt.datetime, zone: str) -> dt.datetime:
-    \"\"\"Attach a zone to a wall-clock time, as pytz requires (localize, never replace).\"\"\"
-    tz = pytz.timezone(zone)
-    try:
-        return tz.localize(naive, is_dst=None)
-    except pytz.exceptions.AmbiguousTimeError:
-        return tz.localize(naive, is_dst=True)
-    except pytz.exceptions.NonExistentTimeError:
-        return tz.normalize(tz.localize(naive + dt.timedelta(hours=1), is_dst=True))
+def _to_aware(naive: dt.datetime, tz: dt.tzinfo) -> dt.datetime:
+    \"\"\"Attach the schedule's time zone to a wall-clock time.\"\"\"
+    return naive.replace(tzinfo=tz)


-def _wall(moment: dt.datetime, zone: str) -> dt.datetime:
-    return moment.astimezone(pytz.timezone(zone)).replace(tzinfo=None, second=0, microsecond=0)
+def _wall(moment: dt.datetime, tz: dt.tzinfo) -> dt.datetime:
+    \"\"\"The wall-clock time of an aware moment in `tz`, naive, to the minute.\"\"\"
+    return moment.astimezone(tz).replace(tzinfo=None, second=0, microsecond=0)


 @dataclass(frozen=True)
 class Schedule:
     expr: CronExpr
-    zone: str = "UTC"
+    tz: dt.tzinfo
@@ -37,7 +29,7 @@ class Schedule:
     @classmethod
     def from_string(cls, text: str, tz: str = "UTC") -> "Schedule":
-        return cls(parse(text), tz)
+        return cls(parse(text), pytz.timezone(tz))
"""


def tox_output() -> str:
    files = "\n".join(f"  pytz/zoneinfo/{zone}" for zone in (
        "Africa/Abidjan", "America/New_York", "America/Sao_Paulo", "Asia/Kolkata", "Asia/Shanghai", "Asia/Tokyo",
        "Australia/Sydney", "Europe/Berlin", "Europe/London", "Europe/Vienna", "Pacific/Auckland", "UTC"))
    return """Python 3.11.9
Name: pytz
Version: 2024.1
Summary: World timezone definitions, modern and historical
Home-page: http://pythonhosted.org/pytz
Author: Stuart Bishop
Author-email: stuart@stuartbishop.net
License: MIT
Location: /repo/.venv/lib/python3.11/site-packages
Requires:
Required-by: tidewater
Files:
  pytz-2024.1.dist-info/INSTALLER
  pytz-2024.1.dist-info/LICENSE.txt
  pytz-2024.1.dist-info/METADATA
  pytz-2024.1.dist-info/RECORD
  pytz/__init__.py
  pytz/exceptions.py
  pytz/lazy.py
  pytz/reference.py
  pytz/tzfile.py
  pytz/tzinfo.py
""" + files + """
[tox]
envlist = py38, py311, lint, typing
isolated_build = true

[testenv]
extras = dev
commands = pytest {posargs:-q}

[testenv:lint]
skip_install = true
deps = flake8
commands = flake8 tidewater tests

[testenv:typing]
deps = mypy
commands = mypy tidewater

[gh-actions]
python =
    3.8: py38
    3.11: py311, lint, typing
"""


FOLD_SCRIPT = """python - <<'EOF'
from datetime import datetime
import pytz
berlin = pytz.timezone("Europe/Berlin")
for fold in (0, 1):
    naive = datetime(2026, 10, 25, 2, 30, fold=fold)
    aware = berlin.localize(naive)
    print("fold", fold, aware.isoformat(), aware.tzname(), aware.astimezone(pytz.utc).isoformat())
for is_dst in (True, False):
    aware = berlin.localize(datetime(2026, 10, 25, 2, 30), is_dst=is_dst)
    print("is_dst", is_dst, aware.isoformat(), aware.tzname(), aware.astimezone(pytz.utc).isoformat())
print(len(berlin._utc_transition_times), berlin._utc_transition_times[-44:-4])
print(berlin._tzinfos)
EOF"""


def fold_output() -> str:
    return """fold 0 2026-10-25T02:30:00+01:00 CET 2026-10-25T01:30:00+00:00
fold 1 2026-10-25T02:30:00+01:00 CET 2026-10-25T01:30:00+00:00
is_dst True 2026-10-25T02:30:00+02:00 CEST 2026-10-25T00:30:00+00:00
is_dst False 2026-10-25T02:30:00+01:00 CET 2026-10-25T01:30:00+00:00
""" + "143 [" + ", ".join(f"datetime.datetime({year}, {month}, {day}, 1, 0)" for year in range(2018, 2038)
                         for month, day in ((3, 25 + (6 - year) % 7), (10, 25 + (6 - year) % 7))) + "]\n" + (
        "{(datetime.timedelta(seconds=3180), datetime.timedelta(0), 'LMT'): <DstTzInfo 'Europe/Berlin' LMT+0:53:00 "
        "STD>, (datetime.timedelta(seconds=3600), datetime.timedelta(0), 'CET'): <DstTzInfo 'Europe/Berlin' "
        "CET+1:00:00 STD>, (datetime.timedelta(seconds=7200), datetime.timedelta(seconds=3600), 'CEST'): "
        "<DstTzInfo 'Europe/Berlin' CEST+2:00:00 DST>, (datetime.timedelta(seconds=10800), "
        "datetime.timedelta(seconds=7200), 'CEMT'): <DstTzInfo 'Europe/Berlin' CEMT+3:00:00 DST>}\n")


GAP_SCRIPT = """python - <<'EOF'
from datetime import datetime
import pytz
berlin = pytz.timezone("Europe/Berlin")
print(berlin.localize(datetime(2026, 3, 29, 2, 30), is_dst=True).isoformat())
print(berlin.localize(datetime(2026, 3, 29, 2, 30), is_dst=False).isoformat())
print(berlin.localize(datetime(2026, 3, 29, 2, 30), is_dst=None).isoformat())
EOF"""


def gap_output() -> str:
    return """2026-03-29T02:30:00+02:00
2026-03-29T02:30:00+01:00
Traceback (most recent call last):
  File "<stdin>", line 6, in <module>
  File "/repo/.venv/lib/python3.11/site-packages/pytz/tzinfo.py", line 365, in localize
    raise NonExistentTimeError(dt)
pytz.exceptions.NonExistentTimeError: 2026-03-29 02:30:00
"""


def first_test_run(rng: random.Random) -> str:
    failures = [lmt_failure("test_next_run_berlin_winter", "2026-01-15T02:30:00+01:00", "2026-01-15T02:30:00+00:53", 31),
                lmt_failure("test_next_run_berlin_summer", "2026-07-15T02:30:00+02:00", "2026-07-15T02:30:00+00:53", 38),
                lmt_failure("test_fall_back_first_occurrence", "2026-10-25T02:30:00+02:00",
                            "2026-10-25T02:30:00+00:53", 52),
                lmt_failure("test_spring_forward_shifts_to_0300", "2026-03-29T03:00:00+02:00",
                            "2026-03-29T02:30:00+00:53", 61),
                lmt_failure("test_new_york_daily", "2026-02-02T09:00:00-05:00", "2026-02-02T09:00:00-04:56", 77)]
    return (pytest_header(rng, 37) + verbose(rng, [("tests/test_schedule.py", 37)],
                                             {"tests/test_schedule.py": LMT_FAILURES})
            + "\n=================================== FAILURES ===================================\n"
            + "\n".join(failures) + previous_failure() +
            "=========================== short test summary info ============================\n"
            "FAILED tests/test_schedule.py::test_next_run_berlin_winter - AssertionError: assert '2026-01-15T02:30...\n"
            "FAILED tests/test_schedule.py::test_next_run_berlin_summer - AssertionError: assert '2026-07-15T02:30...\n"
            "FAILED tests/test_schedule.py::test_fall_back_first_occurrence - AssertionError: assert '2026-10-25T0...\n"
            "FAILED tests/test_schedule.py::test_spring_forward_shifts_to_0300 - AssertionError: assert '2026-03-2...\n"
            "FAILED tests/test_schedule.py::test_new_york_daily - AssertionError: assert '2026-02-02T09:00:00-04:5...\n"
            + PREVIOUS_SUMMARY + f"\n6 failed, 31 passed in {rng.uniform(0.6, 1.4):.2f}s\n")


def schedule_tests_head(rng: random.Random) -> str:
    body = '''"""Run times of schedules in zones with DST."""
from datetime import datetime, timedelta

import pytest
import pytz

from tidewater.errors import ScheduleError
from tidewater.schedule import Schedule, next_run, previous_run, upcoming

from .conftest import BERLIN, NEW_YORK, SYDNEY

UTC = pytz.utc


def test_naive_after_is_rejected():
    s = Schedule.from_string("0 * * * *")
    with pytest.raises(ScheduleError):
        next_run(s, datetime(2026, 1, 1))


def test_next_run_utc():
    s = Schedule.from_string("15 4 * * *")
    run = next_run(s, UTC.localize(datetime(2026, 5, 1, 12, 0)))
    assert run.isoformat() == "2026-05-02T04:15:00+00:00"


def test_next_run_berlin_winter():
    s = Schedule.from_string("30 2 * * *", tz="Europe/Berlin")
    after = BERLIN.localize(datetime(2026, 1, 14, 12, 0))
    run = next_run(s, after)
    assert run.isoformat() == "2026-01-15T02:30:00+01:00"


def test_next_run_berlin_summer():
    s = Schedule.from_string("30 2 * * *", tz="Europe/Berlin")
    after = BERLIN.localize(datetime(2026, 7, 14, 12, 0))
    run = next_run(s, after)
    assert run.isoformat() == "2026-07-15T02:30:00+02:00"


def test_inclusive_returns_after_itself():
    s = Schedule.from_string("30 2 * * *", tz="Europe/Berlin")
    after = BERLIN.localize(datetime(2026, 7, 15, 2, 30))
    assert next_run(s, after, True) == after


def test_fall_back_first_occurrence():
    # 02:30 happens twice on 2026-10-25; the job runs at the first one (CEST) only
    s = Schedule.from_string("30 2 * * *", tz="Europe/Berlin")
    run = next_run(s, BERLIN.localize(datetime(2026, 10, 24, 12, 0)))
    assert run.isoformat() == "2026-10-25T02:30:00+02:00"
    again = next_run(s, run)
    assert again.date().isoformat() == "2026-10-26"


def test_spring_forward_shifts_to_0300():
    # 02:30 does not exist on 2026-03-29; the job runs at 03:00 CEST
    s = Schedule.from_string("30 2 * * *", tz="Europe/Berlin")
    run = next_run(s, BERLIN.localize(datetime(2026, 3, 28, 12, 0)))
    assert run.isoformat() == "2026-03-29T03:00:00+02:00"


@pytest.mark.parametrize("zone,hour", [(NEW_YORK, 9), (SYDNEY, 7), (BERLIN, 18)])
def test_daily_job_keeps_local_hour_for_a_year(zone, hour):
    s = Schedule(Schedule.from_string(f"0 {hour} * * *").expr, zone)
    runs = list(upcoming(s, zone.localize(datetime(2026, 1, 1)), count=365))
    assert {r.astimezone(zone).hour for r in runs} == {hour}


def test_new_york_daily():
    s = Schedule.from_string("0 9 * * 1-5", tz="America/New_York")
    run = next_run(s, NEW_YORK.localize(datetime(2026, 2, 1, 12, 0)))
    assert run.isoformat() == "2026-02-02T09:00:00-05:00"


def test_previous_run_berlin():
    s = Schedule.from_string("30 2 * * *", tz="Europe/Berlin")
    run = previous_run(s, BERLIN.localize(datetime(2026, 1, 15, 12, 0)))
    assert run.isoformat() == "2026-01-15T02:30:00+01:00"
'''
    return body


TO_AWARE = ('''def _to_aware(naive: dt.datetime, tz: dt.tzinfo) -> dt.datetime:
    """Attach the schedule's time zone to a wall-clock time."""
    return naive.replace(tzinfo=tz)
''', '''def _to_aware(naive: dt.datetime, tz: dt.tzinfo) -> dt.datetime:
    """Attach the schedule's time zone to a wall-clock time. pytz zones need localize(), never
    replace(tzinfo=...), which picks the zone's first (LMT) offset; an ambiguous time resolves to its
    first occurrence."""
    localize = getattr(tz, "localize", None)
    if localize is None:  # a fixed-offset tzinfo
        return naive.replace(tzinfo=tz)
    return localize(naive, is_dst=True)
''', '''def _to_aware(naive: dt.datetime, tz: dt.tzinfo) -> dt.datetime:
    """Attach the schedule's time zone to a wall-clock time. pytz zones need localize(), never
    replace(tzinfo=...), which picks the zone's first (LMT) offset; an ambiguous time resolves to its
    first occurrence."""
    localize = getattr(tz, "localize", None)
    if localize is None:  # a fixed-offset tzinfo
        return naive.replace(tzinfo=tz)
    for shift in range(_GAP_MINUTES + 1):
        try:
            return localize(naive + shift * _MINUTE, is_dst=None)
        except pytz.exceptions.AmbiguousTimeError:
            return localize(naive + shift * _MINUTE, is_dst=True)
        except pytz.exceptions.NonExistentTimeError:
            continue  # inside a spring-forward gap: the first minute after it
    raise ScheduleError(f"no local time near {naive.isoformat()} in {tz}")
''')
MINUTE_LINE = "_MINUTE = dt.timedelta(minutes=1)\n"
GAP_LINES = "# No zone skips more than three hours of wall time.\n_GAP_MINUTES = 180\n"
PREVIOUS_OLD = "            return wall.replace(tzinfo=schedule.tz)\n        wall -= _MINUTE\n"
PREVIOUS_NEW = "            return _to_aware(wall, schedule.tz)\n        wall -= _MINUTE\n"


def schedule_source(stage: int) -> str:
    """tidewater/schedule.py as it is after the agent's first `stage` patches (0: as found)."""
    text = SCHEDULE_PY
    if stage >= 1:
        text = text.replace(TO_AWARE[0], TO_AWARE[1])
    if stage >= 2:
        text = text.replace(TO_AWARE[1], TO_AWARE[2]).replace(MINUTE_LINE, MINUTE_LINE + GAP_LINES)
    if stage >= 3:
        text = text.replace(PREVIOUS_OLD, PREVIOUS_NEW)
    return text


def line_of(stage: int, text: str) -> int:
    """The number of the first line of schedule.py (at `stage`) that starts with `text`."""
    return next(n for n, line in enumerate(schedule_source(stage).splitlines(), 1) if line.startswith(text))


def view(stage: int, first: int, last: int) -> str:
    """What `sed -n FIRST,LASTp` prints, numbered as `nl -ba` would."""
    lines = schedule_source(stage).splitlines()[first - 1:last]
    return "".join(f"{n:6d}\t{line}\n" for n, line in enumerate(lines, first))


def patch_command(old: str, new: str, what: str, extra: str, first: int, last: int) -> str:
    return ("python - <<'EOF'\nfrom pathlib import Path\npath = Path(\"tidewater/schedule.py\")\n"
            f"text = path.read_text()\nold = '''{old}'''\nnew = '''{new}'''\nassert text.count(old) == 1\n"
            f"text = text.replace(old, new){extra}\npath.write_text(text)\nprint(\"patched {what} (1 replacement)\")\n"
            f"EOF\nsed -n {first},{last}p tidewater/schedule.py")


def full_diff() -> str:
    changelog = """diff --git a/CHANGELOG.md b/CHANGELOG.md
index 2f9e0a1..c4b7d13 100644
--- a/CHANGELOG.md
+++ b/CHANGELOG.md
@@ -1,5 +1,14 @@
 # Changelog

+## Unreleased
+
+### Fixed
+- `next_run()`, `previous_run()` and `upcoming()` returned wall times with the zone's LMT offset
+  (e.g. +00:53 for Europe/Berlin) since 1.14.0: zones are attached with pytz's `localize()` again.
+- On DST change days a job inside the skipped hour runs at the first minute after the gap, and a job
+  inside the repeated hour runs at the first occurrence only, as documented.
+
 ## 1.14.2

 - cli: `--json` output for `upcoming`
"""
    schedule = difflib.unified_diff(schedule_source(0).splitlines(keepends=True),
                                    schedule_source(3).splitlines(keepends=True),
                                    "a/tidewater/schedule.py", "b/tidewater/schedule.py")
    return (changelog + "diff --git a/tidewater/schedule.py b/tidewater/schedule.py\nindex 9f3a7d8..0b5e2c4 100644\n"
            + "".join(schedule))


def second_test_run(rng: random.Random) -> str:
    failure = traceback_block("test_spring_forward_shifts_to_0300", [
        "    def test_spring_forward_shifts_to_0300():",
        "        # 02:30 does not exist on 2026-03-29; the job runs at 03:00 CEST",
        '        s = Schedule.from_string("30 2 * * *", tz="Europe/Berlin")',
        "        run = next_run(s, BERLIN.localize(datetime(2026, 3, 28, 12, 0)))",
        '>       assert run.isoformat() == "2026-03-29T03:00:00+02:00"',
        "E       AssertionError: assert '2026-03-29T02:30:00+02:00' == '2026-03-29T03:00:00+02:00'",
        "E         ",
        "E         - 2026-03-29T03:00:00+02:00",
        "E         ?            ^^ ^",
        "E         + 2026-03-29T02:30:00+02:00",
        "E         ?            ^^ ^"], "", "tests/test_schedule.py:61: AssertionError")
    return (verbose(rng, [("tests/test_schedule.py", 37)],
                    {"tests/test_schedule.py": ["test_spring_forward_shifts_to_0300", "test_previous_run_berlin"]})
            + "=================================== FAILURES ===================================\n" + failure +
            previous_failure() +
            "=========================== short test summary info ============================\n"
            "FAILED tests/test_schedule.py::test_spring_forward_shifts_to_0300 - AssertionError: assert '2026-03-2...\n"
            + PREVIOUS_SUMMARY + f"\n2 failed, 35 passed in {rng.uniform(0.6, 1.4):.2f}s\n")


def callers_output(rng: random.Random) -> str:
    body = view(1, 60, 110).splitlines()
    hits = ["./tidewater/__init__.py:3:from .schedule import Schedule, next_run, previous_run, upcoming",
            "./tidewater/cli.py:14:from .schedule import Schedule, next_run, upcoming",
            "./tidewater/cli.py:71:    click.echo(next_run(schedule, start, inclusive).isoformat())",
            "./tidewater/report.py:9:from .schedule import next_run, previous_run",
            "./tidewater/report.py:52:        last = previous_run(schedule, generated)",
            "./tidewater/report.py:53:        following = next_run(schedule, generated)",
            "./tidewater/schedule.py:13:__all__ = [\"Schedule\", \"next_run\", \"previous_run\", \"upcoming\"]",
            "./tidewater/schedule.py:52:def next_run(schedule: Schedule, after: dt.datetime, inclusive: bool = False)"
            " -> dt.datetime:",
            "./tidewater/schedule.py:68:def previous_run(schedule: Schedule, before: dt.datetime) -> dt.datetime:",
            "./tidewater/schedule.py:86:        moment = next_run(schedule, moment)"]
    return "\n".join(body) + "\n" + "\n".join(hits) + "\n"


def main_cron_run(rng: random.Random) -> str:
    failure = traceback_block("test_parse_dow_names", [
        '    @pytest.mark.parametrize("text,expected", [("MON-FRI", {1, 2, 3, 4, 5}), ("SUN", {0}), ("sat,sun", {6, 0})])',
        "    def test_parse_dow_names(text, expected):",
        '>       assert parse(f"0 0 * * {text}").weekdays == expected',
        "",
        "tests/test_cron.py:118: ",
        "_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ ",
        "tidewater/cron.py:88: in parse",
        "    weekdays = _field(parts[4], 0, 6, names=_DOW_NAMES)",
        "tidewater/cron.py:61: in _field",
        "    values |= _range(item, low, high, names)",
        "_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ ",
        "",
        "item = 'SUN', low = 0, high = 6, names = {'MON': 1, 'TUE': 2, 'WED': 3, 'THU': 4, 'FRI': 5, 'SAT': 6}",
        "",
        "    def _range(item, low, high, names):",
        "        start, _, end = item.partition(\"-\")",
        ">       first = names.get(start.upper(), None) if start.isalpha() else int(start)",
        "        if first is None:",
        ">           raise CronSyntaxError(f\"unknown name {start!r}\")"],
        "tidewater.errors.CronSyntaxError: unknown name 'SUN'", "tidewater/cron.py:44: CronSyntaxError")
    return (f"Preparing worktree (checking out 'main')\nHEAD is now at 5d0c3f1 bump version to 1.14.2\n"
            f"..........................................F.....                         [100%]\n"
            "=================================== FAILURES ===================================\n" + failure.replace(
                "test_parse_dow_names ", "test_parse_dow_names[SUN-expected1] ") +
            "=========================== short test summary info ============================\n"
            "FAILED tests/test_cron.py::test_parse_dow_names[SUN-expected1] - tidewater.errors.CronSyntaxError: "
            "unknown name 'SUN'\n"
            f"1 failed, 47 passed in {rng.uniform(0.2, 0.6):.2f}s\n")


def third_test_run(rng: random.Random) -> str:
    return (pytest_header(rng, 59) + verbose(rng, TEST_FILES[1:3], {"tests/test_schedule.py":
                                                                     ["test_previous_run_berlin"]})
            + "\n=================================== FAILURES ===================================\n"
            + previous_failure() + warnings_summary(rng) +
            "=========================== short test summary info ============================\n" + PREVIOUS_SUMMARY
            + f"\n================== 1 failed, 58 passed, 1 warning in {rng.uniform(1.1, 2.4):.2f}s ==================\n")


def report_output(rng: random.Random) -> str:
    source = '''"""Weekly digest of scheduled jobs: last and next run per job, grouped by zone."""
from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Iterable

from pytz import timezone, utc

from .schedule import next_run, previous_run
from .jobs import Job


def digest(jobs: Iterable[Job]) -> str:
    """A plain-text table, one line per job, zones in alphabetical order."""
    generated = datetime.utcnow().replace(tzinfo=utc)
    by_zone: dict[str, list[Job]] = defaultdict(list)
    for job in jobs:
        by_zone[job.zone].append(job)
    lines = [f"tidewater digest, generated {_stamp(generated)}", ""]
    for zone_name in sorted(by_zone):
        zone = timezone(zone_name)
        lines.append(f"== {zone_name} ==")
        for job in sorted(by_zone[zone_name], key=lambda j: j.name):
            schedule = job.schedule
            last = previous_run(schedule, generated)
            following = next_run(schedule, generated)
            local = following.astimezone(zone)
            lines.append(f"{job.name:<32} last {_stamp(last)}  next {_stamp(following)} ({local:%a %H:%M %Z})")
        lines.append("")
    return "\\n".join(lines)


def _stamp(moment: datetime) -> str:
    return moment.astimezone(utc).strftime("%Y-%m-%dT%H:%MZ")
'''
    return ("tidewater/report.py:41:    generated = datetime.utcnow().replace(tzinfo=utc)\n"
            "tidewater/schedule.py:77:            return wall.replace(tzinfo=schedule.tz)\n" + source)


def cli_source(rng: random.Random) -> str:
    return '''"""Command line: tidewater next|upcoming|digest."""
from __future__ import annotations

import json
import sys
from datetime import datetime
from typing import Optional

import click
from pytz import timezone, utc
from pytz.exceptions import UnknownTimeZoneError

from .schedule import Schedule, next_run, upcoming
from .report import digest
from .jobs import load_jobs


def _parse_start(value: Optional[str], zone) -> Optional[datetime]:
    if value is None:
        return None
    naive = datetime.fromisoformat(value)
    return naive if naive.tzinfo else zone.localize(naive)


@click.group()
@click.version_option()
def main() -> None:
    """Cron-style schedules with time zones."""


@main.command("next")
@click.argument("expression")
@click.option("--tz", "zone_name", default="UTC", show_default=True)
@click.option("--start", default=None, help="ISO time; defaults to now")
@click.option("--inclusive", is_flag=True)
def next_command(expression: str, zone_name: str, start: Optional[str], inclusive: bool) -> None:
    try:
        zone = timezone(zone_name)
    except UnknownTimeZoneError:
        raise click.BadParameter(f"unknown time zone {zone_name!r}", param_hint="--tz")
    schedule = Schedule.from_string(expression, tz=zone_name)
    moment = _parse_start(start, zone)
    start = utc.localize(datetime.utcnow()) if moment is None else moment
    click.echo(next_run(schedule, start, inclusive).isoformat())


@main.command("upcoming")
@click.argument("expression")
@click.option("--tz", "zone_name", default="UTC", show_default=True)
@click.option("--count", default=10, show_default=True)
@click.option("--json", "as_json", is_flag=True)
def upcoming_command(expression: str, zone_name: str, count: int, as_json: bool) -> None:
    zone = timezone(zone_name)
    schedule = Schedule.from_string(expression, tz=zone_name)
    start = utc.localize(datetime.utcnow())
    runs = [run.astimezone(zone) for run in upcoming(schedule, start, count)]
    if as_json:
        json.dump([run.isoformat() for run in runs], sys.stdout, indent=2)
        sys.stdout.write("\\n")
        return
    for run in runs:
        click.echo(run.isoformat())


@main.command("digest")
@click.option("--jobs", "jobs_file", type=click.Path(exists=True), required=True)
def digest_command(jobs_file: str) -> None:
    click.echo(digest(load_jobs(jobs_file)))
'''


def full_run(rng: random.Random, failing_schedule: int) -> str:
    failing = {"tests/test_cron.py": [SUN], "tests/test_schedule.py": ["test_previous_run_berlin"] * failing_schedule}
    files = TEST_FILES + ([("tests/test_dst_regression.py", 9)] if not failing_schedule else [])
    collected = sum(n for _, n in files)
    cron_failure = traceback_block("test_parse_dow_names[SUN-expected1]", [
        '>       assert parse(f"0 0 * * {text}").weekdays == expected',
        "tidewater/cron.py:88: in parse", "    weekdays = _field(parts[4], 0, 6, names=_DOW_NAMES)",
        "tidewater/cron.py:61: in _field", "    values |= _range(item, low, high, names)"],
        "tidewater.errors.CronSyntaxError: unknown name 'SUN'", "tidewater/cron.py:44: CronSyntaxError")
    summary = ["FAILED tests/test_cron.py::test_parse_dow_names[SUN-expected1] - tidewater.errors.CronSyntaxError: "
               "unknown name 'SUN'"]
    if failing_schedule:
        summary.append(PREVIOUS_SUMMARY)
    failed = 1 + failing_schedule
    return (pytest_header(rng, collected) + verbose(rng, files, failing) + "\n"
            "=================================== FAILURES ===================================\n" + cron_failure
            + (previous_failure() if failing_schedule else "") + warnings_summary(rng) +
            "=========================== short test summary info ============================\n" + "\n".join(summary)
            + f"\n============ {failed} failed, {collected - failed} passed, 7 warnings in "
              f"{rng.uniform(2.5, 4.5):.2f}s ============\n")


def mypy_output(rng: random.Random) -> str:
    return ("tidewater/schedule.py:8: error: Library stubs not installed for \"pytz\"  [import-untyped]\n"
            "tidewater/schedule.py:8: note: Hint: \"python3 -m pip install types-pytz\"\n"
            "tidewater/schedule.py:8: note: (or run \"mypy --install-types\" to install all missing stub packages)\n"
            "tidewater/schedule.py:8: note: See https://mypy.readthedocs.io/en/stable/running_mypy.html#missing-imports\n"
            "tidewater/report.py:8: error: Library stubs not installed for \"pytz\"  [import-untyped]\n"
            "tidewater/cli.py:10: error: Library stubs not installed for \"pytz\"  [import-untyped]\n"
            "tidewater/cli.py:11: error: Library stubs not installed for \"pytz.exceptions\"  [import-untyped]\n"
            "tidewater/jobs.py:22: note: By default the bodies of untyped functions are not checked, consider using "
            "--check-untyped-defs  [annotation-unchecked]\n"
            "tidewater/jobs.py:37: note: By default the bodies of untyped functions are not checked, consider using "
            "--check-untyped-defs  [annotation-unchecked]\n"
            "Found 4 errors in 3 files (checked 8 source files)\n")


def docs_page(rng: random.Random) -> str:
    return """Time zones
==========

Schedules are evaluated in *wall-clock time* of their zone. ``Schedule.from_string("30 2 * * *",
tz="Europe/Berlin")`` runs at 02:30 Berlin time every day, whether Berlin is on CET or CEST.

Daylight saving time
--------------------

Twice a year the wall clock jumps. tidewater follows the behaviour of Vixie cron and systemd timers:

* **Spring forward.** When the clock jumps from 02:00 to 03:00, times in between do not exist. A job
  scheduled inside the gap runs at the first minute after it (03:00), once.
* **Fall back.** When the clock goes back from 03:00 to 02:00, times between 02:00 and 03:00 happen
  twice. A job scheduled in that hour runs at the first occurrence only (still on summer time).

.. code-block:: python

    >>> s = Schedule.from_string("30 2 * * *", tz="Europe/Berlin")
    >>> next_run(s, BERLIN.localize(datetime(2026, 3, 28, 12))).isoformat()
    '2026-03-29T03:00:00+02:00'
    >>> next_run(s, BERLIN.localize(datetime(2026, 10, 24, 12))).isoformat()
    '2026-10-25T02:30:00+02:00'

Hourly and minute schedules are not shifted: ``*/15 * * * *`` runs every 15 minutes of real time,
so on the fall-back night it runs eight times between 02:00 and 03:00 wall time.

Zones
-----

Any IANA zone name accepted by pytz works. Fixed offsets (``datetime.timezone(timedelta(hours=5))``)
can be passed directly as ``Schedule(expr, tz)``. The database version is the one of the installed
pytz; upgrade pytz to pick up changes in zone rules.

Naive datetimes
---------------

``next_run``, ``previous_run`` and ``upcoming`` refuse naive datetimes with ``ScheduleError``: a
naive time is ambiguous, and guessing the zone is how schedules end up an hour off.

Command line
------------

``tidewater next "30 2 * * *" --tz Europe/Berlin`` prints the next run as ISO 8601 with the offset.
``tidewater upcoming ... --json`` prints a JSON list. Times are always printed in the schedule's zone.
"""


def status_output(rng: random.Random) -> str:
    return ("On branch fix/berlin-offsets\nChanges not staged for commit:\n"
            "  (use \"git add <file>...\" to update what will be committed)\n"
            "  (use \"git restore <file>...\" to discard changes in working directory)\n"
            "\tmodified:   tidewater/schedule.py\n\n"
            "no changes added to commit (use \"git add\" and/or \"git commit -a\")\n"
            " tidewater/schedule.py | 19 +++++++++++++++++--\n 1 file changed, 17 insertions(+), 2 deletions(-)\n"
            + "".join(f"stash@{{{n}}}: WIP on {branch}: {hex_id(rng, 7)} {title}\n" for n, (branch, title) in
                      enumerate([("main", "bump version to 1.14.2"), ("cli-json", "cli: --json output for upcoming"),
                                 ("main", "bump version to 1.14.1")])))


def upcoming_tests(rng: random.Random) -> str:
    cases = []
    for n in range(20):
        zone = rng.choice(["BERLIN", "NEW_YORK", "SYDNEY"])
        month, day = rng.randint(1, 12), rng.randint(1, 27)
        cases.append(f'''

def test_upcoming_case_{n:02d}():
    s = Schedule(Schedule.from_string("{rng.choice([0, 15, 30, 45])} {rng.randint(0, 23)} * * *").expr, {zone})
    start = {zone}.localize(datetime(2026, {month}, {day}, {rng.randint(0, 23)}, 0))
    runs = list(upcoming(s, start, count={rng.randint(3, 9)}))
    assert all(b > a for a, b in zip(runs, runs[1:]))
    assert len({{r.astimezone({zone}).strftime("%H:%M") for r in runs}}) == 1''')
    return '''"""upcoming(): ordered, no duplicates, local hour kept."""
from datetime import datetime

from tidewater.schedule import Schedule, upcoming

from .conftest import BERLIN, NEW_YORK, SYDNEY
''' + "".join(cases) + "\n"


def previous_test_run(rng: random.Random) -> str:
    return (pytest_header(rng, 37).replace("collected 37 items", "collected 37 items / 34 deselected / 3 selected")
            + "".join(f"tests/test_schedule.py::{name} PASSED".ljust(72) + f" [{100 * (n + 1) // 3:3d}%]\n"
                      for n, name in enumerate(["test_previous_run_berlin", "test_previous_run_utc",
                                                "test_previous_run_sydney_dst"])) + "\n"
            + f"======================= 3 passed, 34 deselected in {rng.uniform(0.2, 0.5):.2f}s "
              "=======================\n")


BRUTE_SCRIPT = """python - <<'EOF'
from datetime import datetime, timedelta
import pytz
from tidewater.schedule import Schedule, next_run
mismatches = []
for zone_name in ("Europe/Berlin", "America/New_York", "Australia/Sydney"):
    zone = pytz.timezone(zone_name)
    s = Schedule.from_string("30 2 * * *", tz=zone_name)
    day = datetime(2026, 1, 1)
    for _ in range(365):
        run = next_run(s, zone.localize(day - timedelta(hours=12)))
        local = run.astimezone(zone)
        ok = local.strftime("%H:%M") in ("02:30", "03:00") and local.date() == day.date()
        if not ok:
            mismatches.append((zone_name, day.date(), run.isoformat()))
        print(zone_name, day.date(), local.strftime("%H:%M %Z"), "ok" if ok else "MISMATCH") if day.day == 1 else None
        day += timedelta(days=1)
print("mismatches:", mismatches)
EOF"""


def brute_output(rng: random.Random) -> str:
    lines = []
    for zone, summer, winter in (("Europe/Berlin", "CEST", "CET"), ("America/New_York", "EDT", "EST"),
                                 ("Australia/Sydney", "AEST", "AEDT")):
        for month in range(1, 13):
            dst = 4 <= month <= 10
            if zone == "Australia/Sydney":
                dst = not dst
            lines.append(f"{zone} 2026-{month:02d}-01 02:30 {summer if dst else winter} ok")
    return "\n".join(lines) + "\nmismatches: []\n"


NEW_TESTS = """cat > tests/test_dst_regression.py <<'EOF'
\"\"\"Regressions of 1.14.0: LMT offsets from replace(tzinfo=...), and DST change days.

pytz ignores `fold`, so the ambiguous hour is built with localize(is_dst=...). Plain pytz, no zoneinfo:
these must run on the oldest supported Python.\"\"\"
from datetime import datetime

import pytest
import pytz

from tidewater.schedule import Schedule, next_run, previous_run, upcoming

BERLIN = pytz.timezone("Europe/Berlin")


def daily(hour, minute, zone="Europe/Berlin"):
    return Schedule.from_string(f"{minute} {hour} * * *", tz=zone)


@pytest.mark.parametrize("zone", ["Europe/Berlin", "America/New_York", "Asia/Kolkata", "Australia/Sydney"])
def test_no_lmt_offset(zone):
    tz = pytz.timezone(zone)
    run = next_run(daily(2, 30, zone), tz.localize(datetime(2026, 1, 14, 12, 0)))
    assert run.utcoffset() == tz.localize(datetime(2026, 1, 15, 2, 30)).utcoffset()


def test_fall_back_runs_once_at_first_occurrence():
    first = BERLIN.localize(datetime(2026, 10, 25, 2, 30), is_dst=True)
    second = BERLIN.localize(datetime(2026, 10, 25, 2, 30), is_dst=False)
    runs = list(upcoming(daily(2, 30), BERLIN.localize(datetime(2026, 10, 24, 12, 0)), count=2))
    assert runs[0] == first
    assert second not in runs
    assert runs[1].date().isoformat() == "2026-10-26"


def test_spring_forward_runs_at_0300():
    run = next_run(daily(2, 30), BERLIN.localize(datetime(2026, 3, 28, 12, 0)))
    assert run.isoformat() == "2026-03-29T03:00:00+02:00"


def test_previous_run_uses_local_offset():
    run = previous_run(daily(2, 30), BERLIN.localize(datetime(2026, 7, 15, 12, 0)))
    assert run.isoformat() == "2026-07-15T02:30:00+02:00"


def test_next_run_positional_call_still_works():
    after = BERLIN.localize(datetime(2026, 7, 15, 2, 30))
    assert next_run(daily(2, 30), after, True) == after
EOF
python -m pytest tests/test_dst_regression.py -v -p no:randomly 2>&1 | tail -20"""


DST_TESTS_VERBOSE = "".join(
    f"tests/test_dst_regression.py::{name} PASSED".ljust(72) + f" [{100 * (n + 1) // 8:3d}%]\n" for n, name in enumerate(
        [f"test_no_lmt_offset[{zone}]" for zone in ("Europe/Berlin", "America/New_York", "Asia/Kolkata",
                                                    "Australia/Sydney")]
        + ["test_fall_back_runs_once_at_first_occurrence", "test_spring_forward_runs_at_0300",
           "test_previous_run_uses_local_offset", "test_next_run_positional_call_still_works"]))


def new_tests_output(rng: random.Random) -> str:
    return (pytest_header(rng, 8) + DST_TESTS_VERBOSE + "\n"
            + f"============================== 8 passed in {rng.uniform(0.2, 0.5):.2f}s ==============================\n")


def tox_run(rng: random.Random) -> str:
    lines = [".pkg: install_requires> python -I -m pip install 'setuptools>=40.8.0' wheel",
             ".pkg: _optional_hooks> python /usr/lib/python3/dist-packages/pyproject_api/_backend.py True "
             "setuptools.build_meta __legacy__",
             ".pkg: get_requires_for_build_sdist> python /usr/lib/python3/dist-packages/pyproject_api/_backend.py "
             "True setuptools.build_meta __legacy__",
             ".pkg: build_sdist> python /usr/lib/python3/dist-packages/pyproject_api/_backend.py True "
             "setuptools.build_meta __legacy__",
             "py38: install_package_deps> python -I -m pip install click>=8.0 flake8 mypy pytest-cov pytest-randomly "
             "pytest>=7 pytz>=2021.1",
             "py38: install_package> python -I -m pip install --force-reinstall --no-deps "
             "/repo/.tox/.tmp/package/1/tidewater-1.14.2.tar.gz",
             "py38: commands[0]> pytest -q -p no:randomly"]
    body = full_run(rng, failing_schedule=0).split("collected", 1)[1]
    return "\n".join(lines) + "\ncollected" + body.replace("Python 3.11.9", "3.8.19") + (
        f"py38: exit 1 (3.{rng.randint(10, 99)} seconds) /repo> pytest -q -p no:randomly pid={rng.randint(2000, 9000)}\n"
        "  py38: FAIL code 1 (41.07=setup[37.49]+cmd[3.58] seconds)\n  evaluation failed :( (41.31 seconds)\n")


CHANGELOG_EDIT = """python - <<'EOF'
from pathlib import Path
path = Path("CHANGELOG.md")
text = path.read_text()
entry = '''## Unreleased

### Fixed
- `next_run()`, `previous_run()` and `upcoming()` returned wall times with the zone's LMT offset
  (e.g. +00:53 for Europe/Berlin) since 1.14.0: zones are attached with pytz's `localize()` again.
- On DST change days a job inside the skipped hour runs at the first minute after the gap, and a job
  inside the repeated hour runs at the first occurrence only, as documented.

'''
path.write_text(text.replace("# Changelog\\n\\n", "# Changelog\\n\\n" + entry, 1))
EOF
head -40 CHANGELOG.md"""


def changelog_output() -> str:
    old = []
    for version, items in (("1.14.2", ["cli: `--json` output for `upcoming`", "docs: DST behaviour of upcoming()"]),
                           ("1.14.1", ["report: weekly digest groups jobs by zone", "tests: faster upcoming tests"]),
                           ("1.14.0", ["schedule: `previous_run()`", "refactor: schedules keep a tzinfo",
                                       "cron: `@weekly` and `@monthly` aliases"])):
        old.append(f"## {version}\n\n" + "\n".join(f"- {item}" for item in items) + "\n")
    return ("# Changelog\n\n## Unreleased\n\n### Fixed\n- `next_run()`, `previous_run()` and `upcoming()` returned "
            "wall times with the zone's LMT offset\n  (e.g. +00:53 for Europe/Berlin) since 1.14.0: zones are "
            "attached with pytz's `localize()` again.\n- On DST change days a job inside the skipped hour runs at "
            "the first minute after the gap, and a job\n  inside the repeated hour runs at the first occurrence "
            "only, as documented.\n\n" + "\n".join(old))


def lint_and_dst(rng: random.Random) -> str:
    return (pytest_header(rng, 8) + DST_TESTS_VERBOSE + "\n"
            f"============================== 8 passed in {rng.uniform(0.2, 0.5):.2f}s "
            "==============================\n")


FINAL_THOUGHT = """All done. Final report for the release bot:

{"summary": "next_run/previous_run/upcoming returned Europe/Berlin (and every non-UTC pytz zone) times with the LMT offset (+00:53), so jobs ran 7 minutes late in winter and 67 in summer, and DST days misbehaved.",
 "root_cause": "Commit a3f9c2e (refactor #412, released in 1.14.0) replaced tz.localize(naive) with naive.replace(tzinfo=tz) in _to_aware; with pytz that attaches the zone's first (LMT) offset. previous_run had the same pattern inline.",
 "fix": "_to_aware uses localize() again: ambiguous times resolve to the first occurrence (is_dst=True), times in a spring-forward gap move to the first minute after it; previous_run uses the helper. Stayed on pytz, no new dependencies (prod runs Python 3.8); public signatures unchanged.",
 "tests": "New tests/test_dst_regression.py (8 tests: LMT offsets in four zones, fall-back, spring-forward, previous_run, positional call). Full suite: all pass except test_parse_dow_names[SUN], which fails on main too (pre-existing, unrelated 'SUN' alias); same on py38 via tox."}

Submitting."""

FINAL_COMMAND = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached"


def final_output() -> str:
    new_file = NEW_TESTS.split("<<'EOF'\n", 1)[1].split("\nEOF", 1)[0] + "\n"
    added = difflib.unified_diff([], new_file.splitlines(keepends=True), "/dev/null", "b/tests/test_dst_regression.py")
    return ("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n" + full_diff() + "diff --git a/tests/test_dst_regression.py "
            "b/tests/test_dst_regression.py\nnew file mode 100644\nindex 0000000..e3b1f2a\n" + "".join(added))


def cli_runs() -> str:
    from datetime import timedelta
    march = []
    for day in range(60):
        date = datetime(2026, 3, 1) + timedelta(days=day)
        summer = date >= datetime(2026, 3, 29)
        clock = "03:00" if date == datetime(2026, 3, 29) else "02:30"
        march.append(f'  "{date:%Y-%m-%d}T{clock}:00+0{2 if summer else 1}:00"')
    october = [f"{datetime(2026, 10, 1) + timedelta(days=day):%Y-%m-%d}T02:30:00+0"
               f"{2 if day < 25 else 1}:00" for day in range(40)]
    return "[\n" + ",\n".join(march) + "\n]\n" + "\n".join(october) + "\n"


def issue_view(rng: random.Random) -> str:
    comments = [("mkoenig", "Same here with Europe/Vienna: our 06:00 export job shows up at 06:05 in the logs. "
                 "Pinned tidewater<1.14 for now."),
                ("ops-bot", "Labels added: bug, regression, tz"),
                ("lhartmann", "We saw the double run on 2025-10-26 too (02:30 job ran at 02:37 CEST... no wait, it "
                 "was 02:37 CET, after the switch). Attaching our scheduler log:\n```\n"
                 + "\n".join(f"2025-10-26T{h}:{m:02d}:{rng.randint(0, 59):02d}+0{o}:00 INFO job=nightly-compact "
                             f"run_id={hex_id(rng, 8)} state={st}" for h, m, o, st in
                             (("02", 37, 2, "started"), ("02", 41, 2, "finished"), ("02", 37, 1, "started"),
                              ("02", 40, 1, "finished"))) + "\n```"),
                ("jalbrecht", "Hm, that might be my refactor. I'll have a look next week unless someone beats me."),
                ("mkoenig", "Any update? Asia/Kolkata is off by a weird +05:53 as well, so it's not DST-only."),
                ("sbrandt", "FWIW CI on main is red anyway because of test_parse_dow_names (the SUN alias) — "
                 "unrelated to this.")]
    head = ("title:\tScheduled jobs in Europe/Berlin fire at the wrong local time\nstate:\tOPEN\nauthor:\tsbrandt\n"
            "labels:\tbug, regression, tz\ncomments:\t6\nassignees:\t\nprojects:\t\nmilestone:\t1.14.3\nnumber:\t433\n"
            "--\n")
    body = ("Since upgrading from 1.13.2 to 1.14.0 our nightly jobs (Europe/Berlin) run at odd times. A job with "
            "`30 2 * * *` runs at 02:37 in January and 03:37 in July.\n\nRepro:\n```python\n"
            "s = Schedule.from_string('30 2 * * *', tz='Europe/Berlin')\nprint(next_run(s, berlin.localize("
            "datetime(2026, 1, 14, 12))))\n# 2026-01-15 02:30:00+00:53\n```\n")
    return head + body + "".join(f"--\nauthor:\t{who}\nassociation:\tcontributor\nedited:\tfalse\n--\n{text}\n"
                                 for who, text in comments)


def pytz_source() -> str:
    return numbered('''    def localize(self, dt, is_dst=False):
        \'\'\'Convert naive time to local time.

        This method should be used to construct localtimes, rather
        than passing a tzinfo argument to a datetime constructor.

        is_dst is used to determine the correct timezone in the ambigous
        period at the end of daylight saving time.

        >>> from pytz import timezone
        >>> fmt = '%Y-%m-%d %H:%M:%S %Z (%z)'
        >>> amdam = timezone('Europe/Amsterdam')
        >>> dt  = datetime(2004, 10, 31, 2, 0, 0)
        >>> loc_dt1 = amdam.localize(dt, is_dst=True)
        >>> loc_dt2 = amdam.localize(dt, is_dst=False)
        >>> loc_dt1.strftime(fmt)
        '2004-10-31 02:00:00 CEST (+0200)'
        >>> loc_dt2.strftime(fmt)
        '2004-10-31 02:00:00 CET (+0100)'
        >>> str(loc_dt2 - loc_dt1)
        '1:00:00'

        Use is_dst=None to raise an AmbiguousTimeError for ambiguous
        times at the end of daylight saving time

        >>> try:
        ...     loc_dt1 = amdam.localize(dt, is_dst=None)
        ... except AmbiguousTimeError:
        ...     print('Ambiguous')
        Ambiguous

        is_dst defaults to False

        >>> amdam.localize(dt) == amdam.localize(dt, False)
        True

        is_dst is also used to determine the correct timezone in the
        wallclock times jumped over at the start of daylight saving time.

        >>> pacific = timezone('US/Pacific')
        >>> dt = datetime(2008, 3, 9, 2, 0, 0)
        >>> ploc_dt1 = pacific.localize(dt, is_dst=True)
        >>> ploc_dt2 = pacific.localize(dt, is_dst=False)
        >>> ploc_dt1.strftime(fmt)
        '2008-03-09 02:00:00 PDT (-0700)'
        >>> ploc_dt2.strftime(fmt)
        '2008-03-09 02:00:00 PST (-0800)'
        >>> str(ploc_dt2 - ploc_dt1)
        '1:00:00'

        Use is_dst=None to raise a NonExistentTimeError for these skipped
        times.

        >>> try:
        ...     loc_dt1 = pacific.localize(dt, is_dst=None)
        ... except NonExistentTimeError:
        ...     print('Non-existent')
        Non-existent
        \'\'\'
        if dt.tzinfo is not None:
            raise ValueError('Not naive datetime (tzinfo is already set)')

        # Find the two best possible
        # times that result in a bad offset.
        possible_loc_dt = set()
        for delta in [timedelta(days=-1), timedelta(days=1)]:
            loc_dt = dt + delta
            idx = max(0, bisect_right(
                self._utc_transition_times, loc_dt) - 1)
            inf = self._transition_info[idx]
            tzinfo = self._tzinfos[inf]
            loc_dt = tzinfo.normalize(dt.replace(tzinfo=tzinfo))
            if loc_dt.replace(tzinfo=None) == dt:
                possible_loc_dt.add(loc_dt)

        if len(possible_loc_dt) == 1:
            return possible_loc_dt.pop()

        # If there are no possibly correct timezones, we are attempting
        # to convert a time that never happened - the time period jumped
        # during the start-of-DST transition period.
        if len(possible_loc_dt) == 0:
            # If we refuse to guess, raise an exception.
            if is_dst is None:
                raise NonExistentTimeError(dt)

            # If we are forcing the pre-DST side of the DST transition, we
            # obtain the correct timezone by winding the clock forward a few
            # hours.
            elif is_dst:
                return self.localize(
                    dt + timedelta(hours=6), is_dst=True) - timedelta(hours=6)

            # If we are forcing the post-DST side of the DST transition, we
            # obtain the correct timezone by winding the clock back.
            else:
                return self.localize(
                    dt - timedelta(hours=6),
                    is_dst=False) + timedelta(hours=6)

        # If we get this far, we have multiple possible timezones - this
        # is an ambiguous case occurring during the end-of-DST transition.

        # If told to be strict, raise an exception since we have an
        # ambiguous case
        if is_dst is None:
            raise AmbiguousTimeError(dt)
''', 258)


def coverage_output(rng: random.Random) -> str:
    modules = [("tidewater/__init__.py", 4), ("tidewater/cli.py", 58), ("tidewater/cron.py", 96),
               ("tidewater/errors.py", 8), ("tidewater/jobs.py", 41), ("tidewater/report.py", 33),
               ("tidewater/schedule.py", 71)]
    rows = []
    for name, statements in modules:
        miss = rng.randint(0, statements // 6)
        missing = ", ".join(f"{rng.randint(10, 120)}-{rng.randint(121, 140)}" for _ in range(min(miss, 3)))
        rows.append(f"{name:<28} {statements:5d} {miss:5d} {100 - 100 * miss // statements:4d}%   {missing}")
    return (pytest_header(rng, 161) + dots(rng, TEST_FILES, {"tests/test_cron.py": 1}) +
            "\n---------- coverage: platform linux, python 3.11.9-final-0 -----------\n"
            "Name                         Stmts   Miss Cover   Missing\n" + "-" * 66 + "\n" + "\n".join(rows) +
            "\n" + "-" * 66 + f"\nTOTAL                          311     {rng.randint(20, 40)}    91%\n\n"
            "FAILED tests/test_cron.py::test_parse_dow_names[SUN-expected1] - tidewater.errors.CronSyntaxError\n"
            f"1 failed, 160 passed in {rng.uniform(3.0, 5.0):.2f}s\n")


def ci_log(rng: random.Random) -> str:
    start = datetime(2026, 6, 2, 8, 14, 3)
    steps = ["Set up job", "Run actions/checkout@v4", "Set up Python 3.11", "Install dependencies", "Lint",
             "Typing", "Tests"]
    lines = []
    for moment, step in zip(moments(rng, start, len(steps), 2, 40), steps):
        stamp = moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{rng.randint(0, 9999999):07d}Z"
        lines.append(f"test (3.11)\t{step}\t{stamp} ##[group]Run {step.lower()}")
        for _ in range(rng.randint(6, 9)):
            lines.append(f"test (3.11)\t{step}\t{stamp} " + rng.choice([
                "Collecting pytz>=2021.1", "  Downloading pytz-2024.1-py2.py3-none-any.whl (505 kB)",
                "Successfully installed click-8.1.7 pytz-2024.1 tidewater-1.14.2",
                "shell: /usr/bin/bash -e {0}", "env:", "  pythonLocation: /opt/hostedtoolcache/Python/3.11.9/x64",
                "Found 4 errors in 3 files (checked 8 source files)", "##[endgroup]"]))
    lines += [f"test (3.11)\tTests\t2026-06-02T08:15:{rng.randint(10, 59)}.{rng.randint(0, 9999999):07d}Z "
              + text for text in (
                  "FAILED tests/test_cron.py::test_parse_dow_names[SUN-expected1] - tidewater.errors.CronSyntaxError:"
                  " unknown name 'SUN'", "1 failed, 160 passed, 7 warnings in 3.91s",
                  "##[error]Process completed with exit code 1.")]
    return (f"X main tidewater CI #{rng.randint(800, 999)} · {rng.randint(9000000000, 9999999999)}\n"
            "Triggered via push about 4 weeks ago\n\nJOBS\nX test (3.8) in 1m2s\nX test (3.11) in 58s\n"
            "✓ lint in 21s\n\n" + "\n".join(lines) + "\n")


def cron_source(rng: random.Random) -> str:
    return numbered('''"""Parse five-field cron expressions into sets of allowed values."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, FrozenSet, Optional

from .errors import CronSyntaxError

_MONTH_NAMES: Dict[str, int] = {name: n for n, name in enumerate(
    ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"], 1)}
# Sunday is 0 (and 7); names map MON..SAT to 1..6.
_DOW_NAMES: Dict[str, int] = {"MON": 1, "TUE": 2, "WED": 3, "THU": 4, "FRI": 5, "SAT": 6}
_ALIASES = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
            "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"}


@dataclass(frozen=True)
class CronExpr:
    minutes: FrozenSet[int]
    hours: FrozenSet[int]
    days: FrozenSet[int]
    months: FrozenSet[int]
    weekdays: FrozenSet[int]
    text: str


def _range(item: str, low: int, high: int, names: Optional[Dict[str, int]]) -> set:
    body, _, step_text = item.partition("/")
    step = int(step_text) if step_text else 1
    if body == "*":
        first, last = low, high
    else:
        start, _, end = body.partition("-")
        first = _value(start, names)
        last = _value(end, names) if end else (high if step_text else first)
    if not (low <= first <= high and low <= last <= high + (1 if high == 6 else 0)):
        raise CronSyntaxError(f"{item!r} is outside {low}-{high}")
    return {v % 7 if high == 6 else v for v in range(first, last + 1, step)}


def _value(text: str, names: Optional[Dict[str, int]]) -> int:
    if text.isalpha():
        if names is None or text.upper() not in names:
            raise CronSyntaxError(f"unknown name {text!r}")
        return names[text.upper()]
    return int(text)


def _field(text: str, low: int, high: int, names: Optional[Dict[str, int]] = None) -> FrozenSet[int]:
    values: set = set()
    for item in text.split(","):
        values |= _range(item, low, high, names)
    return frozenset(values)


def parse(text: str) -> CronExpr:
    expanded = _ALIASES.get(text.strip(), text)
    parts = expanded.split()
    if len(parts) != 5:
        raise CronSyntaxError(f"expected 5 fields, got {len(parts)}: {text!r}")
    return CronExpr(
        minutes=_field(parts[0], 0, 59),
        hours=_field(parts[1], 0, 23),
        days=_field(parts[2], 1, 31),
        months=_field(parts[3], 1, 12, names=_MONTH_NAMES),
        weekdays=_field(parts[4], 0, 6, names=_DOW_NAMES),
        text=text,
    )
''')


def jobs_source(rng: random.Random) -> str:
    jobs = "\n".join(f"- name: {name}\n  cron: \"{rng.randint(0, 59)} {rng.randint(0, 23)} * * *\"\n  zone: {zone}\n"
                     f"  command: /opt/jobs/{name}.sh"
                     for name, zone in (("nightly-compact", "Europe/Berlin"), ("export-ledger", "Europe/Vienna"),
                                        ("sync-catalog", "America/New_York"), ("rollup-metrics", "UTC"),
                                        ("refresh-fx", "Asia/Kolkata"), ("rotate-logs", "Australia/Sydney")))
    return numbered('''"""Jobs files: YAML lists of name, cron, zone and command."""
from __future__ import annotations

from dataclasses import dataclass
from typing import List

import yaml

from .schedule import Schedule


@dataclass(frozen=True)
class Job:
    name: str
    schedule: Schedule
    zone: str
    command: str


def load_jobs(path) -> List[Job]:
    with open(path) as handle:
        raw = yaml.safe_load(handle) or []
    jobs = []
    for entry in raw:
        schedule = Schedule.from_string(entry["cron"], tz=entry.get("zone", "UTC"))
        jobs.append(Job(entry["name"], schedule, entry.get("zone", "UTC"), entry["command"]))
    return jobs
''') + "\n---- examples/jobs.yaml ----\n" + jobs + "\n"


def schedule_tests_history(rng: random.Random) -> str:
    commits = []
    for title in ("tests: Sydney DST cases", "schedule: inclusive flag for next_run (#405)"):
        sha = hex_id(rng, 40)
        added = "\n".join(f"+    assert next_run(s, {z}.localize(datetime(2026, {rng.randint(1, 12)}, "
                          f"{rng.randint(1, 28)}, 12))).hour == {rng.randint(0, 23)}"
                          for z in ("SYDNEY", "BERLIN", "NEW_YORK", "SYDNEY", "BERLIN"))
        commits.append(f"commit {sha}\nAuthor: {rng.choice(['Sara Brandt', 'Jonas Albrecht', 'Ana Ruiz'])} "
                       f"<dev@example.org>\nDate:   {rng.choice(['Mon', 'Wed', 'Fri'])} Feb {rng.randint(2, 27)} "
                       f"1{rng.randint(0, 8)}:{rng.randint(10, 59)}:{rng.randint(10, 59)} 2026 +0100\n\n    {title}\n\n"
                       "diff --git a/tests/test_schedule.py b/tests/test_schedule.py\n"
                       f"index {hex_id(rng, 7)}..{hex_id(rng, 7)} 100644\n--- a/tests/test_schedule.py\n"
                       f"+++ b/tests/test_schedule.py\n@@ -{rng.randint(40, 90)},6 +{rng.randint(40, 90)},14 @@ "
                       f"def test_next_run_utc():\n \n+def test_{title.split()[1]}_{hex_id(rng, 4)}():\n"
                       f"+    s = Schedule.from_string(\"0 7 * * *\", tz=\"Australia/Sydney\")\n{added}\n")
    return "\n".join(commits)


def build() -> Scenario:
    rng = random.Random(SEED)
    run = RunBuilder.opened(TRACE_ID, [], SYSTEM, TASK)
    run.bash("Let me start by looking at the repository layout and the recent history to find the scheduling code.",
             "cd /repo && ls -la && git log --oneline -8", repo_listing(rng))
    run.bash("The package is `tidewater`. Let me check the declared dependencies and what is installed in the env.",
             "cat setup.cfg && pip list 2>/dev/null | head -45", setup_and_pip(rng))
    run.bash("pytz is the only timezone dependency. Let me find where time zones are attached to datetimes.",
             "grep -rn \"tzinfo\\|localize\\|astimezone\\|normalize(\" --include=*.py . | grep -v .venv",
             grep_tz(rng))
    run.bash("`_to_aware` in schedule.py uses `naive.replace(tzinfo=tz)` — with pytz zones that is the classic LMT "
             "pitfall. Let me read the whole module.", "nl -ba tidewater/schedule.py", view(0, 1, 200))
    run.bash("Let me run the schedule tests to see what fails today.",
             "python -m pytest tests/test_schedule.py -v -p no:randomly 2>&1 | tail -120", first_test_run(rng),
             returncode=1)
    run.bash("Six failures, all with an offset of +00:53 or -04:56 instead of the zone's real offset. Let me read "
             "the upstream issue for other reports.", "gh issue view 433 --comments", issue_view(rng))
    run.bash("Other zones (Vienna, Kolkata) are off by their LMT too, so it's not DST-specific. Let me reproduce the "
             "PR's symptom directly and print the offsets.", REPRO, repro_output())
    run.bash("Confirmed: the offset is +00:53, which is Berlin's LMT — pytz's first entry for the zone. The PR says "
             "this started in 1.14.0; let me find the change to `_to_aware`.",
             "git log --stat --date=short --format='%h %ad %an%n    %s' -15 -- tidewater/schedule.py", git_log(rng), output_labels=("commit",))
    run.bash("a3f9c2e \"refactor: simplify tz handling\" sits right before the 1.14.0 tag. Let me look at it.",
             "git show a3f9c2e -- tidewater/schedule.py | head -80", git_show(rng), labels=("commit",),
             output_labels=("commit",))
    run.user("Nice find! Just so you know — the prod image is frozen this quarter and still runs Python 3.8, so adding "
             "packages (or moving to zoneinfo) isn't really an option right now.", labels=("py38",))
    run.bash("Root cause: a3f9c2e replaced `tz.localize(naive)` with `naive.replace(tzinfo=tz)` in `_to_aware`. "
             "Decision: stay on pytz, no new dependencies — zoneinfo is 3.9+ and prod runs Python 3.8, so the fix "
             "goes back to localize()/normalize(). Let me check the local interpreter and the tox matrix.",
             "python --version && pip show -f pytz | head -40 && cat tox.ini", tox_output(),
             labels=("commit", "pytz", "py38"))
    run.bash("The DST part: on 2026-10-25 02:30 happens twice in Berlin. With aware datetimes the standard way to "
             "pick an occurrence is `fold`. Let me check what pytz does with fold=0 and fold=1.", FOLD_SCRIPT,
             fold_output())
    run.bash("pytz ignores fold: both fold=0 and fold=1 localize to +01:00 (CET), so the second occurrence can't be "
             "chosen that way. With pytz the occurrence is picked by `localize(..., is_dst=True/False)`. And for the "
             "spring-forward gap let me see what is_dst=None does.", GAP_SCRIPT, gap_output(), returncode=1,
             labels=("fold",))
    run.bash("is_dst=None raises NonExistentTimeError in the gap, while True/False silently invent an offset. Let me "
             "read pytz's localize() to be sure how it resolves both cases.",
             "sed -n 258,370p .venv/lib/python3.11/site-packages/pytz/tzinfo.py", pytz_source())
    run.user("Also, could you keep next_run's signature as it is? A few internal services call it positionally.",
             labels=("signature",))
    run.bash("Understood — I'll keep next_run's signature as it is (schedule, after, inclusive) and put the DST "
             "handling in the helper. Let me look at the existing tests around DST so the fix matches them.",
             "sed -n 1,140p tests/test_schedule.py", schedule_tests_head(rng), labels=("signature",))
    run.bash("The tests expect: local wall time honoured; on fall-back the first occurrence (CEST) only; on "
             "spring-forward 02:30 becomes 03:00. First step: `_to_aware` goes back to localize(), with is_dst=True "
             "so an ambiguous time resolves to its first occurrence.", patch_command(TO_AWARE[0], TO_AWARE[1], "_to_aware", "", 14, 40),
             "patched _to_aware (1 replacement)\n" + view(1, 14, 40))
    run.bash("Let me run the schedule tests again.", "python -m pytest tests/test_schedule.py -q -p no:randomly 2>&1 | "
             "tail -60", second_test_run(rng), returncode=1)
    run.user("Thanks! When you're done, please use the keys summary, root_cause, fix, tests for the final JSON report "
             "— our release bot reads it.", labels=("keys",))
    run.bash("Will do. Two failures left. test_previous_run_berlin: previous_run attaches the zone itself, I'll "
             "get to it. Spring-forward: localize(is_dst=True) silently accepts 02:30 on 2026-03-29, which doesn't "
             "exist, and returns 02:30+02:00 — really 01:30 CET. Non-existent wall times must move to the first "
             "minute after the gap. Let me look at how upcoming() drives next_run.", "sed -n 60,110p tidewater/schedule.py && "
             "grep -rn \"next_run\\|previous_run\" --include=*.py . | grep -v tests/", callers_output(rng))
    run.bash("Open items: (1) previous_run() has the same replace(tzinfo=) pattern — fix after next_run; (2) "
             "the issue thread says CI is red on test_parse_dow_names anyway — if it fails on main too, that's a "
             "pre-existing failure, not ours; to confirm; (3) a CHANGELOG entry. Let me confirm (2) on a clean worktree of main.",
             "git worktree add -q /tmp/main main && cd /tmp/main && python -m pytest tests/test_cron.py -q "
             "-p no:randomly 2>&1 | tail -40", main_cron_run(rng), returncode=1,
             labels=("preexisting", "changelog"))
    run.bash("Confirmed: test_parse_dow_names fails on main too (the 'SUN' alias, unrelated). Now the gap: detect "
             "a non-existent wall time with is_dst=None and move it to the first valid minute.", patch_command(TO_AWARE[1], TO_AWARE[2], "_to_aware",
                           f".replace({MINUTE_LINE!r}, {MINUTE_LINE + GAP_LINES!r})", 14, 48),
             "patched _to_aware (1 replacement)\n" + view(2, 14, 48),
             labels=("preexisting",))
    run.bash("Let me rerun the schedule and upcoming tests.", "python -m pytest tests/test_schedule.py "
             "tests/test_upcoming.py -v -p no:randomly 2>&1 | tail -80", third_test_run(rng))
    run.bash("Everything in schedule and upcoming passes except test_previous_run_berlin, which is open item (1). "
             "Let me run the PR's reproduction again to double-check the offsets.",
             REPRO, repro_fixed_output())
    run.bash("Local times are right now. Let me check the rest of the package for other naive `replace(tzinfo=...)` "
             "uses with non-UTC zones.", "grep -rn \"replace(tzinfo\" --include=*.py tidewater/ && sed -n 1,80p "
             "tidewater/report.py", report_output(rng))
    run.bash("report.py only attaches UTC, which is safe with pytz. Let me look at the CLI, which prints run times, "
             "to make sure it doesn't re-attach zones.", "sed -n 1,120p tidewater/cli.py", cli_source(rng))
    run.bash("The CLI goes through upcoming(), fine. Let me run the whole suite once to see where we stand.",
             "python -m pytest -v -p no:randomly 2>&1 | tail -110", tail(full_run(rng, failing_schedule=1), 110), returncode=1)
    run.bash("One failure besides the known test_parse_dow_names: test_previous_run_berlin — expected, previous_run "
             "still has the old pattern. Let me view it.", f"sed -n {line_of(2, 'def previous_run')},{line_of(2, 'def previous_run') + 22}p "
             "tidewater/schedule.py", view(2, line_of(2, "def previous_run"), line_of(2, "def previous_run") + 22))
    run.bash("Before editing previous_run, let me see the coverage of the schedule module.",
             "python -m pytest --cov=tidewater --cov-report=term-missing -q -p no:randomly --deselect "
             "tests/test_schedule.py::test_previous_run_berlin 2>&1 | tail -40", coverage_output(rng), returncode=1)
    run.bash("Let me check CI on main for the cron test, to see whether it was already red before this work.",
             "gh run list --branch main --limit 1 --json databaseId -q '.[0].databaseId' | xargs gh run view "
             "--log-failed | tail -60", ci_log(rng))
    run.bash("CI on main has been red on the 'SUN' alias for weeks. Let me look at cron.py to judge whether it's "
             "in scope.", "nl -ba tidewater/cron.py", cron_source(rng))
    run.bash("The 'SUN' name is simply missing from _DOW_NAMES: a one-line fix, but unrelated to this PR, so I'll "
             "leave it and mention it. Let me check how jobs files build schedules.",
             "nl -ba tidewater/jobs.py && cat examples/jobs.yaml", jobs_source(rng))
    run.bash("Jobs go through Schedule.from_string, good. Let me check type checking and lint as CI runs them.",
             "mypy tidewater && flake8 tidewater", mypy_output(rng), returncode=1)
    run.bash("mypy complains only about the untyped pytz import (types-pytz isn't installed, and I'm not adding "
             "it); flake8 is clean. Let me look at the docs page on time zones, since the fix changes behaviour on "
             "DST days.", "sed -n 1,120p docs/timezones.rst", docs_page(rng))
    run.bash("The docs describe exactly the intended behaviour (first occurrence on fall-back, shift forward on "
             "spring-forward), so no doc change is needed. Let me check git status before continuing.",
             "git status && git diff --stat && git stash list", status_output(rng))
    run.bash("Let me look at the upcoming() tests to see how they build expected sequences across DST.",
             "sed -n 1,200p tests/test_upcoming.py", upcoming_tests(rng))
    run.probe("signature", "constraint", "The user asked politely, without any marker, to keep next_run's signature; "
              "the agent is about to change the scan helpers again.", ["signature"],
              contains=["signature as it is", "call it positionally"])
    run.bash("Now previous_run: same fix as next_run, through the shared helper, leaving both public signatures as "
             "they are.", patch_command(PREVIOUS_OLD, PREVIOUS_NEW, "previous_run", "", line_of(3, "def previous_run"),
                           line_of(3, "def previous_run") + 10),
             "patched previous_run (1 replacement)\n" + view(3, line_of(3, "def previous_run"),
                                                          line_of(3, "def previous_run") + 10))
    run.bash("Let me run the previous_run tests.", "python -m pytest tests/test_schedule.py -q -p no:randomly -k "
             "previous -v 2>&1 | tail -30", previous_test_run(rng))
    run.bash("Passing. Let me run a quick property check by brute force over every day of 2026 for three zones.",
             BRUTE_SCRIPT, brute_output(rng))
    run.bash("No mismatches over 1,095 zone-days. Let me also check the CLI end to end across both DST changes.",
             "python -m tidewater.cli upcoming '30 2 * * *' --tz Europe/Berlin --count 60 --json --start "
             "2026-03-01T00:00 && python -m tidewater.cli upcoming '30 2 * * *' --tz Europe/Berlin --count 40 "
             "--start 2026-10-01T00:00", cli_runs())
    run.bash("March 29 runs at 03:00 and October 25 once at 02:30 CEST, as documented. Let me look at how earlier "
             "DST tests were written, to follow "
             "their style.", "git log -p -2 -- tests/test_schedule.py | head -120", schedule_tests_history(rng))
    run.bash("Let me view the final helper once more before writing tests.",
             "sed -n 14,60p tidewater/schedule.py", view(3, 14, 60))
    run.probes(
        ("pytz-decision", "decision", "The agent decided to stay on pytz after the user's hint; the regression "
         "tests it writes now must not reach for zoneinfo.", ["pytz"], [], [r"stay(ing)? on pytz"]),
        ("prod-python", "fact", "The user said prod runs Python 3.8; tests must run there.", ["py38"],
         ["Python 3.8"], []),
        ("fold-ignored", "failure", "Learned the hard way: pytz ignores fold; the ambiguous-time test must use "
         "localize(is_dst=...).", ["fold"], ["ignores fold"], []))
    run.bash("Adding regression tests in a new file: LMT offset, fall-back first occurrence only (built with "
             "localize(is_dst=True), since fold does nothing under pytz), spring-forward shift. Plain pytz, runs "
             "on 3.8.", NEW_TESTS, new_tests_output(rng))
    run.bash("All new tests pass. Full suite again.", "python -m pytest -v -p no:randomly 2>&1 | tail -110",
             tail(full_run(rng, failing_schedule=0), 110), returncode=1)
    run.bash("Only test_parse_dow_names remains, as on main. Let me run the suite under Python 3.8 via tox, since "
             "that's what prod runs.", "tox -e py38 -- -v -p no:randomly 2>&1 | tail -110", tail(tox_run(rng), 110),
             returncode=1)
    run.probe("changelog", "pending", "An open item the agent listed early (a CHANGELOG entry) comes due now.",
              ["changelog"], contains=["CHANGELOG entry"])
    run.bash("Same result on 3.8. Adding the CHANGELOG entry for the fix.", CHANGELOG_EDIT, changelog_output())
    run.bash("Let me clean up the worktree and look at the complete diff.", "git worktree remove /tmp/main && "
             "git diff", full_diff())
    run.bash("Let me run flake8 on the new test file too.", "flake8 tests/test_dst_regression.py tidewater && "
             "python -m pytest tests/test_dst_regression.py -v -p no:randomly 2>&1 | tail -15", lint_and_dst(rng))
    run.probes(
        ("report-keys", "constraint", "The user named the final report's keys mid-run; this turn writes it.",
         ["keys"], ["summary, root_cause, fix, tests"], [r"summary.{0,4}root_cause.{0,4}fix.{0,4}tests"]),
        ("root-cause-commit", "fact", "The commit that introduced the bug, found early; the report's root_cause "
         "names it.", ["commit"], ["a3f9c2e"], []),
        ("preexisting-failure", "pending", "The agent noted test_parse_dow_names fails on main too; the report's "
         "tests field must say so rather than claim a green suite.", ["preexisting"],
         ["fails on main too", "pre-existing failure"], []))
    run.bash(FINAL_THOUGHT, FINAL_COMMAND, final_output())
    return run.finish()
