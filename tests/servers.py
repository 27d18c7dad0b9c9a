"""Start real HTTP servers on 127.0.0.1 for end-to-end tests, with bounded waits.

    with ServerThread(app) as server:          # an ASGI app in this process
        httpx.get(server.url + "/v1/models", timeout=5)

    with ServerProcess(argv, port=free_port()) as proc:   # any command that listens on `port`
        ...
    proc.output()                              # its stdout + stderr, also after stop()
"""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Literal, Self

import uvicorn
from starlette.types import ASGIApp

HOST = "127.0.0.1"


def free_port() -> int:
    """A port that was free a moment ago (another process may still grab it before use)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def _accepts_connections(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=0.2):
            return True
    except OSError:
        return False


class ServerThread:
    """Run an ASGI app with uvicorn in a daemon thread.

    The listening socket is bound in __init__ (port None: any free port) and handed to uvicorn,
    so `url` is known before start() and no other process can take the port in between.
    Call stop() (or use `with`) even if start() was never called, to release the socket.
    """

    def __init__(
        self,
        app: ASGIApp,
        port: int | None = None,
        start_timeout: float = 20.0,
        lifespan: Literal["on", "off", "auto"] = "on",
        graceful_timeout: int = 1,
    ) -> None:
        self.start_timeout = start_timeout
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._sock.bind((HOST, port or 0))
        except OSError:
            self._sock.close()
            raise
        self.port: int = self._sock.getsockname()[1]
        self.url = f"http://{HOST}:{self.port}"
        config = uvicorn.Config(
            app,
            host=HOST,
            port=self.port,
            lifespan=lifespan,
            # log_config=None: don't let uvicorn's dictConfig rebind logging to the stderr of
            # whichever test ran first; records propagate to the root logger (pytest's caplog).
            log_config=None,
            log_level="warning",
            access_log=False,
            # After stop(), in-flight requests (e.g. a Hang) get this long before being cancelled.
            timeout_graceful_shutdown=graceful_timeout,
        )
        self.server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._run, name=f"uvicorn-{self.port}", daemon=True)
        self._error: BaseException | None = None

    def _run(self) -> None:
        # Server.run installs no signal handlers off the main thread (uvicorn 0.54 capture_signals).
        try:
            self.server.run(sockets=[self._sock])
        except BaseException as exc:  # incl. SystemExit, which uvicorn raises when startup fails
            self._error = exc

    def start(self) -> Self:
        self._thread.start()
        deadline = time.monotonic() + self.start_timeout
        while not self.server.started:
            if not self._thread.is_alive():
                self._sock.close()
                raise RuntimeError(f"server {self.url} exited during startup: {self._error!r} (see uvicorn.error log)")
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"server {self.url} did not start within {self.start_timeout}s")
            time.sleep(0.01)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        if self._thread.is_alive():
            self.server.should_exit = True
            self._thread.join(timeout)
            if self._thread.is_alive():
                # Skip waiting for connections/tasks and the lifespan shutdown.
                self.server.force_exit = True
                self._thread.join(5.0)
            if self._thread.is_alive():
                raise RuntimeError(f"server {self.url} did not stop within {timeout + 5.0}s")
        self._sock.close()  # uvicorn closes it on shutdown; this covers "never started"

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


class ServerProcess:
    """Run a command that serves HTTP on 127.0.0.1:`port`; start() waits until the port accepts.

    `env` is applied on top of os.environ (PYTHONUNBUFFERED=1 is added so logs reach output()).
    """

    def __init__(
        self,
        argv: Sequence[str],
        port: int,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        start_timeout: float = 60.0,
    ) -> None:
        self.argv = list(argv)
        self.port = port
        self.url = f"http://{HOST}:{port}"
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        self.cwd = cwd
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        # A file, not a pipe: nobody drains a pipe while the test runs, and a full pipe blocks the child.
        self._log = tempfile.TemporaryFile()
        self._final_output: str | None = None

    def start(self) -> Self:
        self.proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=self.env,
            cwd=self.cwd,
        )
        deadline = time.monotonic() + self.start_timeout
        while not _accepts_connections(self.port):
            code = self.proc.poll()
            if code is not None:
                self.stop()
                raise RuntimeError(f"{self.argv} exited with {code} before listening on {self.url}; output:\n{self.output()}")
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(
                    f"{self.argv} did not listen on {self.url} within {self.start_timeout}s; output:\n{self.output()}"
                )
            time.sleep(0.05)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Terminate, then kill after `timeout`; keeps the output readable afterwards."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5.0)
        if self._final_output is None:
            self._final_output = self.output()
            self._log.close()

    def output(self) -> str:
        """Everything the process wrote to stdout and stderr so far."""
        if self._final_output is not None:
            return self._final_output
        fd = self._log.fileno()
        # pread leaves the file offset alone: the child shares it and appends through it.
        return os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace")

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def workset_serve(config: str | os.PathLike[str]) -> ServerProcess:
    """`workset serve --config config` in a process of its own, on a free port, started."""
    import sys
    from pathlib import Path

    port = free_port()
    return ServerProcess([sys.executable, "-m", "proxy.cli", "serve", "--config", str(config), "--port", str(port)],
                         port=port, cwd=Path(__file__).resolve().parent.parent).start()
