"""Key facts: entities in free text, `key: value` lines, and JSON fields keyed for supersession."""

from __future__ import annotations

import json

from traces import load_traces, requires_traces

from proxy.extract import extract
from proxy.extract.facts import MAX_JSON_FACTS, MAX_TEXT_FACTS, entities, json_facts, text_facts
from proxy.records import AMOUNT, DATE, FIELD, IDENTIFIER, PATH, QUANTITY, URL, Fact, MessageContext, ToolCall


def trace(name: str, trace_id: str) -> dict:
    return next(t for t in load_traces(name) if t["id"] == trace_id)


def tool_facts(content: str, name: str = "tool", arguments: str = "{}", index: int = 7) -> dict[str, str]:
    """FIELD facts of one tool output, as {key: value}."""
    call = ToolCall(id="call_1", name=name, arguments=arguments)
    message = {"role": "tool", "tool_call_id": "call_1", "content": content}
    facts = extract(message, MessageContext(index=index, ref=f"ev{index}", call=call)).facts
    return {f.key: f.value for f in facts if f.kind == FIELD}


def kinds(text: str) -> list[tuple[str, str]]:
    return [(kind, key) for kind, key, _ in text_facts(text)]


def test_amounts_with_currencies() -> None:
    text = "Paid $1,250.50, then 250 USD and USD 8.42, ¥1,200, €3, 0.48 USD / piece, 300元."
    assert kinds(text) == [
        (AMOUNT, "$1250.50"),
        (AMOUNT, "250 usd"),
        (AMOUNT, "usd 8.42"),
        (AMOUNT, "¥1200"),
        (AMOUNT, "€3"),
        (AMOUNT, "0.48 usd / piece"),
        (AMOUNT, "300元"),
    ]


def test_quantities_and_percentages() -> None:
    text = "Order 12,000 pcs within 30 days: 5 GB, 200 ms, 3 bags, 15% off."
    assert kinds(text) == [
        (QUANTITY, "12000 pcs"),
        (QUANTITY, "30 days"),
        (QUANTITY, "5 gb"),
        (QUANTITY, "200 ms"),
        (QUANTITY, "3 bags"),
        (QUANTITY, "15%"),
    ]


def test_dates_in_several_spellings() -> None:
    text = "Fly 2024-05-20, or May 20th, 2024-05-15 15:00:00, 21 June 2024, 05/20/2024, 2024年5月20日; may 5 is a verb."
    assert kinds(text) == [
        (DATE, "2024-05-20"),
        (DATE, "may 20"),
        (DATE, "2024-05-15 15:00:00"),
        (DATE, "21 june 2024"),
        (DATE, "05/20/2024"),
        (DATE, "2024年5月20日"),
    ]


def test_identifiers() -> None:
    text = (
        "PO-2231 for mia_li_3668 on HAT136 (ZFA04Y), card credit_card_4421486, certificate_7504069, "
        "commit 1c6ba19b2818, run 123e4567-e89b-12d3-a456-426614174000, mail mia.li3818@example.com. "
        "Not ids: UTF-8, x1, float64, HATHAT, 7447, E402."
    )
    assert kinds(text) == [
        (IDENTIFIER, "PO-2231"),
        (IDENTIFIER, "mia_li_3668"),
        (IDENTIFIER, "HAT136"),
        (IDENTIFIER, "ZFA04Y"),
        (IDENTIFIER, "credit_card_4421486"),
        (IDENTIFIER, "certificate_7504069"),
        (IDENTIFIER, "1c6ba19b2818"),
        (IDENTIFIER, "123e4567-e89b-12d3-a456-426614174000"),
        (IDENTIFIER, "mia.li3818@example.com"),
    ]


def test_paths_and_urls() -> None:
    text = (
        "Edit ./astropy/modeling/separable.py:245 and /usr/lib/x.py, src/a/b.py and setup.cfg; "
        "see https://example.com/a/b.py?x=1. Not paths: and/or, 1.5/2.0, 05/20/2024, response.json()."
    )
    assert kinds(text) == [
        (PATH, "astropy/modeling/separable.py"),
        (PATH, "/usr/lib/x.py"),
        (PATH, "src/a/b.py"),
        (PATH, "setup.cfg"),
        (URL, "https://example.com/a/b.py?x=1"),
        (DATE, "05/20/2024"),
    ]


def test_entity_values_carry_a_few_words_of_context() -> None:
    facts = text_facts("Remaining balance: $55 (to be charged to your Visa card ending in 7447)")
    amount = next(value for kind, _, value in facts if kind == AMOUNT)
    assert amount == "Remaining balance: $55 (to be charged to your Visa card"
    assert all(len(value) <= 120 for _, _, value in text_facts("x " * 300 + "$5 " + "y " * 300))


def test_key_value_lines_are_keyed_by_their_heading() -> None:
    text = (
        "1. **Flight HAT069**\n   - Departure: 06:00 AM EST\n   - Economy Price: $121\n\n"
        "Here's the payment breakdown:\n\n- Use certificate 7504069: $250\n"
        "- **Cabin Class:** Economy\n"
        "1. Trip type: Is it one-way or round-trip?\n"
        "```\nName: inside-a-code-block\n```\n"
    )
    fields = {key: value for kind, key, value in text_facts(text) if kind == FIELD}
    assert fields == {
        "flight hat069.departure": "06:00 AM EST",
        "flight hat069.economy price": "$121",
        "here's the payment breakdown.use certificate 7504069": "$250",
        "here's the payment breakdown.cabin class": "Economy",
    }


def test_free_text_facts_are_capped_and_first_ones_kept() -> None:
    text = " ".join(f"PO-{n:04d}" for n in range(200))
    found = text_facts(text)
    assert len(found) == MAX_TEXT_FACTS
    assert found[0][1] == "PO-0000" and found[-1][1] == f"PO-{MAX_TEXT_FACTS - 1:04d}"


def test_repeated_mentions_count_once() -> None:
    text = "\n".join(['  File "/testbed/x/y.py", line 41, in <module>'] * 500)
    assert [e.key for e in entities(text)] == ["/testbed/x/y.py"]


@requires_traces
def test_tau_user_id_in_a_user_turn() -> None:
    message = trace("tau-dev", "tau-airline/task0/trial0")["messages"][3]
    facts = extract(message, MessageContext(index=3, ref="ev3")).facts
    assert Fact(IDENTIFIER, "mia_li_3668", "Sure, my user ID is mia_li_3668.", 3, "ev3", "user") in facts


@requires_traces
def test_tau_assistant_amounts_and_flights() -> None:
    message = trace("tau-dev", "tau-airline/task0/trial0")["messages"][18]
    facts = {(f.kind, f.key): f.value for f in extract(message, MessageContext(index=18)).facts}
    assert facts[(AMOUNT, "$255")] == "for the selected flights in economy class is $255."
    assert facts[(AMOUNT, "$250")] == "Use certificate 7504069: $250"
    assert facts[(FIELD, "here's the payment breakdown.remaining balance")].startswith("$5 (to be charged")


@requires_traces
def test_tau_reservation_json_is_keyed_by_reservation_and_flight() -> None:
    messages = trace("tau-dev", "tau-airline/task0/trial0")["messages"]
    call = messages[28]["tool_calls"][0]["function"]
    fields = tool_facts(messages[29]["content"], call["name"], call["arguments"], index=29)
    assert fields["HATHAT.reservation_id"] == "HATHAT"
    assert fields["HATHAT.user_id"] == "mia_li_3668"
    assert fields["HATHAT.cabin"] == "economy"
    assert fields["HATHAT.insurance"] == "no"
    assert fields["HATHAT.total_baggages"] == "3"
    # the parts of a reservation stay under it: a flight's price here is what this booking paid
    assert fields["HATHAT.flights.HAT136.date"] == "2024-05-20"
    assert fields["HATHAT.flights.HAT039.price"] == "103"
    assert fields["HATHAT.passengers[0].dob"] == "1990-04-05"
    assert fields["HATHAT.payment_history.certificate_7504069.amount"] == "250"  # distinct payment ids key entries


@requires_traces
def test_tau_user_details_are_keyed_by_the_user_id_argument() -> None:
    messages = trace("tau-dev", "tau-airline/task0/trial0")["messages"]
    call = messages[6]["tool_calls"][0]["function"]
    fields = tool_facts(messages[7]["content"], call["name"], call["arguments"])
    assert fields["mia_li_3668.email"] == "mia.li3818@example.com"
    assert fields["mia_li_3668.name.first_name"] == "Mia"
    # named parts stay under the user the call named
    assert fields["mia_li_3668.payment_methods.credit_card_4421486.last_four"] == "7447"
    assert fields["mia_li_3668.payment_methods.certificate_7504069.amount"] == "250"


@requires_traces
def test_tau_update_supersedes_the_fields_read_before() -> None:
    """get_reservation_details then update_reservation_flights on JG7FMM: same keys, new prices."""
    messages = trace("tau-dev", "tau-airline/task2/trial0")["messages"]
    before = tool_facts(messages[7]["content"], "get_reservation_details", '{"reservation_id": "JG7FMM"}')
    after = tool_facts(messages[15]["content"], "update_reservation_flights", '{"reservation_id": "JG7FMM"}')
    assert (before["JG7FMM.flights.HAT028.price"], after["JG7FMM.flights.HAT028.price"]) == ("1859", "140")
    assert before["JG7FMM.cabin"] == after["JG7FMM.cabin"] == "business"


def test_reservation_status_before_and_after_cancel_has_one_key() -> None:
    reservation = {"reservation_id": "ZFA04Y", "user_id": "mia_li_3668", "cabin": "economy", "status": "active"}
    before = tool_facts(json.dumps(reservation), "get_reservation_details", '{"reservation_id": "ZFA04Y"}', index=5)
    after = tool_facts(json.dumps({**reservation, "status": "cancelled"}), "cancel_reservation", "{}", index=9)
    assert before["ZFA04Y.status"] == "active" and after["ZFA04Y.status"] == "cancelled"
    assert before["ZFA04Y.cabin"] == after["ZFA04Y.cabin"] == "economy"


def test_repeated_ids_in_a_list_fall_back_to_positions() -> None:
    data = {"reservation_id": "YAX4DR", "payment_history": [
        {"payment_id": "credit_card_4938634", "amount": 498},
        {"payment_id": "credit_card_4938634", "amount": 1200},
    ]}  # fmt: skip
    assert dict(json_facts(data)) == {
        "YAX4DR.reservation_id": "YAX4DR",
        "YAX4DR.payment_history[0].payment_id": "credit_card_4938634",
        "YAX4DR.payment_history[0].amount": "498",
        "YAX4DR.payment_history[1].payment_id": "credit_card_4938634",
        "YAX4DR.payment_history[1].amount": "1200",
    }


def test_json_without_ids_uses_the_tool_name_and_list_positions() -> None:
    fields = tool_facts(json.dumps({"flights": [{"date": "2024-05-20", "ok": True, "note": None}]}), "search")
    assert fields == {
        "search.flights[0].date": "2024-05-20",
        "search.flights[0].ok": "true",
        "search.flights[0].note": "null",
    }


def test_json_facts_are_capped() -> None:
    data = [{"id": f"R{n}", "a": n, "b": n} for n in range(500)]
    found = json_facts(data)
    assert len(found) == MAX_JSON_FACTS
    assert found[:3] == [("R0.id", "R0"), ("R0.a", "0"), ("R0.b", "0")]


def test_scalar_json_and_plain_text_outputs_are_not_json_fields() -> None:
    assert tool_facts("255.0", "calculate") == {}
    assert tool_facts("Transfer successful", "transfer_to_human_agents") == {}


# ---- what is not a key fact: series, log lines, tables ----------------------------------------------------------


def test_a_numeric_series_is_one_labelled_summary() -> None:
    weeks = [{"week": f"2026-W{n:02d}", "rate": round(6.91 + 0.03 * n, 2)} for n in range(1, 13)]
    data = {"pair": "USD/CNY", "rates": weeks, "closes": [7.12, 7.2, 7.08, 7.15, 7.11, 7.19], "bounds": [6.9, 7.3]}
    assert tool_facts(json.dumps(data), "get_rates") == {
        "get_rates.pair": "USD/CNY",
        "get_rates.rates": "12 points, week 2026-W01–2026-W12, rate 6.94–7.27",
        "get_rates.closes": "6 points, 7.08–7.2",
        "get_rates.bounds": "6.9, 7.3",
    }


def test_a_series_keyed_by_dates_is_one_labelled_summary() -> None:
    days = {f"2026-01-{d:02d}": {"CNY": round(7.1 + d / 100, 2), "EUR": 0.92} for d in range(5, 12)}
    assert tool_facts(json.dumps({"base": "USD", "rates": days}), "timeseries") == {
        "timeseries.base": "USD",
        "timeseries.rates": "7 points, 2026-01-05–2026-01-11, CNY 7.15–7.21, EUR 0.92",
    }


def test_records_with_text_fields_are_not_a_series() -> None:
    quotes = [{"supplier": f"Supplier {c}", "price": 14.4, "moq": 500} for c in "ABCDEF"]
    fields = tool_facts(json.dumps({"quotes": quotes}), "quotes")
    assert fields["quotes.quotes[5].supplier"] == "Supplier F" and fields["quotes.quotes[5].moq"] == "500"


def test_log_lines_and_text_tables_give_no_facts() -> None:
    output = (
        "2026-03-02 10:44:24,120 INFO fetched lanes from /srv/lanes/batch_7.csv in 350 ms\n"
        "[10:44:25] retry 2 for PO-2231\n"
        "DEBUG:urllib3.connectionpool:https://api.example.com:443 \"GET /v1/rates HTTP/1.1\" 200 512\n"
        "          rate       std       min       25%       50%\n"
        "count  12.0000  12.00000  12.00000  12.00000  12.00000\n"
        "| Supplier | Unit price | Carton |\n|---|---|---|\n| C | $0.48 | 30 pcs |\n"
        "+------+-------+\n"
        "Status: confirmed\nOrder PO-4410 ships 2026-03-09, total $1,250.00 to ops@example.com\n"
    )
    assert sorted(kinds(output)) == sorted([
        (FIELD, "status"), (IDENTIFIER, "PO-4410"), (DATE, "2026-03-09"), (AMOUNT, "$1250.00"),
        (IDENTIFIER, "ops@example.com"),
    ])


def test_http_headers_are_not_facts_but_the_body_is() -> None:
    from proxy.extract import extract
    from proxy.records import CANDIDATE, OUTCOME, MessageContext

    output = ("HTTP/1.1 422 Unprocessable Entity\nDate: Tue, 30 Jun 2026 03:18:51 GMT\nX-Request-Id: b5ba872250b9\n"
              "Server: envoy\n\nerror: hs_code must have 10 digits, got 7323.93.00\nlimit: 60 requests per minute\n")
    facts = extract({"role": "tool", "tool_call_id": "c", "content": output}, MessageContext(index=3, ref="r")).facts
    shown = " ".join(f"{f.key} {f.value}" for f in facts if f.kind != CANDIDATE).lower()
    assert "envoy" not in shown and "b5ba872250b9" not in shown and "03:18:51" not in shown
    [outcome] = [f.value for f in facts if f.kind == OUTCOME]  # the body's answer, as one line, exact
    assert "error: hs_code must have 10 digits, got 7323.93.00" in outcome and "limit: 60 requests per minute" in outcome
