"""A TCP relay on 127.0.0.1 that tests put between a workset replica and PostgreSQL, to cut the replica off from
its store (and restore it) without touching the machine's database service. An asyncio loop in its own thread.

    with Relay(5432) as relay:      # relay.port forwards to 127.0.0.1:5432
        relay.cut()                 # open connections reset, new ones refused
        relay.restore()             # accepting again
"""

from __future__ import annotations

import asyncio
import socket
import threading
from types import TracebackType
from typing import Self

HOST = "127.0.0.1"


class Relay:
    def __init__(self, target_port: int, target_host: str = HOST) -> None:
        self.target = (target_host, target_port)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="relay", daemon=True)
        self._server: asyncio.base_events.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()
        self._cut = False
        self.port = 0

    def start(self) -> Self:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._relay, HOST, 0), self._loop).result(10)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def cut(self) -> None:
        """Reset every relayed connection; refuse new ones until restore()."""
        asyncio.run_coroutine_threadsafe(self._cut_all(), self._loop).result(10)

    def restore(self) -> None:
        self._cut = False

    def stop(self) -> None:
        self.cut()
        if self._server is not None:
            self._loop.call_soon_threadsafe(self._server.close)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _cut_all(self) -> None:
        self._cut = True
        for writer in list(self._open):
            _reset(writer)
        self._open.clear()

    async def _relay(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        if self._cut:
            _reset(client_writer)
            return
        try:
            upstream_reader, upstream_writer = await asyncio.wait_for(asyncio.open_connection(*self.target), 5)
        except (OSError, asyncio.TimeoutError):
            _reset(client_writer)
            return
        for writer in (client_writer, upstream_writer):
            writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._open.add(writer)
        await asyncio.gather(self._pipe(client_reader, upstream_writer), self._pipe(upstream_reader, client_writer))
        for writer in (client_writer, upstream_writer):
            self._open.discard(writer)
            _reset(writer)

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            _reset(writer)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.stop()


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with a reset (SO_LINGER 0), as a cut cable looks to the peer once it notices."""
    try:
        sock = writer.get_extra_info("socket")
        if sock is not None and sock.fileno() >= 0:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        writer.transport.abort()
    except (OSError, RuntimeError):
        pass
