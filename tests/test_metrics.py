"""Prometheus metrics: the official openai SDK -> workset (uvicorn on 127.0.0.1) -> the fake provider, then GET
/metrics parsed as Prometheus reads it; the counters add up to exactly what the test sent."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import openai
import pytest
from fakeupstream import Completion, Error, Usage
from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.parser import text_string_to_metric_families

from proxy.config import Deployment, UpstreamSettings
from proxy.edges import AnthropicTarget
from proxy.metrics import Metrics, provider_label
from proxy.upstream import route

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(url: str, **kwargs: Any) -> Samples:
    response = httpx.get(url + "/metrics", timeout=10, **kwargs)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == CONTENT_TYPE_LATEST
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(response.text) for sample in family.samples}


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels`."""
    wanted = set(labels.items())
    return sum(value for (sample, have), value in samples.items() if sample == name and wanted <= have)


def scrape_when(url: str, name: str, expected: float, timeout: float = 10.0) -> Samples:
    """A streamed request is counted as its stream closes, a moment after the client read its last chunk."""
    deadline = time.monotonic() + timeout
    while True:
        samples = scrape(url)
        if total(samples, name) >= expected or time.monotonic() > deadline:
            return samples
        time.sleep(0.05)


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "system", "content": "be brief"}, {"role": "user", "content": text}]


# --- end to end ---------------------------------------------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_counters_add_up_to_what_was_sent(proxy, fake) -> None:
    client = proxy.client()
    headers: list[httpx.Headers] = []
    for n in range(3):
        raw = client.chat.completions.with_raw_response.create(model="gpt-test", messages=user(f"plain {n}"))
        headers.append(raw.headers)
    for n in range(2):
        fake.script(Completion(content="one two", pieces=["one ", "two"], usage=Usage(11, 2)))
        raw = client.chat.completions.with_raw_response.create(model="gpt-test", messages=user(f"streamed {n}"),
                                                               stream=True)
        assert [chunk for chunk in raw.parse()]
        headers.append(raw.headers)
    fake.script(Error(429, "slow down", "rate_limit_error", "rate_limited"))
    with pytest.raises(openai.RateLimitError) as limited:
        client.chat.completions.create(model="gpt-test", messages=user("limited"))
    headers.append(limited.value.response.headers)
    fake.script(Error(500, "overloaded", "server_error", "overloaded"))
    with pytest.raises(openai.InternalServerError) as failed:
        client.chat.completions.create(model="gpt-test", messages=user("failed"), stream=True)
    headers.append(failed.value.response.headers)
    bad = httpx.post(proxy.url + "/v1/chat/completions", content=b"{not json", timeout=10,
                     headers={"content-type": "application/json"})
    assert bad.status_code == 400
    forwarded = len(headers)
    assert len(fake.chat_requests()) == forwarded == 7

    samples = scrape_when(proxy.url, "workset_requests_total", forwarded + 1)
    requests = {dict(labels)["status"]: value for (name, labels), value in samples.items()
                if name == "workset_requests_total"}
    assert requests == {"200": 5, "429": 1, "500": 1, "400": 1}
    assert total(samples, "workset_requests_total", route="chat", status="200", policy="default") == 5
    assert total(samples, "workset_requests_total", route="chat", status="400", policy="none") == 1
    original = sum(int(h["x-workset-tokens-original"]) for h in headers)
    sent = sum(int(h["x-workset-tokens-sent"]) for h in headers)
    assert original > 0 and sent > 0
    assert total(samples, "workset_tokens_in_total") == original
    assert total(samples, "workset_tokens_sent_total") == sent
    # per request, whichever way it went; here the recall tool makes every forwarded request larger
    assert total(samples, "workset_tokens_added_total") - total(samples, "workset_tokens_saved_total") == sent - original
    assert total(samples, "workset_upstream_errors_total", provider="openai", status="429") == 1
    assert total(samples, "workset_upstream_errors_total", provider="openai", status="500") == 1
    assert total(samples, "workset_upstream_errors_total") == 2  # workset's own 400 is not the provider's
    for histogram in ("workset_own_seconds", "workset_added_latency_seconds", "workset_upstream_seconds"):
        assert total(samples, histogram + "_count") == forwarded, histogram
        assert total(samples, histogram + "_bucket", le="+Inf") == forwarded, histogram
    assert total(samples, "workset_upstream_seconds_count", provider="openai") == forwarded
    for step in ("admit", "settle", "queue"):
        assert total(samples, "workset_step_seconds_count", step=step) == forwarded, step
    assert total(samples, "workset_compactions_total") == 0
    proxy.flush()
    gauges = scrape(proxy.url)
    assert total(gauges, "workset_store_bytes") > 0
    assert total(gauges, "workset_store_write_queue") == 0
    assert total(gauges, "workset_sessions_cached") >= 1

    # no label names a session (nor a model, a key or any other free text)
    sessions = {h["x-workset-session"] for h in headers}
    values = {value for _, labels in samples for _, value in labels}
    assert sessions and not any(session in value for session in sessions for value in values)
    assert not any("gpt-test" in value or "sk-test" in value for value in values)


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_compactions_are_counted_by_reason(proxy, fake) -> None:
    client = proxy.client()
    compacted = 0
    for steps in range(1, 30):
        raw = client.chat.completions.with_raw_response.create(model="small-model", messages=agent_messages(steps))
        compacted += raw.headers.get("x-workset-compacted") == "1"
    assert compacted >= 1
    samples = scrape_when(proxy.url, "workset_requests_total", 29)
    assert total(samples, "workset_requests_total", route="chat", status="200", policy="small") == 29
    assert total(samples, "workset_compactions_total") == compacted
    assert total(samples, "workset_compactions_total", reason="other") == 0
    assert total(samples, "workset_tokens_saved_total", policy="small") > 0


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_require_key_asks_for_one_of_the_servers_keys(start_proxy, fake) -> None:
    proxy = start_proxy(server={"api_keys": ["wk-metrics"]}, metrics={"require_key": True})
    for headers in ({}, {"authorization": "Bearer sk-someone-else"}):
        response = httpx.get(proxy.url + "/metrics", timeout=10, headers=headers)
        assert response.status_code == 401
        error = response.json()["error"]
        assert error["type"] == "authentication_error" and error["code"] == "invalid_api_key" and error["message"]
    samples = scrape(proxy.url, headers={"authorization": "Bearer wk-metrics"})
    assert ("workset_store_bytes", frozenset()) in samples


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_disabled_metrics_answer_404_in_openai_format(start_proxy, fake) -> None:
    proxy = start_proxy(metrics={"enabled": False})
    response = httpx.get(proxy.url + "/metrics", timeout=10)
    assert response.status_code == 404
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["code"] == "not_found" and error["message"]
    # requests are served as usual
    assert proxy.client().chat.completions.create(model="gpt-test", messages=user("hi")).choices


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_two_apps_in_one_process_keep_their_own_figures(start_proxy, fake) -> None:
    first, second = start_proxy(), start_proxy()
    first.client().chat.completions.create(model="gpt-test", messages=user("only the first"))
    assert total(scrape_when(first.url, "workset_requests_total", 1), "workset_requests_total") == 1
    assert total(scrape(second.url), "workset_requests_total") == 0


# --- labels stay bounded ------------------------------------------------------------------------------------------


def exposed(metrics: Metrics) -> Samples:
    from prometheus_client import generate_latest

    text = generate_latest(metrics.registry).decode()
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def test_unknown_label_values_become_other() -> None:
    metrics = Metrics(["default"])
    metrics.request({"route": "session-1234", "status": 7000, "policy": "ad hoc", "session": "abc123",
                     "compaction": "because I said so", "provider": "my-own-llm", "upstream_ms": 5.0,
                     "latency_ms": 6.0, "tokens_original": 10, "tokens_sent": 4})
    metrics.request({"route": "chat", "status": 200, "policy": "default", "compaction": "phase: tests passed",
                     "provider": "openai", "upstream_ms": 5.0, "latency_ms": 6.0})
    metrics.request({"route": "responses", "status": 200, "compaction": "client compaction"})
    samples = exposed(metrics)
    assert total(samples, "workset_requests_total", route="other", status="other", policy="other") == 1
    assert total(samples, "workset_requests_total", route="responses", policy="none") == 1
    assert total(samples, "workset_compactions_total", reason="other") == 1
    assert total(samples, "workset_compactions_total", reason="phase") == 1
    assert total(samples, "workset_compactions_total", reason="client") == 1
    assert total(samples, "workset_upstream_seconds_count", provider="other") == 1
    assert total(samples, "workset_tokens_saved_total", route="other", policy="other") == 6
    values = {value for _, labels in samples for _, value in labels}
    assert not values & {"session-1234", "ad hoc", "abc123", "my-own-llm", "7000"}


def test_accounted_counts_the_providers_cache_figures() -> None:
    metrics = Metrics(["default"])
    metrics.accounted("chat", "default", cached=120, cache_write=30)
    metrics.accounted("messages", "default", cached=0, cache_write=50)
    samples = exposed(metrics)
    assert total(samples, "workset_tokens_cached_total", route="chat", policy="default") == 120
    assert total(samples, "workset_tokens_cache_write_total") == 80


def test_a_metrics_failure_never_reaches_the_request(capsys: pytest.CaptureFixture[str]) -> None:
    metrics = Metrics(["default"])
    for _ in range(3):
        metrics.request({"route": "chat", "status": 200, "tokens_original": "many", "tokens_sent": 1})
    metrics.accounted("chat", "default", cached="lots", cache_write=0)  # type: ignore[arg-type]
    logged = capsys.readouterr()
    assert (logged.out + logged.err).count("metrics_failed") == 1


@pytest.mark.parametrize("litellm_model, api_base, expected", [
    ("openai/*", "http://localhost:9/v1", "openai"),
    ("gpt-4o", "http://localhost:9/v1", "openai"),
    ("azure/my-deployment", None, "azure"),
    ("anthropic/claude-sonnet-4", None, "anthropic"),
    ("*", None, "other"),  # the provider would be whatever the client names before a slash
])
def test_provider_label_is_bounded(litellm_model: str, api_base: str | None, expected: str) -> None:
    params: dict[str, Any] = {"model": litellm_model}
    if api_base:
        params["api_base"] = api_base
    target = route(Deployment("*", params), "some-client/free-text", UpstreamSettings())
    assert provider_label(target) == expected
    assert provider_label(AnthropicTarget("https://api.anthropic.com", "claude", None)) == "anthropic"


def agent_messages(steps: int, words: int = 80) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."},
                                      {"role": "user", "content": "Fix the parser."}]
    for step in range(steps):
        call = f"call_{step}"
        messages.append({"role": "assistant", "content": f"Step {step}.", "tool_calls": [
            {"id": call, "type": "function", "function": {"name": "bash",
                                                          "arguments": json.dumps({"command": f"cat f{step}.py"})}}]})
        messages.append({"role": "tool", "tool_call_id": call,
                         "content": " ".join(f"tok{step}x{i}" for i in range(words))})
    return messages
