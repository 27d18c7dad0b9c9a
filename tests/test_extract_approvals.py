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


def test_chinese_request() -> None:
    subject = approval_subject("将删除分支 feature-x（PO-2231）。请确认是否继续？")
    assert subject == "删除: PO-2231"
    assert approvals("user", "确认", "将删除分支 feature-x（PO-2231）。请确认是否继续？") == [(subject, "granted")]


def test_request_without_ids_uses_the_asking_sentence() -> None:
    text = "I have prepared the patch.\n\nShall I apply it now?"
    assert approvals("assistant", text) == [("apply: shall i apply it now", "requested")]


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
