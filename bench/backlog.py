"""A tenant sending megabytes without pause: does the store's backlog hold up another tenant, or grow without bound?

    python -m bench.backlog                      # 40 s of attack, then a summary
    python -m bench.backlog --listers 8          # the attacker also lists its sessions from 8 threads

A real `workset serve` in front of a fake provider. The attacker (key A) sends, one after another without pause,
new conversations whose tool output is 1 MB of one of bench.adversarial's texts: faster than the store's writer
indexes them. Every 2 s the bench reads the write queue (/metrics) and the server's resident memory, and another
tenant (key B) sends a small chat request, then lists its sessions: that listing waits for B's own answered turn
to be in the store, so its latency is how far behind B's writes are (and whether B's view waits for A's).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from bench.adversarial import adversarial_texts  # noqa: E402
from bench.machine import speed_line  # noqa: E402
from bench.settings import add_settings_option, apply_settings  # noqa: E402
from bench.stall import CHAT, attack_body  # noqa: E402
from servers import ServerProcess, free_port  # noqa: E402

SAMPLE_EVERY_S = 2.0


def resident_mb(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split("VmRSS:")[1].split()[0]) // 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=40.0, help="how long the attacker sends")
    parser.add_argument("--listers", type=int, default=0, help="threads of the attacker listing its own sessions")
    parser.add_argument("--size", type=int, default=1_000_000, help="characters of each hostile tool output")
    add_settings_option(parser)
    args = parser.parse_args(argv)
    texts = list(adversarial_texts(args.size).items())
    speed = speed_line()
    with tempfile.TemporaryDirectory() as folder_name:
        folder = Path(folder_name)
        provider_port, workset_port = free_port(), free_port()
        provider = ServerProcess([sys.executable, "-m", "bench.fake_provider", str(provider_port)], provider_port,
                                 cwd=ROOT)
        config: dict[str, Any] = {
            "model_list": [{"model_name": "*", "litellm_params": {"model": "openai/gpt-test",
                                                                   "api_base": provider.url + "/v1"}}],
            "policies_dir": str(ROOT / "policies"), "store": {"path": str(folder / "backlog.db")},
            "server": {"max_body_bytes": 8 * args.size + 1_000_000}, "logging": {"level": "warning"}}
        apply_settings(config, args.set)
        (folder / "config.yaml").write_text(yaml.safe_dump(config))
        workset = ServerProcess([sys.executable, "-m", "proxy", "serve", "--config", str(folder / "config.yaml"),
                                 "--port", str(workset_port)], workset_port, cwd=ROOT)
        with provider, workset:
            assert workset.proc is not None
            samples, sent, listed = run(workset.url, workset.proc.pid, texts, args.seconds, args.listers)
    print(speed)
    print(f"the attacker sent {sent} requests of {args.size:,} chars in {args.seconds:g} s"
          + (f", and listed its sessions {listed} times from {args.listers} threads" if args.listers else ""))
    for at, queued, memory, turn_ms, listing_ms in samples:
        print(f"  t={at:5.1f} s  write queue {queued:5d}  memory {memory:5d} MB  "
              f"B's turn {turn_ms:6.1f} ms, then its listing {listing_ms:8.1f} ms")
    listings = [sample[4] for sample in samples]
    print(f"B's listings: median {statistics.median(listings):.1f} ms, worst {max(listings):.1f} ms; "
          f"write queue at most {max(s[1] for s in samples)}, memory at most {max(s[2] for s in samples)} MB")
    return 0


def run(url: str, pid: int, texts: list[tuple[str, str]], seconds: float,
        listers: int) -> tuple[list[tuple[float, int, int, float, float]], int, int]:
    stop = threading.Event()
    counts = {"sent": 0, "listed": 0}

    def attack() -> None:
        with httpx.Client(timeout=300) as client:
            number = 0
            while not stop.is_set():
                name, text = texts[number % len(texts)]
                number += 1
                client.post(url + CHAT, content=json.dumps(attack_body(f"{name} {number}", text)).encode(),
                            headers={"authorization": "Bearer sk-a", "content-type": "application/json"}
                            ).raise_for_status()
                counts["sent"] += 1

    def lister() -> None:
        with httpx.Client(timeout=300) as client:
            while not stop.is_set():
                client.get(url + "/v1/workset/sessions", headers={"authorization": "Bearer sk-a"}).raise_for_status()
                counts["listed"] += 1

    threads = [threading.Thread(target=attack, daemon=True)]
    threads += [threading.Thread(target=lister, daemon=True) for _ in range(listers)]
    for thread in threads:
        thread.start()
    samples = []
    began = time.monotonic()
    try:
        with httpx.Client(timeout=300) as client:
            while time.monotonic() - began < seconds:
                metrics = client.get(url + "/metrics").text
                queued = int(float(re.search(r"^workset_store_write_queue (\S+)", metrics, re.M).group(1)))  # type: ignore[union-attr]
                started = time.perf_counter()
                client.post(url + CHAT, json={"model": "m", "messages": [{"role": "user", "content": f"B at {started}"}]},
                            headers={"authorization": "Bearer sk-b"}).raise_for_status()
                answered = time.perf_counter()
                client.get(url + "/v1/workset/sessions", headers={"authorization": "Bearer sk-b"}).raise_for_status()
                listed = time.perf_counter()
                samples.append((time.monotonic() - began, queued, resident_mb(pid), (answered - started) * 1000,
                                (listed - answered) * 1000))
                time.sleep(SAMPLE_EVERY_S)
    finally:
        stop.set()
        for thread in threads:
            thread.join(300)
    return samples, counts["sent"], counts["listed"]


if __name__ == "__main__":
    sys.exit(main())
