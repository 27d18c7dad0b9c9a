"""Identities: a caller's key hash, the root of a caller's (or an explicit session's) conversation tree, and
message nodes chained on their parent's hash, so equal histories of one caller meet in the same nodes."""

from __future__ import annotations

import hashlib
from typing import Iterable

from .jsonbytes import encode_message
from .records import Message

REF_LENGTH = 12


def key_hash(api_key: str | None) -> str:
    """Sessions belong to the caller: they are keyed by this, never by the key itself."""
    return hashlib.blake2b((api_key or "").encode(), digest_size=16, person=b"workset-key").hexdigest()


def root_hash(caller: str, explicit_session: str | None, client_session: str | None = None) -> str:
    """The tree a request's conversation is in: the caller's, an explicit session's (one conversation), or the
    session a client names in its own header (Claude Code, Codex), whose conversations (the agent's, its
    subagents') are sessions of their own within it."""
    if explicit_session is not None:
        seed = f"{caller}\0{explicit_session}"
    elif client_session is not None:
        seed = f"{caller}\0\1client\0{client_session}"
    else:
        seed = caller
    return hashlib.blake2b(seed.encode(), digest_size=16, person=b"workset-root").hexdigest()


def node_hash(parent: str, message: Message) -> str:
    digest = hashlib.blake2b(parent.encode(), digest_size=16)
    digest.update(encode_message(message, sort_keys=True))  # any depth the proxy accepts, keys in order
    return digest.hexdigest()


def chain(parent: str, messages: Iterable[Message]) -> list[str]:
    hashes = []
    for message in messages:
        parent = node_hash(parent, message)
        hashes.append(parent)
    return hashes


def ref_of(node: str) -> str:
    """Stable evidence ref of a message node (unique within a session)."""
    return node[:REF_LENGTH]


def session_id_for(root: str, first_node: str, explicit_session: str | None) -> str:
    """An explicit session is all of its root's tree; an implicit one is the subtree under its first message."""
    return "x_" + root[:20] if explicit_session is not None else "s_" + first_node[:20]
