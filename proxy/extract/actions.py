"""Tool results: the action record (tool, arguments, outcome, one-line gist) and verification states."""

from __future__ import annotations

import itertools
import re

from ..records import Action, Message, MessageContext, ToolCall
from .evidence import Evidence, describe, description
from .facts import parse_json
from .text import TRACEBACK, clip, clip_middle, collapse

MAX_GIST_CHARS = 600  # the stored gist line (policies show less); the size note is appended after it
MAX_VERIFICATION_KEY_CHARS = 100
MAX_COMMAND_SCAN_CHARS = 20_000  # of a longer command only its head and tail are read
MAX_SEGMENTS = 256  # commands of a shell line read for a test runner; what follows the last is read as one
_RC_PROBE_LINES = 2  # exit-code notes are looked for only this many lines from either end

_RETURNCODE_TAG = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
_EXIT_NOTE = re.compile(
    r"\b(?:exit(?:ed)?(?: with)?|return(?:ed)?)[ _-]?(?:code|status)\b\s*(?:[:=]\s*)?(-?\d+)"  # not \s*[:=]?\s*
    r"|\breturned non-zero exit status (\d+)",
    re.I,
)
_WRAPPER = re.compile(r"^\s*</?(?:returncode|output|stdout|stderr)>\s*$|^\s*<returncode>-?\d+</returncode>\s*$")
_TAGS = re.compile(r"</?(?:exception|error|output|stdout|stderr|returncode)>")
_ALNUM = re.compile(r"[^\W_]")
_TRACEBACK_SCAN_CHARS = 20_000  # after the last traceback header, where its exception line is looked for
_LONG_LINE_CHARS = 2_000  # longer lines are cut to head and tail before any pattern reads them
_HEAD_LINES = 20  # meaningful lines read from the start of an output
_HEAD_CHARS = 16_000  # error lines are looked for in this much of the start of an output
_TAIL_CHARS = 4_000  # summaries and the last line are read from this much of the end
_COUNTED_CHARS = 65_536  # the lines of a longer output are counted from its newlines (see _line_count)
# The exception line ends a traceback: at column 0, a (dotted) class name, a colon or the end of the line.
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(?::\s.*|:?)$")
_ERROR_LINE = re.compile(
    r"^\s*(?:ERROR|Error|error|FATAL|Fatal|fatal|E)\b\s*[:!\s]"
    r"|^[A-Za-z_][\w.]*(?:Error|Exception):\s"
    r"|command not found|No such file or directory|No module named|Permission denied",
)
# Failures of the command itself (as opposed to text it printed): shell, interpreter and git messages.
_FATAL_LAST_LINE = re.compile(
    r"command not found|No such file or directory|No module named|Permission denied|^(?:ERROR|fatal|Error):"
)
_GREP_HIT = re.compile(r"^\S+:\d+[:-]")  # `path:line:` lines quote files; they are not the command failing
_JSON_ERROR_STATUS = frozenset({"error", "failed", "failure", "fail"})

# Test and check runners; a script named like test_*, *_test, reproduce*, verify* run by python counts too.
_TEST_COMMAND = re.compile(
    r"\b(?:py\.?test|pytest|unittest|tox|nox|runtests(?:\.py)?|manage\.py\s+test|(?:g?make)\s+(?:test|check)\w*|"
    r"(?:npm|pnpm|yarn|bun)\s+(?:run\s+)?test|go\s+test|cargo\s+(?:test|nextest)|mvn\s+\S*test|gradlew?\s+test|"
    r"ctest|rspec|phpunit|jest|vitest|mocha)\b"
    # bounded repeats: with `(?:-\S+\s+)*\S*?` every "python" inside "-python -python …" rescanned the rest
    r"|\bpython[\d.]*\s+(?:-\S{1,80}\s+){0,8}\S{0,200}?(?:test|reproduce|verify)\w{0,100}\.py\b",
    re.I,
)
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1")
# Shell separators, and what only changes how output is shown (`2>&1`, `| tail -5`). The whitespace around them
# belongs to the match, but a leading `\s*` in a search is quadratic on a long blank run: the patterns find the
# separator itself and `_separators` / `_without_display_tail` extend the span over the whitespace in one pass.
_SEPARATOR = re.compile(r"&&|\|\||;|\n")
_SEPARATOR_AFTER_BLANKS = ("&&", "||", ";")
_BLANKS = re.compile(r"\s*")
_REDIRECT = re.compile(r"\d?>&\d|2>\s*/dev/null")
_PIPE_TO_VIEWER = re.compile(r"\|\s*(?:head|tail|grep|less|more|cat|tee)\b")
# A segment that reads or searches files mentions "pytest" without running it.
_NOT_A_RUNNER = re.compile(
    r"^(?:sudo\s+)?(?:grep|egrep|rg|ag|find|cat|ls|sed|awk|echo|printf|head|tail|git|pip\d*|wc|diff|cp|mv|rm|"
    r"mkdir|touch|less|more|sort|nl|file|stat|which|type|chmod|vim?|nano)\b"
)
# Runner summaries, case-sensitive: pytest and unittest write "FAILED" and "1 failed", prose rarely does. Plain
# substrings (the window is framed by newlines so "\nOK" means a line starting with OK): scanning `re`
# alternations over a long output costs far more than a handful of substring searches.
_FAILED_MARKS = (
    "FAILED", "\nFAIL:", "\nFAIL ", "\nFAIL\n", "\n--- FAIL", "\nERROR:", "ests failed", "est failed", "o tests ran",
    "NO TESTS RAN", "\nRan 0 tests",
)  # fmt: skip
# A runner's own pass summary (unittest's "OK", cargo's "test result: ok"): it outweighs what the tests printed.
_RUNNER_PASSED_MARKS = ("\nOK\n", "\nOK (", "test result: ok")
# Signs of a failure in any output, whatever the exit status: an exception was raised, an assertion failed.
_FAILURE_SIGNS = ("Traceback (most recent call last):", "AssertionError")
# Signs of an error that may be expected (a check script printing the error it looks for): not a pass.
_ERROR_SIGNS = ("Error:", "ERROR")
_MAX_COUNTED_PASSES = 64  # "N passed" matches looked at for a runner's summary line
_TEST_WORDS = ("test", "tox", "nox", "check", "reproduce", "verify", "rspec", "jest", "mocha", "phpunit")
# pytest: "1 failed", "2 errors". Matched from the start of a digit run only (`(?<!\d)0*`): a start inside a long
# run rescans the rest of it.
_FAILED_COUNT = re.compile(r"(?<!\d)0*[1-9]\d* (?:failed|errors?)\b")
_PASSED_COUNT = re.compile(r"(?<!\d)0*[1-9]\d* passed\b")
# A pytest summary line `=+ … passed|failed|errors|skipped … in 0.12s … =+`, read line by line (see
# `_pytest_summary`): as one pattern its `.*` runs backtrack against each other.
_SUMMARY_WORD = re.compile(r"\b(?:passed|failed|errors?|skipped)\b")
_SUMMARY_DURATION = re.compile(r" in [\d.]+s")
_UNITTEST_FAILED = re.compile(r"^FAILED \((?:failures|errors)=\d+.*\)$", re.M)


def return_code(text: str, head: list[str], tail: list[str]) -> int | None:
    """The exit code the output reports: a <returncode> tag, else an exit note on the first or last lines."""
    # mini-swe-agent puts the tag first, or last after an <exception> line.
    tag = _RETURNCODE_TAG.search(text, 0, 200) or _RETURNCODE_TAG.search(text, max(0, len(text) - 200))
    if tag:
        return int(tag.group(1))
    for line in head[:_RC_PROBE_LINES] + tail[-_RC_PROBE_LINES:]:
        note = _EXIT_NOTE.search(line)
        if note:
            return int(note.group(1) or note.group(2))
    return None


def _is_meaningful(line: str) -> bool:
    if not line or _WRAPPER.match(line):
        return False
    # a long line is shown as its head and tail (see `_clean`): only they are looked at
    edge = _LONG_LINE_CHARS // 2
    return _ALNUM.search(line, 0, edge) is not None or (len(line) > edge and _ALNUM.search(line, len(line) - edge)
                                                          is not None)


def _clean(line: str) -> str:
    """The line without wrapper tags; a very long line (one-line JSON) keeps only its head and tail."""
    if len(line) > _LONG_LINE_CHARS:
        line = line[: _LONG_LINE_CHARS // 2] + " … " + line[-_LONG_LINE_CHARS // 2 :]
    return _TAGS.sub("", line).strip() if "<" in line else line.strip()


def meaningful_lines(text: str, limit: int) -> list[str]:
    """Up to `limit` output lines from the start (its first _HEAD_CHARS) that say something: no blanks, wrapper
    tags, lone braces."""
    result: list[str] = []
    for line in text[:_HEAD_CHARS].splitlines():
        if _is_meaningful(line):
            cleaned = _clean(line)
            if cleaned:
                result.append(cleaned)
                if len(result) >= limit:
                    break
    return result


def _last_lines(text: str, limit: int) -> list[str]:
    """Up to `limit` meaningful lines from the end, in text order; only the tail of the text is read."""
    result: list[str] = []
    for line in reversed(text[-_TAIL_CHARS:].splitlines()):
        if _is_meaningful(line):
            cleaned = _clean(line)
            if cleaned:
                result.append(cleaned)
                if len(result) >= limit:
                    break
    result.reverse()
    return result


def _line_count(text: str) -> int:
    """Non-empty lines, wrapper tags excluded: the size shown after a gist (list operations only, no loop). Of a
    long output, newlines less blank lines (near enough, without splitting a megabyte into lines)."""
    if len(text) > _COUNTED_CHARS:
        return text.count("\n") + 1 - text.count("\n\n") - text.endswith("\n")
    lines = text.splitlines()
    count = len(lines) - lines.count("")
    ends = lines[:3] + lines[-3:] if len(lines) > 6 else lines
    return count - sum(1 for line in ends if line[:1] == "<" and _WRAPPER.match(line))


def tool_output_gist(text: str, max_chars: int, call: ToolCall | None = None) -> tuple[str, str]:
    """(outcome "ok"|"error", one line): the error line on failure, else what the output is when it is rows (a
    listing, search hits, a source file: see evidence.description), else its first meaningful line; then size.

    `exit 1: ModuleNotFoundError: No module named 'erfa' (22 lines)`, `./astropy/modeling/separable.py (2 lines)`,
    `a listing of 58 entries of src/app (59 lines, 3.1k chars)`.
    """
    text = text if isinstance(text, str) else str(text)
    return _gist(text, parse_json(text), max_chars, call)


def _gist(text: str, data: object, max_chars: int, call: ToolCall | None = None,
          evidence: Evidence | None = None) -> tuple[str, str]:
    head = meaningful_lines(text, _HEAD_LINES)
    tail = _last_lines(text, _RC_PROBE_LINES) if head else []
    code = return_code(text, head, tail)
    error_line = _error_line(text, head, tail, code, data)
    size = _size(_line_count(text) if head else 0, len(text))
    if error_line is None and data is not None:
        return "ok", json_gist(data, max_chars, len(text))
    if error_line is None:
        described = description(evidence or describe(text, call)) if head else None
        if described is not None:
            return "ok", f"{clip_middle(described, max_chars)}{size}"
        return "ok", f"{clip_middle(collapse(head[0]), max_chars) if head else '(no output)'}{size}"
    prefix = f"exit {code}: " if code not in (None, 0) else ""
    return "error", f"{prefix}{clip_middle(collapse(error_line), max_chars) if error_line else '(no output)'}{size}"


def json_gist(data: object, max_chars: int, chars: int) -> str:
    """A JSON output as its scalar values in document order, `key=value` with the innermost key: the values an
    agent acts on (ids, names, dates, amounts) survive where a raw first line would show only punctuation."""
    parts: list[str] = []
    length = 0
    count = 0

    def walk(value: object, key: str) -> None:
        nonlocal length, count
        if isinstance(value, dict):
            for child_key, child in value.items():
                child_key = str(child_key)
                if any(ch.isdigit() for ch in child_key) and length <= max_chars:
                    parts.append(f"{child_key}:")  # an object keyed by id (payment methods): the id is a value
                    length += len(child_key) + 2
                walk(child, child_key)
        elif isinstance(value, list):
            for child in value:
                walk(child, key)
        else:
            count += 1
            if length <= max_chars:
                part = f"{key}={value}" if key else str(value)
                parts.append(part)
                length += len(part) + 1

    walk(data, "")
    shown = clip(" ".join(parts), max_chars)
    return f"{shown} ({count} values{f', {chars / 1000:.1f}k chars' if chars >= 1000 else ''})"


def _size(count: int, chars: int) -> str:
    if count == 0:
        return ""
    note = f" ({count} line{'s' if count != 1 else ''}"
    if chars >= 1000:
        note += f", {chars / 1000:.1f}k chars"
    return note + ")"


def _error_line(text: str, head: list[str], tail: list[str], code: int | None, data: object) -> str | None:
    """The line that shows the failure ("" when failed without any line), or None when the output is fine."""
    last = tail[-1] if tail else ""
    if code not in (None, 0):
        return _traceback_exception(text) or _summary_failure(text) or _first_error(text) or last
    if data is not None:
        return _json_error(data)
    if code == 0:
        # A pipe (`cmd | tail`) hides a failing exit status; a fatal last line still tells.
        exception = _traceback_exception(text)
        if exception is not None and exception == last:
            return exception
        if _FATAL_LAST_LINE.search(last) and not _GREP_HIT.match(last):
            return last
        return None
    return _traceback_exception(text) or _leading_error(head)


def failure_line(text: str) -> str | None:
    """The line that shows why a run failed, as printed: the exception line of the last traceback, a runner's
    failure summary, the first error line, else the last meaningful line; None for an empty output."""
    last = _last_lines(text, 1)
    return _traceback_exception(text) or _summary_failure(text) or _first_error(text) or (last[0] if last else None)


def _traceback_exception(text: str) -> str | None:
    """The exception line of the last Python traceback in the text, if it has one."""
    header = text.rfind(TRACEBACK)
    if header < 0:
        return None
    for line in text[header + len(TRACEBACK) : header + _TRACEBACK_SCAN_CHARS].splitlines():
        if not line or line[:1].isspace():
            continue
        line = _clean(line)
        if _EXCEPTION_LINE.match(line) and not line.startswith(("During handling", "The above exception")):
            return line
    return None


def _summary_failure(text: str) -> str | None:
    window = text[-_TAIL_CHARS:]
    summary = next((line for line in window.split("\n") if _is_pytest_summary(line)), None)
    if summary is not None:
        return summary.strip("= ")
    match = _UNITTEST_FAILED.search(window)
    return match.group().strip("= ") if match else None


def _is_pytest_summary(line: str) -> bool:
    """`^=+ .*\\b(?:passed|failed|errors?|skipped)\\b.* in [\\d.]+s.*=+$` on one line, in linear time."""
    if not (line.startswith("=") and line.endswith("=")):
        return False
    body = line.lstrip("=")
    if not body.startswith(" "):
        return False
    word = _SUMMARY_WORD.search(body)  # the first one leaves the most room for the duration after it
    return word is not None and _SUMMARY_DURATION.search(body, word.end()) is not None


def _first_error(text: str) -> str | None:
    """The first error-looking line in the head of the output (not a grep hit quoting a file)."""
    for line in text[:_HEAD_CHARS].splitlines():
        if _ERROR_LINE.search(line) and not _GREP_HIT.match(line):
            return _clean(line)
    return None


def _leading_error(head: list[str]) -> str | None:
    """Without an exit code, only a clear error line counts: the first line, or an error line of a short output."""
    if not head:
        return None
    if _ERROR_LINE.search(head[0]):
        return head[0]
    if len(head) < _HEAD_LINES:
        return next((line for line in head if _ERROR_LINE.search(line) and not _GREP_HIT.match(line)), None)
    return None


def _json_error(data: object) -> str | None:
    """The error message of a JSON result: an `error`/`errors` field, `success: false`, `status: error`."""
    if not isinstance(data, dict):
        return None
    for name in ("error", "errors"):
        value = data.get(name)
        if value not in (None, False, "", [], {}):
            return f"{name}: {value if isinstance(value, str) else collapse(str(value))}"
    if data.get("success") is False or data.get("ok") is False:
        message = data.get("message") or data.get("detail") or "success: false"
        return str(message)
    status = data.get("status")
    if isinstance(status, str) and status.lower() in _JSON_ERROR_STATUS:
        return f"status: {status}" + (f" {data['message']}" if isinstance(data.get("message"), str) else "")
    return None


def tool_action(message: Message, text: str, context: MessageContext, data: object = None,
                evidence: Evidence | None = None) -> Action:
    """The action record for one tool result message; `data` is its parsed JSON, if it is JSON; `evidence`, what
    the output is (evidence.describe of `text`), when the caller has read it already."""
    call = context.call
    name = (call.name if call else "") or str(message.get("name") or "") or "unknown"
    call_id = str(message.get("tool_call_id") or (call.id if call else "") or "")
    outcome, gist = _gist(text, data, MAX_GIST_CHARS, call, evidence)
    return Action(
        turn=context.index,
        tool=name,
        arguments=call.arguments if call else "",
        outcome=outcome,
        gist=gist,
        call_id=call_id,
        evidence_ref=context.ref,
    )


# ---- verification ---------------------------------------------------------------------------------------------


def command_text(arguments: str) -> str:
    """The command a call runs: the `command` (or `cmd`, `script`...) string of JSON arguments, else the raw text."""
    data = parse_json(arguments) if arguments[:1] in "{[" else None
    if isinstance(data, dict):
        for name in ("command", "cmd", "script", "code", "input", "args"):
            value = data.get(name)
            if isinstance(value, str):
                return value
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                return " ".join(value)
        return ""
    return arguments


def runner_command(command: str) -> str | None:
    """The part of a shell command that runs tests or a check script, shortened to a stable key; else None. Of a
    command longer than MAX_COMMAND_SCAN_CHARS, its head and tail are read."""
    if len(command) > MAX_COMMAND_SCAN_CHARS:
        command = command[: MAX_COMMAND_SCAN_CHARS // 2] + "\n" + command[-MAX_COMMAND_SCAN_CHARS // 2 :]
    lowered = command.lower()
    if not any(word in lowered for word in _TEST_WORDS) or not _TEST_COMMAND.search(command):
        return None
    script = _without_heredocs(command)
    separators = _separators(script, MAX_SEGMENTS)
    starts = [0] + [end for _, end in separators]
    ends = [start for start, _ in separators] + [len(script)]
    quoted = _inside_quotes(script, starts)
    opener = 0  # the segment whose command opened the quote the current segment is in
    not_runners: set[int] = set()  # openers already found to read or search files (each is matched once)
    for index, (start, end) in enumerate(zip(starts, ends, strict=True)):
        if not quoted[index]:
            opener = index
        segment = script[start:end]
        if not _TEST_COMMAND.search(segment) or _HEREDOC.search(segment):
            continue
        # A segment inside a quoted `python -c "..."` belongs to the command that opened the quote.
        if opener in not_runners:
            continue
        if _NOT_A_RUNNER.match(script[starts[opener] : end]):  # each opener is matched once: linear
            not_runners.add(opener)
            continue
        key = collapse(_without_display_tail(script[starts[opener] : end]))
        return clip(key, MAX_VERIFICATION_KEY_CHARS) if key else None
    return None


def _separators(script: str, limit: int | None = None) -> list[tuple[int, int]]:
    """Spans of `\\s*(?:&&|\\|\\||;|\\n)\\s*` as `re.finditer` gives them, in one pass: a span starts where the blank
    run before a separator starts, takes the last separator its blanks reach, and the blanks after it. At most
    `limit` of them (the first)."""
    spans: list[tuple[int, int]] = []
    position = 0
    while len(spans) != limit and (found := _SEPARATOR.search(script, position)) is not None:
        start = position + len(script[position : found.start()].rstrip())  # the blanks before it (no "\n" there)
        blanks_end = _BLANKS.match(script, start).end()
        if script.startswith(_SEPARATOR_AFTER_BLANKS, blanks_end):
            separator = script[blanks_end : blanks_end + 2]
            end = _BLANKS.match(script, blanks_end + (1 if separator[0] == ";" else 2)).end()
        else:
            end = blanks_end  # the blank run holds a "\n": it is the separator, the blanks after it are taken too
        spans.append((start, end))
        position = end
    return spans


def _without_display_tail(segment: str) -> str:
    """The segment without redirections (`2>&1`, `2>/dev/null`) and a final pipe into a viewer (`| tail -5`), each
    with the blanks before it: `re.sub` of `\\s*(?:redirect)|\\s*\\|\\s*(?:viewer)\\b.*$` in linear time."""
    kept: list[str] = []
    position = 0
    # `.*$` cannot cross a newline before the end: a pipe counts from the blank run that holds the last such
    # newline (`\\s*` after "|" may cross it), none earlier
    last_line = segment.rfind("\n", 0, len(segment) - 1) + 1
    floor = max(0, len(segment[:last_line].rstrip()) - 1) if last_line else 0
    pipe = _PIPE_TO_VIEWER.search(segment, floor)
    while True:
        redirect = _REDIRECT.search(segment, position)
        if pipe is not None and pipe.start() < position:
            pipe = _PIPE_TO_VIEWER.search(segment, max(position, floor))
        if pipe is not None and (redirect is None or pipe.start() <= redirect.start()):
            kept.append(segment[position : pipe.start()].rstrip())
            end = len(segment) - 1 if segment.endswith("\n") else len(segment)
            kept.append(segment[end:])
            return "".join(kept)
        if redirect is None:
            kept.append(segment[position:])
            return "".join(kept)
        kept.append(segment[position : redirect.start()].rstrip())
        position = redirect.end()


def _inside_quotes(script: str, starts: list[int]) -> list[bool]:
    """For each position in `starts` (ascending): whether a quote opened before it is still open there."""
    result: list[bool] = []
    doubles = singles = previous = 0
    for start in starts:
        piece = script[previous:start]
        doubles += piece.count('"') - piece.count('\\"')
        singles += piece.count("'")
        previous = start
        result.append(doubles % 2 == 1 or singles % 2 == 1)
    return result


def _without_heredocs(command: str) -> str:
    """The command with here-document bodies removed: a file being written is not a test being run."""
    if "<<" not in command:
        return command
    kept: list[str] = []
    terminator: str | None = None
    for line in command.splitlines():
        if terminator is not None:
            if line.strip() == terminator:
                terminator = None
            continue
        kept.append(line)
        heredoc = _HEREDOC.search(line)
        if heredoc:
            terminator = heredoc.group(2)
    return "\n".join(kept)


def runner_verdict(text: str, outcome: str) -> str:
    """ "failed", "passed" or "unclear": a runner's failure summary first (a pipe can hide the exit status), then
    its pass summary; without one, what the output shows: a failed outcome, a traceback or an assertion error is a
    failure even at exit status 0, an error line ("TypeError: …", "ERROR") makes a pass unclear (a check script
    may print an error it expects); only an output without any of them passed."""
    inner = text if len(text) <= _HEAD_CHARS else text[:_TAIL_CHARS] + "\n" + text[-_TAIL_CHARS:]
    window = f"\n{inner}\n"
    counted_failures = (" failed" in window or " error" in window) and _FAILED_COUNT.search(window)
    if counted_failures or any(mark in window for mark in _FAILED_MARKS):
        return "failed"
    if (" passed" in window and _counted_passes(window)) or any(mark in window for mark in _RUNNER_PASSED_MARKS):
        return "passed"
    if outcome == "error" or any(mark in text for mark in _FAILURE_SIGNS):
        return "failed"
    if any(mark in text for mark in _ERROR_SIGNS):
        return "unclear"
    return "passed"


def _counted_passes(window: str) -> bool:
    """A runner's count of passes: "3 passed in 0.12s" (pytest), "Tests: 3 passed, 3 total" (jest); not a
    script's "Test 1 passed", which says nothing of what else it printed."""
    for match in itertools.islice(_PASSED_COUNT.finditer(window), _MAX_COUNTED_PASSES):
        start = window.rfind("\n", max(0, match.start() - _LONG_LINE_CHARS), match.start()) + 1
        end = window.find("\n", match.end(), match.end() + _LONG_LINE_CHARS)
        line = window[start : end if end >= 0 else match.end() + _LONG_LINE_CHARS]
        if _SUMMARY_DURATION.search(line) or " total" in line or line.lstrip().startswith(("=", "Tests:")):
            return True
    return False


def error_sign_line(text: str) -> str | None:
    """The first line of the output that shows an error (see runner_verdict's "unclear"), cleaned, or None."""
    found = [index for index in (text.find(mark) for mark in _ERROR_SIGNS) if index >= 0]
    if not found:
        return None
    start = min(found)
    end = text.find("\n", start)
    return _clean(text[text.rfind("\n", 0, start) + 1 : end if end >= 0 else len(text)]) or None


def verification(call: ToolCall | None, text: str, outcome: str) -> tuple[str, str] | None:
    """(key, "passed"|"failed") when the call ran tests or a check script."""
    if call is None:
        return None
    key = runner_command(command_text(call.arguments))
    return (key, runner_verdict(text, outcome)) if key else None
