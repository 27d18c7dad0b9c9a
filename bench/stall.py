"""`make bench` (last): does one tenant's hostile text delay the others? (issue 9: no more than 20 ms)

A real `workset serve` in front of two fake providers (one per tenant, so that the provider parsing the attacker's
megabytes does not hold up the victim's answers: what is measured is workset). A victim (its own key) sends small
chat requests one after another, first alone (its baseline), then while an attacker (another key, in a process of
its own, as another tenant is: encoding a megabyte of JSON holds a client's event loop for up to 18 ms) sends, one
after another, conversations whose tool output is 1 MB of an adversarial text (each of bench.adversarial's texts
in turn). Reported: the victim's latency alone and under attack (median, p95, max) and the attacker's own
x-workset-ms, alone (its own work, the machine otherwise idle) and beside the victim. Last, the victim sends the
same requests straight to its provider during a third round of the attack: the delay it sees then is the
machine's (two cores shared by both clients, both providers and workset's work for the attacker), not workset's.
With --listers N, the attacker also lists its sessions from N threads, again and again, while it attacks: each
listing waits for the store's writes queued before it (the megabytes' indexing among them), and any key holder
can send as many as it likes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from bench.adversarial import adversarial_texts  # noqa: E402
from bench.latency import percentile  # noqa: E402
from bench.machine import CpuTicks, speed_line  # noqa: E402
from bench.settings import add_settings_option, apply_settings  # noqa: E402
from servers import ServerProcess, free_port  # noqa: E402

TARGET_MS = 20.0  # issue 9: no other tenant's request delayed by more than this while a hostile one runs
OWN_TARGET_MS = 50.0  # issue 9: no request's own work above this for 1 MB of any text
CHAT = "/v1/chat/completions"


def victim_body(step: int) -> dict[str, Any]:
    return {"model": "victim-model", "messages": [
        {"role": "system", "content": "You are a helpful agent."},
        {"role": "user", "content": f"Summarise the ticket queue, run {step}."}]}


def attack_body(name: str, text: str) -> dict[str, Any]:
    call = {"id": "call_0", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": "cat dump"})}}
    return {"model": "attacker-model", "messages": [
        {"role": "system", "content": f"You are a coding agent ({name})."},
        {"role": "user", "content": "Look at the dump."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_0", "content": text}]}


@dataclass
class Sample:
    """One victim request: its latency and what workset says of it (its own work, its wait for a worker)."""
    ms: float
    own_ms: float
    queue_ms: float


async def victim(client: httpx.AsyncClient, url: str, stop: asyncio.Event, seconds: float | None) -> list[Sample]:
    latencies: list[Sample] = []
    started = time.perf_counter()
    step = 0
    while not stop.is_set() and (seconds is None or time.perf_counter() - started < seconds):
        began = time.perf_counter()
        response = await client.post(url + CHAT, json=victim_body(step), headers={"authorization": "Bearer sk-victim"})
        response.raise_for_status()
        latencies.append(Sample((time.perf_counter() - began) * 1000, float(response.headers.get("x-workset-ms", "nan")),
                                float(response.headers.get("x-workset-queue-ms", "nan"))))
        step += 1
        await asyncio.sleep(0.005)
    return latencies


def attacker(url: str, size: int, ready: Any, rounds: Sequence[Any], answers: Any, listers: int = 0) -> None:
    """The attacking tenant, in a process of its own: its texts made, it says `ready`; then for each event of
    `rounds`, it waits for it, sends every text one after another (new conversations each round) and puts its
    x-workset-ms figures on `answers` with the milliseconds of its listings (or the error that stopped it). With
    `listers`, from the second round on that many threads of it also ask for its session list again and again (each
    waits for the store's writes queued before it, the megabytes' indexing among them)."""
    try:
        texts = adversarial_texts(size)
        ready.set()
        with httpx.Client(timeout=120) as client:
            for number, go in enumerate(rounds):
                go.wait()
                own: dict[str, float] = {}
                with listing(url, listers if number else 0) as listed:
                    for name, text in texts.items():
                        response = client.post(url + CHAT, content=json.dumps(attack_body(f"{name}, round {number}", text)).encode(),
                                               headers={"authorization": "Bearer sk-attacker", "content-type": "application/json"})
                        response.raise_for_status()
                        own[name] = float(response.headers.get("x-workset-ms", "nan"))
                answers.put((own, listed))
    except BaseException as error:  # the bench reports it instead of waiting for ever
        answers.put(f"{error.__class__.__name__}: {error}")
        raise


@contextmanager
def listing(url: str, threads: int) -> Iterator[list[float]]:
    """`threads` threads listing the attacker's sessions until the block ends; the milliseconds of each listing."""
    done: list[float] = []
    stop = threading.Event()

    def lister() -> None:
        with httpx.Client(timeout=120) as client:
            while not stop.is_set():
                began = time.perf_counter()
                client.get(url + "/v1/workset/sessions", headers={"authorization": "Bearer sk-attacker"}).raise_for_status()
                done.append((time.perf_counter() - began) * 1000)

    running = [threading.Thread(target=lister, daemon=True) for _ in range(threads)]
    for thread in running:
        thread.start()
    try:
        yield done
    finally:
        stop.set()
        for thread in running:
            thread.join(120)


@dataclass
class Figures:
    alone: list[Sample]  # the victim's requests, no attacker
    under: list[Sample]  # the victim's requests under attack
    own_alone: dict[str, float]  # the attacker's x-workset-ms by text, no victim: its own work, the machine otherwise idle
    own: dict[str, float]  # the attacker's x-workset-ms by text, beside the victim
    direct_alone: list[Sample]  # the victim's requests straight to its provider (no workset), no attacker
    direct_under: list[Sample]  # the same under attack: what the machine itself adds, workset's GIL aside
    listings: list[float]  # ms of the attacker's session listings beside the victim (with --listers)
    steal_alone: float  # the share of the machine's CPU time the host gave to other machines: victim alone
    steal_under: float  # the same, the victim under attack


async def run(url: str, provider_url: str, size: int, baseline_s: float, listers: int = 0) -> Figures:
    spawn = multiprocessing.get_context("spawn")
    ready, answers = spawn.Event(), spawn.Queue()
    rounds = [spawn.Event(), spawn.Event(), spawn.Event()]
    attacking = spawn.Process(target=attacker, args=(url, size, ready, rounds, answers, listers), daemon=True)
    attacking.start()
    loop = asyncio.get_running_loop()

    listings: list[list[float]] = []

    async def answer() -> dict[str, float]:
        told = await loop.run_in_executor(None, answers.get, True, 1200)
        if isinstance(told, str):
            raise RuntimeError(f"the attacker failed: {told}")
        own, listed = told
        listings.append(listed)
        return own

    try:
        async with httpx.AsyncClient(timeout=120) as client:
            # untimed: the first request opens connections and runs workset's first-use paths
            (await client.post(url + CHAT, json=victim_body(-1), headers={"authorization": "Bearer sk-victim"})).raise_for_status()
            if not await loop.run_in_executor(None, ready.wait, 600):
                raise RuntimeError("the attacker's process did not get ready in 600 s")
            ticks = CpuTicks.now()
            alone = await victim(client, url, asyncio.Event(), baseline_s)
            steal_alone = CpuTicks.now().steal_since(ticks)
            direct_alone = await victim(client, provider_url, asyncio.Event(), baseline_s)
            rounds[0].set()
            own_alone = await answer()

            async def beside(target: str, go: Any) -> tuple[list[Sample], dict[str, float]]:
                stop = asyncio.Event()
                go.set()
                under_attack = asyncio.ensure_future(victim(client, target, stop, None))
                try:
                    own = await answer()
                finally:
                    stop.set()
                return await under_attack, own

            ticks = CpuTicks.now()
            under, own = await beside(url, rounds[1])
            steal_under = CpuTicks.now().steal_since(ticks)
            direct_under, _ = await beside(provider_url, rounds[2])
    finally:
        attacking.join(10)
        if attacking.is_alive():
            attacking.kill()
    return Figures(alone, under, own_alone, own, direct_alone, direct_under, listings[1],  # round 1: beside the victim
                   steal_alone, steal_under)


def delays(alone: list[Sample], under: list[Sample]) -> tuple[float, float, float]:
    """(median alone, p95 delay, worst delay): latencies under attack over the median alone, in ms."""
    base = statistics.median(sample.ms for sample in alone)
    latencies = [sample.ms for sample in under]
    return base, percentile(latencies, 0.95) - base, max(latencies) - base


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=1_000_000, help="characters of each hostile tool output")
    parser.add_argument("--baseline-s", type=float, default=5.0, help="seconds the victim runs alone first")
    parser.add_argument("--listers", type=int, default=0,
                        help="threads of the attacker that list its sessions again and again while it attacks")
    add_settings_option(parser)
    args = parser.parse_args(argv)
    count = len(adversarial_texts(1000))  # their number (the attacker's process makes them at full size)
    speed = speed_line()  # before any server runs: the machine alone
    with tempfile.TemporaryDirectory() as folder_name:
        folder = Path(folder_name)
        ports = {name: free_port() for name in ("victim", "attacker", "proxy")}
        providers = {name: ServerProcess([sys.executable, "-m", "bench.fake_provider", str(ports[name])], ports[name],
                                         cwd=ROOT) for name in ("victim", "attacker")}
        config = {"model_list": [{"model_name": f"{name}-model", "litellm_params": {
                      "model": "openai/gpt-test", "api_base": provider.url + "/v1"}} for name, provider in providers.items()],
                  "policies_dir": str(ROOT / "policies"), "store": {"path": str(folder / "stall.db")},
                  "server": {"max_body_bytes": 8 * args.size + 1_000_000}, "logging": {"level": "warning"}}
        apply_settings(config, args.set)
        (folder / "config.yaml").write_text(yaml.safe_dump(config))
        proxy = ServerProcess([sys.executable, "-m", "proxy", "serve", "--config", str(folder / "config.yaml"),
                               "--port", str(ports["proxy"])], ports["proxy"], cwd=ROOT)
        with providers["victim"], providers["attacker"], proxy:
            figures = asyncio.run(run(proxy.url, providers["victim"].url, args.size, args.baseline_s, args.listers))
    alone, under = [sample.ms for sample in figures.alone], [sample.ms for sample in figures.under]
    base, p95_delay, worst_delay = delays(figures.alone, figures.under)
    print(speed)
    print(f"one tenant's hostile texts against another's requests: {count} texts of {args.size:,} chars")
    print(f"victim alone:        {len(alone):>4} requests, median {base:.1f} ms, p95 {percentile(alone, 0.95):.1f} ms,"
          f" max {max(alone):.1f} ms")
    print(f"victim under attack: {len(under):>4} requests, median {statistics.median(under):.1f} ms, "
          f"p95 {percentile(under, 0.95):.1f} ms, max {max(under):.1f} ms")
    for what, own in (("alone", figures.own_alone), ("beside the victim", figures.own)):
        worst = sorted(own.items(), key=lambda item: -item[1])[:3]
        print(f"attacker x-workset-ms, {what}: median {statistics.median(own.values()):.1f} ms, worst "
              + ", ".join(f"{ms:.1f} ms ({name})" for name, ms in worst)
              + (f" (target {OWN_TARGET_MS:g} ms): {'ok' if worst[0][1] <= OWN_TARGET_MS else 'MISSED'}"
                 if own is figures.own_alone else ""))
    print(f"delay of the victim (p95 / worst, over its median alone): {p95_delay:.1f} / {worst_delay:.1f} ms "
          f"(target {TARGET_MS:g} ms): {'ok' if worst_delay <= TARGET_MS else 'MISSED'}")
    if figures.listings:
        print(f"the attacker's session listings beside the victim ({args.listers} threads): {len(figures.listings)}, "
              f"median {statistics.median(figures.listings):.1f} ms, worst {max(figures.listings):.1f} ms")
    # where the slowest went: workset's own work, its wait for a worker, and the rest (event loop, provider, client)
    print("the victim's slowest under attack: " + ", ".join(
        f"{sample.ms:.1f} ms (own {sample.own_ms:.1f}, queued {sample.queue_ms:.1f})"
        for sample in sorted(figures.under, key=lambda sample: -sample.ms)[:3]))
    # what the machine itself adds without any attack: a worst case below it cannot be told apart from noise
    print(f"the machine's own noise (the victim alone, worst over median): {max(alone) - base:.1f} ms; CPU time "
          f"stolen by the host {figures.steal_alone:.0%} while the victim ran alone, {figures.steal_under:.0%} under attack")
    # and during the attack, with workset out of the victim's way: the two clients, the providers and workset's
    # work for the attacker share the cores, so this much delay is the machine's, not workset's hold on the victim
    direct_base, direct_p95, direct_worst = delays(figures.direct_alone, figures.direct_under)
    print(f"the machine's own delay under the attack (the victim straight to its provider, {len(figures.direct_under)} "
          f"requests, p95 / worst over its median alone of {direct_base:.1f} ms): {direct_p95:.1f} / {direct_worst:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
