"""Background summary jobs live in the store, not in a process: one job of a session runs at a time whichever
replica starts it, a replica that dies running one leaves it to be taken over once its lease (summarizer.timeout_s)
runs out, only the result of the claim that holds the job is kept, and any replica's next compaction uses it.
Here two engines on one store stand for two replicas (each its own connections and branch cache), on both backends."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import openai
import pytest
from fakeupstream import Completion, Hang
from conftest import write_config
from servers import ServerProcess, workset_serve
from stores import once_per_make_test, requires_postgres, run_sql, schema_url, store_location
from test_inspect import conversation

from proxy.config import Config
from proxy.engine import Engine, Prepared
from proxy.evaluate.strategies import fake_summary
from proxy.policy import BudgetRules, Policy, SummarizerRules
from proxy.storage import open_store
from proxy.summarize import Job
from proxy.tokens import TokenCounter

COUNTER = TokenCounter()
LEASE_S = 0.5
POLICY = replace(Policy(name="summ"), recent_turns=2,
                 budget=replace(BudgetRules(), max_input_tokens=2500, trigger_ratio=0.8, target_ratio=0.4),
                 summarizer=replace(SummarizerRules(), mode="llm", model="fake-summarizer", precompute_ratio=0.3,
                                    timeout_s=LEASE_S))


def replicas(path: str) -> list[Engine]:
    return [Engine(Config(), {"summ": POLICY}, open_store(path), COUNTER) for _ in range(2)]


def send(engine: Engine, messages: list[dict[str, Any]]) -> Prepared:
    prepared = engine.prepare({"model": "m", "messages": messages}, "key", "S", "summ")
    engine.settle(prepared)
    return prepared


def test_a_job_whose_replica_died_is_taken_over_and_its_result_used_by_the_next_compaction(tmp_path: Path) -> None:
    here, there = replicas(store_location(tmp_path / "store.db"))
    messages = conversation(40)
    try:
        end, started = 4, None
        while started is None:  # replica `here` starts the session's first job, then dies running it
            end += 2
            first = send(here, messages[:end])
            started = here.summary_job(first)
        session = first.session_id
        assert session is not None and started.claim

        end += 2
        assert there.summary_job(send(there, messages[:end])) is None, "one job of a session runs at a time"
        time.sleep(LEASE_S + 0.2)
        taken = None
        while taken is None and end < len(messages):  # a request past precompute_ratio takes it over
            end += 2
            prepared = send(there, messages[:end])
            taken = there.summary_job(prepared)
        assert taken is not None, "a job whose lease ran out is taken over by another replica"
        assert taken.claim != started.claim and replace(taken, claim="") == replace(started, claim="")
        assert there.summary_job(prepared) is None, "taken: nobody else runs it while the new lease holds"

        # the dead replica's late answer is not kept; the one that took the job over is
        here.summary_done(first, started, "- The agent read 12345 files.")
        text = fake_summary(taken.body)
        assert there.summary_done(prepared, taken, text).check == "ok"
        for engine in (here, there):
            engine.store.flush()
        done = [(job["state"], job["text"]) for job in here.store.summary_jobs(session)]
        assert done == [("done", text)]

        # the next compaction (on the other replica) shows that summary, and drops the job as used
        summaries: list[str] = []
        while end < len(messages) and not summaries:
            end += 2
            built = send(here, messages[:end])
            if built.epoch is not None and built.epoch.summary_check == "ok":
                summaries.append(built.epoch.summary)
        assert summaries == [text]
        here.store.flush()
        assert [job["state"] for job in here.store.summary_jobs(session)] in ([], ["running"])
    finally:
        for engine in (here, there):
            engine.store.close()


def test_replicas_racing_for_a_job_start_or_take_over_one_of_them(tmp_path: Path) -> None:
    """Requests of one session on several replicas at once: one starts the job, one takes it over."""
    path = store_location(tmp_path / "store.db")
    stores = [open_store(path) for _ in range(4)]
    job = Job("S", -1, 7, "h7", "", "turns", {"model": "fake-summarizer"})
    try:
        stores[0].create_session("S", "key", None, "m", "summ")
        stores[0].flush()

        def race(attempt: Any) -> list[object]:
            results: list[object] = []
            threads = [threading.Thread(target=lambda n=n: results.append(attempt(n)), daemon=True)
                       for n in range(len(stores))]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(30)
            return results

        from dataclasses import asdict

        started = race(lambda n: stores[n].start_summary("S", asdict(job), f"claim-{n}", time.time() - 1))
        assert sorted(started) == [False, False, False, True]
        taken = race(lambda n: stores[n].take_over_summary("S", f"again-{n}", time.time() + 60))
        assert [Job(**found) for found in taken if found is not None] == [job]
        assert race(lambda n: stores[n].take_over_summary("S", f"late-{n}", time.time() + 60)) == [None] * 4
    finally:
        for store in stores:
            store.close()


@pytest.mark.e2e
@requires_postgres
@once_per_make_test
@pytest.mark.timeout(240)
def test_a_replica_killed_while_its_summariser_runs_leaves_the_job_to_another(tmp_path: Path, fake: Any) -> None:
    """Two `workset serve` replicas on one PostgreSQL store. The session's summary job starts on the first, whose
    summariser call hangs; that replica is killed (-9). Once the job's lease runs out the other replica's next
    request takes the job over, asks the summariser the very same question, and its compaction shows the answer."""
    from test_summarizer import TOOLS, summarising_policy, turns

    store = schema_url(tmp_path)
    config = write_config(tmp_path, fake.url, policy_by_model={"summ-*": str(summarising_policy(tmp_path, 3))},
                          store={"url": store}, upstream={"timeout_s": 30, "connect_timeout_s": 5},
                          ingest={"extract_processes": 0})
    first, second = workset_serve(config), workset_serve(config)
    fake.answer_model("fake-summarizer", Hang(120))
    messages = turns(20)
    asked = lambda: [r.body for r in fake.chat_requests() if r.body.get("model") == "fake-summarizer"]  # noqa: E731

    def send(replica: ServerProcess, end: int) -> dict[str, Any]:
        client = openai.OpenAI(base_url=replica.url + "/v1", api_key="sk-summ", timeout=30, max_retries=0)
        client.chat.completions.create(model="summ-model", messages=messages[:end], tools=TOOLS,
                                       extra_headers={"x-workset-session": "summ"})
        return [r.body for r in fake.chat_requests() if r.body.get("model") == "summ-model"][-1]

    try:
        end = 4
        while not asked() and end < len(messages):
            send(first, end)
            end += 2
            wait_until(lambda: bool(asked()), 0.5)  # the job starts once the request is on its way
        assert asked(), "the first replica started a summary job"
        first.proc.kill()  # -9: its job is left running in the store
        first.proc.wait(10)
        summary = "- The agent read the config parts one by one; nothing failed."
        fake.answer_model("fake-summarizer", Completion(content=summary))
        time.sleep(3.2)  # the job's lease (summarizer.timeout_s) runs out
        shown = ""
        while end <= len(messages) and not shown:
            forwarded = send(second, end)
            end += 2
            compacted = [str(m.get("content")) for m in forwarded["messages"] if "## Summary of turns up to" in
                         str(m.get("content"))]
            shown = compacted[0] if compacted else ""
            if len(asked()) > 1:
                wait_until(lambda: bool(run_sql(store, "SELECT id FROM summaries WHERE state = 'done'")), 10)
        assert len(asked()) == 2 and asked()[1] == asked()[0], "the same job, asked again by the other replica"
        assert summary[2:] in shown, "the other replica's compaction shows the summary of the job it took over"
    finally:
        for replica in (first, second):
            replica.stop()


def wait_until(condition: Any, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
