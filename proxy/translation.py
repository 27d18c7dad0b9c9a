"""Reading a wire format's history once: an agent resends its whole conversation every turn, so each
conversation's last request, as read into the internal form, is remembered, and the next one is read from where
it differs (Claude Code moves its cache breakpoint, so the turn before the newest is read again too). Only a
cache: a request that matches nothing is read whole, and what is reused is what reading it again would give."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .jsonbytes import encode_json, text_size
from .records import Message
from .session import common_prefix

# wire messages from `start` -> (internal messages, after each wire message how many internal ones are complete or
# -1 where no clean cut is)
ReadMessages = Callable[[list[Any], int], tuple[list[Message], list[int]]]


@dataclass
class _Read:
    wire: list[Any]
    messages: list[Message]
    cuts: list[int]
    sizes: list[int]  # after each wire message, the characters of the history so far (text_size)

    @property
    def size(self) -> int:
        return self.sizes[-1] if self.sizes else 0


class Translations:
    """The last read request of the most recently seen conversations (least recently used dropped first): at most
    `capacity` of them, holding at most `max_chars` of text between them (a tenant may send megabytes in each, and
    each is held twice, as sent and as read). Safe to share between worker threads."""

    def __init__(self, capacity: int, max_chars: int | None = None) -> None:
        self._entries: OrderedDict[str, _Read] = OrderedDict()
        self._capacity = capacity
        self._max_chars = max_chars
        self._held = 0  # the entries' sizes, as a running sum
        self._lock = threading.Lock()

    def read(self, key: str, wire: list[Any], read_messages: ReadMessages) -> list[Message]:
        """The internal messages of `wire`, reusing what the conversation read last time up to the last clean cut
        before the first wire message that differs. `key` names the caller and session; the first message tells
        its conversations apart (an agent's and its subagents')."""
        if wire:
            key += "\0" + hashlib.blake2b(encode_json(wire[0]), digest_size=16).hexdigest()
        with self._lock:
            previous = self._entries.get(key)
        start, reused, cuts, sizes = 0, [], [], []
        if previous is not None:
            equal = common_prefix(previous.wire, wire)
            while equal and previous.cuts[equal - 1] < 0:
                equal -= 1
            if equal:
                start, reused = equal, previous.messages[:previous.cuts[equal - 1]]
                cuts, sizes = previous.cuts[:equal], previous.sizes[:equal]
        new, new_cuts = read_messages(wire, start)
        offset = len(reused)
        held = sizes[-1] if sizes else 0
        for message in wire[start:]:  # a step per JSON value of what is new, not per character
            held += text_size(message)
            sizes.append(held)
        entry = _Read(wire, reused + new, cuts + [cut + offset if cut >= 0 else -1 for cut in new_cuts], sizes)
        with self._lock:
            replaced = self._entries.pop(key, None)
            self._held += entry.size - (replaced.size if replaced is not None else 0)
            self._entries[key] = entry
            # the one just read goes last, even alone over max_chars: its conversation's next turn reuses it
            while len(self._entries) > self._capacity or (
                    self._max_chars and self._held > self._max_chars and len(self._entries) > 1):
                _, dropped = self._entries.popitem(last=False)
                self._held -= dropped.size
        return entry.messages
