"""Approvals: a request in an assistant turn and the user's answer land on the same key."""

from __future__ import annotations

from traces import load_traces, requires_traces

from proxy.extract import extract
from proxy.extract.approvals import approval_subject
from proxy.records import APPROVAL, MessageContext

ASK = (
    "I can cancel reservation ZFA04Y (refund $250 to certificate_7504069).\n\n"
    "Do you want me to proceed with the cancellation? Please confirm (yes)."
)


def approvals(role: str, text: str, previous: str = "", index: int = 5) -> list[tuple[str, str]]:
    context = MessageContext(index=index, ref=f"ev{index}", previous_assistant_text=previous)
    facts = extract({"role": role, "content": text}, context).facts
    return [(f.key, f.value) for f in facts if f.kind == APPROVAL]


def test_request_subject_is_verb_and_ids() -> None:
    assert approvals("assistant", ASK) == [("cancel: ZFA04Y, $250, certificate_7504069", "requested")]


def test_yes_grants_and_no_denies_the_same_key() -> None:
    key = "cancel: ZFA04Y, $250, certificate_7504069"
    for answer in ("Yes please", "yes, go ahead", "Confirm.", "OK, proceed", "I confirm, thanks", "好的，继续", "同意"):
        assert approvals("user", answer, ASK) == [(key, "granted")], answer
    for answer in ("No, don't do that.", "Nope", "Wait, not yet", "Please do not proceed.", "不要，先别取消", "算了"):
        assert approvals("user", answer, ASK) == [(key, "denied")], answer


def test_unclear_answers_and_non_requests_give_nothing() -> None:
    assert approvals("user", "What would the refund be?", ASK) == []
    assert approvals("user", "Yes", "Would you like to purchase travel insurance for $30?") == []
    assert approvals("user", "Yes", "") == []
    assert approvals("assistant", "Please confirm the payment method you'd like to use.") == []
    # a task left to do with a third party is no request to the user
    assert approvals("assistant", "Open items: NGB–HAM is missing week 11, to confirm with the forwarder.") == []


def test_chinese_request() -> None:
    subject = approval_subject("将删除分支 feature-x（PO-2231）。请确认是否继续？")
    assert subject == "删除: PO-2231"
    assert approvals("user", "确认", "将删除分支 feature-x（PO-2231）。请确认是否继续？") == [(subject, "granted")]


def test_request_without_ids_uses_the_asking_sentence() -> None:
    text = "I have prepared the patch.\n\nShall I apply it now?"
    assert approvals("assistant", text) == [("apply: shall i apply it now", "requested")]


def test_an_agent_asking_itself_and_reasoning_on_is_no_request() -> None:
    """mini-swe-agent deliberates in questions: "should I fix the test or revert my length check?" followed by its
    own answer asks nobody; a request closes its message (details after it allowed)."""
    musing = ("My fix with the length check fixes this bug.\n\nBut now the test fails. I need to decide: should I fix "
              "the test or revert my length check? \n\nActually, I think I should fix the test. The test is testing "
              "buggy behavior. \"0037\" should be year 37 AD, not 2037. But wait, year 37 AD would give a negative "
              "Unix timestamp, which the function rejects. Let me look at what RFC 7231 says about two-digit years "
              "and whether ASCTIME dates can carry one at all, before I touch the test.")
    assert approvals("assistant", musing) == []
    asking = "Shall I apply the patch to the parser now?\n\nIt changes one line: the year check gains a length test."
    assert approvals("assistant", asking) == [("apply: shall i apply the patch to the parser now", "requested")]


@requires_traces
def test_tau_booking_confirmation_requested_then_granted() -> None:
    messages = next(t for t in load_traces("tau-dev") if t["id"] == "tau-airline/task0/trial0")["messages"]
    asked = approvals("assistant", messages[18]["content"], index=18)
    granted = approvals("user", messages[19]["content"], messages[18]["content"], index=19)
    assert asked == [("book: $255, $250, $5", "requested")]
    assert granted == [("book: $255, $250, $5", "granted")]


@requires_traces
def test_tau_cancellation_of_a_named_reservation() -> None:
    messages = next(t for t in load_traces("tau-dev") if t["id"] == "tau-airline/task31/trial1")["messages"]
    assert approvals("assistant", messages[20]["content"], index=20) == [("cancel: D1EW9B", "requested")]


def test_an_approval_status_in_a_tool_output_is_an_approval_with_its_id() -> None:
    from proxy.extract import extract
    from proxy.records import APPROVAL, MessageContext, ToolCall

    output = ("HTTP/1.1 201 Created\nContent-Type: application/json\nX-Request-Id: 1e2ccd4e\n\n"
              '{"scope_request": {"id": "SRQ-7F3K-2291", "status": "pending_owner_approval", "scopes": ["write"]}}')
    call = ToolCall("c1", "http_request", '{"method": "POST", "url": "https://x.example/v2/oauth/scope_requests"}')
    facts = extract({"role": "tool", "tool_call_id": "c1", "content": output},
                    MessageContext(index=5, ref="r1", call=call)).facts
    approvals = [(f.key, f.value, f.evidence_ref) for f in facts if f.kind == APPROVAL]
    assert approvals == [("scope_request SRQ-7F3K-2291", "pending_owner_approval", "r1")]
    # the body after the headers is read as JSON: its fields are facts of the object
    assert any(f.key == "SRQ-7F3K-2291.status" for f in facts)
    plain = extract({"role": "tool", "tool_call_id": "c1", "content": '{"id": "A-1", "status": "shipped"}'},
                    MessageContext(index=5, ref="r1", call=call)).facts
    assert not [f for f in plain if f.kind == APPROVAL]


def test_an_approval_nested_in_a_record_or_a_review_awaited_is_an_approval() -> None:
    """A purchase request's answer carries its approval workflow as a nested object whose status is a plain
    "pending"; a data export awaits a governance review. Both ids are what the agent must cite later."""
    from proxy.extract.approvals import tool_approvals

    purchase = {"pr_id": "PR-2026-0877", "status": "in_approval", "total_budget_cny": 262200.0,
                "approval": {"approval_id": "APR-2026-0412", "workflow": "PR > 200k CNY", "status": "pending",
                             "steps": [{"step": 1, "role": "department_manager", "state": "approved"}]}}
    assert tool_approvals(purchase) == [("approval APR-2026-0412", "pending")]
    export = {"request_id": "DG-2026-0331", "status": "pending_review", "queue": "data-governance"}
    assert tool_approvals(export) == [("DG-2026-0331", "pending_review")]
    assert tool_approvals({"request_id": "DG-2026-0331", "status": "approved", "approved_by": "k.brandt"}) == [
        ("DG-2026-0331", "approved; approved_by: k.brandt")]
    assert tool_approvals({"id": "ORD-1", "status": "pending", "items": [{"sku": "A", "status": "pending"}]}) == []
