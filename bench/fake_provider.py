"""The tests' fake provider as a standalone server, for benchmarks: python -m bench.fake_provider PORT.
Chat completions and embeddings come from tests/fakeupstream.py; Anthropic Messages and Responses get one fixed
short answer each, read and parsed like the others but not validated (the strict fakes in tests/fakewire.py
would spend more on workset's cache breakpoints than on the client's own body, and blur the comparison)."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import orjson
import uvicorn
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from fakeupstream import Completion, FakeUpstream  # noqa: E402

MESSAGE = {"id": "msg_bench", "type": "message", "role": "assistant", "model": "bench",
           "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn", "stop_sequence": None,
           "usage": {"input_tokens": 10, "output_tokens": 1}}
RESPONSE = {"id": "resp_bench", "object": "response", "created_at": 1_700_000_000, "status": "completed",
            "model": "bench", "output": [{"type": "message", "id": "msg_bench", "role": "assistant",
                                          "status": "completed",
                                          "content": [{"type": "output_text", "text": "ok", "annotations": []}]}],
            "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 1,
                      "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 11}}


def fixed(answer: dict[str, object]) -> Callable[[Request], Awaitable[Response]]:
    body = orjson.dumps(answer)

    async def endpoint(request: Request) -> Response:
        orjson.loads(await request.body())
        return Response(body, media_type="application/json")

    return endpoint


def main() -> None:
    port = int(sys.argv[1])
    fake = FakeUpstream(default=lambda body: Completion(content="ok"))
    fake.app.router.routes.insert(0, Route("/v1/messages", fixed(MESSAGE), methods=["POST"]))
    fake.app.router.routes.insert(0, Route("/v1/responses", fixed(RESPONSE), methods=["POST"]))
    uvicorn.run(fake.app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
