"""Checks of a coding run at its last requests (issue 30): which files the agent changed and whether the state
names them, whether its decision on the fix is still in view, and whether a `Verification:` line says `passed`
for a command whose latest output failed. Pure functions over a trace's messages and a forwarded request.

Commands come from tool calls (a shell tool's `command`, an editor tool's path) or, for a text-based agent, from
the ```bash blocks of its messages, each answered by the next observation in order.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..messages import message_text
from ..records import Message
from .metrics import flat, message_texts

SHELL_TOOLS = frozenset({"bash", "shell", "execute_bash", "run_shell_command", "terminal", "run"})
# a text agent's command: a fenced block opened on its own line with a shell's name (not a python block in prose)
_BLOCK = re.compile(r"^```(?:bash|sh|shell)[ \t]*\n(.*?)^```", re.DOTALL | re.MULTILINE)
_FENCE = re.compile(r"^```[\w+-]*[ \t]*\n.*?^```", re.DOTALL | re.MULTILINE)
_RETURNCODE = re.compile(r"\s*<returncode>(-?\d+)</returncode>")
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1")
_CD = re.compile(r"(?:^|&&|;|\n)\s*cd\s+(\S+)")
# a file the agent wrote from a script, by a literal path: open("x", "w"), Path("x").write_text(...), or
# name = "x" / Path("x") and then open(name, "w") / name.write_text(...)
_OPEN_WRITE = re.compile(r"open\(\s*(['\"])([^'\"]+)\1\s*,\s*(['\"])[wa]b?\+?\3")
_PATH_WRITE = re.compile(r"Path\(\s*(['\"])([^'\"]+)\1\s*\)\.write_(?:text|bytes)\(")
_NAMED_PATH = re.compile(r"(\w+)\s*=\s*(?:Path\(\s*)?(['\"])([^'\"]+\.\w+)\2")
_PATCH_TARGET = re.compile(r"^\+\+\+ (?:b/)?(\S+)", re.MULTILINE)
_EDIT_TOOLS = re.compile(r"write|edit|replace|create|apply_patch|insert", re.IGNORECASE)
_VIEW_ONLY = frozenset({"view", "read", "cat"})
SOURCE_SUFFIXES = (".py", ".pyx", ".js", ".jsx", ".ts", ".tsx", ".go", ".rs", ".java", ".kt", ".c", ".h", ".cc", ".cpp",
                   ".hpp", ".rb", ".php", ".cs", ".swift", ".scala", ".m", ".sh", ".pl", ".lua", ".r", ".jl")
_TEST_FILE = re.compile(r"(^|/)(tests?|testing)/|(^|/)test_[^/]*$|_tests?\.\w+$|(^|/)tests?\.\w+$|(^|/)conftest\.py$")
# what shows a failed run: a traceback, pytest's or unittest's FAILED, a line that starts with an error's name
_FAILED = re.compile(r"Traceback \(most recent call last\)|\bFAILED\b|^\s*(?:[\w.]+\.)?\w*Error:", re.MULTILINE)


@dataclass(frozen=True)
class Command:
    """One command of the agent: the message that issued it, the tool, its text (a shell command, or an editor
    tool's arguments JSON), the output it got and the output's return code when it shows one."""

    index: int
    tool: str
    text: str
    arguments: dict[str, Any] = field(default_factory=dict)
    output: str = ""
    returncode: int | None = None

    @property
    def succeeded(self) -> bool:
        if self.returncode is not None:
            return self.returncode == 0
        shown = self.output
        return not (shown.lstrip().lower().startswith("error") or "Traceback (most recent call last)" in shown)


def commands(messages: Sequence[Message]) -> list[Command]:
    """The agent's commands in order, each with its output (tool results, or a text agent's observations)."""
    outputs = {str(m.get("tool_call_id")): message_text(m) for m in messages if m.get("role") == "tool"}
    found: list[Command] = []
    for index, message in enumerate(messages):
        if index < 2 or message.get("role") != "assistant":
            continue
        calls = message.get("tool_calls") or ()
        for call in calls:
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict):
                continue
            name = str(function.get("name", ""))
            arguments = _arguments(function.get("arguments"))
            text = str(arguments.get("command", "")) if name in SHELL_TOOLS else json.dumps(arguments)
            found.append(_command(index, name, text, arguments, outputs.get(str(call.get("id")), "")))
        if calls:
            continue
        answers = _observations_after(messages, index)
        for number, block in enumerate(_BLOCK.findall(message_text(message))):
            output = answers[number] if number < len(answers) else ""
            found.append(_command(index, "bash", block.strip(), {}, output))
    return found


def _command(index: int, tool: str, text: str, arguments: dict[str, Any], output: str) -> Command:
    code = _RETURNCODE.match(output)
    return Command(index, tool, text, arguments, output, int(code.group(1)) if code else None)


def _observations_after(messages: Sequence[Message], index: int) -> list[str]:
    """The user messages right after a text agent's message that are command output."""
    out = []
    for message in messages[index + 1:]:
        text = message_text(message)
        if message.get("role") != "user" or not _RETURNCODE.match(text):
            break
        out.append(text)
    return out


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        parsed = json.loads(str(raw or "{}"))
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


# --- files the agent changed ------------------------------------------------------------------------------------


def ignored(path: str) -> bool:
    """Scratch files, not the change: /tmp, the submission's patch.txt, /dev/null."""
    return path.startswith(("/tmp/", "/dev/")) or path.rsplit("/", 1)[-1] == "patch.txt" or not path


def edited_files(command: Command, written: dict[str, str] | None = None) -> list[str]:
    """The files a command writes, as the command names them (in order, once each). `written` maps files the run
    wrote from here-documents to their text, to find what `patch`/`git apply` of such a file changes."""
    if command.tool not in SHELL_TOOLS:
        return _tool_edits(command)
    text = command.text
    files: list[str] = []
    for segment in _segments(_without_heredoc_bodies(text)):
        files.extend(_segment_edits(segment, text, written or {}))
        files.extend(script_writes(_python_script(segment, text, written or {})))
    return [path for path in dict.fromkeys(files) if not ignored(path)]


def script_writes(script: str) -> list[str]:
    """The files a Python script writes by a literal path."""
    files = [match.group(2) for match in _OPEN_WRITE.finditer(script)]
    files += [match.group(2) for match in _PATH_WRITE.finditer(script)]
    for name, _, path in _NAMED_PATH.findall(script):
        if re.search(rf"\bopen\(\s*{re.escape(name)}\s*,\s*(['\"])[wa]", script) or f"{name}.write_text(" in script:
            files.append(path)
    return files


def _python_script(words: list[str], text: str, written: dict[str, str]) -> str:
    """What a python command runs: its -c code or here-document (the command's text), or a script the run wrote
    earlier from a here-document; "" for anything else (a script written here is not run by writing it)."""
    if not words or not re.fullmatch(r"python[\d.]*", words[0].rsplit("/", 1)[-1]):
        return ""
    if "-c" in words or "<<" in words or "-" in words:
        return text
    script = next((word for word in words[1:] if word.endswith(".py")), "")
    name = script.rsplit("/", 1)[-1]
    return written.get(script) or next((body for path, body in written.items() if path.rsplit("/", 1)[-1] == name), "")


def _tool_edits(command: Command) -> list[str]:
    """An editor tool's path (write_file, str_replace_editor but its `view`, apply_patch's targets)."""
    arguments = command.arguments
    if not _EDIT_TOOLS.search(command.tool) and command.tool != "str_replace_editor":
        return []
    if str(arguments.get("command", "")).lower() in _VIEW_ONLY:
        return []
    path = arguments.get("path") or arguments.get("file_path") or arguments.get("filename")
    if isinstance(path, str):
        return [] if ignored(path) else [path]
    patch = arguments.get("patch") or arguments.get("input") or arguments.get("diff")
    if isinstance(patch, str):
        return [p for p in dict.fromkeys(_PATCH_TARGET.findall(patch)) if not ignored(p)]
    return []


def _without_heredoc_bodies(text: str) -> str:
    """The command with each here-document's body left out (a script's lines are not shell commands)."""
    lines = text.split("\n")
    out: list[str] = []
    ending: list[str] = []
    for line in lines:
        if ending:
            if line.strip() == ending[0]:
                ending.pop(0)
            continue
        out.append(line)
        ending.extend(match.group(2) for match in _HEREDOC.finditer(line))
    return "\n".join(out)


def _segments(text: str) -> list[list[str]]:
    """The simple commands of a shell line, as words (redirections kept as words)."""
    out: list[list[str]] = []
    for line in text.split("\n"):
        try:
            lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|<>")
            lexer.whitespace_split = True
            words = list(lexer)
        except ValueError:
            words = line.split()
        current: list[str] = []
        for word in words:
            if word in (";", "&&", "||", "|", "&"):
                if current:
                    out.append(current)
                current = []
            else:
                current.append(word)
        if current:
            out.append(current)
    return out


def _segment_edits(words: list[str], text: str, written: dict[str, str]) -> list[str]:
    if not words:
        return []
    program = words[0].rsplit("/", 1)[-1]
    targets = [words[i + 1] for i, word in enumerate(words[:-1]) if word in (">", ">>")]
    if program in ("cat", "echo", "printf"):
        return targets
    if program == "tee":
        return [word for word in words[1:] if not word.startswith("-") and word not in (">", ">>", "<")]
    if program == "sed" and any(word.startswith("-i") or word == "--in-place" for word in words):
        return _sed_files(words)
    if program == "perl" and any(word.startswith("-pi") or word.startswith("-i") for word in words):
        return [word for word in words[2:] if "/" in word or "." in word][-1:]
    if program == "patch" or (program == "git" and len(words) > 1 and words[1] == "apply"):
        source = next((words[i + 1] for i, word in enumerate(words[:-1]) if word == "<"), None)
        source = source or next((word for word in words[2:] if not word.startswith("-")), None)
        diff = written.get(source, "") if source else ""
        return _PATCH_TARGET.findall(diff or text)
    return []


def _sed_files(words: list[str]) -> list[str]:
    """sed -i's files: the words after the script (the first non-option word, or the -e scripts)."""
    rest: list[str] = []
    script_given = False
    skip = False
    for word in words[1:]:
        if skip:
            skip = False
            continue
        if word in ("-e", "--expression", "-f"):
            script_given, skip = True, True
            continue
        if word.startswith("-"):
            continue
        if word in (">", ">>", "<"):
            break
        rest.append(word)
    return rest if script_given else rest[1:]


def heredoc_writes(command: Command) -> dict[str, str]:
    """Files a shell command writes from a here-document (`cat > FILE <<EOF`), with the text written."""
    if command.tool not in SHELL_TOOLS:
        return {}
    found: dict[str, str] = {}
    lines = command.text.split("\n")
    for number, line in enumerate(lines):
        heredoc = _HEREDOC.search(line)
        target = re.search(r">\s*(\S+)", line.replace("<<", "  "))
        if heredoc and target and re.match(r"\s*(cat|tee)\b", line.split("&&")[-1]):
            body = []
            for follow in lines[number + 1:]:
                if follow.strip() == heredoc.group(2):
                    break
                body.append(follow)
            found[target.group(1).strip("'\"")] = "\n".join(body)
    return found


def first_changes(found: Sequence[Command]) -> dict[str, int]:
    """Every file the agent's successful commands changed, with the message index of its first change, in order."""
    files: dict[str, int] = {}
    written: dict[str, str] = {}
    for command in found:
        if command.succeeded:
            written.update(heredoc_writes(command))  # a script written and run in one command
            for path in edited_files(command, written):
                files.setdefault(path.removeprefix("./"), command.index)
    return files


def changed_files(found: Sequence[Command]) -> list[str]:
    """Every file the agent's successful commands changed, in the order first changed."""
    return list(first_changes(found))


def outputs_of(messages: Sequence[Message]) -> list[tuple[int, str]]:
    """(index, text) of what the agent was shown: tool results, and user messages after the task."""
    return [(i, message_text(m)) for i, m in enumerate(messages)
            if m.get("role") == "tool" or (m.get("role") == "user" and i >= 2)]


def repo_files(messages: Sequence[Message], changes: dict[str, int]) -> list[str]:
    """The changed files that existed before the agent changed them: named in an output before the first change
    (not a reproduction or scratch script the agent wrote)."""
    shown = outputs_of(messages)
    return [path for path, first in changes.items() if any(i < first and named_in(path, text) for i, text in shown)]


def named_in(path: str, text: str) -> bool:
    """Whether a changed file is named in a text: as written, or relative to the repository (/testbed/a/b.py as
    a/b.py), or under a directory the text names (a/b.py as /testbed/a/b.py)."""
    candidates = {path, path.removeprefix("./")}
    if path.startswith("/"):
        parts = path.strip("/").split("/")
        candidates.update("/".join(parts[n:]) for n in range(1, max(1, len(parts) - 1)))
    return any(candidate and candidate in text for candidate in candidates)


# --- the agent's decision on the fix ----------------------------------------------------------------------------

_DECIDES = re.compile(r"\b(the|a|my) (fix|bug|issue|problem|cause|root cause|solution) (is|was)\b|\bfix (it|this) by\b",
                      re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_FIX_WORDS = re.compile(r"\b(fix|fixes|fixed|fixing|bug|issue|problem|cause|wrong|incorrect|instead|should|need|"
                        r"needs|change|modify|replace|missing)\b", re.IGNORECASE)


def is_source(path: str) -> bool:
    """A non-test source file by its name."""
    return path.lower().endswith(SOURCE_SUFFIXES) and not _TEST_FILE.search(path.lower())


def prose(message: Message) -> str:
    """An agent message's own words: its text without command blocks or a THOUGHT: label."""
    text = _FENCE.sub(" ", message_text(message)).strip()
    return text.removeprefix("THOUGHT:").strip()


def key_sentence(text: str) -> str:
    """The sentence of a decision that names the fix: the first saying "the fix is", "the issue is" or "fix it
    by", else the first naming a fix, cause or change, else the longest."""
    sentences = [s.strip() for s in _SENTENCE_END.split(text) if len(s.strip()) >= 12]
    if not sentences:
        return text.strip()
    return next((s for s in sentences if _DECIDES.search(s)),
                next((s for s in sentences if _FIX_WORDS.search(s)), max(sentences, key=len)))


def decision_index(messages: Sequence[Message], found: Sequence[Command] | None = None) -> int | None:
    """The message that makes the first successful edit of a non-test source file that existed before (a file
    named in an earlier output: not a reproduction script the agent wrote)."""
    found = commands(messages) if found is None else found
    changes = first_changes(found)
    sources = [changes[path] for path in repo_files(messages, changes) if is_source(path)]
    return min(sources) if sources else None


def decision_prose(messages: Sequence[Message], index: int) -> str:
    """The prose of the decision's message, or when it has none (a bare tool call), of the agent's latest message
    before it that has some."""
    for number in range(index, 1, -1):
        if messages[number].get("role") == "assistant" and prose(messages[number]):
            return prose(messages[number])
    return ""


def normalized(text: str) -> str:
    return flat(text.replace("*", "").replace("`", ""))


def sentence_kept(sentence: str, forwarded: str) -> bool:
    """Whether a sentence is in a forwarded text: its first 80 normalized characters (or all of it, if shorter)."""
    head = normalized(sentence)[:80].rstrip()
    return bool(head) and head in normalized(forwarded)


# --- false passes ------------------------------------------------------------------------------------------------

_VERIFIED = re.compile(r"^- (?P<command>.+?): passed(?: \[ref:[0-9a-f]+\])?$")
_PASSED_SINCE = re.compile(r" — passed since(?: \[ref:[0-9a-f]+\])?$")


def passed_lines(state_lines: Sequence[str]) -> list[str]:
    """The commands the state's `Verification:` sections say passed, as of their last line: the live part at the
    tail says what changed since the frozen head (`pytest x: passed` there, `pytest x: failed …` at the tail is a
    check that fails now, not a false pass)."""
    latest: dict[str, bool] = {}  # command -> whether its latest line says it passed
    inside = False
    for line in state_lines:
        if not line.startswith("- "):
            inside = line.strip() == "Verification:"
            continue
        if not inside:
            continue
        found = _VERIFIED.match(line.strip())
        if found:
            latest[found.group("command")] = True
            continue
        for command in latest:
            if line.startswith(f"- {command}: "):
                latest[command] = bool(_PASSED_SINCE.search(line))
    return [command for command, passed in latest.items() if passed]


def failed_output(command: Command) -> bool:
    return (command.returncode is not None and command.returncode != 0) or bool(_FAILED.search(command.output))


def false_pass(state_command: str, found: Sequence[Command]) -> bool | None:
    """Whether the latest output of the command a `- CMD: passed` line names shows a failure (a traceback,
    FAILED, Error: or a non-zero return code); None when the run has no such command."""
    wanted = flat(state_command.rstrip("…"))
    latest = next((c for c in reversed(found) if wanted and wanted in flat(c.text)), None)
    return None if latest is None else failed_output(latest)


# --- the checks at one request -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SweCheck:
    """The SWE checks of one forwarded request: files changed so far and how many the state names; whether the
    decision's key sentence is in view (None before it is made); `passed` lines, and how many of them are false."""

    files: int = 0
    files_named: int = 0
    repo_files: int = 0
    repo_files_named: int = 0
    decision: bool | None = None
    passes: int = 0
    false_passes: int = 0


def looks_like_coding(messages: Sequence[Message]) -> bool:
    """A coding run: the agent ran shell commands and changed at least one source file."""
    found = commands(messages)
    shell = sum(1 for c in found if c.tool in SHELL_TOOLS)
    return shell >= 3 and any(is_source(path) for path in changed_files(found))


def swe_check(request: Sequence[Message], sent: Sequence[Message], state_lines: Sequence[str]) -> SweCheck:
    """The SWE checks of one request (messages[:t]) against what was forwarded for it and the state's lines in it."""
    found = commands(request)
    changes = first_changes(found)
    files, existing = list(changes), repo_files(request, changes)
    state = "\n".join(state_lines)
    decision_at = decision_index(request, found)
    decision = None
    if decision_at is not None:
        sentence = key_sentence(decision_prose(request, decision_at))
        decision = sentence_kept(sentence, "\n".join(message_texts(sent)))
    verdicts = [false_pass(command, found) for command in passed_lines(state_lines)]
    return SweCheck(len(files), sum(1 for path in files if named_in(path, state)), len(existing),
                    sum(1 for path in existing if named_in(path, state)), decision,
                    sum(1 for v in verdicts if v is not None), sum(1 for v in verdicts if v))
