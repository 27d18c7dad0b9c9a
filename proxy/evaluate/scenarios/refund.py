"""Scenario 4: an airline refund awaiting approval (tau-bench-like tools returning JSON records).

A cancelled outbound flight, a full refund computed by the agent, a refunds API that needs a supervisor approval
above 1,000 USD (learned from a 403), an approval id only the refunds tool returns, a user who asks for the money
on her card rather than a voucher and answers "yes" late, after a baggage subtask; an open item (delay
compensation for an earlier trip) the agent must come back to.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta

from .builder import Call, RunBuilder, Scenario, tool
from .noise import hex_id, iso, json_text, moments

SEED = 4821
TRACE_ID = "scenario-airline-refund-approval"
USER_ID = "sofia_rossi_4821"
VISA = "credit_card_6609281"
MASTERCARD = "credit_card_2291830"
APPROVAL = "RFA-2026-0087"

TOOLS = [
    tool("get_user_details", "Get the details of a user, including their reservations.", {"user_id": "user id"}),
    tool("get_reservation_details", "Get the details of a reservation.", {"reservation_id": "e.g. 'Q7T2MZ'"}),
    tool("get_flight_status", "Get the status and history of a flight on a date.",
         {"flight_number": "e.g. 'HAT218'", "date": "flight date"}),
    tool("search_direct_flight", "Search direct flights between two airports on a date.",
         {"origin": "IATA code", "destination": "IATA code", "date": "YYYY-MM-DD"}),
    tool("search_onestop_flight", "Search one-stop flights between two airports on a date.",
         {"origin": "IATA code", "destination": "IATA code", "date": "YYYY-MM-DD"}),
    tool("calculate", "Calculate the result of a mathematical expression.", {"expression": "e.g. '2 * (3 + 4)'"}),
    tool("issue_refund", "Refund a reservation to one of the user's payment methods.",
         {"reservation_id": "reservation id", "payment_id": "payment method id", "amount": {"type": "number"},
          "approval_id": "supervisor approval id, when required"}, optional=("approval_id",)),
    tool("request_refund_approval", "Ask a supervisor to approve a refund; returns an approval request.",
         {"reservation_id": "reservation id", "amount": {"type": "number"}, "payment_id": "payment method id",
          "reason": "why"}),
    tool("get_approval_status", "Read the state of a refund approval request.", {"approval_id": "approval id"}),
    tool("update_reservation_baggages", "Update the baggage information of a reservation.",
         {"reservation_id": "reservation id", "total_baggages": {"type": "integer"},
          "nonfree_baggages": {"type": "integer"}, "payment_id": "payment method id"}),
    tool("send_certificate", "Send a travel certificate to a user as compensation.",
         {"user_id": "user id", "amount": {"type": "number"}}),
    tool("think", "Think about something; no effect on the database.", {"thought": "a thought"}),
]

SYSTEM = """# Airline Agent Policy

The current time is 2026-05-15 10:20:00 EST.

As an airline agent, you can help users book, modify, or cancel flight reservations, answer questions about
flights and baggage, and process refunds and compensation.

- Before taking any action that updates the booking database (booking, modifying flights, editing baggage,
  refunds, sending certificates), list the action details and obtain explicit user confirmation (yes) to proceed.
- You should not provide any information, knowledge, or procedures not provided by the user or available tools.
- You should only make one tool call at a time when the call updates the database.
- Authenticate the user by user id before acting on their reservations.

## Cancellations and refunds
- If the airline cancelled a flight, the user may choose a rebooking on the next available flight at no cost or a
  full refund of the reservation, including travel insurance.
- Refunds go back to the payment method used for the reservation, within 5 to 7 business days.

## Baggage
- Regular members: 0 free checked bags in basic economy, 1 in economy, 2 in business, per passenger. Silver: 0/2/3.
  Gold: 1/3/3. Each extra bag is 50 dollars.

## Compensation
- If the user complains about a delayed flight and is a silver or gold member, or travelled in business, you may
  offer a certificate of 50 dollars per passenger, once per reservation, after confirming the delay with a tool."""

TASK = "Hi, my flight to London got cancelled and I'd like my money back."


def user_details(rng: random.Random) -> str:
    reservations = ["Q7T2MZ", "8JX4QP", "4WQ9KX", "ZK81LT", "H2N6QW", "P0V7RS", "M9D3XA", "TT4W0E", "B6YQ2N",
                    "RX5M8C", "L1F9GH", "W3K7JD"]
    payment_methods = {
        VISA: {"source": "credit_card", "brand": "visa", "last_four": "4417", "id": VISA},
        "credit_card_2291830": {"source": "credit_card", "brand": "mastercard", "last_four": "8812",
                                "id": "credit_card_2291830"},
        "gift_card_3370412": {"source": "gift_card", "amount": 112, "id": "gift_card_3370412"},
        "certificate_5519208": {"source": "certificate", "amount": 150, "id": "certificate_5519208"},
        "certificate_7730125": {"source": "certificate", "amount": 250, "id": "certificate_7730125"},
    }
    record = {"user_id": USER_ID, "name": {"first_name": "Sofia", "last_name": "Rossi"},
              "address": {"address1": "1843 N Damen Ave", "address2": "Apt 3R", "city": "Chicago", "country": "USA",
                          "province": "IL", "zip": "60647"}, "email": "sofia.rossi4821@example.com",
              "dob": "1986-09-22", "payment_methods": payment_methods,
              "saved_passengers": [{"first_name": "Marco", "last_name": "Bianchi", "dob": "1984-02-11"},
                                   {"first_name": "Giulia", "last_name": "Rossi", "dob": "1959-06-30"},
                                   {"first_name": "Leo", "last_name": "Bianchi", "dob": "2019-12-03"}],
              "membership": "gold", "reservations": reservations,
              "communications": [{"sent_at": iso(t, millis=False), "channel": rng.choice(["email", "sms"]),
                                  "template": rng.choice(["booking_confirmation", "check_in_open", "schedule_change",
                                                          "flight_cancelled", "receipt", "newsletter"]),
                                  "reservation_id": rng.choice(["Q7T2MZ", "8JX4QP", "4WQ9KX", "ZK81LT", None])}
                                 for t in moments(rng, datetime(2026, 1, 5), 14, 200000, 700000)],
              "preferences": {"seat": "aisle", "meal": "vegetarian", "notifications": ["email", "sms"]},
              "loyalty": {"number": f"HAT{rng.randint(10**8, 10**9)}", "miles_balance": rng.randint(40000, 160000),
                          "tier_valid_until": "2027-01-31",
                          "recent_activity": [{"date": iso(t, millis=False)[:10], "miles": rng.randint(300, 4200),
                                               "flight": f"HAT{rng.randint(1, 299):03d}"}
                                              for t in moments(rng, datetime(2025, 11, 1), 8, 400000, 2000000)]}}
    return json_text(record)


def reservation(rng: random.Random, rid: str, origin: str, destination: str, flights: list[tuple[str, str, str,
                                                                                                     str, float]],
                passengers: list[tuple[str, str, str]], cabin: str, payment: str, insurance: str, bags: int,
                created: str, status: str | None = None) -> dict[str, object]:
    total = sum(price for *_, price in flights) * len(passengers) + (30 * len(passengers) if insurance == "yes" else 0)
    return {"reservation_id": rid, "user_id": USER_ID, "origin": origin, "destination": destination,
            "flight_type": "round_trip" if len(flights) > 1 and flights[-1][2] == origin else "one_way",
            "cabin": cabin,
            "flights": [{"flight_number": number, "origin": o, "destination": d, "date": day, "price": price}
                        for number, o, d, day, price in flights],
            "passengers": [{"first_name": first, "last_name": last, "dob": dob} for first, last, dob in passengers],
            "payment_history": [{"payment_id": payment, "amount": round(total, 2)}], "created_at": created,
            "total_baggages": bags, "nonfree_baggages": 0, "insurance": insurance, "status": status,
            "booking_channel": rng.choice(["web", "app", "phone"]), "fare_basis": rng.choice(
                ["YLOWUS", "YFLXUS", "KSAVUS", "JFLXUS"]),
            "ticket_numbers": [f"016{rng.randint(10**9, 10**10 - 1)}" for _ in passengers],
            "price_breakdown": {"base_fare": round(total * 0.78, 2), "carrier_surcharge": round(total * 0.09, 2),
                                "taxes": [{"code": code, "name": name, "amount": round(rng.uniform(4, 60), 2)}
                                          for code, name in (("US", "US Transportation Tax"),
                                                             ("AY", "September 11th Security Fee"),
                                                             ("XF", "Passenger Facility Charge"),
                                                             ("XA", "APHIS User Fee"), ("XY", "Immigration User Fee"),
                                                             ("YC", "Customs User Fee"))]},
            "segments": [{"flight_number": number, "seats": [f"{rng.randint(12, 44)}{rng.choice('ABCDEFHJK')}"
                                                             for _ in passengers],
                          "meal": rng.choice(["VGML", "standard", "standard"]), "aircraft": rng.choice(
                              ["B789", "A333", "B738", "A321"]), "operating_carrier": "HAT"}
                         for number, *_ in flights],
            "fare_rules": "Changes permitted up to 24 hours before departure; fare difference applies. Cancellation "
                          "by the passenger: refundable less a 200 USD fee in economy, non-refundable in basic "
                          "economy. Cancellation or significant schedule change by the carrier: full refund or free "
                          "rebooking. No-show: remaining segments cancelled. Travel insurance is refundable only if "
                          "the carrier cancels or the passenger cancels within 24 hours of booking.",
            "remarks": [f"{iso(t, millis=False)} {text}" for t, text in zip(
                moments(rng, datetime(2026, 3, 1), 5, 100000, 900000),
                ["seat map refreshed", "schedule change notice sent", "APIS data complete", "e-ticket reissued",
                 "contact verified by SMS"])]}


PASSENGERS = [("Sofia", "Rossi", "1986-09-22"), ("Marco", "Bianchi", "1984-02-11")]
LONDON = ("Q7T2MZ", "ORD", "LHR", [("HAT218", "ORD", "LHR", "2026-05-14", 486.0),
                                    ("HAT219", "LHR", "ORD", "2026-05-24", 512.0)], "economy", "yes", 2,
          "2026-02-09T18:22:51", VISA)
OTHERS = [
    ("8JX4QP", "ORD", "FCO", [("HAT254", "ORD", "FCO", "2026-06-18", 611.0), ("HAT255", "FCO", "ORD", "2026-06-30",
                                                                              587.0)], "economy", "no", 2,
     "2026-03-02T09:40:13", MASTERCARD),
    ("4WQ9KX", "ORD", "BOS", [("HAT091", "ORD", "BOS", "2026-04-09", 212.0), ("HAT094", "BOS", "ORD", "2026-04-12",
                                                                              198.0)], "economy", "no", 0,
     "2026-03-20T21:05:44", MASTERCARD),
    ("ZK81LT", "ORD", "MIA", [("HAT133", "ORD", "MIA", "2025-12-20", 254.0)], "business", "yes", 1,
     "2025-11-02T12:00:09", "gift_card_3370412"),
    ("P0V7RS", "ORD", "DEN", [("HAT012", "ORD", "DEN", "2026-02-06", 176.0), ("HAT015", "DEN", "ORD", "2026-02-08",
                                                                              181.0)], "economy", "no", 1,
     "2026-01-11T17:45:02", "gift_card_3370412"),
    ("M9D3XA", "ORD", "LAS", [("HAT160", "ORD", "LAS", "2025-10-17", 233.0)], "basic_economy", "no", 0,
     "2025-09-30T07:19:58", MASTERCARD),
    ("H2N6QW", "ORD", "SFO", [("HAT071", "ORD", "SFO", "2026-01-17", 301.0), ("HAT072", "SFO", "ORD", "2026-01-21",
                                                                              288.0)], "basic_economy", "no", 0,
     "2025-12-28T08:12:33", MASTERCARD),
]


BOOKINGS = {spec[0]: spec for spec in (LONDON, *OTHERS)}
RESERVATION_ARGS = ("Q7T2MZ", "ORD", "LHR", LONDON[3], PASSENGERS, "economy", VISA, "yes", 2, LONDON[7])


def reservation_text(rng: random.Random, spec: tuple, travellers: list[tuple[str, str, str]] = PASSENGERS) -> str:
    rid, origin, destination, flights, cabin, insurance, bags, created, payment = spec
    return json_text(reservation(rng, rid, origin, destination, flights, travellers, cabin, payment, insurance,
                                 bags, created))


def flight_status(rng: random.Random, number: str, day: str, status: str, delay: int = 0, reason: str = "") -> str:
    scheduled = datetime.fromisoformat(day) + timedelta(hours=rng.randint(6, 20), minutes=rng.choice([0, 15, 30, 45]))
    events = [{"at": iso(t, millis=False), "event": event} for t, event in zip(
        moments(rng, scheduled - timedelta(days=2), 9, 3000, 30000),
        ["schedule confirmed", "seat map published", "gate assigned", "crew assigned", "catering ordered",
         "aircraft assigned", "fuel order sent", "load sheet draft", f"status: {status}"])]
    return json_text({"flight_number": number, "date": day, "status": status,
                      "scheduled_departure": scheduled.isoformat(), "delay_minutes": delay,
                      "actual_departure": (scheduled + timedelta(minutes=delay)).isoformat()
                      if status in ("landed", "delayed") else None, "reason": reason or None,
                      "aircraft": {"type": rng.choice(["B789", "A333", "B738", "A321"]),
                                   "registration": f"N{rng.randint(100, 999)}HA"},
                      "gate": f"{rng.choice('BCKLM')}{rng.randint(1, 40)}", "terminal": rng.choice(["1", "3", "5"]),
                      "crew": {"captain": f"{rng.choice(['J.', 'M.', 'A.', 'R.'])} {rng.choice(['Okafor', 'Lindqvist', 'Ramos', 'Chen', 'Novak'])}",
                               "first_officer": f"{rng.choice(['K.', 'S.', 'T.'])} {rng.choice(['Haddad', 'Moreau', 'Ito', 'Brennan'])}",
                               "cabin_crew": rng.randint(5, 11)},
                      "inbound": {"flight_number": f"HAT{rng.randint(300, 499)}", "status": rng.choice(
                          ["landed", "en route", "scheduled"])},
                      "weather": {"origin": rng.choice(["clear", "rain", "low clouds", "thunderstorms"]),
                                  "destination": rng.choice(["clear", "fog", "rain", "wind"])},
                      "events": events, "codeshares": [f"{rng.choice(['AZ', 'BA', 'IB'])}{rng.randint(1000, 9999)}"]})


def search_results(rng: random.Random, origin: str, destination: str, day: str, count: int,
                   first: dict[str, object] | None = None) -> str:
    flights = [direct_flight(rng, origin, destination, day) for _ in range(count)]
    if first is not None:
        flights[rng.randrange(count)] = {**flights[0], **first}
    return json_text(flights)


def onestop_results(rng: random.Random, origin: str, destination: str, day: str, count: int) -> str:
    hubs = ["JFK", "BOS", "EWR", "IAD", "YYZ", "DUB", "KEF", "AMS", "CDG", "FRA"]
    pairs = []
    for _ in range(count):
        hub = rng.choice(hubs)
        pairs.append([direct_flight(rng, origin, hub, day), direct_flight(rng, hub, destination, day)])
    return json_text(pairs, indent=1)


def direct_flight(rng: random.Random, origin: str, destination: str, day: str) -> dict[str, object]:
    departure = rng.randint(6, 22)
    duration = rng.randint(2, 9)
    return {"flight_number": f"HAT{rng.randint(100, 499)}", "origin": origin, "destination": destination,
            "scheduled_departure_time_est": f"{departure:02d}:{rng.choice(['00', '15', '30', '45'])}:00",
            "scheduled_arrival_time_est": f"{(departure + duration) % 24:02d}:{rng.choice(['05', '20', '40', '55'])}:00"
                                          + ("+1" if departure + duration >= 24 else ""),
            "status": "available", "date": day,
            "available_seats": {"basic_economy": rng.randint(0, 20), "economy": rng.randint(0, 30),
                                "business": rng.randint(0, 12)},
            "prices": {"basic_economy": rng.randint(90, 400), "economy": rng.randint(180, 900),
                       "business": rng.randint(700, 3200)}}


def refund_denied(rng: random.Random) -> str:
    return json_text({"error": {"status": 403, "code": "approval_required",
                                "message": "refunds above 1000.00 USD need a supervisor approval_id from "
                                           "request_refund_approval",
                                "reservation_id": "Q7T2MZ", "requested_amount": 2056.0, "threshold": 1000.0},
                      "request_id": hex_id(rng, 24), "docs": "refunds-api#approvals"})


def approval_requested(rng: random.Random) -> str:
    return json_text({"approval_id": APPROVAL, "status": "pending", "queue": "refunds-supervisors",
                      "reservation_id": "Q7T2MZ", "amount": 2056.0, "payment_id": VISA,
                      "reason": "airline-cancelled outbound HAT218 on 2026-05-14; full refund incl. insurance",
                      "created_at": "2026-05-15T10:31:07-05:00", "eta_minutes": 30, "assigned_to": None,
                      "policy_check": {"cancelled_by_airline": True, "within_refund_window": True,
                                       "duplicate_refund": False, "fraud_score": 0.03},
                      "reservation_snapshot": reservation(rng, *RESERVATION_ARGS),
                      "audit": [{"at": "2026-05-15T10:31:07-05:00", "event": "created", "by": "agent"},
                                {"at": "2026-05-15T10:31:08-05:00", "event": "queued", "by": "system"}]})


def approval_granted(rng: random.Random) -> str:
    return json_text({"approval_id": APPROVAL, "status": "approved", "approved_by": "supervisor dana.kim",
                      "approved_at": "2026-05-15T10:58:42-05:00", "reservation_id": "Q7T2MZ", "amount": 2056.0,
                      "payment_id": VISA, "conditions": [], "expires_at": "2026-05-16T10:58:42-05:00",
                      "reservation_snapshot": reservation(rng, *RESERVATION_ARGS),
                      "audit": [{"at": "2026-05-15T10:31:07-05:00", "event": "created", "by": "agent"},
                                {"at": "2026-05-15T10:44:19-05:00", "event": "assigned", "by": "dana.kim"},
                                {"at": "2026-05-15T10:58:42-05:00", "event": "approved", "by": "dana.kim"}]})


def refund_done(rng: random.Random) -> str:
    return json_text({"refund_id": f"RF-{hex_id(rng, 10).upper()}", "reservation_id": "Q7T2MZ", "status": "issued",
                      "amount": 2056.0, "payment_id": VISA, "approval_id": APPROVAL,
                      "reservation_status": "cancelled", "expected_settlement": "5-7 business days",
                      "ticket_refunds": [{"ticket": f"016{rng.randint(10**9, 10**10 - 1)}", "amount": 1028.0}
                                         for _ in range(2)], "created_at": "2026-05-15T11:02:03-05:00"})


def build() -> Scenario:
    rng = random.Random(SEED)
    run = RunBuilder.opened(TRACE_ID, TOOLS, SYSTEM, TASK)
    run.say("I'm sorry to hear your flight was cancelled. I can help with that — could you give me your user id?")
    run.user(f"Sure, it's {USER_ID}.")
    run.act("", Call("get_user_details", {"user_id": USER_ID}, user_details(rng), labels=("visa",)))
    run.say("Thank you, Ms Rossi. I see several reservations on your profile. Which one is the London trip — do you "
            "have the reservation code?")
    run.user("I don't remember the code. It's Chicago to London Heathrow on May 14, for me and my husband Marco.")
    run.act("Let me look through your recent reservations.",
            Call("get_reservation_details", {"reservation_id": "ZK81LT"}, reservation_text(rng, BOOKINGS["ZK81LT"])))
    run.act("", Call("get_reservation_details", {"reservation_id": "H2N6QW"}, reservation_text(rng, BOOKINGS["H2N6QW"])))
    run.act("", Call("get_reservation_details", {"reservation_id": "P0V7RS"}, reservation_text(rng, BOOKINGS["P0V7RS"])))
    run.act("", Call("get_reservation_details", {"reservation_id": "M9D3XA"}, reservation_text(rng, BOOKINGS["M9D3XA"])))
    run.act("", Call("get_reservation_details", {"reservation_id": "Q7T2MZ"}, reservation_text(rng, LONDON),
                     labels=("visa",)))
    run.act("Q7T2MZ is ORD–LHR on 05/14 with HAT218, returning HAT219 on 05/24, two passengers in economy. "
            "Checking the outbound flight.",
            Call("get_flight_status", {"flight_number": "HAT218", "date": "05/14/2026"},
                 json_text({"error": "invalid date '05/14/2026': expected YYYY-MM-DD", "code": 400,
                            "hint": "dates are ISO 8601 calendar dates, e.g. 2026-05-14"}), labels=("date",)),
            labels=("date",))
    run.act("The flight tool wants dates as YYYY-MM-DD. Retrying.",
            Call("get_flight_status", {"flight_number": "HAT218", "date": "2026-05-14"},
                 flight_status(rng, "HAT218", "2026-05-14", "cancelled", reason="aircraft technical issue")),
            labels=("date",))
    run.act("HAT218 was cancelled by the airline (technical issue). Checking the return flight and the next "
            "available flights, to give her both options.",
            Call("get_flight_status", {"flight_number": "HAT219", "date": "2026-05-24"},
                 flight_status(rng, "HAT219", "2026-05-24", "scheduled")))
    run.act("", Call("search_direct_flight", {"origin": "ORD", "destination": "LHR", "date": "2026-05-15"},
                     search_results(rng, "ORD", "LHR", "2026-05-15", 16,
                                    {"flight_number": "HAT406", "scheduled_departure_time_est": "18:30:00",
                                     "scheduled_arrival_time_est": "08:10:00+1",
                                     "available_seats": {"basic_economy": 4, "economy": 11, "business": 3}})))
    run.act("", Call("search_onestop_flight", {"origin": "ORD", "destination": "LHR", "date": "2026-05-15"},
                     onestop_results(rng, "ORD", "LHR", "2026-05-15", 9)))
    run.act("", Call("search_direct_flight", {"origin": "ORD", "destination": "LHR", "date": "2026-05-16"},
                     search_results(rng, "ORD", "LHR", "2026-05-16", 15)))
    run.say("Your outbound flight HAT218 on May 14 was cancelled by the airline. Since it was our cancellation you "
            "can choose: (1) rebooking both of you at no cost, e.g. on HAT406 tonight (May 15, 18:30, economy seats "
            "available), keeping your May 24 return; or (2) a full refund of reservation Q7T2MZ, including the "
            "travel insurance. Which would you prefer?")
    run.user("No, the trip doesn't make sense anymore, the conference was on the 15th. I'd like a full refund "
             "please. Also, my flight to Boston last month was delayed about five hours — do I get anything for "
             "that?")
    run.act("Decision: full refund of Q7T2MZ rather than rebooking on HAT406 (she declined the May 15 "
            "alternative). Open item: delay compensation for her Boston trip (HAT091, April 9) — I'll check it "
            "after the refund is done. Computing the refund.",
            Call("calculate", {"expression": "2 * (486.00 + 512.00) + 2 * 30.00"}, "2056.0"),
            labels=("decision", "pending"))
    run.act("Refund = 2 × (486.00 + 512.00) + 2 × 30.00 insurance = 2,056.00 USD, to the card the booking was paid "
            "with (credit_card_6609281, Visa ending 4417). Trying the refund.",
            Call("issue_refund", {"reservation_id": "Q7T2MZ", "payment_id": VISA, "amount": 2056.0},
                 refund_denied(rng), labels=("failure",)), labels=("amount", "visa"))
    run.act("Learned: the refunds API requires a supervisor approval_id for refunds above 1,000 USD. Requesting "
            "the approval.",
            Call("request_refund_approval", {"reservation_id": "Q7T2MZ", "amount": 2056.0, "payment_id": VISA,
                                             "reason": "airline-cancelled outbound HAT218 on 2026-05-14; full refund "
                                                       "incl. insurance"},
                 approval_requested(rng), labels=("approval", "visa")), labels=("failure", "amount", "visa"))
    run.say(f"I've asked a supervisor to approve the refund (request {APPROVAL}, usually about 30 minutes). Here is "
            "what I'll do once it's approved: refund 2,056.00 USD for reservation Q7T2MZ — both passengers, both "
            "flights and the travel insurance — to your Visa ending 4417. Do you confirm (yes/no)?",
            labels=("approval", "amount"))
    run.user("I'd prefer the money back on my Visa rather than a voucher, if that's possible. Let me check with Marco "
             "before I say yes. Meanwhile, could you add a checked bag to our Rome trip in June?",
             labels=("voucher",))
    run.act("Of course. Looking at the Rome reservation.",
            Call("get_reservation_details", {"reservation_id": "8JX4QP"}, reservation_text(rng, BOOKINGS["8JX4QP"])))
    run.act("", Call("think", {"thought": "8JX4QP: economy, 2 passengers, gold member -> 3 free checked bags per "
                                          "passenger = 6 free. Currently 2 bags. Adding 1 -> total 3, nonfree 0, no "
                                          "charge. Need explicit yes before updating."},
                     "Your thought has been logged."))
    run.say("On 8JX4QP (ORD–FCO, June 18, returning June 30) you have 2 checked bags. As a gold member in economy "
            "each of you has 3 free bags, so adding one more is free: total 3 bags, 0 paid. Shall I update it "
            "(yes/no)?")
    run.user("Yes please.")
    run.act("", Call("update_reservation_baggages", {"reservation_id": "8JX4QP", "total_baggages": 3,
                                                     "nonfree_baggages": 0, "payment_id": "credit_card_2291830"},
                     json_text(reservation(rng, "8JX4QP", "ORD", "FCO", BOOKINGS["8JX4QP"][3], PASSENGERS, "economy",
                                           MASTERCARD, "no", 3, BOOKINGS["8JX4QP"][7]))))
    run.say("Done — 8JX4QP now has 3 checked bags, at no charge.")
    run.user("Great. Is our outbound to Rome on time as far as you know, and are there still aisle seats in economy "
             "on that flight?")
    run.act("", Call("get_flight_status", {"flight_number": "HAT254", "date": "2026-06-18"},
                     flight_status(rng, "HAT254", "2026-06-18", "scheduled")))
    run.act("", Call("search_direct_flight", {"origin": "ORD", "destination": "FCO", "date": "2026-06-18"},
                     search_results(rng, "ORD", "FCO", "2026-06-18", 14)))
    run.say("HAT254 on June 18 is scheduled on time so far. The search shows economy seats still available on it; "
            "I can't see or assign specific seats, but the app's seat map will show the aisle ones.")
    run.user("Thanks. And the return from Rome on the 30th — any news on that one? We had a tight connection last "
             "year.")
    run.act("", Call("get_flight_status", {"flight_number": "HAT255", "date": "2026-06-30"},
                     flight_status(rng, "HAT255", "2026-06-30", "scheduled")))
    run.act("", Call("search_direct_flight", {"origin": "FCO", "destination": "ORD", "date": "2026-06-30"},
                     search_results(rng, "FCO", "ORD", "2026-06-30", 14)))
    run.say("HAT255 on June 30 is a direct flight back to Chicago and is scheduled on time, so there's no "
            "connection to worry about. Several other direct flights that day have seats too, if you ever need to "
            "change.")
    run.user("Perfect. Out of curiosity: if we do London in September instead, around the 10th, what would it "
             "roughly cost for the two of us in economy?")
    run.act("", Call("search_direct_flight", {"origin": "ORD", "destination": "LHR", "date": "2026-09-10"},
                     search_results(rng, "ORD", "LHR", "2026-09-10", 16)))
    run.act("", Call("search_onestop_flight", {"origin": "ORD", "destination": "LHR", "date": "2026-09-10"},
                     onestop_results(rng, "ORD", "LHR", "2026-09-10", 9)))
    run.say("On September 10 direct economy fares from Chicago to Heathrow range roughly between 300 and 900 "
            "dollars per person one way, depending on the departure; one-stop options via the East Coast or "
            "Europe are sometimes cheaper but take longer. These are today's prices and can change.")
    run.user("OK, we'll think about it. And what about coming back on the 20th?")
    run.act("", Call("search_direct_flight", {"origin": "LHR", "destination": "ORD", "date": "2026-09-20"},
                     search_results(rng, "LHR", "ORD", "2026-09-20", 15)))
    run.say("For September 20, Heathrow to Chicago, there are several direct flights with economy seats, at "
            "similar prices. When you're ready to book, I can do it for you.")
    run.user("Perfect. One more: how much do I have left in travel certificates, and do they expire?")
    run.act("", Call("get_user_details", {"user_id": USER_ID}, user_details(random.Random(SEED)),
                     labels=("visa",)))
    run.say("You have two certificates on file: one of 150 dollars and one of 250 dollars, plus a gift card with "
            "112 dollars. The profile doesn't show an expiry date for them.")
    run.user("Good to know. Could you also check what direct flights there are to Rome on the 19th, in "
             "case Marco has to fly a day later? Just looking.")
    run.act("", Call("search_direct_flight", {"origin": "ORD", "destination": "FCO", "date": "2026-06-19"},
                     search_results(rng, "ORD", "FCO", "2026-06-19", 14)))
    run.act("", Call("search_onestop_flight", {"origin": "ORD", "destination": "FCO", "date": "2026-06-19"},
                     onestop_results(rng, "ORD", "FCO", "2026-06-19", 9)))
    run.say("On June 19 there are several direct ORD–FCO flights with economy seats; prices vary between the "
            "morning and evening departures. If Marco needs to move, I can look at changing his flight then.")
    run.user("Thanks, we'll see. And the old Miami trip in December — was that one fully paid and closed? Just "
             "tidying up my records.")
    run.act("", Call("get_reservation_details", {"reservation_id": "ZK81LT"}, reservation_text(rng, BOOKINGS["ZK81LT"])))
    run.say("ZK81LT (ORD–MIA, December 20, business) was paid in full and the flight has been flown; nothing is "
            "open on it.")
    run.user("Marco says yes — please go ahead with the refund.")
    run.probes(
        ("approval-id", "approval", "The approval id came only from the refunds tool; the refund must cite it.",
         ["approval"], [APPROVAL], []),
        ("refund-amount", "fact", "The refund amount the agent computed and the user confirmed.", ["amount"],
         ["2,056.00"], []),
        ("refund-card", "fact", "The payment method id the refund goes to, from the profile.", ["visa"], [VISA],
         []),
        ("no-voucher", "constraint", "The user asked for the money on her card rather than a voucher.",
         ["voucher"], ["rather than a voucher"], []),
        ("needs-approval", "failure", "Learned from a 403: refunds above 1,000 USD need an approval id.",
         ["failure"], ["approval_required", "requires a supervisor approval"], []),
        ("full-refund", "decision", "The user chose a full refund over rebooking.", ["decision"],
         ["rather than rebooking"], []))
    run.act(f"Thank you. Checking that {APPROVAL} has been approved before refunding 2,056.00 USD to the Visa.",
            Call("get_approval_status", {"approval_id": APPROVAL}, approval_granted(rng)))
    run.act("", Call("issue_refund", {"reservation_id": "Q7T2MZ", "payment_id": VISA, "amount": 2056.0,
                                      "approval_id": APPROVAL}, refund_done(rng)))
    run.say("The refund is issued: 2,056.00 USD back to your Visa ending 4417; it usually settles in 5–7 business "
            "days. Reservation Q7T2MZ is now cancelled.")
    run.user("Thank you so much.")
    run.probes(
        ("delay-compensation", "pending", "The agent parked the user's delay question as an open item until "
         "after the refund; it is due now.", ["pending"], ["delay compensation"], []),
        ("date-format", "failure", "Learned early: the flight tool only takes YYYY-MM-DD dates.", ["date"],
         ["YYYY-MM-DD"], []))
    run.act("You're welcome. Now your Boston question: checking the delay on HAT091 of April 9.",
            Call("get_reservation_details", {"reservation_id": "4WQ9KX"}, reservation_text(rng, BOOKINGS["4WQ9KX"])))
    run.act("", Call("get_flight_status", {"flight_number": "HAT091", "date": "2026-04-09"},
                     flight_status(rng, "HAT091", "2026-04-09", "landed", delay=297, reason="air traffic control")))
    run.say("HAT091 on April 9 landed 297 minutes (almost five hours) late. As a gold member you can receive a "
            "travel certificate of 50 dollars per passenger for that delay; the reservation had two passengers, "
            "so 100 dollars. Shall I send it to your profile (yes/no)?")
    run.user("Yes, thank you!")
    run.act("", Call("send_certificate", {"user_id": USER_ID, "amount": 100},
                     json_text({"certificate_id": f"certificate_{rng.randint(10**6, 10**7)}", "user_id": USER_ID,
                                "amount": 100, "currency": "USD", "issued_at": "2026-05-15T11:09:40-05:00",
                                "valid_until": "2027-05-15", "reason": "delay HAT091 2026-04-09 (297 min)"})))
    run.say("Done — a 100-dollar travel certificate is now on your profile. Is there anything else I can help with?")
    return run.finish()
