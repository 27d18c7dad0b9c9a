"""Plan items (checklists, announced numbered plans, todo tools) and decisions."""

from __future__ import annotations

import json
from dataclasses import replace

from traces import load_traces, requires_traces

from proxy.extract import extract
from proxy.records import DECISION, PLAN, MessageContext
from proxy.state import TaskState


def plan(message: dict, index: int = 6) -> list[tuple[str, str]]:
    """The plan items a message yields, compared without case (test_items_are_kept_as_written checks the case)."""
    facts = extract(message, MessageContext(index=index, ref=f"ev{index}")).facts
    return [(f.key.casefold(), f.value) for f in facts if f.kind == PLAN]


def test_items_are_kept_as_written() -> None:
    facts = extract(assistant("Open items: (1) confirm the CHANGELOG entry for PR-482; (2) ask Mia about CI"),
                    MessageContext(index=4, ref="ev4")).facts
    assert [f.key for f in facts if f.kind == PLAN] == ["confirm the CHANGELOG entry for PR-482", "ask Mia about CI"]
    state = TaskState()
    for fact in facts:
        state.apply_fact(fact)
    state.apply_fact(replace(facts[0], key="Confirm the changelog entry for PR-482", value="completed", turn=9))
    assert [(f.key, f.value) for f in state.of_kind(PLAN)] == [("ask Mia about CI", "pending"),
                                                             ("Confirm the changelog entry for PR-482", "completed")]


def assistant(text: str, calls: list[tuple[str, object]] = ()) -> dict:  # type: ignore[assignment]
    tool_calls = [
        {"id": f"call_{n}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
        for n, (name, args) in enumerate(calls)
    ]
    return {"role": "assistant", "content": text, "tool_calls": tool_calls}


def test_markdown_checklist_in_assistant_and_user_text() -> None:
    text = (
        "Status:\n- [x] Reproduce the bug\n- [ ] Fix **separable.py**\n* [X] ~~Read the docs~~\n- [ ] Run the tests ✅"
    )
    expected = [
        ("reproduce the bug", "completed"),
        ("fix separable.py", "pending"),
        ("read the docs", "completed"),
        ("run the tests", "completed"),
    ]
    assert plan(assistant(text)) == expected
    assert plan({"role": "user", "content": text}) == expected


def test_checklist_items_close_on_the_same_key() -> None:
    before = plan(assistant("- [ ] Run the tests"))
    after = plan(assistant("- [x] Run the tests ✅"))
    assert before == [("run the tests", "pending")] and after == [("run the tests", "completed")]


def test_numbered_plan_announced_by_a_plan_line() -> None:
    text = (
        "Here's my plan:\n1. Reproduce the issue\n2. Fix `_cstack` (done)\n3. ~~Write docs~~\n\nThen I'll report back."
    )
    assert plan(assistant(text)) == [
        ("reproduce the issue", "step"),
        ("fix _cstack", "completed"),
        ("write docs", "completed"),
    ]


def test_weak_cue_needs_steps_that_read_like_steps() -> None:
    steps = "Let me do the following:\n1. Create a reproduction script\n2. Run it\n3. Fix the bug"
    explanation = "Let me trace through what happens:\n1. `_separable(cm)` returns an array\n2. The buggy code sets 1s"
    assert [key for key, _ in plan(assistant(steps))] == ["create a reproduction script", "run it", "fix the bug"]
    assert plan(assistant(explanation)) == []


def test_numbered_lists_without_a_plan_line_are_not_plans() -> None:
    assert plan(assistant("The changes are:\n1. Modified __init__\n2. Updated start_line")) == []


def test_numbered_lists_in_user_text_are_not_plans() -> None:
    assert plan({"role": "user", "content": "My plan:\n1. Book the flight\n2. Pay with the certificate"}) == []


@requires_traces
def test_tau_numbered_questions_are_not_plan_items() -> None:
    messages = next(t for t in load_traces("tau-dev") if t["id"] == "tau-airline/task0/trial0")["messages"]
    assert messages[4]["content"].startswith("Thank you, Mia. Could you please let me know the following details")
    assert plan(messages[4], 4) == []


def test_todo_write_tool_call() -> None:
    todos = {"todos": [
        {"content": "Reproduce the bug", "status": "completed", "activeForm": "Reproducing"},
        {"content": "Fix the parser", "status": "in_progress"},
        {"content": "Add a regression test", "status": "pending"},
        {"content": "Old idea", "status": "cancelled"},
    ]}  # fmt: skip
    assert plan(assistant("", [("TodoWrite", todos)])) == [
        ("reproduce the bug", "completed"),
        ("fix the parser", "pending"),
        ("add a regression test", "pending"),
        ("old idea", "completed"),
    ]


def test_update_plan_and_plain_list_todo_tools() -> None:
    update = {
        "explanation": "x",
        "plan": [{"step": "Read code", "status": "done"}, {"step": "Patch", "status": "pending"}],
    }
    assert plan(assistant("", [("update_plan", update)])) == [("read code", "completed"), ("patch", "pending")]
    assert plan(assistant("", [("write_todos", ["Draft reply", "Send it"])])) == [
        ("draft reply", "pending"),
        ("send it", "pending"),
    ]


def test_other_tools_and_broken_arguments_give_no_plan() -> None:
    message = assistant("", [("bash", {"command": "echo '- [ ] not a plan'"})])
    assert plan(message) == []
    broken = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "todo_write", "arguments": "{not json"}},
    ]}  # fmt: skip
    assert plan(broken) == []


def test_decisions_from_assistant_text() -> None:
    text = "I looked around. I'll use the existing helper instead of a new one. Should I use the cache? The fix is to copy the array."
    facts = extract(assistant(text), MessageContext(index=8)).facts
    assert [(f.key, f.value) for f in facts if f.kind == DECISION] == [
        ("i'll use the existing helper instead of a new one", "I'll use the existing helper instead of a new one."),
        ("the fix is to copy the array", "The fix is to copy the array."),
    ]


def test_decisions_are_capped_per_message() -> None:
    text = " ".join(f"Decision: option {n} is out." for n in range(10))
    facts = extract(assistant(text), MessageContext(index=8)).facts
    assert len([f for f in facts if f.kind == DECISION]) == 3


@requires_traces
def test_swe_decision_sentence() -> None:
    messages = next(t for t in load_traces("swe-dev") if t["id"].endswith("django__django-12470"))["messages"]
    facts = extract(messages[132], MessageContext(index=132)).facts
    assert ("i think the fix is to not use get_order_dir for recursively processed items", DECISION) in [
        (f.key, f.kind) for f in facts
    ]


# ---- labelled open items, TBC items and closing lines ---------------------------------------------------------


def test_labelled_open_items_inline_and_enumerated() -> None:
    assert plan(assistant("Next: lanes 121–240")) == [("lanes 121–240", "next")]  # pending until the next "Next:"
    assert plan(assistant("Open items: (1) freight for supplier C, and (2) supplier F's carton size TBC")) == [
        ("freight for supplier c", "pending"),
        ("supplier f's carton size tbc", "pending"),
    ]
    assert plan(assistant("**TODO:** confirm freight; recheck MOQ")) == [
        ("confirm freight", "pending"),
        ("recheck moq", "pending"),
    ]
    assert plan(assistant("Still to do: call supplier H (see note b) for the MOQ")) == [
        ("call supplier h (see note b) for the moq", "pending"),  # "b)" alone is no enumeration
    ]


def test_labelled_open_items_in_chinese() -> None:
    assert plan(assistant("待办：(1) 确认C的运费 (2) F的箱规")) == [("确认c的运费", "pending"), ("f的箱规", "pending")]
    assert plan(assistant("下一步：抓取第121–240条航线")) == [("抓取第121–240条航线", "next")]
    assert plan(assistant("待确认：供应商F的箱规")) == [("供应商f的箱规", "pending")]


def test_the_list_under_a_label_line() -> None:
    text = "Remaining:\n- freight for C\n- ✅ MOQ for H\n\nThe rest is settled.\n- not an item"
    assert plan(assistant(text)) == [("freight for c", "pending"), ("moq for h", "completed")]


def test_items_to_be_confirmed_anywhere() -> None:
    text = "Quotes are in.\n- Supplier F carton size: TBC\n\nFreight for C is TBD, so I left it out. 运费待定。"
    assert plan(assistant(text)) == [
        ("supplier f carton size: tbc", "pending"),
        ("freight for c is tbd, so i left it out", "pending"),
        ("运费待定", "pending"),
    ]


def test_a_closing_line_completes_the_item_it_names() -> None:
    state = TaskState()
    for index, text in enumerate(["Next: lanes 121–240", "Next: lanes 241–360", "Lanes 121–240 done."]):
        state.apply(extract(assistant(text), MessageContext(index=index)))
    assert [f.key for f in state.pending] == ["lanes 241–360"]
    assert plan(assistant("✅ lanes 241–360")) == [("lanes 241–360", "completed")]
    assert plan(assistant("已完成：第121–240条航线")) == [("第121–240条航线", "completed")]


def test_narration_that_ends_in_done_closes_nothing() -> None:
    text = (
        "I'm done. All done. Our fix is complete. The booking has been successfully completed. "
        "I think my fix is done. Let me check if the migration is done."
    )
    assert plan(assistant(text)) == []


def test_labels_inside_a_line() -> None:
    assert plan(assistant("Lanes 1–120 done (hazmat lanes skipped). Next: lanes 121–240. Starting now.")) == [
        ("lanes 1–120", "completed"),
        ("lanes 121–240", "next"),
    ]
    text = "Decision: full refund. Open item: delay compensation for HAT091 — after the refund. Computing it."
    assert plan(assistant(text)) == [("delay compensation for hat091 — after the refund", "pending")]
    text = "F leaves the packing open — open item: supplier F's carton size TBC; I'll ask them later."
    assert plan(assistant(text)) == [("supplier f's carton size tbc", "pending")]


def test_labels_of_a_text_based_agent() -> None:
    text = "THOUGHT: Open items: (1) previous_run() has the same pattern; (2) a CHANGELOG entry. Let me check (1)."
    assert plan(assistant(text)) == [("previous_run() has the same pattern", "pending"), ("a changelog entry", "pending")]
    assert plan(assistant("THOUGHT: All done. Submitting.")) == []


def test_chinese_labels_inside_a_line_and_under_a_heading() -> None:
    text = "只找到其中 9 个。待办：(1) 37 个 SKU 查不到，需要运营确认；(2) webhook 签名密钥还没有。先看文档。"
    assert plan(assistant(text)) == [("37 个 sku 查不到，需要运营确认", "pending"), ("webhook 签名密钥还没有", "pending")]
    text = "由于还有待确认事项，暂不做最终推荐。\n\n## 待确认\n1. 供应商 F 的装箱数\n2. K 的报价 7 月 15 日到期\n\n## 口径"
    assert plan(assistant(text)) == [("供应商 f 的装箱数", "pending"), ("k 的报价 7 月 15 日到期", "pending")]
