"""The README documents every setting: `workset reference` and the README's tables agree."""

from __future__ import annotations

from pathlib import Path

from proxy.config import Config
from proxy.policy import Policy
from proxy.schema import describe

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def test_readme_lists_every_config_and_policy_key_with_its_meaning() -> None:
    for schema in (Config, Policy):
        for key, _, doc in describe(schema):
            assert f"| `{key}` |" in README, f"README lacks {key}: run `workset reference`"
            assert doc and doc in README, f"README's text for {key} is stale: run `workset reference`"


def test_readme_starts_with_the_two_commands() -> None:
    first_block = README.split("```sh", 1)[1].split("```", 1)[0]
    assert "make run" in first_block and "make test" in first_block
