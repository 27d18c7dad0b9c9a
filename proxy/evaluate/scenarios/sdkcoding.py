"""Scenario 7 (issue 30): an openai-SDK coding agent (tools bash, read_file, write_file, gh) fixing a tax rounding
regression in a Python billing library, over 60+ tool turns of the size real runs have: `ls -la` of 40-60 rows
again and again, whole source files, 40-row greps, pytest runs, pip's noise, git logs.

What the task turns on is stated once, early, and only in tool outputs: a maintainer's rule in the issue thread
(render_invoice's public signature stays; only keyword arguments may be added), a clause of CONTRIBUTING.md (money
stays Decimal), the error code of the failing test, git bisect's first bad commit, two candidates' p95 latencies,
a milestone whose release date is not yet scheduled, and a release approval with its approver, scope and expiry.
The user gives an approval of their own (ticket, approver, scope). The probes ask for each late, after compactions.
"""

from __future__ import annotations

import json
import random

from .builder import Call, RunBuilder, Scenario, tool
from .repo import bisect_run as repo_bisect_run
from .repo import (
    failure_block,
    file_names,
    generated_tests,
    git_log_oneline,
    grep_hits,
    ls_la,
    numbered,
    pip_install,
    pytest_dots,
    pytest_header,
    pytest_verbose,
    python_module,
    sha,
)

SEED = 3071
TRACE_ID = "scenario-sdk-coding-invoicekit"
ROOT = "/home/dev/src/invoicekit"
BAD_COMMIT = "9f1c2ab7d3e04b51a8c6e2f9d0b1a3c5e7f90d12"

TOOLS = [
    tool("bash", "Run a shell command in the repository; returns exit code, stdout and stderr.", {"command": "command"}),
    tool("read_file", "Read a text file of the repository; returns its lines, numbered.", {"path": "path"}),
    tool("write_file", "Write a whole file of the repository (created or replaced).",
         {"path": "path", "content": "the file's full new content"}),
    tool("gh", "Run the GitHub CLI (gh) against the repository's GitHub project; returns its output.",
         {"args": "arguments after `gh`"}),
]

SYSTEM = """You are Forge, a coding agent built on the OpenAI Agents SDK, working in the user's checkout of a Python
project. Tools: bash (a shell in the repository), read_file, write_file (whole files), gh (the GitHub CLI, already
authenticated for the project). Work in small, verified steps: read before you edit, run the tests after each
change, and say what you found and what you decided. Do not push or publish anything unless the user asks."""

TASK = """Issue #812 on acme/invoicekit: since 3.4.0, invoices for region NL fail when the tax is rounded, and DE
totals are off by a cent on some lines. Please fix it on the release/3.4 branch (checked out at
~/src/invoicekit), add regression tests, and get a PR ready for the 3.4.1 patch release with a changelog entry."""


def bash(command: str, output: str, code: int = 0, labels: tuple[str, ...] = ()) -> Call:
    return Call("bash", {"command": command}, f"exit code: {code}\n{output}", labels)


def read(path: str, text: str, labels: tuple[str, ...] = ()) -> Call:
    return Call("read_file", {"path": path}, numbered(text), labels)


def write(path: str, content: str) -> Call:
    return Call("write_file", {"path": path, "content": content},
                f"Wrote {len(content.encode()):,} bytes ({len(content.splitlines())} lines) to {path}")


def gh(args: str, output: str, labels: tuple[str, ...] = ()) -> Call:
    return Call("gh", {"args": args}, output, labels)


# --- the repository ------------------------------------------------------------------------------------------------

def root_listing(rng: random.Random) -> str:
    entries = [(".git", True), (".github", True), (".gitignore", False), (".pre-commit-config.yaml", False),
               (".readthedocs.yaml", False), (".coveragerc", False), (".editorconfig", False), (".mypy_cache", True),
               (".pytest_cache", True), (".ruff_cache", True), (".venv", True), ("AUTHORS.md", False),
               ("CHANGELOG.md", False), ("CODE_OF_CONDUCT.md", False), ("CONTRIBUTING.md", False),
               ("LICENSE", False), ("MANIFEST.in", False), ("Makefile", False), ("README.md", False),
               ("SECURITY.md", False), ("benchmarks", True), ("build", True), ("dist", True), ("docs", True),
               ("examples", True), ("htmlcov", True), ("noxfile.py", False), ("pyproject.toml", False),
               ("requirements-dev.txt", False), ("scripts", True), ("src", True), ("tests", True), ("tox.ini", False)]
    entries += [(f"sample_invoice_{region}_{n}.pdf", False) for region in ("de", "nl", "fr", "at") for n in (1, 2)]
    entries += [(name, False) for name in ("notes_rounding.md", "notes_release_3.4.md", "profile.out",
                                           "coverage.xml", ".env.example", "invoicekit.code-workspace")]
    return ls_la(rng, entries, year_old=True)


def status_and_branches(rng: random.Random) -> str:
    return ("On branch release/3.4\nYour branch is up to date with 'origin/release/3.4'.\n\n"
            "Untracked files:\n  (use \"git add <file>...\" to include in what will be committed)\n"
            "\tnotes_rounding.md\n\tprofile.out\n\nnothing added to commit but untracked files present\n"
            "  main\n* release/3.4\n  remotes/origin/HEAD -> origin/main\n  remotes/origin/main\n"
            "  remotes/origin/release/3.3\n  remotes/origin/release/3.4\n  remotes/origin/dependabot/pip/pypdf-4.2.0\n"
            "  remotes/origin/feat/xrechnung-export\n" + root_listing(rng))


def issue_view(rng: random.Random) -> str:
    return """title:	Rounding regression in 3.4.0: NL invoices raise, DE totals off by one cent
state:	OPEN
author:	jvdberg-finance
labels:	bug, regression, tax
comments:	7
assignees:	
projects:	
milestone:	3.4.1
number:	812
--
Since upgrading to 3.4.0 our Dutch invoices fail to render as soon as a line has a tax amount that needs
rounding (e.g. 21% of 13.37). German invoices render, but the total is one cent above the sum of the lines on
roughly 1 in 40 invoices (we reconcile against our ledger and it shows up every month).

    invoicekit==3.4.0, Python 3.11, Linux
    works on 3.3.2

Traceback excerpt from our worker (full log attached):

    File "invoicekit/render.py", line 141, in render_invoice
    File "invoicekit/tax/rounding.py", line 58, in round_tax
    ValueError: unsupported rounding mode

-- 
author:	mkowalski
association:	contributor
edited:	false
--
Same here for NL and BE. Pinning 3.3.2 for now.
-- 
author:	jvdberg-finance
association:	none
edited:	false
--
@hanna-k anything we can do to help? Happy to test a pre-release.
-- 
author:	hanna-k
association:	member
edited:	false
--
Thanks for the report, confirmed on release/3.4. Whoever picks this up: the 3.4.1 fix goes on release/3.4 and
gets forward-ported to main after.

Patches must not change the public signature of `render_invoice()`; only add keyword arguments (with defaults)
if you need a new knob. billing-portal and ledger-sync call it positionally, and we promised them 3.x is stable.
-- 
author:	tobias-r
association:	member
edited:	false
--
I suspect the rounding refactor from the 3.4 cycle, but haven't bisected.
-- 
author:	dependabot
association:	none
edited:	false
--
(linked) Bump pypdf from 4.1.0 to 4.2.0 #819
-- 
author:	jvdberg-finance
association:	none
edited:	false
--
Attached two sample invoices that reproduce it (NL-2026-0412, DE-2026-1187).
"""


def milestone(rng: random.Random) -> str:
    return json.dumps({
        "url": "https://api.github.com/repos/acme/invoicekit/milestones/41", "number": 41, "title": "3.4.1",
        "state": "open", "open_issues": 3, "closed_issues": 1, "created_at": "2026-04-22T09:12:44Z",
        "updated_at": "2026-05-02T16:40:03Z", "due_on": None,
        "description": "Patch release for the rounding regression (#812) and the XRechnung header fix (#815).\n"
                       "release date: not yet scheduled (finance wants to test a release candidate first)",
        "creator": {"login": "hanna-k", "id": 5512093, "type": "User", "site_admin": False},
        "labels_url": "https://api.github.com/repos/acme/invoicekit/milestones/41/labels",
        "html_url": "https://github.com/acme/invoicekit/milestone/41"}, indent=2) + "\n" + "\n".join(
        f"#{number}\t{state}\t{title}" for number, state, title in (
            (812, "OPEN", "Rounding regression in 3.4.0: NL invoices raise, DE totals off by one cent"),
            (815, "OPEN", "XRechnung export: BT-10 header missing when buyer reference is empty"),
            (817, "OPEN", "docs: document rounding per line vs per invoice"),
            (806, "CLOSED", "CI: pin pypdf below 5 for the 3.4 branch"))) + "\n"


def readme(rng: random.Random) -> str:
    return """# invoicekit

[![CI](https://github.com/acme/invoicekit/actions/workflows/ci.yml/badge.svg)](https://github.com/acme/invoicekit/actions)
[![PyPI](https://img.shields.io/pypi/v/invoicekit.svg)](https://pypi.org/project/invoicekit/)
[![Docs](https://readthedocs.org/projects/invoicekit/badge/?version=stable)](https://invoicekit.readthedocs.io/)

Render legally valid invoices (PDF, HTML, XRechnung, UBL) from plain Python data, with VAT per region.

## Installation

```sh
pip install invoicekit            # PDF and HTML
pip install "invoicekit[xml]"     # XRechnung / UBL export
```

## Quick start

```python
from decimal import Decimal
from invoicekit import Invoice, Line, render_invoice

invoice = Invoice(number="DE-2026-0001", region="DE", currency="EUR", lines=[
    Line("Consulting, April", quantity=Decimal("12"), unit_price=Decimal("95.00"), tax_rate=Decimal("19")),
])
pdf = render_invoice(invoice, "default", "de_DE")
```

## Regions

| region | VAT rates | rounding | notes |
|---|---|---|---|
| DE | 19, 7, 0 | per line, half up | reverse charge supported |
| AT | 20, 13, 10, 0 | per line, half up | |
| NL | 21, 9, 0 | per invoice, half even | BTW-id required above 100 EUR |
| BE | 21, 12, 6, 0 | per invoice, half even | |
| FR | 20, 10, 5.5, 2.1 | per line, half up | mentions légales in footer |

Rounding rules come from `invoicekit.tax.regions`; see docs/rounding.md for the legal background.

## Templates

Templates live in `src/invoicekit/templates/` (Jinja2). `render_invoice(invoice, template, locale)` picks
`<template>.html.j2` and renders it to PDF with WeasyPrint, or returns the HTML with `output="html"`.

## Command line

```sh
invoicekit render invoice.json --template default --locale nl_NL -o invoice.pdf
invoicekit check invoice.json          # validate totals and tax per region
invoicekit regions                     # list regions and their rules
```

## Development

```sh
make dev        # venv + editable install with the dev extras
make test       # pytest with coverage
make lint       # ruff + mypy
make bench      # benchmarks/bench_render.py
```

See CONTRIBUTING.md before opening a pull request.

## License

MIT, see LICENSE.
"""


def contributing(rng: random.Random) -> str:
    return """# Contributing to invoicekit

Thanks for helping! invoicekit is used to issue real invoices, so we are conservative about changes.

## Ground rules

1. Open an issue first for anything bigger than a typo.
2. One topic per pull request; keep diffs small and reviewable.
3. Every bug fix comes with a regression test that fails before the fix.
4. Public API changes need a deprecation period of one minor release.

## Money and tax

- Money amounts must be `Decimal` end to end: never convert amounts to float, not even in tests or fixtures.
- Quantize with the region's rounding rule from `invoicekit.tax.regions`, never with a hard-coded mode.
- Tax rates are percentages as `Decimal` (`Decimal("19")`), not fractions.
- Amounts in fixtures are strings (`"13.37"`), parsed with `Decimal`.

## Style

- Formatting and lint: `ruff format` and `ruff check` (see `pyproject.toml`).
- Type hints on every public function; `mypy --strict src/` must pass.
- Docstrings in the Google style; user-facing changes get a line in CHANGELOG.md under "Unreleased".

## Tests

```sh
make test                  # all tests, with coverage
pytest tests/test_tax.py   # one file
tox -e py38,py311          # the supported interpreters
```

Golden PDFs live in `tests/golden/`; regenerate them with `make golden` only when the change is intended,
and say so in the PR description.

## Branches and releases

- `main` is the next minor release; `release/X.Y` branches take fixes for patch releases.
- Fixes for a patch release go to its `release/X.Y` branch first and are forward-ported.
- Releases are cut by a maintainer after the release approval is recorded.

## Commit messages

Use the imperative mood, reference the issue (`Fix NL rounding (#812)`), and explain why in the body.

## Code of conduct

Be kind. See CODE_OF_CONDUCT.md.

## Getting help

Ask in the issue, or in #invoicekit on the acme community chat.
"""


def pyproject_and_makefile(rng: random.Random) -> str:
    return """[build-system]
requires = ["hatchling>=1.21"]
build-backend = "hatchling.build"

[project]
name = "invoicekit"
version = "3.4.0"
description = "Legally valid invoices from plain Python data"
readme = "README.md"
requires-python = ">=3.8"
license = "MIT"
authors = [{ name = "acme open source", email = "oss@acme.example" }]
dependencies = [
    "jinja2>=3.1",
    "weasyprint>=60",
    "babel>=2.12",
    "pypdf>=4,<5",
]

[project.optional-dependencies]
xml = ["lxml>=5"]
dev = ["pytest>=8", "pytest-cov>=5", "pytest-xdist>=3.5", "hypothesis>=6.100", "ruff>=0.4", "mypy>=1.10",
       "nox>=2024.3"]

[project.scripts]
invoicekit = "invoicekit.cli:main"

[tool.hatch.build.targets.wheel]
packages = ["src/invoicekit"]

[tool.pytest.ini_options]
testpaths = ["tests"]
addopts = "-ra --strict-markers"
markers = ["golden: compares against golden PDFs", "slow: takes more than a second"]

[tool.ruff]
line-length = 110
target-version = "py38"

[tool.ruff.lint]
select = ["E", "F", "I", "B", "UP", "RUF"]
ignore = ["E501"]

[tool.mypy]
strict = true
files = ["src/invoicekit"]

[tool.coverage.run]
branch = true
source = ["invoicekit"]
# ---- Makefile ----
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: dev test lint bench golden docs clean

dev:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -e '.[dev,xml]'

test:
	$(BIN)/pytest -n auto --cov --cov-report=term-missing

lint:
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests
	$(BIN)/mypy

bench:
	$(BIN)/python benchmarks/bench_render.py --n 2000

golden:
	$(BIN)/python scripts/regen_golden.py

docs:
	$(BIN)/sphinx-build -W docs docs/_build/html

clean:
	rm -rf build dist htmlcov .pytest_cache .mypy_cache .ruff_cache
"""


DEV_PACKAGES = [("MarkupSafe", "2.1.5"), ("jinja2", "3.1.4"), ("tinycss2", "1.3.0"), ("cssselect2", "0.7.0"),
                ("pydyf", "0.10.0"), ("fonttools", "4.53.0"), ("Pillow", "10.3.0"), ("weasyprint", "62.3"),
                ("babel", "2.15.0"), ("pypdf", "4.2.0"), ("lxml", "5.2.2"), ("iniconfig", "2.0.0"),
                ("pluggy", "1.5.0"), ("pytest", "8.2.2"), ("coverage", "7.5.3"), ("pytest-cov", "5.0.0"),
                ("execnet", "2.1.1"), ("pytest-xdist", "3.6.1"), ("sortedcontainers", "2.4.0"),
                ("hypothesis", "6.103.1"), ("ruff", "0.4.9"), ("mypy-extensions", "1.0.0"), ("mypy", "1.10.0"),
                ("nox", "2024.4.15"), ("invoicekit", "3.4.0")]


def package_listing(rng: random.Random) -> str:
    source = [("__init__.py", False), ("__main__.py", False), ("cli.py", False), ("money.py", False),
              ("render.py", False), ("invoice.py", False), ("locale", True), ("templates", True), ("tax", True),
              ("export", True), ("py.typed", False), ("_version.py", False), ("fonts", True), ("pdf.py", False),
              ("html.py", False), ("numbering.py", False), ("validation.py", False), ("__pycache__", True)]
    tax = [(name, False) for name in ("__init__.py", "rounding.py", "regions.py", "rates.py", "reverse_charge.py",
                                      "exemptions.py", "vat_id.py", "py.typed")] + [("__pycache__", True)]
    tests = [(name, False) for name in ("__init__.py", "conftest.py", "test_tax.py", "test_render.py",
                                        "test_money.py", "test_cli.py", "test_regions.py", "test_export_xml.py",
                                        "test_numbering.py", "test_validation.py", "test_pdf.py",
                                        "test_locale.py")]
    tests += [(name, False) for name in file_names(rng, 10, (".py",), "test_")] + [("golden", True),
                                                                                    ("fixtures", True)]
    return (f"src/invoicekit:\n{ls_la(rng, source)}\nsrc/invoicekit/tax:\n{ls_la(rng, tax)}\n"
            f"tests:\n{ls_la(rng, tests)}")


TAX_TESTS = ["test_nl_rounds_per_invoice_half_even", "test_de_total_equals_sum_of_lines",
             "test_at_reduced_rate_rounding", "test_fr_super_reduced_rate", "test_reverse_charge_has_no_tax",
             "test_be_half_even_tie", "test_zero_rate_lines", "test_rates_are_percentages"]


def first_test_run(rng: random.Random) -> str:
    files = [("tests/test_tax.py", generated_tests(rng, 34, TAX_TESTS)),
             ("tests/test_render.py", generated_tests(rng, 22, ["test_render_default_template"])),
             ("tests/test_money.py", generated_tests(rng, 18)), ("tests/test_regions.py", generated_tests(rng, 12))]
    failing = ["test_nl_rounds_per_invoice_half_even", "test_de_total_equals_sum_of_lines",
               "test_be_half_even_tie"]
    nl = failure_block("test_nl_rounds_per_invoice_half_even", [
        "    def test_nl_rounds_per_invoice_half_even():",
        '        invoice = make_invoice("NL", [("13.37", "21"), ("2.50", "9"), ("99.99", "21")])',
        ">       totals = compute_totals(invoice)", "", "tests/test_tax.py:41: ",
        "_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ ",
        "src/invoicekit/tax/__init__.py:88: in compute_totals", "    tax = round_tax(raw, rule)",
        "_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ ", "",
        "amount = Decimal('23.5935'), rule = RoundingRule(scope='invoice', mode='half_even', places=2)", "",
        "    def round_tax(amount: Decimal, rule: RoundingRule) -> Decimal:",
        "        mode = _MODES.get(rule.mode.upper())", "        if mode is None:",
        ">           raise ValueError(f\"ERR_TAX_{_code(rule)} unsupported rounding mode {rule.mode!r} for region \"",
        "                             f\"{rule.region!r}\")"],
        "E   ValueError: ERR_TAX_0042 unsupported rounding mode 'half_even' for region 'NL'",
        "src/invoicekit/tax/rounding.py:58: ValueError")
    de = failure_block("test_de_total_equals_sum_of_lines", [
        "    def test_de_total_equals_sum_of_lines():",
        '        invoice = make_invoice("DE", [("19.99", "19"), ("0.05", "19"), ("4.15", "7"), ("12.34", "19")])',
        "        totals = compute_totals(invoice)",
        ">       assert totals.gross == sum(line.gross for line in totals.lines)"],
        "E   AssertionError: assert Decimal('44.73') == Decimal('44.72')\n"
        "E    +  where Decimal('44.73') = Totals(net=Decimal('36.53'), tax=Decimal('8.20'), gross=Decimal('44.73'))"
        ".gross", "tests/test_tax.py:57: AssertionError")
    be = failure_block("test_be_half_even_tie", [
        "    def test_be_half_even_tie():", '        invoice = make_invoice("BE", [("0.125", "21")])',
        ">       totals = compute_totals(invoice)"],
        "E   ValueError: unsupported rounding mode 'half_even' for region 'BE'", "src/invoicekit/tax/rounding.py:58: "
        "ValueError")
    return (pytest_header(rng, 86, ROOT) + pytest_verbose(rng, files, failing)
            + "\n=================================== FAILURES ===================================\n"
            + nl + "\n" + de + "\n" + be +
            "=========================== short test summary info ============================\n"
            "FAILED tests/test_tax.py::test_nl_rounds_per_invoice_half_even - ValueError: unsupported rounding mode 'half...\n"
            "FAILED tests/test_tax.py::test_de_total_equals_sum_of_lines - AssertionError: assert Decimal('44.73') == D...\n"
            "FAILED tests/test_tax.py::test_be_half_even_tie - ValueError: unsupported rounding mode 'half_even' for re...\n"
            f"========================= 3 failed, 83 passed in {rng.uniform(3, 6):.2f}s =========================\n")


SRC_FILES = ["src/invoicekit/tax/rounding.py", "src/invoicekit/tax/__init__.py", "src/invoicekit/tax/regions.py",
             "src/invoicekit/render.py", "src/invoicekit/money.py", "src/invoicekit/validation.py",
             "src/invoicekit/export/xrechnung.py", "src/invoicekit/export/ubl.py", "tests/test_tax.py",
             "tests/test_money.py", "tests/test_regions.py", "tests/conftest.py"]


def grep_rounding(rng: random.Random) -> str:
    snippets = ["    return amount.quantize(_CENT, rounding=mode)", "from decimal import ROUND_HALF_UP, ROUND_HALF_EVEN",
                "        value = value.quantize(Decimal(\"0.01\"))", "    rule = regions.rule_for(invoice.region)",
                "    mode: str = \"half_up\"", "    assert round_tax(Decimal(\"0.125\"), rule) == Decimal(\"0.12\")",
                "        tax = round_tax(raw, rule)", "    places: int = 2",
                "_MODES = {\"HALF_UP\": ROUND_HALF_UP, \"DOWN\": ROUND_DOWN}",
                "    \"NL\": RoundingRule(scope=\"invoice\", mode=\"half_even\", places=2, region=\"NL\"),",
                "    \"DE\": RoundingRule(scope=\"line\", mode=\"half_up\", places=2, region=\"DE\"),",
                "        line_tax = line.net * line.rate / _HUNDRED", "    return Money(self.amount.quantize(_CENT))"]
    return grep_hits(rng, SRC_FILES, snippets, 40)


ROUNDING_HEAD = '''from dataclasses import dataclass
from decimal import ROUND_DOWN, ROUND_HALF_UP, Decimal

_CENT = Decimal("0.01")
_HUNDRED = Decimal(100)
# 3.4: modes by name, so regions.py can say "half_up" instead of importing decimal's constants
_MODES = {"HALF_UP": ROUND_HALF_UP, "DOWN": ROUND_DOWN}
_CODES = {"NL": 42, "BE": 43, "LU": 44}


@dataclass(frozen=True)
class RoundingRule:
    scope: str  # "line" or "invoice"
    mode: str
    places: int = 2
    region: str = ""


def _code(rule: RoundingRule) -> str:
    return f"{_CODES.get(rule.region, 99):04d}"


def round_tax(amount: Decimal, rule: RoundingRule) -> Decimal:
    """The tax amount rounded as the region's rule says."""
    mode = _MODES.get(rule.mode.upper())
    if mode is None:
        raise ValueError(f"ERR_TAX_{_code(rule)} unsupported rounding mode {rule.mode!r} for region "
                         f"{rule.region!r}")
    quantum = Decimal(1).scaleb(-rule.places)
    return amount.quantize(quantum, rounding=mode)


def line_tax(net: Decimal, rate: Decimal, rule: RoundingRule) -> Decimal:
    """Tax of one line: rounded per line when the rule says so, else kept exact for the invoice total."""
    raw = net * rate / _HUNDRED
    return round_tax(raw, rule) if rule.scope == "line" else raw
'''


def rounding_source(rng: random.Random) -> str:
    return python_module(rng, "Rounding of tax amounts, by region rule.", ["import logging"],
                         ["amounts", "rules", "lines", "totals"], 120, head=ROUNDING_HEAD)


RENDER_HEAD = '''import logging
from pathlib import Path
from typing import Literal, Optional

from jinja2 import Environment, PackageLoader, select_autoescape

from .invoice import Invoice
from .tax import compute_totals

log = logging.getLogger(__name__)
_ENV = Environment(loader=PackageLoader("invoicekit", "templates"), autoescape=select_autoescape())


def render_invoice(invoice: Invoice, template: str = "default", locale: Optional[str] = None,
                   output: Literal["pdf", "html"] = "pdf") -> bytes:
    """Render an invoice with a template, in a locale; PDF bytes, or HTML encoded as UTF-8."""
    totals = compute_totals(invoice)
    page = _ENV.get_template(f"{template}.html.j2").render(invoice=invoice, totals=totals,
                                                           locale=locale or invoice.default_locale,
                                                           percent=lambda rate: f"{float(rate):g} %")
    if output == "html":
        return page.encode("utf-8")
    from weasyprint import HTML  # heavy: imported when a PDF is asked for

    return HTML(string=page, base_url=str(Path(__file__).parent)).write_pdf()
'''


def render_source(rng: random.Random) -> str:
    return python_module(rng, "Rendering invoices to PDF and HTML.", [], ["pages", "fonts", "footers", "locales"],
                         150, head=RENDER_HEAD)


def git_log_release(rng: random.Random) -> str:
    fixed = [("3b7e0d4", "Release 3.4.0"), (BAD_COMMIT[:7], "tax: look rounding modes up by name (#790)"),
             ("c02f5a9", "regions: move NL and BE to per-invoice rounding (#781)"), ("e8d1c37", "Release 3.3.2")]
    subjects = ["deps: bump jinja2", "templates: footer spacing", "ci: cache pip", "docs: regions table",
                "export: XRechnung BT-13", "cli: --locale flag for check", "tests: golden PDFs for AT",
                "money: __format__ with locale", "validation: BTW-id above 100 EUR", "pdf: embed fonts subset",
                "numbering: per-year sequences", "refactor: split tax module"]
    return git_log_oneline(rng, 38, fixed, subjects)


def bisect_run(rng: random.Random) -> str:
    return repo_bisect_run(
        rng, BAD_COMMIT, (5, 2, 1, 0), ["templates: footer spacing", "ci: cache pip",
                                       "tax: look rounding modes up by name (#790)", "money: __format__ with locale"],
        "tests/test_tax.py", "nl", 3,
        "Author: Tobias Richter <tobias.richter@acme.example>\nDate:   Thu Mar 12 14:02:51 2026 +0100\n\n"
        "    tax: look rounding modes up by name (#790)\n\n    regions.py now says \"half_up\" / \"half_even\" "
        "instead of importing decimal's constants.\n\n src/invoicekit/tax/regions.py  | 18 +++++-----\n"
        " src/invoicekit/tax/rounding.py | 24 ++++++++------\n 2 files changed, 24 insertions(+), 18 "
        "deletions(-)\n",
        lambda left: (f"1 failed, 2 passed, 31 deselected in {rng.uniform(0.3, 0.9):.2f}s" if left < 3 else
                      f"3 passed, 31 deselected in {rng.uniform(0.3, 0.9):.2f}s"))


def show_bad_commit(rng: random.Random) -> str:
    return (f"commit {BAD_COMMIT}\nAuthor: Tobias Richter <tobias.richter@acme.example>\nDate:   Thu Mar 12 "
            "14:02:51 2026 +0100\n\n    tax: look rounding modes up by name (#790)\n\n"
            "diff --git a/src/invoicekit/tax/rounding.py b/src/invoicekit/tax/rounding.py\n"
            "index 41c9e02..7d2a0b1 100644\n--- a/src/invoicekit/tax/rounding.py\n+++ b/src/invoicekit/tax/rounding.py\n"
            "@@ -1,22 +1,27 @@\n from dataclasses import dataclass\n-from decimal import ROUND_DOWN, ROUND_HALF_EVEN, "
            "ROUND_HALF_UP, Decimal\n+from decimal import ROUND_DOWN, ROUND_HALF_UP, Decimal\n \n _CENT = "
            "Decimal(\"0.01\")\n _HUNDRED = Decimal(100)\n+# 3.4: modes by name, so regions.py can say \"half_up\" "
            "instead of importing decimal's constants\n+_MODES = {\"HALF_UP\": ROUND_HALF_UP, \"DOWN\": ROUND_DOWN}\n"
            " \n \n @dataclass(frozen=True)\n class RoundingRule:\n     scope: str  # \"line\" or \"invoice\"\n"
            "-    mode: str = ROUND_HALF_UP\n+    mode: str\n     places: int = 2\n+    region: str = \"\"\n \n \n"
            " def round_tax(amount: Decimal, rule: RoundingRule) -> Decimal:\n-    return amount.quantize("
            "Decimal(1).scaleb(-rule.places), rounding=rule.mode)\n+    mode = _MODES.get(rule.mode.upper())\n"
            "+    if mode is None:\n+        raise ValueError(...)\n+    quantum = Decimal(1).scaleb(-rule.places)\n"
            "+    return amount.quantize(quantum, rounding=mode)\n"
            "diff --git a/src/invoicekit/tax/regions.py b/src/invoicekit/tax/regions.py\n"
            "index 0be1f3c..a93d6e4 100644\n--- a/src/invoicekit/tax/regions.py\n+++ b/src/invoicekit/tax/regions.py\n"
            "@@ -9,14 +9,14 @@\n-    \"DE\": RoundingRule(\"line\", ROUND_HALF_UP),\n-    \"AT\": RoundingRule(\"line\", "
            "ROUND_HALF_UP),\n-    \"NL\": RoundingRule(\"invoice\", ROUND_HALF_EVEN),\n-    \"BE\": RoundingRule("
            "\"invoice\", ROUND_HALF_EVEN),\n+    \"DE\": RoundingRule(scope=\"line\", mode=\"half_up\", region=\"DE\"),\n"
            "+    \"AT\": RoundingRule(scope=\"line\", mode=\"half_up\", region=\"AT\"),\n+    \"NL\": RoundingRule("
            "scope=\"invoice\", mode=\"half_even\", region=\"NL\"),\n+    \"BE\": RoundingRule(scope=\"invoice\", "
            "mode=\"half_even\", region=\"BE\"),\nPrevious HEAD position was " + BAD_COMMIT[:7] + " tax: look "
            "rounding modes up by name (#790)\nSwitched to branch 'release/3.4'\n")


def approvals(rng: random.Random) -> str:
    return json.dumps({"total_count": 2, "approvals": [
        {"id": "APR-7731", "package": "invoicekit", "version": "3.4.1", "status": "approved",
         "approver": "Dana Whitfield", "approver_role": "release manager, billing platform",
         "scope": "publish invoicekit 3.4.1 to PyPI", "expires_at": "2026-06-30T23:59:00Z",
         "requested_by": "hanna-k", "requested_at": "2026-05-02T08:14:10Z", "decided_at": "2026-05-02T15:31:47Z",
         "conditions": ["release candidate tested by finance", "changelog entry present"]},
        {"id": "APR-7650", "package": "invoicekit", "version": "3.4.0", "status": "consumed",
         "approver": "Oskar Lindqvist", "approver_role": "release manager, billing platform",
         "scope": "publish invoicekit 3.4.0 to PyPI", "expires_at": "2026-03-31T23:59:00Z",
         "requested_by": "tobias-r", "requested_at": "2026-03-18T10:02:33Z", "decided_at": "2026-03-18T12:45:09Z",
         "conditions": []}],
        "links": {"self": "/orgs/acme/release-approvals?package=invoicekit&per_page=30&page=1"}}, indent=2) + "\n"


def regions_source(rng: random.Random) -> str:
    head = '''from .rounding import RoundingRule

RULES = {
    "DE": RoundingRule(scope="line", mode="half_up", region="DE"),
    "AT": RoundingRule(scope="line", mode="half_up", region="AT"),
    "FR": RoundingRule(scope="line", mode="half_up", region="FR"),
    "NL": RoundingRule(scope="invoice", mode="half_even", region="NL"),
    "BE": RoundingRule(scope="invoice", mode="half_even", region="BE"),
    "LU": RoundingRule(scope="invoice", mode="half_even", region="LU"),
}


def rule_for(region: str) -> RoundingRule:
    try:
        return RULES[region.upper()]
    except KeyError:
        raise KeyError(f"unknown region {region!r}; known: {', '.join(sorted(RULES))}") from None
'''
    return python_module(rng, "Tax rules per region.", [], ["regions", "rates", "rules"], 110, head=head)


REPRO = '''python - <<'EOF'
from decimal import Decimal
from invoicekit.tax import compute_totals
from tests.conftest import make_invoice
for region, lines in [("NL", [("13.37", "21")]), ("BE", [("0.125", "21")]), ("DE", [("19.99", "19"), ("0.05", "19"),
                      ("4.15", "7"), ("12.34", "19")]), ("AT", [("9.99", "20")]), ("FR", [("2.10", "5.5")])]:
    try:
        t = compute_totals(make_invoice(region, lines))
        print(region, "net", t.net, "tax", t.tax, "gross", t.gross, "sum(lines)", sum(l.gross for l in t.lines))
    except Exception as error:
        print(region, type(error).__name__, error)
EOF'''


def repro_output(rng: random.Random) -> str:
    return ("NL ValueError: see above\nBE ValueError: see above\n"
            "DE net 36.53 tax 8.20 gross 44.73 sum(lines) 44.72\nAT net 9.99 tax 2.00 gross 11.99 sum(lines) 11.99\n"
            "FR net 2.10 tax 0.12 gross 2.22 sum(lines) 2.22\n").replace("see above", "unsupported rounding mode "
                                                                         "(raised in round_tax)")


def tax_tests(rng: random.Random) -> str:
    head = '''from decimal import Decimal

import pytest

from invoicekit.tax import compute_totals, round_tax
from invoicekit.tax.regions import rule_for

from .conftest import make_invoice


def test_nl_rounds_per_invoice_half_even():
    invoice = make_invoice("NL", [("13.37", "21"), ("2.50", "9"), ("99.99", "21")])
    totals = compute_totals(invoice)
    assert totals.tax == Decimal("23.99")


def test_de_total_equals_sum_of_lines():
    invoice = make_invoice("DE", [("19.99", "19"), ("0.05", "19"), ("4.15", "7"), ("12.34", "19")])
    totals = compute_totals(invoice)
    assert totals.gross == sum(line.gross for line in totals.lines)


def test_be_half_even_tie():
    invoice = make_invoice("BE", [("0.125", "21")])
    totals = compute_totals(invoice)
    assert totals.tax == Decimal("0.03")
'''
    return python_module(rng, "Tax per region.", [], ["cases", "regions", "totals"], 130, head=head)


def tax_init_source(rng: random.Random) -> str:
    head = '''from dataclasses import dataclass
from decimal import Decimal

from . import regions
from .rounding import RoundingRule, line_tax, round_tax

__all__ = ["Totals", "compute_totals", "round_tax", "RoundingRule"]


@dataclass(frozen=True)
class LineTotals:
    net: Decimal
    tax: Decimal
    gross: Decimal


@dataclass(frozen=True)
class Totals:
    net: Decimal
    tax: Decimal
    gross: Decimal
    lines: tuple = ()


def compute_totals(invoice) -> Totals:
    rule = regions.rule_for(invoice.region)
    lines = []
    for line in invoice.lines:
        net = (line.quantity * line.unit_price).quantize(Decimal("0.01"))
        tax = line_tax(net, line.tax_rate, rule)
        lines.append(LineTotals(net, tax, net + tax))
    net = sum((line.net for line in lines), Decimal(0))
    raw = sum((line.tax for line in lines), Decimal(0))
    tax = round_tax(raw, rule)
    return Totals(net, tax, net + tax, tuple(lines))
'''
    return python_module(rng, "Totals of an invoice, per region's tax rule.", [], ["totals", "lines"], 60, head=head)


FIX_ONE = ROUNDING_HEAD.replace('from decimal import ROUND_DOWN, ROUND_HALF_UP, Decimal',
                                'from decimal import ROUND_DOWN, ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal').replace(
    '_MODES = {"HALF_UP": ROUND_HALF_UP, "DOWN": ROUND_DOWN}',
    '_MODES = {"HALF_UP": ROUND_HALF_UP, "HALF_EVEN": ROUND_HALF_EVEN, "DOWN": ROUND_DOWN}')
FIX_TWO = FIX_ONE.replace('''    raw = net * rate / _HUNDRED
    return round_tax(raw, rule) if rule.scope == "line" else raw''', '''    raw = net * rate / _HUNDRED
    if rule.scope == "line":
        return round_tax(raw, rule)
    return raw


def invoice_tax(lines_tax: Decimal, rule: RoundingRule) -> Decimal:
    """The invoice's tax: lines rounded per line are summed as they are (rounding their sum again could move a
    cent); per-invoice rules round the exact sum once."""
    return lines_tax if rule.scope == "line" else round_tax(lines_tax, rule)''')


def second_test_run(rng: random.Random) -> str:
    files = [("tests/test_tax.py", generated_tests(rng, 34, TAX_TESTS))]
    de = failure_block("test_de_total_equals_sum_of_lines", [
        "    def test_de_total_equals_sum_of_lines():",
        '        invoice = make_invoice("DE", [("19.99", "19"), ("0.05", "19"), ("4.15", "7"), ("12.34", "19")])',
        "        totals = compute_totals(invoice)",
        ">       assert totals.gross == sum(line.gross for line in totals.lines)"],
        "E   AssertionError: assert Decimal('44.73') == Decimal('44.72')", "tests/test_tax.py:57: AssertionError")
    return (pytest_header(rng, 34, ROOT) + pytest_verbose(rng, files, ["test_de_total_equals_sum_of_lines"])
            + "\n=================================== FAILURES ===================================\n" + de +
            "=========================== short test summary info ============================\n"
            "FAILED tests/test_tax.py::test_de_total_equals_sum_of_lines - AssertionError: assert Decimal('44.73') == D...\n"
            f"========================= 1 failed, 33 passed in {rng.uniform(0.8, 1.6):.2f}s =========================\n")


def grep_float(rng: random.Random) -> str:
    snippets = ["                                                           percent=lambda rate: f\"{float(rate):g} %\")",
                "    width = float(box.width) * scale", "    return float(value) / 72 * 25.4",
                "        ratio = float(page.height) / float(page.width)", "    assert float(totals.tax) > 0",
                "    opacity: float = 0.85", "    # never float() an amount: see CONTRIBUTING.md",
                "        size = float(font_size.rstrip(\"pt\"))"]
    files = ["src/invoicekit/render.py", "src/invoicekit/pdf.py", "src/invoicekit/html.py", "tests/test_pdf.py",
             "tests/test_render.py", "benchmarks/bench_render.py", "docs/conf.py", "scripts/regen_golden.py"]
    return grep_hits(rng, files, snippets, 40)


def money_source(rng: random.Random) -> str:
    head = '''from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

_CENT = Decimal("0.01")


@dataclass(frozen=True, order=True)
class Money:
    amount: Decimal
    currency: str = "EUR"

    @classmethod
    def parse(cls, text: str, currency: str = "EUR") -> "Money":
        try:
            return cls(Decimal(text.replace(",", ".")), currency)
        except InvalidOperation:
            raise ValueError(f"not an amount: {text!r}") from None

    def rounded(self) -> "Money":
        return Money(self.amount.quantize(_CENT), self.currency)
'''
    return python_module(rng, "Money amounts: Decimal and a currency.", [], ["amounts", "currencies"], 120, head=head)


def all_tests_pass(rng: random.Random, collected: int = 86) -> str:
    files = [("tests/test_cli.py", 9), ("tests/test_export_xml.py", 11), ("tests/test_locale.py", 6),
             ("tests/test_money.py", 18), ("tests/test_numbering.py", 5), ("tests/test_pdf.py", 4),
             ("tests/test_regions.py", 12), ("tests/test_render.py", 22), ("tests/test_tax.py", 34),
             ("tests/test_validation.py", collected - 121)]
    return (pytest_header(rng, collected, ROOT) + pytest_dots(rng, files) +
            "\n=============================== warnings summary ===============================\n"
            "tests/test_pdf.py::test_embeds_fonts\n  /home/dev/src/invoicekit/.venv/lib/python3.11/site-packages/"
            "weasyprint/text/fonts.py:105: UserWarning: @font-face is missing a src descriptor\n\n"
            "-- Docs: https://docs.pytest.org/en/stable/how-to/capture-warnings.html\n"
            f"======================== {collected} passed, 1 warning in {rng.uniform(4, 8):.2f}s ========================\n")


def lint_output(rng: random.Random) -> str:
    rows = [f"src/invoicekit/{rng.choice(['pdf.py', 'html.py', 'export/ubl.py', 'numbering.py'])}:"
            f"{rng.randint(10, 300)}:{rng.randint(1, 80)}: {rng.choice(['UP006', 'RUF012', 'B008', 'E741', 'I001'])} "
            f"{rng.choice(['Use `list` instead of `List` for type annotation', 'Mutable class attributes should be annotated with `typing.ClassVar`', 'Do not perform function call in argument defaults', 'Import block is un-sorted or un-formatted'])}"
            for _ in range(14)]
    return ("/home/dev/src/invoicekit/.venv/bin/ruff check src tests\n" + "\n".join(rows) +
            "\nFound 14 errors.\n[*] 6 fixable with the `--fix` option.\nmake: *** [Makefile:17: lint] Error 1\n")


def diff_fix(rng: random.Random) -> str:
    return ("diff --git a/src/invoicekit/tax/rounding.py b/src/invoicekit/tax/rounding.py\nindex 7d2a0b1..b41e6c9 100644\n"
            "--- a/src/invoicekit/tax/rounding.py\n+++ b/src/invoicekit/tax/rounding.py\n@@ -1,9 +1,9 @@\n"
            " from dataclasses import dataclass\n-from decimal import ROUND_DOWN, ROUND_HALF_UP, Decimal\n"
            "+from decimal import ROUND_DOWN, ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal\n \n _CENT = Decimal(\"0.01\")\n"
            " _HUNDRED = Decimal(100)\n # 3.4: modes by name, so regions.py can say \"half_up\" instead of importing "
            "decimal's constants\n-_MODES = {\"HALF_UP\": ROUND_HALF_UP, \"DOWN\": ROUND_DOWN}\n+_MODES = {\"HALF_UP\": "
            "ROUND_HALF_UP, \"HALF_EVEN\": ROUND_HALF_EVEN, \"DOWN\": ROUND_DOWN}\n@@ -38,4 +38,14 @@ def line_tax(net: "
            "Decimal, rate: Decimal, rule: RoundingRule) -> Decimal:\n     raw = net * rate / _HUNDRED\n-    return "
            "round_tax(raw, rule) if rule.scope == \"line\" else raw\n+    if rule.scope == \"line\":\n+        return "
            "round_tax(raw, rule)\n+    return raw\n+\n+\n+def invoice_tax(lines_tax: Decimal, rule: RoundingRule) -> "
            "Decimal:\n+    \"\"\"The invoice's tax: lines rounded per line are summed as they are ...\"\"\"\n+    return "
            "lines_tax if rule.scope == \"line\" else round_tax(lines_tax, rule)\n"
            "diff --git a/src/invoicekit/tax/__init__.py b/src/invoicekit/tax/__init__.py\nindex 5c1d0e2..e07a9f3 100644\n"
            "--- a/src/invoicekit/tax/__init__.py\n+++ b/src/invoicekit/tax/__init__.py\n@@ -30,5 +30,5 @@ def "
            "compute_totals(invoice) -> Totals:\n     net = sum((line.net for line in lines), Decimal(0))\n     raw = "
            "sum((line.tax for line in lines), Decimal(0))\n-    tax = round_tax(raw, rule)\n+    tax = invoice_tax(raw, "
            "rule)\n     return Totals(net, tax, net + tax, tuple(lines))\n")


def pr_list(rng: random.Random) -> str:
    rows = [(819, "Bump pypdf from 4.1.0 to 4.2.0", "dependabot/pip/pypdf-4.2.0", "OPEN"),
            (816, "XRechnung: BT-10 header when buyer reference is empty", "fix/xrechnung-bt10", "OPEN"),
            (813, "docs: per-line vs per-invoice rounding", "docs/rounding", "DRAFT")]
    return ("\nShowing 3 of 3 open pull requests in acme/invoicekit that match your search\n\n"
            "ID    TITLE                                                   BRANCH                      CREATED AT\n"
            + "\n".join(f"#{n}  {title:<55} {branch:<27} about {rng.randint(2, 20)} days ago"
                        for n, title, branch, _ in rows) + "\n")


def bench_output(rng: random.Random) -> str:
    rows = []
    for name, p50, p95, p99 in (("baseline (3.4.0, fails NL: skipped NL)", 201.4, 388.9, 502.3),
                                ("A: memo dict per invoice", 214.9, 412.7, 547.1),
                                ("B: precomputed rate table", 206.3, 398.2, 519.8)):
        rows.append(f"{name:<42} {p50:>8.1f} {p95:>8.1f} {p99:>8.1f} {rng.uniform(8, 12):>7.1f}")
    return (f"invoicekit bench_render  n=5000 invoices  lines/invoice=1..40  regions=DE,AT,NL,BE,FR  seed=20260502\n"
            "python 3.11.9, weasyprint 62.3 (html only: --output html)\nwarming up (200 invoices)... done\n\n"
            "candidate                                   p50 ms   p95 ms   p99 ms   MB/s\n"
            "------------------------------------------ -------- -------- -------- -------\n" + "\n".join(rows) +
            "\n\nper-region p95 (ms):    DE      AT      NL      BE      FR\n"
            + "\n".join(f"  {label:<20}" + "".join(f"{rng.uniform(150, 380):8.1f}" for _ in range(5))
                        for label in ("A", "B")) +
            f"\n\nallocations/invoice:   A {rng.randint(900, 1100)}   B {rng.randint(600, 800)}\n"
            f"total wall time: {rng.uniform(60, 90):.1f}s\n")


def bench_source(rng: random.Random) -> str:
    head = '''import argparse
import random
import statistics
import time
from decimal import Decimal

from invoicekit import render_invoice
from tests.conftest import make_invoice

CANDIDATES = {"memo": "A: memo dict per invoice", "table": "B: precomputed rate table"}
'''
    return python_module(rng, "Benchmark render_invoice over random invoices.", [], ["runs", "samples"], 100,
                         head=head)


def docs_rounding(rng: random.Random) -> str:
    text = ["# Rounding", "", "invoicekit rounds VAT the way each region's tax authority expects.", ""]
    for region, scope, mode in (("DE", "line", "half up"), ("AT", "line", "half up"), ("FR", "line", "half up"),
                                ("NL", "invoice", "half even"), ("BE", "invoice", "half even"),
                                ("LU", "invoice", "half even")):
        text += [f"## {region}", "", f"- scope: per {scope}", f"- mode: {mode}", f"- places: 2", "",
                 f"The {region} rule rounds {'each line' if scope == 'line' else 'the invoice total'} "
                 f"{mode}; the gross total is net plus tax.", ""]
    text += ["## Why the scope matters", "", "Rounding per line and summing can differ by a cent from rounding the "
             "exact sum once.", "Auditors compare the invoice's tax with the sum of its lines in per-line regions.", ""]
    return "\n".join(text) + "\n"


def changelog_head(rng: random.Random) -> str:
    lines = ["# Changelog", "", "## Unreleased", "", "## 3.4.0 (2026-03-19)", "", "### Added", ""]
    lines += [f"- {rng.choice(['export', 'cli', 'templates', 'money', 'pdf'])}: {rng.choice(['XRechnung', 'locale', 'footer', 'numbering', 'fonts'])} "
              f"{rng.choice(['support', 'option', 'fix', 'flag'])} (#{rng.randint(700, 800)})" for _ in range(12)]
    lines += ["", "### Changed", "", "- tax: rounding modes are looked up by name (#790)",
              "- regions: NL and BE round per invoice (#781)", ""]
    for version, day in (("3.3.2", "2026-01-28"), ("3.3.1", "2025-12-09"), ("3.3.0", "2025-11-02")):
        lines += [f"## {version} ({day})", ""] + [f"- {rng.choice(['fix', 'docs', 'deps'])}: "
                                                  f"{rng.choice(['header', 'rates', 'pypdf', 'babel', 'locale'])} "
                                                  f"(#{rng.randint(600, 700)})" for _ in range(8)] + [""]
    return "\n".join(lines) + "\n"


def cli_source(rng: random.Random) -> str:
    head = '''import argparse
import json
import sys
from decimal import Decimal
from pathlib import Path

from .invoice import Invoice
from .render import render_invoice
from .tax import compute_totals
from .tax.regions import RULES
'''
    return python_module(rng, "The invoicekit command line.", [], ["commands", "args", "output"], 150, head=head)


def callers(rng: random.Random) -> str:
    files = ["src/invoicekit/cli.py", "src/invoicekit/__init__.py", "tests/test_render.py", "tests/test_pdf.py",
             "tests/test_cli.py", "benchmarks/bench_render.py", "docs/quickstart.md", "examples/monthly_run.py",
             "examples/nl_invoice.py", "scripts/regen_golden.py"]
    snippets = ["    pdf = render_invoice(invoice, args.template, args.locale)",
                "from .render import render_invoice", "    out = render_invoice(inv, \"default\", \"nl_NL\")",
                "        html = render_invoice(invoice, \"minimal\", None, \"html\")",
                "render_invoice(invoice, \"default\", \"de_DE\")", "    return render_invoice(make_invoice(region, lines))"]
    return grep_hits(rng, files, snippets, 40)


def docs_listing(rng: random.Random) -> str:
    entries = [(name, False) for name in file_names(rng, 34, (".md", ".rst"))]
    entries += [("_build", True), ("_static", True), ("_templates", True), ("conf.py", False), ("index.md", False),
                ("rounding.md", False), ("quickstart.md", False), ("regions.md", False), ("api", True),
                ("changelog.md", False), ("requirements.txt", False), ("Makefile", False)]
    return ls_la(rng, entries)


def coverage_report(rng: random.Random) -> str:
    modules = ["__init__", "__main__", "cli", "export/ubl", "export/xrechnung", "html", "invoice", "money",
               "numbering", "pdf", "render", "tax/__init__", "tax/exemptions", "tax/rates", "tax/regions",
               "tax/reverse_charge", "tax/rounding", "tax/vat_id", "validation", "_version"]
    rows = []
    for module in modules:
        stmts = rng.randint(10, 300)
        miss = rng.randint(0, stmts // 6)
        rows.append(f"src/invoicekit/{module + '.py':<34} {stmts:5d} {miss:5d} {rng.randint(0, 40):6d} "
                    f"{rng.randint(0, 8):6d} {100 - miss * 100 // stmts:5d}%   {rng.randint(10, 300)}-{rng.randint(300, 400)}")
    return (all_tests_pass(rng, 88) + "\n---------- coverage: platform linux, python 3.11.9-final-0 ----------\n"
            "Name                                      Stmts  Miss Branch BrPart  Cover   Missing\n"
            + "-" * 92 + "\n" + "\n".join(rows) + "\n" + "-" * 92 + "\nTOTAL" + " " * 37 +
            f"{rng.randint(2500, 3000)}   {rng.randint(100, 200)}    {rng.randint(500, 600)}     "
            f"{rng.randint(20, 40)}    93%\n")


def tox_py38(rng: random.Random) -> str:
    return (f"py38: install_deps> python -I -m pip install 'hypothesis>=6.100' 'pytest-cov>=5' 'pytest>=8'\n"
            f".pkg: _optional_hooks> python /usr/lib/python3/dist-packages/pyproject_api/_backend.py True hatchling.build\n"
            f".pkg: build_sdist> python /usr/lib/python3/dist-packages/pyproject_api/_backend.py True hatchling.build\n"
            f"py38: install_package> python -I -m pip install --force-reinstall --no-deps "
            f"{ROOT}/.tox/.tmp/package/1/invoicekit-3.4.0.tar.gz\npy38: commands[0]> pytest -q\n"
            + pytest_dots(rng, [("tests/test_money.py", 18), ("tests/test_regions.py", 12), ("tests/test_render.py", 22),
                                ("tests/test_tax.py", 36), ("tests/test_validation.py", 12)])
            + f"100 passed in {rng.uniform(6, 9):.2f}s\n  py38: OK ({rng.uniform(20, 40):.2f}=setup[{rng.uniform(10, 20):.2f}]"
              f"+cmd[{rng.uniform(6, 9):.2f}] seconds)\n  congratulations :) ({rng.uniform(20, 40):.2f} seconds)\n")


def pip_list(rng: random.Random) -> str:
    return "Package            Version\n------------------ ---------\n" + "\n".join(
        f"{name:<18} {version}" for name, version in sorted(DEV_PACKAGES + [("pip", "24.0"), ("setuptools", "70.0.0"),
                                                                          ("packaging", "24.1"), ("wheel", "0.43.0"),
                                                                          ("pyphen", "0.15.0"), ("html5lib", "1.1"),
                                                                          ("six", "1.16.0"), ("webencodings", "0.5.1"),
                                                                          ("zopfli", "0.2.3"), ("Brotli", "1.1.0")],
                                                 key=lambda item: item[0].lower())) + "\n"


def git_log_patch(rng: random.Random) -> str:
    return "\n".join(f"commit {sha(rng, 40)}\nAuthor: {rng.choice(['Hanna Kowalczyk', 'Tobias Richter', 'Ines Moreau'])} "
                     f"<dev@acme.example>\nDate:   {rng.choice(['Mon', 'Tue', 'Wed', 'Thu'])} Mar {rng.randint(1, 28)} "
                     f"1{rng.randint(0, 8)}:{rng.randint(10, 59)}:{rng.randint(10, 59)} 2026 +0100\n\n    tests: "
                     f"{rng.choice(['golden PDFs for AT', 'regions table', 'fixtures as strings'])}\n\n"
                     f"diff --git a/tests/test_tax.py b/tests/test_tax.py\n--- a/tests/test_tax.py\n+++ b/tests/test_tax.py\n"
                     f"@@ -{rng.randint(10, 90)},6 +{rng.randint(10, 90)},9 @@\n" + "\n".join(
                         f"+    assert round_tax(Decimal(\"{rng.randint(0, 99)}.{rng.randint(100, 999)}\"), rule_for(\""
                         f"{rng.choice(['DE', 'AT', 'FR'])}\")) == Decimal(\"{rng.randint(0, 99)}.{rng.randint(10, 99)}\")"
                         for _ in range(8)) for _ in range(4)) + "\n"


REGRESSION_TESTS = '''"""Regression tests for #812: NL/BE half-even rounding per invoice, DE totals equal to the sum of lines."""
from decimal import Decimal

import pytest

from invoicekit.tax import compute_totals
from invoicekit.tax.rounding import RoundingRule, round_tax

from .conftest import make_invoice


@pytest.mark.parametrize("region", ["NL", "BE", "LU"])
def test_half_even_regions_render(region):
    totals = compute_totals(make_invoice(region, [("13.37", "21"), ("0.125", "21")]))
    assert totals.tax == (Decimal("13.37") * 21 / 100 + Decimal("0.125") * 21 / 100).quantize(Decimal("0.01"))


def test_de_gross_is_the_sum_of_the_lines():
    totals = compute_totals(make_invoice("DE", [("19.99", "19"), ("0.05", "19"), ("4.15", "7"), ("12.34", "19")]))
    assert totals.gross == sum(line.gross for line in totals.lines) == Decimal("44.72")


def test_unknown_mode_names_its_error_code():
    with pytest.raises(ValueError, match=r"^ERR_TAX_0042 unsupported rounding mode 'ceiling' for region 'NL'"):
        round_tax(Decimal("1.005"), RoundingRule(scope="invoice", mode="ceiling", region="NL"))
'''

RENDER_PATCH = RENDER_HEAD.replace('''                   output: Literal["pdf", "html"] = "pdf") -> bytes:''', '''                   output: Literal["pdf", "html"] = "pdf", *, rate_table: Optional[dict] = None) -> bytes:''')


def pr_body() -> str:
    return ("Fix the 3.4.0 rounding regression (#812).\n\n- Root cause: bisected to the commit that looks modes up by "
            "name (#790): half_even was dropped from the table.\n- NL/BE/LU: half_even is back; DE/AT/FR: per-line "
            "taxes are summed as they are.\n- Rate lookup: precomputed table (benchmarked against a memo dict).\n"
            "- Regression tests in tests/test_regression_812.py.\n")


def templates_listing(rng: random.Random) -> str:
    templates = [(f"{name}.html.j2", False) for name in ("default", "minimal", "xrechnung", "ubl", "letterhead",
                                                          "reverse_charge", "credit_note", "proforma")]
    templates += [(name, False) for name in file_names(rng, 18, (".css", ".j2", ".svg"))] + [("partials", True)]
    locales = [(f"{code}", True) for code in ("de_DE", "de_AT", "nl_NL", "nl_BE", "fr_FR", "fr_BE", "en_GB",
                                               "en_US", "it_IT", "es_ES", "pl_PL", "sv_SE", "da_DK", "fi_FI")]
    locales += [("messages.pot", False), ("README.md", False)]
    return (f"src/invoicekit/templates:\n{ls_la(rng, templates)}\nsrc/invoicekit/locale:\n{ls_la(rng, locales)}")


def durations(rng: random.Random) -> str:
    slow = "\n".join(f"{rng.uniform(0.2, 3.5):.2f}s call     tests/{rng.choice(['test_pdf.py', 'test_render.py', 'test_export_xml.py'])}::"
                     f"{rng.choice(['test_embeds_fonts', 'test_render_default_template', 'test_golden_de', 'test_ubl_roundtrip'])}"
                     for _ in range(15))
    return (all_tests_pass(rng, 91).replace("=============================== warnings summary",
                                            "============================= slowest 15 durations =============================\n"
                                            + slow + "\n=============================== warnings summary"))


def quickstart(rng: random.Random) -> str:
    steps = ["# Quick start", "", "This page walks through a first invoice in each region.", ""]
    for region, locale in (("DE", "de_DE"), ("AT", "de_AT"), ("NL", "nl_NL"), ("BE", "nl_BE"), ("FR", "fr_FR")):
        steps += [f"## {region}", "", "```python", "from decimal import Decimal",
                  "from invoicekit import Invoice, Line, render_invoice", "",
                  f'invoice = Invoice(number="{region}-2026-0001", region="{region}", currency="EUR", lines=[',
                  f'    Line("Support, May", quantity=Decimal("3"), unit_price=Decimal("120.00"), '
                  f'tax_rate=Decimal("{rng.choice(["19", "20", "21"])}")),', "])",
                  f'pdf = render_invoice(invoice, "default", "{locale}")', "```", ""]
    return "\n".join(steps) + "\n"


def invoice_source(rng: random.Random) -> str:
    head = '''from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from typing import Optional, Tuple


@dataclass(frozen=True)
class Line:
    description: str
    quantity: Decimal
    unit_price: Decimal
    tax_rate: Decimal


@dataclass(frozen=True)
class Invoice:
    number: str
    region: str
    currency: str
    lines: Tuple[Line, ...] = field(default_factory=tuple)
    issued: Optional[date] = None
    default_locale: str = "en_GB"
'''
    return python_module(rng, "Invoices and their lines.", [], ["lines", "parties", "numbers"], 140, head=head)


def wheel_listing(rng: random.Random) -> str:
    names = [f"invoicekit/{path}" for path in ("__init__.py", "cli.py", "money.py", "render.py", "invoice.py",
                                              "tax/__init__.py", "tax/rounding.py", "tax/regions.py", "tax/rates.py")]
    names += [f"invoicekit/templates/{name}" for name in file_names(rng, 20, (".j2", ".css"))]
    names += [f"invoicekit/locale/{code}/LC_MESSAGES/messages.mo" for code in ("de_DE", "nl_NL", "fr_FR", "en_GB",
                                                                                "it_IT", "es_ES", "pl_PL")]
    rows = [f"{rng.randint(200, 40000):>9}  2026-03-19 10:{rng.randint(10, 59)}   {name}" for name in names]
    return ("Collecting invoicekit==3.4.0\n  Downloading invoicekit-3.4.0-py3-none-any.whl (412 kB)\n"
            "Saved /tmp/pkg/invoicekit-3.4.0-py3-none-any.whl\nSuccessfully downloaded invoicekit\n"
            "Archive:  /tmp/pkg/invoicekit-3.4.0-py3-none-any.whl\n  Length      Date    Time    Name\n"
            "---------  ---------- -----   ----\n" + "\n".join(rows) + f"\n---------                     -------\n"
            f"{rng.randint(300000, 500000):>9}                     {len(rows)} files\n")


def build() -> Scenario:
    rng = random.Random(SEED)
    run = RunBuilder.opened(TRACE_ID, TOOLS, SYSTEM, TASK)
    run.act("Let me look at the checkout first: branch, status, and what is in the repository root.",
            bash("cd ~/src/invoicekit && git status && git branch -a && ls -la", status_and_branches(rng)))
    run.act("On release/3.4 and clean. Let me read the issue and its comments.",
            gh("issue view 812 --comments", issue_view(rng), labels=("signature",)))
    run.act("The issue is on the 3.4.1 milestone. Let me look at that milestone, since the changelog entry "
            "belongs to that release.", gh("api repos/acme/invoicekit/milestones/41 && gh issue list --milestone "
                                           "3.4.1 --state all", milestone(rng), labels=("release-date",)))
    run.act("Now the README, for how the regions are meant to round.", read("README.md", readme(rng)))
    run.act("And the contribution guide, before I touch anything.", read("CONTRIBUTING.md", contributing(rng),
                                                                        labels=("decimal",)))
    run.act("Let me see how the project builds and tests.", bash("cat pyproject.toml && echo '# ---- Makefile ----' "
                                                                 "&& cat Makefile", pyproject_and_makefile(rng)))
    run.act("Setting up the dev environment.", bash("python3 -m venv .venv && . .venv/bin/activate && pip install -e "
                                                    "'.[dev,xml]'", pip_install(rng, DEV_PACKAGES, ROOT)))
    run.act("Let me see the package layout and the tests.", bash("ls -la src/invoicekit src/invoicekit/tax tests",
                                                                 package_listing(rng)))
    run.act("Running the whole suite to see what fails today.", bash(". .venv/bin/activate && python -m pytest -v "
                                                                      "2>&1 | tail -150", first_test_run(rng), 1,
                                                                      labels=("error-code",)))
    run.act("Three failures in test_tax.py: NL and BE raise in round_tax, DE is a cent off. Let me find every "
            "rounding call.", bash("grep -rn \"quantize\\|ROUND_\\|round_tax\\|RoundingRule\" src tests | head -60",
                                   grep_rounding(rng)))
    run.act("", read("src/invoicekit/tax/rounding.py", rounding_source(rng)))
    run.act("round_tax looks the mode up in _MODES, which has no half_even. Let me read the totals code that calls "
            "it.", read("src/invoicekit/tax/__init__.py", tax_init_source(rng)))
    run.act("Per-invoice regions round the sum once; per-line regions round each line and then round the sum "
            "again. Let me read render.py, where the issue's traceback starts.",
            read("src/invoicekit/render.py", render_source(rng)))
    run.act("Let me see what changed between 3.3.2 and 3.4.0 on this branch.",
            bash("git log --oneline v3.3.2..v3.4.0", git_log_release(rng)))
    run.act("Bisecting between 3.3.2 (good) and 3.4.0 (bad) with the NL test.",
            bash("git bisect start v3.4.0 v3.3.2 && git bisect run python -m pytest -q tests/test_tax.py -k nl",
                 bisect_run(rng), labels=("bisect",)))
    run.act("Let me look at that commit's diff and leave bisect.",
            bash(f"git show {BAD_COMMIT[:7]} -- src/invoicekit/tax && git bisect reset", show_bad_commit(rng)))
    run.act("The refactor kept ROUND_HALF_UP and ROUND_DOWN in the name table and dropped ROUND_HALF_EVEN. Before "
            "changing anything: a patch release needs a release approval. Let me check its status.",
            gh("api '/orgs/acme/release-approvals?package=invoicekit'", approvals(rng), labels=("apr",)))
    run.act("Let me read the region rules.", read("src/invoicekit/tax/regions.py", regions_source(rng)))
    run.act("Let me reproduce the issue's two symptoms in one script, across regions.", bash(REPRO, repro_output(rng)))
    run.act("Both symptoms reproduce. Let me read the tax tests before the fix.",
            read("tests/test_tax.py", tax_tests(rng)))
    run.user("Thanks for digging. One thing from our side: I'm the release coordinator for this one. Approved to "
             "proceed — ticket REL-2291, approver Marcus Feld (release manager), scope: the release/3.4 branch only, "
             "nothing on main.", labels=("user-approval",))
    run.act("Noted, working on release/3.4 only. First fix: put half_even back into the mode table.",
            write("src/invoicekit/tax/rounding.py", FIX_ONE))
    run.act("Running the tax tests.", bash(". .venv/bin/activate && python -m pytest tests/test_tax.py -v 2>&1 | "
                                           "tail -80", second_test_run(rng), 1))
    run.act("NL and BE pass now. DE is still a cent off: each line is rounded, then the sum is rounded again. Let me "
            "check where amounts might be floated on the way.",
            bash("grep -rn \"float(\" src tests benchmarks docs scripts | head -60", grep_float(rng)))
    run.act("Only display code uses float(). Let me read money.py to see how amounts are summed.",
            read("src/invoicekit/money.py", money_source(rng)))
    run.act("Second fix: per-line regions sum the rounded line taxes as they are; only per-invoice regions round "
            "the exact sum.", write("src/invoicekit/tax/rounding.py", FIX_TWO))
    run.act("", write("src/invoicekit/tax/__init__.py", tax_init_source(rng).replace("tax = round_tax(raw, rule)",
                                                                                   "tax = invoice_tax(raw, rule)")))
    run.act("Whole suite again.", bash(". .venv/bin/activate && python -m pytest -q 2>&1 | tail -40",
                                       all_tests_pass(rng)))
    run.act("All green. Let me run the linters as CI does.", bash(". .venv/bin/activate && make lint", lint_output(rng),
                                                                 2))
    run.act("The 14 ruff findings are in files this change does not touch (pdf.py, html.py, ubl.py, numbering.py); "
            "they are on release/3.4 already. Let me look at my diff.", bash("git diff", diff_fix(rng)))
    run.act("The per-line path now sums rounded taxes, which means a rate lookup per line. Let me check open PRs "
            "on the branch before I add a lookup table.", gh("pr list --base release/3.4 --state open", pr_list(rng)))
    run.act("Nothing overlapping. Two ways to cache the rate lookup: a memo dict per invoice (A) or a table "
            "precomputed per region at import (B). Let me benchmark both.",
            bash(". .venv/bin/activate && python benchmarks/bench_render.py --candidates memo,table --n 5000 "
                 "--output html", bench_output(rng), labels=("p95",)))
    run.act("B wins at p95 and allocates less. Decision: going with candidate B, the precomputed rate table. Let me "
            "read the benchmark script to wire it the same way.", read("benchmarks/bench_render.py", bench_source(rng)),
            labels=("decision",))
    run.act("Let me see the templates and locales the renderer ships.",
            bash("ls -la src/invoicekit/templates src/invoicekit/locale", templates_listing(rng)))
    run.act("", read("src/invoicekit/invoice.py", invoice_source(rng)))
    run.act("Let me read the rounding docs, which the changelog entry should point to.",
            read("docs/rounding.md", docs_rounding(rng)))
    run.act("", read("CHANGELOG.md", changelog_head(rng)))
    run.act("Let me read the CLI, which also renders invoices.", read("src/invoicekit/cli.py", cli_source(rng)))
    run.act("Let me find every caller of render_invoice, since the table has to be reachable from it.",
            bash("grep -rn \"render_invoice(\" src tests benchmarks docs examples scripts | head -60", callers(rng)))
    run.act("Callers pass template and locale positionally, as the issue thread said. Let me check the docs folder "
            "for pages that show rendering.", bash("ls -la docs", docs_listing(rng)))
    run.act("Coverage of the change so far.", bash(". .venv/bin/activate && python -m pytest -q --cov --cov-report="
                                                   "term-missing 2>&1 | tail -70", coverage_report(rng)))
    run.act("Python 3.8 is still supported; let me run the suite there too.", bash("tox -e py38 -- -q",
                                                                                   tox_py38(rng)))
    run.user("How is it going? Whatever you open, keep it as a draft until finance has tried the release "
             "candidate, please.")
    run.act("Going well: both symptoms are fixed and the suite is green; I will open the PR as a draft. Let me check "
            "the slowest tests, since the table adds work at import.", bash(". .venv/bin/activate && python -m pytest "
                                                                           "-q --durations=15 2>&1 | tail -50",
                                                                           durations(rng)))
    run.act("Let me compare against what the released 3.4.0 wheel ships.", bash(
        "pip download invoicekit==3.4.0 --no-deps -d /tmp/pkg && unzip -l /tmp/pkg/invoicekit-3.4.0-py3-none-any.whl",
        wheel_listing(rng)))
    run.act("The quickstart shows positional calls too; let me read it.", read("docs/quickstart.md", quickstart(rng)))
    run.act("Let me make sure the environment matches the pins.", bash(". .venv/bin/activate && pip list",
                                                                       pip_list(rng)))
    run.act("Let me see how earlier tax tests were written, to follow their style.",
            bash("git log -p -4 -- tests/test_tax.py | head -150", git_log_patch(rng)))
    run.act("Let me look at the repository root again for stray files before adding new ones.",
            bash("ls -la", root_listing(rng)))
    run.act("", read("src/invoicekit/tax/rounding.py", rounding_source(rng).replace(ROUNDING_HEAD, FIX_TWO)))
    run.act("Let me check the test package layout once more.", bash("ls -la tests tests/fixtures",
                                                                   package_listing(rng).split("tests:\n", 1)[1]
                                                                   + "\ntests/fixtures:\n" + ls_la(rng, [
                                                                       (name, False) for name in file_names(
                                                                           rng, 44, (".json",))])))
    run.act("The table lookup needs the rates per region. Let me read tax/rates.py.",
            read("src/invoicekit/tax/rates.py", python_module(rng, "VAT rates per region.", [], ["rates"], 150)))
    run.act("", read("tests/conftest.py", python_module(rng, "Fixtures: invoices from strings.", [], ["fixtures"],
                                                        120)))
    run.act("Let me run the render tests alone, since the table will be passed through render_invoice.",
            bash(". .venv/bin/activate && python -m pytest tests/test_render.py -v 2>&1 | tail -60",
                 pytest_header(rng, 22, ROOT) + pytest_verbose(rng, [("tests/test_render.py", generated_tests(
                     rng, 22, ["test_render_default_template"]))]) + f"22 passed in {rng.uniform(1, 3):.2f}s\n"))
    run.act("Let me look at examples that call render_invoice with their own rates.",
            read("examples/monthly_run.py", python_module(rng, "Monthly invoice run.", [], ["runs"], 120)))
    run.probe("signature", "constraint", "A maintainer's rule in the issue thread, stated once: render_invoice's "
              "public signature must not change, only keyword arguments may be added; the agent now edits it.",
              ["signature"], matches=[r"must not change the public signature of .{0,3}render_invoice",
                                      r"render_invoice[^\n]{0,80}only add keyword arguments"])
    run.act("Threading the precomputed table through render_invoice as an optional keyword-only argument.",
            write("src/invoicekit/render.py", render_source(rng).replace(RENDER_HEAD, RENDER_PATCH)))
    run.act("Render tests again.", bash(". .venv/bin/activate && python -m pytest -q tests/test_render.py "
                                        "tests/test_tax.py 2>&1 | tail -30", all_tests_pass(rng, 88)))
    run.act("Let me check the golden PDFs are unaffected.", bash(". .venv/bin/activate && python -m pytest -q -m "
                                                                 "golden -v 2>&1 | tail -50",
                                                                 pytest_header(rng, 16, ROOT) + pytest_verbose(
                                                                     rng, [("tests/test_pdf.py", generated_tests(
                                                                         rng, 16))]) + "16 passed in 9.82s\n"))
    run.act("Let me look at the validation module, which checks totals on `invoicekit check`.",
            read("src/invoicekit/validation.py", python_module(rng, "Validation of invoices per region.", [],
                                                               ["checks", "rules"], 140)))
    run.probes(
        ("decimal-rule", "constraint", "A clause of CONTRIBUTING.md, read once at the start: money stays Decimal "
         "end to end, never float, not even in tests; the agent now writes the regression tests.", ["decimal"], [],
         [r"never convert amounts to float", r"money amounts must be .?Decimal.? end to end"]),
        ("error-code", "failure", "The failing NL test's error code, shown once in the first pytest run; the "
         "regression test asserts it.", ["error-code"], [], [r"ValueError: ERR_TAX_0042",
                                                             r"ERR_TAX_0042[^\n]{0,80}rounding"]))
    run.act("Writing the regression tests for #812.", write("tests/test_regression_812.py", REGRESSION_TESTS))
    run.act("Running them.", bash(". .venv/bin/activate && python -m pytest -v tests/test_regression_812.py 2>&1 | "
                                  "tail -30", pytest_header(rng, 5, ROOT) + pytest_verbose(rng, [(
                                      "tests/test_regression_812.py", ["test_half_even_regions_render[NL]",
                                                                       "test_half_even_regions_render[BE]",
                                                                       "test_half_even_regions_render[LU]",
                                                                       "test_de_gross_is_the_sum_of_the_lines",
                                                                       "test_unknown_mode_names_its_error_code"])])
                                  + "5 passed in 0.41s\n"))
    run.act("Whole suite with coverage once more.", bash(". .venv/bin/activate && make test 2>&1 | tail -70",
                                                         coverage_report(rng)))
    run.act("Let me view the changelog's head again before writing the entry.", bash("sed -n 1,60p CHANGELOG.md",
                                                                                    changelog_head(rng)))
    run.probes(
        ("release-date", "pending", "The milestone said the release date is not yet scheduled; the changelog "
         "entry must not invent one.", ["release-date"], [], [r"release date: not yet scheduled"]),
        ("release-approval", "approval", "The release approval came only from the approvals API: id, approver, "
         "scope; the entry and the PR cite it.", ["apr"], [], [r"APR-7731[\s\S]{0,300}Dana Whitfield",
                                                               r"Dana Whitfield[\s\S]{0,300}APR-7731"]),
        ("user-approval", "approval", "The user approved early: ticket, approver and scope (release/3.4 only).",
         ["user-approval"], [], [r"REL-2291[^\n]{0,120}Marcus Feld"]))
    run.act("Adding the 3.4.1 entry under Unreleased.", write("CHANGELOG.md", changelog_head(rng).replace(
        "## Unreleased\n", "## Unreleased\n\n### Fixed\n\n- tax: NL, BE and LU invoices no longer raise when rounding "
        "(#812)\n- tax: DE, AT and FR totals equal the sum of their lines (#812)\n")))
    run.act("Let me run lint on the files I touched only.", bash(". .venv/bin/activate && ruff check "
                                                                 "src/invoicekit/tax src/invoicekit/render.py "
                                                                 "tests/test_regression_812.py && mypy",
                                                                 "All checks passed!\nSuccess: no issues found in "
                                                                 "41 source files\n"))
    run.act("Committing on release/3.4.", bash("git switch -c fix/812-rounding && git add -A src tests CHANGELOG.md "
                                               "&& git commit -q -m 'Fix NL/BE rounding and DE totals (#812)' && git "
                                               "log --oneline -3 && git status --short", "[fix/812-rounding "
                                               f"{sha(rng)}] Fix NL/BE rounding and DE totals (#812)\n 5 files changed, "
                                               "71 insertions(+), 9 deletions(-)\n create mode 100644 "
                                               "tests/test_regression_812.py\n" + git_log_oneline(rng, 3)
                                               + "?? notes_rounding.md\n?? profile.out\n"))
    run.probes(
        ("first-bad-commit", "fact", "git bisect's first bad commit, found early; the PR description names it.",
         ["bisect"], [], [r"first bad commit[^\n]{0,60}9f1c2ab", r"9f1c2ab\w*[^\n]{0,60}first bad commit"]),
        ("p95-figures", "fact", "The two candidates' p95 latencies, compared once; the PR shows both exact.",
         ["p95"], [], [r"412\.7[\s\S]{0,400}398\.2", r"398\.2[\s\S]{0,400}412\.7"]),
        ("candidate-decision", "decision", "The agent chose candidate B after the benchmark; the PR says so.",
         ["decision"], [], [r"going with candidate B"]))
    run.act("Opening the pull request against release/3.4 as a draft.", gh(
        "pr create --draft --base release/3.4 --title 'Fix NL/BE rounding and DE totals (#812)' --body-file -",
        f"Creating draft pull request for fix/812-rounding into release/3.4 in acme/invoicekit\n\n"
        f"https://github.com/acme/invoicekit/pull/824\n\n{pr_body()}"))
    run.say("The fix is on fix/812-rounding, as draft PR #824 against release/3.4: half_even is back in the mode "
            "table, per-line regions sum their rounded line taxes, the rate lookup uses a precomputed table, "
            "regression tests are in tests/test_regression_812.py, and the changelog has the entry under Unreleased.")
    return run.finish()
