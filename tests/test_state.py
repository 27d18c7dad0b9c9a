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
    assert "- src/tz/zone_0.py:0: OFFSET_0 = 0 [ref:t3]" in full
    text = render_state(state, "fix the offset bound", RULES, 50, COUNTER.text)
    assert "Key facts" not in text  # no room was left for them
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
