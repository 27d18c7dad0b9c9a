"""`make soak`: PostgreSQL faults, on a database of the bench's own (initdb in a temporary folder as the postgres
user, a free port, its own socket folder: the shared server on 5432 is never touched). Two workset replicas share
it; agents with tool outputs talk to them in turn. Three faults:

- stopped under load: `pg_ctl stop -m fast`, OUTAGE_S seconds, started again;
- killed under load: `pg_ctl stop -m immediate` (the server dies as on a crash), started again;
- restarted while idle: stopped and started with no request in flight, then the load again.

Checked for each: no client error; both replicas build working sets again within RECOVERY_S of the database being
back; while it is away, answers say `x-workset-degraded: store`, the inspection routes answer 503 with retry-after,
/healthz says "store down" without the driver's words, `workset_store_up` is 0; afterwards every ref the working
sets show resolves, every tool output and every request's record is stored.

    python -m bench.store_faults [--outage-s 8] [--conversations 8]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import openai
import psycopg
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from fakeupstream import FakeUpstream  # noqa: E402
from servers import ServerProcess, ServerThread, free_port  # noqa: E402
from toolsteps import tool_step  # noqa: E402

RECOVERY_S = 10.0  # the bound: working sets again within this long of the database being back
KEY = "sk-store-faults"
REF = re.compile(r"\[ref:([0-9a-f]{6,})\]")


class OwnPostgres:
    """A PostgreSQL cluster of the bench's own, run as the postgres user when this process is root."""

    def __init__(self, folder: Path) -> None:
        self.bin = _postgres_bin()
        self.data, self.sockets, self.log = folder / "data", folder / "sockets", folder / "postgres.log"
        self.port = free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        for path in (folder, self.sockets):
            path.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(folder, "postgres")
            shutil.chown(self.sockets, "postgres")
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")

    def _run(self, program: str, *args: str) -> None:
        command = [str(self.bin / program), *args]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, capture_output=True, timeout=120)

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "-o",
                  f"-p {self.port} -k {self.sockets} -c listen_addresses=127.0.0.1 -c fsync=off", "start")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")


def _postgres_bin() -> Path:
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).parent
    for candidate in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (candidate / "pg_ctl").exists():
            return candidate
    raise SystemExit("bench.store_faults: no PostgreSQL server binaries (pg_ctl, initdb) on this machine")


def _config(folder: Path, provider: str, store_url: str) -> Path:
    small = folder / "small.yaml"
    small.write_text(yaml.safe_dump({"name": "small", "recent_turns": 3,
                                     "budget": {"max_input_tokens": 3000, "trigger_ratio": 0.8, "target_ratio": 0.5},
                                     "tool_outputs": {"max_tokens": 600, "head_tokens": 150, "tail_tokens": 100}}))
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump({
        "model_list": [{"model_name": "*", "litellm_params": {"model": "openai/*", "api_base": provider + "/v1"}}],
        "policies_dir": str(ROOT / "policies"), "policy": str(small),
        "store": {"url": store_url, "timeout_s": 1.0, "lock_timeout_s": 5.0},
        "upstream": {"timeout_s": 10, "connect_timeout_s": 2}, "logging": {"level": "info"},
    }))
    return path


@dataclass
class Fault:
    name: str
    failures: list[str] = field(default_factory=list)
    requests: int = 0
    degraded: int = 0  # answers saying x-workset-degraded: store
    health: set[str] = field(default_factory=set)  # /healthz bodies seen while the database was away
    inspect: set[str] = field(default_factory=set)  # status, retry-after of /v1/workset/sessions then
    up_gauge: set[float] = field(default_factory=set)
    recovered_s: dict[str, float] = field(default_factory=dict)  # replica -> first working set after the restart
    unresolved: list[str] = field(default_factory=list)
    lost_outputs: list[str] = field(default_factory=list)
    unrecorded: int = 0

    def problems(self, replicas: list[str]) -> list[str]:
        found = [f"client errors: {self.failures[:3]}"] if self.failures else []
        if self.health - {'{"status": "degraded", "store": "down"}'}:
            found.append(f"/healthz while away: {sorted(self.health)}")
        if self.inspect != {"503 1"}:
            found.append(f"inspection while away: {sorted(self.inspect)}")
        if self.up_gauge != {0.0}:
            found.append(f"workset_store_up while away: {sorted(self.up_gauge)}")
        if not self.degraded and self.name != "restarted while idle":  # no request is made while it is away
            found.append("no answer said x-workset-degraded: store")
        for replica in replicas:
            took = self.recovered_s.get(replica)
            if took is None or took > RECOVERY_S:
                found.append(f"{replica}: working sets again after {took} s (at most {RECOVERY_S:g})")
        found += [f"refs that do not resolve: {self.unresolved[:3]}"] if self.unresolved else []
        found += [f"tool outputs lost: {self.lost_outputs[:3]}"] if self.lost_outputs else []
        found += [f"{self.unrecorded} requests without a record"] if self.unrecorded else []
        return found


async def run_fault(name: str, pg: OwnPostgres, replicas: list[ServerProcess], fake: FakeUpstream, store_url: str,
                    conversations: int, outage_s: float) -> Fault:
    fault = Fault(name)
    clients = [openai.AsyncOpenAI(base_url=r.url + "/v1", api_key=KEY, timeout=60, max_retries=0) for r in replicas]
    state: dict[str, Any] = {"phase": "before", "back_at": None, "stop": False}
    finals: list[tuple[str | None, int]] = []
    prefix = f"{name.split()[0]}-"
    histories = {number: [{"role": "system", "content": f"You are agent {prefix}{number}."},
                          {"role": "user", "content": f"Task {prefix}{number}: read every data file of folder {number}."}]
                 for number in range(conversations)}

    async def agent(number: int) -> None:
        messages = histories[number]  # an agent paused (the idle fault) goes on where it was
        step, session = (len(messages) - 2) // 2, None
        while not state["stop"]:
            step += 1
            messages += tool_step(str(number), step)
            replica = step % len(replicas)
            try:
                raw = await clients[replica].chat.completions.with_raw_response.create(model="m", messages=messages)
            except Exception as error:  # noqa: BLE001 - any failure is what the bench counts
                fault.failures.append(f"{state['phase']}: {error.__class__.__name__}: {str(error)[:200]}")
                return
            fault.requests += 1
            session = raw.headers.get("x-workset-session") or session
            fault.degraded += raw.headers.get("x-workset-degraded") == "store"
            if state["back_at"] is not None and raw.headers.get("x-workset-session"):
                label = f"replica {replica + 1}"
                fault.recovered_s.setdefault(label, time.monotonic() - state["back_at"])
            await asyncio.sleep(0.05)
        finals.append((session, step))

    async def observe(http: httpx.AsyncClient) -> None:
        for replica in replicas:
            fault.health.add((await http.get(replica.url + "/healthz")).text.replace(":", ": ").replace(",", ", "))
            seen = await http.get(replica.url + "/v1/workset/sessions", headers={"authorization": f"Bearer {KEY}"})
            fault.inspect.add(f"{seen.status_code} {seen.headers.get('retry-after')}")
            up = re.search(r"^workset_store_up ([0-9.]+)$", (await http.get(replica.url + "/metrics")).text, re.M)
            fault.up_gauge.add(float(up.group(1)) if up else -1.0)

    async def timeline() -> None:
        async with httpx.AsyncClient(timeout=10) as http:
            tasks = [asyncio.create_task(agent(n)) for n in range(conversations)]
            await asyncio.sleep(4)
            if name == "restarted while idle":  # the agents pause: the pooled connections sit idle
                state["stop"] = True
                await asyncio.gather(*tasks)
                state["stop"] = False
            await asyncio.to_thread(pg.stop, "immediate" if name.startswith("killed") else "fast")
            state["phase"] = "away"
            await asyncio.sleep(2)
            until = time.monotonic() + outage_s - 2
            while time.monotonic() < until:
                await observe(http)
                await asyncio.sleep(1)
            await asyncio.to_thread(pg.start)
            state["back_at"] = time.monotonic()
            state["phase"] = "after"
            if name == "restarted while idle":
                tasks = [asyncio.create_task(agent(n)) for n in range(conversations)]
            until = time.monotonic() + 30
            while time.monotonic() < until and len(fault.recovered_s) < len(replicas):
                await asyncio.sleep(0.25)
            await asyncio.sleep(3)
            state["stop"] = True
            await asyncio.gather(*tasks)

    await timeline()
    for client in clients:
        await client.close()
    back = state["back_at"]
    shown = {ref for recorded in fake.chat_requests() if recorded.at >= back
             for ref in REF.findall(str(recorded.body.get("messages")))}
    async with httpx.AsyncClient(timeout=10) as http:
        for ref in sorted(shown):
            answer = await http.get(f"{replicas[0].url}/v1/workset/evidence/{ref}",
                                    headers={"authorization": f"Bearer {KEY}"})
            if answer.status_code != 200:
                fault.unresolved.append(f"{ref}: {answer.status_code}")
    for replica in replicas:
        replica.stop()  # what they queued is written before they exit
    latest: dict[str, int] = {}
    for session, steps in finals:  # an agent's last run (the idle fault runs them twice)
        if session is not None:
            latest[session] = max(latest.get(session, 0), steps)
    with psycopg.connect(store_url, autocommit=True, connect_timeout=5) as conn:
        for session, steps in latest.items():
            kept = conn.execute("SELECT count(*) FROM evidence WHERE session_id = %s AND role = 'tool'",
                                (session,)).fetchone()[0]
            if kept < steps:
                fault.lost_outputs.append(f"{session}: {kept} of {steps}")
        recorded = conn.execute("SELECT count(*) FROM turns").fetchone()[0]
    fault.unrecorded = max(0, fault.requests - recorded)
    return fault


async def main_async(args: argparse.Namespace) -> int:
    folder = Path(tempfile.mkdtemp(prefix="workset-store-faults-"))
    folder.chmod(0o755)  # the postgres user goes through it to its cluster
    pg = OwnPostgres(folder / "pg")
    pg.start()
    fake = FakeUpstream()
    results: list[tuple[Fault, list[str]]] = []
    try:
        with ServerThread(fake.app) as provider:
            for number, name in enumerate(("stopped under load", "killed under load", "restarted while idle")):
                schema = f"faults_{number}"
                store_url = f"{pg.url}?options=-csearch_path%3D{schema}"
                (folder / schema).mkdir()
                config = _config(folder / schema, provider.url, store_url)
                replicas = []
                for _ in range(2):
                    port = free_port()
                    replicas.append(ServerProcess([sys.executable, "-m", "proxy", "serve", "--config", str(config),
                                                   "--port", str(port)], port, cwd=ROOT).start())
                try:
                    fault = await run_fault(name, pg, replicas, fake, store_url, args.conversations, args.outage_s)
                finally:
                    for replica in replicas:
                        replica.stop()
                log = "\n".join(replica.output() for replica in replicas)
                problems = fault.problems(["replica 1", "replica 2"])
                if "Traceback" in log:
                    problems.append("a traceback in the replicas' log")
                results.append((fault, problems))
    finally:
        try:
            pg.stop("fast")
        except subprocess.CalledProcessError:
            pass
    print(f"workset store faults: a PostgreSQL of its own, two replicas, {args.conversations} agents, "
          f"{args.outage_s:g} s away")
    print(f"{'fault':<22} {'requests':>8} {'degraded':>8} {'replica 1 back':>14} {'replica 2 back':>14}  verdict")
    failed = 0
    for fault, problems in results:
        back = [f"{fault.recovered_s[r]:.1f} s" if r in fault.recovered_s else "never"
                for r in ("replica 1", "replica 2")]
        print(f"{fault.name:<22} {fault.requests:>8} {fault.degraded:>8} {back[0]:>14} {back[1]:>14}  "
              f"{'ok' if not problems else 'MISSED: ' + '; '.join(problems)}")
        failed += bool(problems)
    shutil.rmtree(folder, ignore_errors=True)
    return 1 if failed else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--outage-s", type=float, default=8.0)
    parser.add_argument("--conversations", type=int, default=8)
    sys.exit(asyncio.run(main_async(parser.parse_args())))


if __name__ == "__main__":
    main()
