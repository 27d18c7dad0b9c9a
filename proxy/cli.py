"""Command line: `workset serve` (also `python -m proxy serve`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from .config import Config, load_config
from .policy import Policy, load_policies
from .schema import ConfigError


def load_settings(config_path: str | None, overrides: dict[str, object] | None = None,
                  policy: str | None = None) -> tuple[Config, dict[str, Policy]]:
    """Config and every policy it can name, validated; ConfigError names the bad key."""
    config, base = load_config(config_path, overrides)
    if policy:
        config = _replace(config, policy=policy)
    policies_dir = Path(config.policies_dir)
    if not policies_dir.is_absolute():
        policies_dir = base / policies_dir
    wanted = (config.policy, *config.policy_by_model.values())
    policies = load_policies(policies_dir, wanted)
    # A policy given by path is known by its file's `name`; point the config at that name.
    if config.policy not in policies:
        raise ConfigError(f"policy {config.policy!r} not found")
    return config, policies


def _replace(config: Config, **changes: object) -> Config:
    from dataclasses import replace

    return replace(config, **changes)


def serve(args: argparse.Namespace) -> int:
    overrides: dict[str, object] = {}
    if args.host:
        overrides["server.host"] = args.host
    if args.port is not None:
        overrides["server.port"] = args.port
    if args.store:
        overrides["store.path"] = args.store
    config, policies = load_settings(args.config, overrides, args.policy)

    import uvicorn

    from .app import create_app

    app = create_app(config, policies, config.store.path)
    uvicorn.run(app, host=config.server.host, port=config.server.port, log_level="warning", access_log=False,
                timeout_graceful_shutdown=5)
    return 0


def reference(args: argparse.Namespace) -> int:
    """Markdown tables of every config.yaml and policy key with its default and meaning (the README's)."""
    from .schema import describe

    for title, schema in (("config.yaml", Config), ("policies/*.yaml", Policy)):
        print(f"| {title} key | default | meaning |\n| --- | --- | --- |")
        for key, default, doc in describe(schema):
            shown = "[]" if default == () else ("{}" if default == {} else default)
            print(f"| `{key}` | `{shown}` | {doc} |")
        print()
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="workset", description="OpenAI-compatible proxy forwarding a budgeted working set")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("serve", help="serve the proxy")
    run.add_argument("--config", default="config.yaml", help="config file (default: config.yaml)")
    run.add_argument("--host", help="address to listen on (overrides server.host)")
    run.add_argument("--port", type=int, help="port to listen on (overrides server.port)")
    run.add_argument("--policy", help="default policy: a preset name or a YAML path (overrides policy)")
    run.add_argument("--store", help="SQLite file of the store (overrides store.path)")
    run.set_defaults(handler=serve)
    from .evaluate.command import add_parser as add_eval

    add_eval(commands)
    keys = commands.add_parser("reference", help="print every config and policy key with its default and meaning")
    keys.set_defaults(handler=reference)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except ConfigError as error:
        print(f"workset: configuration error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
