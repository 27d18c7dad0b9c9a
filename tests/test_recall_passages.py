"""Recall reaches everything: pages, line ranges and matching passages of stored outputs (proxy.passages and the
Resolver over a stand-in store), and the store's search for CJK words. No servers."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from stores import store_location

from proxy import passages
from proxy.recall import Resolver
from proxy.storage import NewMessage, Scope, Store, open_store
from proxy.tokens import TokenCounter

COUNTER = TokenCounter()
CHECKSUM = "checksum = 7f3a91c2 for lane 118"


def lanes(count: int = 240) -> str:
    lines = [f"lane {lane:03d} ok p95 {(lane * 37) % 90 + 10}ms q{(lane * 7) % 13}" for lane in range(1, count + 1)]
    lines[117] = CHECKSUM
    return "\n".join(lines)


QUOTES = "\n".join([*(f"供应商{name}报价：每箱{size}件，单价{size * 1.1:.2f}美元" for name, size in zip("ABDEF", range(10, 15))),
                    "供应商C最新报价：每箱30件（已确认）", '{"supplier": "C", "carton": 30, "note": "Latest QUOTE"}'])


class Documents:
    """A stand-in for the store: refs of one session, and a search that returns the given hits."""

    def __init__(self, documents: dict[str, str], tool: str = "bash") -> None:
        self.documents = documents
        self.tool = tool

    def evidence(self, scope: Scope, ref: str) -> dict[str, Any] | None:
        if ref not in self.documents:
            return None
        return {"ref": ref, "tool": self.tool, "role": "tool", "content": self.documents[ref]}

    def search_evidence(self, scope: Scope, query: str, limit: int = 5) -> list[dict[str, Any]]:
        return [{"ref": ref, "tool": self.tool, "role": "tool", "content": text}
                for ref, text in list(self.documents.items())[:limit]]


def recall(documents: dict[str, str], max_tokens: int = 600, context: int = 2, **arguments: Any) -> str:
    resolver = Resolver(Documents(documents), COUNTER, Scope.whole("s"), max_tokens, 3, context)  # type: ignore[arg-type]
    return resolver(json.dumps(arguments))


# --- pieces and pages ------------------------------------------------------------------------------------------


def test_pages_cover_every_line_once_in_order_within_the_page_size() -> None:
    text = lanes()
    laid = passages.layout(text, 300, COUNTER)
    assert laid.lines == 240 and [p.line for p in laid.pieces] == list(range(1, 241))
    assert [start for start, _ in laid.pages][1:] == [end for _, end in laid.pages][:-1]  # consecutive
    assert laid.pages[0][0] == 0 and laid.pages[-1][1] == 240
    assert all(sum(p.tokens for p in laid.pieces[a:b]) <= 300 for a, b in laid.pages)
    assert len(laid.pages) >= COUNTER.text(text) // 300


def test_a_line_longer_than_a_page_is_cut_by_tokens_without_breaking_characters() -> None:
    line = "价格" * 900 + " end"
    laid = passages.layout(f"first\n{line}\nlast", 200, COUNTER)
    parts = [p for p in laid.pieces if p.line == 2]
    assert len(parts) > 3 and [p.part for p in parts] == list(range(1, len(parts) + 1))
    assert all(p.parts == len(parts) for p in parts)
    assert "".join(p.text for p in parts) == line and "\ufffd" not in "".join(p.text for p in parts)
    assert all(p.tokens <= 200 for p in laid.pieces)
    assert parts[1].shown().startswith(f"2 (part 2 of {len(parts)})| ")


def test_a_final_newline_does_not_add_a_line() -> None:
    assert passages.split_lines("a\nb\n") == ["a", "b"] and passages.split_lines("a\r\nb") == ["a", "b"]
    assert passages.split_lines("") == [""]


# --- matching ------------------------------------------------------------------------------------------------


def test_query_words_are_lower_cased_without_edge_punctuation_each_once() -> None:
    assert passages.query_words('Checksum, "lane" 118? checksum 供应商C。') == ["checksum", "lane", "118", "供应商c"]


@pytest.mark.parametrize(("word", "text", "found"), [
    ("lane", "Lanes 1-3 are up", True),  # case-insensitive, at the start of a word
    ("lane", "a planet", False),  # not inside a word
    ("value", "max_value = 3", True),  # an underscore is a boundary
    ("每箱", "供应商C报价：每箱12件", True),  # CJK words match anywhere
    ("供应商c", "供应商C最新报价", True),
    ("-v", "pytest -v", True), ("--verbose", "run--verbose", True),  # no word start to look for
])
def test_a_word_matches_at_a_word_start_or_anywhere_for_cjk(word: str, text: str, found: bool) -> None:
    assert (passages.word_pattern(word).search(text) is not None) is found


def pieces_of(*lines: str) -> tuple[passages.Piece, ...]:
    return passages.layout("\n".join(lines), 1000, COUNTER).pieces


def test_lines_holding_every_word_are_the_answer_and_the_others_are_counted() -> None:
    pieces = pieces_of("lane 1 ok", "checksum for lane 118", "lane 118 ok", "checksum mismatch")
    ranked, partial = passages.matching(pieces, ["checksum", "lane", "118"])
    assert ranked == [1] and partial == 3


def test_without_a_line_holding_every_word_more_words_rank_first_then_rarer_words() -> None:
    pieces = pieces_of("error in lane 4", "warning lane 5", "error warning", "lane 6", "nothing", "error again")
    ranked, partial = passages.matching(pieces, ["error", "warning", "lane", "timeout"])
    # three lines hold two of the words; "warning" is in two lines, "error" and "lane" in three each: the two
    # lines holding the rarer word come first, in document order
    assert ranked == [1, 2, 0, 3, 5] and partial == 0


def test_selection_keeps_context_within_the_limit_and_counts_what_did_not_fit() -> None:
    laid = passages.layout(lanes(), 2000, COUNTER)
    ranked, _ = passages.matching(laid.pieces, ["lane"])
    chosen = passages.select(laid.pieces, ranked, 2, 120)
    assert sum(p.tokens + 1 for p in chosen.pieces) <= 120 + len(chosen.pieces)
    assert chosen.left_out > 200 and chosen.matched == len(ranked)
    single = passages.select(laid.pieces, [117], 2, 1000)
    assert [p.line for p in single.pieces] == [116, 117, 118, 119, 120] and single.left_out == 0
    alone = passages.select(laid.pieces, [117], 2, single.pieces[2].tokens + 1)
    assert [p.line for p in alone.pieces] == [118]  # no room for context: the match alone


def test_rendering_numbers_lines_and_marks_gaps() -> None:
    laid = passages.layout("a\nb\nc\nd\ne", 100, COUNTER)
    assert passages.render([laid.pieces[0], laid.pieces[1], laid.pieces[4]]) == "1| a\n2| b\n…\n5| e"


@pytest.mark.parametrize(("value", "expected"), [
    ("120-180", (120, 180)), ("120:180", (120, 180)), ("120..180", (120, 180)), ("L120-L180", (120, 180)),
    ("120 to 180", (120, 180)), ("120-", (120, None)), ("120", (120, 120)), (120, (120, 120)), ([3, 9], (3, 9)),
    ("all", None), (0, None), (True, None),
])
def test_line_ranges_are_read_in_the_forms_models_write(value: Any, expected: Any) -> None:
    assert passages.parse_lines(value) == expected


# --- the resolver --------------------------------------------------------------------------------------------


def test_a_plain_ref_is_page_one_with_where_it_is_and_how_to_go_on() -> None:
    answer = recall({"r1": lanes()}, ref="r1")
    assert answer.startswith("[ref:r1] bash:\n1| lane 001 ")
    found = re.search(r'\(lines 1-(\d+) of 240, page 1 of (\d+); ask \{"ref": "r1", "page": 2\} for more\)$', answer)
    assert found is not None, answer[-200:]
    assert CHECKSUM not in answer and COUNTER.text(answer) <= 600


def test_pages_follow_each_other_to_the_end_and_say_so() -> None:
    seen: list[int] = []
    page = 1
    while True:
        answer = recall({"r1": lanes()}, ref="r1", page=page)
        assert COUNTER.text(answer) <= 600
        seen += [int(line.split("|")[0]) for line in answer.splitlines()[1:-1]]
        if answer.endswith(": the end)"):
            break
        assert f'"page": {page + 1}' in answer
        page += 1
    assert seen == list(range(1, 241)) and page > 3
    assert recall({"r1": lanes()}, ref="r1", page=page + 1) == (
        f"[ref:r1] has {page} pages (240 lines); there is no page {page + 1}.")


def test_a_whole_short_output_has_no_footer() -> None:
    assert recall({"r1": "one\ntwo"}, ref="[ref:r1]") == "[ref:r1] bash:\n1| one\n2| two"


def test_a_line_range_and_start_and_end_lines() -> None:
    line = lanes().splitlines()
    answer = recall({"r1": lanes()}, ref="r1", lines="117-119")
    assert answer == (f"[ref:r1] bash:\n117| {line[116]}\n118| {CHECKSUM}\n119| {line[118]}"
                      '\n(lines 117-119 of 240, ask {"ref": "r1", "lines": "120-122"} for more)')
    assert recall({"r1": lanes()}, ref="r1", start_line=239) .endswith("(lines 239-240 of 240: the end)")
    assert recall({"r1": lanes()}, ref="r1", start_line=118, end_line=118).splitlines()[1] == "118| " + CHECKSUM
    assert recall({"r1": lanes()}, ref="r1", lines="500-600") == "[ref:r1] has 240 lines; line 500 is past its end."


def test_a_range_larger_than_the_answer_says_where_it_stopped() -> None:
    answer = recall({"r1": lanes()}, ref="r1", lines="10-200")
    found = re.search(r'\(lines 10-(\d+) of 240; ask \{"ref": "r1", "lines": "(\d+)-200"\} for the rest\)$', answer)
    assert found is not None and int(found.group(2)) == int(found.group(1)) + 1
    assert COUNTER.text(answer) <= 600


def test_ref_and_query_return_the_matching_line_from_the_middle_with_context() -> None:
    line = lanes().splitlines()
    answer = recall({"r1": lanes()}, ref="r1", query="checksum lane 118")
    assert answer.splitlines() == [
        "[ref:r1] bash, 240 lines; lines matching 'checksum lane 118':",
        *(f"{number}| {line[number - 1]}" for number in range(116, 121)),
        "(239 lines hold only some of the words: ask with fewer words for them)"]


def test_many_matches_stay_within_max_tokens_and_say_how_many_were_left_out() -> None:
    answer = recall({"r1": lanes()}, max_tokens=300, ref="r1", query="LANE")
    assert COUNTER.text(answer) <= 300
    found = re.search(r"\((\d+) more matching lines did not fit\)$", answer)
    assert found is not None and 150 < int(found.group(1)) < 240


def test_no_match_says_so_with_the_size_of_the_output() -> None:
    pages = re.search(r"page 1 of (\d+)", recall({"r1": lanes()}, ref="r1")).group(1)  # type: ignore[union-attr]
    assert recall({"r1": lanes()}, ref="r1", query="zebra") == (
        f"No line of [ref:r1] (bash, 240 lines, {pages} pages) matches 'zebra'. "
        'Read it with {"ref": "r1", "page": 1}, or try other words.')


def test_a_chinese_query_matches_inside_chinese_text() -> None:
    answer = recall({"q": QUOTES}, context=0, ref="q", query="供应商C 每箱")
    assert answer.splitlines()[1:] == ["6| 供应商C最新报价：每箱30件（已确认）",
                                       "(5 lines hold only some of the words: ask with fewer words for them)"]
    assert recall({"q": QUOTES}, context=0, ref="q", query="quote").splitlines()[1].startswith('7| {"supplier": "C"')


def test_a_long_single_line_output_shows_the_part_that_matches() -> None:
    blob = json.dumps({"rows": [{"id": n, "v": "x" * 20} for n in range(400)] + [{"id": "needle_77", "v": "ok"}]})
    answer = recall({"j": blob}, max_tokens=400, context=0, ref="j", query="needle_77")
    assert "needle_77" in answer and COUNTER.text(answer) <= 400
    assert re.search(r"^1 \(part (\d+) of \1\)\| ", answer.splitlines()[1])  # the last part, where the needle is


def test_a_query_across_the_session_shows_each_documents_passage_within_max_tokens() -> None:
    documents = {"r1": lanes(), "r2": "build log\n" + "compiling\n" * 300 + "lane 118 checksum verified\ndone"}
    answer = recall(documents, max_tokens=500, query="checksum lane 118")
    assert COUNTER.text(answer) <= 500
    first, second = answer.split("\n\n")[:2]
    assert first.startswith("[ref:r1] bash, 240 lines:\n116| ") and "118| " + CHECKSUM in first
    assert second.startswith("[ref:r2] bash, 303 lines:\n") and "302| lane 118 checksum verified" in second
    assert "lane 001" not in answer and "build log" not in answer
    assert answer.endswith('(ask {"ref": "ID", "query": "checksum lane 118"} for more of one)')


def test_unknown_refs_and_bad_arguments_get_short_answers() -> None:
    assert recall({}, ref="0123") == "No stored content has ref 0123 in this conversation."
    resolver = Resolver(Documents({}), COUNTER, Scope.whole("s"), 600)  # type: ignore[arg-type]
    assert resolver("not json").startswith("workset_recall takes {\"ref\": \"ID\"}")
    assert resolver("{}").startswith("workset_recall takes")


# --- the store: CJK words are found inside CJK text, within the session -----------------------------------------


def stored(store: Store, session: str, ref: str, content: str) -> None:
    message = {"role": "tool", "tool_call_id": ref, "content": content}
    store.record(Scope.whole(session), [NewMessage(f"{session}-{ref}", None, 0, message, 10, ref, "quotes", "", "ok", content)],
                 [], [], "m", "p", 1)


def test_search_finds_a_chinese_word_inside_chinese_text_of_its_own_session_only(tmp_path: Path) -> None:
    store = open_store(store_location(tmp_path / "s.db"))
    try:
        for session in ("a", "b"):
            store.create_session(session, "k", session, "m", "p")
        stored(store, "a", "q1", QUOTES)
        stored(store, "a", "q2", "nothing about suppliers here")
        stored(store, "b", "q3", "供应商C最新报价：每箱40件")
        assert [hit["ref"] for hit in store.search_evidence(Scope.whole("a"), "每箱")] == ["q1"]
        assert [hit["ref"] for hit in store.search_evidence(Scope.whole("b"), "每箱")] == ["q3"]
        assert [hit["ref"] for hit in store.search_evidence(Scope.whole("a"), "供应商C 报价")] == ["q1"]  # words are lower-cased
        assert [hit["ref"] for hit in store.search_evidence(Scope.whole("a"), "nothing, here")] == ["q2"]  # full text as before
        assert store.search_evidence(Scope.whole("a"), "供应商Z") == []
    finally:
        store.close()


# --- the ref of an assistant message reads its whole turn ---------------------------------------------------------


def bash_call(call_id: str, command: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": command})}}


def tool_turn_run(report: str) -> list[dict[str, Any]]:
    """A tool-call agent: one step with two parallel calls (the second returns `report`), then one more step."""
    return [{"role": "system", "content": "You are an ops agent."},
            {"role": "user", "content": "Audit the lanes."},
            {"role": "assistant", "content": "Reading the config and the lanes report.",
             "tool_calls": [bash_call("c1", "cat lanes.cfg"), bash_call("c2", "cat lanes.log")]},
            {"role": "tool", "tool_call_id": "c1", "content": "lanes = 240"},
            {"role": "tool", "tool_call_id": "c2", "content": report},
            {"role": "assistant", "content": "Next step.", "tool_calls": [bash_call("c3", "df -h")]},
            {"role": "tool", "tool_call_id": "c3", "content": "disk 41% used"}]


class Recorded:
    """Conversations recorded in a real store as the proxy records them (resolve, then settle)."""

    def __init__(self, path: Path) -> None:
        from proxy.policy import Policy
        from proxy.session import Sessions

        self.store = open_store(path)
        self.sessions = Sessions(self.store, COUNTER)
        self.observations = Policy().observation_matcher
        self.session_ids: dict[str, str] = {}

    def record(self, session: str, messages: list[dict[str, Any]]) -> list[str]:
        """Record `messages` under an explicit session id; the refs of its messages, in order."""
        branch = self.sessions.resolve("key", session, messages, "m", "p", observations=self.observations).branch
        self.sessions.settle(branch)
        self.session_ids[session] = branch.session_id
        return list(branch.refs)

    def recall(self, session: str, max_tokens: int = 600, **arguments: Any) -> str:
        return Resolver(self.store, COUNTER, Scope.whole(self.session_ids[session]), max_tokens, 3, 2)(json.dumps(arguments))


@pytest.fixture
def recorded(tmp_path: Path) -> Any:
    recorded = Recorded(store_location(tmp_path / "s.db"))
    yield recorded
    recorded.store.close()


def test_an_assistant_ref_reads_its_text_and_calls_then_each_result_under_its_own_ref(recorded: Recorded) -> None:
    refs = recorded.record("ops", tool_turn_run("lanes ok\nchecksum = 7f3a91c2"))
    answer = recorded.recall("ops", ref=refs[2])
    assert answer.splitlines() == [
        f"[ref:{refs[2]}] assistant:",
        "1| Reading the config and the lanes report.",
        '2| bash({"command": "cat lanes.cfg"})',
        '3| bash({"command": "cat lanes.log"})',
        f'4| --- result of bash {{"command": "cat lanes.cfg"}} [ref:{refs[3]}]',
        "5| lanes = 240",
        f'6| --- result of bash {{"command": "cat lanes.log"}} [ref:{refs[4]}]',
        "7| lanes ok",
        "8| checksum = 7f3a91c2"]  # not the next step's output
    assert recorded.recall("ops", ref=refs[4]) == f"[ref:{refs[4]}] bash:\n1| lanes ok\n2| checksum = 7f3a91c2"


def test_an_assistant_ref_with_a_query_reaches_a_line_in_the_middle_of_its_turns_large_output(
        recorded: Recorded) -> None:
    refs = recorded.record("ops", tool_turn_run(lanes()))
    page = recorded.recall("ops", ref=refs[2])
    assert "lane 001" in page and CHECKSUM not in page and '"page": 2' in page  # the output is paged, as one text
    answer = recorded.recall("ops", ref=refs[2], query="checksum lane 118")
    line = lanes().splitlines()
    assert answer.splitlines()[0] == f"[ref:{refs[2]}] assistant, 246 lines; lines matching 'checksum lane 118':"
    assert answer.splitlines()[1:6] == [f"{number + 6}| {line[number - 1]}" for number in range(116, 121)]
    assert "lane 001" not in answer and COUNTER.text(answer) <= 600
    assert recorded.recall("ops", ref=refs[2], lines="124").splitlines()[1] == f"124| {CHECKSUM}"


def test_a_fork_below_the_assistant_message_reads_the_newest_result(recorded: Recorded) -> None:
    first = recorded.record("ops", tool_turn_run("first report"))
    retried = tool_turn_run("second report")
    retried[3]["content"] = "lanes = 12"
    second = recorded.record("ops", retried)
    assert first[2] == second[2] and first[3] != second[3]  # the same assistant message, two branches below it
    answer = recorded.recall("ops", ref=first[2])
    assert "lanes = 12" in answer and "second report" in answer  # the retried call's result is the one that counts
    assert "lanes = 240" not in answer and "first report" not in answer


def test_a_text_based_agents_assistant_ref_reads_the_observation_after_it(recorded: Recorded) -> None:
    messages = [{"role": "system", "content": "You are a coding agent."},
                {"role": "user", "content": "Find the failing test."},
                {"role": "assistant", "content": "Let me run the tests.\n```bash\npytest -q\n```"},
                {"role": "user", "content": "<returncode>1</returncode>\n<output>\nFAILED tests/test_tz.py::test_fold\n"
                                            "1 failed, 41 passed\n</output>"},
                {"role": "assistant", "content": "The fold test fails. Cleaning up first.\n```bash\nrm -rf build\n```"},
                {"role": "user", "content": "No, keep the build directory."}]
    refs = recorded.record("swe", messages)
    answer = recorded.recall("swe", ref=refs[2])
    assert f'5| --- result of bash {{"command":"pytest -q"}} [ref:{refs[3]}]' in answer.splitlines()
    assert "FAILED tests/test_tz.py::test_fold" in answer
    # the user's reply to a command block is the user's words, not the command's result
    assert "keep the build" not in recorded.recall("swe", ref=refs[4])


def test_an_assistant_ref_of_another_session_is_not_found(recorded: Recorded) -> None:
    refs = recorded.record("ops", tool_turn_run("checksum = 7f3a91c2"))
    recorded.record("other", [{"role": "user", "content": "hello"}])
    assert recorded.recall("other", ref=refs[2]) == f"No stored content has ref {refs[2]} in this conversation."


def test_odd_line_ranges_and_queries_get_an_answer_not_an_error(recorded: Recorded) -> None:
    refs = recorded.record("ops", tool_turn_run("report"))
    for lines in ("0", "0-0", [0, -3], "9-3"):
        answer = recorded.recall("ops", ref=refs[3], lines=lines)
        assert answer.startswith(f"[ref:{refs[3]}]"), (lines, answer)
    assert "lanes" in recorded.recall("ops", query="lanes\x00 \x01report")
    assert passages.query_words(" ".join(f"w{n}" for n in range(100))) == [f"w{n}" for n in range(16)]
