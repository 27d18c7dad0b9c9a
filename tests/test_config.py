"""Start-up validation: a bad config or policy stops workset with one line naming the key."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from servers import ServerProcess, free_port
from stores import run_sql, store_location

from proxy.cli import load_settings
from proxy.schema import ConfigError

REPO = Path(__file__).resolve().parent.parent


def write(path: Path, data: Any) -> Path:
    path.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return path


def test_shipped_config_and_presets_load() -> None:
    config, policies = load_settings(str(REPO / "config.yaml"))
    assert {"default", "coding-agent", "passthrough", "support-agent"} <= set(policies)
    assert config.server.port == 4100 and config.store.path == ".workset/workset.db"
    assert config.deployment_for("gpt-4o").litellm_params["model"] == "openai/*"
    assert config.deployment_for("anthropic/claude-x").litellm_params["model"] == "anthropic/*"


@pytest.mark.parametrize("data, needle", [
    ({"server": {"port": "eighty"}}, "server.port must be an integer"),
    ({"server": {"prot": 1}}, "unknown key server.prot"),
    ({"upstream": {"timeout_s": 0}}, "upstream.timeout_s must be at least"),
    ({"model_list": [{"model_name": "x", "litellm_params": {"api_base": "http://x"}}]}, "litellm_params.model"),
    ({"model_list": [{"model_name": "x", "litellm_params": {"model": "openai/x", "api_key": "os.environ/WS_NOPE_KEY"}}]},
     "model_list[0].litellm_params.api_key: environment variable WS_NOPE_KEY is not set"),
    ({"policy": "no-such-policy"}, "policy 'no-such-policy' not found"),
    ({"logging": {"level": "loud"}}, "logging.level must be one of"),
    ({"server": {"switch_interval_ms": 0}}, "server.switch_interval_ms must be at least"),
    ({"server": {"max_body_bytes": 200_000_000}}, "server.max_reading_bytes_per_caller (134217728) must be at least "
                                                  "server.max_body_bytes (200000000)"),
    ({"server": {"max_reading_bytes": 2000, "max_reading_bytes_per_caller": 4000, "max_body_bytes": 1024}},
     "server.max_reading_bytes (2000) must be at least server.max_reading_bytes_per_caller (4000)"),
])
def test_bad_config_names_the_key(tmp_path: Path, data: dict[str, Any], needle: str) -> None:
    data = {"policies_dir": str(REPO / "policies"), **data}
    with pytest.raises(ConfigError) as caught:
        load_settings(str(write(tmp_path / "config.yaml", data)))
    assert needle in str(caught.value)


def test_a_server_hands_the_interpreter_lock_over_as_configured() -> None:
    """workset serve tunes its own process (a library importing proxy keeps Python's defaults)."""
    import gc
    import sys

    from proxy.cli import tune_interpreter
    from proxy.config import ServerSettings

    interval, thresholds = sys.getswitchinterval(), gc.get_threshold()
    try:
        tune_interpreter(ServerSettings(switch_interval_ms=2.5, gc_young_threshold=1234))
        assert sys.getswitchinterval() == pytest.approx(0.0025)
        assert gc.get_threshold()[0] == 1234
    finally:
        sys.setswitchinterval(interval)
        gc.set_threshold(*thresholds)
        gc.unfreeze()


@pytest.mark.parametrize("policy, needle", [
    ({"budget": {"trigger_ratio": 1.5}}, "budget.trigger_ratio must be at most 1.0"),
    ({"budget": {"max_input_tokens": "lots"}}, "budget.max_input_tokens must be an integer or one of 'auto'"),
    ({"budget": {"trigger_ratio": 0.5, "target_ratio": 0.7}}, "budget.target_ratio (0.7) must not exceed"),
    ({"state": {"position": "middle"}}, "state.position must be one of 'head', 'tail', 'both'"),
    ({"recent_turns": 0}, "recent_turns must be at least 1"),
    ({"tool_outputs": {"max_tokenz": 5}}, "unknown key tool_outputs.max_tokenz"),
])
def test_bad_policy_names_the_key(tmp_path: Path, policy: dict[str, Any], needle: str) -> None:
    write(tmp_path / "broken.yaml", {"name": "broken", **policy})
    config = write(tmp_path / "config.yaml", {"policies_dir": str(tmp_path), "policy": "broken"})
    with pytest.raises(ConfigError) as caught:
        load_settings(str(config))
    assert needle in str(caught.value) and "broken" in str(caught.value)


def test_serve_with_bad_config_exits_with_one_line(tmp_path: Path) -> None:
    config = write(tmp_path / "config.yaml", {"policies_dir": str(REPO / "policies"), "server": {"port": "x"}})
    result = subprocess.run([sys.executable, "-m", "proxy", "serve", "--config", str(config)], capture_output=True,
                            text=True, timeout=60, cwd=REPO)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "server.port" in lines[0]


def test_serve_with_a_store_it_cannot_open_exits_with_one_line(tmp_path: Path) -> None:
    config = write(tmp_path / "config.yaml", {"policies_dir": str(REPO / "policies")})
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    result = subprocess.run([sys.executable, "-m", "proxy", "serve", "--config", str(config), "--store",
                             str(blocker / "store.db")], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"workset: cannot open the store {blocker / 'store.db'}:"), lines


@pytest.mark.e2e
def test_workset_serve_with_the_shipped_config(tmp_path: Path, fake: Any) -> None:
    """The README's path: `workset serve` with config.yaml, pointed at a provider by WORKSET_UPSTREAM_BASE."""
    import openai

    port, store = free_port(), store_location(tmp_path / "store.db")
    argv = [str(Path(sys.executable).parent / "workset"), "serve", "--config", str(REPO / "config.yaml"),
            "--port", str(port), "--store", store]
    with ServerProcess(argv, port, env={"WORKSET_UPSTREAM_BASE": fake.url + "/v1"}, cwd=tmp_path) as proxy:
        assert httpx.get(proxy.url + "/healthz", timeout=5).status_code == 200
        client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-user", timeout=20, max_retries=0)
        reply = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "ping"}])
        assert reply.choices[0].message.content == "echo: ping"
        assert fake.chat_requests()[-1].headers["authorization"] == "Bearer sk-user"
    assert '"event": "request"' in proxy.output()
    assert run_sql(store, "SELECT count(*) FROM sessions") == [(1,)]  # the store given was created, and written


@pytest.mark.e2e
def test_a_request_that_is_not_valid_http_gets_an_openai_style_400(tmp_path: Path, fake: Any) -> None:
    """A control character in a header is refused by the HTTP parser, before workset reads the request: still in
    OpenAI's error format, as every other 4xx."""
    import json
    import socket

    port = free_port()
    argv = [str(Path(sys.executable).parent / "workset"), "serve", "--config", str(REPO / "config.yaml"),
            "--port", str(port), "--store", store_location(tmp_path / "store.db")]
    with ServerProcess(argv, port, env={"WORKSET_UPSTREAM_BASE": fake.url + "/v1"}, cwd=tmp_path):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nx-workset-session: a\x01b\r\n"
                         b"content-length: 2\r\n\r\n{}")
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400") and b"application/json" in head
        error = json.loads(body)["error"]
        assert error["type"] == "invalid_request_error" and error["code"] == "invalid_http_request"
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200
