"""The dashboard at /ui: who sees what (bearer key or login cookie, own sessions only, admins all), hostile message
contents shown escaped, 404s that tell nothing, search; and, in headless Chromium, the walk a user makes from the
savings table to the reason one message was elided (screenshots in test-output/ui/)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_inspect import TOOLS, conversation, drive
from traces import TRACES_DIR, load_traces

from proxy.report import session_turns

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parent.parent
SCREENSHOTS = REPO / "test-output" / "ui"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
HOSTILE = "<script>alert('owned')</script><img src=x onerror=alert(1)>"


def ui(proxy: Any, path: str, key: str | None = "sk-test", **kwargs: Any) -> httpx.Response:
    headers = {"authorization": f"Bearer {key}"} if key else {}
    return httpx.get(proxy.url + path, headers=headers, timeout=10, follow_redirects=False, **kwargs)


def recorded(proxy: Any, session: str, count: int) -> list[dict[str, Any]]:
    """The session's turn rows: every answered request's is queued before its answer leaves, so a reader sees it."""
    turns = session_turns(proxy.engine.store, session)
    assert len(turns) == count, f"{len(turns)} of {count} requests recorded"
    return turns


def run(proxy: Any, steps: int, key: str = "sk-test", **kwargs: Any) -> str:
    """A compacting agent run of `steps` requests; its session id, once every request is recorded."""
    session = drive(proxy, range(1, steps + 1), key=key, **kwargs)[-1].headers["x-workset-session"]
    recorded(proxy, session, steps)
    return session


def login(proxy: Any, key: str, origin: str | None = None) -> httpx.Response:
    return httpx.post(proxy.url + "/ui/login", data={"key": key, "next": "/ui"}, timeout=10,
                      headers={"origin": origin or proxy.url})


# --- who sees what ------------------------------------------------------------------------------------------------


def test_without_a_key_every_page_is_the_login_form(proxy: Any) -> None:
    for path in ("/ui", "/ui/sessions/s_x", "/ui/sessions/s_x/turns/1", "/ui/sessions/s_x/evidence/000000000000"):
        page = ui(proxy, path, key=None)
        assert page.status_code == 401 and page.headers["content-type"].startswith("text/html")
        assert '<form method="post" action="/ui/login">' in page.text and "Traceback" not in page.text
        assert f'name="next" value="{path}"' in page.text  # back to the page asked for, once logged in


def test_the_login_form_keeps_the_key_in_a_strict_http_only_cookie(proxy: Any) -> None:
    session = run(proxy, 3)
    answer = login(proxy, "sk-test")
    assert answer.status_code == 303 and answer.headers["location"] == "/ui"
    cookie = answer.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and "path=/ui" in cookie
    with httpx.Client(base_url=proxy.url, cookies=answer.cookies, timeout=10) as browser:
        sessions = browser.get("/ui")
        assert sessions.status_code == 200 and f'href="/ui/sessions/{session}"' in sessions.text
        out = browser.post("/ui/logout", headers={"origin": proxy.url}, follow_redirects=False)
        assert out.status_code == 303 and 'workset_ui_key=""' in out.headers["set-cookie"]
    assert ui(proxy, "/ui", key=None, cookies={}).status_code == 401


def test_a_login_from_another_site_is_refused(proxy: Any) -> None:
    refused = login(proxy, "sk-test", origin="https://evil.example")
    assert refused.status_code == 403 and "set-cookie" not in refused.headers
    cross = httpx.post(proxy.url + "/ui/login", data={"key": "sk-test"}, timeout=10,
                       headers={"sec-fetch-site": "cross-site"})
    assert cross.status_code == 403 and "set-cookie" not in cross.headers


def test_a_key_sees_its_own_sessions_only_and_another_s_answer_like_none(start_proxy: Any) -> None:
    proxy = start_proxy(ui={"admin_keys": ["sk-admin"]})
    mine = run(proxy, 2, key="sk-one")
    theirs = run(proxy, 2, key="sk-two", word="other")
    listing = ui(proxy, "/ui", "sk-one").text
    assert mine in listing and theirs not in listing
    for suffix in ("", "/turns/1", "/evidence/000000000000"):
        other = ui(proxy, f"/ui/sessions/{theirs}{suffix}", "sk-one")
        unknown = ui(proxy, f"/ui/sessions/s_nope{suffix}", "sk-one")
        assert other.status_code == unknown.status_code == 404
        assert other.text == unknown.text.replace("s_nope", theirs)  # nothing tells that it exists
    admin = ui(proxy, "/ui", "sk-admin").text
    assert mine in admin and theirs in admin and "admin: every key" in admin
    assert ui(proxy, f"/ui/sessions/{theirs}/turns/2", "sk-admin").status_code == 200
    found = ui(proxy, f"/ui/sessions/{theirs}", "sk-admin", params={"q": "status"}).text
    ref = re.search(r"/evidence/([0-9a-f]{12})\"", found).group(1)  # type: ignore[union-attr]
    borrowed = ui(proxy, f"/ui/sessions/{mine}/evidence/{ref}", "sk-one")  # their ref under my own session
    unknown = ui(proxy, f"/ui/sessions/{mine}/evidence/000000000000", "sk-one")
    assert borrowed.status_code == unknown.status_code == 404
    assert borrowed.text == unknown.text.replace("000000000000", ref)


def test_when_workset_pays_only_its_own_keys_get_in(start_proxy: Any, fake: Any) -> None:
    proxy = start_proxy(
        model_list=[{"model_name": "*", "litellm_params": {"model": "openai/*", "api_base": fake.url + "/v1",
                                                           "api_key": "sk-provider"}}],
        server={"api_keys": ["sk-workset"]}, ui={"admin_keys": ["sk-admin"]})
    refused = ui(proxy, "/ui", "sk-stranger")
    assert refused.status_code == 401 and "server.api_keys" in refused.text
    assert login(proxy, "sk-stranger").status_code == 401
    assert ui(proxy, "/ui", "sk-workset").status_code == 200
    assert login(proxy, "sk-admin").status_code == 303


def test_the_dashboard_can_be_turned_off(start_proxy: Any) -> None:
    proxy = start_proxy(ui={"enabled": False})
    assert ui(proxy, "/ui").status_code == 404


# --- what the pages show ------------------------------------------------------------------------------------------


def test_hostile_message_contents_are_shown_escaped(proxy: Any, fake: Any) -> None:
    messages = conversation(3)
    messages[1]["content"] = f"Fix it. {HOSTILE}"
    messages[3]["content"] = f"<returncode>0</returncode>\n{HOSTILE}"
    answer = proxy.client().chat.completions.with_raw_response.create(model="small-test", messages=messages,
                                                                      tools=TOOLS)
    session = answer.headers["x-workset-session"]
    recorded(proxy, session, 1)
    pages = [ui(proxy, f"/ui/sessions/{session}/turns/1"), ui(proxy, f"/ui/sessions/{session}", params={"q": "owned"}),
             ui(proxy, f"/ui/sessions/{session}")]
    ref = re.search(r'/evidence/([0-9a-f]{12})"', pages[1].text).group(1)  # type: ignore[union-attr]
    pages.append(ui(proxy, f"/ui/sessions/{session}/evidence/{ref}"))
    for page in pages:
        assert page.status_code == 200
        assert "<script" not in page.text and "<img" not in page.text
        assert "script-src" not in page.headers["content-security-policy"]  # default-src 'none': no script runs
    assert "&lt;script&gt;alert(&#x27;owned&#x27;)&lt;/script&gt;" in pages[0].text
    assert "&lt;script&gt;" in pages[3].text


def test_unknown_sessions_turns_refs_and_pages_answer_404_pages(proxy: Any) -> None:
    session = run(proxy, 2)
    for path, status in ((f"/ui/sessions/{session}/turns/99", 404), (f"/ui/sessions/{session}/turns/abc", 404),
                         (f"/ui/sessions/{session}/evidence/000000000000", 404), ("/ui/sessions/s_nope", 404),
                         (f"/ui/sessions/{session}/evidence/nothex", 400), ("/ui/nowhere", 404)):
        page = ui(proxy, path)
        assert page.status_code == status, path
        assert page.headers["content-type"].startswith("text/html") and "Traceback" not in page.text


def test_a_session_page_charts_its_requests_and_lists_state_checkpoints_and_search_hits(proxy: Any) -> None:
    session = run(proxy, 15)
    page = ui(proxy, f"/ui/sessions/{session}").text
    assert page.count("<polyline") == 3 and 'class="compaction"' in page  # one line per series, compactions marked
    assert all(f'href="/ui/sessions/{session}/turns/{n}"' in page for n in range(1, 16))
    assert "Fix the parser in src/parser.py" in page  # the task state's goal
    assert "Checkpoints" in page and "budget" in page and "Ledger" in page
    found = ui(proxy, f"/ui/sessions/{session}", params={"q": "ValueError"}).text
    refs = re.findall(rf'href="/ui/sessions/{session}/evidence/([0-9a-f]{{12}})"', found.split("<h2>Search")[1])
    assert refs and "<mark>ValueError</mark>" in found
    evidence = ui(proxy, f"/ui/sessions/{session}/evidence/{refs[0]}").text
    assert "ValueError: bad token" in evidence


def test_a_turn_page_shows_each_change_beside_the_agent_s_message_with_its_rule_and_ref(proxy: Any) -> None:
    session = run(proxy, 15)
    turns = recorded(proxy, session, 15)
    n = next(turn["n"] for turn in turns if turn["compaction"])
    page = ui(proxy, f"/ui/sessions/{session}/turns/{n}").text
    assert f"Request {n}" in page and f'href="/ui/sessions/{session}/turns/{n - 1}"' in page
    elided = re.findall(r'<tr class="change (masked|removed|excerpted)">(.*?)</tr>', page, re.S)
    assert elided, "a compacting request shows what it elided"
    for kind, row in elided:
        assert f'<span class="badge k-{kind}">{kind}</span>' in row and 'class="rule"' in row
        assert re.search(rf'href="/ui/sessions/{session}/evidence/[0-9a-f]{{12}}"', row)
    assert '<tr class="change added">' in page and "compacted turns" in page
    # a long output is clipped on the page, the whole a click away
    assert re.search(rf'more characters: the whole at <a href="/ui/sessions/{session}/evidence/[0-9a-f]{{12}}"', page)


def test_a_session_of_two_thousand_requests_renders_whole(tmp_path: Path, start_proxy: Any) -> None:
    proxy = start_proxy()
    session = run(proxy, 2)
    row = recorded(proxy, session, 2)[-1]
    store = proxy.engine.store
    figures = {name: value for name, value in row.items() if name not in ("n", "created_at")}
    for n in range(2000 - 2):
        store.add_turn(session, lambda n=n: {**figures, "compaction": "budget" if n % 100 == 0 else "", "tip": "",
                                             "record": "{}"}, {})
    store.flush()
    page = ui(proxy, f"/ui/sessions/{session}").text
    assert page.count("<polyline") == 3 and "/turns/2000\"" in page


# --- in a browser -------------------------------------------------------------------------------------------------


def _playwright() -> Any:
    if not CHROMIUM.is_file():
        pytest.skip(f"{CHROMIUM} not found: install Debian's chromium (make install does, as root)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("the playwright package is not installed: pip install -e '.[test]'")
    return sync_playwright


def _replay(proxy: Any, fake: Any) -> str:
    """A real agent's run when the shared traces are there, else the synthetic one; its session id. The fake
    provider reports prompt caching as OpenAI does, so that the cache figures are real ones."""
    if not TRACES_DIR.is_dir():
        return run(proxy, 15)
    from fakeupstream import Completion
    from test_accounting import OpenAICache
    from test_eval_http import next_message

    from proxy.evaluate.run import agent_turns
    from proxy.tokens import TokenCounter

    trace = load_traces("swe-dev", limit=1)[0]
    turns = agent_turns(trace["messages"])
    cache = OpenAICache(TokenCounter())
    fake.script(*(lambda body, reply=next_message(trace["messages"][t]): Completion(
        reply.content, reply.tool_calls, usage=cache.usage(body)) for t in turns))
    client = proxy.client()
    for t in turns:
        answer = client.chat.completions.with_raw_response.create(model="replay-model", messages=trace["messages"][:t],
                                                                  tools=trace["tools"])
    session = answer.headers["x-workset-session"]
    recorded(proxy, session, len(turns))
    return session


def _shot(page: Any, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"ui-{name}.png"
    page.screenshot(path=str(path), timeout=15_000)
    if os.environ.get("WORKSET_UPDATE_SCREENSHOTS") == "1":
        (REPO / "docs" / "img").mkdir(exist_ok=True)
        shutil.copyfile(path, REPO / "docs" / "img" / path.name)


def test_in_a_browser_from_the_savings_to_why_a_message_was_elided(start_proxy: Any, fake: Any,
                                                                   tmp_path: Path) -> None:
    sync_playwright = _playwright()
    policy = tmp_path / "replay.yaml"  # small budgets: the runs compact
    policy.write_text("name: replay\nbudget: {max_input_tokens: 9000, target_ratio: 0.75}\nrecent_turns: 4\n")
    small = tmp_path / "small.yaml"
    small.write_text("name: small\nbudget: {max_input_tokens: 3000}\nrecent_turns: 3\ntool_outputs: {max_tokens: 600}\n")
    proxy = start_proxy(policy_by_model={"replay-*": str(policy), "small-*": str(small)},
                        prices={"*": {"input": 3.0, "cached_input": 0.3, "output": 15.0}})
    session = _replay(proxy, fake)
    run(proxy, 12, word="synthetic")  # a second session in the savings table
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True,
                                         timeout=30_000)
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 900})
            page.set_default_timeout(15_000)
            problems: list[str] = []  # a stylesheet the policy blocked, a script error, a failed load
            page.on("console", lambda message: problems.append(message.text)
                    if message.type == "error" and not message.text.startswith("Failed to load resource") else None)
            page.on("pageerror", lambda error: problems.append(str(error)))
            page.on("response", lambda response: problems.append(f"{response.status} {response.url}")
                    if response.status >= 400 and response.url != proxy.url + "/ui" else None)

            assert page.goto(proxy.url + "/ui", timeout=15_000).status == 401  # type: ignore[union-attr]
            page.fill("#key", "sk-test")
            page.click("button[type=submit]")
            page.wait_for_url(proxy.url + "/ui")
            assert page.locator(f'a[href="/ui/sessions/{session}"]').count() == 1
            assert "workset" in page.locator("p.verdict").inner_text()
            _shot(page, "sessions")

            page.click(f'a[href="/ui/sessions/{session}"]')
            page.wait_for_url(f"**/ui/sessions/{session}")
            assert page.locator("svg.chart polyline").count() == 3
            _shot(page, "session")

            compacted = page.locator("table.turns tr.compacted td:first-child a").first
            compacted.click()
            page.wait_for_url(re.compile(rf".*/ui/sessions/{session}/turns/\d+$"))
            elided = page.locator("tr.change.masked, tr.change.removed, tr.change.excerpted")
            assert elided.count() > 0, "the compacting request shows what it elided"
            assert all(re.search(r"compaction|recent_turns|tool_outputs", rule)
                       for rule in elided.locator(".rule").all_inner_texts())
            assert page.locator("tr.change.added").count() > 0
            page.check("#hide-kept")  # what workset changed, without what it forwarded as sent
            assert not page.locator("tr.change.kept").first.is_visible()
            _shot(page, "turn")

            outputs = elided.filter(has=page.locator("td.where .role", has_text="tool"))
            rows = outputs if outputs.count() else elided  # the longest tool output elided: its evidence
            longest = max(range(rows.count()), key=lambda i: len(rows.nth(i).locator("td.agent").inner_text()))
            ref = rows.nth(longest).locator("td.why a.ref")
            label = ref.inner_text()
            ref.click()
            page.wait_for_url(re.compile(rf".*/evidence/{label.removeprefix('ref:')}$"))
            assert page.locator("pre.evidence").inner_text().strip()
            _shot(page, "evidence")
            assert not problems, problems
        finally:
            browser.close()
    assert {f"ui-{name}.png" for name in ("sessions", "session", "turn", "evidence")} <= \
        {path.name for path in SCREENSHOTS.glob("ui-*.png")}
