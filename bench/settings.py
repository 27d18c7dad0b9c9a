"""`--set section.key=value` for the benches that start a server: one config.yaml setting changed for a run."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

import yaml


def add_settings_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="a config.yaml setting for this run (e.g. store.max_backlog_chars=33554432)")


def apply_settings(config: dict[str, Any], settings: Sequence[str]) -> None:
    """Each `section.key=value` of `settings` written into `config` (the value read as YAML)."""
    for setting in settings:
        key, _, value = setting.partition("=")
        section, _, name = key.partition(".")
        config.setdefault(section, {})[name] = yaml.safe_load(value)
