"""Names: `names` (the next-step recall metric's definition) finds what the NAME pattern finds, in linear time;
`index_names` (the index of elided turns) keeps identifiers and paths, not bare numbers, dates or hex fragments."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.extract.names import (
    MIN_LENGTH, NAME, _NAME_SCAN, _piece_names, _run_names, index_names, message_names, names,
)

_NAME_CHARS = "aAbZz09_./-:é١xT "


def reference_names(text: str) -> set[str]:
    """The metric's definition as first written: NAME over each whitespace-free chunk (quadratic on long runs)."""
    return {m for chunk in text.split() for m in NAME.findall(chunk) if len(m) >= MIN_LENGTH}


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=_NAME_CHARS, max_size=120))
def test_names_are_what_name_finds(text: str) -> None:
    assert names(text) == reference_names(text)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(["a", "B", "7", "_", ".", "-", "/", ":", "é", "aB", "Bc", "c1", "x.py", "ABC1", "123"]),
                max_size=40))
def test_the_faster_pattern_finds_what_name_finds(units: list[str]) -> None:
    text = "".join(units)
    assert _NAME_SCAN.findall(text) == NAME.findall(text), text


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=_NAME_CHARS.replace(" ", "") + "(", min_size=1, max_size=80))
def test_the_one_pass_scan_finds_what_name_finds_in_a_run(text: str) -> None:
    """`_run_names` serves long runs only; here it is checked on short ones, against NAME itself."""
    padded = f"({text}("
    for start, end in _runs(padded):
        assert _run_names(padded, start, end) == set(NAME.findall(padded, start, end + 1)), padded


# Units that make every alternative start, fail and skip inside one long piece (no "/", "-" or lone "."): the scan
# jumps over whole runs after a failure, and must land wherever NAME would match.
_PIECE_UNITS = ["a", "B", "7", "_", "é", "١", "aB", "Bc", "c1", "a.b", "x_y", "ABC1", "123", "HAT136", "T", "z"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_PIECE_UNITS), min_size=1, max_size=60), st.sampled_from(["", "-", ":"]),
       st.sampled_from(["", ":"]))
def test_the_scan_of_a_piece_finds_what_name_finds_in_order(units: list[str], lead: str, trail: str) -> None:
    piece = "".join(units)
    if piece.startswith(".") or piece.endswith(".") or ".." in piece:
        return
    text = f"{lead}{piece}{trail}"
    assert _piece_names(text, len(lead), len(lead) + len(piece)) == NAME.findall(text, len(lead)), text


def _runs(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in re.finditer(r"[\w./-]+", text)]


def test_names_on_long_runs() -> None:
    text = ("x" * 40 + "/mod_" + "a" * 30 + ".py ") + "HAT136" + "A" * 30 + " " + "9" * 50 + " HAT136:" + " getHTTPResponseCode"
    assert names(text) == reference_names(text)


def test_hostile_input_runs() -> None:
    """Each took from 10 s to several minutes before the one-pass scan; now well under a second."""
    for text in ("A" * 40_000, "ACGT" * 25_000, "[" * 100_000, "." * 100_000, "a" * 100_000, "a" + "/" * 100_000,
                 "Aa1" * 33_000, ("A" * 33 + " ") * 3_000, "a" + "-/" * 50_000, "aBcDé" * 20_000 + ".x",
                 "1a" * 50_000 + ".b", "_." * 50_000 + "a", "1.a" * 33_000, "a-1" * 33_000, "A1." * 33_000 + "b"):
        assert isinstance(names(text), set) and isinstance(index_names(text), set)
    # a whole run of 200k characters, past the window `names` reads: one pass (a quadratic scan takes minutes)
    for unit in ("-/", "aBcDé", "1a", "_.", "1.a", "a-1", "A1.", "a_", "Ab1"):
        text = "x" + unit * (200_000 // len(unit)) + ".y"
        assert isinstance(_run_names(f" {text} ", 1, len(text) + 1), set)


def test_the_index_keeps_identifiers_and_paths() -> None:
    text = (
        "Booked HAT136 for mia_li_3668 under PO-2231 (lane_121, INC-20931-B); see src/app/rates.py and "
        "proxy.extract.names; codes E402 and ABC123; getRates."
    )
    assert index_names(text) == {
        "HAT136", "mia_li_3668", "PO-2231", "lane_121", "INC-20931-B", "src/app/rates.py", "proxy.extract.names",
        "E402", "ABC123", "getRates",
    }


def test_the_index_drops_numbers_dates_and_hex_fragments() -> None:
    text = (
        "At 2024-05-14T10:44:24 (20240514T104424Z) lanes 121–240 took 1204 ms; 05/20/2024 and 2024/05/20, "
        "12,340.50 EUR, 100644, 1_000_000, fragment 3F2A and 1A2B3C; logged at 2026-03-29T01:05:00.019Z and "
        "01:05:07.968Z."
    )
    assert index_names(text) == set()
    assert {"1204", "100644", "05/20/2024", "1_000_000"} <= names(text)  # the metric still counts them


def test_message_names_read_the_tool_call_arguments() -> None:
    message = {"role": "assistant", "content": "Fetching 2024-05-20.", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "get", "arguments": '{"id": "ZFA04Y", "n": 4096}'}},
    ]}  # fmt: skip
    assert message_names(message, "Fetching 2024-05-20.") == ("ZFA04Y",)


def test_names_of_tool_call_arguments_are_read_from_the_values_not_their_json_escapes() -> None:
    from proxy.extract.names import message_names

    call = {"id": "1", "type": "function",
            "function": {"name": "python", "arguments": '{"code": "print(df)\\nConclusion = fit(rates_v2)"}'}}
    names = message_names({"role": "assistant", "content": "", "tool_calls": [call]}, "")
    assert "rates_v2" in names and not any(name.startswith("nConclusion") for name in names)
