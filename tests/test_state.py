"""The task state's key facts: objects as one-line cards, ranked by what the dialogue names, left out when in view."""

from __future__ import annotations

import json
from dataclasses import replace

from proxy.extract.facts import json_facts
from proxy.policy import StateRules
from proxy.records import CONSTRAINT, FIELD, Fact
from proxy.state import TaskState, render_state
from proxy.tokens import TokenCounter

COUNTER = TokenCounter()
RULES = StateRules()

USER = {"name": {"first_name": "Mia", "last_name": "Li"}, "dob": "1990-04-05",
        "payment_methods": {"certificate_7504069": {"source": "certificate", "amount": 250, "id": "certificate_7504069"},
                            "credit_card_4421486": {"source": "credit_card", "last_four": "7447",
                                                    "id": "credit_card_4421486"}},
        "reservations": ["NO6JO3", "AIXC49"]}
FLIGHTS = [{"flight_number": f"HAT{n:03d}", "origin": "JFK", "destination": "ATL", "price": 100 + n} for n in range(8)]


def state_of(*outputs: tuple[int, object, str, bool]) -> TaskState:
    """A state from JSON tool outputs: (turn, data, root, whether the call's arguments named the root)."""
    state = TaskState()
    for turn, data, root, named in outputs:
        for key, value in json_facts(data, root, named_root=named):
            state.apply_fact(Fact(FIELD, key, value, turn, f"ref{turn}", "tool"))
    return state


def facts_section(text: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Key facts"))
    return lines[start + 1:]


def test_an_object_is_one_card_with_its_named_parts_nested() -> None:
    state = state_of((3, USER, "mia_li_3668", True))
    [card] = facts_section(render_state(state, "book a flight", RULES))
    assert card == (
        "- mia_li_3668 [ref:ref3]: name{first_name=Mia; last_name=Li}; dob=1990-04-05; "
        "payment_methods{certificate_7504069{source=certificate; amount=250}; "
        "credit_card_4421486{source=credit_card; last_four=7447}}; reservations=[NO6JO3, AIXC49]"
    )  # the payment methods stay with their owner; an id repeating its object's name is left out


def test_objects_the_user_named_come_first_then_what_the_dialogue_named_last() -> None:
    state = state_of((3, USER, "mia_li_3668", True), (5, FLIGHTS, "search_direct_flight", False))
    focus = "my user id is mia_li_3668\0my user id is mia_li_3668\nHAT002 or HAT005?"
    cards = facts_section(render_state(state, "book", RULES, focus=focus))
    assert [card.split(" ", 2)[1] for card in cards[:3]] == ["mia_li_3668", "HAT005", "HAT002"]


def test_objects_are_shown_whole_within_max_facts() -> None:
    state = state_of((3, USER, "mia_li_3668", True), (5, FLIGHTS, "search_direct_flight", False))
    rules = replace(RULES, max_facts=17)  # the user card has 11 facts, a flight 4: one flight fits, not a cut one
    cards = facts_section(render_state(state, "book", rules, focus="mia_li_3668\0"))
    assert len(cards) == 2 and cards[0].startswith("- mia_li_3668") and "reservations=[NO6JO3, AIXC49]" in cards[0]


def test_objects_in_view_are_left_out() -> None:
    state = state_of((3, USER, "mia_li_3668", True), (5, FLIGHTS[:1], "search_direct_flight", False))
    cards = facts_section(render_state(state, "book", RULES, in_view={5}))
    assert len(cards) == 1 and cards[0].startswith("- mia_li_3668")  # HAT000's output is shown as sent
    assert facts_section(render_state(state, "book", RULES, in_view={3}))[0].startswith("- HAT000")


def test_a_card_that_does_not_fit_is_cut_and_constraints_stay_whole() -> None:
    state = state_of((3, USER, "mia_li_3668", True))
    state.apply_fact(Fact(CONSTRAINT, "no insurance", "No, I do not want travel insurance.", 2, None, "user"))
    full = render_state(state, "book", RULES, focus="mia_li_3668\0")
    limit = COUNTER.text(full) - 20
    text = render_state(state, "book", RULES, limit, COUNTER.text, focus="mia_li_3668\0")
    assert COUNTER.text(text) <= limit
    assert "- No, I do not want travel insurance." in text
    [card] = facts_section(text)
    assert card.startswith("- mia_li_3668 [ref:ref3]: name{first_name=Mia") and card.endswith(" …")


def test_json_parts_stay_under_their_named_whole_but_listed_objects_name_themselves() -> None:
    reservation = {"reservation_id": "JG7FMM", "flights": [{"flight_number": "HAT028", "price": 1859},
                                                         {"flight_number": "HAT277", "price": 140}]}
    assert dict(json_facts(reservation, "get_reservation_details")) == {
        "JG7FMM.reservation_id": "JG7FMM",
        "JG7FMM.flights.HAT028.flight_number": "HAT028", "JG7FMM.flights.HAT028.price": "1859",
        "JG7FMM.flights.HAT277.flight_number": "HAT277", "JG7FMM.flights.HAT277.price": "140",
    }
    assert dict(json_facts(FLIGHTS[:1], "search_direct_flight"))["HAT000.price"] == "100"


def test_an_object_read_again_replaces_its_earlier_snapshot() -> None:
    used = {**USER, "payment_methods": {"credit_card_4421486": USER["payment_methods"]["credit_card_4421486"]}}
    state = state_of((3, USER, "mia_li_3668", True), (9, used, "mia_li_3668", True))
    [card] = facts_section(render_state(state, "book", RULES))
    assert "certificate_7504069" not in card and "credit_card_4421486{source=credit_card" in card
    assert card.startswith("- mia_li_3668 [ref:ref9]")


def test_the_agents_next_step_is_replaced_by_its_next_one_and_settled_approvals_give_way() -> None:
    from proxy.extract import extract
    from proxy.records import MessageContext

    state = TaskState()
    for turn in range(30):
        said = {"role": "assistant", "content": f"Batch {turn} read. Next: review batch {turn + 1}"}
        state.apply(extract(said, MessageContext(index=2 * turn + 2, ref=f"a{turn}")))
        output = {"role": "tool", "content": json.dumps([{"id": f"PO-{turn}-{n}", "status": "approved"} for n in range(5)]
                                                       + [{"id": f"CR-{turn}", "status": "pending_approval"}])}
        state.apply(extract(output, MessageContext(index=2 * turn + 3, ref=f"t{turn}")))
    text = render_state(state, "review", StateRules(), 600, COUNTER.text)
    assert [line for line in text.splitlines() if line.startswith("- [ ]")] == ["- [ ] review batch 30"]
    awaited = text.split("Approvals awaited:", 1)[1].split("\n\n")[0]
    assert all(f"CR-{turn}: pending_approval" in awaited for turn in range(30))  # never cut
    assert text.count(": approved") <= StateRules().max_settled_approvals and COUNTER.text(text) < 1500


def test_changes_since_the_frozen_state_name_what_is_no_longer_so() -> None:
    from proxy.records import PLAN, VERIFICATION
    from proxy.state import NO_LONGER_OPEN, state_changes

    state = TaskState()
    state.apply_fact(Fact(PLAN, "Add a CHANGELOG entry", "pending", 4, "r4", "assistant"))
    state.apply_fact(Fact(PLAN, "fix previous_run()", "pending", 4, "r4", "assistant"))
    state.apply_fact(Fact(VERIFICATION, "pytest tests/test_schedule.py", "failed", 6, "r6", "tool"))
    frozen = render_state(state, "fix", RULES)
    assert state_changes(frozen, frozen) == ""
    state.apply_fact(Fact(PLAN, "Fix previous_run()", "completed", 9, "r9", "assistant"))
    state.apply_fact(Fact(VERIFICATION, "pytest tests/test_schedule.py", "passed", 11, "r11", "tool"))
    changes = state_changes(frozen, render_state(state, "fix", RULES)).splitlines()
    assert changes[1] == f"{NO_LONGER_OPEN} fix previous_run()"
    assert "- pytest tests/test_schedule.py: passed [ref:r11]" in changes
    assert not any("CHANGELOG" in line for line in changes)  # still open: the frozen state says so already


def test_the_tail_leaves_out_a_check_whose_verdict_is_unchanged_and_names_files_first() -> None:
    """A failing check the frozen state showed with its error line, rendered now without it (newer failures took
    the detail), is no change: the tail repeats nothing the prefix says, and the files changed since come before
    the checks, so a cut at state.changes_max_tokens drops checks first."""
    from proxy.state import state_changes

    frozen = "\n".join(["## Task state", "Verification:",
                        "- python test_logic.py: failed: Some tests failed! [ref:r5]",
                        "- python -m pytest -q: passed [ref:r6]"])
    now = "\n".join(["## Task state", "Verification:", "- python test_logic.py: failed [ref:r5]",
                     "- python -m pytest -q: failed [ref:r9]", "- python check.py: passed [ref:r10]",
                     "Files changed (latest change of each):", "- src/http.py: edited (sed -i) [ref:r8]"])
    lines = state_changes(frozen, now).splitlines()
    assert lines[1:] == ["Files changed since: src/http.py", "Verification:", "- python -m pytest -q: failed [ref:r9]",
                         "- python check.py: passed [ref:r10]"]


def test_after_a_compaction_the_tail_says_what_changed_and_the_prefix_stays(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from test_phases import engine, work

    eng = engine(tmp_path, enabled=False)
    messages = work(2) + [{"role": "assistant", "content": "Open items: (1) fix previous_run; (2) add a CHANGELOG entry"},
                          {"role": "user", "content": "ok"}] + work(40)[2:]
    results = []
    for end in range(2, len(messages) + 1):
        if messages[end - 1]["role"] == "assistant":
            continue
        results.append(eng.prepare({"model": "m", "messages": messages[:end]}, "caller", "s", "p"))
        eng.settle(results[-1])
    assert any(r.compacted for r in results) and not results[-1].compacted
    previous = results[-1].body["messages"]
    head = next(i for i, m in enumerate(previous) if "fix previous_run" in str(m.get("content")) and i > 1)
    assert "Task state since" not in str(previous[-1]["content"])
    messages += [{"role": "assistant", "content": "fix previous_run done."}, {"role": "user", "content": "go on"}]
    eng.settle(eng.prepare({"model": "m", "messages": messages}, "caller", "s", "p"))
    # the changes come from the state as of the last settled request (settling waits until the provider has it)
    messages += [{"role": "assistant", "content": "Going on."}, {"role": "user", "content": "ok"}]
    after = eng.prepare({"model": "m", "messages": messages}, "caller", "s", "p")
    sent = after.body["messages"]
    assert not after.compacted and sent[:head + 1] == previous[:head + 1]  # the frozen state, byte for byte
    tail = str(sent[-1]["content"])
    assert "Task state since the compaction" in tail and "No longer open (done or dropped): fix previous_run" in tail


def _coding_run() -> TaskState:
    """A coding agent's tool results, as a text agent's observations would bring them: a fix script written in
    one call and run in a later one, an edit, a test that fails and then passes, a tool output full of facts."""
    from proxy.extract import extract
    from proxy.records import MessageContext, ToolCall

    ok = "<returncode>0</returncode>\n<output>\n</output>"
    fix = ("cd /testbed && cat > /tmp/fix_Offsets.py << 'EOF'\npath = 'src/tz/Offsets.py'\n"
           "with open(path) as f:\n    text = f.read()\nwith open(path, 'w') as f:\n"
           "    f.write(text.replace('> 14', '>= 14'))\nEOF")
    failing = ("<returncode>1</returncode>\n<output>\nTraceback (most recent call last):\n"
               "  File \"/testbed/reproduce.py\", line 3, in <module>\n"
               "ValueError: ERR_TZ_0042 timezone offset out of range\n</output>")
    listing = "<returncode>0</returncode>\n<output>\n" + "".join(
        f"src/tz/zone_{n}.py:{n}: OFFSET_{n} = {n}\n" for n in range(200)) + "</output>"
    steps = [
        ("cd /testbed && grep -rn OFFSET src/", listing),
        ("cd /testbed && python reproduce.py", failing),
        (fix, ok),
        ("cd /testbed && sed -i 's/14/15/' src/tz/Offsets.py && sed -i 's/x/y/' docs/CHANGES.rst", ok),
        ("python /tmp/fix_Offsets.py", ok),  # later than the sed: its write is the file's latest change
        ("cd /testbed && python reproduce.py", "<returncode>0</returncode>\n<output>\n+14:00 -> 14:00:00\n</output>"),
        ("rm -f /testbed/docs/CHANGES.rst", ok),
    ]
    state = TaskState()
    for index, (command, output) in enumerate(steps):
        call = ToolCall(id=f"c{index}", name="bash", arguments=json.dumps({"command": command}))
        message = {"role": "tool", "tool_call_id": call.id, "content": output}
        state.apply(extract(message, MessageContext(index=2 * index + 3, ref=f"t{2 * index + 3}", call=call)))
    return state


def test_files_changed_and_where_the_checks_stand_are_never_cut_for_room() -> None:
    state = _coding_run()
    full = render_state(state, "fix the offset bound", RULES)
    assert "OFFSET_0" not in full  # 200 grep hits are evidence, not 200 facts
    text = render_state(state, "fix the offset bound", RULES, 50, COUNTER.text)
    changed = text.split("Files changed (latest change of each):\n", 1)[1].splitlines()
    assert changed == [
        "- src/tz/Offsets.py: written (python /tmp/fix_Offsets.py) [ref:t11]",  # value as written, case kept
        "- docs/CHANGES.rst: deleted (rm) [ref:t15]",
    ]  # the script itself is under /tmp: not a file of the task
    assert ("- python reproduce.py: ValueError: ERR_TZ_0042 timezone offset out of range [ref:t5] — passed since "
            "[ref:t13]") in text.splitlines()


def test_files_changed_are_capped_newest_first_and_in_the_checkpoint() -> None:
    from proxy.state import state_snapshot

    state = _coding_run()
    capped = render_state(state, "fix", replace(RULES, max_files_changed=1))
    assert "- docs/CHANGES.rst: deleted (rm) [ref:t15]" in capped and "Offsets.py: written" not in capped
    assert "Files changed" not in render_state(state, "fix", replace(RULES, max_files_changed=0))
    snapshot = state_snapshot(state, "fix")
    assert [row["key"] for row in snapshot["files_changed"]] == ["src/tz/Offsets.py", "docs/CHANGES.rst"]
    assert snapshot["failures"] == [{"key": "python reproduce.py", "value": "ValueError: ERR_TZ_0042 timezone offset "
                                     "out of range", "turn": 5, "ref": "t5", "passed_since": "t13"}]


def test_announced_steps_close_when_a_check_passes_after_a_file_changed_and_give_way_to_a_new_plan() -> None:
    from proxy.extract import extract
    from proxy.records import PLAN, MessageContext, ToolCall

    def tool(index: int, command: str, output: str) -> None:
        call = ToolCall(id=f"c{index}", name="bash", arguments=json.dumps({"command": command}))
        state.apply(extract({"role": "tool", "tool_call_id": call.id, "content": output},
                            MessageContext(index=index, ref=f"t{index}", call=call)))

    def said(index: int, text: str) -> None:
        state.apply(extract({"role": "assistant", "content": text}, MessageContext(index=index, ref=f"a{index}")))

    state = TaskState()
    said(2, "Here's my plan:\n1. Reproduce the bug\n2. Fix `_cstack` in separable.py")
    said(4, "Here's my plan:\n1. Fix `_cstack` in separable.py\n2. Run the separable tests")
    assert [f.key for f in state.pending] == ["Fix _cstack in separable.py", "Run the separable tests"]
    ok = "<returncode>0</returncode>\n<output>\n</output>"
    tool(5, "cd /testbed && python -m pytest astropy/modeling/tests/test_separable.py -q",
         "<returncode>0</returncode>\n<output>\n12 passed in 0.30s\n</output>")
    assert len(state.pending) == 2  # tests passing before any change close nothing
    tool(7, "cd /testbed && sed -i 's/= 1$/= right/' astropy/modeling/separable.py", ok)
    tool(9, "cd /testbed && python -m pytest astropy/modeling/tests/test_separable.py -q",
         "<returncode>0</returncode>\n<output>\n13 passed in 0.31s\n</output>")
    assert state.pending == [] and {f.key for f in state.of_kind(PLAN)} == {
        "Fix _cstack in separable.py", "Run the separable tests"}


def test_a_changed_files_line_says_why_in_the_agents_words_from_its_first_change() -> None:
    from proxy.extract import extract
    from proxy.records import MessageContext, ToolCall

    state = TaskState()

    def step(index: int, said: str, command: str) -> None:
        state.apply(extract({"role": "assistant", "content": said}, MessageContext(index=index, ref=f"a{index}")))
        call = ToolCall(id=f"c{index}", name="bash", arguments=json.dumps({"command": command}))
        state.apply(extract({"role": "tool", "tool_call_id": call.id, "content": "<returncode>0</returncode>\n"
                             "<output>\n</output>"},
                            MessageContext(index=index + 1, ref=f"t{index + 1}", call=call, previous_assistant_text=said)))

    step(2, "I see the issue now. The bug is that `_cstack` sets the right block to 1 instead of copying `right`.",
         "cd /testbed && sed -i 's/= 1$/= right/' astropy/modeling/separable.py")
    step(4, "", "cd /testbed && sed -i 's/x/y/' astropy/modeling/separable.py")  # a bare call: keeps the first why
    step(6, "Let me write a quick reproduction.", "cat > repro.py <<'EOF'\nprint(1)\nEOF")
    lines = render_state(state, "fix", RULES).split("Files changed (latest change of each):\n", 1)[1].splitlines()
    assert lines[0] == ("- astropy/modeling/separable.py: edited (sed -i) [ref:t5] — why: The bug is that `_cstack` sets "
                        "the right block to 1 instead of copying `right`.")
    # a scratch script at the root: named on one line with the others, without why
    assert lines[1] == "- written at the root (scripts, notes; recall by name): repro.py"


def test_checks_that_only_ever_passed_fold_into_a_count_beyond_the_newest_few() -> None:
    """A long coding run re-runs a dozen test commands: the newest passes are listed, the older fold into a count;
    a check that failed (its error line, and whether it passed since) is always listed."""
    from proxy.records import FAILING, PASSING, VERIFICATION

    state = TaskState()
    state.apply_fact(Fact(VERIFICATION, "python repro.py", "failed", 4, "r4", "tool"))
    state.apply_fact(Fact(FAILING, "python repro.py", "ValueError: ERR_TZ_0042", 4, "r4", "tool"))
    for turn in range(6, 20, 2):
        state.apply_fact(Fact(VERIFICATION, f"pytest tests/test_{turn}.py", "passed", turn, f"r{turn}", "tool"))
    state.apply_fact(Fact(VERIFICATION, "python repro.py", "passed", 21, "r21", "tool"))
    state.apply_fact(Fact(PASSING, "python repro.py", "passed", 21, "r21", "tool"))
    rules = replace(RULES, max_passing_checks=3)
    lines = render_state(state, "fix it", rules).split("Verification:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    lines = [line for line in lines if line.startswith("- ")]
    assert lines == ["- (4 earlier checks passed)",
                     "- pytest tests/test_14.py: passed [ref:r14]", "- pytest tests/test_16.py: passed [ref:r16]",
                     "- pytest tests/test_18.py: passed [ref:r18]",
                     "- python repro.py: ValueError: ERR_TZ_0042 [ref:r4] — passed since [ref:r21]"]
    brief = render_state(state, "fix it", rules, brief=True)
    assert "earlier checks passed" not in brief and "test_18.py: passed" in brief and "test_12.py" not in brief


def test_the_tail_names_the_files_the_newest_tool_results_changed_before_they_are_settled() -> None:
    """The live tail reads the state as of the last settled request; the newest call's edits are read from the
    call itself, so the tail names the file the agent just changed (and none a state already names)."""
    from proxy.ingest import newest_changes
    from proxy.records import CHANGED
    from proxy.state import state_changes

    def call(n: int, command: str) -> list[dict]:  # type: ignore[type-arg]
        arguments = json.dumps({"command": command})
        return [{"role": "assistant", "content": "", "tool_calls": [
                    {"id": f"c{n}", "type": "function", "function": {"name": "bash", "arguments": arguments}}]},
                {"role": "tool", "tool_call_id": f"c{n}", "content": "<returncode>0</returncode>\n<output>\n</output>"}]

    messages = [{"role": "system", "content": "agent"}, {"role": "user", "content": "fix it"},
                *call(1, "cd /testbed && sed -i 's/a/b/' src/tz/offsets.py"),
                *call(2, "cd /testbed && cat > final_check.py <<'EOF'\nprint(1)\nEOF"),
                *call(3, "cd /testbed && sed -i 's/x/y/' src/tz/missing.py")]
    messages[-1]["content"] = "<returncode>2</returncode>\n<output>\nsed: can't read src/tz/missing.py\n</output>"
    assert newest_changes(messages, 0, []) == []  # the newest result is a failed edit
    assert newest_changes(messages[:6], 0, []) == ["final_check.py"]  # only the results after the last call
    assert newest_changes(messages[:6], 6, []) == []  # settled already: the state has it
    state = TaskState()
    state.apply_fact(Fact(CHANGED, "src/tz/offsets.py", "edited (sed -i)", 3, "r3", "tool"))
    frozen = render_state(TaskState(), "fix", RULES)
    now = render_state(state, "fix", RULES, brief=True)
    tail = state_changes(frozen, now, ["final_check.py", "src/tz/offsets.py"])
    assert tail.splitlines()[-1] == "Files changed since: src/tz/offsets.py, final_check.py"
