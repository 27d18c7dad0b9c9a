"""Odd and hostile Anthropic Messages and Responses bodies: whatever passes the edge's check is read into the
internal form and written back without an exception (a 400 is the only way to refuse; an exception would be a
workset failure, forwarded as sent but logged as a bug)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from stores import store_location

from proxy import anthropic, responses
from proxy.errors import WorksetError
from proxy.records import ClientSession

scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=8))
json_values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                           st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                           max_leaves=8)
block_types = st.sampled_from(["text", "image", "tool_use", "tool_result", "thinking", "redacted_thinking",
                               "document", "server_tool_use", "weird", None])


@st.composite
def anthropic_block(draw: Any) -> Any:
    if draw(st.integers(0, 9)) == 0:
        return draw(json_values)
    block: dict[str, Any] = {"type": draw(block_types)}
    for key in draw(st.lists(st.sampled_from(["text", "id", "name", "input", "tool_use_id", "content", "is_error",
                                              "cache_control", "thinking", "signature"]), max_size=5)):
        block[key] = draw(st.one_of(json_values, st.text(max_size=10), st.lists(st.fixed_dictionaries(
            {"type": st.just("text"), "text": st.text(max_size=5)}), max_size=2)))
    return block


anthropic_messages = st.lists(st.fixed_dictionaries({
    "role": st.sampled_from(["user", "assistant", "system", "tool", 3]),
    "content": st.one_of(st.text(max_size=10), st.lists(anthropic_block(), max_size=4), json_values),
}), max_size=6)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=anthropic_messages, system=st.one_of(st.none(), st.text(max_size=5), json_values),
       tools=st.one_of(st.none(), json_values, st.lists(st.dictionaries(st.sampled_from(["name", "type",
                                                                                        "input_schema"]),
                                                                       json_values, max_size=3), max_size=2)),
       stable=st.integers(-1, 12), head=st.integers(-1, 12))
def test_anthropic_bodies_are_refused_with_a_400_or_translated_both_ways(messages: Any, system: Any, tools: Any,
                                                                          stable: int, head: int) -> None:
    body: dict[str, Any] = {"model": "claude", "max_tokens": 10, "messages": messages}
    if system is not None:
        body["system"] = system
    if tools is not None:
        body["tools"] = tools
    try:
        anthropic.check(body)
        internal = anthropic.to_internal(body)  # each message is checked as it is read
    except WorksetError as error:
        assert error.status == 400
        return
    out = anthropic.render(body, internal, stable, head)
    assert str(out).count("cache_control") <= 4 + str(body).count("cache_control")


response_items = st.lists(st.one_of(json_values, st.fixed_dictionaries({
    "type": st.sampled_from(["message", "reasoning", "function_call", "function_call_output", "custom_tool_call",
                             "custom_tool_call_output", "local_shell_call", "compaction", "odd"]),
}, optional={"role": st.sampled_from(["user", "assistant", "developer", "system", 5]),
             "content": st.one_of(json_values, st.text(max_size=5)), "call_id": json_values, "id": json_values,
             "output": json_values, "name": json_values, "arguments": json_values, "input": json_values,
             "action": json_values, "encrypted_content": st.one_of(st.text(max_size=30),
                                                                   st.just("workset-handoff:v1:aGk="),
                                                                   st.just("workset-handoff:v1:!!"))})), max_size=6)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=st.one_of(st.text(max_size=5), response_items, json_values),
       instructions=st.one_of(st.none(), st.text(max_size=5), json_values),
       tools=st.one_of(st.none(), json_values))
def test_responses_bodies_are_refused_with_a_400_or_translated_both_ways(items: Any, instructions: Any,
                                                                         tools: Any) -> None:
    body: dict[str, Any] = {"model": "m", "input": items}
    if instructions is not None:
        body["instructions"] = instructions
    if tools is not None:
        body["tools"] = tools
    try:
        responses.check(body)
    except WorksetError as error:
        assert error.status == 400
        return
    internal = responses.to_internal(body)
    responses.render(body, internal)
    if responses.compaction_requested(body):
        responses.without_trigger(body)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(messages=anthropic_messages, items=response_items)
def test_what_the_edges_accept_the_core_takes_without_failing(tmp_path_factory: Any, messages: Any,
                                                               items: Any) -> None:
    """The internal form of any accepted body goes through Engine.prepare and back without an exception."""
    from dataclasses import replace

    from proxy.config import Config
    from proxy.engine import Engine
    from proxy.policy import BudgetRules, Policy
    from proxy.storage import open_store
    from proxy.tokens import TokenCounter

    policy = replace(Policy(name="tight"), recent_turns=1, budget=replace(BudgetRules(), max_input_tokens=400))
    store = open_store(store_location(tmp_path_factory.mktemp("wire") / "store.db"))
    engine = Engine(Config(), {"tight": policy}, store, TokenCounter())
    try:
        for edge, body in ((anthropic, {"model": "m", "max_tokens": 5, "messages": messages}),
                           (responses, {"model": "m", "input": items})):
            try:
                edge.check(body)
                internal = edge.to_internal(body)
            except WorksetError:
                continue
            if not internal["messages"]:
                continue
            prepared = engine.prepare(internal, "caller", None, "tight", ClientSession("client-1", "client-1"),
                                      lambda m, s: None)
            engine.settle(prepared)
            if edge is anthropic:
                anthropic.render(body, prepared.body, prepared.stable, prepared.head)
            else:
                responses.render(body, prepared.body)
    finally:
        store.close()
