"""`make bench`: what the decision record, the accounting and the metrics cost per request, at 300 messages.

A real long SWE run (or a synthetic one of the same shape) is forwarded turn by turn through the Engine in-process,
as the server does; for each request past 300 messages it times, in this thread:
  - decide: building the request's decision record (inside Engine.prepare, on the request's path),
  - record: the accounting and the stored row (after the answer, on a worker), handed to the store's queue,
  - metrics: Metrics.request and Metrics.accounted on the request's log fields,
and, apart, the store's writer-thread time for the rows (what the queue costs in the background).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from proxy import engine as engine_module
from proxy.accounting import Usage, account, prices_for
from proxy.cli import load_settings
from proxy.evaluate.strategies import policy_engine
from proxy.metrics import Metrics
from proxy.report import turn_row
from proxy.tokens import TokenCounter

from .latency import ROOT, long_history, turn_at

TARGET_MS = 0.3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=300)
    parser.add_argument("--requests", type=int, default=16,
                        help="the longest trace run ends soon after 300 messages: this many turns stay within it")
    args = parser.parse_args()
    config, policies = load_settings(str(ROOT / "config.yaml"))
    policy = policies[config.policy]
    with tempfile.TemporaryDirectory(prefix="workset-bench-") as folder:
        engine = policy_engine({policy.name: policy}, TokenCounter(), Path(folder))
        metrics = Metrics([policy.name], engine.store.size_bytes, engine.store.queued_writes)
        messages, tools = long_history(args.messages + 4 * args.requests)
        decide_ms: list[float] = []
        original = engine_module.decide

        def timed_decide(*arguments: Any) -> Any:
            started = time.perf_counter()
            result = original(*arguments)
            decide_ms.append((time.perf_counter() - started) * 1000)
            return result

        engine_module.decide = timed_decide
        record_ms: list[float] = []
        metrics_ms: list[float] = []
        prices = prices_for("gpt-4o", "gpt-4o", config.prices, {"gpt-4o": {"input_cost_per_token": 2.5e-6}})
        start = turn_at(messages, args.messages)
        end = start
        try:
            for _ in range(args.requests):
                body = {"model": "gpt-4o", "messages": messages[:end], "tools": tools}
                prepared = engine.prepare(body, "bench", "bench-session", policy.name)
                engine.settle(prepared)
                fields = {"route": "chat", "model": "gpt-4o", "provider": "openai", "policy": prepared.policy,
                          "tokens_original": prepared.tokens_original, "tokens_sent": prepared.tokens_sent,
                          "compacted": prepared.compacted, "recall": [], "recall_rounds": 0, "workset_ms": 1.5,
                          "deferred_ms": 0.5, "upstream_ms": 200.0, "latency_ms": 203.0, "status": 200}
                started = time.perf_counter()
                figures = account(Usage(prepared.tokens_sent, 20, prepared.tokens_sent // 2, None),
                                  prepared.tokens_sent, prepared.tokens_original, prepared.whole_reused, 0, prices)
                row = turn_row("chat", "gpt-4o", prepared, figures, fields)
                engine.store.add_turn(prepared.session_id or "", lambda: row,
                                      prepared.decision.made if prepared.decision else {})
                record_ms.append((time.perf_counter() - started) * 1000)
                started = time.perf_counter()
                metrics.request(fields)
                metrics.accounted("chat", prepared.policy, figures.cached, figures.written)
                metrics_ms.append((time.perf_counter() - started) * 1000)
                end = turn_at(messages, end + 1)
            started = time.perf_counter()
            engine.store.flush()
            flushed_ms = (time.perf_counter() - started) * 1000
        finally:
            engine_module.decide = original
            engine.store.close()
    steady = decide_ms[1:]  # the first request hashes every message workset wrote; later ones only new ones
    total = [d + r + m for d, r, m in zip(steady, record_ms[1:], metrics_ms[1:])]
    print(f"decision record, accounting and metrics per request at {args.messages}+ messages "
          f"({len(total)} requests, median / p95 ms):")
    for name, values in (("decide (on the request's path)", steady), ("record row (after the answer)", record_ms[1:]),
                         ("metrics", metrics_ms[1:]), ("all of it", total)):
        print(f"  {name:<32} {statistics.median(values):.3f} / {_p95(values):.3f}")
    print(f"  (the store's writer, in the background: {flushed_ms:.1f} ms left to write at the end)")
    print(f"  {'PASS' if statistics.median(total) < TARGET_MS else 'FAIL'}: target under {TARGET_MS} ms")
    return 0


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


if __name__ == "__main__":
    raise SystemExit(main())
