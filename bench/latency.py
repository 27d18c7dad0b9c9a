"""`make bench`: what workset adds to each request, against the same fake provider called directly.

For sessions of 10, 100 and 300 messages it measures the turn after an already-seen history (the history is sent
once, then the request with the next assistant message and tool result): median and p95 latency through workset
and straight to the provider, the time workset spends in its own steps (x-workset-ms), and requests per second
with 32 concurrent clients.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from servers import ServerProcess, free_port  # noqa: E402

from proxy.evaluate.formats import to_wire  # noqa: E402

TRACES = ROOT.parent / "shared" / "traces" / "swe-dev.jsonl.gz"


def long_history(length: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Messages of a real long SWE-agent run when the traces are here, else a synthetic run of the same shape."""
    if TRACES.is_file():
        with gzip.open(TRACES, "rt") as handle:
            runs = [json.loads(line) for line in handle]
        run = max(runs, key=lambda r: len(r["messages"]))
        messages, tools = run["messages"], run["tools"]
        while len(messages) < length:
            messages = messages + messages[2:]
        return messages, tools
    messages = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "Fix the bug."}]
    step = 0
    while len(messages) < length:
        call = f"call_{step}"
        messages.append({"role": "assistant", "content": f"THOUGHT: step {step}", "tool_calls": [
            {"id": call, "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": f"cat f{step}.py"})}}]})
        messages.append({"role": "tool", "tool_call_id": call, "content": "<returncode>0</returncode>\n" + "line of code\n" * 60})
        step += 1
    return messages, []


def turn_at(messages: list[dict[str, Any]], length: int) -> int:
    """An index near `length` where messages[:index] ends with a tool result (a complete turn)."""
    index = length
    while index < len(messages) and messages[index - 1].get("role") != "tool":
        index += 1
    return index


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


PATHS = {"chat": "/v1/chat/completions", "anthropic": "/v1/messages", "responses": "/v1/responses"}


def measure_turns(proxy: str, direct: str, messages: list[dict[str, Any]], tools: list[Any], length: int,
                  rounds: int, model: str, wires: tuple[str, ...] = ("chat",)) -> dict[str, dict[str, float]]:
    """Per wire format: the turn's latency through workset and straight to the provider. With several formats,
    each round sends the same turn in every format back to back, so the machine's drift touches them alike, and
    `gap_median` is the median of the round-by-round differences from the first format's added latency."""
    end = turn_at(messages, length)
    start = end - 2  # the already-seen history: the turn adds an assistant message and its tool result
    through: dict[str, list[float]] = {wire: [] for wire in wires}
    straight: dict[str, list[float]] = {wire: [] for wire in wires}
    own: dict[str, list[float]] = {wire: [] for wire in wires}
    sent: dict[str, int] = {}
    with httpx.Client(timeout=30) as client:
        for round_number in range(rounds + 2):
            for wire in wires:
                path = PATHS[wire]
                base = {"authorization": "Bearer bench"}
                if wire == "anthropic":
                    base["anthropic-version"] = "2023-06-01"
                session = f"bench-{wire}-{length}-{round_number}-{time.time_ns()}"
                headers = {**base, "x-workset-session": session}
                history = to_wire(wire, model, messages[:start], tools)
                client.post(proxy + path, json=history, headers=headers).raise_for_status()
                time.sleep(0.3)  # "already seen": its ingest and store writes are done, as between an agent's turns
                body = json.dumps(to_wire(wire, model, messages[:end], tools)).encode()
                began = time.perf_counter()
                response = client.post(proxy + path, content=body,
                                       headers={**headers, "content-type": "application/json"})
                elapsed = time.perf_counter() - began
                response.raise_for_status()
                began = time.perf_counter()
                client.post(direct + path, content=body,
                            headers={**base, "content-type": "application/json"}).raise_for_status()
                direct_elapsed = time.perf_counter() - began
                if round_number < 2:
                    continue  # warm-up
                through[wire].append(elapsed * 1000)
                straight[wire].append(direct_elapsed * 1000)
                own[wire].append(float(response.headers["x-workset-ms"]))
                sent[wire] = int(response.headers["x-workset-tokens-sent"])
    rows: dict[str, dict[str, float]] = {}
    reference = [a - b for a, b in zip(through[wires[0]], straight[wires[0]])]
    for wire in wires:
        added = [a - b for a, b in zip(through[wire], straight[wire])]
        rows[wire] = {
            "messages": end,
            "proxy_median": statistics.median(through[wire]),
            "direct_median": statistics.median(straight[wire]),
            "added_median": statistics.median(added),
            "added_p95": percentile(added, 0.95),
            "own_median": statistics.median(own[wire]),
            "own_p95": percentile(own[wire], 0.95),
            "tokens_sent": sent[wire],
            "gap_median": statistics.median([a - b for a, b in zip(added, reference)]),
        }
    return rows


async def throughput(urls: list[str], body: bytes, clients: int, seconds: float, workset: bool) -> float:
    """Requests per second of `clients` each sending `body` again and again, in its own session; with several
    urls (replicas), each client's requests go to them in turn."""
    done = 0
    deadline = 0.0
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(timeout=30, limits=limits) as client:
        async def worker(number: int) -> None:
            nonlocal done
            headers = {"authorization": "Bearer bench", "content-type": "application/json"}
            if workset:
                headers["x-workset-session"] = f"rps-{number}"
            sent = number
            while time.perf_counter() < deadline:
                url = urls[sent % len(urls)]
                sent += 1
                response = await client.post(url + "/v1/chat/completions", content=body, headers=headers)
                response.raise_for_status()
                done += 1

        if workset:  # each client's session is seen once before timing: the figure is for warm sessions
            headers = {"authorization": "Bearer bench", "content-type": "application/json"}
            await asyncio.gather(*(client.post(urls[n % len(urls)] + "/v1/chat/completions", content=body,
                                               headers={**headers, "x-workset-session": f"rps-{n}"}) for n in range(clients)))
        began = time.perf_counter()
        deadline = began + seconds
        await asyncio.gather(*(worker(n) for n in range(clients)))
        return done / (time.perf_counter() - began)


def write_config(folder: Path, provider_port: int, store: dict[str, str], policy: str = "bench", log: bool = False,
                 extract_processes: int | None = None) -> Path:
    """The served workset's config: every model to the fake provider on `provider_port`; policy "bench" is the
    default policy with a budget no run reaches, so workset and the provider see bodies of the same size."""
    config: dict[str, Any] = {
        "model_list": [{"model_name": "*", "litellm_params": {"model": "openai/*",
                                                             "api_base": f"http://127.0.0.1:{provider_port}/v1"}}],
        "policies_dir": str(ROOT / "policies"),
        "policy": policy,
        "store": store,
        "logging": {"level": "info" if log else "warning"},
        "upstream": {"anthropic_base": f"http://127.0.0.1:{provider_port}"},
    }
    if extract_processes is not None:
        config["ingest"] = {"extract_processes": extract_processes}
    if policy == "bench":
        default = yaml.safe_load((ROOT / "policies" / "default.yaml").read_text())
        default.update(name="bench", description="default, with a budget no bench run reaches")
        default["budget"] = {**default["budget"], "max_input_tokens": 1_000_000}
        (folder / "bench.yaml").write_text(yaml.safe_dump(default))
        config["policy"] = str(folder / "bench.yaml")
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--policy", default="bench",
                        help="policy name or YAML path (default: the default policy with a budget no run reaches, so "
                             "workset and the provider see bodies of the same size)")
    parser.add_argument("--log", help="write the proxy's request log (JSON lines) to this file")
    parser.add_argument("--model", default="gpt-4.1", help="model name sent upstream")
    parser.add_argument("--extract-processes", type=int,
                        help="ingest.extract_processes of the served workset (default: config's; 0: on its threads)")
    args = parser.parse_args()
    messages, tools = long_history(320)
    folder = Path(tempfile.mkdtemp(prefix="workset-bench-"))
    provider_port, proxy_port = free_port(), free_port()
    config_path = write_config(folder, provider_port, {"path": str(folder / "bench.db")}, args.policy, bool(args.log),
                               args.extract_processes)
    python = sys.executable
    provider = ServerProcess([python, "-m", "bench.fake_provider", str(provider_port)], provider_port, cwd=ROOT)
    proxy = ServerProcess([python, "-m", "proxy", "serve", "--config", str(config_path), "--port",
                           str(proxy_port)], proxy_port, cwd=ROOT)
    with provider, proxy:
        print(f"workset bench: policy {args.policy}, model {args.model}, {args.rounds} rounds per size, "
              "fake provider on loopback")
        print(f"{'messages':>8} {'tokens':>7} {'direct ms':>10} {'proxy ms':>9} {'added med':>10} {'added p95':>10} "
              f"{'own med':>8} {'own p95':>8} {'own share':>9}")
        rows = []
        for length in (10, 100, 300):
            row = measure_turns(proxy.url, provider.url, messages, tools, length, args.rounds, args.model)["chat"]
            rows.append(row)
            share = row["own_median"] / row["added_median"] if row["added_median"] > 0 else float("nan")
            print(f"{row['messages']:>8} {row['tokens_sent']:>7} {row['direct_median']:>10.2f} {row['proxy_median']:>9.2f} "
                  f"{row['added_median']:>10.2f} {row['added_p95']:>10.2f} {row['own_median']:>8.2f} "
                  f"{row['own_p95']:>8.2f} {share:>9.0%}")
        print("the same turns in each wire format, interleaved round by round (added and own medians; the gap is "
              "the median of each round's difference from chat):")
        gaps = []
        for length in (100, 300):
            measured = measure_turns(proxy.url, provider.url, messages, tools, length, args.rounds, args.model,
                                     ("chat", "anthropic", "responses"))
            for wire, row in measured.items():
                if wire != "chat":
                    gaps.append(row["gap_median"])
                print(f"  {wire:<10} {row['messages']:>4} messages: added {row['added_median']:.2f} ms, own "
                      f"{row['own_median']:.2f} ms, gap {row['gap_median']:+.2f} ms")
        end = turn_at(messages, 100)
        body = json.dumps({"model": args.model, "messages": messages[:end], "tools": tools}).encode()
        try:
            rps_proxy = asyncio.run(throughput([proxy.url], body, 32, args.seconds, workset=True))
        except httpx.HTTPError:
            print("workset's log (tail):\n" + proxy.output()[-3000:], file=sys.stderr)
            raise
        rps_direct = asyncio.run(throughput([provider.url], body, 32, args.seconds, workset=False))
        print(f"32 concurrent clients, {end}-message requests: {rps_proxy:.0f} req/s through workset, "
              f"{rps_direct:.0f} req/s direct")
        small, large = rows[0], rows[-1]
        print("targets:")
        print(f"  own steps at 300 messages < 3 ms: {large['own_median']:.2f} ms "
              f"{'ok' if large['own_median'] < 3 else 'MISSED'}")
        ratio = large["added_median"] / small["added_median"] if small["added_median"] > 0 else float("inf")
        print(f"  300-message turn <= 2x 10-message turn (added): {ratio:.2f}x {'ok' if ratio <= 2 else 'MISSED'}")
        print(f"  added median < 10 ms: {max(r['added_median'] for r in rows):.2f} ms "
              f"{'ok' if max(r['added_median'] for r in rows) < 10 else 'MISSED'}")
        print(f"  /v1/messages and /v1/responses within 1 ms of chat: {max(gaps):+.2f} ms at most "
              f"{'ok' if max(gaps) <= 1 else 'MISSED'}")
    if args.log:
        Path(args.log).write_text(proxy.output())


if __name__ == "__main__":
    main()
