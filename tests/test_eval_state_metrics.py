"""What the eval says workset's own text is made of (dump rows, copies of the task) and the SWE checks of a coding
run's last requests (files changed, the decision on the fix, false passes), on small hand-made lines and runs
whose answers are known."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from proxy.evaluate.metrics import dump_row, task_copy, text_counts, workset_sections
from proxy.evaluate.run import MessageTokens, evaluate
from proxy.evaluate.strategies import ForwardAll, Forwarded
from proxy.evaluate.swe import (
    changed_files,
    commands,
    decision_index,
    false_pass,
    key_sentence,
    looks_like_coding,
    passed_lines,
    repo_files,
    first_changes,
    sentence_kept,
    swe_check,
)
from proxy.evaluate.textagent import to_text_agent
from proxy.tokens import TokenCounter

COUNTER = TokenCounter()


# --- dump rows ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("line,kind", [
    ("- drwxr-xr-x  2 root root  4096 Jun  3 10:12 src [ref:0a1b2c3d4e5f]", "listing"),
    ("- -rw-r--r-- 1 root root 319802 Oct 24  2024 CHANGES.rst", "listing"),
    ("- ./django/contrib/admin/helpers.py [ref:4c1cf2598a4b]", "listing"),
    ("- pytz               2024.1", "listing"),
    ('- File "/testbed/astropy/__init__.py", line 41, in [ref:2cb430e14715]', "frame"),
    ("- tests/test_x.py::test_parse PASSED                              [  8%]", "log"),
    ("- platform linux -- Python 3.11.9, pytest-8.2.2, pluggy-1.5.0", "log"),
    ("- collected 12 items", "log"),
    ("- Successfully installed pytz-2024.1", "log"),
    ("- 329.0/329.0 kB 13.2 MB/s eta 0:00:00 [ref:5757f8d754a5]", "log"),
    ("- mypy_extensions-1.0.0-py3-none-any.whl (106.5 kB) [ref:5757f8d754a5]", "log"),
    ("- src/tidewater/schedule.py:27:    return moment.astimezone(tz)", "grep"),
    ("- ./django/contrib/auth/models.py:from .validators import [ref:362891c8ab35]", "grep"),
    ("- PYTHON ?= python3", "doc"),
    ("- requires-python = \">=3.8\"", "doc"),
    ("- .PHONY: test lint", "doc"),
    ("- ## Installation", "doc"),
    ("- django/core/validators [ref:952aac12e084]: py=netloc = urlsplit(value).netloc", "source"),
    ("- def next_run(schedule, after, inclusive=False):", "source"),
    ("- from django.conf import settings [ref:6c458a5386a9]", "source"),
    # a digest line or a placeholder is judged by the raw output it carries
    ('- turn 12 bash {"command": "ls -la"} -> ok: total 48 (52 lines) [ref:ab12cd34ef56]', "listing"),
    ("[workset] bash output elided: ./src/a/b.py (40 lines) [ref:ab12cd34ef56]", "listing"),
])
def test_raw_output_copied_into_workset_text_is_a_dump_row(line: str, kind: str) -> None:
    assert dump_row(line) == kind


@pytest.mark.parametrize("line", [
    "## Task state (kept by workset from this conversation; values are exact, [ref:ID] can be recalled)",
    "Verification:",
    "- [ ] import logging at the top of the file",
    "- python -m pytest tests/test_schedule.py: passed [ref:7df79142439a]",
    "- turn 22 assistant: def-ault handling is wrong; the fix is to localize() [ref:b17dc231c1b3]",
    '- turn 36 bash {"command": "cp a.py a.py.bak"} -> ok: (no output) [ref:5d419a240ad6]',
    '- bash {"command": "python t.py"} -> exit 1: ModuleNotFoundError: No module named \'numpy\' (3 lines) [ref:0b]',
    "- approval = APR-2291 [ref:ab12cd34ef56]",
    "- status: approved",
    "- file: src/tidewater/schedule.py",  # a state line naming a file is a fact, not find's output
    "- abc1234 is the first bad commit",
    "- The fix is to attach zones with localize() instead of replace(tzinfo=...).",
    "[workset] bash output elided: 6 failed, 31 passed in 0.93s [ref:ab12cd34ef56]",
])
def test_workset_structure_and_facts_are_not_dump_rows(line: str) -> None:
    assert dump_row(line) is None


TASK = """<pr_description>
Scheduled jobs fire at the wrong local time.
</pr_description>
DO NOT MODIFY: Tests, configuration files (pyproject.toml, setup.cfg, etc.)
Always use non-interactive flags (-y, -f) for commands"""

COMPACTED = """[workset] Earlier turns of this conversation were compacted by workset, the context proxy.

## Task state (kept by workset from this conversation; values are exact, [ref:ID] can be recalled)
Goal: Scheduled jobs fire at the wrong local time.
Constraints (always apply):
- DO NOT MODIFY: Tests, configuration files (pyproject.toml, setup.cfg, etc.)
- Always use non-interactive flags (-y, -f) for commands
- Keep next_run's signature as it is.
Key facts (from tool outputs, by what they describe):
- ./tidewater/schedule.py [ref:0a1b2c3d4e5f]
- drwxr-xr-x  2 root root  4096 Jun  3 10:12 tests [ref:0a1b2c3d4e5f]
- a3f9c2e is the first bad commit [ref:0a1b2c3d4e5f]

## Earlier steps (extractive digest)
- turn 8 bash {"command": "ls -la"} -> ok: total 48 (52 lines) [ref:ab12cd34ef56]
- turn 10 assistant: Let me read the module. [ref:ab12cd34ef56]"""


def test_task_copies_are_state_lines_the_task_already_says() -> None:
    assert task_copy("- DO NOT MODIFY: Tests, configuration files (pyproject.toml, setup.cfg, etc.)", TASK)
    assert task_copy("Goal: Scheduled jobs fire at the wrong local time.", TASK)
    assert not task_copy("- Keep next_run's signature as it is.", TASK)
    assert not task_copy("- fire", TASK)  # too short to be a copy rather than a shared word


def test_text_counts_split_the_state_into_dump_rows_task_copies_and_the_rest() -> None:
    counts = text_counts(workset_sections([{"role": "user", "content": COMPACTED}]), TASK)
    # state items: Goal, 3 constraints, 3 key facts; two facts are dump rows, the goal and 2 constraints copies
    assert counts.state_lines == 7
    assert counts.state_dump_rows == 2
    assert counts.state_task_copies == 3
    assert counts.dump_rows == 3  # the digest's `ls -la` gist too
    assert dict(counts.kinds) == {"listing": 3}


# --- SWE checks ---------------------------------------------------------------------------------------------------

def call(call_id: str, command: str, text: str = "", tool: str = "bash") -> dict[str, Any]:
    arguments = {"command": command} if tool == "bash" else json.loads(command)
    return {"role": "assistant", "content": text or None, "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": tool, "arguments": json.dumps(arguments)}}]}


def result(call_id: str, output: str, code: int = 0) -> dict[str, Any]:
    content = f"<returncode>{code}</returncode>\n<output>\n{output}</output>"
    return {"role": "tool", "tool_call_id": call_id, "content": content}


DECISION = ("The offset is the zone's LMT. The fix is to attach zones with localize() instead of "
            "replace(tzinfo=...), which picks the first offset pytz knows. Let me patch it.")
RUN = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": TASK},
    call("c1", "grep -rn replace src/", "Let me find where zones are attached."),
    result("c1", "src/tidewater/schedule.py:22:    return naive.replace(tzinfo=tz)\n"),
    call("c2", "cat > reproduce.py <<'EOF'\nfrom tidewater import next_run\nprint(next_run())\nEOF\n"
               "python reproduce.py", "Let me reproduce it."),
    result("c2", "2026-01-15T02:30:00+00:53\n"),
    call("c3", "sed -i 's/naive.replace(tzinfo=tz)/tz.localize(naive)/' src/tidewater/schedule.py", DECISION),
    result("c3", ""),
    call("c4", "cd /repo && python - <<'EOF'\nopen('CHANGELOG.md', 'a').write('- fixed\\n')\nEOF", "Changelog."),
    result("c4", ""),
    call("c5", "echo broken > src/tidewater/cli.py", "This one fails."),
    result("c5", "bash: src/tidewater/cli.py: Permission denied\n", 1),
    call("c6", "python -m pytest tests/test_schedule.py -q", "Run the tests."),
    result("c6", "F.\nFAILED tests/test_schedule.py::test_berlin - AssertionError\n1 failed, 1 passed\n", 1),
    call("c7", "git diff > patch.txt && cat patch.txt", "Done."),
    result("c7", "diff --git a/src/tidewater/schedule.py b/src/tidewater/schedule.py\n"),
]


def test_changed_files_are_the_successful_edits_but_scratch() -> None:
    found = commands(RUN)
    assert changed_files(found) == ["reproduce.py", "src/tidewater/schedule.py", "CHANGELOG.md"]
    # the reproduction script did not exist before the agent wrote it; the CHANGELOG was never shown either
    assert repo_files(RUN, first_changes(found)) == ["src/tidewater/schedule.py"]


@pytest.mark.parametrize("command,files", [
    ("sed -i.bak -e 's/a/b/' pkg/a.py pkg/b.py", ["pkg/a.py", "pkg/b.py"]),
    ("cat <<'EOF' > pkg/new.py\nx = 1\nEOF", ["pkg/new.py"]),
    ("printf 'x' | tee pkg/t.txt /tmp/scratch.txt", ["pkg/t.txt"]),
    ("python3 -c \"open('pkg/c.py', 'w').write('x')\"", ["pkg/c.py"]),
    ("cat > fix.patch <<'EOF'\n--- a/pkg/d.py\n+++ b/pkg/d.py\n@@ -1 +1 @@\nEOF\npatch -p1 < fix.patch",
     ["fix.patch", "pkg/d.py"]),
    ("cat > edit.py <<'EOF'\nfrom pathlib import Path\np = Path('pkg/e.py')\np.write_text('x')\nEOF\npython edit.py",
     ["edit.py", "pkg/e.py"]),
    ("cat > note.py <<'EOF'\nopen('pkg/f.py', 'w')\nEOF", ["note.py"]),  # written, never run: f.py is untouched
    ("python script.py > out.log 2>/dev/null", []),
])
def test_each_way_of_editing_a_file_is_found(command: str, files: list[str]) -> None:
    run = [RUN[0], RUN[1], call("c1", command), result("c1", "")]
    assert changed_files(commands(run)) == files


def test_editor_tool_calls_are_edits_but_their_views() -> None:
    run = [RUN[0], RUN[1],
           call("c1", json.dumps({"command": "view", "path": "pkg/a.py"}), tool="str_replace_editor"),
           {"role": "tool", "tool_call_id": "c1", "content": "def f(): ..."},
           call("c2", json.dumps({"command": "str_replace", "path": "pkg/a.py", "old_str": "a", "new_str": "b"}),
                tool="str_replace_editor"),
           {"role": "tool", "tool_call_id": "c2", "content": "The file pkg/a.py has been edited."},
           call("c3", json.dumps({"path": "pkg/b.py", "content": "x"}), tool="write_file"),
           {"role": "tool", "tool_call_id": "c3", "content": "Error: permission denied"}]
    assert changed_files(commands(run)) == ["pkg/a.py"]


def test_the_decision_is_the_prose_of_the_first_edit_of_an_existing_source_file() -> None:
    assert decision_index(RUN) == 6  # not the reproduction script at 4
    assert key_sentence(DECISION).startswith("The fix is to attach zones with localize()")
    # the same run as a text-based agent sends it: one bash block per message, outputs as user messages
    text_run = to_text_agent({"id": "t", "tools": [], "messages": RUN})["messages"]
    assert decision_index(text_run) == 6
    assert changed_files(commands(text_run)) == changed_files(commands(RUN))


def test_a_sentence_is_kept_by_its_first_80_normalized_characters() -> None:
    sentence = key_sentence(DECISION)
    assert sentence_kept(sentence, "- " + " ".join(sentence.upper().split())[:85] + " … [ref:0a1b]")
    assert not sentence_kept(sentence, "The fix is to attach zones with localize().")


def test_a_passed_line_is_false_when_the_latest_output_of_its_command_failed() -> None:
    state = ["Verification:", "- python -m pytest tests/test_schedule.py -q: passed [ref:0a1b2c3d4e5f]",
             "- python reproduce.py: passed [ref:0a1b2c3d4e5f]", "- python never_ran.py: passed",
             "Key facts (from tool outputs, by what they describe):", "- x.py: passed"]
    assert passed_lines(state) == ["python -m pytest tests/test_schedule.py -q", "python reproduce.py",
                                   "python never_ran.py"]
    found = commands(RUN)
    assert false_pass("python -m pytest tests/test_schedule.py -q", found) is True  # FAILED, exit 1
    assert false_pass("python reproduce.py", found) is False
    assert false_pass("python never_ran.py", found) is None


def test_a_pass_the_live_tail_says_has_failed_since_is_not_claimed() -> None:
    """The frozen head says a check passed; the changes at the tail say its latest run failed: the state as a whole
    claims the failure, not a pass (and a later pass, or "passed since", claims the pass again)."""
    head = ["Verification:", "- pytest -q: passed [ref:0a1b2c3d4e5f]", "- python repro.py: passed [ref:0a1b2c3d4e5f]"]
    tail = ["## Task state since the compaction above (kept by workset)", "Verification:",
            "- pytest -q: unclear: AttributeError: 'NoneType' object has no attribute '_meta' [ref:1b2c3d4e5f6a]"]
    assert passed_lines(head + tail) == ["python repro.py"]
    fixed = ["- pytest -q: AttributeError: 'NoneType' … [ref:1b2c3d4e5f6a] — passed since [ref:2c3d4e5f6a7b]"]
    assert passed_lines(head + tail + fixed) == ["pytest -q", "python repro.py"]


def test_swe_check_of_one_request() -> None:
    request = RUN[:14]
    state = ["## Task state (kept by workset)", "Verification:",
             "- python -m pytest tests/test_schedule.py -q: passed [ref:0a1b2c3d4e5f]",
             "Key facts (from tool outputs, by what they describe):", "- /repo/src/tidewater/schedule.py [ref:0a]"]
    sent = [RUN[0], RUN[1], {"role": "user", "content": "[workset] ...\n" + "\n".join(state)}, *RUN[12:14]]
    check = swe_check(request, sent, state)
    assert (check.files, check.files_named, check.repo_files, check.repo_files_named) == (3, 1, 1, 1)
    assert check.decision is False  # the decision's message was dropped and the state does not say it
    assert (check.passes, check.false_passes) == (1, 1)
    assert swe_check(request, request, []).decision is True


def test_only_coding_runs_are_checked() -> None:
    assert looks_like_coding(RUN)
    chat = [RUN[0], RUN[1], {"role": "assistant", "content": "Which flight?"}, {"role": "user", "content": "HAT1"}]
    assert not looks_like_coding(chat)


class KeepsEverythingButTheDecision:
    """Forwards everything but the decision's message, plus a state naming the edited file and a listing row."""

    name = "stateful"
    budget = 100_000

    def forward(self, trace_id: str, messages: list[dict[str, Any]], tools: Any) -> Forwarded:
        state = {"role": "user", "content": "[workset] compacted\n\n## Task state (kept by workset)\n"
                                            "- changed: src/tidewater/schedule.py [ref:0a1b2c3d4e5f]\n"
                                            "- drwxr-xr-x  2 root root  4096 Jun  3 10:12 tests [ref:0a1b2c3d4e5f]"}
        kept = [m for i, m in enumerate(messages) if i != 6]
        return Forwarded([*kept[:2], state, *kept[2:]])

    def close(self) -> None:
        pass


def test_evaluate_reports_dump_rows_swe_checks_and_per_trace_figures() -> None:
    trace = {"id": "hand/swe", "tools": [], "probes": {}, "messages": RUN}
    rows = {row.policy: row for row in evaluate([trace], [ForwardAll(100_000), KeepsEverythingButTheDecision()],
                                                 COUNTER, tokens_of=MessageTokens(COUNTER)).rows}
    stateful, none = rows["stateful"], rows["none"]
    assert stateful.workset_requests == 7 and stateful.dump_rows_mean == 1.0 and stateful.dump_rows_max == 1
    assert stateful.dump_kinds == {"listing": 7}
    assert stateful.state_dump_share == 0.5 and stateful.state_task_copy_share == 0.0
    assert none.workset_requests == 0 and none.dump_rows_mean is None
    # the last three requests: turns 10, 12, 14; the decision (turn 6) is before each
    assert stateful.swe["requests"] == 3 and stateful.swe["decision_kept"] == 0.0
    assert none.swe["decision_kept"] == 1.0 and none.swe["stated"] == 0
    assert stateful.swe["repo_files_in_state"] == 1.0
    last = stateful.per_trace[-1]
    assert last["trace"] == "hand/swe" and last["dump_rows"] == 1 and last["state_tokens"] > 0


# --- as a user runs it ---------------------------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent


def test_per_trace_flag_prints_each_trace_and_json_holds_the_new_figures(tmp_path: Path) -> None:
    out_json = tmp_path / "eval.json"
    result = subprocess.run(
        [sys.executable, "-m", "proxy", "eval", "scenarios", "--limit", "2", "--policy", "default", "--per-trace",
         "--json", str(out_json)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    assert ("| trace | strategy | probes kept | state tok (last) | dump rows (last) | workset tok (last 3, max) | "
            "tokens vs none |") in result.stdout
    assert "| scenario-coding-pytz-textbased | default |" in result.stdout
    assert "| dump rows mean | dump rows max |" in result.stdout
    rows = {row["policy"]: row for row in json.loads(out_json.read_text())["rows"]}
    default = rows["default"]
    assert [item["trace"] for item in default["per_trace"]] == ["scenario-procurement-20-quotes",
                                                                 "scenario-coding-pytz-textbased"]
    assert all(item["state_tokens"] > 0 for item in default["per_trace"])
    # workset's own text at the last requests is bounded (digest.own_max_tokens and the live tail), and what was
    # forwarded is a share of what forwarding everything sends
    assert all(0 < item["workset_tokens_last"] <= 2_700 for item in default["per_trace"])
    everything = {item["trace"]: item["tokens"] for item in rows["none"]["per_trace"]}
    assert all(0 < item["tokens"] < 0.5 * everything[item["trace"]] for item in default["per_trace"])
    assert default["workset_requests"] > 0 and default["dump_rows_max"] >= default["dump_rows_mean"] > 0
    assert default["state_task_copy_share"] == 0  # the task is forwarded verbatim: the state copies none of it
    # the text-based coding run is the one coding run of the two: its last three requests are checked
    assert default["swe"]["requests"] == 3 and rows["none"]["swe"]["decision_kept"] == 1.0
    without = subprocess.run([sys.executable, "-m", "proxy", "eval", "scenarios", "--limit", "1", "--policy",
                              "default"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert "| trace | strategy |" not in without.stdout


def test_a_text_agents_command_is_its_bash_block_not_a_snippet_in_its_prose() -> None:
    message = {"role": "assistant", "content": "THOUGHT: The bug is here:\n\n```python\nreturn a + b\n```\n\n"
                                               "Let me fix it.\n\n```bash\nsed -i 's/a + b/a - b/' pkg/calc.py\n```"}
    run = [RUN[0], RUN[1], message, {"role": "user", "content": "<returncode>0</returncode>\n<output>\n</output>"}]
    found = commands(run)
    assert [c.text for c in found] == ["sed -i 's/a + b/a - b/' pkg/calc.py"]
    assert changed_files(found) == ["pkg/calc.py"]


def test_the_states_own_lines_of_changes_checks_and_refusals_are_not_dump_rows() -> None:
    from proxy.evaluate.metrics import dump_row

    for line in ("- src/invoicekit/tax/rounding.py: written (write_file) [ref:1c60b903d5f9]",
                 "- metricsd/ingest/regions.py: edited (sed -i) [ref:19551643d774]",
                 "- python -m pytest -v: failed: FAILED tests/test_tax.py::test_nl - ValueError: x [ref:3c4d]",
                 "- python -m pytest tests/test_tax.py -v: failed [ref:faecb1ede12f] — passed since [ref:b6993cd4469a]",
                 "- 403: key lacks scope lanes:write (at https://partner.example/v3/lanes/1) [ref:1601fe8fef85]"):
        assert dump_row(line) is None, line
    for line in ("- src/app/models.py:12: def parse_date(value):", "- 41:        return value.strip()"):
        assert dump_row(line) == "grep", line
