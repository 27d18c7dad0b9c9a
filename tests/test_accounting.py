"""Cache-aware accounting: the provider's usage read in every wire format, prices, the whole-request estimate, and
on a replayed trace the same savings figure `workset eval` computes."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any, AsyncIterator

import orjson
import pytest
from fakeupstream import Completion, Usage as FakeUsage
from test_eval_http import next_message
from traces import load_traces, requires_traces

from proxy.accounting import Prices, Usage, UsageTap, account, prices_for, usage_of
from proxy.cli import load_settings
from proxy.config import PriceSettings
from proxy.evaluate.run import agent_turns, evaluate
from proxy.evaluate.strategies import ForwardAll, PolicyStrategy, policy_engine, session_for
from proxy.hashing import key_hash
from proxy.report import savings, total
from proxy.tokens import TokenCounter


# --- the provider's usage, in each wire format ------------------------------------------------------------------


def test_usage_is_read_from_chat_anthropic_and_responses_answers() -> None:
    chat = {"usage": {"prompt_tokens": 1200, "completion_tokens": 30, "prompt_tokens_details": {"cached_tokens": 1024}}}
    assert usage_of(chat) == Usage(1200, 30, 1024, None)
    # Anthropic's input_tokens leave out what was read from or written to the cache
    anthropic = {"usage": {"input_tokens": 20, "cache_read_input_tokens": 5000, "cache_creation_input_tokens": 300,
                           "output_tokens": 12}}
    assert usage_of(anthropic) == Usage(5320, 12, 5000, 300)
    responses = {"usage": {"input_tokens": 900, "input_tokens_details": {"cached_tokens": 512}, "output_tokens": 7}}
    assert usage_of(responses) == Usage(900, 7, 512, None)
    assert usage_of({"usage": {"prompt_tokens": 10, "completion_tokens": 2}}) == Usage(10, 2, None, None)
    assert usage_of({"choices": []}) is None
    assert usage_of({"usage": {"prompt_tokens": "many"}}) == Usage(0, 0, None, None)  # a provider's junk is not a crash


def tapped(chunks: list[bytes]) -> Usage | None:
    tap = UsageTap()

    async def source() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    async def drain() -> list[bytes]:
        return [chunk async for chunk in tap.watch(source())]

    assert asyncio.run(drain()) == chunks  # the client gets every byte, unchanged
    return tap.usage()


def test_a_streamed_answer_s_usage_is_read_as_it_passes_in_every_format() -> None:
    chat = [b'data: {"choices":[{"delta":{"content":"hi"}}],"usage":null}\n\n',
            b'data: {"choices":[],"usage":{"prompt_tokens":2000,"completion_tokens":5,'
            b'"prompt_tokens_details":{"cached_tokens":1536}}}\n\n', b"data: [DONE]\n\n"]
    assert tapped(chat) == Usage(2000, 5, 1536, None)
    anthropic = [b'event: message_start\ndata: {"type":"message_start","message":{"usage":{"input_tokens":3,'
                 b'"cache_read_input_tokens":4000,"cache_creation_input_tokens":100,"output_tokens":1}}}\n\n',
                 b'event: content_block_delta\ndata: {"type":"content_block_delta","delta":{"text":"' + b"x" * 40_000
                 + b'"}}\n\n',
                 b'event: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":42}}\n\n']
    assert tapped(anthropic) == Usage(4103, 42, 4000, 100)  # message_delta's output is cumulative: the last word
    responses = [b'event: response.created\ndata: {"type":"response.created","response":{"usage":null}}\n\n',
                 b'event: response.completed\ndata: {"type":"response.completed","response":{"usage":{"input_tokens"'
                 b':700,"input_tokens_details":{"cached_tokens":640},"output_tokens":9}}}\n\n']
    assert tapped(responses) == Usage(700, 9, 640, None)
    # a long answer in small pieces: the usage at its end is still found, and the tap holds only head and tail
    long = [b'data: {"choices":[{"delta":{"content":"' + b"y" * 1000 + b'"}}]}\n\n'] * 2000 + chat[1:]
    assert tapped(long) == Usage(2000, 5, 1536, None)
    assert tapped([b"data: not json\n\n"]) is None


def test_prices_come_from_config_first_then_litellm_s_map() -> None:
    price_map = {"gpt-4o": {"input_cost_per_token": 2.5e-6, "output_cost_per_token": 1e-5,
                            "cache_read_input_token_cost": 1.25e-6}}
    assert prices_for("gpt-4o", "openai/gpt-4o", {}, price_map) == Prices(2.5e-6, 1e-5, 1.25e-6, 2.5e-6)
    override = {"my-*": PriceSettings(input=3.0, output=15.0, cached_input=0.3, cache_write=3.75)}
    assert prices_for("my-model", "anthropic/claude", override, price_map) == Prices(3e-6, 1.5e-5, 3e-7, 3.75e-6)
    assert prices_for("unknown", "openai/unknown", {}, price_map) is None


def test_the_whole_request_is_estimated_in_the_provider_s_tokens_and_a_loss_is_a_loss() -> None:
    prices = Prices(1e-6, 0.0, 1e-7, 1.25e-6)
    # the provider counts 10% more than workset: the whole request is scaled the same way
    figures = account(Usage(1100, 0, 800, 0), tokens_sent=1000, tokens_whole=5000, whole_reused=4000, rounds=0,
                      prices=prices)
    assert (figures.whole, figures.whole_cached) == (5500, 4400)
    assert figures.saved is not None and figures.saved > 0
    # a compaction that breaks the cache on a request that was nearly all cached costs more than it saves
    loss = account(Usage(3000, 0, 0, 0), tokens_sent=3000, tokens_whole=3200, whole_reused=3100, rounds=0,
                   prices=prices)
    assert loss.saved is not None and loss.saved < 0
    # without the provider's usage, workset's own count stands in and nothing is taken as cached
    guessed = account(None, tokens_sent=900, tokens_whole=2000, whole_reused=1500, rounds=0, prices=prices)
    assert (guessed.input, guessed.cached, guessed.whole_cached, guessed.reported) == (900, 0, 0, False)


# --- on a replayed trace, the same figure as `workset eval` -------------------------------------------------------


class OpenAICache:
    """A provider that reports cached tokens as OpenAI does (prompt_tokens_details.cached_tokens): the leading
    messages a request shares with the conversation's previous one, and the tool definitions, counted with the
    same tokenizer workset uses."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self.previous: dict[str, list[Any]] = {}
        self.lock = threading.Lock()

    def usage(self, body: dict[str, Any]) -> FakeUsage:
        messages = body["messages"]
        sizes = [self.counter.message(m, generated=True) for m in messages]
        tools = self.counter.tools(body.get("tools"))
        key = orjson.dumps(messages[:2]).decode()
        with self.lock:
            before = self.previous.get(key)
            self.previous[key] = messages
        shared = 0
        if before is not None:
            while shared < min(len(before), len(messages)) and before[shared] == messages[shared]:
                shared += 1
        cached = (sum(sizes[:shared]) + tools) if before is not None else 0
        return FakeUsage(sum(sizes) + tools, 5, cached)


@pytest.mark.e2e
@pytest.mark.traces
@requires_traces
def test_accounting_on_a_replayed_trace_matches_workset_eval(start_proxy: Any, fake: Any, tmp_path: Path) -> None:
    policy_file = tmp_path / "replay.yaml"
    # recall off: the eval does not count the recall tool's definition, the provider would
    policy_file.write_text("name: replay\nbudget: {max_input_tokens: 9000}\nrecent_turns: 4\nrecall: {enabled: false}\n")
    prices = {"replay-*": {"input": 1.0, "cached_input": 0.1, "output": 0.0}}
    proxy = start_proxy(policy_by_model={"replay-*": str(policy_file)}, prices=prices)
    counter = TokenCounter()
    cache = OpenAICache(counter)
    traces = load_traces("swe-dev", limit=3)
    client = proxy.client("sk-account")
    sent = 0
    for trace in traces:
        for t in agent_turns(trace["messages"]):
            reply = next_message(trace["messages"][t])
            fake.script(lambda body, reply=reply: Completion(reply.content, reply.tool_calls,
                                                             usage=cache.usage(body)))
            client.chat.completions.create(model="replay-model", messages=trace["messages"][:t], tools=trace["tools"],
                                           extra_headers={"x-workset-session": session_for("replay", trace["id"])})
            sent += 1
    proxy.stop()  # every record written

    config, policies = load_settings(str(proxy.config_path))
    from proxy.storage import open_store
    store = open_store(proxy.store)
    try:
        rows = savings(store, key_hash("sk-account"))
    finally:
        store.close()
    assert len(rows) == len(traces) and sum(row.turns for row in rows) == sent
    whole = total(rows)
    assert whole.reported == sent and whole.cached_tokens > 0

    policy = policies["replay"]
    engine = policy_engine({"replay": policy}, counter, tmp_path / "inproc")
    strategies = [PolicyStrategy(policy, engine, "replay-model", caller=key_hash("sk-eval")), ForwardAll(10**9)]
    evaluation = evaluate(traces, strategies, counter, cache_read_price=0.1)
    by_name = {row.policy: row for row in evaluation.rows}
    assert whole.cost is not None and whole.cost_whole is not None
    # dollars at $1 per million prompt tokens and $0.10 per million cached ones are eval's full-price token units
    assert whole.cost * 1e6 == pytest.approx(by_name["replay"].cached_cost, rel=0.02)
    assert whole.cost_whole * 1e6 == pytest.approx(by_name["none"].cached_cost, rel=0.02)
    assert whole.cost / whole.cost_whole == pytest.approx(by_name["replay"].cached_cost_vs_none, rel=0.02)
    assert "saved" in whole.verdict
