"""Claims a tool output states that the task can turn on, in English and Chinese.

- rules: normative sentences of a document, an issue or PR comment, a policy or an API's answer ("Patches must not
  change the public signature", "Refunds above $500 require a second approver", "发布前必须通过安全审查");
- outcomes: git bisect's first bad commit; the status fields of an answer (status, approver, ticket, scope, expiry:
  one line per output, side by side); what the output says is not known yet ("release date: not yet scheduled"),
  so that nobody guesses it.

A rule is never read from rows (source code, search hits, listings, build files, logs; see evidence.py): a docstring
that says "must be an integer" is code, not a rule the task must follow. Each claim's value is the sentence or line
as written. Linear: only a bounded head and tail of the output is read, line by line, each line with a substring test
before any pattern, and at most MAX_* claims come from one output.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator

from .evidence import Evidence, row_kind
from .text import TRACEBACK, clip, collapse, looks_like_code, normalize, sentences, strip_markup, units

MAX_RULES = 4  # per output: a document stating more is recalled by ref
MAX_UNKNOWNS = 3
MAX_STATUS_FIELDS = 8  # fields of one status line
MAX_CLAIM_CHARS = 240
MAX_LINE_CHARS = 600  # a longer line is a blob, not a sentence someone wrote
MIN_RULE_WORDS = 4
MAX_SUBJECT_CHARS = 80

_RULE_WORDS = (
    "must", "never", "only", "required", "require", "shall", "should not", "shouldn't", "allowed", "permitted", "not allowed", "forbidden", "prohibited", "mandatory",
    "do not", "don't", "may not", "always", "no longer accept", "必须", "不得", "仅", "禁止", "不允许", "只能", "务必",
    "严禁", "不可", "须", "一律",
)  # fmt: skip
_RULE = re.compile(
    r"\b(?:must(?: not|n't)?|never|shall(?: not)?|should not|shouldn't|(?:is|are) (?:not )?(?:required|allowed|"
    r"permitted|forbidden|prohibited|mandatory)|requires? (?:an? |the |two |second |approval|sign-?off|review)|"
    r"may not|no longer accepts?|(?:must|should) always)\b|(?:^|[;:,.]\s*|\b(?:you|we|please) )(?:do not|don't)\b"
    r"|(?:^|[;:,]\s*)(?:only|always|never)\b|\bonly (?:\w+ ){0,3}(?:may|can|be|is|are)\b"
    r"|必须|不得|仅(?:限|能|允许|可)|禁止|不允许|只能|务必|严禁|不可以|一律",
    re.I,
)
# A sentence about the program itself, not the task's rules ("you must give at least one requirement").
_NOT_A_RULE = re.compile(
    r"^(?:usage|error|warning|note: you|hint|traceback|raise|assert|return)\b|--\w|\bpip\b|\bsudo\b|"
    r"missing \d+ required|required positional|must be (?:an? )?(?:int|str|integer|string|list|dict|tuple|float|"
    r"bool|callable|instance|subclass|iterable|sequence)\b",
    re.I,
)
_LINE_NUMBER = re.compile(r"^\s*\d{1,6}(?:\t|: |  )")  # `cat -n`, `nl`, an editor's read: "    12\t"
_FIRST_BAD = re.compile(r"\b([0-9a-f]{7,40}) is the first bad commit\b")
_STATUS_KEYS = frozenset(
    "status state approval approval_status approved approved_by approver approvers decision verdict ticket error "
    "error_code reason limit "
    "ticket_id request_id scope expires expiry expires_at expiration valid_until deadline eta due due_date "
    "release_date owner assignee reviewer reviewed_by granted_by signed_off_by 状态 审批人 批准人 审批 有效期 "
    "范围 截止 截止日期 工单".split()
)
_KEY_VALUE = re.compile(r"^\s*(?:[-*•]\s*)?(?P<key>[^\W\d][\w .-]{0,40}?)\s?[:：=]\s*(?P<value>\S.{0,200})$")
_UNKNOWN_WORDS = ("not yet", "tbd", "tba", "to be determined", "to be announced", "to be confirmed", "unknown",
                  "not scheduled", "unscheduled", "no date", "not decided", "undecided", "尚未", "待定", "未定", "未确定")
_UNKNOWN = re.compile(
    r"\bnot yet (?:\w+ ){0,2}(?:scheduled|decided|set|fixed|known|confirmed|available|announced|planned|approved)\b|"
    r"\b(?:TBD|TBA)\b|\bto be (?:determined|announced|confirmed)\b|\b(?:is|are|still|remains|currently) unknown\b|\b(?:not |un)scheduled\b|"
    r"\bno (?:date|eta|deadline)(?: (?:yet|set))?\b|\b(?:not |un)decided\b|尚未(?:确定|公布|安排|决定|排期)|待定|未定|未确定",
    re.I,
)


def rules(text: str, evidence: Evidence, failed: bool = False) -> list[tuple[str, str]]:
    """(key, sentence) of the normative sentences an output states, in text order: none from rows, none from a
    failed command's output (an error message's "must be compiled" is the failure, not a rule of the task)."""
    if failed or evidence.is_rows or TRACEBACK in text or not any(word in text.lower() for word in _RULE_WORDS):
        return []
    found: list[tuple[str, str]] = []
    seen: set[str] = set()
    # sentences of the statement lines' paragraphs and list items, hard wraps joined (a rule of a document is
    # often wrapped over two lines)
    for unit in units("\n".join(_statement_lines(text, marks=True))):
        if not _RULE.search(unit):
            continue
        for sentence in (part.lstrip("#>*-• ").strip() for part in sentences(unit, 16)):
            rule = _RULE.search(sentence)
            if rule is None or _NOT_A_RULE.search(sentence) or sentence.rstrip().endswith(("?", "？")):
                continue
            if _has_cjk(sentence):
                sentence = _clause(sentence, rule.start())
            elif len(sentence.split()) < MIN_RULE_WORDS:
                continue
            key = normalize(sentence)[:MAX_SUBJECT_CHARS * 2]
            if key in seen:
                continue
            seen.add(key)
            found.append((key, clip(collapse(sentence), MAX_CLAIM_CHARS)))
            if len(found) >= MAX_RULES:
                return found
    return found


def outcomes(text: str, evidence: Evidence, subject: str) -> list[tuple[str, str]]:
    """(key, line) of what an output establishes: bisect's first bad commit, its status fields as one line, and
    what it says is not known yet. `subject` names the output (the command or the object asked about)."""
    found: list[tuple[str, str]] = []
    if "first bad commit" in text:
        match = _FIRST_BAD.search(text)
        if match is not None:
            after = text[match.end():match.end() + 400]
            title = next((line.strip() for line in after.splitlines()[1:] if line.startswith("    ") and line.strip()), "")
            found.append(("git bisect first bad commit",
                          clip(f"{match.group(1)} is the first bad commit" + (f" ({title})" if title else ""),
                               MAX_CLAIM_CHARS)))
    if evidence.is_rows:
        return found
    fields: list[tuple[str, str]] = []
    unknowns: list[tuple[str, str]] = []
    lowered = text.lower()
    look_for_unknowns = any(word in lowered for word in _UNKNOWN_WORDS)
    for line in _statement_lines(text):
        match = _KEY_VALUE.match(line) if (":" in line or "：" in line or "=" in line) else None
        if match is not None:
            key = collapse(match.group("key")).lower().replace(" ", "_")
            value = collapse(strip_markup(match.group("value")))
            if key in _STATUS_KEYS and len(fields) < MAX_STATUS_FIELDS * 2:
                fields.append((key, f"{collapse(match.group('key'))}: {clip(value, 100)}"))
        if look_for_unknowns and len(unknowns) < MAX_UNKNOWNS and _UNKNOWN.search(line):
            said = clip(collapse(strip_markup(line.strip(" -*•"))), MAX_CLAIM_CHARS)
            unknowns.append((f"not known: {normalize(said)[:MAX_SUBJECT_CHARS]}", said))
    # A field that repeats belongs to a list of records (a document's sections, a table), not to one answer
    counts = Counter(key for key, _ in fields)
    shown = [field for key, field in fields if counts[key] == 1][:MAX_STATUS_FIELDS]
    if shown:
        named = clip(subject, MAX_SUBJECT_CHARS)
        found.append((f"status of {named}" if named else "status",
                      clip(f"{named}: " * bool(named) + "; ".join(shown), MAX_CLAIM_CHARS * 2)))
    return found + unknowns


MAX_TABLE_ROWS = 12  # a longer table is data to recall by ref, not figures to compare side by side
MIN_TABLE_ROWS = 2
MAX_COLUMNS = 8
_CELL = re.compile(r"[^\s](?: ?[^\s])*")  # text with no two spaces or a tab inside
_NUMBER_CELL = re.compile(r"^[-+]?\d[\d,]*(?:\.\d+)?\s?(?:%|ms|s|MB|GB|KB|MB/s|x)?$")
_HEADER_WORD = re.compile(r"[A-Za-z][\w.%/-]{1,24}")
_GENERIC_HEADERS = frozenset("ms s sec mb kb gb rows count total n name id errors value values unit units".split())


def columns(text: str) -> list[tuple[str, str]]:
    """(header word, line) of each numeric column of the small aligned tables an output ends its work with (a
    benchmark's or a load test's summary, a data frame printed): `p95: 256=91.6; 512=87.3` — the figures of the
    candidates side by side, exact. A row's cells are matched to the header by where they stand, so a table whose
    rows carry a label the header does not name (pandas' index) or leave a cell empty is read right, and a cell
    no header stands over leaves its column out (a figure under the wrong name would be worse than none). They
    are candidates: a column becomes a fact when the dialogue names its header (see state.py)."""
    found: list[tuple[str, str]] = []
    lines = text.splitlines()
    index = 0
    while index < len(lines) and len(found) < MAX_COLUMNS * 2:
        header = _cells(lines[index])
        index += 1
        if len(header) < 3 or any(_NUMBER_CELL.match(cell) for _, _, cell in header):
            continue
        rows: list[list[tuple[int, int, str]]] = []
        if index < len(lines) and lines[index].strip() and not lines[index].strip(" -=+|:\t"):
            index += 1  # the rule under a header
        while index < len(lines) and len(rows) <= MAX_TABLE_ROWS:
            cells = _cells(lines[index])
            if not len(header) - 1 <= len(cells) <= len(header) + 1 or \
                    not any(_NUMBER_CELL.match(cell) for _, _, cell in cells[1:]):
                break
            rows.append(cells)
            index += 1
        if not MIN_TABLE_ROWS <= len(rows) <= MAX_TABLE_ROWS:
            continue
        for start, end, name in header[:MAX_COLUMNS + 1]:
            word = _HEADER_WORD.match(name)
            token = word.group().split("_")[0].lower() if word else ""
            if not token or token in _GENERIC_HEADERS:
                continue
            under = [_under(row, start, end) for row in rows]
            if any(cell is None or not _NUMBER_CELL.match(cell) for cell in under):
                continue
            values = "; ".join(f"{clip(row[0][2], 48)}={cell}" for row, cell in zip(rows, under))
            found.append((token, clip(f"{name}: {values}", MAX_CLAIM_CHARS * 2)))
    return found


def _cells(line: str) -> list[tuple[int, int, str]]:
    """The cells of an aligned table's line (text apart by two spaces or a tab), with where each starts and ends."""
    return [(match.start(), match.end(), match.group()) for match in _CELL.finditer(line)]


def _under(row: list[tuple[int, int, str]], start: int, end: int) -> str | None:
    """The one cell of a row (its label apart) that stands under a header cell spanning start..end, or None."""
    cells = [cell for cell_start, cell_end, cell in row[1:] if cell_start < end and start < cell_end]
    return cells[0] if len(cells) == 1 else None


def _statement_lines(text: str, marks: bool = False) -> Iterator[str]:
    """Lines someone wrote as statements: not rows (code, hits, listings, logs), not blobs; with `marks`, list and
    heading marks kept and an empty line where a row was left out (so paragraphs end there)."""
    for line in text.splitlines():
        numbered = _LINE_NUMBER.match(line)
        if numbered is not None:
            line = line[numbered.end():]  # a file read with its line numbers: its lines are what was written
        stripped = line.strip()
        if not stripped or len(stripped) > MAX_LINE_CHARS or stripped.startswith(("<", "#!", "//", "/*", "*/")) \
                or row_kind(line) is not None or looks_like_code(stripped):
            if marks:
                yield ""
            continue
        if stripped.startswith('"') and '": ' in stripped[:64]:
            stripped = _json_line(stripped)  # a line of pretty-printed JSON in a mixed output
        yield line.rstrip() if marks else stripped.lstrip("#>*-• ").strip()


def _json_line(line: str) -> str:
    """`"description": "Patch release …\\nrelease date: not yet scheduled",` -> its text, escapes undone."""
    key, _, value = line.partition('": ')
    value = value.rstrip(",").strip('"').replace("\\n", " ").replace('\\"', '"')
    return f"{key.strip(chr(34))}: {value}"


def _clause(sentence: str, rule_at: int) -> str:
    """A Chinese sentence from the space-separated field that states the rule (its word at `rule_at`), when
    labelled fields come before it (`开户行：… 账号：… 本报价单…不得…`): Chinese puts no spaces between words, so a
    space sets a field apart."""
    start = sentence.rfind(" ", 0, rule_at) + 1
    fields = sentence[:start].split()
    labelled = bool(fields) and all("：" in field or ":" in field for field in fields)
    return sentence[start:] if labelled and _has_cjk(sentence[start:rule_at]) else sentence


def _has_cjk(text: str) -> bool:
    return any("\u4e00" <= char <= "\u9fff" for char in text)


__all__ = ["columns", "outcomes", "rules"]
