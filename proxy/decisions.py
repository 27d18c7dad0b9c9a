"""Decision records: what workset did to one request, message by message, and which rule decided it.

A record is kept for every forwarded request, so it is a compact encoding against the stored conversation tree: one
code per message of the agent's request, in order (kept, masked, excerpted, paste, removed), with where the compacted
turns and the live state stand, packed; the messages workset wrote are stored once each per session, under a key
made of their code and the node they stand for (the compacted turns under their epoch, the state under its hash);
and the few figures the reasons are read from. Reading a record back into a per-message account (proxy.report) is
done only when someone looks.
"""

from __future__ import annotations

import base64
import hashlib
import zlib
from dataclasses import dataclass, field
from typing import Any

import orjson

from .records import Message
from .workingset import COMPACTED, VERBATIM, BuiltPrefix, Epoch, made_key

RECORD_VERSION = 1
STATE = "S"  # the code of the live task state (and retrieved content) after the newest message
FORWARDED_AS_SENT = "as sent"  # no working set: every message forwarded as the agent sent it
_PACKED = "z:"  # codes longer than a few hundred are stored compressed (long runs of one code pack to little)
_PACK_FROM = 256


@dataclass
class Decision:
    """One request's decision record, ready to store."""

    codes: str  # see BuiltPrefix.codes, with STATE where the live state went
    why: dict[str, Any]  # the rules' figures: policy keys, budget, the compaction in force and this request's trigger
    made: dict[str, bytes] = field(default_factory=dict)  # storage key -> message JSON, for messages not stored before
    messages: int = 0  # how many messages the agent sent...
    tip: str = ""  # ...ending with this stored node: the request as sent is the path to it
    state: str = ""  # the storage key of the live state, if one was sent

    def encoded(self) -> bytes:
        return orjson.dumps({"v": RECORD_VERSION, "codes": pack(self.codes), "state": self.state, "why": self.why})


def pack(codes: str) -> str:
    if len(codes) < _PACK_FROM:
        return codes
    return _PACKED + base64.b64encode(zlib.compress(codes.encode(), 6)).decode()


def unpack(stored: str) -> str:
    return zlib.decompress(base64.b64decode(stored[len(_PACKED):])).decode() if stored.startswith(_PACKED) else stored


def as_sent(hashes: list[str], note: str) -> Decision:
    """The record of a request forwarded without a working set (passthrough, unpaired tool calls)."""
    return Decision(VERBATIM * len(hashes), {"forwarded": FORWARDED_AS_SENT, "note": note}, messages=len(hashes),
                    tip=hashes[-1] if hashes else "")


def decide(prefix: BuiltPrefix, hashes: list[str], tail: Message | None, tail_last: bool,
           why: dict[str, Any]) -> Decision:
    """The record of a request whose working set is `prefix` (plus `tail`, the live state, last or before a trailing
    prefill when `tail_last` is False). What workset wrote is handed over once per prefix (BuiltPrefix.recorded)."""
    made = {key: orjson.dumps(message) for key, message in prefix.made[prefix.recorded:]}
    prefix.recorded = len(prefix.made)
    codes = "".join(prefix.codes)
    state = ""
    if tail is not None:
        body = orjson.dumps(tail)
        state = made_key(STATE, hashlib.blake2b(body, digest_size=10).hexdigest())
        if state != prefix.tail_key:  # the same state as last time is stored already
            made[state] = body
            prefix.tail_key = state
        codes = codes + STATE if tail_last else codes[:-1] + STATE + codes[-1:]
    return Decision(codes, why, made, len(hashes), hashes[-1] if hashes else "", state)


def epoch_why(epoch: Epoch | None) -> dict[str, Any] | None:
    """The compaction in force, as the record names it: its checkpoint (by tip node), its reason, and the key its
    compacted-turns message is stored under."""
    if epoch is None:
        return None
    return {"tip": epoch.tip_hash, "reason": epoch.reason, "compacted": made_key(COMPACTED, epoch.key),
            "masked_through": epoch.masked_through, "summary_through": epoch.summary_through}


__all__ = ["Decision", "FORWARDED_AS_SENT", "STATE", "as_sent", "decide", "epoch_why", "pack", "unpack"]
