"""The pure working-set functions on small hand-made conversations."""

from __future__ import annotations

from dataclasses import replace

import pytest

from proxy.extract.names import message_names
from proxy.hashing import chain, ref_of
from proxy.messages import message_text
from proxy.policy import BudgetRules, Policy, ToolOutputRules
from proxy.report import KEPT, REMOVED, account_changes
from proxy.session import epoch_to_dict
from proxy.tokens import Excerpter, TokenCounter
from proxy.workingset import (
    COMPACTED,
    REPEATED,
    VERBATIM,
    WORKSET_TAG,
    Budget,
    BuiltPrefix,
    Conversation,
    build,
    extend_prefix,
    pinned_indices,
    plan_compaction,
    segment,
    with_tail_state,
)

COUNTER = TokenCounter()
EXCERPT = Excerpter(COUNTER)


def conversation(messages: list[dict]) -> Conversation:
    hashes = chain("root", messages)
    tools = [("bash" if m["role"] == "tool" else "") for m in messages]
    gists = [(f"exit 0: line of {i}" if m["role"] == "tool" else "") for i, m in enumerate(messages)]
    outcomes = [("ok" if m["role"] == "tool" else "") for m in messages]
    return Conversation(messages, hashes, [ref_of(h) for h in hashes], [COUNTER.message(m) for m in messages],
                        tools, gists, outcomes)


def agent_run(steps: int, output_words: int = 60) -> list[dict]:
    messages = [{"role": "system", "content": "You are a coding agent."},
                {"role": "user", "content": "Fix the bug in parser.py. Never edit tests."}]
    for step in range(steps):
        call_id = f"call_{step}"
        messages.append({"role": "assistant", "content": f"Step {step}: look at file_{step}.py",
                         "tool_calls": [{"id": call_id, "type": "function",
                                         "function": {"name": "bash", "arguments": f'{{"command": "cat file_{step}.py"}}'}}]})
        messages.append({"role": "tool", "tool_call_id": call_id,
                         "content": " ".join(f"word{step}_{i}" for i in range(output_words))})
    return messages


def planned(conv: Conversation, units: list, previous, rules: Policy, budget: Budget, state: str = ""):
    """plan_compaction with `state` as the frozen head state (the engine renders it after planning)."""
    epoch = plan_compaction(conv, units, previous, rules, budget, 0, COUNTER.cached_text(state), COUNTER, EXCERPT)
    return replace(epoch, head_state=state)


def policy(**budget: object) -> Policy:
    return replace(Policy(), recent_turns=3, budget=replace(BudgetRules(), **budget))


def test_segment_groups_tool_results_with_their_call() -> None:
    messages = agent_run(2)
    assert segment(messages) == [(0, 0), (1, 1), (2, 3), (4, 5)]


def test_segment_refuses_orphan_and_unanswered_tool_calls() -> None:
    messages = agent_run(2)
    assert segment(messages[:3]) is None  # a call without its result
    orphan = messages[:2] + [{"role": "tool", "tool_call_id": "nope", "content": "x"}]
    assert segment(orphan) is None


def test_segment_accepts_ids_reused_across_turns() -> None:
    messages = agent_run(2)
    for message in messages:
        if message.get("tool_calls"):
            message["tool_calls"][0]["id"] = "same"
        if message["role"] == "tool":
            message["tool_call_id"] = "same"
    assert segment(messages) is not None


def test_without_epoch_everything_is_forwarded_verbatim() -> None:
    messages = agent_run(3)
    result = build(conversation(messages), None, policy(), COUNTER, EXCERPT)
    assert result.messages == messages
    assert result.tokens == sum(COUNTER.message(m) for m in messages)


def test_oversized_recent_output_keeps_head_tail_and_ref() -> None:
    messages = agent_run(1, output_words=3000)
    small = replace(Policy(), tool_outputs=ToolOutputRules(max_tokens=500, head_tokens=100, tail_tokens=50))
    conv = conversation(messages)
    result = build(conv, None, small, COUNTER, EXCERPT)
    shown = result.messages[-1]["content"]
    assert shown.startswith("word0_0 word0_1")
    assert shown.rstrip().endswith("word0_2999")
    assert f"[ref:{conv.refs[-1]}]" in shown
    assert COUNTER.text(shown) < 250


def test_compaction_masks_old_outputs_removes_oldest_turns_and_reaches_target() -> None:
    messages = agent_run(30)
    conv = conversation(messages)
    rules = policy(max_input_tokens=4000)
    budget = Budget.of(rules, 4000)
    units = segment(messages)
    assert units is not None
    epoch = planned(conv, units, None, rules, budget, "## Task state\nGoal: fix")
    result = build(conv, epoch, rules, COUNTER, EXCERPT)
    assert result.tokens <= budget.target
    # system prompt and task first, verbatim; then the compacted message with state and digest
    assert result.messages[:2] == messages[:2]
    assert result.messages[2]["role"] == "user" and "## Task state" in result.messages[2]["content"]
    assert "## Earlier steps" in result.messages[2]["content"]
    # the newest turns are verbatim
    assert result.messages[-6:] == messages[-6:]
    # the oldest turns left; the digest keeps the agent's own words of every one of them (with refs), and folds
    # the oldest tool-call lines into a count first
    assert messages[2] not in result.messages
    digest = result.messages[2]["content"]
    newest = max(i for i in epoch.removed(1) if messages[i]["role"] == "assistant")
    assert f"- turn {newest} assistant: {messages[newest]['content']} [ref:{conv.refs[newest]}]" in digest
    lines = [line for line in digest.splitlines() if line.startswith("- turn ")]
    prose = [line for line in lines if " assistant: " in line]
    assert len(prose) > len(lines) - len(prose), "tool-call lines fold before the agent's prose"
    assert f"({epoch.folded_steps} earlier steps folded" in digest and epoch.folded_steps > 0


def test_masked_outputs_become_placeholders_with_ref() -> None:
    messages = agent_run(8)
    conv = conversation(messages)
    rules = policy(max_input_tokens=4000, target_ratio=0.7)
    units = segment(messages)
    assert units is not None
    epoch = planned(conv, units, None, rules, Budget.of(rules, 4000), "")
    result = build(conv, epoch, rules, COUNTER, EXCERPT)
    placeholders = [m for m in result.messages if m["role"] == "tool" and m["content"].startswith(WORKSET_TAG)]
    assert placeholders, "old outputs should be elided before whole turns are removed"
    first = placeholders[0]
    index = next(i for i, m in enumerate(messages) if m.get("tool_call_id") == first["tool_call_id"])
    assert f"[ref:{conv.refs[index]}]" in first["content"] and "bash" in first["content"]


def test_prefix_is_stable_between_compactions() -> None:
    messages = agent_run(30)
    rules = policy(max_input_tokens=4000)
    units = segment(messages[:40])
    assert units is not None
    conv = conversation(messages[:40])
    epoch = planned(conv, units, None, rules, Budget.of(rules, 4000), "state")
    before = build(conv, epoch, rules, COUNTER, EXCERPT).messages
    after = build(conversation(messages[:44]), epoch, rules, COUNTER, EXCERPT).messages
    assert after[: len(before)] == before
    assert after[len(before):] == messages[40:44]


def test_second_compaction_anchors_on_the_first_digest() -> None:
    messages = agent_run(40)
    rules = policy(max_input_tokens=4000)
    budget = Budget.of(rules, 4000)
    first_conv = conversation(messages[:40])
    first = planned(first_conv, segment(messages[:40]) or [], None, rules, budget, "")
    conv = conversation(messages)
    second = planned(conv, segment(messages) or [], first, rules, budget, "")
    assert second.removed_through > first.removed_through
    assert second.digest_lines[: len(first.digest_lines)] == first.digest_lines or second.folded_steps > 0


def test_pinned_messages_are_never_removed() -> None:
    messages = agent_run(20)
    messages.insert(10, {"role": "user", "content": "Also: do not touch setup.py."})
    messages.append({"role": "user", "content": "Status?"})
    conv = conversation(messages)
    rules = policy(max_input_tokens=3000)
    epoch = planned(conv, segment(messages) or [], None, rules, Budget.of(rules, 3000), "")
    result = build(conv, epoch, rules, COUNTER, EXCERPT)
    for index in pinned_indices(messages):
        assert messages[index] in result.messages


def test_tail_state_never_splits_a_tool_call_from_its_results() -> None:
    tail = {"role": "user", "content": "state"}
    messages = agent_run(1)
    assert with_tail_state(messages, tail)[-1] is tail
    prefill = messages + [{"role": "assistant", "content": "Sure,"}]
    placed = with_tail_state(prefill, tail)
    assert placed[-2] is tail and placed[-1]["content"] == "Sure,"


@pytest.mark.parametrize("steps", [5, 25])
def test_build_is_deterministic(steps: int) -> None:
    messages = agent_run(steps)
    rules = policy(max_input_tokens=3000)
    conv = conversation(messages)
    epoch = planned(conv, segment(messages) or [], None, rules, Budget.of(rules, 3000), "s")
    assert build(conv, epoch, rules, COUNTER, EXCERPT) == build(conversation(messages), epoch, rules, COUNTER, EXCERPT)


def reminder(text: str, as_system: bool) -> dict:
    """Claude Code's reminder as it reaches the core: a system message, or (when it sends no system turns) a user
    message of <system-reminder> text after the tool results."""
    if as_system:
        return {"role": "system", "content": text}
    return {"role": "user", "content": [{"type": "text", "text": f"<system-reminder>\n{text}\n</system-reminder>"}]}


@pytest.mark.parametrize("as_system", [True, False])
@pytest.mark.parametrize("count", [1, 3])
def test_reminders_after_the_newest_tool_result_never_take_its_place(as_system: bool, count: int) -> None:
    messages = agent_run(20) + [reminder(f"The user hasn't heard from you ({n}).", as_system) for n in range(count)]
    conv = conversation(messages)
    rules = replace(policy(max_input_tokens=3000), recent_turns=1)
    epoch = planned(conv, segment(messages) or [], None, rules, Budget.of(rules, 3000), "")
    result = build(conv, epoch, rules, COUNTER, EXCERPT)
    assert epoch.masked_through > 0, "the plan compacted"
    # the newest call, its result and the reminders after them, as sent
    assert result.messages[-(2 + count):] == messages[-(2 + count):]


def test_the_latest_user_turn_is_the_users_not_a_reminder_after_it() -> None:
    messages = agent_run(3) + [{"role": "assistant", "content": "Done?"}, {"role": "user", "content": "Status?"},
                               reminder("Note: parser.py was modified by the user.", as_system=False)]
    pinned = pinned_indices(messages)
    assert {len(messages) - 3, len(messages) - 2} <= pinned  # the user's question and the reply it answers


def with_reminders(steps: int, every: int, text: str = "The task tools haven't been used recently.") -> list[dict]:
    """An agent run with the same system reminder after every `every`-th tool result, as Claude Code sends it."""
    messages = agent_run(steps)
    out = messages[:2]
    for step in range(steps):
        out += messages[2 + 2 * step: 4 + 2 * step]
        if step % every == every - 1:
            out.append({"role": "system", "content": text})
    return out


def test_a_compaction_keeps_one_copy_of_a_repeated_reminder_at_its_latest_place() -> None:
    messages = with_reminders(20, every=3)
    messages.insert(5, {"role": "system", "content": "The task tools haven't been used recently!"})  # differs
    messages.append({"role": "system", "content": messages[0]["content"]})  # the system prompt, sent again
    messages += agent_run(21)[-2:]
    conv = conversation(messages)
    rules = policy(max_input_tokens=6000)
    epoch = planned(conv, segment(messages) or [], None, rules, Budget.of(rules, 6000), "")
    result = build(conv, epoch, rules, COUNTER, EXCERPT)
    reminder = {"role": "system", "content": "The task tools haven't been used recently."}
    copies = [i for i, m in enumerate(messages) if m == reminder]
    assert len(copies) == 6 and result.messages.count(reminder) == 1
    # at its latest place: after the output of the tool round it followed in the request
    at = result.messages.index(reminder)
    assert result.messages[at - 1]["tool_call_id"] == messages[copies[-1] - 1]["tool_call_id"]
    # the system prompt and the one that differs stay, the system prompt's later copy too (it is the latest)
    assert result.messages[0] == messages[0] and messages[5] in result.messages
    assert result.messages.count(messages[0]) == 2
    # the record says what became of each copy
    prefix = extend_prefix(BuiltPrefix(epoch.key), conv, epoch, rules, COUNTER, EXCERPT)
    codes = [code for code in prefix.codes if code != COMPACTED]
    assert [codes[i] for i in copies] == [REPEATED] * 5 + [VERBATIM]
    # and show-turn reads it so: each earlier copy removed as a repeat, naming where it is forwarded
    changes = account_changes(messages, list(conv.hashes), list(conv.refs), "".join(prefix.codes), "", {},
                              {"epoch": {"reason": "budget"}}, epoch_to_dict(epoch))
    told = {change.index: change for change in changes if change.index in copies}
    assert [told[i].kind for i in copies] == [REMOVED] * 5 + [KEPT]
    assert all(told[i].into == "repeat" and f"at its latest place (at [{copies[-1]}])" in told[i].rule
               for i in copies[:-1])


def test_copies_of_a_reminder_that_arrive_after_a_compaction_stay_until_the_next() -> None:
    messages = with_reminders(24, every=3)
    rules = policy(max_input_tokens=6000)
    budget = Budget.of(rules, 6000)
    first = planned(conversation(messages[:40]), segment(messages[:40]) or [], None, rules, budget, "")
    before = build(conversation(messages[:40]), first, rules, COUNTER, EXCERPT).messages
    after = build(conversation(messages), first, rules, COUNTER, EXCERPT).messages
    assert after[: len(before)] == before and after[len(before):] == messages[40:]  # the prefix is byte-identical
    second = planned(conversation(messages), segment(messages) or [], first, rules, budget, "")
    again = build(conversation(messages), second, rules, COUNTER, EXCERPT).messages
    assert again.count(messages[-1]) == 1 and again[-1] == messages[-1]  # the next compaction: once, the latest


def named_conversation(messages: list[dict]) -> Conversation:
    """conversation() with each message's index names, as ingest finds them."""
    conv = conversation(messages)
    return replace(conv, names=[message_names(m, message_text(m)) for m in messages])


def test_the_names_index_holds_the_names_the_dialogue_used_not_every_name_an_output_showed() -> None:
    listing = "\n".join(["setup.py", "parser/lexer.py", "parser/grammar_rules.py", "docs/conf_extra.py"] +
                        [f"tests/test_case_{n}.py" for n in range(30)])
    traceback = ("Traceback (most recent call last):\n  File \"/opt/lib/site-packages/pip/_internal/cli/base_command.py\""
                 ", line 160, in exc_logging_wrapper\nValueError: bad token in tokenize_line")
    messages = agent_run(2)
    messages[2]["content"] = "Listing the package, then I will read parser/lexer.py and fix tokenize_line."
    messages[3]["content"] = listing + "\n" + traceback + "\nticket PO-2231 opened, paid with credit_card_4421486"
    messages[4]["content"] = "The lexer keeps the grammar_rules table; checking grammar_rules once more."
    messages[5]["content"] = "grammar_rules = load_rules()\n" + "filler " * 40
    messages += agent_run(12)[6:]  # later turns, in which the first ones are elided
    conv = named_conversation(messages)
    rules = policy(max_input_tokens=3000)
    epoch = planned(conv, segment(messages) or [], None, rules, Budget.of(rules, 3000), "")
    assert {2, 3, 4, 5} <= set(epoch.removed(1)), "the first turns left"
    index = set(epoch.names)
    assert {"parser/lexer.py", "tokenize_line"} <= index  # the dialogue used them
    assert {"PO-2231", "credit_card_4421486"} <= index  # ids a tool handed out
    assert "grammar_rules" in index  # two elided messages showed it
    # the rest of the listing and the traceback's frames: one output showed each, the dialogue never used them
    assert not {"tests/test_case_7.py", "docs/conf_extra.py", "exc_logging_wrapper"} & index
    assert not any("site-packages" in name for name in index)
    only_dialogue = replace(rules, digest=replace(rules.digest, names_seen_in=0))
    epoch = planned(conv, segment(messages) or [], None, only_dialogue, Budget.of(rules, 3000), "")
    assert "grammar_rules" in epoch.names  # the dialogue used it (messages[4])
    assert "load_rules" not in epoch.names


def test_the_placeholders_of_kept_turns_count_against_worksets_text() -> None:
    """digest.own_max_tokens bounds what workset writes into the prefix: the placeholders of outputs masked in the
    kept turns take their share first, the compacted message gets the rest (at least a token: never "no limit"),
    and excerpts (mostly the output's own text) do not count."""
    from proxy.workingset import EXCERPTED, MASKED, head_room

    messages = agent_run(8, output_words=700)
    conv = conversation(messages)
    rules = replace(policy(max_input_tokens=4000, target_ratio=0.7),
                    tool_outputs=ToolOutputRules(max_tokens=500, head_tokens=100, tail_tokens=50))
    units = segment(messages)
    assert units is not None
    epoch = planned(conv, units, None, rules, Budget.of(rules, 4000), "")
    prefix = extend_prefix(BuiltPrefix(epoch.key), conv, epoch, rules, COUNTER, EXCERPT)
    kinds = {key.split(":", 1)[0] for key, _ in prefix.made}
    assert {MASKED, EXCERPTED} <= kinds, kinds
    written = sum(COUNTER.message(message, generated=True) for key, message in prefix.made
                  if key.startswith(MASKED + ":"))
    assert head_room(2300, prefix) == 2300 - written
    assert head_room(written, prefix) == 1
    assert head_room(0, prefix) == 0


def test_the_names_index_gets_what_the_state_and_digest_leave_of_worksets_text() -> None:
    """digest.own_max_tokens bounds workset's text at the head (head_room): the state and the digest come first, the names
    index (most useful first) is cut to what they leave, and a name they already show is not listed again."""
    from proxy.workingset import Epoch, compacted_message, names_within

    names = ("parse_ts", "metricsd/ingest/window.py") + tuple(f"helper_{n:03d}" for n in range(300))
    epoch = Epoch(tip=40, tip_hash="h", digest_lines=("- turn 12 assistant: Reading window.py next. [ref:0a1b]",),
                  names=names, head_state="## Task state\nDecisions:\n- convert at parse_ts [ref:1b2c]")
    kept = names_within(epoch, 400, COUNTER).names
    assert "parse_ts" not in kept and kept[0] == "metricsd/ingest/window.py"  # shown by the state, not twice
    assert kept == names[1:len(kept) + 1] and len(kept) < len(names) - 1  # the first ones, in order
    message = compacted_message(names_within(epoch, 400, COUNTER))
    assert message is not None and COUNTER.text(message_text(message)) <= 400
    assert len(names_within(epoch, 0, COUNTER).names) == len(names) - 1  # no cap: only what is shown elsewhere goes
