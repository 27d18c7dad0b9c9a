"""`make bench`: the PostgreSQL store beside SQLite's. One workset on a SQLite file, then two replicas sharing a
PostgreSQL database (a schema of its own, dropped after): workset's own steps on a turn at 300 messages (x-workset-
ms), the wait for a session's writes to be durable before its answer goes back (replicas only: the next request
may go to the other replica), requests per second at 32 concurrent clients (through the two replicas, each
client's requests to them in turn), and the CPU each process spent per request, which is what limits them on
this machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Callable

import httpx

from bench.latency import ROOT, long_history, measure_turns, throughput, turn_at, write_config

sys.path.insert(0, str(ROOT / "tests"))
from servers import ServerProcess, free_port  # noqa: E402

DATABASE = os.environ.get("WORKSET_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test")
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: Callable[[], list[int]]) -> float:
    """User and system CPU time of the processes `pids()` names, from /proc."""
    total = 0
    for pid in pids():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / TICKS


def named(name: str) -> Callable[[], list[int]]:
    def pids() -> list[int]:
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if (entry / "comm").read_text().strip() == name:
                        found.append(int(entry.name))
                except OSError:
                    continue
        return found

    return pids


def durable_ms(log: str) -> list[float]:
    """The durable waits the replicas logged (request lines with durable_ms)."""
    waits = []
    for line in log.splitlines():
        if '"durable_ms"' in line:
            try:
                waits.append(float(json.loads(line)["durable_ms"]))
            except (ValueError, KeyError):
                continue
    return waits


def table_figures(url: str) -> dict[str, tuple[int, int, int, int]]:
    """Per table of the store's schema: rows inserted, rows updated, index and sequential scans, bytes."""
    import psycopg

    with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
        rows = conn.execute(
            "SELECT relname, n_tup_ins, n_tup_upd, coalesce(idx_scan, 0) + coalesce(seq_scan, 0),"
            " pg_total_relation_size(relid) FROM pg_stat_user_tables WHERE schemaname = current_schema()").fetchall()
    return {name: (inserted, updated, scans, size) for name, inserted, updated, scans, size in rows}


def sizing(url: str, replicas: list[ServerProcess], messages: list[dict[str, Any]], tools: list[Any],
           turns: int) -> tuple[int, dict[str, tuple[float, float, float, float]]]:
    """A conversation replayed turn by turn through the replicas in turn (each request adds the agent's next
    message and its tool result): per request, what each table gained and how often it was read."""
    time.sleep(1.5)  # what came before is published first (PostgreSQL publishes table statistics within a second)
    before = table_figures(url)
    ends = [t for t in range(3, len(messages)) if messages[t - 1].get("role") == "tool"][:turns]
    with httpx.Client(timeout=60) as client:
        for number, end in enumerate(ends):
            client.post(replicas[number % len(replicas)].url + "/v1/chat/completions",
                        json={"model": "gpt-4.1", "messages": messages[:end], "tools": tools},
                        headers={"authorization": "Bearer sizing"}).raise_for_status()
    time.sleep(1.5)  # PostgreSQL publishes its table statistics within a second
    after = table_figures(url)
    count = len(ends)
    return count, {name: tuple((after[name][i] - before.get(name, (0, 0, 0, 0))[i]) / count for i in range(4))
                   for name in after}


def run(label: str, servers: list[ServerProcess], provider: ServerProcess, messages: list[dict[str, Any]],
        tools: list[Any], rounds: int, seconds: float) -> dict[str, Any]:
    row = measure_turns(servers[0].url, provider.url, messages, tools, 300, rounds, "gpt-4.1")["chat"]
    end = turn_at(messages, 100)
    body = json.dumps({"model": "gpt-4.1", "messages": messages[:end], "tools": tools}).encode()
    workset_pids = lambda: [s.proc.pid for s in servers if s.proc is not None]  # noqa: E731
    before = (cpu_seconds(workset_pids), cpu_seconds(named("postgres")), time.perf_counter())
    rps = asyncio.run(throughput([s.url for s in servers], body, 32, seconds, workset=True))
    spent = time.perf_counter() - before[2]
    requests = rps * spent
    return {"label": label, "own_median": row["own_median"], "own_p95": row["own_p95"],
            "added_median": row["added_median"], "rps": rps,
            "workset_cpu_ms": (cpu_seconds(workset_pids) - before[0]) / requests * 1000,
            "postgres_cpu_ms": (cpu_seconds(named("postgres")) - before[1]) / requests * 1000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--sizing-turns", type=int, default=80)
    args = parser.parse_args()
    try:
        import psycopg

        psycopg.connect(DATABASE, connect_timeout=5).close()
    except Exception as error:
        print(f"workset replicas bench: PostgreSQL not reachable at {DATABASE} ({error}); skipped")
        return
    messages, tools = long_history(320)
    folder = Path(tempfile.mkdtemp(prefix="workset-bench-replicas-"))
    schema = "bench_" + uuid.uuid4().hex[:12]
    store_url = f"{DATABASE}{'&' if '?' in DATABASE else '?'}options=-csearch_path%3D{schema}"
    python = sys.executable
    provider_port = free_port()
    provider = ServerProcess([python, "-m", "bench.fake_provider", str(provider_port)], provider_port, cwd=ROOT)
    rows = []
    with provider:
        (folder / "sqlite").mkdir()
        sqlite_config = write_config(folder / "sqlite", provider_port, {"path": str(folder / "bench.db")})
        port = free_port()
        with ServerProcess([python, "-m", "proxy", "serve", "--config", str(sqlite_config), "--port", str(port)],
                           port, cwd=ROOT) as single:
            rows.append(run("SQLite, one process", [single], provider, messages, tools, args.rounds, args.seconds))
        (folder / "pg").mkdir()
        pg_config = write_config(folder / "pg", provider_port, {"url": store_url}, log=True)
        ports = [free_port(), free_port()]
        replicas = [ServerProcess([python, "-m", "proxy", "serve", "--config", str(pg_config), "--port", str(p)], p,
                                  cwd=ROOT) for p in ports]
        try:
            for replica in replicas:
                replica.start()
            try:
                rows.append(run("PostgreSQL, two replicas", replicas, provider, messages, tools, args.rounds,
                                args.seconds))
            except httpx.HTTPError:
                print("the replicas' log (tail):\n" + "\n".join(r.output()[-3000:] for r in replicas), file=sys.stderr)
                raise
            waits = durable_ms("\n".join(r.output() for r in replicas))
            requests, per_table = sizing(store_url, replicas, messages, tools, args.sizing_turns)
        finally:
            for replica in replicas:
                replica.stop()
    import psycopg

    with psycopg.connect(DATABASE, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    print(f"workset replicas bench: {os.cpu_count()} cores, fake provider on loopback, {args.rounds} rounds, "
          f"{args.seconds:.0f} s of 32 clients")
    print(f"{'store':<26} {'own med':>8} {'own p95':>8} {'added med':>10} {'req/s':>7} {'workset cpu/req':>16} "
          f"{'postgres cpu/req':>17}")
    for row in rows:
        print(f"{row['label']:<26} {row['own_median']:>8.2f} {row['own_p95']:>8.2f} {row['added_median']:>10.2f} "
              f"{row['rps']:>7.0f} {row['workset_cpu_ms']:>14.2f}ms {row['postgres_cpu_ms']:>15.2f}ms")
    if waits:
        print(f"replicas: a session's writes durable before its answer: median {statistics.median(waits):.2f} ms, "
              f"p95 {sorted(waits)[int(0.95 * (len(waits) - 1))]:.2f} ms ({len(waits)} requests; the writes are queued "
              "while the provider works, so behind a real provider they are committed before it answers: this fake one "
              "answers in about a millisecond, and the wait shows in full)")
    print(f"sizing: a {requests}-turn conversation replayed through the replicas in turn; per request, in PostgreSQL:")
    print(f"  {'table':<16} {'rows added':>10} {'rows updated':>13} {'reads (scans)':>14} {'bytes added':>12}")
    for name, (inserted, updated, scans, size) in sorted(per_table.items(), key=lambda item: -item[1][3]):
        if inserted or updated or scans or size:
            print(f"  {name:<16} {inserted:>10.2f} {updated:>13.2f} {scans:>14.2f} {size:>12.0f}")
    print(f"  {'all':<16} {sum(v[0] for v in per_table.values()):>10.2f} {sum(v[1] for v in per_table.values()):>13.2f}"
          f" {sum(v[2] for v in per_table.values()):>14.2f} {sum(v[3] for v in per_table.values()):>12.0f}")
    print("what limits them: the CPU of the machine, shared by the replicas, PostgreSQL, the fake provider and the "
          "clients; the columns above are each process's CPU per request")


if __name__ == "__main__":
    main()
