"""Approvals: an assistant asking for explicit confirmation, and the user's yes or no that follows.

The key of an approval is a subject derived from the asking text alone, so the user's answer (extracted with
`context.previous_assistant_text`) lands on the same key as the request and supersedes it.
"""

from __future__ import annotations

import re

from ..records import AMOUNT, DATE, IDENTIFIER, QUANTITY
from .facts import entities
from .text import clip, normalize, sentences, units

REQUESTED = "requested"
GRANTED = "granted"
DENIED = "denied"
MAX_SUBJECT_CHARS = 100
MAX_SUBJECT_ENTITIES = 4
_ANSWER_PROBE_CHARS = 200  # the answer is in the first words of the reply
REQUEST_WINDOW_CHARS = 2_000  # the end of an assistant message, where a confirmation request is looked for
MAX_AFTER_REQUEST_CHARS = 300  # a request closes its message: what may follow it (details, "(yes/no)")
SUBJECT_WINDOW_CHARS = 4_000  # the end of the message, where the subject's verb and ids are taken from

_REQUEST = re.compile(
    r"\b(?:do you want (?:me )?to (?:proceed|go ahead|continue)|would you like (?:me )?to (?:proceed|go ahead|continue)"
    r"|if you(?:'d|’d| would) like (?:me )?to (?:proceed|go ahead)"
    r"|(?:shall|should|may|can) i (?:proceed|go ahead|continue)"
    r"|(?:shall|should) i \w[^.?!\n]{0,80}\?"
    r"|are you sure|do you (?:approve|confirm|agree)|please confirm(?! (?:the|your|which|what|how)\b)"
    r"|confirm (?:if|whether|that|by|to proceed)\b|confirm with (?:a )?[\"“']?(?:yes|y|ok)\b|once you confirm|(?:ok|okay) to proceed"
    r"|\((?:yes/no|y/n)\)|\[y/n\]|(?:reply|respond|answer) (?:with )?[\"“']?yes)"
    r"|请确认|确认一下|是否继续|是否确认|可以吗|同意吗",
    re.I,
)
# Every request pattern holds one of these: a cheap test before the slow scan.
_REQUEST_WORDS = (
    "shall i",
    "should i",
    "proceed",
    "go ahead",
    "continue",
    "confirm",
    "sure",
    "approve",
    "agree",
    "yes",
    "y/n",
    "确认",
    "继续",
    "可以吗",
    "同意",
)
_ACTION = re.compile(
    r"\b(?:book|cancel|modif|chang|updat|upgrad|downgrad|refund|delet|remov|pay|charg|transfer|send|add|deploy|push|"
    r"merg|install|apply|commit|submit|purchas|buy|execut|overwrit|reset|drop|migrat|releas|publish)\w*"
    r"|预订|取消|修改|删除|支付|付款|退款|部署|提交",
    re.I,
)
# Canonical verbs by stem, so "booking"/"book" and "cancellation"/"cancel" give one subject.
_VERB_STEMS = (
    ("book", "book"), ("cancel", "cancel"), ("modif", "modify"), ("chang", "change"), ("updat", "update"),
    ("upgrad", "upgrade"), ("downgrad", "downgrade"), ("refund", "refund"), ("delet", "delete"), ("remov", "remove"),
    ("pay", "pay"), ("charg", "charge"), ("transfer", "transfer"), ("send", "send"), ("add", "add"),
    ("deploy", "deploy"), ("push", "push"), ("merg", "merge"), ("install", "install"), ("apply", "apply"),
    ("commit", "commit"), ("submit", "submit"), ("purchas", "purchase"), ("buy", "buy"), ("execut", "execute"),
    ("overwrit", "overwrite"), ("reset", "reset"), ("drop", "drop"), ("migrat", "migrate"), ("releas", "release"),
    ("publish", "publish"),
)  # fmt: skip
_YES = re.compile(
    r"^\W*(?:yes|yeah|yep|yup|sure|ok|okay|confirm(?:ed)?|i confirm|go ahead|proceed"
    r"|please (?:do(?! not)|proceed|go ahead)"
    r"|do it|sounds good|that(?:'s|’s| is) (?:fine|correct|right|good)|correct|approved?|lgtm|absolutely|definitely"
    r"|affirmative|no problem|no worries|y)\b"
    r"|^\W*(?:同意|好的|好|确认|可以|是的|是|行|没问题|继续)",
    re.I,
)
# "cancel" is no answer word: in "cancel it" the user may be asking for the very action proposed.
_NO = re.compile(
    r"^\W*(?:no|nope|nah|don(?:'|’)?t|do not|stop|wait|hold on|not now|never ?mind|n)\b"
    r"|^\W*(?:不|别|算了|等一下)",
    re.I,
)
_YES_ANYWHERE = re.compile(r"\b(?:i confirm|please proceed|go ahead|you can proceed|yes)\b|确认|同意", re.I)
_NO_ANYWHERE = re.compile(r"\b(?:don(?:'|’)?t|do not|not) (?:proceed|go ahead|do (?:it|that))\b|不要继续|不同意", re.I)


def asking_sentence(text: str) -> str | None:
    """The sentence of an assistant message that asks for explicit confirmation, or None.

    Only the end of the message is read: a request for confirmation closes the message that makes it.
    """
    text = text[-REQUEST_WINDOW_CHARS:]
    lowered = text.lower()
    if not any(word in lowered for word in _REQUEST_WORDS) or not _REQUEST.search(text):
        return None
    found = units(text)
    asking: list[tuple[int, str]] = []  # (unit, sentence) of each request
    for position, unit in enumerate(found):
        if _REQUEST.search(unit):
            asking += [(position, sentence) for sentence in sentences(unit) if _REQUEST.search(sentence)] or \
                [(position, unit)]
    if not asking:
        return None
    # an agent that goes on reasoning after "should I fix the test or revert?" asked itself, not the user: the
    # message's last request closes it (details after it allowed); the first names what is asked for
    last, sentence = asking[-1]
    unit = found[last]
    after = len(unit) - unit.find(sentence) - len(sentence) + sum(len(rest) for rest in found[last + 1:])
    return asking[0][1] if after <= MAX_AFTER_REQUEST_CHARS else None


def approval_subject(text: str) -> str | None:
    """A short deterministic subject for the confirmation `text` asks for, or None when it asks for none.

    The action verb (from the asking sentence, else the whole message) and the first ids and amounts of the
    message: `book: $255, $250, $5`, `cancel: 59XX6W`. Without ids, the asking sentence stands in.
    """
    asking = asking_sentence(text)
    if asking is None:
        return None
    tail = text[-SUBJECT_WINDOW_CHARS:]
    verb = _verb(asking) or _verb(tail)
    found: list[str] = []
    for entity in entities(tail, limit=64):
        if entity.kind in (IDENTIFIER, AMOUNT) and entity.raw not in found:
            found.append(entity.raw)
            if len(found) >= MAX_SUBJECT_ENTITIES:
                break
    if found:
        subject = f"{verb or 'proceed'}: {', '.join(found)}"
    else:
        subject = f"{verb}: {normalize(asking)}" if verb else normalize(asking)
    return clip(subject, MAX_SUBJECT_CHARS)


def _verb(text: str) -> str | None:
    match = _ACTION.search(text)
    if match is None:
        return None
    word = match.group().lower()
    for stem, canonical in _VERB_STEMS:
        if word.startswith(stem):
            return canonical
    return word  # a Chinese verb stands for itself


def approval_answer(text: str, previous_assistant_text: str) -> tuple[str, str] | None:
    """(subject, status) when `text` answers a confirmation the previous assistant turn asked for; the status is
    "granted" or "denied", followed by the user's own words when they say more than yes or no (a ticket, an
    approver, a scope: `granted; Yes, ticket APR-4471, Dana approved, up to $400`)."""
    subject = approval_subject(previous_assistant_text) if previous_assistant_text else None
    if subject is None:
        return None
    head = text.strip()[:_ANSWER_PROBE_CHARS]
    if _NO_ANYWHERE.search(head):
        status = DENIED  # "please do not proceed", even after a polite "yes, but"
    elif _YES.match(head):
        status = GRANTED
    elif _NO.match(head):
        status = DENIED
    elif _YES_ANYWHERE.search(head):
        status = GRANTED
    else:
        return None
    return subject, _with_words(status, text)


def stated_approvals(text: str) -> list[tuple[str, str]]:
    """(ticket, status) of the approvals a user's message states without being asked ("APR-2231 is approved by
    Mia Chen, staging only", "审批单 OPS-118 已批准"): a sentence with an approval word and a ticket id."""
    lowered = text[:APPROVAL_SCAN_CHARS].lower()
    if not any(word in lowered for word in _STATED_WORDS):
        return []
    found: list[tuple[str, str]] = []
    for sentence in sentences(text[:APPROVAL_SCAN_CHARS], 64):
        cue = _STATED.search(sentence)
        if cue is None:
            continue
        tickets = [e.raw for e in entities(sentence, limit=8) if e.kind == IDENTIFIER]
        if not tickets:
            continue
        status = DENIED if _STATED_DENIED.search(sentence) else GRANTED
        found.append((tickets[0], _with_words(status, sentence)))
        if len(found) >= MAX_STATED_APPROVALS:
            break
    return found


def _with_words(status: str, text: str) -> str:
    """The status, and the user's words when they say more than yes or no: a ticket, an amount or date, who
    approves, a scope or a limit."""
    words = clip(" ".join(text.split()), MAX_WORDS_CHARS)
    detailed = _DETAIL_CUE.search(words) is not None or any(
        entity.kind in (IDENTIFIER, AMOUNT, DATE, QUANTITY) for entity in entities(words, limit=4))
    return f"{status}; {words}" if detailed else status


APPROVAL_SCAN_CHARS = 4_000  # of a user's message, where approvals it states are looked for
MAX_STATED_APPROVALS = 3
MAX_WORDS_CHARS = 200
_DETAIL_CUE = re.compile(r"\b(?:approver|approved by|ticket|scope|only|up to|until|expires?|limit)\b|批准人|审批人|仅|截至|上限",
                         re.I)
_STATED_WORDS = ("approv", "sign-off", "signed off", "granted", "authoriz", "authoris", "批准", "审批", "同意")
_STATED = re.compile(r"\b(?:approv\w*|sign(?:ed)?[- ]off|granted|authori[sz]\w*)\b|批准|审批|同意", re.I)
_STATED_DENIED = re.compile(r"\b(?:not approved|denied|rejected|declined|refused)\b|未批准|不批准|驳回|拒绝", re.I)


def approval_status(value: str) -> str:
    """The status word of an approval's value (`granted; Yes, ticket APR-4471` -> granted)."""
    return value.split(";", 1)[0].strip()


# An object in a tool's JSON output whose status is about approval: its id is what a later call must cite, and
# often only that tool output holds it (a scope request, a refund awaiting a supervisor, a change request).
_APPROVAL_STATUS = re.compile(r"approv|sign[-_ ]?off|\breview\b|_review\b|审批|批准|审核", re.I)
_STATUS_FIELDS = ("status", "state", "approval_status", "approval_state")
_ID_FIELDS = ("id", "approval_id", "request_id", "change_id", "ticket_id", "reference", "number")
# Who approves, what, until when: the fields an approval's line carries beside its status.
_DETAIL_FIELDS = ("approver", "approvers", "approved_by", "requested_approver", "assigned_to", "reviewer", "scope",
                  "amount", "limit", "max_amount", "expires", "expires_at", "expiry", "valid_until", "ticket",
                  "ticket_id", "reason")
MAX_APPROVAL_NODES = 2_000  # JSON nodes visited per output
MAX_TOOL_APPROVALS = 5


def tool_approvals(data: object) -> list[tuple[str, str]]:
    """(subject, status) of the objects in a tool's JSON output whose status is about approval
    (`pending_owner_approval`, `awaiting_approval`, `approved`), in document order: the subject is the object's
    name and id (`scope_request SRQ-7F3K-2291`)."""
    found: list[tuple[str, str]] = []
    queue: list[tuple[str, object]] = [("", data)]
    for name, node in queue:  # breadth first, in document order; the queue grows while it is read
        if len(queue) > MAX_APPROVAL_NODES:
            break
        if isinstance(node, list):
            queue.extend((name, item) for item in node)
            continue
        if not isinstance(node, dict):
            continue
        status = next((node[field] for field in _STATUS_FIELDS if isinstance(node.get(field), str)), "")
        # about approval by its status (`awaiting_approval`, `pending_review`), or by where it sits or what it is
        # (`"approval": {"approval_id": …, "status": "pending"}`)
        if status and (_APPROVAL_STATUS.search(status) or _APPROVAL_STATUS.search(name) or "approval_id" in node):
            ident = next((str(node[field]) for field in _ID_FIELDS if isinstance(node.get(field), (str, int))
                          and not isinstance(node.get(field), bool)), "")
            if ident:
                details = [f"{field}: {scalar}" for field in _DETAIL_FIELDS
                           if isinstance(scalar := node.get(field), (str, int, float)) and not isinstance(scalar, bool)
                           and str(scalar).strip()]
                value = "; ".join([clip(status, 60), *(clip(detail, 100) for detail in details)])
                found.append((clip(f"{name} {ident}".strip(), MAX_SUBJECT_CHARS), value))
        queue.extend((key, value) for key, value in node.items() if isinstance(value, (dict, list)))
    # the ones still awaited first: a list of approved records must not crowd out the request awaiting approval
    awaited = [item for item in found if not is_settled(item[1])]
    return (awaited + [item for item in found if is_settled(item[1])])[:MAX_TOOL_APPROVALS]


_SETTLED = re.compile(r"grant|approved|den(?:y|ied)|reject|declin|cancel|expire|not.required|closed|complete|done",
                      re.I)


def is_settled(status: str) -> bool:
    """Whether an approval's status says it is no longer awaited (granted, approved, denied, cancelled, …); the
    details after its status word (`pending; expires: 2026-12-09`) are not read."""
    return _SETTLED.search(approval_status(status)) is not None
