"""SQLite's own fault, on a real file system: the store's folder is a small tmpfs of the test's own, filled up (the
disk full), then freed, twice. While the file refuses writes, no request
fails: /healthz says the store is down, `workset_store_up` is 0, and conversations whose writes were kept back go
out as sent, saying so; once it takes writes again, what was kept is written, working sets are built again, every
message and every request's record is in the file. (PostgreSQL's faults: test_store_outage and `make soak`.)

Mounting needs the privilege to (root in the project's machine and CI); without it the test is skipped, saying so.
A read-only file is the same fault to workset ("attempt to write a readonly database"), but cannot be made here: a
root process is not refused by file modes, and a file system holding a file open for writing cannot be remounted
read-only."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from conftest import write_config
from servers import workset_serve
from toolsteps import tool_step
from stores import POSTGRES, run_sql

KEY = "sk-faults"
pytestmark = [pytest.mark.e2e]


def _mount(folder: Path, *options: str) -> bool:
    return subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join(("size=8m", *options)), "tmpfs", str(folder)],
                          capture_output=True, timeout=10).returncode == 0


@pytest.fixture
def small_disk(tmp_path: Path) -> Any:
    folder = tmp_path / "disk"
    folder.mkdir()
    if shutil.which("mount") is None or not _mount(folder):
        pytest.skip("cannot mount a tmpfs here (needs root): the disk-full and read-only faults are not tried")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True, timeout=10)


def _fill(folder: Path) -> Path:
    """Take every free byte of the folder's file system."""
    filler = folder / "filler"
    with open(filler, "wb") as out:
        try:
            while True:
                out.write(b"\0" * 65536)
                out.flush()
        except OSError:
            pass
    return filler


@pytest.mark.skipif(POSTGRES, reason="SQLite's own faults: this pass's stores are PostgreSQL")
@pytest.mark.timeout(240)
def test_a_full_disk_fails_open_and_catches_up(tmp_path: Path, fake: Any, small_disk: Path) -> None:
    store = small_disk / "workset.db"
    config = write_config(tmp_path, fake.url, store={"path": str(store), "retry_s": 0.5},
                          ingest={"extract_processes": 0})
    replica = workset_serve(config)
    try:
        seen = asyncio.run(_run(replica.url, small_disk))
    finally:
        replica.stop()
    log = replica.output()
    for fault in ("full", "full again"):
        during = seen[fault]
        assert during["failures"] == [], (fault, during["failures"][:3], log[-4000:])
        assert during["health"] == {"status": "degraded", "store": "down"}, (fault, during["health"])
        assert during["up"] == 0.0 and "store" in during["degraded"], (fault, during, log[-4000:])
        assert during["after"] == {"status": "ok"} and during["built_after"], (fault, during, log[-4000:])
    assert log.count('"event": "store_down"') == 2 and log.count('"event": "store_up"') == 2, log[-4000:]
    assert "Traceback" not in log, log[-4000:]
    session = seen["session"]
    stored = run_sql(store, "SELECT count(*) FROM messages WHERE session_id = ?", (session,))[0][0]
    assert stored == seen["messages"], (stored, seen["messages"])
    turns = run_sql(store, "SELECT count(*) FROM turns")[0][0]
    assert turns == seen["requests"], (turns, seen["requests"])


async def _run(url: str, disk: Path) -> dict[str, Any]:
    client = openai.AsyncOpenAI(base_url=url + "/v1", api_key=KEY, timeout=60, max_retries=0)
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are an agent."},
                                      {"role": "user", "content": "Read every data file, step by step."}]
    step = 0
    requests = 0
    session: str | None = None

    async def ask() -> tuple[str | None, str | None, str | None]:
        nonlocal step, requests
        step += 1
        messages.extend(tool_step("0", step, rows=60))
        try:
            raw = await client.chat.completions.with_raw_response.create(model="small-model", messages=messages)
        except Exception as error:  # noqa: BLE001 - any failure is what the test counts
            return None, None, f"{error.__class__.__name__}: {error}"
        requests += 1
        return raw.headers.get("x-workset-session"), raw.headers.get("x-workset-degraded"), None

    async def fault(http: httpx.AsyncClient, start: Any, end: Any) -> dict[str, Any]:
        await asyncio.to_thread(start)
        failures: list[str] = []
        degraded: set[str | None] = set()
        health: dict[str, Any] = {}
        until = time.monotonic() + 20
        while time.monotonic() < until and health != {"status": "degraded", "store": "down"}:
            _, flag, failed = await ask()
            failures += [failed] if failed else []
            degraded.add(flag)
            health = (await http.get(url + "/healthz")).json()
            await asyncio.sleep(0.2)
        for _ in range(4):  # the conversation's writes are kept back: it goes out as sent
            _, flag, failed = await ask()
            failures += [failed] if failed else []
            degraded.add(flag)
        up = (await http.get(url + "/metrics")).text
        up_value = next((float(line.split()[1]) for line in up.splitlines() if line.startswith("workset_store_up ")),
                        -1.0)
        await asyncio.to_thread(end)
        after: dict[str, Any] = {}
        built_after = False
        until = time.monotonic() + 20
        while time.monotonic() < until and not (after == {"status": "ok"} and built_after):
            await asyncio.sleep(0.3)
            after = (await http.get(url + "/healthz")).json()
            got, flag, failed = await ask()
            failures += [failed] if failed else []
            built_after = got is not None and flag is None
        return {"failures": failures, "degraded": degraded, "health": health, "up": up_value, "after": after,
                "built_after": built_after}

    async with httpx.AsyncClient(timeout=10) as http:
        for _ in range(3):
            session = (await ask())[0]
        filler: list[Path] = []
        full = await fault(http, lambda: filler.append(_fill(disk)), lambda: filler[0].unlink())
        again: list[Path] = []
        full_again = await fault(http, lambda: again.append(_fill(disk)), lambda: again[0].unlink())
        for _ in range(2):
            session = (await ask())[0] or session
    await client.close()
    return {"full": full, "full again": full_again, "session": session, "messages": len(messages),
            "requests": requests}

