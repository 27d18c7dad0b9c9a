"""Shared fixtures: a fake provider and the real proxy, both on 127.0.0.1, always stopped."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fakeupstream import FakeUpstream  # noqa: E402
from servers import ServerThread  # noqa: E402
from stores import drop_test_schemas, store_location, store_settings  # noqa: E402

from proxy.app import create_app  # noqa: E402
from proxy.cli import load_settings  # noqa: E402


@pytest.fixture(scope="session")
def fake() -> Iterator[FakeUpstream]:
    upstream = FakeUpstream()
    with ServerThread(upstream.app) as server:
        upstream.url = server.url  # type: ignore[attr-defined]
        yield upstream


@pytest.fixture(autouse=True)
def _fresh_fake(request: pytest.FixtureRequest) -> None:
    if "fake" in request.fixturenames:
        request.getfixturevalue("fake").reset()


@dataclass
class Proxy:
    url: str
    app: Any
    store: str  # where its store is: a SQLite file, or a PostgreSQL URL (see tests/stores.py)
    config_path: Path
    server: ServerThread | None = None

    @property
    def engine(self) -> Any:
        return self.app.state.workset.engine

    def stop(self) -> None:
        """Shut down as in production (lifespan: deferred ingest settled, store closed); idempotent."""
        if self.server is not None:
            self.server.stop()

    def flush(self) -> None:
        """Finish deferred ingest and wait for queued store writes, so the SQLite file holds everything."""
        self.engine.sessions.settle_all()
        self.engine.store.flush()

    def client(self, key: str = "sk-test", **kwargs: Any) -> Any:
        import openai

        return openai.OpenAI(base_url=self.url + "/v1", api_key=key, timeout=20, max_retries=0, **kwargs)

    def async_client(self, key: str = "sk-test", **kwargs: Any) -> Any:
        import openai

        return openai.AsyncOpenAI(base_url=self.url + "/v1", api_key=key, timeout=20, max_retries=0, **kwargs)


def write_config(folder: Path, upstream_url: str, **extra: Any) -> Path:
    """A config sending every model to the fake provider, with the repo's presets and a small test policy."""
    small = folder / "small.yaml"
    small.write_text(yaml.safe_dump({
        "name": "small", "recent_turns": 3,
        "budget": {"max_input_tokens": 3000, "trigger_ratio": 0.8, "target_ratio": 0.5},
        "tool_outputs": {"max_tokens": 600, "head_tokens": 150, "tail_tokens": 100},
        "state": {"position": "both"},
    }))
    data: dict[str, Any] = {
        "model_list": [{"model_name": "*", "litellm_params": {"model": "openai/*", "api_base": upstream_url + "/v1"}}],
        "policies_dir": str(REPO / "policies"),
        "policy": "default",
        "policy_by_model": {"small-*": str(small)},
        "store": store_settings(store_location(folder / "store.db")),
        "upstream": {"timeout_s": 5, "connect_timeout_s": 2},
        # what tests check must not depend on how busy the machine is: the cap itself is tested on its own
        "ingest": {"extract_ms": 5000},
    }
    for key, value in extra.items():
        data[key] = value
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture
def start_proxy(tmp_path: Path, fake: FakeUpstream) -> Iterator[Any]:
    """start_proxy(**config overrides) -> Proxy; every proxy started is stopped at the end of the test."""
    started: list[ServerThread] = []

    def start(upstream_url: str | None = None, **extra: Any) -> Proxy:
        folder = tmp_path / f"proxy{len(started)}"
        folder.mkdir()
        config_path = write_config(folder, upstream_url or fake.url, **extra)  # type: ignore[attr-defined]
        config, policies = load_settings(str(config_path))
        app = create_app(config, policies)
        server = ServerThread(app)
        started.append(server)
        server.start()
        return Proxy(server.url, app, config.store.location, config_path, server)

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def proxy(start_proxy: Any) -> Proxy:
    return start_proxy()


os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    drop_test_schemas()
