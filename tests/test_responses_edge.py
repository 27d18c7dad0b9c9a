"""proxy.responses read without a server: what the core sees of a Responses request."""

from __future__ import annotations

from proxy import responses


def test_an_assistant_message_item_with_string_content_keeps_its_text() -> None:
    """The API takes an assistant message's content as a string as well as output_text parts (EasyInputMessage);
    its text is what the core extracts from and counts, and it is written back as the item it came as."""
    body = {"model": "gpt-4o", "input": [
        {"role": "user", "content": "Where is the parser?"},
        {"role": "assistant", "content": "In src/parse.py, function parse_row."},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Then tests/."}]},
        {"role": "user", "content": "Fix it."},
    ]}
    messages = responses.to_internal(body)["messages"]
    assert [(m["role"], m["content"]) for m in messages] == [
        ("user", "Where is the parser?"), ("assistant", "In src/parse.py, function parse_row.\nThen tests/."),
        ("user", "Fix it.")]
    assert responses.render(body, {"messages": messages})["input"] == body["input"]
