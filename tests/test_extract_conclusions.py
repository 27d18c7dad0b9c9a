"""The agent's conclusions: decisions, failures and limits it learned, figures and conclusions it derived, in
English and Chinese; and the limits and refusals HTTP responses in tool outputs show."""

from __future__ import annotations

import json

from proxy.extract import extract
from proxy.extract.conclusions import MAX_FAILURES, MAX_FINDINGS
from proxy.records import DECISION, FAILURE, FINDING, MessageContext, ToolCall


def said(text: str, kind: str) -> dict[str, str]:
    """{key: value} of one kind of fact an assistant message yields."""
    facts = extract({"role": "assistant", "content": text}, MessageContext(index=4, ref="ev4")).facts
    return {f.key: f.value for f in facts if f.kind == kind}


def tool_says(content: str, url: str = "https://api.example.com/v1/rates?page=3") -> dict[str, str]:
    call = ToolCall(id="c1", name="http_get", arguments=json.dumps({"url": url}))
    message = {"role": "tool", "tool_call_id": "c1", "content": content}
    facts = extract(message, MessageContext(index=9, ref="ev9", call=call)).facts
    return {f.key: f.value for f in facts if f.kind == FAILURE}


# ---- decisions ------------------------------------------------------------------------------------------------


def test_decisions_in_english_as_written() -> None:
    text = (
        "Decision: stay on pytz, no new dependencies. I'll use the 2026-06-30 central parity 7.1235 for every CNY "
        "quote. We'll keep the EUR quotes as they are. I'll keep looking at the logs."
    )
    assert list(said(text, DECISION).values()) == [
        "Decision: stay on pytz, no new dependencies.",
        "I'll use the 2026-06-30 central parity 7.1235 for every CNY quote.",
        "We'll keep the EUR quotes as they are.",
    ]


def test_decisions_in_chinese() -> None:
    text = "决定：所有报价统一按 2026-06-30 中间价 7.1235 计算。我们用 FOB 价格比较。汇率以人民银行公布的中间价为准。"
    assert list(said(text, DECISION).values()) == [
        "决定：所有报价统一按 2026-06-30 中间价 7.1235 计算。",
        "我们用 FOB 价格比较。",
        "汇率以人民银行公布的中间价为准。",
    ]


def test_asking_the_user_to_decide_is_no_decision() -> None:
    assert said("请选择一个供应商？由您决定。Which one should we use?", DECISION) == {}


# ---- failures and limits --------------------------------------------------------------------------------------


def test_failures_are_keyed_by_their_subject() -> None:
    text = (
        "The bulk endpoint is Enterprise-only: 403.\n\n"
        "pytz ignores fold, so I switched to zoneinfo.\n\n"
        "That approach won't work because the API caps pages at 50."
    )
    assert said(text, FAILURE) == {
        "bulk endpoint": "The bulk endpoint is Enterprise-only: 403.",
        "pytz": "pytz ignores fold, so I switched to zoneinfo.",
        "approach": "That approach won't work because the API caps pages at 50.",
    }


def test_limits_learned_are_keyed_by_what_they_limit() -> None:
    text = "The v2 API is limited to 100 requests per minute, so I'll batch calls. It returns at most 50 per page."
    assert said(text, FAILURE) == {
        "rate limit": "The v2 API is limited to 100 requests per minute, so I'll batch calls.",
        "limit per page": "It returns at most 50 per page.",
    }


def test_failures_and_limits_in_chinese() -> None:
    text = "批量导出接口不支持 CSV。这个方法行不通，换成分页接口。接口限流：每分钟最多100次。"
    assert said(text, FAILURE) == {
        "批量导出接口": "批量导出接口不支持 CSV。",
        "方法": "这个方法行不通，换成分页接口。",
        "rate limit": "接口限流：每分钟最多100次。",
    }


def test_a_later_failure_of_the_same_subject_has_the_same_key() -> None:
    first = said("The bulk endpoint returns 403 for our key.", FAILURE)
    later = said("So the bulk endpoint is Enterprise-only.", FAILURE)
    assert list(first) == list(later) == ["bulk endpoint"]


def test_plans_hypotheses_and_fixed_failures_are_not_failures() -> None:
    text = (
        "Let me check whether the endpoint fails. If the import doesn't work, I'll vendor it. "
        "It no longer fails after the fix. The tests do not fail now. Does the endpoint return 403?"
    )
    assert said(text, FAILURE) == {}


def test_failures_are_capped_per_message() -> None:
    text = " ".join(f"Mirror {n} doesn't work." for n in range(10))
    assert len(said(text, FAILURE)) == MAX_FAILURES


# ---- findings -------------------------------------------------------------------------------------------------


def test_derived_figures_are_keyed_by_their_label() -> None:
    text = (
        "Supplier C unit price: 14.40 / 30 = 0.48 USD/piece\n"
        "- Total landed cost = 12,340.50 EUR\n"
        "14.40 / 24 = 0.60\n"
        "合计：12,340.50 元\n"
        "Total: $503"
    )
    assert said(text, FINDING) == {
        "supplier c unit price": "Supplier C unit price: 14.40 / 30 = 0.48 USD/piece",
        "total landed cost": "Total landed cost = 12,340.50 EUR",
        "14.40 / 24": "14.40 / 24 = 0.60",
        "合计": "合计：12,340.50 元",
        "total": "Total: $503",
    }


def test_a_rate_the_agent_derived_is_a_finding() -> None:
    """A trend the agent worked out ("rises +25.54 USD/FEU per week") is a figure later steps build on; a plain
    throughput ("500 requests per minute") or a question is not a derived rate."""
    text = ("Trends without week 7: SHA–RTM rises +25.54 USD/FEU per week; the others are listed above. "
            "We process 500 requests per minute. The backlog fell −1.8% a month over Q2.")
    assert said(text, FINDING) == {
        "sha rtm rises": "Trends without week 7: SHA–RTM rises +25.54 USD/FEU per week; the others are listed above.",
        "backlog fell": "The backlog fell −1.8% a month over Q2.",
    }


def test_a_recomputed_figure_has_the_same_key() -> None:
    before = said("Supplier C unit price: 14.40 / 24 = 0.60 USD/piece", FINDING)
    after = said("Corrected: Supplier C unit price = 14.40 / 30 = 0.48 USD/piece", FINDING)
    assert list(before) == list(after) == ["supplier c unit price"]


def test_stated_conclusions() -> None:
    text = (
        "Root cause: the cache key ignores the locale.\n"
        "The problem is that `fold` is dropped on conversion.\n"
        "结论：供应商B综合最优。原因是运费更低。\n"
        "Now I need to understand the root cause better."
    )
    assert list(said(text, FINDING).values()) == [
        "Root cause: the cache key ignores the locale.",
        "The problem is that `fold` is dropped on conversion.",
        "结论：供应商B综合最优。",
        "原因是运费更低。",
    ]
    assert said(text, FAILURE) == {}  # a conclusion is not also a failure


def test_code_and_urls_are_not_figures() -> None:
    text = "Set x = 5 first.\n`y = 6`\nsee https://example.com/?page=2\nwe skipped id=1\nif a == 3 then"
    assert said(text, FINDING) == {}


def test_findings_are_capped_per_message() -> None:
    text = "\n".join(f"Supplier {n} unit price = {n}.00 / 10 = 0.{n}0 USD" for n in range(1, 10))
    assert len(said(text, FINDING)) == MAX_FINDINGS


# ---- HTTP evidence in tool outputs ----------------------------------------------------------------------------


def test_rate_limit_from_a_429_with_headers() -> None:
    output = (
        "HTTP/1.1 429 Too Many Requests\nX-RateLimit-Limit: 100\nRetry-After: 30\n\n"
        '{"error": "rate limit exceeded: 100 requests per minute"}'
    )
    assert tool_says(output) == {
        "rate limit api.example.com":
            "rate limit: 100 requests per minute (429; Retry-After: 30; at https://api.example.com/v1/rates)",
    }


def test_rate_limit_from_the_limit_header_alone() -> None:
    output = "HTTP/1.1 200 OK\nX-RateLimit-Limit: 60\nX-RateLimit-Remaining: 0\n\n[]"
    assert tool_says(output) == {
        "rate limit api.example.com": "rate limit: 60 requests (X-RateLimit-Limit) (at https://api.example.com/v1/rates)",
    }


def test_refusal_with_its_message() -> None:
    output = json.dumps({"status": 403, "message": "Bulk export requires an Enterprise plan"})
    assert tool_says(output, "https://api.example.com/v1/bulk") == {
        "access api.example.com/v1/bulk": "403: Bulk export requires an Enterprise plan (at https://api.example.com/v1/bulk)",
    }


def test_a_rate_limit_named_but_not_hit_is_no_failure() -> None:
    assert tool_says("## Rate limits\nThe API has a rate limit; see the docs for the rate-limit headers.") == {}


def test_status_numbers_that_are_not_http_statuses() -> None:
    output = (
        "tests/test_rates.py:429: AssertionError\nFAILED tests/test_rates.py::test_limit - assert 403 == 200\n"
        "Processed 429 rows in 401 ms"
    )
    assert tool_says(output) == {}


def test_a_pace_is_not_a_limit() -> None:
    text = (
        "12 lanes got 429 after the first 100 requests in the minute.\n\n"
        "I'll pace at 90 per minute from now on. All 110 accepted, no 429 errors at 90 per minute."
    )
    assert said(text, FAILURE) == {"rate limit": "12 lanes got 429 after the first 100 requests in the minute."}
    assert said("All 110 accepted, no 429 errors at 90 per minute.", FAILURE) == {}  # would replace the limit


def test_input_rules_learned() -> None:
    text = "The tariff service only takes 10-digit HS codes without dots. The flight tool wants dates as YYYY-MM-DD."
    assert said(text, FAILURE) == {
        "tariff service": "The tariff service only takes 10-digit HS codes without dots.",
        "flight tool": "The flight tool wants dates as YYYY-MM-DD.",
    }


def test_a_text_based_agent_s_thought_tag_is_not_part_of_the_value() -> None:
    assert said("THOUGHT: pytz ignores fold, so fold=1 is lost.", FAILURE) == {
        "pytz": "pytz ignores fold, so fold=1 is lost.",
    }


def test_chinese_totals_headings_and_mid_sentence_totals() -> None:
    text = "## 结论\nv2 商品总数 4,318 个，limit 最大 250，需要 18 页。\nEvery failure is a pool timeout, and the pool shows total=4."
    assert said(text, FINDING) == {"v2 商品总数": "v2 商品总数 4,318 个，limit 最大 250，需要 18 页。"}


def test_refusal_with_an_error_code() -> None:
    output = json.dumps({"error": {"status": 403, "code": "approval_required",
                                   "message": "refunds above 1000.00 USD need a supervisor approval_id"}})
    assert tool_says(output, "https://api.example.com/v1/refunds") == {
        "access api.example.com/v1/refunds":
            "403: approval_required: refunds above 1000.00 USD need a supervisor approval_id "
            "(at https://api.example.com/v1/refunds)",
    }


def test_rate_limiting_code_in_a_file_is_no_failure() -> None:
    source = (
        "     1\tdef request(self):\n     2\t    if response.status_code != 429:\n"
        "     3\t        return response\n     4\t    raise RuntimeError('rate limited, giving up')\n"
    )
    assert tool_says(source) == {}
