"""`workset eval TRACES... [--policy NAME_OR_PATH ...] [--baselines] [--limit N] [--json PATH] [--plot PATH.png]`"""

from __future__ import annotations

import argparse
import gzip
import sys
from pathlib import Path
from typing import Any

import orjson

from ..cli import load_settings
from ..policy import load_policies
from ..tokens import TokenCounter
from .report import markdown_table, plot, write_json
from .run import Evaluation, MessageTokens, agent_turns, evaluate
from .strategies import (
    ForwardAll,
    Mask,
    PolicyStrategy,
    Strategy,
    Truncate,
    fake_summary,
    part_variants,
    policy_engine,
    with_budget,
)


def add_parser(commands: Any) -> None:
    parser = commands.add_parser("eval", help="replay agent traces through the policies and baselines, and measure")
    parser.add_argument("traces", nargs="+", help="trace files (gzipped JSON lines: id, tools, messages, probes)")
    parser.add_argument("--policy", action="append", default=[],
                        help="a preset name or YAML path; repeat for several (default: every preset)")
    parser.add_argument("--baselines", action="store_true", help="also run truncate and mask (none always runs)")
    parser.add_argument("--limit", type=int, help="at most this many traces per file")
    parser.add_argument("--json", type=Path, help="write {rows, config} here")
    parser.add_argument("--plot", type=Path, help="write a PNG: tokens per turn, and cost against recall")
    parser.add_argument("--budget", type=int,
                        help="token budget for every strategy (default: each policy's own; baselines take the "
                             "default policy's)")
    parser.add_argument("--mask-keep", type=int, default=5, help="tool outputs the mask baseline keeps (default 5)")
    parser.add_argument("--cache-read-price", type=float, default=0.1,
                        help="price of a cached input token relative to an uncached one (default 0.1)")
    parser.add_argument("--model", default="gpt-4o", help="model name for auto budgets (default gpt-4o)")
    parser.add_argument("--config", default="config.yaml", help="config file naming the policies (default config.yaml)")
    parser.add_argument("--parts", action="store_true",
                        help="also run the default policy with one part changed at a time (no names index, no "
                             "retrieval, no phase compaction, a summariser: the local fake model)")
    parser.set_defaults(handler=main)


def load_trace_file(path: Path, limit: int | None) -> list[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    traces: list[dict[str, Any]] = []
    with opener(path, "rb") as lines:
        for line in lines:
            if line.strip():
                traces.append(orjson.loads(line))
                if limit is not None and len(traces) >= limit:
                    break
    return traces


def build_strategies(args: argparse.Namespace, counter: TokenCounter, tokens_of: MessageTokens) -> list[Strategy]:
    config, presets = load_settings(args.config if Path(args.config).is_file() else None)
    chosen = load_policies(Path(config.policies_dir), tuple(args.policy)) if args.policy else presets
    names = list(dict.fromkeys(args.policy)) if args.policy else sorted(set(p.name for p in chosen.values()))
    policies = {chosen[name].name: with_budget(chosen[name], args.budget) for name in names}
    default = policies.get(config.policy) or with_budget(presets[config.policy], args.budget)
    if args.parts:
        policies.update({variant.name: variant for variant in part_variants(default)})
    engine = policy_engine(policies, counter)
    baseline_budget = args.budget or engine.budget_tokens(args.model, default)
    strategies: list[Strategy] = [ForwardAll(baseline_budget)]
    if args.baselines:
        strategies += [Truncate(baseline_budget, counter, tokens_of), Mask(args.mask_keep, baseline_budget)]
    strategies += [PolicyStrategy(policy, engine, args.model, summarize=fake_summary)
                   for policy in policies.values()]
    return strategies


def main(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    counter = TokenCounter()
    tokens_of = MessageTokens(counter)
    datasets: dict[str, Evaluation] = {}
    for path in map(Path, args.traces):
        traces = load_trace_file(path, args.limit)
        strategies = build_strategies(args, counter, tokens_of)
        name = path.name.split(".")[0]
        total = sum(len(agent_turns(trace["messages"])) for trace in traces)
        with tqdm(total=total, desc=name, unit="turn", file=sys.stderr, leave=False, disable=None) as bar:
            evaluation = evaluate(traces, strategies, counter, args.cache_read_price, progress=bar.update,
                                  tokens_of=tokens_of)
        datasets[name] = evaluation
        budgets = ", ".join(f"{s.name} {s.budget:,}" for s in strategies)
        print(f"\n### {name}: {len(traces)} traces, {total} turns (budgets: {budgets})\n")
        print(markdown_table(evaluation.rows))
    settings = {key: (str(value) if isinstance(value, Path) else value) for key, value in vars(args).items()
                if key != "handler"}
    if args.json:
        write_json(args.json, datasets, settings)
    if args.plot:
        plot(args.plot, datasets)
    return 0
