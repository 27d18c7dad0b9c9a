"""`workset eval TRACES... [--policy NAME_OR_PATH ...] [--baselines] [--limit N] [--json PATH] [--plot PATH.png]
[--text-agent] [--show-missed] [--per-trace] [--format chat|anthropic|responses]`; the word `scenarios` as a trace argument (when
no such file exists) replays the built-in probe scenarios (proxy.evaluate.scenarios)."""

from __future__ import annotations

import argparse
import gzip
import importlib
import sys
from pathlib import Path
from typing import Any, Sequence

import orjson

from ..cli import load_settings
from ..policy import Policy, load_policies
from ..tokens import TokenCounter
from .formats import FORMATS
from .metrics import probe_checks
from .report import (
    has_probe_checks,
    has_swe_checks,
    has_workset_text,
    markdown_table,
    missed_lines,
    per_trace_table,
    plot,
    probe_table,
    swe_table,
    text_table,
    write_json,
)
from .run import SWE_REQUESTS, Evaluation, MessageTokens, agent_turns, evaluate
from .strategies import (
    WIRES,
    ForwardAll,
    Mask,
    PolicyStrategy,
    Strategy,
    ThroughWire,
    Truncate,
    fake_summary,
    part_variants,
    policy_engine,
    with_budget,
)
from ..workingset import first_user
from .textagent import to_text_agent

SCENARIOS = "scenarios"  # the trace argument that names the built-in scenarios


def add_parser(commands: Any) -> None:
    parser = commands.add_parser("eval", help="replay agent traces through the policies and baselines, and measure")
    parser.add_argument("traces", nargs="+",
                        help="trace files (gzipped JSON lines: id, tools, messages, probes), or `scenarios` for the "
                             "built-in probe scenarios")
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
    parser.add_argument("--text-agent", action="store_true",
                        help="replay each trace as a text-based agent sends it (commands as fenced blocks, their "
                             "output as user messages, no tools); the dataset is named NAME-text")
    parser.add_argument("--format", choices=FORMATS, default="chat",
                        help="the wire format each request is replayed in (default chat): anthropic (Messages, as "
                             "Claude Code sends it) or responses (as Codex sends it), through the server's edge for "
                             "it; baselines get the request as workset reads it from that format. A dataset replayed "
                             "in another format than chat is named NAME-FORMAT")
    parser.add_argument("--show-missed", action="store_true",
                        help="list the probe checks each strategy missed on stderr (trace, check, kind, why)")
    parser.add_argument("--per-trace", action="store_true",
                        help="also print, per trace and strategy, probes kept and the state's tokens and dump rows at "
                             "the trace's last request")
    parser.set_defaults(handler=main)


def builtin_scenarios() -> list[dict[str, Any]]:
    """The scenarios shipped with workset (proxy/evaluate/scenarios); SystemExit when this install has none."""
    package = f"{__package__}.{SCENARIOS}"
    try:
        scenarios = importlib.import_module(package)
    except ModuleNotFoundError as error:
        if error.name != package:  # a module the scenarios need is missing: that is their bug, shown as is
            raise
        raise SystemExit("workset eval scenarios: this install has no built-in scenarios "
                         "(proxy/evaluate/scenarios is missing); give trace files instead") from error
    load = getattr(scenarios, "load", None)
    if not callable(load):  # e.g. a folder without its __init__.py yet
        raise SystemExit(f"workset eval scenarios: {package} has no load() returning the scenario traces")
    return list(load())


def load_dataset(argument: str, limit: int | None, text_agent: bool) -> tuple[str, list[dict[str, Any]]]:
    """A trace argument's dataset name and traces: a file, or the built-in scenarios. SystemExit when a trace's
    probe checks cannot be scored (before any replay starts)."""
    path = Path(argument)
    if argument == SCENARIOS and not path.exists():
        name, traces = SCENARIOS, builtin_scenarios()[:limit]
    else:
        name, traces = path.name.split(".")[0], load_trace_file(path, limit)
    for trace in traces:
        try:
            probe_checks(trace)
        except ValueError as error:
            raise SystemExit(f"workset eval {argument}: {error}") from error
    if text_agent:
        return f"{name}-text", [to_text_agent(trace) for trace in traces]
    return name, [with_observations(trace) for trace in traces]


def with_observations(trace: dict[str, Any]) -> dict[str, Any]:
    """The trace with `observations` (user messages that are command output) marked as workset's default rules
    see them, when it does not say: a text-based agent's run scores and masks its observations as tool output."""
    if "observations" in trace:
        return trace
    messages = trace["messages"]
    matcher, task = Policy().observation_matcher, first_user(messages)
    found = [index for index in range(len(messages)) if matcher.is_observation(messages, index, task)]
    return {**trace, "observations": found} if found else trace


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


def build_strategies(args: argparse.Namespace, counter: TokenCounter, tokens_of: MessageTokens,
                     traces: Sequence[dict[str, Any]] = ()) -> list[Strategy]:
    config, presets = load_settings(args.config if Path(args.config).is_file() else None)
    chosen = load_policies(Path(config.policies_dir), tuple(args.policy)) if args.policy else presets
    names = list(dict.fromkeys(args.policy)) if args.policy else sorted(set(p.name for p in chosen.values()))
    policies = {chosen[name].name: with_budget(chosen[name], args.budget) for name in names}
    default = policies.get(config.policy) or with_budget(presets[config.policy], args.budget)
    if args.parts:
        policies.update({variant.name: variant for variant in part_variants(default)})
    engine = policy_engine(policies, counter)
    baseline_budget = args.budget or engine.budget_tokens(args.model, default)
    baselines: list[Strategy] = [ForwardAll(baseline_budget)]
    if args.baselines:
        observations = {trace["id"]: frozenset(trace["observations"]) for trace in traces if trace.get("observations")}
        baselines += [Truncate(baseline_budget, counter, tokens_of),
                      Mask(args.mask_keep, baseline_budget, observations)]
    wire = WIRES[args.format]
    if wire.name != "chat":
        baselines = [ThroughWire(baseline, wire, args.model) for baseline in baselines]
    return baselines + [PolicyStrategy(policy, engine, args.model, summarize=fake_summary, wire=wire)
                        for policy in policies.values()]


def main(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    counter = TokenCounter()
    tokens_of = MessageTokens(counter)
    datasets: dict[str, Evaluation] = {}
    for argument in args.traces:
        name, traces = load_dataset(argument, args.limit, args.text_agent)
        name += f"-{args.format}" if args.format != "chat" else ""
        strategies = build_strategies(args, counter, tokens_of, traces)
        total = sum(len(agent_turns(trace["messages"])) for trace in traces)
        with tqdm(total=total, desc=name, unit="turn", file=sys.stderr, leave=False, disable=None) as bar:
            evaluation = evaluate(traces, strategies, counter, args.cache_read_price, progress=bar.update,
                                  tokens_of=tokens_of)
        datasets[name] = evaluation
        budgets = ", ".join(f"{s.name} {s.budget:,}" for s in strategies)
        print(f"\n### {name}: {len(traces)} traces, {total} turns, {args.format} format (budgets: {budgets})\n")
        print(markdown_table(evaluation.rows))
        if has_probe_checks(evaluation.rows):
            print(f"\nProbe checks kept, by kind, and tokens forwarded ({name}):\n")
            print(probe_table(evaluation.rows))
        if has_workset_text(evaluation.rows):
            print(f"\nWhat workset's own text is made of ({name}; dump rows: lines copying raw output by its form):\n")
            print(text_table(evaluation.rows))
        if has_swe_checks(evaluation.rows):
            print(f"\nSWE checks at the last {SWE_REQUESTS} requests of each coding run ({name}):\n")
            print(swe_table(evaluation.rows))
        if args.per_trace:
            print(f"\nPer trace ({name}):\n")
            print(per_trace_table(evaluation.rows))
        if args.show_missed:
            for line in missed_lines(name, evaluation.rows):
                print(line, file=sys.stderr)
    settings = {key: (str(value) if isinstance(value, Path) else value) for key, value in vars(args).items()
                if key != "handler"}
    if args.json:
        write_json(args.json, datasets, settings)
    if args.plot:
        plot(args.plot, datasets)
    return 0
