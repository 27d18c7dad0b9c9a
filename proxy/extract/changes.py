"""Files the agent changed: each successful write, edit or patch of a tool call, read from the call and its result.

Three kinds of facts (see records.py): CHANGED (a file and how it changed), SCRIPT (a file whose content writes
other files when it runs: a fix script, a patch) and RAN (such a file was run or applied). A script is often
written in one call and run in a later one; `changed_files` joins the two into the changes they made.

Every client shape: shell tools (`bash`, `shell`, Codex's argv lists, a text agent's command block), editor tools
(Claude Code's Write/Edit/MultiEdit/NotebookEdit, str_replace_editor, write_file/edit_file) and Codex's
apply_patch. A change counts only when the result says the call succeeded. Linear in the call and the output.
"""

from __future__ import annotations

import itertools
import json
import posixpath
import re
from dataclasses import dataclass, field

from ..records import CHANGED, RAN, SCRIPT, Fact, ToolCall
from .facts import parse_json
from .actions import return_code
from .shell import Command, simple_commands
from .text import TRACEBACK

MAX_CHANGES = 64  # files one call may change (a patch names more: the rest are left out)
MAX_SHELL_DEPTH = 2  # `bash -c "…"` inside a command is read; deeper nesting is not
MAX_PATH_CHARS = 300
_HEAD_LINES = 40  # lines of the output where a failure is looked for
_LINE_CHARS = 500  # of a longer output line only its start is looked at
_STATUS_CHARS = 2_000  # of the output's end, where its exit status is looked for (its head: _head_lines)

_EXCLUDED_DIRS = ("/tmp", "/dev", "/proc", "/var/tmp", "/private/tmp")
_NOT_A_PATH = re.compile(r"[$`*?\[\]{}<>|\n]|^-|^~")  # variables, globs, options: not a file that can be named
_PYTHON = re.compile(r"python(?:\d+(?:\.\d+)?)?$")
_SHELLS = frozenset({"bash", "sh", "zsh", "dash"})
_PREFIXES = frozenset({"sudo", "env", "time", "nohup", "command", "exec", "builtin"})
_ASSIGNMENT = re.compile(r"\w+=")
_SAFE_WORD = re.compile(r"[\w@%+=:,./-]+")

# Python that writes a literal path: open(…, 'w'), Path(…).write_text(…). Bounded repeats: linear.
_OPEN_WRITE = re.compile(
    r"""\bopen\(\s{0,20}(?:(['"])([^'"\n]{1,300})\1|([A-Za-z_]\w{0,60}))\s{0,20},\s{0,20}(?:mode\s{0,5}=\s{0,5})?"""
    r"""[rbuRBU]?(['"])([rwaxbt+U]{1,4})\4"""
)
_PATH_WRITE = re.compile(r"""\bPath\(\s{0,20}(['"])([^'"\n]{1,300})\1\s{0,20}\)\.write_(?:text|bytes)\(""")
_NAMED_WRITE = re.compile(r"""\b([A-Za-z_]\w{0,60})\.(?:write_(?:text|bytes)\(|open\(\s{0,20}(['"])[wax])""")
_PY_ASSIGNMENT = re.compile(
    r"""^[ \t]{0,40}([A-Za-z_]\w{0,60})[ \t]{0,20}=[ \t]{0,20}(?:Path\()?[rRbB]?(['"])([^'"\n]{1,300})\2""", re.M)

# Program messages of a failed write: `sed: can't read x.py: No such file or directory`, `cp: cannot stat …`.
_PROGRAM_PREFIX = re.compile(r"[\w.+-]{1,40}: ")
_WRITE_FAILURES = ("No such file or directory", "Permission denied", "cannot ", "can't ", "Is a directory",
                   "Read-only file system", "Not a directory", "unterminated", "unknown option", "unknown command",
                   "No space left")
# What editor tools answer when nothing was written.
_EDITOR_FAILURES = re.compile(
    r"<tool_use_error>|No replacement was performed|did not appear verbatim|does not exist|Cannot overwrite|"
    r"not found in file|has not been read yet|modified since read|^\s*(?:ERROR|Error|error)\b\s*[:!]|^Invalid |"
    r"^Failed to |\bpermission denied\b",
    re.I,
)
# A JSON string field, its inside stopping at a raw newline (where extraction's window joined head and tail).
_STRING_FIELD = re.compile(r'"([A-Za-z_]\w{0,40})"[ \t]{0,20}:[ \t]{0,20}"((?:[^"\\\n]|\\.)*)(")?')
_STRING_REST = re.compile(r'((?:[^"\\\n]|\\.)*)"')
_PARTIAL_ESCAPE = re.compile(r"\\u[0-9A-Fa-f]{0,3}$")
_HUNK = re.compile(r"@@ -\d{1,9}(?:,(\d{1,9}))? \+\d{1,9}(?:,(\d{1,9}))? @@")
_HUNKS_CHARS = 4_000  # after a file's "patching file" line, where its hunks' results are looked for
_PATCHING = re.compile(r"^patching file '?([^'\n]{1,300}?)'?$", re.M)  # GNU patch names each file it changes

# Editor tools by name (lowercased): how a successful call changed its file.
_EDITORS = {
    "write": "written", "write_file": "written", "create_file": "created", "write_to_file": "written",
    "edit": "edited", "edit_file": "edited", "multiedit": "edited", "multi_edit": "edited", "replace": "edited",
    "replace_in_file": "edited", "search_replace": "edited", "apply_diff": "edited", "insert_content": "edited",
    "notebookedit": "edited", "notebook_edit": "edited", "delete_file": "deleted", "remove_file": "deleted",
}
_PATH_ARGUMENTS = ("file_path", "path", "filePath", "notebook_path", "target_file", "filename", "file")
_STR_REPLACE_EDITORS = frozenset({"str_replace_editor", "str_replace_based_edit_tool", "text_editor"})
_STR_REPLACE_COMMANDS = {"create": "created", "str_replace": "edited", "insert": "edited", "undo_edit": "edit undone",
                         "write": "written"}
_APPLY_PATCH = frozenset({"apply_patch", "applypatch"})


@dataclass(frozen=True, slots=True)
class Change:
    path: str  # as the call named it, relative to the directory it worked in when it named one
    how: str  # "edited (sed -i)", "written (cat > heredoc)", "deleted (rm)"


@dataclass
class _Found:
    """What one call wrote, in order; a later change of a file replaces an earlier one."""

    changes: dict[str, str] = field(default_factory=dict)
    scripts: dict[str, list[Change]] = field(default_factory=dict)  # a file written now, and what it writes
    runs: dict[str, str] = field(default_factory=dict)  # a script or patch file run now, and how
    failed: bool = False  # the call failed: only what its output shows was changed all the same counts
    # a Python traceback in the output: a Python program of the call may have died before it wrote, so its writes
    # do not count; the shell's own (redirections, sed, cp …) happened all the same (`cat > t.py <<EOF … EOF;
    # python t.py` that crashes has written t.py)
    crashed: bool = False

    def change(self, path: str | None, how: str, despite_failure: bool = False) -> None:
        if path and len(self.changes) < MAX_CHANGES and (despite_failure or not self.failed):
            self.changes.pop(path, None)
            self.changes[path] = how

    def run(self, script: str | None, how: str) -> None:
        if not script or self.failed or self.crashed:
            return
        self.runs[script] = how
        for change in self.scripts.get(script, ()):  # written earlier in this same call: its changes are known
            self.change(change.path, f"{change.how} ({how})")


def file_changes(call: ToolCall | None, output: str, outcome: str) -> list[tuple[str, str, str]]:
    """(kind, key, value) facts of what the call changed: CHANGED (path, how), SCRIPT (path, what it writes, one
    `path<TAB>how` a line), RAN (path, how it was run). Nothing when the result shows the call failed."""
    if call is None:
        return []
    name = call.name.rsplit(".", 1)[-1]  # "functions.apply_patch", "container.exec"
    lowered = name.lower()
    arguments = call_arguments(call.arguments)
    if lowered in _EDITORS or lowered in _STR_REPLACE_EDITORS:
        if outcome == "error" or _editor_failed(output):
            return []
        found = _Found()
        for change in _editor_changes(lowered, name, arguments):
            found.change(_key(change.path, _Place()), change.how)
        return _triples(found)
    if lowered in _APPLY_PATCH:
        patch = arguments.get("input") or arguments.get("patch") if arguments else call.arguments
        if not isinstance(patch, str) or outcome == "error" or _editor_failed(output):
            return []
        found = _Found()
        for change in patch_changes(patch):
            found.change(_key(change.path, _Place()), f"{change.how} (apply_patch)")
        return _triples(found)
    # arguments that are not JSON are the command itself (a freeform tool); JSON that does not parse is not
    script = shell_script(arguments.get("command", arguments.get("cmd")) if arguments else
                          "" if call.arguments.lstrip().startswith("{") else call.arguments)
    if not script:
        return []
    failed = _shell_failed(output, outcome)
    if failed and "Hunk #" not in output:
        return []
    # a failed `patch` may still have applied some hunks: its output says which
    found = _Found(failed=failed, crashed=TRACEBACK in output)
    _read_shell(script, output, found, _Place(), 0)
    return _triples(found)


def call_arguments(text: str) -> dict[str, object]:
    """A call's JSON arguments; of arguments cut to extraction's window (head and tail joined by a newline: a
    heredoc carrying a whole file) the string fields that can be read, the cut one as its two ends."""
    data = parse_json(text) if text[:1] in "{[" else None
    if isinstance(data, dict):
        return data
    if not text.startswith("{") or "\n" not in text:
        return {}
    fields: dict[str, object] = {}
    position = 0
    while (match := _STRING_FIELD.search(text, position)) is not None:
        value, position = match.group(2), match.end()
        if not match.group(3) and text.startswith("\n", position):  # cut here: the rest is at the tail's start
            rest = _STRING_REST.match(text, position + 1)
            if rest is not None:
                value, position = value + "\\n" + rest.group(1), rest.end()
        fields[match.group(1)] = _json_string(value)
    return fields


def _json_string(raw: str) -> str:
    """The text of a JSON string's inside, also when a cut left a partial escape at its end."""
    for candidate in (raw, _PARTIAL_ESCAPE.sub("", raw)):
        try:
            return json.loads(f'"{candidate}"')
        except ValueError:
            continue
    return raw.replace("\\n", "\n").replace('\\"', '"')


def _triples(found: _Found) -> list[tuple[str, str, str]]:
    triples = [(CHANGED, path, how) for path, how in found.changes.items()]
    triples += [(SCRIPT, path, "\n".join(f"{c.path}\t{c.how}" for c in writes))
                for path, writes in found.scripts.items() if writes]
    triples += [(RAN, path, how) for path, how in found.runs.items()]
    return triples


def shell_script(command: object) -> str:
    """The shell text a call runs: a `command` string, or an argv list (Codex: ["bash", "-lc", "…"])."""
    if isinstance(command, str):
        return command
    if isinstance(command, list) and command and all(isinstance(word, str) for word in command):
        program = posixpath.basename(command[0])
        if program in _SHELLS and len(command) >= 3 and command[1].startswith("-") and "c" in command[1]:
            return command[2]
        return " ".join(_quoted(word) for word in command)
    return ""


def _quoted(word: str) -> str:
    """The word as the shell would need it written (shlex.quote's rule)."""
    return word if word and _SAFE_WORD.fullmatch(word) else "'" + word.replace("'", "'\"'\"'") + "'"


# ---- did it succeed -------------------------------------------------------------------------------------------


def _head_lines(output: str) -> list[str]:
    lines = output[: _HEAD_LINES * _LINE_CHARS].split("\n", _HEAD_LINES)[:_HEAD_LINES]
    return [line[:_LINE_CHARS] for line in lines]


def _shell_failed(output: str, outcome: str) -> bool:
    """A non-zero exit status (the outcome stands in when the output shows none: an error line then says the call
    failed), or a program reporting a failed write in the output. An error line at exit status 0 (a script's
    traceback after the shell wrote it) is no failure of the shell's writes."""
    head = _head_lines(output)
    code = return_code(output, head, output[-_STATUS_CHARS:].splitlines()[-_HEAD_LINES:])
    if (code != 0) if code is not None else outcome == "error":
        return True
    return any(_PROGRAM_PREFIX.match(line) and any(failure in line for failure in _WRITE_FAILURES) for line in head)


def _editor_failed(output: str) -> bool:
    """An editor tool's answer that nothing was written ("<tool_use_error>…", "No replacement was performed")."""
    return any(_EDITOR_FAILURES.search(line) for line in _head_lines(output)[:8])


# ---- editor tools ---------------------------------------------------------------------------------------------


def _editor_changes(lowered: str, name: str, arguments: dict[str, object]) -> list[Change]:
    path = next((value for key in _PATH_ARGUMENTS if isinstance(value := arguments.get(key), str) and value), None)
    if path is None:
        return []
    if lowered in _STR_REPLACE_EDITORS:
        command = arguments.get("command")
        verb = _STR_REPLACE_COMMANDS.get(command) if isinstance(command, str) else None
        if verb is None:  # view, or an unknown command: nothing written
            return []
        line = arguments.get("insert_line")
        where = f" at line {line}" if command == "insert" and line is not None else ""
        return [Change(path, f"{verb} ({command}{where})")]
    if arguments.get("dryRun") is True or arguments.get("dry_run") is True:
        return []
    verb = _EDITORS[lowered]
    if lowered in ("notebookedit", "notebook_edit") and arguments.get("edit_mode") == "delete":
        return [Change(path, f"cell deleted ({name})")]
    edits = arguments.get("edits")
    count = f", {len(edits)} edits" if isinstance(edits, list) and len(edits) > 1 else ""
    return [Change(path, f"{verb} ({name}{count})")]


# ---- patches --------------------------------------------------------------------------------------------------


def patch_changes(patch: str, strip: int | None = None) -> list[Change]:
    """The files a patch names: unified diffs (`--- a/x` / `+++ b/x`, `strip` leading components, or the git a/
    b/ prefixes) and Codex patches (`*** Update File: x`). `how` is the verb alone ("edited", "created"). Lines
    inside a hunk are its content, whatever they start with: the hunk header says how many there are."""
    changes: list[Change] = []
    old: str | None = None
    in_hunk = [0, 0]  # old and new lines still to come in the current hunk
    for line in patch.split("\n"):
        if len(changes) >= MAX_CHANGES:
            break
        if in_hunk[0] > 0 or in_hunk[1] > 0:
            marker = line[:1]
            in_hunk[0] -= marker in (" ", "-", "")
            in_hunk[1] -= marker in (" ", "+", "")
            continue
        hunk = _HUNK.match(line)
        if hunk:
            in_hunk = [int(hunk.group(1) or 1), int(hunk.group(2) or 1)]
        elif line.startswith("*** ") and ": " in line:
            header, _, path = line[4:].partition(": ")
            verb = {"Update File": "edited", "Add File": "created", "Delete File": "deleted",
                    "Move to": "created"}.get(header)
            if verb and path.strip():
                changes.append(Change(path.strip(), verb))
        elif line.startswith("--- "):
            old = _diff_path(line[4:], strip)
            continue
        elif line.startswith("+++ ") and old is not None:
            new = _diff_path(line[4:], strip)
            if new == "/dev/null":
                changes.append(Change(old, "deleted"))
            elif new:
                changes.append(Change(new, "created" if old == "/dev/null" else "edited"))
        old = None
    return changes


def _diff_path(text: str, strip: int | None) -> str:
    path = text.split("\t", 1)[0].strip()
    if path == "/dev/null" or not path:
        return path
    if strip is None:
        return path[2:] if path.startswith(("a/", "b/")) else path
    return path.split("/", strip)[-1] if path.count("/") >= strip else path


# ---- python that writes ---------------------------------------------------------------------------------------


def python_writes(code: str) -> list[str]:
    """The literal paths Python code opens for writing (`open('x.py', 'w')`, `open(path, "w")` after
    `path = 'x.py'`, `Path('x.py').write_text(…)`), in order."""
    if "open(" not in code and ".write_" not in code:
        return []
    names = {match.group(1): match.group(3) for match in _PY_ASSIGNMENT.finditer(code)}
    paths: list[str] = []
    for match in _OPEN_WRITE.finditer(code):
        if not any(mode in match.group(5) for mode in "wax+"):
            continue
        path = match.group(2) or names.get(match.group(3) or "")
        if path and path not in paths:
            paths.append(path)
    for match in _PATH_WRITE.finditer(code):
        if match.group(2) not in paths:
            paths.append(match.group(2))
    for match in _NAMED_WRITE.finditer(code):  # `path = Path("x.py")` … `path.write_text(…)`
        path = names.get(match.group(1))
        if path and path not in paths:
            paths.append(path)
    return paths[:MAX_CHANGES]


# ---- shell ----------------------------------------------------------------------------------------------------


@dataclass
class _Place:
    """Where the shell is: `base`, the first absolute directory it went to, and a path relative to it."""

    base: str | None = None
    relative: str = ""

    def go(self, directory: str | None) -> None:
        if directory is None or _NOT_A_PATH.search(directory) or directory == "-":
            self.base, self.relative = None, ""  # `cd`, `cd -`, `cd $X`: where is not known
        elif directory.startswith("/"):
            directory = posixpath.normpath(directory)
            if self.base is not None and directory.startswith(self.base.rstrip("/") + "/"):
                self.relative = directory[len(self.base.rstrip("/")) + 1:]
            else:
                self.base, self.relative = directory, ""
        else:
            self.relative = posixpath.normpath(posixpath.join(self.relative, directory))
            self.relative = "" if self.relative == "." else self.relative


def _key(path: str | None, place: _Place, scratch: bool = False) -> str | None:
    """The ledger key of a path a command names: relative to the first directory the command went to (so
    `/testbed/x.py` after `cd /testbed` is `x.py`), normalized, case kept; None for what cannot be named (`$FILE`,
    `*.py`) and, unless `scratch`, for what is not a file that stays (under /tmp, /dev/null)."""
    if not path or len(path) > MAX_PATH_CHARS or _NOT_A_PATH.search(path):
        return None
    if path.startswith("/"):
        absolute = posixpath.normpath(path)
        base = (place.base or "").rstrip("/")
        key = absolute[len(base) + 1:] if base and absolute.startswith(base + "/") else absolute
    else:
        key = posixpath.normpath(posixpath.join(place.relative, path))
        absolute = posixpath.join(place.base, key) if place.base else key
    if key in (".", "") or (not scratch and any(absolute == d or absolute.startswith(d + "/")
                                                 for d in _EXCLUDED_DIRS)):
        return None
    return key


def _script_key(path: str | None, place: _Place) -> str | None:
    """The key of a script or patch file: a fix script under /tmp writes files that stay all the same."""
    return _key(path, place, scratch=True)


def _read_shell(script: str, output: str, found: _Found, place: _Place, depth: int) -> None:
    """What the shell text writes, command by command, the current directory followed along."""
    for command in simple_commands(script):
        words = _program_words(command.words)
        program = posixpath.basename(words[0]) if words else ""
        _redirections(command, program, words, found, place, depth)
        handler = _PROGRAMS.get(program)
        if handler is not None:
            handler(command, words, output, found, place, depth)
        elif _PYTHON.match(program):
            _python(command, words, found, place)
        elif program in _SHELLS or program in ("source", "."):
            _shell(command, words, output, found, place, depth)
        elif words and "/" in words[0] and not words[0].startswith("/usr/") and not words[0].startswith("/bin/"):
            found.run(_script_key(words[0], place), words[0])  # `./fix.sh`


def _program_words(words: list[str]) -> list[str]:
    """The words from the program on: `VAR=x`, `sudo`, `env`, `time` before it are not the program."""
    start = 0
    while start < len(words) and (words[start] in _PREFIXES or _ASSIGNMENT.match(words[start])
                                  or (start and words[start - 1] in _PREFIXES and words[start].startswith("-"))):
        start += 1
    return words[start:]


def _label(program: str, words: list[str]) -> str:
    """How a command is named in a change: the program, and a git subcommand ("git diff")."""
    if program == "git" and len(words) > 1:
        return f"git {words[1]}"
    return program


def _redirections(command: Command, program: str, words: list[str], found: _Found, place: _Place,
                  depth: int) -> None:
    for operator, target in command.redirects:
        if "<" in operator:
            continue
        verb = "appended" if operator.endswith(">>") else "written"
        heredoc = " heredoc" if command.stdin is not None else ""
        found.change(_key(target, place), f"{verb} ({_label(program, words)} {operator}{heredoc})".replace("( ", "("))
        script = _script_key(target, place)
        if script is not None and command.stdin is not None and verb == "written" and not found.failed:
            _remember_script(script, command.stdin, found, place, depth)


def _remember_script(key: str, body: str, found: _Found, place: _Place, depth: int) -> None:
    """A file written from a here-document: what it writes when it is run (Python, shell) or applied (a patch)."""
    writes: list[Change] = []
    if "\n+++ " in body or body.startswith(("--- ", "diff ")) or "*** Begin Patch" in body:
        writes = [Change(_key(c.path, place) or "", c.how) for c in patch_changes(body)]
    elif key.endswith(".sh") and depth < MAX_SHELL_DEPTH:
        inner = _Found()
        _read_shell(body, "", inner, _Place(place.base, place.relative), depth + 1)
        writes = [Change(path, how) for path, how in inner.changes.items()]
    elif not key.endswith((".txt", ".md", ".rst", ".json", ".yaml", ".yml", ".cfg", ".toml", ".ini", ".html")):
        writes = [Change(path, "written") for path in (_key(p, place) for p in python_writes(body)) if path]
    found.scripts[key] = [change for change in writes if change.path]


def _operands(words: list[str], with_argument: str = "") -> list[str]:
    """The words after the program that are not options (nor the arguments of options in `with_argument`)."""
    operands: list[str] = []
    skip = False
    options = True
    for word in words[1:]:
        if skip:
            skip = False
        elif options and word == "--":
            options = False
        elif options and word.startswith("-") and word != "-":
            skip = len(word) == 2 and word[1] in with_argument
        else:
            operands.append(word)
    return operands


def _sed(command: Command, words: list[str], output: str, found: _Found, place: _Place, depth: int) -> None:
    """`sed -i[SUFFIX] [-e SCRIPT]… [SCRIPT] FILE…`: the files are edited in place."""
    in_place = has_script = False
    operands: list[str] = []
    index = 1
    while index < len(words):
        word = words[index]
        index += 1
        if word == "--":
            operands += words[index:]
            break
        if word.startswith("--"):
            in_place = in_place or word.startswith("--in-place")
            if word in ("--expression", "--file"):
                has_script, index = True, index + 1
            has_script = has_script or word.startswith(("--expression=", "--file="))
            continue
        if not word.startswith("-") or word == "-":
            operands.append(word)
            continue
        for position, flag in enumerate(word[1:], 1):
            if flag == "i":
                in_place = True
                if position == len(word) - 1 and index < len(words) and words[index] == "":
                    index += 1  # `sed -i '' …` (BSD): an empty suffix
                break  # the rest of the cluster is the backup suffix
            if flag in "efl":
                has_script = has_script or flag in "ef"
                if position == len(word) - 1:
                    index += 1  # its argument is the next word
                break
    if in_place:
        for path in operands[0 if has_script else 1:]:
            found.change(_key(path, place), "edited (sed -i)")


def _perl(command: Command, words: list[str], output: str, found: _Found, place: _Place, depth: int) -> None:
    """`perl -pi -e CODE FILE…`: with -i the files are edited in place."""
    in_place = has_script = False
    operands: list[str] = []
    index = 1
    while index < len(words):
        word = words[index]
        index += 1
        if not word.startswith("-") or word in ("-", "--"):
            operands += words[index - 1:] if word != "--" else words[index:]
            break
        for position, flag in enumerate(word[1:], 1):
            if flag == "i":
                in_place = True
                break
            if flag in "eE":
                has_script = True
                if position == len(word) - 1:
                    index += 1
                break
    if in_place:
        for path in operands[0 if has_script else 1:]:
            found.change(_key(path, place), "edited (perl -i)")


def _tee(command: Command, words: list[str], output: str, found: _Found, place: _Place, depth: int) -> None:
    append = any(word in ("-a", "--append") for word in words[1:])
    for path in _operands(words):
        found.change(_key(path, place), "appended (tee -a)" if append else "written (tee)")


def _copy_or_move(command: Command, words: list[str], output: str, found: _Found, place: _Place,
                  depth: int) -> None:
    program = posixpath.basename(words[0])
    operands = _operands(words, "tS")
    if len(operands) < 2 or any(word.startswith(("-t", "--target-directory")) for word in words[1:]):
        return
    *sources, destination = operands
    into_directory = len(sources) > 1 or destination.endswith("/")
    for source in sources:
        target = posixpath.join(destination, posixpath.basename(source.rstrip("/"))) if into_directory else destination
        if program == "mv":
            found.change(_key(source, place), f"moved to {target} (mv)")
            found.change(_key(target, place), f"moved from {source} (mv)")
        else:
            found.change(_key(target, place), f"copied from {source} (cp)")


def _remove(command: Command, words: list[str], output: str, found: _Found, place: _Place, depth: int) -> None:
    for path in _operands(words):
        found.change(_key(path, place), "deleted (rm)")


def _cd(command: Command, words: list[str], output: str, found: _Found, place: _Place, depth: int) -> None:
    operands = _operands(words)
    place.go(operands[0] if operands else None)


def _git(command: Command, words: list[str], output: str, found: _Found, place: _Place, depth: int) -> None:
    """git apply (the files the patch names), checkout -- / restore (restored), rm (deleted), mv (moved)."""
    if len(words) < 2:
        return
    sub, rest = words[1], words[1:]
    if sub == "apply":
        if any(word in ("--check", "--stat", "--numstat", "--summary") for word in rest):
            return
        reverse = any(word in ("-R", "--reverse") for word in rest)
        how = f"git apply{' -R' if reverse else ''}"
        _apply(command, _operands(rest, "p"), _strip_count(rest, 1), "reverted" if reverse else None, how, found,
               place)
    elif sub in ("checkout", "restore"):
        paths = rest[rest.index("--") + 1:] if "--" in rest else [
            word for word in _operands(rest, "s") if re.search(r"\.\w{1,8}$", word) and not re.search(r"[~^:]", word)]
        if sub == "restore" and "--staged" in rest and "--worktree" not in rest and "-W" not in rest:
            return  # only the index
        for path in paths:
            found.change(_key(path, place), f"restored (git {sub})")
    elif sub == "rm" and "--cached" not in rest:
        for path in _operands(rest):
            found.change(_key(path, place), "deleted (git rm)")
    elif sub == "mv":
        operands = _operands(rest)
        if len(operands) == 2:
            found.change(_key(operands[0], place), f"moved to {operands[1]} (git mv)")
            found.change(_key(operands[1], place), f"moved from {operands[0]} (git mv)")


def _strip_count(words: list[str], default: int | None) -> int | None:
    for index, word in enumerate(words):
        if word.startswith("-p") and word[2:].isdigit():
            return int(word[2:])
        if word == "-p" and index + 1 < len(words) and words[index + 1].isdigit():
            return int(words[index + 1])
        if word.startswith("--strip=") and word[8:].isdigit():
            return int(word[8:])
    return default


def _apply(command: Command, patch_files: list[str], strip: int | None, verb: str | None, how: str, found: _Found,
           place: _Place) -> None:
    """A patch applied from a here-document (its files changed now) or from files (run: see `changed_files`)."""
    if command.stdin is not None:
        for change in patch_changes(command.stdin, strip):
            found.change(_key(change.path, place), f"{verb or change.how} ({how})")
    for patch_file in patch_files:
        found.run(_script_key(patch_file, place), how)


def _patch(command: Command, words: list[str], output: str, found: _Found, place: _Place, depth: int) -> None:
    """`patch -p1 < FILE`, `patch -p1 <<EOF`, `patch -i FILE`: the files it reports patching, else the patch's."""
    if any(word in ("--dry-run", "-C", "--check") for word in words):
        return
    reverse = any(word in ("-R", "--reverse") for word in words)
    how = f"patch{' -R' if reverse else ''}{next((' ' + w for w in words if w.startswith('-p')), '')}"
    verb = "reverted" if reverse else "patched"
    inputs = [target for operator, target in command.redirects if operator == "<"]
    inputs += [words[index + 1] for index, word in enumerate(words[:-1]) if word == "-i"]
    operands = _operands(words, "ipdDoFrBVYz")
    if len(operands) == 2:  # `patch FILE PATCHFILE`
        found.change(_key(operands[0], place), f"{verb} ({how})")
        inputs.append(operands[1])
    _apply(command, inputs, _strip_count(words, None), "reverted" if reverse else None, how, found, place)
    reported = list(itertools.islice(_PATCHING.finditer(output), MAX_CHANGES))
    for match, following in zip(reported, [*reported[1:], None]):  # what patch did, file by file
        if not found.failed:
            found.change(_key(match.group(1), place), f"{verb} ({how})")
        elif "succeeded" in output[match.end():following.start() if following else match.end() + _HUNKS_CHARS]:
            found.change(_key(match.group(1), place), f"{verb} in part ({how}; some hunks FAILED)",
                         despite_failure=True)


def _apply_patch(command: Command, words: list[str], output: str, found: _Found, place: _Place, depth: int) -> None:
    """Codex's `apply_patch <<'EOF' *** Begin Patch …` (or the patch as its argument)."""
    patch = command.stdin if command.stdin is not None else (words[1] if len(words) > 1 else "")
    for change in patch_changes(patch):
        found.change(_key(change.path, place), f"{change.how} (apply_patch)")


def _python(command: Command, words: list[str], found: _Found, place: _Place) -> None:
    """`python -c CODE` and `python - <<EOF` write the literal paths their code opens for writing; `python
    SCRIPT.py` runs a script (its writes are known when it was written: see `changed_files`)."""
    program = posixpath.basename(words[0])
    if found.crashed:
        return
    index = 1
    while index < len(words):
        word = words[index]
        if word == "-c" and index + 1 < len(words):
            for path in python_writes(words[index + 1]):
                found.change(_key(path, place), f"written ({program} -c)")
            return
        if word == "-" and command.stdin is not None:
            for path in python_writes(command.stdin):
                found.change(_key(path, place), f"written ({program} - heredoc)")
            return
        if word in ("-m",):
            return
        if word.startswith("-"):
            index += 2 if word in ("-W", "-X") else 1
            continue
        found.run(_script_key(word, place), f"{program} {word}")
        return


def _shell(command: Command, words: list[str], output: str, found: _Found, place: _Place, depth: int) -> None:
    """`bash -c "…"` is read as shell (to MAX_SHELL_DEPTH); `bash fix.sh`, `source fix.sh` run a script."""
    for index, word in enumerate(words[1:], 1):
        if word.startswith("-") and "c" in word and not word.startswith("--") and index + 1 < len(words):
            if depth < MAX_SHELL_DEPTH:
                _read_shell(words[index + 1], output, found, place, depth + 1)
            return
        if not word.startswith("-"):
            found.run(_script_key(word, place), " ".join(words[:index + 1]))
            return
    if command.stdin is not None and depth < MAX_SHELL_DEPTH:  # `bash <<EOF`
        _read_shell(command.stdin, output, found, place, depth + 1)


_PROGRAMS = {
    "sed": _sed, "gsed": _sed, "perl": _perl, "tee": _tee, "cp": _copy_or_move, "mv": _copy_or_move,
    "rm": _remove, "cd": _cd, "pushd": _cd, "git": _git, "patch": _patch, "apply_patch": _apply_patch,
    "applypatch": _apply_patch,
}


# ---- the fold -------------------------------------------------------------------------------------------------


def changed_files(changes: list[Fact], scripts: dict[str, Fact], runs: list[Fact]) -> list[Fact]:
    """CHANGED facts, with those of each script or patch file run after it was written (a SCRIPT fact's writes,
    at the run's turn and ref); one per file, the latest change winning, oldest first. A path named absolute in
    one call and relative in another (`/testbed/x.py`, `x.py` after `cd /testbed`) is one file, shown relative."""
    latest: dict[str, Fact] = {fact.key: fact for fact in changes}
    by_name: dict[str, list[Fact]] = {}
    for script in scripts.values():
        by_name.setdefault(posixpath.basename(script.key), []).append(script)
    for run in runs:
        script = _same_file(run.key, by_name.get(posixpath.basename(run.key), []))
        if script is None or script.turn > run.turn:
            continue  # not known what it writes, or rewritten since it ran
        rewritten = latest.get(script.key)
        if rewritten is not None and script.turn < rewritten.turn <= run.turn:
            continue  # written again (not from a here-document) before it ran: what it writes is not known
        for line in script.value.split("\n"):
            path, _, how = line.partition("\t")
            earlier = latest.get(path)
            if path and (earlier is None or earlier.turn < run.turn):
                latest[path] = Fact(CHANGED, path, f"{how} ({run.value})", run.turn, run.evidence_ref, run.source)
    return sorted(_one_per_file(latest).values(), key=lambda fact: fact.turn)


def _same_file(path: str, candidates: list[Fact]) -> Fact | None:
    """The candidate naming the same file as `path` (the same, or one the other's tail: `/testbed/x.py`, `x.py`)."""
    same = [fact for fact in candidates if fact.key == path or fact.key.endswith("/" + path)
            or path.endswith("/" + fact.key)]
    return max(same, key=lambda fact: fact.turn) if same else None


def _one_per_file(latest: dict[str, Fact]) -> dict[str, Fact]:
    """Absolute paths folded into the relative path they end with, when one was named; the latest change wins."""
    relative = {key for key in latest if not key.startswith("/")}
    merged: dict[str, Fact] = {}
    for key, fact in latest.items():
        if key.startswith("/"):
            tails = (key[index + 1:] for index, char in enumerate(key) if char == "/")
            key = next((tail for tail in tails if tail in relative), key)
        earlier = merged.get(key)
        if earlier is None or earlier.turn <= fact.turn:
            merged[key] = Fact(CHANGED, key, fact.value, fact.turn, fact.evidence_ref, fact.source)
    return merged


__all__ = ["Change", "changed_files", "file_changes", "patch_changes", "python_writes", "shell_script"]
