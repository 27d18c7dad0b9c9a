"""The agent's conclusions in its own prose, and the limits a tool output proves, in English and Chinese.

- decisions: "Decision: stay on pytz", "I'll use the 2026-06-30 central parity 7.1235 for every CNY quote",
  "We'll keep ...", "决定…", "采用…", "统一按…计算";
- failures: what was learned the hard way ("the bulk endpoint is Enterprise-only: 403", "pytz ignores fold",
  "X doesn't work", "不支持", "行不通") and limits learned ("100 requests per minute", "限流");
- findings: figures the agent derived ("14.40 / 30 = 0.48 USD/piece", "合计：12,340.50 元") and conclusions it
  stated ("Root cause: …", "结论：…");
- http_failures: what a tool output shows of a rate limit (a 429, `X-RateLimit-Limit`, `Retry-After`) or of a
  refusal (a 401/403 "requires an Enterprise plan").

Each gives (key, value) pairs. A prose value is the sentence as written (it can be found again in what is
forwarded), at most MAX_CONCLUSION_CHARS. Keys decide supersession: a failure is keyed by its subject ("bulk
endpoint", "rate limit"), a derived figure by its label ("supplier c unit price"), so a later statement about the
same thing replaces the earlier one; a decision or a stated conclusion by its sentence.

Linear: a substring test decides whether a message is read at all, only the first *_SCAN_CHARS are read, every
pattern is bounded, and at most MAX_* pairs come from one message.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit

from ..records import ToolCall
from .facts import parse_json
from .text import cut, is_heading, looks_like_code, normalize, prose_lines, sentences, strip_markup, trim, units

MAX_CONCLUSION_CHARS = 240
MAX_DECISIONS = 3  # per message: decisions are few; more is narration
MAX_FAILURES = 3
MAX_FINDINGS = 6
MAX_SCAN_CHARS = 8_000  # prose is read from the start of a message: a longer one is mostly pasted output
MAX_PROSE_SENTENCES = 200  # read for decisions and failures: 8,000 characters of prose hold far fewer
MAX_HTTP_SCAN_CHARS = 6_000  # status lines, headers and error bodies come first
MAX_KEY_CHARS = 80
MAX_SUBJECT_WORDS = 4
MAX_SUBJECT_CHARS = 16  # of an unspaced (Chinese) subject, the characters nearest the cue
MAX_LABEL_WORDS = 8
MAX_WHERE_CHARS = 80

_APOS = "['’]"
_QUESTION_END = re.compile(r"[?？]\s*[\"')\]]*$")

# ---- decisions ------------------------------------------------------------------------------------------------

_DECISION = re.compile(
    rf"\b(?:i{_APOS}ll use|i will use|i{_APOS}ll go with|i will go with|we{_APOS}ll use|we will use|we will go with|"
    rf"we{_APOS}ll go with|i{_APOS}ve decided|i decided|i have decided|we decided|we{_APOS}ve decided|decided to|"
    rf"decision:|the fix is to|the solution is to|the right fix is|i{_APOS}m going to use|let{_APOS}s go with|"
    rf"i chose|we chose|i{_APOS}ll choose|going with|we{_APOS}ll keep|we will keep|i{_APOS}ll keep using|"
    rf"i will keep using|(?:i|we){_APOS}ll stick with|(?:i|we) will stick with|sticking with)(?!\w)"
    r"|(?<![您你由])决定|采用|统一(?:使用|用|按|以)|我们(?:用|使用|选用)|我(?:将|会)(?:使用|用)|改用|就用"
    r"|(?<![请可您你以])选择|以[^，。；,;\n]{1,20}为准|按[^，。；,;\n]{1,30}(?:计算|折算|换算)",
    re.I,
)
Holds = Callable[[str], "re.Match[str] | None"]  # does a lowercase text hold one of some words?


def _any_of(words: tuple[str, ...]) -> Holds:
    """Whether a (lowercase) text holds one of `words` as a substring: one scan in C instead of one per word."""
    return re.compile("|".join(re.escape(word) for word in words)).search


# Every decision pattern holds one of these: a cheap test before the slow scan.
_DECISION_WORDS = (
    "use", "go with", "going with", "decid", "decision", "fix is", "solution is", "chose", "choose", "keep",
    "stick", "决定", "采用", "统一", "我们", "我将", "我会", "改用", "就用", "选择", "为准", "算",
)  # fmt: skip

# ---- failures and limits --------------------------------------------------------------------------------------

_FAILURE = re.compile(
    rf"\b(?:does ?n{_APOS}?t|did ?n{_APOS}?t|does not|did not|won{_APOS}t|will not|can{_APOS}t|cannot|"
    rf"could ?n{_APOS}t|could not) (?:work|help|apply|exist|support|accept|handle|fix|solve|connect|import|load|"
    r"parse|authenticate|resolve)\b"
    r"|\bfail(?:s|ed|ing)?\b|\bno longer works?\b|\bbroken\b|\bignores?\b|\bunsupported\b|\bnot supported\b"
    rf"|\b(?:is|are|was|were)(?: not|n{_APOS}t| no longer) (?:supported|available|allowed|permitted)\b"
    r"|\b[A-Za-z]{2,20}-only\b"
    r"|(?:\breturn(?:s|ed)?|\bgives?|\bgave|\bgot|\bgetting|:|→|->)\s?(?:an? |HTTP |status |error ){0,2}"
    r"[45]\d\d\b"
    r"|\brequires? (?:an? )?(?:paid|premium|enterprise|pro|business|admin)\b"
    r"|\bonly (?:takes|accepts|supports|allows|handles|works with|returns)\b"
    r"|\b(?:wants|expects) (?:[\w-]{1,20} ){1,3}(?:as|in) (?=[A-Z0-9])"
    r"|不支持|行不通|不可行|失败|无法|不起作用|不生效|不可用|不能用|报错",
    re.I,
)
_RATE = re.compile(
    r"\brate[- ]?limit(?:s|ed|ing)?\b|\bthrottl(?:e|ed|es|ing)\b|\btoo many requests\b|\bquota\b"
    r"|限流|限速|频率限制|每(?:秒|分钟|小时|天)(?:最多|不超过|限|只能)",
    re.I,
)
# A rate ("100 requests per minute", "40 次/10 秒") is a limit only where the sentence says so (see _LIMIT_WORD):
# "I'll pace at 90 per minute" is not one.
_RATE_NUMBER = re.compile(
    r"\b\d[\d,]{0,12} ?(?:requests?|calls?|req|queries)? ?(?:per |/ ?|an? |each |every |in the |in a )"
    r"(?:second|sec|minute|min|hour|hr|day)s?\b|\d{1,6} ?次 ?/ ?\d{0,4} ?(?:秒|分钟|小时|天)",
    re.I,
)
_LIMIT_WORD = re.compile(
    r"\blimit|\ballow|\bat most\b|\bmax|\bup to\b|\bno more than\b|\bcap(?:s|ped)?\b|\b429\b|\bthrottl|"
    r"\bquota|\bexceed|最多|不超过|上限|限",
    re.I,
)
# "no 429s at 90 per minute": the limit was not hit.
_NOT_HIT = re.compile(r"\b(?:no|without(?: any)?|zero)\s(?:more\s)?(?:http\s)?4\d\ds?\b|没有(?:再)?(?:出现)?\s?429", re.I)
_PER_UNIT = re.compile(
    r"\b\d[\d,]{0,12} ?(?:\w{1,20} )?(?:per|each) (?P<unit>page|request|call|batch|query|file|upload|account|user)\b"
    r"|每(?P<zh>页|次|批)(?:最多|不超过|限|只能)",
    re.I,
)
_LIMIT = re.compile(r"上限(?:是|为)?\s?\d|仅限|只支持|最多\s?\d")
# One pattern for the scan: its first match starts where the first match of any of them does.
_FAILURE_OR_LIMIT = re.compile(
    "|".join(f"(?:{p.pattern})" for p in (_FAILURE, _RATE, _RATE_NUMBER, _PER_UNIT, _LIMIT)), re.I
)
_FAILURE_WORDS = (
    "n't", "n’t", "not ", "doesnt", "didnt", "couldnt", "fail", "no longer", "broken", "ignore", "supported",
    "-only", "return", "give", "gave", "got", "getting", ": 4", ": 5", ":4", ":5", ": http", ": status", ": error",
    "→", "->", "require", "only ", "wants", "expects", "limit", "throttl", "too many", "quota", "per ", "every ",
    "in the ", "in a ", "/s", "/m", "/h", "/d", "/ s", "/ m", "/ h", "/ d", " a sec", " a min", " an hour", " an hr",
    " a day", "each ", "不", "行不通", "失败", "无法", "报错", "限", "每", "上限", "只支持", "最多", "次",
)  # fmt: skip
# Words before a cue that make the sentence a plan or a hypothesis, not a finding: "let me check if it fails".
_HYPOTHETICAL = re.compile(
    r"\b(?:if|whether|unless|in case|let me|let's|let’s|let us|to see|to check|to verify|to confirm|make sure|"
    r"ensure|might)\b|如果|是否|万一|假如|若|确保|看看",
    re.I,
)
_NEGATED = re.compile(rf"(?:\bnot|n{_APOS}t|\bnever|\bno longer|\bwithout|\bno|\bdidn{_APOS}t)\s+$", re.I)
_NEGATABLE = ("fail", "broken", "ignore")
_LEAD_WORDS = frozenset(
    "so but and or however also still then now ok okay well unfortunately apparently sadly note that it turns out "
    "seems appears looks like the a an this that these those my our its their because since as when to of in on "
    "for with by at from".split()
)
_TRAILING_WORDS = frozenset(
    "is are was were be been being does did do has have had will would still also just always really simply "
    "actually even currently now".split()
)
_PRONOUNS = frozenset("it this that they these those which what something everything nothing i we you he she".split())
_ZH_LEAD = ("但是", "不过", "因为", "所以", "这个", "那个", "我们", "该", "这", "那")
_WORD = re.compile(r"[\w.@/#+'’-]+")
_CLAUSE_BREAK = re.compile(r"[:：,，;；]")

# ---- findings -------------------------------------------------------------------------------------------------

_EQUALS = ("=", "＝", "≈")
_FIGURE_RIGHT = re.compile(r"\s?[~≈]?\s?(?:[$€£¥￥]|US\$|[A-Z]{3}\s?)?\s?-?\d")
_ARITHMETIC = re.compile(r"\d\s?[-+*/×÷x]\s?\d")
# A figure with a unit after it. Tried only where a number starts (a start inside one succeeds only when the start
# of the number does), and possessive (no unit starts with a digit or a comma): linear on a long run of digits.
_UNIT_AFTER = re.compile(
    r"(?<!\d)\d[\d,]*+(?:\.\d++)?\s?(?:[A-Z]{3}\b|[%％]|元|美元|欧元|[A-Za-z]{1,12}\s?/\s?[A-Za-z]{1,12}|per\b)"
)
_TOTAL = re.compile(
    r"\b(?:grand total|subtotal|total|sum)\b[^:：=\n]{0,40}?[:：=]\s?(?:[$€£¥￥]|US\$|[A-Z]{3}\s?)?\s?(?P<n>\d)"
    r"|(?:合计|总计|共计|小计|总额|总价|总成本|总费用|总数|总量)[^，。；\n]{0,12}?[:：=]?\s?(?:[$€£¥￥]|US\$|[A-Z]{3}\s?)?"
    r"\s?(?P<zh>\d)",
    re.I,
)
# A rate the agent derived, with its sign, unit and period: "rises +25.54 USD/FEU per week", "−1.8% a month".
_RATE_FIGURE = re.compile(
    r"(?<![\w.])[+\-−±]\d[\d,]*(?:\.\d+)?\s?%?(?:\s?[A-Za-z$€£¥/]{1,12})?\s(?:per|an?|/)\s?"
    r"(?:second|minute|hour|day|week|month|quarter|year|wk|mo|yr)\b",
    re.I,
)
MAX_TOTAL_LEAD = 24  # "Total: …" labels a figure near the start of its sentence, not "… the pool shows total=4"
_CONCLUSION = re.compile(
    r"\b(?:in conclusion|bottom line|it turns out|turns out)\b|\b(?:conclusion|root cause)\s?[:：]"
    r"|\bthe (?:real |actual |underlying |root )?(?:cause|culprit) (?:is|was)\b"
    r"|\bthe (?:real |actual )?(?:problem|issue|bug) (?:is|was) that\b|结论|原因是|根本原因|根因|问题在于|归根结底",
    re.I,
)
_FINDING_WORDS = (
    "=", "＝", "≈", "total", "sum", "合计", "总计", "共计", "小计", "总额", "总价", "总成本", "总费用", "总数", "总量",
    "root cause", " per ", " a week", " a month", " a day", " a year",
    "conclusion", "bottom line", "turns out", "cause", "culprit", "problem", "issue", "bug", "结论", "原因", "根因",
    "问题在于", "归根结底",
)  # fmt: skip
_LABEL_BREAK = re.compile(r"[:：]")
_OPERATORS = frozenset("+ - / * × ÷ x".split())
# "x = 5", "n_rows = 120", "self.x = 5": code in prose. A one-letter name, or word characters with one "." at most
# and a "_" or a "." (what `[a-z]|\w*[_.]\w*` matches whole, without its backtracking on a long word).
_ONE_DOT_WORD = re.compile(r"\w*+(?:\.\w*+)?")


def _is_variable(word: str) -> bool:
    if len(word) == 1 and "a" <= word <= "z":
        return True
    return ("_" in word or "." in word) and _ONE_DOT_WORD.fullmatch(word) is not None
_NOT_A_FIGURE_LEFT = ("`", "[", "{", "|", "!", "<", ">", "?", "&", "://")  # code, tables, URL queries

# ---- HTTP evidence in tool outputs ----------------------------------------------------------------------------

_HTTP_WORDS = (
    "429", "rate limit", "ratelimit", "rate-limit", "too many requests", "retry-after", "403", "401", "forbidden",
    "unauthorized",
)  # fmt: skip
_STATUS = re.compile(
    r"(?:\bHTTP/\d(?:\.\d)?\s|\bstatus(?:_?code)?[\"']?\s?[:=]\s?[\"']?|\bcode[\"']?\s?[:=]\s?[\"']?|"
    r"\b(?:error|HTTP|status)\s)(?P<status>4\d\d)\b"
    r"|\b(?P<named>4\d\d) (?:Too Many Requests|Forbidden|Unauthorized|Payment Required)\b",
    re.I,
)
_LIMIT_HEADER = re.compile(r"x-ratelimit-limit[\"']?\s?[:=]\s?[\"']?(?P<n>\d+)", re.I)
_RETRY_AFTER = re.compile(r"retry-after[\"']?\s?[:=]\s?[\"']?(?P<s>\d+)", re.I)
_RATE_WINDOW = re.compile(
    r"(?P<n>\d[\d,]{0,12}) ?(?:requests?|calls?|req)? ?(?:per |/ ?|an? )(?P<unit>second|sec|minute|min|hour|hr|day)s?\b",
    re.I,
)
# A rate limit said to be hit, not just named (docs and code name it too).
_RATE_TEXT = re.compile(
    r"\brate[- ]?limit(?:ed\b| exceeded| reached| hit)|\btoo many requests\b|\bthrottled\b|\bquota exceeded\b", re.I
)
_REFUSAL = re.compile(
    r"\brequires?\b|\bplan\b|\btier\b|\bpermission|\bforbidden\b|\bnot allowed\b|\bunauthori[sz]ed\b|"
    r"\baccess denied\b|\bscope\b|\bsubscription\b",
    re.I,
)
_URL = re.compile(r"https?://[^\s\"'<>`)\]\\]{1,300}")
_MESSAGE_FIELDS = ("message", "error", "detail", "error_description", "title")
_ERROR_CODE = re.compile(r"[a-z][a-z0-9_.-]{2,40}")
_UNITS = {"sec": "second", "min": "minute", "hr": "hour"}


_HOLDS_DECISION_WORD = _any_of(_DECISION_WORDS)
_HOLDS_FAILURE_WORD = _any_of(_FAILURE_WORDS)
_HOLDS_FINDING_WORD = _any_of(_FINDING_WORDS)
_HOLDS_HTTP_WORD = _any_of(_HTTP_WORDS)


def prose_sentences(text: str) -> list[str]:
    """The sentences of the prose in text[:MAX_SCAN_CHARS], as written (list marker and tags dropped, cut to
    MAX_CONCLUSION_CHARS), without questions and code: what `decisions` and `failures` read (split once)."""
    found: list[str] = []
    for unit in units(text[:MAX_SCAN_CHARS]):
        for sentence in sentences(unit):
            sentence = cut(trim(sentence), MAX_CONCLUSION_CHARS)
            if sentence and not _QUESTION_END.search(sentence) and not looks_like_code(sentence):
                found.append(sentence)
                if len(found) == MAX_PROSE_SENTENCES:
                    return found
    return found


# The words of a sentence that says what is wrong or what the change does ("the fix is", "the issue is", "instead
# of", "should"): of a message that changes a file, the sentence that says why.
_WHY = re.compile(
    r"\b(?:the|a|my|this|our) (?:fix|bug|issue|problem|cause|root cause|solution)\b|\bfix(?:es|ed|ing)?\b|"
    r"\b(?:wrong|incorrect|instead|should|need(?:s)? to|missing|broken|change|modify|replace|update|handle)\b|"
    r"修复|问题|原因|改为|应该",
    re.I,
)
_WHY_NAMED = re.compile(r"\b(?:the|a|my|this|our) (?:fix|bug|issue|problem|cause|root cause|solution) (?:is|was)\b|"
                        r"\bfix (?:it|this) by\b|\broot cause\b|问题(?:在于|是)|原因是", re.I)
MAX_REASON_CHARS = 200


def change_reason(text: str) -> str:
    """Why the agent makes the change its message makes: the first of its sentences that says what is wrong or
    what the change does, else its first sentence; "" when it says nothing (a bare tool call)."""
    said = prose_sentences(text)
    if not said:
        return ""
    named = next((sentence for sentence in said if _WHY_NAMED.search(sentence)), None)  # "the bug is that …"
    return cut(named or next((sentence for sentence in said if _WHY.search(sentence)), said[0]), MAX_REASON_CHARS)


def decisions(said: list[str]) -> list[tuple[str, str]]:
    """(key, sentence) for the sentences (see `prose_sentences`) that state a decision ("I'll use X", "the fix is
    to ...", "统一按…计算")."""
    found: list[tuple[str, str]] = []
    for sentence, _ in _cued(said, _DECISION, _HOLDS_DECISION_WORD):
        found.append((normalize(sentence), sentence))
        if len(found) >= MAX_DECISIONS:
            break
    return _unique(found)


def failures(said: list[str]) -> list[tuple[str, str]]:
    """(subject, sentence) for the sentences (see `prose_sentences`) that state what failed or what limits apply
    ("pytz ignores fold", "the bulk endpoint is Enterprise-only: 403", "100 requests per minute", "批量接口不支持")."""
    found: list[tuple[str, str]] = []
    for sentence, match in _cued(said, _FAILURE_OR_LIMIT, _HOLDS_FAILURE_WORD):
        before = sentence[: match.start()]
        cue = match.group().lower()
        if _HYPOTHETICAL.search(before) or _CONCLUSION.search(sentence) or _NOT_HIT.search(sentence):
            continue  # "let me check whether it fails"; "Root cause: …" is a finding; "no 429s at 90 per minute"
        if _RATE_NUMBER.match(sentence, match.start()) and not _LIMIT_WORD.search(sentence):
            continue  # "I'll pace at 90 per minute"
        if cue.startswith(_NEGATABLE) and _NEGATED.search(before[-16:]):
            continue  # "it no longer fails"
        found.append((_failure_key(sentence, before), sentence))
        if len(found) >= MAX_FAILURES:
            break
    return _unique(found)


def findings(text: str) -> list[tuple[str, str]]:
    """(key, sentence) for figures the agent derived ("14.40 / 30 = 0.48 USD/piece", keyed by their label) and
    conclusions it stated ("Root cause: …", "结论：…", keyed by the sentence)."""
    text = text[:MAX_SCAN_CHARS]
    lowered = text.lower()
    holds = _HOLDS_FINDING_WORD
    if not holds(lowered):
        return []
    found: list[tuple[str, str]] = []
    for line in prose_lines(text):
        if is_heading(line) or not holds(line.lower()):
            continue
        for sentence in sentences(line.strip()):
            sentence = cut(trim(sentence), MAX_CONCLUSION_CHARS)
            if not sentence or _QUESTION_END.search(sentence):
                continue
            key = _figure_label(sentence)
            if key is None:
                cue = _CONCLUSION.search(sentence)
                if cue and not looks_like_code(sentence) and not _HYPOTHETICAL.search(sentence, 0, cue.start()):
                    key = _key(sentence)
            if key:
                found.append((key, sentence))
                if len(found) >= MAX_FINDINGS:
                    return _unique(found)
    return _unique(found)


def http_failures(text: str, data: object, call: ToolCall | None) -> list[tuple[str, str]]:
    """(key, value) for the rate limit or the refusal an HTTP response in a tool output shows:
    `rate limit api.example.com` -> `rate limit: 100 requests per minute (429; Retry-After: 30; at
    https://api.example.com/v1/rates)`, `access api.example.com/v1/bulk` -> `403: Bulk export requires an
    Enterprise plan (at https://api.example.com/v1/bulk)`. `data` is the output's parsed JSON, if it is JSON."""
    window = text[:MAX_HTTP_SCAN_CHARS]
    lowered = window.lower()
    if not _HOLDS_HTTP_WORD(lowered):
        return []
    statuses = [m.group("status") or m.group("named") for m in _STATUS.finditer(window)]
    url = _call_url(call) or _first_url(window)
    where = _where(url, call)
    found: list[tuple[str, str]] = []
    limit_header = _LIMIT_HEADER.search(window)
    retry = _RETRY_AFTER.search(window)
    said_hit = _RATE_TEXT.search(window) and (statuses or isinstance(data, dict))  # not "rate limited" in code
    if "429" in statuses or limit_header or said_hit or (retry and statuses):
        window_match = _RATE_WINDOW.search(window)
        if window_match:
            unit = window_match.group("unit").lower()
            limit = f"{window_match.group('n')} requests per {_UNITS.get(unit, unit)}"
        elif limit_header:
            limit = f"{limit_header.group('n')} requests (X-RateLimit-Limit)"
        else:
            limit = ""
        details = [part for part in ("429" if "429" in statuses else "",
                                     f"Retry-After: {retry.group('s')}" if retry else "",
                                     f"at {where}" if where else "") if part]
        value = (f"rate limit: {limit}" if limit else "rate limit hit") + (f" ({'; '.join(details)})" if details else "")
        found.append((_key(f"rate limit {_host(url)}"), cut(value, MAX_CONCLUSION_CHARS)))
    refused = next((status for status in statuses if status in ("401", "403")), None)
    if refused is not None:
        message = _refusal_message(window, data)
        if message:
            value = f"{refused}: {message}" + (f" (at {where})" if where else "")
            found.append((_key(f"access {_place(url) or where}"), cut(value, MAX_CONCLUSION_CHARS)))
    return found


# ---- helpers --------------------------------------------------------------------------------------------------


def _cued(said: list[str], cue: re.Pattern[str], holds: Holds) -> Iterator[tuple[str, re.Match[str]]]:
    """The sentences that hold `cue`, each with its first match. `holds` finds the lowercase words one of which
    every match holds: a sentence without any is not searched."""
    for sentence in said:
        if holds(sentence.lower()):
            match = cue.search(sentence)
            if match is not None:
                yield sentence, match


def _unique(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    seen: set[str] = set()
    unique: list[tuple[str, str]] = []
    for key, value in pairs:
        if key and key not in seen:
            seen.add(key)
            unique.append((key, value))
    return unique


def _key(text: str) -> str:
    return normalize(text)[:MAX_KEY_CHARS].rstrip()


def _failure_key(sentence: str, before: str) -> str:
    """What a failure is about: "rate limit" for rate limits, "limit per page" for other limits, else the subject
    before the cue ("the bulk endpoint is" -> "bulk endpoint"), else the sentence."""
    if _RATE.search(sentence) or (_RATE_NUMBER.search(sentence) and _LIMIT_WORD.search(sentence)):
        return "rate limit"
    per_unit = _PER_UNIT.search(sentence)
    if per_unit:
        unit = per_unit.group("unit") or {"页": "page", "次": "request", "批": "batch"}[per_unit.group("zh")]
        return f"limit per {unit.lower()}"
    return _subject(before) or _key(sentence)


def _subject(before: str) -> str:
    """The last words before the cue, in the nearest clause that has any ("It seems the flight HAT030 on May 13,
    2024, is" -> "flight hat030 on may 13"), without auxiliaries, articles and pronouns; "" when none is left."""
    words = _phrase(before, MAX_SUBJECT_WORDS, lettered=False)
    if not words or all(word.lower() in _PRONOUNS for word in words):
        return ""
    if len(words) == 1 and not words[0].isascii() and len(words[0]) > MAX_SUBJECT_CHARS:
        words = [words[0][-MAX_SUBJECT_CHARS:]]  # Chinese has no spaces: the characters nearest the cue
    lead = next((prefix for prefix in _ZH_LEAD if words[0].startswith(prefix)), "")
    words[0] = words[0][len(lead):]
    return _key(" ".join(word for word in words if word))


def _phrase(text: str, max_words: int, lettered: bool) -> list[str]:
    """The words of the last clause of `text` that has letters (with `lettered`, that starts with one, so that
    "Reservation 1: $833 - $500 (certificate)" gives "Reservation 1"), without trailing auxiliaries and leading
    articles, conjunctions and prepositions; the last `max_words` of them."""
    for clause in reversed(_CLAUSE_BREAK.split(text)):
        if lettered and not strip_markup(clause)[:1].isalpha():
            continue
        words = _WORD.findall(clause)
        while words and words[-1].lower() in _TRAILING_WORDS:
            words.pop()
        words = words[-max_words:]
        while words and words[0].lower() in _LEAD_WORDS:
            words.pop(0)
        if any(char.isalpha() for word in words for char in word):
            return words
    return []


def _figure_label(sentence: str) -> str | None:
    """The key of a derived figure: its label ("Supplier C unit price: 14.40 / 30 = 0.48 USD" -> "supplier c unit
    price", "合计：12,340.50 元" -> "合计", "SHA–RTM rises +25.54 USD/FEU per week" -> "sha–rtm rises"), or the
    expression when it has no words ("14.40 / 30"); None when the sentence holds no figure."""
    equals = min((i for i in (sentence.find(mark) for mark in _EQUALS) if i > 0), default=-1)
    spaced = equals > 0 and (sentence[equals - 1] == " " or sentence[equals] != "=")  # not "id=1" in prose
    if spaced and _FIGURE_RIGHT.match(sentence, equals + 1):
        left = sentence[:equals]
        if any(mark in left for mark in _NOT_A_FIGURE_LEFT) or sentence[equals + 1: equals + 2] == "=":
            return None
        words = left.split()
        code = looks_like_code(sentence) or bool(words and _is_variable(words[-1]))
        if code and not (_ARITHMETIC.search(left) or _UNIT_AFTER.search(sentence, equals)):
            return None  # "x = 5" is code; "total = 12,340.50 EUR" and "14.40 / 30 = 0.48" are figures
        return _label(left)
    total = _TOTAL.search(sentence)
    if total is None or total.start() > MAX_TOTAL_LEAD:
        rate = _RATE_FIGURE.search(sentence)
        if rate is None:
            return None
        clause_start = max(sentence.rfind(mark, 0, rate.start()) for mark in (":", "：", ",", "，", ";", "；")) + 1
        return _label(sentence[clause_start: rate.start()]) or None
    clause_start = max(sentence.rfind(mark, 0, total.start()) for mark in ("，", ",", "；", ";", "。")) + 1
    return _label(sentence[clause_start: total.start("n") if total.group("n") else total.start("zh")]) or None


def _label(left: str) -> str:
    """A figure's label: the words before its calculation ("Previous century: 1800 + 69" -> "previous century",
    "so with the new pack size 14.40 / 30" -> "new pack size"); the expression itself when it has no words."""
    words = left.split()
    tail = len(words)
    while tail and not any(char.isalpha() for char in words[tail - 1]):
        tail -= 1
    if any(word in _OPERATORS for word in words[tail:]):
        words = words[:tail]
    label = _phrase(" ".join(words), MAX_LABEL_WORDS, lettered=True)
    return _key(" ".join(label) if label else left)


def _call_url(call: ToolCall | None) -> str:
    if call is None:
        return ""
    return _first_url(call.arguments)


def _first_url(text: str) -> str:
    match = _URL.search(text)
    return match.group().rstrip(".,;:") if match else ""


def _host(url: str) -> str:
    try:
        return urlsplit(url).hostname or "" if url else ""
    except ValueError:
        return ""


def _place(url: str) -> str:
    """Host and path of a URL, without its query: what a refusal is about."""
    try:
        parts = urlsplit(url) if url else None
    except ValueError:
        return ""
    return f"{parts.hostname or ''}{parts.path}".rstrip("/") if parts else ""


def _where(url: str, call: ToolCall | None) -> str:
    if url:
        return cut(url.split("?", 1)[0], MAX_WHERE_CHARS)
    return call.name if call is not None else ""


def _refusal_message(window: str, data: object) -> str:
    """The message of a 401/403 response: a JSON `message`/`error`/`detail` field (of the output, or of the body
    after its headers), else the first line that says what is required or refused."""
    if data is None and "{" in window:
        data = parse_json(window[window.find("{"):])
    if isinstance(data, dict):
        error = data.get("error")
        body = error if isinstance(error, dict) else data  # {"error": {"code": …, "message": …}}
        code = body.get("code")
        if not isinstance(code, str) and isinstance(error, str) and _ERROR_CODE.fullmatch(error):
            code = error  # {"error": "approval_required", "message": …}
        for name in _MESSAGE_FIELDS:
            value = body.get(name)
            if isinstance(value, str) and value.strip():
                text = " ".join(value.split())
                if isinstance(code, str) and _ERROR_CODE.fullmatch(code) and code not in text:
                    text = f"{code}: {text}"  # "approval_required: refunds above 1000.00 USD need …"
                return cut(text, MAX_CONCLUSION_CHARS // 2)
    for line in window.splitlines():
        if _REFUSAL.search(line) and not line.lstrip().startswith("HTTP/"):
            return cut(" ".join(line.split()), MAX_CONCLUSION_CHARS // 2)
    return ""
