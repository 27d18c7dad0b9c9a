"""The user's words are never lost: every message the user wrote stays in the working set (a paste as head, tail
and ref), tool observations sent in the user role are compacted like tool output, and the agent's own prose
outlives its tool turns in the digest."""

from __future__ import annotations

from dataclasses import replace

from proxy.hashing import chain, ref_of
from proxy.policy import BudgetRules, Policy
from proxy.tokens import Excerpter, TokenCounter
from proxy.workingset import DROPPED_USERS, WORKSET_TAG, Budget, Conversation, build, plan_compaction, segment

COUNTER = TokenCounter()
EXCERPT = Excerpter(COUNTER)
MATCHER = Policy().observation_matcher


def conversation(messages: list[dict]) -> Conversation:
    hashes = chain("root", messages)
    task = next(i for i, m in enumerate(messages) if m["role"] == "user")
    observed = [MATCHER.is_observation(messages, i, task) for i in range(len(messages))]
    outputs = [m["role"] == "tool" or observed[i] for i, m in enumerate(messages)]
    return Conversation(messages, hashes, [ref_of(h) for h in hashes], [COUNTER.message(m) for m in messages],
                        ["bash" if out else "" for out in outputs],
                        [f"exit 0: output {i}" if out else "" for i, out in enumerate(outputs)],
                        ["ok" if out else "" for out in outputs], observed=observed)


def compact(messages: list[dict], budget: int, **rules: object) -> tuple[list[dict], Conversation]:
    conv = conversation(messages)
    policy = replace(Policy(), recent_turns=3, budget=replace(BudgetRules(), max_input_tokens=budget,
                                                             target_ratio=0.3), **rules)
    units = segment(messages)
    assert units is not None
    epoch = plan_compaction(conv, units, None, policy, Budget.of(policy, budget), 0, 0, COUNTER, EXCERPT)
    return build(conv, epoch, policy, COUNTER, EXCERPT).messages, conv


USER_WORDS = {
    8: "最终简报请用中文，数字保留两位小数。",  # an instruction in Chinese, without "must" or "never"
    20: "No — supplier C's latest quote packs 30 per carton now.",  # a correction
    32: "Could you work at a 6% annual cost of capital, please?",  # a parameter, politely
}


def tool_run(steps: int = 24) -> list[dict]:
    messages: list[dict] = [{"role": "system", "content": "You are a procurement agent."},
                            {"role": "user", "content": "Compare the 20 supplier quotes and write a brief."}]
    for step in range(steps):
        if len(messages) in USER_WORDS:
            messages.append({"role": "user", "content": USER_WORDS[len(messages)]})
            messages.append({"role": "assistant", "content": "Noted."})
        call = f"call_{step}"
        messages.append({"role": "assistant", "content": f"Reading quote {step}.", "tool_calls": [
            {"id": call, "type": "function", "function": {"name": "read_quote", "arguments": f'{{"n": {step}}}'}}]})
        messages.append({"role": "tool", "tool_call_id": call, "content": f"quote {step}: " + "price row " * 150})
    return messages


def test_every_user_message_stays_verbatim_through_compaction() -> None:
    messages = tool_run()
    assert all(messages[i]["content"] == text for i, text in USER_WORDS.items())
    sent, _ = compact(messages, 3000)
    assert sum(1 for m in sent if m["role"] == "tool" and not m["content"].startswith(WORKSET_TAG)) <= 3
    for index in USER_WORDS:
        assert messages[index] in sent, messages[index]["content"]


def test_a_paste_of_the_user_is_head_tail_and_ref_once_old() -> None:
    messages = tool_run()
    paste = "BEGIN LOG\n" + "\n".join(f"line {i}: value {i * 7}" for i in range(900)) + "\nEND LOG"
    messages.insert(6, {"role": "user", "content": paste})
    messages.insert(7, {"role": "assistant", "content": "Read it."})
    sent, conv = compact(messages, 4000)
    shown = next(m for m in sent if m["role"] == "user" and m["content"].startswith("BEGIN LOG"))
    assert shown["content"].rstrip().endswith("END LOG")
    assert f"[ref:{conv.refs[6]}]" in shown["content"] and "tokens of this message elided" in shown["content"]
    assert COUNTER.text(shown["content"]) < COUNTER.text(paste) / 3


def test_when_the_users_words_alone_pass_the_budget_the_oldest_go_and_are_named() -> None:
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"}]
    for n in range(30):
        messages.append({"role": "assistant", "content": f"Answer {n}."})
        messages.append({"role": "user", "content": f"Instruction {n}: " + "keep this in mind " * 20})
    sent, conv = compact(messages, 1200)
    compacted = next(m["content"] for m in sent if m["content"].startswith(WORKSET_TAG))
    assert DROPPED_USERS in compacted
    left_out = compacted.split(DROPPED_USERS, 1)[1]
    for index in range(3, len(messages), 2):
        assert messages[index] in sent or f"turn {index} [ref:{conv.refs[index]}]" in left_out
    assert messages[3] not in sent and messages[-1] in sent  # the oldest went first; the latest stays


def text_agent_run(steps: int = 20) -> list[dict]:
    """mini-swe-agent's text mode: the command in a bash block, the output back as a user message."""
    messages: list[dict] = [{"role": "system", "content": "You are a coding agent."},
                            {"role": "user", "content": "<pr_description>Fix the timezone bug.</pr_description>"}]
    for step in range(steps):
        if step == 4:
            messages.append({"role": "user", "content": "Please stay on pytz, no new dependencies."})
        messages.append({"role": "assistant", "content": f"THOUGHT: check module {step}.\n\n```bash\ncat mod_{step}.py\n```"})
        messages.append({"role": "user", "content": f"<returncode>0</returncode>\n<output>\n" + f"code {step} " * 200
                         + "\n</output>"})
    return messages


def test_observations_are_compacted_like_tool_output_and_the_users_words_stay() -> None:
    messages = text_agent_run()
    conv = conversation(messages)
    assert conv.observed[3] and not conv.observed[1] and not conv.is_observation(10)
    sent, conv = compact(messages, 8000)
    assert {"role": "user", "content": "Please stay on pytz, no new dependencies."} in sent
    observations = [m for m in sent if m["role"] == "user" and m["content"].startswith("<returncode>")]
    assert len(observations) <= 3  # only the recent ones verbatim
    compacted = next(m["content"] for m in sent if m["content"].startswith(WORKSET_TAG))
    # a removed action and its observation leave together: its command and outcome are in the digest
    commands = [line for line in compacted.splitlines() if " bash cat mod_" in line and " -> ok: " in line]
    assert commands
    for line in commands:
        turn, step = line.split()[2], line.split("mod_")[1].split(".py")[0]
        assert f"- turn {turn} assistant: THOUGHT: check module {step}. [ref:" in compacted
    # what is shown keeps actions and observations paired: no observation without the command before it
    for position, message in enumerate(sent):
        if message["role"] == "user" and message["content"].startswith(("<returncode>", f"{WORKSET_TAG} bash")):
            assert sent[position - 1]["role"] == "assistant" and "```bash" in sent[position - 1]["content"]


def test_the_agents_prose_is_kept_whole_in_the_digest_when_short() -> None:
    messages = tool_run()
    decision = "Decision: I'll use the 2026-06-30 central parity 7.1235 for every CNY quote."
    messages[4] = {**messages[4], "content": decision}
    sent, conv = compact(messages, 6000)
    assert all(m is not messages[4] for m in sent)
    assert f"- turn 4 assistant: {decision} [ref:{conv.refs[4]}]" in "\n".join(m["content"] for m in sent)
