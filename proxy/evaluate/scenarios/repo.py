"""Text shapes of a coding agent's tool outputs, at the sizes real runs show them (issue 30): `ls -la` of 40-60
rows, grep hits by the dozen, whole source files, pytest runs with progress lines and tracebacks, pip's noise, git
logs. Pure functions of their arguments and of the caller's seeded random.Random; none of them writes a probed item.
"""

from __future__ import annotations

import random
from typing import Callable, Sequence

MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
WORDS = ("load", "parse", "merge", "split", "format", "render", "check", "resolve", "build", "apply", "scan", "emit",
         "fetch", "store", "group", "sort", "clean", "update", "collect", "match", "expand", "encode", "decode",
         "window", "batch", "record", "field", "entry", "table", "cursor", "bucket", "segment", "header", "value")


def ls_la(rng: random.Random, entries: Sequence[tuple[str, bool]], owner: str = "dev", year_old: bool = False) -> str:
    """`ls -la` of a folder: total, `.`, `..`, then one row per (name, is_dir), sorted as ls sorts them."""
    rows = [f"total {rng.randint(120, 900)}"]

    def row(name: str, is_dir: bool) -> str:
        mode = "drwxr-xr-x" if is_dir else rng.choice(["-rw-r--r--", "-rw-r--r--", "-rwxr-xr-x"])
        size = 4096 if is_dir else rng.randint(80, 48_000)
        when = (f"{MONTHS[rng.randrange(12)]} {rng.randint(1, 28):2d}  2025" if year_old and rng.random() < 0.4
                else f"{MONTHS[rng.randint(2, 4)]} {rng.randint(1, 28):2d} {rng.randint(8, 19):02d}:{rng.randint(0, 59):02d}")
        return f"{mode} {rng.randint(1, 9):2d} {owner} {owner} {size:6d} {when} {name}"

    rows.append(row(".", True))
    rows.append(row("..", True))
    for name, is_dir in sorted(entries, key=lambda item: item[0].lstrip(".").lower()):
        rows.append(row(name, is_dir))
    return "\n".join(rows) + "\n"


def file_names(rng: random.Random, count: int, suffixes: Sequence[str] = (".py",), prefix: str = "") -> list[str]:
    """Distinct plausible file names: two words joined, a suffix."""
    names: set[str] = set()
    while len(names) < count:
        names.add(f"{prefix}{rng.choice(WORDS)}_{rng.choice(WORDS)}{rng.choice(suffixes)}")
    return sorted(names)


def numbered(text: str, start: int = 1) -> str:
    """A file's lines as `cat -n` (or a read_file tool) shows them."""
    return "".join(f"{n:6d}\t{line}\n" for n, line in enumerate(text.splitlines(), start))


def python_module(rng: random.Random, doc: str, imports: Sequence[str], names: Sequence[str], body_lines: int,
                  head: str = "", tail: str = "") -> str:
    """A plausible Python module of about `body_lines` generated lines around `head` and `tail` (the parts a
    scenario needs verbatim): helper functions with docstrings, branches and loops, named from `names`."""
    out = [f'"""{doc}"""', "from __future__ import annotations", "", *imports, ""]
    if head:
        out += head.rstrip("\n").split("\n") + [""]
    produced = 0
    number = 0
    while produced < body_lines:
        name = f"_{rng.choice(WORDS)}_{names[number % len(names)]}" if names else f"_{rng.choice(WORDS)}_{number}"
        number += 1
        arg = rng.choice(["items", "rows", "entry", "record", "values", "batch"])
        block = [
            "",
            f"def {name}({arg}, *, strict: bool = False):",
            f'    """{rng.choice(WORDS).capitalize()} the {rng.choice(WORDS)}s of {arg}; raise on bad input when '
            f'strict."""',
            f"    out = []",
            f"    for position, item in enumerate({arg}):",
            f"        if item is None:",
            f"            if strict:",
            f"                raise ValueError(f\"{name}: empty item at {{position}}\")",
            f"            continue",
            f"        key = getattr(item, \"{rng.choice(WORDS)}\", item)",
            f"        out.append((position, key))",
        ]
        if rng.random() < 0.5:
            block += [f"    out.sort(key=lambda pair: str(pair[1]))"]
        if rng.random() < 0.4:
            block += [f"    if len(out) > {rng.choice([8, 16, 64, 256, 1024])}:",
                      f"        out = out[:{rng.choice([8, 16, 64, 256, 1024])}]"]
        block += ["    return out", ""]
        out += block
        produced += len(block)
    if tail:
        out += tail.rstrip("\n").split("\n")
    return "\n".join(out) + "\n"


def grep_hits(rng: random.Random, files: Sequence[str], snippets: Sequence[str], count: int,
              fixed: Sequence[str] = ()) -> str:
    """`grep -rn` output: the `fixed` hits first, then `count` more `path:line: text` rows in path order."""
    hits = [(rng.choice(files), rng.randint(3, 400), rng.choice(snippets)) for _ in range(count)]
    rows = list(fixed) + [f"{path}:{line}:{text}" for path, line, text in sorted(hits)]
    return "\n".join(rows) + "\n"


def pytest_header(rng: random.Random, collected: int, root: str, plugins: str = "cov-5.0.0, xdist-3.6.1") -> str:
    return ("============================= test session starts ==============================\n"
            f"platform linux -- Python 3.11.9, pytest-8.2.2, pluggy-1.5.0 -- {root}/.venv/bin/python\n"
            f"cachedir: .pytest_cache\nrootdir: {root}\nconfigfile: pyproject.toml\nplugins: {plugins}\n"
            f"collecting ... collected {collected} items\n\n")


def generated_tests(rng: random.Random, count: int, known: Sequence[str] = ()) -> list[str]:
    names = list(known)
    while len(names) < count:
        name = f"test_{rng.choice(WORDS)}_{rng.choice(WORDS)}"
        if rng.random() < 0.3:
            name += f"[{rng.choice(WORDS)}-{rng.randint(0, 9)}]"
        if name not in names:
            names.append(name)
    return names


def pytest_verbose(rng: random.Random, files: Sequence[tuple[str, list[str]]], failing: Sequence[str] = ()) -> str:
    """`pytest -v` progress lines: every test of every file, PASSED or FAILED, with the running percentage."""
    total = sum(len(tests) for _, tests in files)
    lines, done = [], 0
    for path, tests in files:
        for test in tests:
            done += 1
            state = "FAILED" if test in failing else ("SKIPPED" if rng.random() < 0.02 else "PASSED")
            lines.append(f"{path}::{test} {state}".ljust(78) + f" [{100 * done // total:3d}%]")
    return "\n".join(lines) + "\n"


def pytest_dots(rng: random.Random, files: Sequence[tuple[str, int]], failing: dict[str, int] | None = None) -> str:
    """`pytest -q` progress: one row of dots per file (F where a test failed), with the running percentage."""
    total = sum(n for _, n in files)
    lines, done = [], 0
    for path, n in files:
        marks = ["."] * n
        for _ in range((failing or {}).get(path, 0)):
            marks[rng.randrange(n)] = "F"
        done += n
        lines.append(f"{path} {''.join(marks)}".ljust(72) + f" [{100 * done // total:3d}%]")
    return "\n".join(lines) + "\n"


def failure_block(test: str, source: Sequence[str], error: str, where: str) -> str:
    """One FAILURES entry: the test's source with the failing line, the `E` lines, the location."""
    bar = "_" * max(4, (76 - len(test)) // 2)
    return f"{bar} {test} {bar}\n\n" + "\n".join(source) + "\n" + error.rstrip("\n") + f"\n\n{where}\n"


def pip_install(rng: random.Random, packages: Sequence[tuple[str, str]], editable: str = "") -> str:
    """pip's output while installing: collecting, downloading, the satisfied requirements, the final line."""
    lines = []
    if editable:
        lines += [f"Obtaining file://{editable}", "  Installing build dependencies ... done",
                  "  Checking if build backend supports build_editable ... done",
                  "  Getting requirements to build editable ... done",
                  "  Preparing editable metadata (pyproject.toml) ... done"]
    for name, version in packages:
        if rng.random() < 0.35:
            lines.append(f"Requirement already satisfied: {name}>={version.split('.')[0]} in "
                         f"./.venv/lib/python3.11/site-packages ({version})")
            continue
        size = rng.uniform(20, 900)
        lines += [f"Collecting {name}>={version.rsplit('.', 1)[0]}",
                  f"  Downloading {name.replace('-', '_')}-{version}-py3-none-any.whl ({size:.1f} kB)",
                  f"     ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━ {size:.1f}/{size:.1f} kB "
                  f"{rng.uniform(1, 40):.1f} MB/s eta 0:00:00"]
    lines.append("Installing collected packages: " + ", ".join(name for name, _ in packages))
    lines.append("Successfully installed " + " ".join(f"{name}-{version}" for name, version in packages))
    lines.append("\n[notice] A new release of pip is available: 24.0 -> 24.2\n[notice] To update, run: pip install "
                 "--upgrade pip")
    return "\n".join(lines) + "\n"


def sha(rng: random.Random, length: int = 7) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(length))


def git_log_oneline(rng: random.Random, count: int, fixed: Sequence[tuple[str, str]] = (),
                    subjects: Sequence[str] = ()) -> str:
    """`git log --oneline`: `fixed` (sha, subject) entries spread among generated ones, newest first."""
    generated = [(sha(rng), rng.choice(subjects) if subjects else f"{rng.choice(WORDS)}: {rng.choice(WORDS)} "
                  f"{rng.choice(WORDS)}s") for _ in range(max(0, count - len(fixed)))]
    entries = list(generated)
    for position, entry in enumerate(fixed):
        entries.insert(min(len(entries), (position + 1) * max(1, len(entries) // (len(fixed) + 1))), entry)
    return "\n".join(f"{commit} {subject}" for commit, subject in entries) + "\n"


def bisect_run(rng: random.Random, bad_commit: str, lefts: Sequence[int], subjects: Sequence[str], test: str,
               selector: str, tests: int, commit: str, summary: Callable[[int], str] | None = None) -> str:
    """`git bisect run pytest …`: a step per revision tested (each `left` revisions left, a random subject of
    `subjects`; the run fails once fewer than 3 are left), then `bad_commit is the first bad commit` with `commit`
    (its author, date, subject and stat, as `git show --stat` prints them); `summary(left)` closes each step."""
    steps = []
    for left, sha_ in zip(lefts, [sha(rng, 40) for _ in lefts[:-1]] + [bad_commit]):
        steps.append(f"Bisecting: {left} revisions left to test after this (roughly {left.bit_length()} steps)\n"
                     f"[{sha_}] {rng.choice(list(subjects))}")
        steps.append(f"running  'python' '-m' 'pytest' '-q' '{test}' '-k' '{selector}'\n"
                     + pytest_dots(rng, [(test, tests)], {test: 1 if left < 3 else 0})
                     + (summary(left) if summary else ""))
    return ("status: waiting for both good and bad commits\nstatus: waiting for good commit(s), bad commit known\n"
            + "\n".join(steps) + f"\n{bad_commit} is the first bad commit\ncommit {bad_commit}\n{commit}"
            "bisect found first bad commit\n")
