"""Plain records shared by the pure core (extract, state, plan, build) and the store."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Message = dict[str, Any]

# A message translated from another wire format (Anthropic Messages, Responses) keeps under this key what it needs
# to be written back as it came (the items of a Responses turn, an Anthropic tool result's is_error). The core
# copies it along with the message and never reads it.
WIRE = "_wire"

# Kinds of entries in the key-facts ledger. A later entry with the same (kind, key) supersedes the earlier one.
CONSTRAINT = "constraint"  # a rule from a user turn: value is the sentence
PLAN = "plan"  # a plan item: key is the item, value is "pending", "next" (pending until the next "Next:") or "completed"
APPROVAL = "approval"  # key is what it concerns, value is "requested" | "granted" | "denied"
VERIFICATION = "verification"  # key is what was checked, value "passed" | "failed" | "unclear" (exit 0, error shown)
DECISION = "decision"  # key is the subject, value is the decision sentence
FIELD = "field"  # a `key: value` pair or a JSON field of a tool output
AMOUNT = "amount"  # money with a currency
QUANTITY = "quantity"  # a number with a unit, or a percentage
DATE = "date"
IDENTIFIER = "id"  # PO-2231, UUIDs, hashes, user ids such as mia_li_3668
PATH = "path"
URL = "url"

# Learned the hard way: an approach that does not work, a limit, a refusal. Key: a short normalized subject ("bulk
# endpoint", "rate limit", "limit per page", "access api.example.com/v1/bulk"); value: the agent's sentence, or for
# a tool output a composed line ("rate limit: 100 requests per minute (429; Retry-After: 30; at https://…)").
FAILURE = "failure"
# The agent's own derived figure ("14.40 / 30 = 0.48 USD/piece"; key: its label or expression) or stated
# conclusion ("Root cause: …"; key: the normalized sentence); value: the sentence as written.
FINDING = "finding"

# A normative sentence a tool output states (a maintainer's comment, a policy's clause): value is the sentence.
RULE = "rule"
# What a tool output establishes (bisect's first bad commit, an answer's status fields, a date not yet known): key
# is what it is about, value the line as written.
OUTCOME = "outcome"
# A row of a tool output (an entity or a `key: value` line) kept for when the dialogue singles it out: key is
# "<kind>:<key>" of the fact it becomes then (see TaskState.apply_fact); never shown before.
CANDIDATE = "candidate"
# A numeric column of a small table a tool output printed (a benchmark's summary), as a candidate: key is the
# column's header word ("p95"), value the figures side by side ("p95_ms: 256=91.6; 512=87.3").
COLUMN = "column"

# A file a successful tool call changed (a write, edit or patch): key is its path (relative to the directory the
# command went to, case kept), value how ("edited (sed -i)", "written (cat > heredoc)", "deleted (rm)").
CHANGED = "file_changed"
# A file written from a here-document whose content writes other files when run (a fix script) or applied (a
# patch): key is its path, value one `path<TAB>how` line per file it writes. Not shown: see RAN.
SCRIPT = "script"
# Such a file (any script or patch file, as far as the call knows) run or applied by a successful call: key is its
# path, value how ("python3 fix.py", "git apply fix.patch"). A run after its SCRIPT fact changed the files it writes.
RAN = "ran"
# A test run or check script whose output shows a failure: key is its command (as VERIFICATION keys it), value its
# error line as printed (`FAILED tests/x.py::test_y - …`, `ValueError: …`).
FAILING = "failing"
# What a passing run shows passed: its command, the tests and test paths it names, the tests its output lists as
# passed (`tests/x.py::test_y`, `tests/x.py`, `app.tests.T.test_y`). Value "passed". One later than a FAILING
# fact of the same command (or of the one test that failed) means it has passed since. Not shown.
PASSING = "passing"

# Why the agent changed a file: key is the path, value the sentence of the message that made its first change
# which says what is wrong or what the change does (shown on the file's line).
REASON = "reason"
# What the agent said last that reads as a reason (see conclusions.change_reason): key "latest"; a change made by a
# call whose message says nothing takes it as its REASON. Not shown.
SAID = "said"

FACT_KINDS = (CONSTRAINT, PLAN, APPROVAL, VERIFICATION, DECISION, FIELD, AMOUNT, QUANTITY, DATE, IDENTIFIER, PATH, URL,
              FAILURE, FINDING, RULE, OUTCOME, CANDIDATE, COLUMN, CHANGED, SCRIPT, RAN, FAILING, PASSING, REASON, SAID)


@dataclass(frozen=True, slots=True)
class ClientSession:
    """The session a client names in its own headers (Claude Code's, Codex's): `tree` groups an agent and its
    subagents, `own` names this conversation within it, `parent` the conversation that started it (a subagent's)."""

    tree: str
    own: str
    parent: str | None = None


@dataclass(frozen=True, slots=True)
class Fact:
    """One entry of the key-facts ledger, extracted deterministically from one message."""

    kind: str
    key: str
    value: str
    turn: int  # index of the source message in the conversation
    evidence_ref: str | None = None  # ref of the stored message it came from
    source: str = ""  # role of that message: "tool" facts are what the system knew, "assistant" ones the model said


@dataclass(frozen=True, slots=True)
class Action:
    """One tool call and its outcome, recorded when the tool's result arrives."""

    turn: int  # index of the tool result message
    tool: str
    arguments: str  # the call's arguments as the model wrote them (JSON text)
    outcome: str  # "ok" | "error"
    gist: str  # one line: the error line, or the first meaningful line, and the size
    call_id: str = ""
    evidence_ref: str | None = None


@dataclass(frozen=True, slots=True)
class Extraction:
    """What one message yields."""

    facts: tuple[Fact, ...] = ()
    actions: tuple[Action, ...] = ()


@dataclass(frozen=True, slots=True)
class ToolCall:
    """An assistant's tool call, as seen when its result is extracted."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class MessageContext:
    """What an extractor may know besides the message itself; all of it comes from the same request path."""

    index: int  # position of the message in the conversation
    ref: str | None = None  # evidence ref of this message
    call: ToolCall | None = None  # for a tool message: the call it answers
    previous_assistant_text: str = ""  # text of the nearest earlier assistant message (approval questions)
    is_first_user: bool = False  # the task itself
