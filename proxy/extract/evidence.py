"""What a tool output is, as evidence: a listing, search hits, source code, a build file, a document, a log.

A tool output is evidence, not a list of facts: its rows (directory entries, grep hits, source lines, `key = value`
lines of a Makefile) become facts only when the dialogue singles them out. What kind of output it is decides which
claims may be read from it (a rule is read from a maintainer's comment or a policy document, never from a docstring
in a source file) and what its one-line description says ("a listing of 58 entries of src/app").

Decided first by the command or tool that produced it (`ls`, `grep`, `cat models.py`, `gh issue view`, a `read_file`
of README.md), then, when that says nothing, by the shape of its lines. Linear: the lines read are bounded
(`MAX_SHAPE_LINES`) and each is tested with anchored patterns and substring tests only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..records import ToolCall
from .facts import parse_json
from .text import looks_like_code

LISTING = "listing"  # ls, find, tree: one entry a line
SEARCH = "search hits"  # grep, rg: `path:line: text`
SOURCE = "source"  # a source file's text
BUILD = "build file"  # Makefile, pyproject.toml, setup.cfg, package.json, YAML config
DOCUMENT = "document"  # README, docs, an issue or PR with its comments, a policy, an e-mail
LOG = "log"  # git log, pip, a test run's progress, a traceback
OTHER = "output"  # anything else: an API's answer, a script's prints

ROW_KINDS = frozenset({LISTING, SEARCH, SOURCE, BUILD, LOG})  # outputs whose lines are rows, not statements

MAX_SHAPE_LINES = 80  # lines read to judge an output by its shape
MAX_COMMAND_CHARS = 2_000  # of a command, what is read to name its program and its file
MAX_ROW_CHARS = 1_000  # a longer line is no row of a listing, a search or a file
ROW_SHARE = 0.5  # this share of an output's non-empty lines being rows of one kind makes it that kind

_CODE_EXTENSIONS = frozenset(
    "py pyi pyx js jsx mjs cjs ts tsx go rs java kt scala rb php cs c h cpp cc hpp swift sh bash zsh sql lua pl r m "
    "ipynb vue svelte".split()
)
_BUILD_EXTENSIONS = frozenset("toml cfg ini yaml yml lock json xml gradle mk cmake".split())
_BUILD_NAMES = frozenset(
    "makefile gnumakefile dockerfile pyproject.toml setup.cfg setup.py tox.ini package.json requirements.txt "
    "cargo.toml go.mod pom.xml build.gradle cmakelists.txt noxfile.py conftest.py .pre-commit-config.yaml".split()
)
_DOC_EXTENSIONS = frozenset("md rst txt adoc org html htm eml".split())
_DOC_NAMES = ("readme", "contributing", "changelog", "changes", "history", "license", "policy", "security",
              "governance", "code_of_conduct", "authors", "notice", "guide", "docs/")

_LISTING_PROGRAMS = frozenset("ls find tree fd dir exa eza du".split())
_SEARCH_PROGRAMS = frozenset("grep egrep fgrep rg ag ack".split())
_VIEW_PROGRAMS = frozenset("cat head tail sed nl less more bat view".split())
_LOG_PROGRAMS = frozenset("pip pip3 npm yarn pnpm apt apt-get conda poetry uv make tox nox".split())
_DOCUMENT_COMMANDS = re.compile(r"^gh (?:issue|pr) (?:view|comment|list)\b|^gh api\b.*\b(?:issues|pulls|comments)\b")
_GIT_LOG = re.compile(r"^git (?:log|show|reflog|blame|shortlog)\b")
_TEST_RUN = re.compile(r"\b(?:pytest|py\.test|unittest|tox|nox|jest|mocha|vitest|cargo test|go test|rspec|phpunit)\b")

_READ_TOOLS = frozenset("read read_file readfile view view_file open_file cat_file get_file_contents fetch_file".split())
_LIST_TOOLS = frozenset("ls list list_dir list_directory glob find_files list_files".split())
_SEARCH_TOOLS = frozenset("grep search search_files search_code ripgrep find_in_files codebase_search".split())
_PATH_ARGUMENTS = ("path", "file_path", "filename", "file", "target_file", "notebook_path", "uri", "url")

_LISTING_ROW = re.compile(r"^(?:[dlcbps-][rwxsStT-]{9}[@+.]?\s|total \d+$)")  # `ls -l` rows and their header
_PATH_ROW = re.compile(r"^(?:\.{0,2}/)?[\w@.+-]+(?:/[\w@.+-]+)*/?$")  # a bare path, as `find` prints it
# `src/app.py:12: text`, `src/app.py: text` (several files, no numbers), `12: text` (one file, -n), `12-` (context)
_SEARCH_ROW = re.compile(r"^(?:[\w@+-]*[./][\w./@+-]*(?::\d+)?[:-]|\d+[:-])")
_LOG_ROW = re.compile(
    r"^(?:commit [0-9a-f]{7,40}|Author: |Date: |\s+File \"|Collecting |Requirement already|Downloading |"
    r"Installing |Successfully |[\w/.:-]+::\w+ (?:PASSED|FAILED|SKIPPED|ERROR)|[\w/.-]+\.py [.FEsx]+|"
    r"={3,}|-{3,}|\d{4}-\d\d-\d\d[T ]\d\d:\d\d)"
)
_WORD = re.compile(r"[^\W\d_]{2,}")
_DIFF_ROW = re.compile(r"^(?:[+-](?![+-]{2})|@@ |diff --git |index [0-9a-f]{7})")  # a diff's lines
_NUMBERED_ROW = re.compile(r"^\s*\d{1,6}(?:\t|  |:\s|-\s|\s*\|)")  # `nl`, `cat -n`, an editor's view: a file's lines


@dataclass(frozen=True)
class Evidence:
    """What one tool output is: its kind, what it is of (a file, a folder, a search pattern) and its row count."""

    kind: str
    subject: str = ""
    rows: int = 0

    @property
    def is_rows(self) -> bool:
        """Its lines are records of something (entries, hits, code), not statements someone made."""
        return self.kind in ROW_KINDS


def describe(text: str, call: ToolCall | None) -> Evidence:
    """The kind of a tool output, by the call that produced it, else by the shape of its lines."""
    lines = [line for line in _head_lines(text, MAX_SHAPE_LINES) if line.strip()]
    by_call = _by_call(call) if call is not None else None
    if by_call is not None:
        kind, subject = by_call
        return Evidence(kind, subject, _row_count(text))
    return Evidence(_by_shape(lines), "", _row_count(text))


MIN_DESCRIBED_ROWS = 5  # a shorter output is shown by its first line: its rows are few enough to be the point
MAX_SUBJECT_CHARS = 60


def description(evidence: Evidence) -> str | None:
    """What an output of rows is, in a few words ("a listing of 58 entries of src/app", "40 search hits for
    parse_date", "the source of models.py"), or None when its first line says more (few rows, a log, a document)."""
    if evidence.rows < MIN_DESCRIBED_ROWS:
        return None
    subject = evidence.subject[:MAX_SUBJECT_CHARS]
    if evidence.kind == LISTING:
        return f"a listing of {evidence.rows} entries" + (f" of {subject}" if subject else "")
    if evidence.kind == SEARCH:
        return f"{evidence.rows} search hits" + (f" for {subject}" if subject else "")
    if evidence.kind == SOURCE:
        return f"the source of {subject}" if subject else "source code"
    if evidence.kind == BUILD:
        return f"the build file {subject}" if subject else "a build file"
    if evidence.kind == DOCUMENT and subject and not subject.startswith("gh "):
        return f"the document {subject}"  # a file read (an issue's first line says more: its title)
    return None


def _head_lines(text: str, limit: int) -> list[str]:
    return text.split("\n", limit)[:limit]


def _row_count(text: str) -> int:
    """The output's lines, less the wrappers of a text-based agent's observation (`<returncode>`, `<output>`)."""
    count = text.count("\n") + (0 if text.endswith("\n") else 1)
    return max(0, count - sum(text.count(tag) for tag in ("<returncode>", "<output>", "</output>")))


def _by_call(call: ToolCall) -> tuple[str, str] | None:
    name = call.name.lower()
    data = parse_json(call.arguments) if call.arguments[:1] == "{" else None
    arguments = data if isinstance(data, dict) else {}
    path = next((str(arguments[key]) for key in _PATH_ARGUMENTS if isinstance(arguments.get(key), str)), "")
    if name in _READ_TOOLS or (name.startswith("str_replace") and arguments.get("command") == "view"):
        return (_file_kind(path) or SOURCE, path) if path else None
    if name in _LIST_TOOLS:
        return LISTING, path or str(arguments.get("pattern", ""))
    if name in _SEARCH_TOOLS:
        return SEARCH, str(arguments.get("pattern") or arguments.get("query") or "")
    command = _command(arguments, call.arguments)
    return _by_command(command) if command else None


def _command(arguments: dict[str, object], raw: str) -> str:
    for key in ("command", "cmd", "script"):
        value = arguments.get(key)
        if isinstance(value, str):
            return value[:MAX_COMMAND_CHARS]
        if isinstance(value, list) and all(isinstance(part, str) for part in value):
            return " ".join(value)[:MAX_COMMAND_CHARS]
    return "" if arguments or raw[:1] == "{" else raw[:MAX_COMMAND_CHARS]


def _by_command(command: str) -> tuple[str, str] | None:
    """The kind of what a shell line prints: its last program's, or, when that one says nothing (`cat -n f | sed -n
    1,40p`), the kind of the program before it in the pipeline."""
    for segment in reversed(_pipeline(command)):
        kind = _by_program(segment)
        if kind is not None:
            return kind
    return None


def _by_program(segment: str) -> tuple[str, str] | None:
    if _DOCUMENT_COMMANDS.search(segment):
        return DOCUMENT, segment
    if _GIT_LOG.search(segment):
        return LOG, segment
    if _TEST_RUN.search(segment):
        return LOG, segment
    words = segment.split()
    if not words:
        return None
    program = words[0].rsplit("/", 1)[-1]
    operands = [word for word in words[1:] if not word.startswith("-")]
    if program == "git" and operands[:1] == ["grep"]:
        return SEARCH, " ".join(operands[1:2])
    if program == "git" and operands[:1] in (["diff"], ["stash"]) or program in ("diff", "patch"):
        return SOURCE, "a diff"  # changed lines of files
    if program in _LISTING_PROGRAMS:
        return LISTING, operands[0] if operands else "."
    if program in _SEARCH_PROGRAMS:
        return SEARCH, operands[0].strip("'\"") if operands else ""
    if program in _VIEW_PROGRAMS:
        files = [word.strip("'\"") for word in operands if "." in word or "/" in word or word.lower() in _BUILD_NAMES]
        path = files[-1] if files else ""
        kind = _file_kind(path)
        return (kind, path) if kind else None
    if program in _LOG_PROGRAMS:
        return LOG, segment
    return None


def _pipeline(command: str) -> list[str]:
    """The programs of the last command of a shell line's first line (`cd repo && grep -n x f | head`)."""
    first_line = command.strip().split("\n", 1)[0]
    for separator in ("&&", ";", "||"):
        first_line = first_line.rsplit(separator, 1)[-1]
    return [part.strip() for part in first_line.split("|") if part.strip()]


def _file_kind(path: str) -> str | None:
    """The kind of a file's text by its name: source, build file or document; None when the name says nothing."""
    if not path:
        return None
    name = path.rsplit("/", 1)[-1].lower()
    if name in _BUILD_NAMES:
        return BUILD
    extension = name.rsplit(".", 1)[-1] if "." in name else ""
    lowered = path.lower()
    if any(part in lowered for part in _DOC_NAMES) and extension not in _CODE_EXTENSIONS:
        return DOCUMENT
    if extension in _CODE_EXTENSIONS:
        return SOURCE
    if extension in _BUILD_EXTENSIONS:
        return BUILD
    if extension in _DOC_EXTENSIONS:
        return DOCUMENT
    return None


def _by_shape(lines: list[str]) -> str:
    """The kind most of the lines have, when at least ROW_SHARE of them share one; else OTHER."""
    if not lines:
        return OTHER
    counts = {LISTING: 0, SEARCH: 0, SOURCE: 0, LOG: 0}
    for line in lines:
        kind = row_kind(line)
        if kind is not None:
            counts[kind] += 1
    kind, count = max(counts.items(), key=lambda item: item[1])
    return kind if count >= ROW_SHARE * len(lines) and count >= 3 else OTHER


def row_kind(line: str) -> str | None:
    """The kind of row a line is (a listing entry, a search hit, a log line, a line of code), or None for a line
    someone wrote as a statement."""
    if len(line) > MAX_ROW_CHARS:
        return None  # a blob, not a row: and no pattern below reads a megabyte of one line
    stripped = line.strip()
    if not stripped or stripped.startswith(("<returncode>", "<output>", "</output>")):
        return None
    if _LISTING_ROW.match(stripped) or (_PATH_ROW.match(stripped) and ("/" in stripped or "." in stripped)
                                        and not _is_sentence(stripped)):
        return LISTING
    if _LOG_ROW.match(line):
        return LOG
    if _DIFF_ROW.match(line) and not line.startswith(("- ", "-- ")):
        return SOURCE  # "- " starts a list item as often as a removed line: only "+" lines and hunks tell
    if _NUMBERED_ROW.match(line):
        return SOURCE  # a file's numbered lines are its rows, prose or code
    if _SEARCH_ROW.match(stripped):
        return SEARCH
    if looks_like_code(line):
        return SOURCE
    return None


def _is_sentence(text: str) -> bool:
    return len(_WORD.findall(text[:200])) >= 4


__all__ = ["BUILD", "DOCUMENT", "Evidence", "description", "LISTING", "LOG", "OTHER", "SEARCH", "SOURCE", "describe", "row_kind"]
