"""A shell command line read as simple commands: words (quotes removed), redirections and here-documents.

Not a shell: just enough of its grammar to tell what a command writes (`sed -i … FILE`, `cat > FILE <<EOF`,
`… | tee FILE`). One pass over the text, character runs taken whole: linear in the command, whatever it holds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MAX_COMMANDS = 256  # simple commands read from one command line; the rest are left unread
MAX_WORDS = 1_024  # words kept of one simple command (a file list longer than that is not read to its end)

# A run of characters that means nothing to the shell: taken in one step.
_PLAIN = re.compile(r"[^\s'\"\\$`|&;()<>#]+")
_BLANKS = re.compile(r"[ \t\r]+")
_REDIRECT = re.compile(r"(\d?)(>>|>\||>&|>|<<<|<<-|<<|<&|<>|<)|&>>|&>")
_FD = re.compile(r"\d+|-")
_DOUBLE_QUOTED = re.compile(r'(?:[^"\\]|\\.)*', re.S)  # the inside of a double-quoted string
_ESCAPED_IN_DOUBLE_QUOTES = re.compile(r'\\(["\\$`\n])')  # the only escapes double quotes know
_PAREN = re.compile(r"[()]")
SEPARATORS = ("&&", "||", ";;", "|&", "|", ";", "&", "(", ")")


@dataclass
class Command:
    """One simple command: its words, where its output goes, and the here-document it reads."""

    words: list[str] = field(default_factory=list)
    redirects: list[tuple[str, str]] = field(default_factory=list)  # (operator, target): (">", "out.txt")
    stdin: str | None = None  # the body of a here-document (or a here-string) it reads
    before: str = ""  # the separator before it: "&&", "|", ";", "\n" ... ("" for the first)


@dataclass
class _Reader:
    """The state of one pass: the commands so far and the word being read."""

    text: str
    commands: list[Command] = field(default_factory=list)
    current: Command = field(default_factory=Command)
    word: list[str] = field(default_factory=list)
    in_word: bool = False
    target: str | None = None  # a redirection whose target is the next word
    heredocs: list[tuple[str, bool, Command]] = field(default_factory=list)  # (delimiter, strip tabs, reader)

    def end_word(self) -> None:
        if not self.in_word:
            return
        word = "".join(self.word)
        self.word, self.in_word = [], False
        if self.target is None:
            if len(self.current.words) < MAX_WORDS:
                self.current.words.append(word)
        elif self.target in ("<<", "<<-"):
            self.heredocs.append((word, self.target == "<<-", self.current))
        elif self.target == "<<<":
            self.current.stdin = word
        else:
            self.current.redirects.append((self.target, word))
        self.target = None

    def end_command(self, separator: str) -> None:
        self.end_word()
        if self.current.words or self.current.redirects or self.current.stdin is not None:
            self.commands.append(self.current)
            self.current = Command(before=separator)
        else:
            self.current.before = self.current.before or separator


def simple_commands(text: str, limit: int = MAX_COMMANDS) -> list[Command]:
    """The simple commands of a shell command line, in order, with their here-document bodies (read after the
    line that opens them, up to the delimiter line; to the end when it is missing)."""
    reader = _Reader(text)
    position, end = 0, len(text)
    while position < end and len(reader.commands) < limit:
        char = text[position]
        if char in " \t\r":
            reader.end_word()
            position = _BLANKS.match(text, position).end()
        elif char == "\n":
            reader.end_command("\n")
            position = _heredoc_bodies(reader, position + 1)
        elif char == "#" and not reader.in_word:
            newline = text.find("\n", position)
            position = end if newline < 0 else newline
        elif char == "'":
            close = text.find("'", position + 1)
            close = end if close < 0 else close
            reader.word.append(text[position + 1:close])
            reader.in_word = True
            position = close + 1
        elif char == '"':
            position = _double_quoted(reader, position + 1)
        elif char == "\\":
            if text.startswith("\n", position + 1):  # a line continuation
                position += 2
                continue
            reader.word.append(text[position + 1:position + 2])
            reader.in_word = True
            position += 2
        elif char == "$" and text.startswith("$(", position):
            close = _matching_paren(text, position + 2)
            reader.word.append(text[position:close + 1])
            reader.in_word = True
            position = close + 1
        elif char == "`":
            close = text.find("`", position + 1)
            close = end if close < 0 else close
            reader.word.append(text[position:close + 1])
            reader.in_word = True
            position = close + 1
        elif char in "<>" or (char == "&" and text.startswith("&>", position)):
            position = _redirection(reader, position)
        elif char in "|&;()":
            separator = next(s for s in SEPARATORS if text.startswith(s, position))
            reader.end_command(separator)
            position += len(separator)
        else:
            plain = _PLAIN.match(text, position)
            stop = plain.end() if plain else position + 1
            reader.word.append(text[position:stop])
            reader.in_word = True
            position = stop
    reader.end_command("")
    return reader.commands[:limit]


def _double_quoted(reader: _Reader, position: int) -> int:
    """Reads a double-quoted string from `position` (after its quote); returns the position after it."""
    inside = _DOUBLE_QUOTED.match(reader.text, position)  # always matches, maybe empty
    reader.word.append(_ESCAPED_IN_DOUBLE_QUOTES.sub(_unescaped, inside.group()))
    reader.in_word = True
    return min(inside.end() + 1, len(reader.text))  # past the closing quote (a missing one: the end)


def _unescaped(match: re.Match[str]) -> str:
    return "" if match.group(1) == "\n" else match.group(1)  # a backslash-newline continues the line


def _matching_paren(text: str, position: int) -> int:
    """The position of the `)` closing a `$(` whose inside starts at `position` (nested ones counted), or the end."""
    depth = 1
    while depth:
        found = _PAREN.search(text, position)
        if found is None:
            return len(text) - 1
        depth += 1 if found.group() == "(" else -1
        position = found.end()
    return position - 1


def _redirection(reader: _Reader, position: int) -> int:
    """Reads a redirection operator (a file descriptor before it, as in `2>`, is part of it)."""
    text = reader.text
    match = _REDIRECT.match(text, position)
    if match is None:  # cannot happen for "<", ">" or "&>", but stay safe
        reader.word.append(text[position])
        reader.in_word = True
        return position + 1
    operator = match.group(2) or match.group(0)
    fd = "".join(reader.word) if reader.in_word and "".join(reader.word).isdigit() else ""
    if fd:
        reader.word, reader.in_word = [], False
    else:
        reader.end_word()
    position = match.end()
    if operator in (">&", "<&"):
        blanks = _BLANKS.match(text, position)
        start = blanks.end() if blanks else position
        duplicated = _FD.match(text, start)
        if duplicated:  # `2>&1`: no file
            return duplicated.end()
        operator = "&>"  # `>& file`: both streams to the file
    reader.target = (fd + operator) if operator.startswith(">") else operator
    return position


def _heredoc_bodies(reader: _Reader, position: int) -> int:
    """Reads the bodies of the here-documents opened on the line that just ended; returns where reading goes on."""
    text = reader.text
    for delimiter, strip_tabs, command in reader.heredocs:
        lines: list[str] = []
        while position < len(text):
            newline = text.find("\n", position)
            stop = len(text) if newline < 0 else newline
            line = text[position:stop]
            position = stop + 1
            if (line.lstrip("\t") if strip_tabs else line).strip() == delimiter:
                break
            lines.append(line)
        command.stdin = "\n".join(lines) + ("\n" if lines else "")
    reader.heredocs = []
    return min(position, len(text))


__all__ = ["Command", "simple_commands"]
