"""The tests' fake OpenAI-compatible provider as a standalone server, for benchmarks: python -m bench.fake_provider PORT"""

from __future__ import annotations

import sys
from pathlib import Path

import uvicorn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from fakeupstream import Completion, FakeUpstream  # noqa: E402


def main() -> None:
    port = int(sys.argv[1])
    fake = FakeUpstream(default=lambda body: Completion(content="ok"))
    uvicorn.run(fake.app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
