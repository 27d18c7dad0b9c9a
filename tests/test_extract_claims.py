"""A tool output is evidence: what it claims (rules, outcomes) is a fact, its rows are not until the dialogue uses
them. Written as messy as real agents' runs: listings of 50 rows, source files, Makefiles, grep hits."""

from __future__ import annotations

import json

from proxy.extract import extract
from proxy.extract.claims import columns
from proxy.extract.evidence import BUILD, DOCUMENT, LISTING, SEARCH, SOURCE, describe
from proxy.ingest import extract_at
from proxy.policy import StateRules
from proxy.records import CANDIDATE, OUTCOME, RULE, MessageContext, ToolCall
from proxy.state import TaskState, render_state


def bash(command: str) -> ToolCall:
    return ToolCall(id="c1", name="bash", arguments=json.dumps({"command": command}))


def tool_facts(output: str, command: str, index: int = 3) -> list[tuple[str, str, str]]:
    context = MessageContext(index=index, ref=f"ref{index}", call=bash(command))
    facts = extract({"role": "tool", "tool_call_id": "c1", "content": output}, context).facts
    return [(f.kind, f.key, f.value) for f in facts]


def folded(messages: list[dict]) -> TaskState:  # type: ignore[type-arg]
    """The state of a conversation whose task is its message 1, extracted message by message."""
    state = TaskState()
    for index in range(len(messages)):
        state.apply(extract_at(messages, index, f"ref{index}", 1).extraction)
    return state


def one_call_run(task: str, tool: str, arguments: dict, output: str, said: str) -> list[dict]:  # type: ignore[type-arg]
    """A task, one tool call and its output, and what the agent said of it (messages 0-4)."""
    call = {"id": "c1", "type": "function", "function": {"name": tool, "arguments": json.dumps(arguments)}}
    return [{"role": "system", "content": "agent"}, {"role": "user", "content": task},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": output}, {"role": "assistant", "content": said}]


def listing(rows: int) -> str:
    lines = ["total 248"] + [
        f"-rw-r--r--  1 dev staff {1000 + n * 37:>6} Jun 16 09:{n % 60:02d} module_{n:02d}.py" for n in range(rows)]
    return "\n".join(lines)


ISSUE = """title:\tnext_run() returns LMT offsets for Europe/Berlin
state:\tOPEN
author:\tmkowalski
labels:\tbug, timezone
--
author:\trlindqvist (maintainer)
Thanks for the report. Two rules for any patch here: patches must not change the public signature of
next_run(); only add keyword arguments. Also, the fix must keep working on Python 3.8, prod is frozen there.
--
author:\tmkowalski
Happy to help test. What's the release date for 1.14.3? Not yet scheduled, per the milestone page.
"""

SOURCE_FILE = '''def to_aware(naive, tz):
    """Attach tz. The input must be a naive datetime; pytz zones need localize(), never replace()."""
    if naive.tzinfo is not None:
        raise ValueError("naive must not carry tzinfo")
    return tz.localize(naive)
'''


def test_evidence_kind_comes_from_the_command_or_the_shape() -> None:
    assert describe(listing(50), bash("cd /repo && ls -la src/app")).kind == LISTING
    assert describe("a.py:3: x = 1\nb.py:9: y = 2\n", bash("grep -rn parse_date . | head -40")).kind == SEARCH
    assert describe(SOURCE_FILE, bash("cat tidewater/schedule.py")).kind == SOURCE
    assert describe("test: install\n\tpytest -q\n", bash("cat Makefile")).kind == BUILD
    assert describe(ISSUE, bash("gh issue view 433 --comments")).kind == DOCUMENT
    assert describe("   1\timport os\n   2\timport sys\n   3\t\n   4\tdef f():\n", bash("cat -n x | sed -n 1,4p")).kind \
        == SOURCE
    assert describe(listing(40), None).kind == LISTING  # no call: by the shape of its lines


def test_a_maintainers_rule_in_an_issue_comment_is_a_rule() -> None:
    rules = [value for kind, _, value in tool_facts(ISSUE, "gh issue view 433 --comments") if kind == RULE]
    assert "patches must not change the public signature of next_run(); only add keyword arguments." in " ".join(
        rules).lower().replace("\n", " ")
    assert any("Python 3.8" in rule for rule in rules)


def test_no_rule_from_source_code_or_a_failed_command() -> None:
    assert not [f for f in tool_facts(SOURCE_FILE, "cat tidewater/schedule.py") if f[0] == RULE]
    traceback = ("<returncode>1</returncode>\n<output>\nTraceback (most recent call last):\n  File \"x.py\", line 3\n"
                 "ImportError: Extension modules must be successfully compiled and importable in order to import x.\n"
                 "</output>")
    assert not [f for f in tool_facts(traceback, "python -c 'import x'") if f[0] == RULE]


def test_a_chinese_policy_clause_is_a_rule() -> None:
    policy = "退款政策（2026 版）\n\n第 3 条：单笔退款超过 5,000 元必须经财务总监审批，且不得拆分为多笔。\n第 4 条：联系方式见附件。\n"
    rules = [value for kind, _, value in tool_facts(policy, "cat docs/refund-policy.md") if kind == RULE]
    assert rules == ["第 3 条：单笔退款超过 5,000 元必须经财务总监审批，且不得拆分为多笔。"]


def test_listing_rows_and_build_lines_are_candidates_not_facts() -> None:
    makefile = "PYTHON ?= python3\nVENV := .venv\ntest = install\n\ninstall:\n\tpip install -e .\n"
    for output, command in ((listing(58), "ls -la src/app"), (makefile, "cat Makefile")):
        facts = tool_facts(output, command)
        assert {kind for kind, _, _ in facts} <= {CANDIDATE}, facts


def test_bisect_status_fields_and_what_is_not_known_are_outcomes() -> None:
    bisect = ("a3f9c2e71b0d is the first bad commit\ncommit a3f9c2e71b0d\nAuthor: Dev <dev@example.com>\n"
              "Date:   Mon Mar 2 10:12:00 2026\n\n    refactor: simplify tz handling\n\n tidewater/schedule.py | 4 +-\n")
    assert ("git bisect first bad commit", "a3f9c2e71b0d is the first bad commit (refactor: simplify tz handling)") in [
        (key, value) for kind, key, value in tool_facts(bisect, "git bisect good v1.13.0") if kind == OUTCOME]
    answer = ("Approval request APR-20931\nstatus: pending\napprover: Dana Whitfield (Finance)\n"
              "scope: refund of order W-88412 up to $412.70\nexpires: 2026-12-09\nnotes: see policy section 3\n")
    [line] = [value for kind, _, value in tool_facts(answer, "request_approval W-88412") if kind == OUTCOME]
    for part in ("status: pending", "approver: Dana Whitfield (Finance)", "scope: refund of order W-88412 up to $412.70",
                 "expires: 2026-12-09"):
        assert part in line
    unknown = [value for kind, _, value in tool_facts(ISSUE, "gh issue view 433 --comments") if kind == OUTCOME]
    assert any("Not yet scheduled" in value for value in unknown)


def test_a_row_the_dialogue_uses_later_becomes_a_fact_with_the_outputs_ref() -> None:
    log = "\n".join([f"{sha} 2026-03-0{n} dev   chore: bump deps {n}" for n, sha in
                     enumerate(["91c0d2a", "77be310", "a3f9c2e", "5d01e44"], 1)])
    messages = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the Berlin offsets."},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "git log"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": log},
        {"role": "assistant", "content": "a3f9c2e sits right before the 1.14.0 tag; it is the suspect."},
    ]
    state = folded(messages)
    before = render_state(state, "fix", StateRules())
    assert "91c0d2a" not in before and "5d01e44" not in before  # rows nobody singled out stay evidence
    assert "a3f9c2e 2026-03-03" in before and "[ref:ref3]" in before  # the one the agent named, with its output's ref


def test_the_tasks_own_constraints_are_not_copied_into_the_state() -> None:
    messages = [{"role": "system", "content": "agent"},
                {"role": "user", "content": "Fix it. Do NOT modify the tests. Always use non-interactive flags."},
                {"role": "user", "content": "Also: never push to main."}]
    text = render_state(folded(messages), "fix", StateRules(), task=1)
    assert "never push to main" in text.lower()
    assert "modify the tests" not in text.lower() and "non-interactive" not in text.lower()


def test_the_gist_of_rows_says_what_they_are_and_what_was_looked_for() -> None:
    from proxy.extract.actions import tool_output_gist

    assert tool_output_gist(listing(58), 600, bash("cd /repo && ls -la src/app"))[1].startswith(
        "a listing of 59 entries of src/app (59 lines")
    hits = "\n".join(f"src/app/m{n}.py:{n * 3}: d = parse_date(row[{n}])" for n in range(40))
    assert tool_output_gist(hits, 600, bash("grep -rn parse_date src | head -40"))[1].startswith(
        "40 search hits for parse_date")
    assert tool_output_gist(SOURCE_FILE, 600, bash("cat tidewater/schedule.py"))[1].startswith(
        "the source of tidewater/schedule.py")
    # a few rows are the point: the first one is shown
    assert tool_output_gist("./astropy/modeling/separable.py\n", 600, bash("find . -name separable.py"))[1].startswith(
        "./astropy/modeling/separable.py")


def test_an_approval_the_user_gives_keeps_its_ticket_approver_and_scope() -> None:
    from proxy.records import APPROVAL

    asked = "The refund of order W-88412 ($412.70) needs your approval. Shall I proceed with the refund?"
    answer = "Yes: approved under ticket APR-20931, approver Dana Whitfield (Finance), refund only, up to $412.70."
    facts = extract({"role": "user", "content": answer},
                    MessageContext(index=9, ref="r9", previous_assistant_text=asked)).facts
    lines = render_state(_state_of(facts), "refund", StateRules())
    assert "granted; Yes: approved under ticket APR-20931, approver Dana Whitfield (Finance), refund only, up to" in lines
    # stated without being asked
    said = extract({"role": "user", "content": "FYI: OPS-118 is approved by Mia Chen for staging only."},
                   MessageContext(index=4, ref="r4")).facts
    assert [(f.key, f.value) for f in said if f.kind == APPROVAL] == [
        ("OPS-118", "granted; FYI: OPS-118 is approved by Mia Chen for staging only.")]


def test_a_tools_approval_answer_names_who_approves_and_until_when() -> None:
    from proxy.records import APPROVAL

    answer = json.dumps({"request": {"id": "APR-20931", "status": "pending_finance_approval",
                                     "approver": "Dana Whitfield", "scope": "refund W-88412", "expires_at": "2026-12-09"}})
    facts = extract({"role": "tool", "tool_call_id": "c1", "content": answer},
                    MessageContext(index=5, ref="r5", call=ToolCall("c1", "request_approval", "{}"))).facts
    [approval] = [f for f in facts if f.kind == APPROVAL]
    assert approval.value == ("pending_finance_approval; approver: Dana Whitfield; scope: refund W-88412; "
                              "expires_at: 2026-12-09")
    text = render_state(_state_of(facts), "refund", StateRules())
    assert "Approvals awaited:" in text and "approver: Dana Whitfield" in text  # awaited, not settled by "expires"


def _state_of(facts: tuple) -> TaskState:  # type: ignore[type-arg]
    state = TaskState()
    for fact in facts:
        state.apply_fact(fact)
    return state


BENCH = """invoicekit bench_render  n=5000 invoices
candidate                                   p50 ms   p95 ms   p99 ms   MB/s
------------------------------------------ -------- -------- -------- -------
baseline (3.4.0)                              201.4    388.9    502.3     9.1
A: memo dict per invoice                      214.9    412.7    547.1    10.2
B: precomputed rate table                     206.3    398.2    519.8     8.7
total wall time: 71.2s
"""


def test_the_column_the_dialogue_names_is_a_fact_with_every_candidates_figure_side_by_side() -> None:
    messages = one_call_run("Make render faster.", "bash", {"command": "make bench"}, BENCH,
                            "B wins at p95 and allocates less. Decision: going with candidate B.")
    state = folded(messages)
    dialogue = "Make render faster.\0" + messages[4]["content"]
    text = render_state(state, "faster", StateRules(), focus=dialogue)
    assert "p95 ms: baseline (3.4.0)=388.9; A: memo dict per invoice=412.7; B: precomputed rate table=398.2" in text
    assert "p99" not in text  # a column nobody named stays in the output, recalled by ref
    assert "412.7" not in render_state(state, "faster", StateRules(), focus="Make render faster.\0nothing")


def test_json_inside_a_shell_tools_wrapper_is_read_as_json() -> None:
    from proxy.records import APPROVAL

    body = json.dumps({"changes": [{"id": "APR-20931", "state": "approved", "approved_by": "Wang Lei",
                                    "scope": "staging-eu only"}]})
    output = f"<returncode>0</returncode>\n<output>\nHTTP/1.1 200 OK\ncontent-type: application/json\n\n{body}\n</output>"
    approvals = [(kind, key, value) for kind, key, value in tool_facts(output, "curl -s -i https://changes/api")
                 if kind == APPROVAL]
    assert approvals == [(APPROVAL, "changes APR-20931", "approved; approved_by: Wang Lei; scope: staging-eu only")]


def test_a_data_frames_columns_are_read_under_their_own_headers() -> None:
    """pandas prints its index without a header and leaves empty cells blank: each figure keeps its own column's
    name (a price filed under the duty rate would be a wrong fact, worse than none)."""
    frame = ("   currency  incoterm  usd_pc  landed_usd    moq  note\n"
             "A       USD       FOB  2.8600      2.9700  10000      \n"
             "B       USD       DDP  2.7100      2.7100  12000  late\n"
             "C       CNY       EXW  2.3724      2.8524   8000      \n")
    found = dict(columns(frame))
    assert found["usd"] == "usd_pc: A=2.8600; B=2.7100; C=2.3724"
    assert found["landed"] == "landed_usd: A=2.9700; B=2.7100; C=2.8524"
    assert found["moq"] == "moq: A=10000; B=12000; C=8000"
    assert not any("USD" in line.split(": ", 1)[1] for line in found.values())


def test_a_quotes_confidentiality_footer_is_one_rule_without_its_bank_details() -> None:
    """Every supplier's quote ends with the same clause after its own bank account: one rule, stated once."""
    footers = [f"报价单 Q{n}\n\n开户行：中国银行{city}分行 账号：{596178329705 + n} 本报价单内容仅供贵司内部使用，未经我司书面同意不得向第三方披露。"
               for n, city in enumerate(("杭州", "金华", "苏州"))]
    found = {fact for footer in footers for fact in tool_facts(footer, "read_quote") if fact[0] == RULE}
    assert [value for _, _, value in found] == ["本报价单内容仅供贵司内部使用，未经我司书面同意不得向第三方披露。"]


def test_a_column_is_named_by_a_word_of_the_dialogue_not_inside_one_and_the_newest_few_are_shown() -> None:
    bands = ("lane      low      high     trend\n"
             "SHA-RTM   405.17   549.68   2177.36\n"
             "NGB-HAM   123.72   167.84   1984.02\n")
    messages = one_call_run("Budget the Q3 freight.", "python", {"code": "bands()"}, bands,
                            "Every lane stays below budget; following the trend as planned.")
    state = folded(messages)
    text = render_state(state, "budget", StateRules(), focus="Budget the Q3 freight.\0" + messages[4]["content"])
    assert "405.17" not in text and "2177.36" in text  # "trend" is named; "below" names no "low" column
    asked = render_state(state, "budget", StateRules(max_named_columns=1),
                         focus="Budget.\0What are the low/high bands and the trend?")
    assert "trend: SHA-RTM=2177.36; NGB-HAM=1984.02" in asked and "low:" not in asked  # the newest one only
