"""The docs document every setting: `workset reference` and docs/reference.md agree; the README starts with the
two commands and links to the docs."""

from __future__ import annotations

from pathlib import Path

from proxy.config import Config
from proxy.policy import Policy
from proxy.schema import describe

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
REFERENCE = (ROOT / "docs" / "reference.md").read_text()


def test_reference_lists_every_config_and_policy_key_with_its_meaning() -> None:
    for schema in (Config, Policy):
        for key, _, doc in describe(schema):
            assert f"| `{key}` |" in REFERENCE, f"docs/reference.md lacks {key}: run `workset reference`"
            assert doc and doc in REFERENCE, f"docs/reference.md's text for {key} is stale: run `workset reference`"


def test_readme_links_the_docs_that_exist() -> None:
    for name in ("docs/reference.md", "docs/how-it-works.md", "docs/eval.md"):
        assert f"({name})" in README and (ROOT / name).is_file(), name


def test_readme_starts_with_the_two_commands() -> None:
    first_block = README.split("```sh", 1)[1].split("```", 1)[0]
    assert "make run" in first_block and "make test" in first_block
