"""Constraints from user turns: real tau and SWE turns, Chinese rules, and what must not count as a rule."""

from __future__ import annotations

from traces import load_traces, requires_traces

from proxy.extract import extract
from proxy.extract.constraints import MAX_CONSTRAINTS, constraints
from proxy.records import CONSTRAINT, Fact, MessageContext


def user_constraints(text: str, index: int = 3, first: bool = False) -> list[Fact]:
    context = MessageContext(index=index, ref=f"r{index}", is_first_user=first)
    facts = extract({"role": "user", "content": text}, context).facts
    return [fact for fact in facts if fact.kind == CONSTRAINT]


def trace_message(name: str, trace_id: str, index: int) -> dict:
    trace = next(t for t in load_traces(name) if t["id"] == trace_id)
    return trace["messages"][index]


@requires_traces
def test_tau_user_refusing_insurance_is_a_constraint() -> None:
    message = trace_message("tau-dev", "tau-airline/task0/trial0", 5)
    facts = extract(message, MessageContext(index=5, ref="ev5")).facts
    rules = [(f.key, f.value, f.turn, f.evidence_ref) for f in facts if f.kind == CONSTRAINT]
    assert rules == [("no, i do not want travel insurance", "No, I do not want travel insurance.", 5, "ev5")]


@requires_traces
def test_tau_time_window_is_a_constraint_but_the_question_after_it_is_not() -> None:
    message = trace_message("tau-dev", "tau-airline/task0/trial0", 11)
    rules = [f.value for f in extract(message, MessageContext(index=11)).facts if f.kind == CONSTRAINT]
    assert rules == ["Neither of those options works for me as I don't want to fly before 11 AM EST."]


@requires_traces
def test_swe_task_keeps_its_instructions_and_skips_the_pasted_code() -> None:
    message = trace_message("swe-dev", "swe/deepseek_chat_test_1-100/astropy__astropy-12907", 1)
    facts = extract(message, MessageContext(index=1, is_first_user=True)).facts
    rules = [f.value for f in facts if f.kind == CONSTRAINT]
    assert "Do NOT commit your changes." in rules
    assert "DO NOT MODIFY: Tests, configuration files (pyproject.toml, setup.cfg, etc.)" in rules
    assert "Your response MUST include AT LEAST ONE bash tool call." in rules
    assert "Avoid interactive tools like vi, nano, or any that require user input" in rules
    assert len(rules) <= MAX_CONSTRAINTS
    assert not any("separability_matrix" in rule or ">>>" in rule for rule in rules)  # code blocks are skipped


def test_same_rule_repeated_has_one_key() -> None:
    first = user_constraints("Please   do NOT add travel insurance.")
    again = user_constraints("please do not add travel insurance")
    assert first[0].key == again[0].key == "please do not add travel insurance"
    assert first[0].value == "Please   do NOT add travel insurance."


def test_chinese_rules_split_on_full_width_punctuation() -> None:
    text = "你好。你必须在周五之前完成。不要删除任何文件！别用特别的方法；这个很好。"
    assert [f.value for f in user_constraints(text)] == [
        "你必须在周五之前完成。",
        "不要删除任何文件！",
        "别用特别的方法；",
    ]


def test_bie_inside_other_words_is_not_a_rule() -> None:
    assert user_constraints("这个和那个有区别。特别感谢你的帮助。") == []


def test_values_are_as_written_and_keys_are_normalized() -> None:
    text = "Requirements:\n- **Never** push to main\n* Only use `uv` for installs\n3. <b>Budget is at most $500</b>"
    facts = user_constraints(text)
    assert [f.value for f in facts] == [
        "**Never** push to main",
        "Only use `uv` for installs",
        "Budget is at most $500",
    ]
    assert [f.key for f in facts] == ["never push to main", "only use uv for installs", "budget is at most $500"]


def test_self_descriptions_and_questions_are_not_rules() -> None:
    text = (
        "I don't remember my reservation ID. I'll make sure to find it. Can you only show direct flights? "
        "The passenger details are the same as before. I'm the only passenger."
    )
    assert user_constraints(text) == []


def test_fenced_code_and_stack_traces_are_skipped() -> None:
    text = (
        "Here is the failure:\n```\nif x is None:\n    # never do this\n    raise ValueError('must not be None')\n```\n"
        'Traceback (most recent call last):\n  File "a.py", line 3, in <module>\n'
        "ValueError: must not be None\nPlease never change the public API."
    )
    assert [f.value for f in user_constraints(text)] == ["Please never change the public API."]


def test_hard_wrapped_paragraph_is_one_sentence() -> None:
    text = "You must keep the public\nAPI stable across the\nwhole refactor. Thanks!"
    assert [f.value for f in user_constraints(text)] == [
        "You must keep the public API stable across the whole refactor."
    ]


def test_cap_keeps_strong_rules_before_weak_ones_in_text_order() -> None:
    weak = " ".join(f"Item {n} ships only on Mondays." for n in range(40))
    text = f"{weak}\nYou must sign every commit. Never force-push."
    found = constraints(text)
    assert len(found) == MAX_CONSTRAINTS
    assert found[-2:] == [
        ("you must sign every commit", "You must sign every commit."),
        ("never force-push", "Never force-push."),
    ]
    assert found[0] == ("item 0 ships only on mondays", "Item 0 ships only on Mondays.")


def test_constraints_come_from_user_turns_only() -> None:
    context = MessageContext(index=2)
    for role in ("assistant", "tool", "system"):
        facts = extract({"role": role, "content": "You must never do this."}, context).facts
        assert [f for f in facts if f.kind == CONSTRAINT] == []
