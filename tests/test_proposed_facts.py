"""Optional, verified model extraction: where a summary model is configured, it also proposes facts the tool outputs
it reads state; a proposal enters the ledger only if its words occur verbatim in the output it cites. The model
here is a fake that proposes one true and one invented fact."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from stores import store_location

from proxy.config import Config
from proxy.engine import Engine, Prepared
from proxy.policy import BudgetRules, Policy, SummarizerRules
from proxy.records import RULE
from proxy.storage import open_store
from proxy.summarize import FACTS_MARK, Job, proposed_facts, split_facts
from proxy.tokens import TokenCounter

COUNTER = TokenCounter()
POLICY = replace(Policy(name="summ"), recent_turns=2,
                 budget=replace(BudgetRules(), max_input_tokens=3000, trigger_ratio=0.8, target_ratio=0.4),
                 summarizer=replace(SummarizerRules(), mode="llm", model="fake-summarizer", precompute_ratio=0.3))
RULE_TEXT = "Release branches are frozen on Fridays; hotfixes need sign-off from Priya Raman."
COMMENT = ("author: priya (maintainer)\nThanks! One process note for this repo.\n" + RULE_TEXT.replace("; ", ";\n")
           + "\nSee CONTRIBUTING for the rest.\n")


def job(source: str) -> Job:
    return Job("s", -1, 3, "h", "", source, {})


def test_a_proposal_is_kept_only_when_the_output_it_cites_holds_its_words() -> None:
    source = "[turn 2] bash output [ref:ab12cd34ef56]:\n" + COMMENT + "\n[turn 3] assistant: ok"
    lines = [f"- [ref:ab12cd34ef56] rule: {RULE_TEXT}",  # true, across a line break of the output
             "- [ref:ab12cd34ef56] rule: hotfixes need sign-off from two maintainers",  # invented
             f"- [ref:ffffffffffff] rule: {RULE_TEXT}",  # cites an output the job never showed
             "- [ref:ab12cd34ef56] outcome: See"]  # too short to be a fact
    [kept] = proposed_facts(job(source), lines)
    assert (kept.kind, kept.quote, kept.ref, kept.turn) == ("rule", RULE_TEXT, "ab12cd34ef56", 2)
    assert split_facts(f"- merged the fix\n{FACTS_MARK}\n{lines[0]}") == ("- merged the fix", [lines[0]])
    assert split_facts("- no facts") == ("- no facts", [])


def model(body: dict[str, Any]) -> str:
    """The fake summariser: one bullet, then a true and an invented fact about the output it read."""
    prompt = str(body["messages"][-1]["content"])
    ref = prompt.split(" output [ref:", 1)[1].split("]", 1)[0]
    return (f"- read the maintainer's comment\n{FACTS_MARK}\n- [ref:{ref}] rule: {RULE_TEXT}\n"
            f"- [ref:{ref}] rule: hotfixes need sign-off from two maintainers and a CAB ticket")


def conversation(steps: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."},
                                      {"role": "user", "content": "Prepare the hotfix for the login bug."}]
    for step in range(steps):
        output = COMMENT if step == 0 else "\n".join(f"src/app/mod{step}_{n}.py" for n in range(40))
        messages += [{"role": "assistant", "content": "", "tool_calls": [
            {"id": f"c{step}", "type": "function", "function": {"name": "bash", "arguments": '{"command": "gh issue '
                                                                   f'view {step} --comments"}}'}}]},
                     {"role": "tool", "tool_call_id": f"c{step}", "content": output}]
    return messages


def send(engine: Engine, messages: list[dict[str, Any]]) -> Prepared:
    prepared = engine.prepare({"model": "m", "messages": messages}, "key", "S", "summ")
    engine.settle(prepared)
    return prepared


def test_a_verified_proposal_enters_the_state_and_the_store_an_invented_one_neither(tmp_path: Path) -> None:
    path = store_location(tmp_path / "store.db")
    engine = Engine(Config(), {"summ": POLICY}, open_store(path), COUNTER)
    messages = conversation(30)
    ran = False
    for end in range(4, len(messages) + 1, 2):
        prepared = send(engine, messages[:end])
        started = engine.summary_job(prepared)
        if started is not None:
            engine.summary_done(prepared, started, model(started.body))
            ran = True
            break
    assert ran
    rules = [f for f in prepared.branch.state.of_kind(RULE) if f.key.startswith("proposed: ")]  # type: ignore[union-attr]
    assert [f.value for f in rules] == [RULE_TEXT] and rules[0].turn == 3
    # the ledger in the store holds it: a second process reading the conversation cold sees it too
    engine.store.flush()  # the first one's queued writes
    other = Engine(Config(), {"summ": POLICY}, open_store(path), COUNTER)
    cold = send(other, messages[:end + 2])
    values = [f.value for f in cold.branch.state.of_kind(RULE)]  # type: ignore[union-attr]
    assert RULE_TEXT in values and not any("CAB ticket" in value for value in values)
