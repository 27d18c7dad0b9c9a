"""Scenario 8 (issue 30): a coding agent with one `bash` tool (mini-swe-agent's tool-call mode, as in swe-dev)
fixing a DST double count in a metrics ingestion service for a user who writes Chinese, over 60+ tool turns of
listings, whole source files, greps, pytest runs, logs and pip's noise.

Stated once, early, only in tool outputs: the Chinese contribution guide's rules (timestamps stored as UTC; no new
third-party dependency under ingest/), the failing test's error code, git bisect's first bad commit, a change
approval from the change API (id, approver, scope, expiry), a release tool saying the release date is not yet
scheduled, and two batch sizes' p95 latencies the user later asks to compare. The user approves in Chinese
(ticket, approver, scope). The probes ask for each late, after compactions.
"""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta

from .builder import Call, RunBuilder, Scenario, tool
from .noise import hex_id
from .repo import bisect_run as repo_bisect_run
from .repo import (
    failure_block,
    file_names,
    generated_tests,
    git_log_oneline,
    grep_hits,
    ls_la,
    pip_install,
    pytest_dots,
    pytest_header,
    pytest_verbose,
    python_module,
    sha,
)

SEED = 2029
TRACE_ID = "scenario-zh-coding-metricsd"
ROOT = "/srv/metricsd"
BAD_COMMIT = "c41d8e27b9a0f3d6e1c5b8a2d4f7e9c0b1a3d5e6"

TOOLS = [tool("bash", "Execute a bash command", {"command": "The bash command to execute"})]

SYSTEM = """You are a helpful assistant that can interact with a computer shell to solve programming tasks.
Use the bash tool for every step; explain briefly what you found and what you will do next."""

TASK = """metricsd 的 eu-west-7 批次在夏令时切换那天（3 月 29 日）会把 01:00–03:00 的数据重复计数，仪表盘上那两个小时的
请求量翻倍了。请在 release-2.8 分支上修复，补上回归测试，再写一份 2.8.1 的发布说明草稿。代码在 /srv/metricsd。"""


def sh(command: str, output: str, code: int = 0, labels: tuple[str, ...] = ()) -> Call:
    """A bash call answered as mini-swe-agent's environment answers: return code, then the output."""
    body = output if output.endswith("\n") or not output else output + "\n"
    return Call("bash", {"command": command}, f"<returncode>{code}</returncode>\n<output>\n{body}</output>", labels)


def root_listing(rng: random.Random) -> str:
    entries = [(".git", True), (".github", True), (".gitignore", False), (".dockerignore", False),
               (".pre-commit-config.yaml", False), (".python-version", False), (".venv", True), (".mypy_cache", True),
               (".pytest_cache", True), ("CHANGELOG.md", False), ("CODEOWNERS", False), ("Dockerfile", False),
               ("LICENSE", False), ("Makefile", False), ("README.md", False), ("alembic.ini", False),
               ("charts", True), ("conftest.py", False), ("deploy", True), ("docker-compose.yml", False),
               ("docs", True), ("metricsd", True), ("migrations", True), ("pyproject.toml", False),
               ("requirements.lock", False), ("scripts", True), ("tests", True), ("tox.ini", False),
               ("uv.lock", False)]
    entries += [(f"dump_eu-west-{n}_0329.csv.gz", False) for n in (3, 5, 7)]
    entries += [(name, False) for name in ("notes_dst.md", "load_0329.json", "profile_ingest.prof", "core.1187",
                                           "grafana_export.json", ".env.staging", ".env.example", "TODO.md",
                                           "metricsd.code-workspace", "sample_batch.jsonl", "README.en.md",
                                           "SECURITY.md", "renovate.json", "sonar-project.properties")]
    return ls_la(rng, entries, owner="svc")


def readme(rng: random.Random) -> str:
    return """# metricsd

采集各区域批次（batch）上报的指标，按分钟聚合后写入 ClickHouse，供 Grafana 仪表盘使用。

[![ci](https://ci.internal/metricsd/badge.svg)](https://ci.internal/metricsd)

## 架构

```
collector ──> ingest/parse.py ──> ingest/window.py ──> ingest/writer.py ──> ClickHouse
                      │                                     │
                      └── ingest/schema.py                  └── backfill/ (共用 writer)
```

- `ingest/parse.py`：解析批次里的 `ts` 字段和各区域的本地时间格式
- `ingest/window.py`：按分钟分桶、去重
- `ingest/writer.py`：批量写入，失败重试
- `backfill/`：历史数据回填，复用 writer

## 本地开发

```sh
make dev          # 创建 .venv 并安装依赖
make test         # pytest
make lint         # ruff + mypy
make loadtest     # scripts/loadtest.py，对比不同 batch size
```

## 配置

| 变量 | 默认值 | 说明 |
|---|---|---|
| METRICSD_BATCH_SIZE | 256 | 每次写入的行数 |
| METRICSD_CLICKHOUSE_URL | http://localhost:8123 | |
| METRICSD_REGIONS | eu-west-3,eu-west-5,eu-west-7,ap-east-1 | |
| METRICSD_DEDUP_WINDOW | 120 | 秒 |

## 区域与时区

| region | tz | 本地时间格式 |
|---|---|---|
| eu-west-3 | Europe/Paris | ISO 8601 带偏移 |
| eu-west-5 | Europe/London | ISO 8601 带偏移 |
| eu-west-7 | Europe/Berlin | `YYYY-MM-DD HH:MM:SS`（无偏移，历史原因） |
| ap-east-1 | Asia/Shanghai | epoch 毫秒 |

## 发布

发布由 `release-cli` 管理；上线需要变更单（change API）审批通过。详见 docs/release.md。

## 联系

#metricsd（内部 IM），值班表见 docs/oncall.md。
"""


def contributing_zh(rng: random.Random) -> str:
    return """# 贡献指南

感谢参与 metricsd！这个服务的数据直接用于计费对账，改动请谨慎。

## 基本规则

1. 先开 issue 讨论，再提 MR；一个 MR 只做一件事。
2. 每个 bug 修复都要带一个在修复前会失败的回归测试。
3. 改动公共接口（`metricsd.api`）需要至少一个版本的弃用期。

## 时间与时区

- 所有写入存储的时间戳必须是 UTC（带时区信息的 datetime），不得写入本地时间。
- 区域的本地时间只在解析阶段出现，解析完成后立即转换。
- 测试里的时间一律用带时区的 datetime 构造，不要用 `datetime.now()`。

## 依赖

- 不得在 `ingest/` 下引入新的第三方依赖；需要新依赖请先提 RFC，由架构组评审。
- 标准库（`zoneinfo`、`datetime`）可以直接用。
- 依赖版本由 `requirements.lock` 锁定，更新锁文件请单独提 MR。

## 代码风格

- `ruff format` + `ruff check`；行宽 110。
- 公共函数必须有类型标注；`mypy --strict metricsd/` 必须通过。
- 日志用 `structlog`，不要 print。

## 测试

```sh
make test
pytest tests/ingest -q
```

## 提交信息

中英文均可，说明“为什么”，并引用 issue 编号，例如 `ingest: DST 重复计数 (#388)`。

## 发布流程

release-2.x 分支接收补丁；合并后由值班同学用 `release-cli` 发布，需要变更单审批。
"""


def pyproject_and_makefile(rng: random.Random) -> str:
    return """[project]
name = "metricsd"
version = "2.8.0"
requires-python = ">=3.11"
dependencies = [
    "clickhouse-connect>=0.7",
    "structlog>=24.1",
    "pydantic>=2.7",
    "orjson>=3.10",
    "httpx>=0.27",
]

[project.optional-dependencies]
dev = ["pytest>=8.2", "pytest-asyncio>=0.23", "hypothesis>=6.100", "ruff>=0.4", "mypy>=1.10", "freezegun>=1.5"]

[tool.pytest.ini_options]
testpaths = ["tests"]
asyncio_mode = "auto"
addopts = "-ra"

[tool.ruff]
line-length = 110

[tool.mypy]
strict = true
packages = ["metricsd"]
===== Makefile =====
VENV := .venv
PY := $(VENV)/bin/python
BATCH ?= 256

.PHONY: dev test lint loadtest image

dev:
	python3.11 -m venv $(VENV) && $(VENV)/bin/pip install -e '.[dev]'

test:
	$(PY) -m pytest

lint:
	$(VENV)/bin/ruff check metricsd tests && $(VENV)/bin/mypy

loadtest:
	$(PY) scripts/loadtest.py --batch-sizes 256,512 --minutes 30

image:
	docker build -t registry.internal/metricsd:$(shell git describe --tags) .
"""


PACKAGES = [("orjson", "3.10.5"), ("pydantic-core", "2.18.4"), ("pydantic", "2.7.4"), ("structlog", "24.2.0"),
            ("certifi", "2024.6.2"), ("h11", "0.14.0"), ("httpcore", "1.0.5"), ("anyio", "4.4.0"),
            ("sniffio", "1.3.1"), ("httpx", "0.27.0"), ("lz4", "4.3.3"), ("zstandard", "0.22.0"),
            ("clickhouse-connect", "0.7.12"), ("iniconfig", "2.0.0"), ("pluggy", "1.5.0"), ("pytest", "8.2.2"),
            ("pytest-asyncio", "0.23.7"), ("hypothesis", "6.103.1"), ("ruff", "0.4.9"), ("mypy", "1.10.0"),
            ("freezegun", "1.5.1"), ("python-dateutil", "2.9.0.post0"), ("metricsd", "2.8.0")]


def ingest_listing(rng: random.Random) -> str:
    ingest = [(name, False) for name in ("__init__.py", "parse.py", "window.py", "writer.py", "schema.py",
                                         "regions.py", "dedup.py", "retry.py", "metrics.py", "py.typed")]
    ingest += [(name, False) for name in file_names(rng, 14, (".py",))] + [("__pycache__", True), ("formats", True)]
    tests = [(name, False) for name in ("__init__.py", "conftest.py", "test_parse.py", "test_window.py",
                                        "test_writer.py", "test_dedup.py", "test_regions.py")]
    tests += [(name, False) for name in file_names(rng, 12, (".py",), "test_")] + [("fixtures", True)]
    return f"metricsd/ingest:\n{ls_la(rng, ingest, 'svc')}\ntests/ingest:\n{ls_la(rng, tests, 'svc')}"


PARSE_TESTS = ["test_parse_offset_iso", "test_parse_epoch_ms", "test_parse_berlin_local_winter",
               "test_parse_berlin_local_summer", "test_dst_day_eu_west_7_counts_once",
               "test_dst_gap_0230_does_not_exist", "test_parse_rejects_garbage"]


def first_test_run(rng: random.Random) -> str:
    files = [("tests/ingest/test_parse.py", generated_tests(rng, 28, PARSE_TESTS)),
             ("tests/ingest/test_window.py", generated_tests(rng, 24)),
             ("tests/ingest/test_writer.py", generated_tests(rng, 16)),
             ("tests/ingest/test_dedup.py", generated_tests(rng, 12))]
    dst = failure_block("test_dst_day_eu_west_7_counts_once", [
        "    def test_dst_day_eu_west_7_counts_once(batch_0329):",
        '        rows = list(parse_batch(batch_0329, region="eu-west-7"))',
        ">       buckets = window.bucket(rows)", "", "tests/ingest/test_parse.py:118: ",
        "_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ ",
        "metricsd/ingest/window.py:64: in bucket", "    key = _minute_key(row.ts)",
        "_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ ", "",
        "ts = datetime.datetime(2026, 3, 29, 2, 30, 12)", "",
        "    def _minute_key(ts: datetime) -> int:", "        if ts.tzinfo is None:",
        ">           raise ValueError(f\"ERR_TZ_{_NAIVE:04d} naive timestamp in batch {_batch.get()!r} (row \"",
        "                             f\"{_row.get()})\")"],
        "E   ValueError: ERR_TZ_0042 naive timestamp in batch 'eu-west-7' (row 1184)",
        "metricsd/ingest/window.py:31: ValueError")
    gap = failure_block("test_dst_gap_0230_does_not_exist", [
        "    def test_dst_gap_0230_does_not_exist():",
        '        ts = parse_ts("2026-03-29 02:30:00", region="eu-west-7")',
        ">       assert ts == datetime(2026, 3, 29, 1, 30, tzinfo=UTC)"],
        "E   AssertionError: assert datetime.datetime(2026, 3, 29, 2, 30) == datetime.datetime(2026, 3, 29, 1, 30, "
        "tzinfo=datetime.timezone.utc)", "tests/ingest/test_parse.py:131: AssertionError")
    return (pytest_header(rng, 80, ROOT, "asyncio-0.23.7, hypothesis-6.103.1") + pytest_verbose(
        rng, files, ["test_dst_day_eu_west_7_counts_once", "test_dst_gap_0230_does_not_exist"])
            + "\n=================================== FAILURES ===================================\n" + dst + "\n" + gap
            + "=========================== short test summary info ============================\n"
              "FAILED tests/ingest/test_parse.py::test_dst_day_eu_west_7_counts_once - ValueError: naive timestamp in b...\n"
              "FAILED tests/ingest/test_parse.py::test_dst_gap_0230_does_not_exist - AssertionError: assert datetime.da...\n"
              f"========================= 2 failed, 78 passed in {rng.uniform(2, 5):.2f}s =========================\n")


def grep_tz(rng: random.Random) -> str:
    files = ["metricsd/ingest/parse.py", "metricsd/ingest/window.py", "metricsd/ingest/writer.py",
             "metricsd/ingest/regions.py", "metricsd/backfill/runner.py", "metricsd/api/query.py",
             "tests/ingest/test_parse.py", "tests/ingest/test_window.py", "tests/conftest.py"]
    snippets = ["    return naive.replace(tzinfo=zone)", "        ts = ts.astimezone(timezone.utc)",
                "    if ts.tzinfo is None:", "    zone = ZoneInfo(REGIONS[region].tz)",
                "from zoneinfo import ZoneInfo", "    offset = ts.utcoffset()",
                "        row.ts = datetime.strptime(text, LOCAL_FORMAT)", "UTC = timezone.utc",
                "    assert ts.tzinfo is UTC", "            moment = moment.replace(tzinfo=None)"]
    return grep_hits(rng, files, snippets, 40)


PARSE_HEAD = '''from datetime import datetime, timezone
from zoneinfo import ZoneInfo

from .regions import REGIONS

LOCAL_FORMAT = "%Y-%m-%d %H:%M:%S"


def parse_ts(text: str, region: str) -> datetime:
    """A batch row's timestamp. eu-west-7 sends Berlin wall time without an offset (historical)."""
    spec = REGIONS[region]
    if spec.format == "epoch_ms":
        return datetime.fromtimestamp(int(text) / 1000, tz=timezone.utc)
    if spec.format == "local":
        naive = datetime.strptime(text, LOCAL_FORMAT)
        if spec.legacy_naive:  # 2.8: keep wall time, window.py attaches the zone
            return naive
        return naive.replace(tzinfo=ZoneInfo(spec.tz)).astimezone(timezone.utc)
    return datetime.fromisoformat(text).astimezone(timezone.utc)
'''


def parse_source(rng: random.Random, head: str = PARSE_HEAD) -> str:
    return python_module(rng, "Parsing of batch rows: timestamps and values.", ["import logging"],
                         ["rows", "fields", "values", "formats"], 150, head=head)


def window_source(rng: random.Random) -> str:
    head = '''from contextvars import ContextVar
from datetime import datetime, timedelta

_NAIVE = 42
_batch: ContextVar[str] = ContextVar("batch", default="?")
_row: ContextVar[int] = ContextVar("row", default=-1)


def _minute_key(ts: datetime) -> int:
    if ts.tzinfo is None:
        raise ValueError(f"ERR_TZ_{_NAIVE:04d} naive timestamp in batch {_batch.get()!r} (row {_row.get()})")
    return int(ts.timestamp()) // 60


def bucket(rows):
    buckets = {}
    for number, row in enumerate(rows):
        _row.set(number)
        buckets.setdefault(_minute_key(row.ts), []).append(row)
    return buckets
'''
    return python_module(rng, "Minute buckets and de-duplication windows.", [], ["windows", "buckets"], 130,
                         head=head)


def writer_source(rng: random.Random) -> str:
    head = '''import clickhouse_connect

from .schema import Row

BATCH_SIZE = 256


class Writer:
    """Writes rows to ClickHouse in batches; shared by ingest and backfill."""

    def __init__(self, url: str, batch_size: int = BATCH_SIZE) -> None:
        self.client = clickhouse_connect.get_client(dsn=url)
        self.batch_size = batch_size
        self.pending: list[Row] = []
'''
    return python_module(rng, "Batched writes to ClickHouse, with retries.", ["import logging", "import time"],
                         ["writes", "retries", "batches"], 140, head=head)


def git_log(rng: random.Random) -> str:
    fixed = [("8e2a6f1", "release 2.8.0"), (BAD_COMMIT[:7], "ingest: eu-west-7 keeps wall time until window (#371)"),
             ("5b9c0d3", "window: contextvars for batch/row in errors (#366)"), ("0aa4e7c", "release 2.7.3")]
    subjects = ["deps: bump clickhouse-connect", "ci: cache uv", "writer: retry on 503", "docs: region table",
                "backfill: resume from checkpoint", "api: p99 in query endpoint", "dedup: window 120s default",
                "chore: ruff 0.4", "schema: region column low-cardinality", "parse: epoch ms for ap-east-1"]
    return git_log_oneline(rng, 40, fixed, subjects)


def bisect_run(rng: random.Random) -> str:
    return repo_bisect_run(
        rng, BAD_COMMIT, (6, 3, 1, 0), ["ci: cache uv", "writer: retry on 503", "docs: region table"],
        "tests/ingest/test_parse.py", "dst", 2,
        "Author: Zhao Ming <zhao.ming@corp.example>\nDate:   Tue Feb 17 11:20:05 2026 +0800\n\n    ingest: eu-west-7 "
        "keeps wall time until window (#371)\n\n metricsd/ingest/parse.py   | 9 ++++++---\n "
        "metricsd/ingest/regions.py | 2 +-\n 2 files changed, 8 insertions(+), 3 deletions(-)\n")


def show_commit(rng: random.Random) -> str:
    return (f"commit {BAD_COMMIT}\nAuthor: Zhao Ming <zhao.ming@corp.example>\nDate:   Tue Feb 17 11:20:05 2026 "
            "+0800\n\n    ingest: eu-west-7 keeps wall time until window (#371)\n\n    窗口里再加时区，方便按本地"
            "分钟去重。\n\ndiff --git a/metricsd/ingest/parse.py b/metricsd/ingest/parse.py\nindex 3f0b9a1..8c21d4e 100644\n"
            "--- a/metricsd/ingest/parse.py\n+++ b/metricsd/ingest/parse.py\n@@ -14,7 +14,10 @@ def parse_ts(text: str, "
            "region: str) -> datetime:\n     if spec.format == \"local\":\n         naive = datetime.strptime(text, "
            "LOCAL_FORMAT)\n-        return naive.replace(tzinfo=ZoneInfo(spec.tz)).astimezone(timezone.utc)\n+        "
            "if spec.legacy_naive:  # 2.8: keep wall time, window.py attaches the zone\n+            return naive\n+    "
            "    return naive.replace(tzinfo=ZoneInfo(spec.tz)).astimezone(timezone.utc)\ndiff --git "
            "a/metricsd/ingest/regions.py b/metricsd/ingest/regions.py\n--- a/metricsd/ingest/regions.py\n+++ "
            "b/metricsd/ingest/regions.py\n@@ -9 +9 @@\n-    \"eu-west-7\": Region(tz=\"Europe/Berlin\", format=\"local\"),"
            "\n+    \"eu-west-7\": Region(tz=\"Europe/Berlin\", format=\"local\", legacy_naive=True),\n"
            "We are not bisecting.\nSwitched to branch 'release-2.8'\n")


def change_api(rng: random.Random) -> str:
    body = {"service": "metricsd", "changes": [
        {"id": "APR-20931", "title": "metricsd 2.8.1: DST 重复计数修复", "state": "approved",
         "approved_by": "王磊 (Wang Lei)", "approver_team": "SRE 平台组", "scope": "deploy metricsd 2.8.1 to staging-eu only",
         "expires_at": "2026-04-10T18:00:00+08:00", "created_at": "2026-04-01T09:41:27+08:00",
         "conditions": ["回归测试通过", "先在 staging-eu 观察 24 小时"], "ticket": None},
        {"id": "APR-20877", "title": "metricsd 2.8.0", "state": "closed", "approved_by": "陈静 (Chen Jing)",
         "approver_team": "SRE 平台组", "scope": "deploy metricsd 2.8.0 to all regions",
         "expires_at": "2026-03-05T18:00:00+08:00", "created_at": "2026-02-26T14:02:51+08:00", "conditions": [],
         "ticket": "CHG-5390"}]}
    return ("HTTP/1.1 200 OK\ncontent-type: application/json\nx-request-id: " + hex_id(rng, 32) +
            "\nx-ratelimit-remaining: 58\n\n" + json.dumps(body, ensure_ascii=False, indent=2) + "\n")


def release_show(rng: random.Random) -> str:
    return (f"release-cli 1.19.2 (api: https://release.internal)\n\nservice:        metricsd\nversion:        2.8.1\n"
            f"branch:         release-2.8\nstatus:         draft\ncreated:        2026-04-01 10:02 +08:00 by "
            f"zhao.ming\nrelease date: not yet scheduled\n发布日期：尚未排期（等待变更窗口）\nregions:        staging-eu\n"
            "artifacts:\n  - registry.internal/metricsd:2.8.1-rc1  (sha256:" + hex_id(rng, 64) + ")\n"
            "checks:\n  - unit tests            pending\n  - staging soak (24h)   pending\n  - change approval      "
            "linked\nnotes:          (empty)\n")


def load_test(rng: random.Random) -> str:
    lines = [f"loadtest metricsd 2.8.0+dst-fix  replay=dump_eu-west-7_0329.csv.gz  minutes=30  rows/s=1800",
             "clickhouse: http://ch-staging-eu.internal:8123 (3 replicas)", ""]
    for batch in (256, 512):
        lines.append(f"--- batch_size={batch} ---")
        for minute in range(0, 30, 3):
            lines.append(f"[{minute:02d}:00] rows={rng.randint(300000, 330000)} inserts={rng.randint(600, 1300)} "
                         f"p50={rng.uniform(20, 40):.1f}ms p95={rng.uniform(60, 120):.1f}ms errors=0")
    lines += ["", "summary (whole run):", "batch_size   rows        p50_ms   p95_ms   p99_ms   errors",
              f"256          {rng.randint(5_300_000, 5_500_000):<11} {31.9:>7.1f} {91.6:>8.1f} {148.2:>8.1f}   0",
              f"512          {rng.randint(5_300_000, 5_500_000):<11} {29.4:>7.1f} {87.3:>8.1f} {171.5:>8.1f}   0"]
    return "\n".join(lines).replace("p95=91.6ms", "p95=92.0ms").replace("p95=87.3ms", "p95=88.0ms") + "\n"


def journal(rng: random.Random) -> str:
    start = datetime(2026, 3, 29, 0, 58, 3)
    rows = []
    for n in range(46):
        moment = start + timedelta(seconds=n * rng.randint(40, 120))
        level = rng.choice(["INFO", "INFO", "INFO", "WARNING"])
        event = rng.choice(["batch ingested", "bucket flushed", "dedup window rotated", "insert retried",
                            "late rows dropped"])
        rows.append(f"{moment:%Y-%m-%dT%H:%M:%S}.{rng.randint(0, 999):03d}Z {level:<7} metricsd.ingest "
                    f"event=\"{event}\" batch=eu-west-{rng.choice([3, 5, 7])} rows={rng.randint(200, 2000)} "
                    f"dur_ms={rng.randint(4, 90)}")
    return "-- Logs begin at Sun 2026-03-29 00:00:01 CET. --\n" + "\n".join(rows) + "\n"


def clickhouse_counts(rng: random.Random) -> str:
    rows = ["┌──────────────minute─┬─requests─┬─batches─┐"]
    for n in range(0, 180, 5):
        minute = datetime(2026, 3, 29, 0, 0) + timedelta(minutes=n)
        doubled = 60 <= n < 180
        rows.append(f"│ {minute:%Y-%m-%d %H:%M:%S} │ {rng.randint(9000, 11000) * (2 if doubled else 1):>8} │ "
                    f"{2 if doubled else 1:>7} │")
    rows.append("└─────────────────────┴──────────┴─────────┘")
    return "\n".join(rows) + f"\n\n36 rows in set. Elapsed: 0.0{rng.randint(10, 99)} sec. Processed 1.02 million rows\n"


FIXED_PARSE = PARSE_HEAD.replace('''        if spec.legacy_naive:  # 2.8: keep wall time, window.py attaches the zone
            return naive
        return naive.replace(tzinfo=ZoneInfo(spec.tz)).astimezone(timezone.utc)''', '''        return _local_to_utc(naive, ZoneInfo(spec.tz))''') + '''

def _local_to_utc(naive: datetime, zone: ZoneInfo) -> datetime:
    """Wall time in `zone` to UTC: a repeated hour resolves to its first occurrence, a skipped one moves past the
    gap (fold=0 gives the time before the gap's offset)."""
    aware = naive.replace(tzinfo=zone, fold=0)
    if aware.astimezone(timezone.utc).astimezone(zone).replace(tzinfo=None) != naive:  # in the spring gap
        aware = (naive + (aware.utcoffset() - naive.replace(tzinfo=zone, fold=1).utcoffset())).replace(tzinfo=zone)
    return aware.astimezone(timezone.utc)
'''

HELPER = FIXED_PARSE.split("\n\n\ndef _local_to_utc", 1)[1]
PATCH_COMMAND = (f"cd {ROOT} && python - <<'EOF'\nfrom pathlib import Path\npath = Path(\"metricsd/ingest/parse.py\")\n"
                 "text = path.read_text()\nold = \'\'\'        if spec.legacy_naive:  # 2.8: keep wall time, window.py "
                 "attaches the zone\n            return naive\n        return naive.replace(tzinfo=ZoneInfo(spec.tz))"
                 ".astimezone(timezone.utc)\'\'\'\nnew = \'\'\'        return _local_to_utc(naive, ZoneInfo(spec.tz))"
                 "\'\'\'\nassert text.count(old) == 1\nhelper = \'\'\'\n\ndef _local_to_utc" + HELPER + "\'\'\'\n"
                 "path.write_text(text.replace(old, new) + helper)\nprint(\"patched parse_ts\")\nEOF\ngit diff --stat")


def second_test_run(rng: random.Random) -> str:
    files = [("tests/ingest/test_parse.py", generated_tests(rng, 28, PARSE_TESTS)),
             ("tests/ingest/test_window.py", generated_tests(rng, 24))]
    return (pytest_header(rng, 52, ROOT, "asyncio-0.23.7, hypothesis-6.103.1") + pytest_verbose(rng, files)
            + f"========================= 52 passed in {rng.uniform(1, 3):.2f}s =========================\n")


def all_pass(rng: random.Random) -> str:
    files = [("tests/api/test_query.py", 14), ("tests/backfill/test_runner.py", 11), ("tests/ingest/test_dedup.py", 12),
             ("tests/ingest/test_parse.py", 28), ("tests/ingest/test_regions.py", 9),
             ("tests/ingest/test_window.py", 24), ("tests/ingest/test_writer.py", 16), ("tests/test_config.py", 7)]
    return (pytest_header(rng, 121, ROOT, "asyncio-0.23.7, hypothesis-6.103.1") + pytest_dots(rng, files) +
            "\n=============================== warnings summary ===============================\n"
            "tests/backfill/test_runner.py::test_resume\n  /srv/metricsd/.venv/lib/python3.11/site-packages/"
            "clickhouse_connect/driver/httpclient.py:220: DeprecationWarning: 'compress' is deprecated\n\n"
            f"======================== 121 passed, 1 warning in {rng.uniform(5, 9):.2f}s ========================\n")


def regions_source(rng: random.Random) -> str:
    head = '''from dataclasses import dataclass


@dataclass(frozen=True)
class Region:
    tz: str
    format: str  # "iso", "local" or "epoch_ms"
    legacy_naive: bool = False


REGIONS = {
    "eu-west-3": Region(tz="Europe/Paris", format="iso"),
    "eu-west-5": Region(tz="Europe/London", format="iso"),
    "eu-west-7": Region(tz="Europe/Berlin", format="local", legacy_naive=True),
    "ap-east-1": Region(tz="Asia/Shanghai", format="epoch_ms"),
}
'''
    return python_module(rng, "Regions: their zone and timestamp format.", [], ["regions"], 100, head=head)


def docs_listing(rng: random.Random) -> str:
    entries = [(name, False) for name in ("CONTRIBUTING.zh.md", "release.md", "oncall.md", "architecture.md",
                                          "regions.md", "runbook_dst.md", "clickhouse.md", "backfill.md")]
    entries += [(name, False) for name in file_names(rng, 36, (".md",))] + [("img", True), ("adr", True)]
    return ls_la(rng, entries, owner="svc")


def backfill_source(rng: random.Random) -> str:
    return python_module(rng, "Backfill runner: replays stored batches through the shared writer.",
                         ["from ..ingest.writer import Writer"], ["checkpoints", "segments", "replays"], 160)


def release_doc(rng: random.Random) -> str:
    lines = ["# 发布流程", "", "1. 在 release-2.x 分支合并修复。", "2. `release-cli create metricsd <版本>` 生成草稿。",
             "3. 在变更系统提交变更单，附上回归测试结果。", "4. 审批通过后按审批范围发布（先 staging，再生产）。", "",
             "## 发布说明模板", "", "```", "## metricsd <版本>", "", "### 修复", "- …", "", "### 影响范围", "- …",
             "", "### 发布日期", "- …", "```", ""]
    lines += [f"- {rng.choice(['staging', 'prod', 'canary'])} 步骤 {n}: {rng.choice(['检查仪表盘', '观察错误率', '确认回填', '通知值班'])}"
              for n in range(1, 25)]
    return "\n".join(lines) + "\n"


def diff_output(rng: random.Random) -> str:
    return ("diff --git a/metricsd/ingest/parse.py b/metricsd/ingest/parse.py\nindex 8c21d4e..4a7f0b2 100644\n"
            "--- a/metricsd/ingest/parse.py\n+++ b/metricsd/ingest/parse.py\n@@ -14,10 +14,7 @@ def parse_ts(text: str, "
            "region: str) -> datetime:\n     if spec.format == \"local\":\n         naive = datetime.strptime(text, "
            "LOCAL_FORMAT)\n-        if spec.legacy_naive:  # 2.8: keep wall time, window.py attaches the zone\n-   "
            "         return naive\n-        return naive.replace(tzinfo=ZoneInfo(spec.tz)).astimezone(timezone.utc)\n"
            "+        return _local_to_utc(naive, ZoneInfo(spec.tz))\n@@ -180,3 +177,12 @@\n+def _local_to_utc(naive: "
            "datetime, zone: ZoneInfo) -> datetime:\n+    aware = naive.replace(tzinfo=zone, fold=0)\n+    ...\n"
            "diff --git a/metricsd/ingest/regions.py b/metricsd/ingest/regions.py\n--- a/metricsd/ingest/regions.py\n"
            "+++ b/metricsd/ingest/regions.py\n@@ -16 +16 @@\n-    \"eu-west-7\": Region(tz=\"Europe/Berlin\", "
            "format=\"local\", legacy_naive=True),\n+    \"eu-west-7\": Region(tz=\"Europe/Berlin\", format=\"local\"),\n")


REGRESSION = '''cat > tests/ingest/test_dst_388.py <<'EOF'
"""Regression for #388: eu-west-7 rows on the DST change day are counted once, stored as UTC."""
from datetime import datetime, timezone

import pytest

from metricsd.ingest import window
from metricsd.ingest.parse import parse_ts

UTC = timezone.utc


@pytest.mark.parametrize("text,expected", [
    ("2026-03-29 01:59:00", datetime(2026, 3, 29, 0, 59, tzinfo=UTC)),
    ("2026-03-29 03:00:00", datetime(2026, 3, 29, 1, 0, tzinfo=UTC)),
    ("2026-10-25 02:30:00", datetime(2026, 10, 25, 0, 30, tzinfo=UTC)),
])
def test_eu_west_7_local_times_become_utc(text, expected):
    assert parse_ts(text, region="eu-west-7") == expected


def test_naive_rows_still_fail_loudly():
    with pytest.raises(ValueError, match="ERR_TZ_0042"):
        window.bucket([type("Row", (), {"ts": datetime(2026, 3, 29, 2, 30)})()])
EOF
python -m pytest -q tests/ingest/test_dst_388.py'''


def build() -> Scenario:
    rng = random.Random(SEED)
    run = RunBuilder.opened(TRACE_ID, TOOLS, SYSTEM, TASK)
    run.act("Let me start by looking at the repository and its branch.",
            sh(f"cd {ROOT} && git status -sb && ls -la", "## release-2.8...origin/release-2.8\n?? notes_dst.md\n"
               "?? load_0329.json\n" + root_listing(rng)))
    run.act("Let me read the README for the ingestion pipeline.", sh("cat README.md", readme(rng)))
    run.act("There is a Chinese contribution guide in docs/; reading it before changing anything.",
            sh("cat docs/CONTRIBUTING.zh.md", contributing_zh(rng), labels=("zh-rules",)))
    run.act("Build and test configuration.", sh("cat pyproject.toml && echo ===== Makefile ===== && cat Makefile",
                                                pyproject_and_makefile(rng)))
    run.act("Setting up the environment.", sh(f"cd {ROOT} && python3.11 -m venv .venv && . .venv/bin/activate && "
                                              "pip install -e '.[dev]'", pip_install(rng, PACKAGES, ROOT)))
    run.act("Let me look at the ingest package and its tests.", sh("ls -la metricsd/ingest tests/ingest",
                                                                    ingest_listing(rng)))
    run.act("Running the ingest tests to see what fails.", sh(". .venv/bin/activate && python -m pytest tests/ingest "
                                                              "-v 2>&1 | tail -150", first_test_run(rng), 1,
                                                              labels=("error-code",)))
    run.user("顺便说一下，仪表盘上 3 月 29 日 01:00–03:00 的请求量确实是平时的两倍，财务那边的对账也对不上。")
    run.act("The DST-day test fails in window.py on a naive timestamp, and the spring-gap test gets a naive time "
            "back from parse_ts. Let me find where zones are attached.",
            sh("grep -rn \"tzinfo\\|astimezone\\|utcoffset\\|ZoneInfo\\|strptime\" metricsd tests | head -60",
               grep_tz(rng)))
    run.act("", sh("cat metricsd/ingest/parse.py", parse_source(rng)))
    run.act("parse_ts returns naive wall time for eu-west-7 (legacy_naive). Let me read window.py, where the zone "
            "is supposed to be attached.", sh("cat metricsd/ingest/window.py", window_source(rng)))
    run.act("window.py never attaches a zone: it only refuses naive times. Let me read the writer too, since the "
            "backfill shares it.", sh("cat metricsd/ingest/writer.py", writer_source(rng)))
    run.act("Let me see the history of the ingest package on this branch.",
            sh("git log --oneline -40 -- metricsd/ingest", git_log(rng)))
    run.act("Bisecting between 2.7.3 (good) and 2.8.0 (bad) with the DST tests.",
            sh("git bisect start v2.8.0 v2.7.3 && git bisect run python -m pytest -q tests/ingest/test_parse.py -k dst",
               bisect_run(rng), labels=("bisect",)))
    run.act("Let me read that commit and leave bisect.", sh(f"git show {BAD_COMMIT[:7]} && git bisect reset",
                                                            show_commit(rng)))
    run.act("The commit made eu-west-7 keep wall time until the window, and the window never attached the zone. "
            "Let me check the change system for this service, since a fix has to be deployed.",
            sh("curl -s -i 'https://changes.internal/api/v1/changes?service=metricsd&limit=2'", change_api(rng),
               labels=("change-approval",)))
    run.act("And the release tool's view of 2.8.1.", sh("release-cli show metricsd 2.8.1", release_show(rng),
                                                        labels=("release-date",)))
    run.act("Let me look at the region definitions.", sh("cat metricsd/ingest/regions.py", regions_source(rng)))
    run.act("Let me confirm the double count in the staging data for that night.",
            sh("clickhouse-client -h ch-staging-eu.internal -q \"SELECT toStartOfFiveMinute(ts) AS minute, count() "
               "AS requests, uniq(batch_id) AS batches FROM metrics WHERE region = 'eu-west-7' AND ts BETWEEN "
               "'2026-03-29 00:00:00' AND '2026-03-29 02:59:59' GROUP BY minute ORDER BY minute FORMAT "
               "PrettyCompact\"", clickhouse_counts(rng)))
    run.act("The service's logs for that night.", sh("journalctl -u metricsd --since '2026-03-29 00:58' --until "
                                                     "'2026-03-29 02:10' --no-pager | head -50", journal(rng)))
    run.user("批准：工单 CHG-5521，审批人 李娜，范围只限 staging-eu，生产环境先不要动。", labels=("user-approval",))
    run.act("Understood: staging-eu only. Decision: convert to UTC at the parser boundary (parse_ts), not in the "
            "writer — the writer is shared with the backfill job. Patching parse_ts.", sh(
                PATCH_COMMAND, "patched parse_ts\n metricsd/ingest/parse.py | 13 ++++++++++---\n 1 file changed, "
                               "10 insertions(+), 3 deletions(-)\n"), labels=("decision",))
    run.act("And dropping legacy_naive from eu-west-7.", sh(
        "sed -i 's/format=\"local\", legacy_naive=True)/format=\"local\")/' metricsd/ingest/regions.py && "
        "grep -n eu-west-7 metricsd/ingest/regions.py", "16:    \"eu-west-7\": Region(tz=\"Europe/Berlin\", "
                                                        "format=\"local\"),\n"))
    run.act("Running the parse and window tests.", sh(". .venv/bin/activate && python -m pytest "
                                                      "tests/ingest/test_parse.py tests/ingest/test_window.py -v "
                                                      "2>&1 | tail -70", second_test_run(rng)))
    run.act("Both pass. The whole suite now.", sh(". .venv/bin/activate && python -m pytest -q 2>&1 | tail -40",
                                                  all_pass(rng)))
    run.act("Let me check the backfill runner, which replays stored batches through the same path.",
            sh("cat metricsd/backfill/runner.py", backfill_source(rng)))
    run.act("Backfill goes through parse_ts as well, so stored eu-west-7 batches will now be converted the same "
            "way. Let me look at the docs folder for the release process.", sh("ls -la docs", docs_listing(rng)))
    run.act("", sh("cat docs/release.md", release_doc(rng)))
    run.act("Let me see the diff so far.", sh("git diff", diff_output(rng)))
    run.act("Let me run the load test the Makefile defines, to see the cost of the conversion per batch size.",
            sh(". .venv/bin/activate && make loadtest 2>&1 | tail -40", load_test(rng), labels=("p95",)))
    run.user("好的，辛苦了。测试数据看起来没问题。")
    run.act("Thanks. Let me run lint as CI does.", sh(". .venv/bin/activate && make lint", "All checks passed!\n"
                                                      "Success: no issues found in 38 source files\n"))
    run.act("Let me check the rest of the package for other naive wall times.", sh(
        "grep -rn \"replace(tzinfo=None)\\|datetime.now()\\|utcnow\" metricsd tests scripts | head -60",
        grep_hits(rng, ["metricsd/api/query.py", "metricsd/backfill/runner.py", "scripts/loadtest.py",
                        "scripts/replay.py", "tests/api/test_query.py", "tests/backfill/test_runner.py"],
                  ["            moment = moment.replace(tzinfo=None)", "    started = datetime.now()",
                   "    now = datetime.utcnow()", "        stamp = datetime.now().isoformat()"], 40)))
    run.act("Those are in scripts and the query API, not in ingest. Let me look at the ingest listing again for "
            "a place to put the regression test.", sh("ls -la metricsd/ingest tests/ingest", ingest_listing(rng)))
    run.act("Let me read the de-duplication module, which keys rows by minute.",
            sh("cat metricsd/ingest/dedup.py", python_module(rng, "De-duplication of rows within a window.", [],
                                                             ["keys", "windows"], 150)))
    run.act("", sh("cat metricsd/ingest/schema.py", python_module(rng, "Row schema (pydantic).",
                                                                  ["from pydantic import BaseModel"], ["rows"], 130)))
    run.act("Let me find every caller of parse_ts.", sh("grep -rn \"parse_ts(\" metricsd tests scripts | head -60",
                                                        grep_hits(rng, ["metricsd/ingest/parse.py",
                                                                        "metricsd/backfill/runner.py",
                                                                        "scripts/replay.py", "scripts/loadtest.py",
                                                                        "tests/ingest/test_parse.py",
                                                                        "tests/backfill/test_runner.py"],
                                                                  ["        row.ts = parse_ts(raw[\"ts\"], region)",
                                                                   "    ts = parse_ts(text, region=\"eu-west-7\")",
                                                                   "    assert parse_ts(\"1711670400000\", "
                                                                   "region=\"ap-east-1\") == EPOCH"], 40)))
    run.act("All callers go through the region, good. The ingest tests verbosely, to be sure nothing is skipped.",
            sh(". .venv/bin/activate && python -m pytest tests/ingest -v 2>&1 | tail -120", pytest_header(
                rng, 80, ROOT, "asyncio-0.23.7, hypothesis-6.103.1") + pytest_verbose(rng, [
                    ("tests/ingest/test_parse.py", generated_tests(rng, 28, PARSE_TESTS)),
                    ("tests/ingest/test_window.py", generated_tests(rng, 24)),
                    ("tests/ingest/test_writer.py", generated_tests(rng, 16)),
                    ("tests/ingest/test_dedup.py", generated_tests(rng, 12))]) + "80 passed in 2.77s\n"))
    run.act("Let me look at the package layout as a whole.", sh("ls -la metricsd metricsd/backfill metricsd/api",
                                                                "\n".join(ls_la(rng, [(n, False) for n in file_names(
                                                                    rng, count, (".py",))] + [("__pycache__", True)],
                                                                                 owner="svc")
                                                                          for count in (18, 12, 14))))
    run.act("Let me see how earlier parse tests were added.", sh("git log -p -3 -- tests/ingest/test_parse.py | "
                                                                 "head -150", "\n".join(
        f"commit {sha(rng, 40)}\nAuthor: {rng.choice(['Zhao Ming', 'Liu Yang', 'Sun Wei'])} <dev@corp.example>\n"
        f"Date:   Tue Feb {rng.randint(1, 28)} 1{rng.randint(0, 8)}:{rng.randint(10, 59)}:00 2026 +0800\n\n    tests: "
        f"{rng.choice(['epoch ms', 'region table', 'garbage rows'])}\n\ndiff --git a/tests/ingest/test_parse.py "
        f"b/tests/ingest/test_parse.py\n@@ -{rng.randint(10, 90)},6 +{rng.randint(10, 90)},9 @@\n" + "\n".join(
            f"+    assert parse_ts(\"{rng.randint(1700000000000, 1800000000000)}\", region=\"ap-east-1\").minute == "
            f"{rng.randint(0, 59)}" for _ in range(9)) for _ in range(4)) + "\n"))
    run.act("Running the suite under tox as CI does.", sh("tox -e py311 -- -q", pip_install(rng, PACKAGES[:12])
                                                          + pytest_dots(rng, [("tests/ingest/test_parse.py", 28),
                                                                              ("tests/ingest/test_window.py", 24),
                                                                              ("tests/api/test_query.py", 14)])
                                                          + "66 passed in 2.90s\n  py311: OK (31.22 seconds)\n  "
                                                            "congratulations :) (31.30 seconds)\n"))
    run.act("Let me read the regions doc, which describes eu-west-7's format.", sh("cat docs/regions.md", "\n".join(
        ["# 区域", ""] + [f"## {region}\n\n- 时区：{tz}\n- 格式：{fmt}\n- 批次：{rng.randint(2, 9)} 个采集器\n"
                          for region, tz, fmt in (("eu-west-3", "Europe/Paris", "ISO 8601"),
                                                  ("eu-west-5", "Europe/London", "ISO 8601"),
                                                  ("eu-west-7", "Europe/Berlin", "本地时间，无偏移"),
                                                  ("ap-east-1", "Asia/Shanghai", "epoch 毫秒"))]
        + [f"- {rng.choice(['采集器', '批次', '延迟'])}说明 {n}：{hex_id(rng, 8)}" for n in range(1, 30)]) + "\n"))
    run.act("Let me check the migrations, in case a column stores local time.", sh("ls -la migrations/versions",
                                                                                   ls_la(rng, [(
                                                                                       f"{n:04d}_{name}", False)
                                                                                       for n, name in enumerate(
                                                                                           file_names(rng, 44)
                                                                                       )], owner="svc")))
    run.act("Let me read the existing parse tests for their style.", sh("sed -n 1,200p tests/ingest/test_parse.py",
                                                                        python_module(rng, "Parsing tests.", [
                                                                            "import pytest"], ["cases"], 150)))
    run.act("", sh("cat tests/conftest.py", python_module(rng, "Fixtures: batches from dumps.", ["import gzip"],
                                                          ["fixtures", "dumps"], 110)))
    run.act("Let me check the installed packages against the lock file.",
            sh(". .venv/bin/activate && pip list && head -40 requirements.lock", "Package            Version\n"
               "------------------ ---------\n" + "\n".join(f"{name:<18} {version}" for name, version in sorted(
                   PACKAGES + [("pip", "24.0"), ("setuptools", "70.0.0"), ("packaging", "24.1"), ("idna", "3.7"),
                               ("six", "1.16.0"), ("urllib3", "2.2.2"), ("typing_extensions", "4.12.2")])) + "\n"
               + "\n".join(f"{name}=={version} \\\n    --hash=sha256:{hex_id(rng, 64)}" for name, version in
                           PACKAGES[:13]) + "\n"))
    run.act("Let me run the window tests with hypothesis' statistics, to see the DST cases are generated.",
            sh(". .venv/bin/activate && python -m pytest tests/ingest/test_window.py -q --hypothesis-show-statistics "
               "2>&1 | tail -60", pytest_dots(rng, [("tests/ingest/test_window.py", 24)]) + "\n".join(
                   f"tests/ingest/test_window.py::test_{name}:\n\n  - during generate phase ({rng.uniform(0.1, 2):.2f} "
                   f"seconds):\n    - Typical runtimes: < 1ms, of which < 1ms in data generation\n    - "
                   f"{rng.randint(90, 100)} passing examples, 0 failing examples, {rng.randint(0, 9)} invalid examples"
                   "\n  - Stopped because settings.max_examples=100\n" for name in (
                       "bucket_never_mixes_minutes", "dedup_keeps_first", "window_rotation", "late_rows",
                       "utc_keys_only", "dst_days_each_minute_once")) + "24 passed in 3.41s\n"))
    run.act("Let me view the patched parse module once more.", sh("cat metricsd/ingest/parse.py", parse_source(
        rng, FIXED_PARSE)))
    run.act("Let me check the Dockerfile's base image still has tzdata, since zoneinfo needs it.",
            sh("cat Dockerfile && docker run --rm registry.internal/metricsd:2.8.0 python -c 'import zoneinfo; "
               "print(zoneinfo.ZoneInfo(\"Europe/Berlin\"))' ; ls -la deploy", "FROM python:3.11-slim-bookworm\n"
               "RUN apt-get update && apt-get install -y --no-install-recommends tzdata && rm -rf /var/lib/apt/lists/*"
               "\nWORKDIR /app\nCOPY requirements.lock .\nRUN pip install --no-cache-dir -r requirements.lock\nCOPY . "
               ".\nRUN pip install --no-cache-dir --no-deps .\nUSER 10001\nCMD [\"python\", \"-m\", \"metricsd\"]\n"
               "Europe/Berlin\n" + ls_la(rng, [(name, False) for name in file_names(rng, 40, (".yaml", ".yml"))]
                                         + [("kustomize", True), ("helm", True)], owner="svc")))
    run.act("Let me look at the charts for the staging-eu values.", sh("ls -la charts/metricsd charts/metricsd/values",
                                                                       ls_la(rng, [(n, False) for n in file_names(
                                                                           rng, 24, (".yaml",))], owner="svc")
                                                                       + ls_la(rng, [(f"values-{r}.yaml", False)
                                                                                     for r in ("staging-eu", "prod-eu",
                                                                                               "prod-ap", "dev")],
                                                                               owner="svc")))
    run.act("", sh("cat charts/metricsd/values/values-staging-eu.yaml", "\n".join(
        f"{key}: {value}" for key, value in [("replicaCount", 2), ("image.tag", "2.8.0"), ("env.METRICSD_BATCH_SIZE",
                                                                                          "\"256\""),
                                             ("env.METRICSD_REGIONS", "eu-west-3,eu-west-5,eu-west-7"),
                                             ("resources.requests.cpu", "500m"), ("resources.limits.memory", "1Gi")]
    ) + "\n" + "\n".join(f"# {rng.choice(['staging', 'soak', 'alerts'])}: {hex_id(rng, 12)}" for _ in range(50)) + "\n"))
    run.act("Let me see the recent history of the chart values.", sh("git log --oneline -30 -- charts",
                                                                     git_log_oneline(rng, 30)))
    run.act("Let me check the query API for the dashboard, which reads the minute buckets.",
            sh("cat metricsd/api/query.py", python_module(rng, "Query API used by the dashboards.", [],
                                                          ["queries", "ranges"], 160)))
    run.act("Let me run the API tests alone.", sh(". .venv/bin/activate && python -m pytest tests/api -v 2>&1 | "
                                                  "tail -40", pytest_header(rng, 14, ROOT) + pytest_verbose(
                                                      rng, [("tests/api/test_query.py", generated_tests(rng, 14))])
                                                  + "14 passed in 0.88s\n"))
    run.act("Let me read the DST runbook, which may need an update.", sh("cat docs/runbook_dst.md", "\n".join(
        ["# DST 运维手册", ""] + [f"{n}. {rng.choice(['检查', '确认', '观察', '记录'])} "
                                   f"{rng.choice(['eu-west-3', 'eu-west-5', 'eu-west-7'])} "
                                   f"{rng.choice(['的分钟桶', '的批次延迟', '的重复行', '的告警'])}" for n in range(1, 45)])
        + "\n"))
    run.act("Let me check the scripts folder for the replay tool.", sh("ls -la scripts", ls_la(rng, [
        (name, False) for name in file_names(rng, 42, (".py", ".sh"))], owner="svc")))
    run.act("", sh("cat scripts/replay.py", python_module(rng, "Replay a dump through ingest.", ["import argparse"],
                                                          ["dumps", "replays"], 150)))
    run.act("Let me replay the 03-29 dump for eu-west-7 through the fixed ingest, locally.",
            sh(". .venv/bin/activate && python scripts/replay.py dump_eu-west-7_0329.csv.gz --region eu-west-7 "
               "--dry-run --summary", "\n".join(
                   f"{datetime(2026, 3, 29, 0, 0) + timedelta(minutes=10 * n):%H:%M}Z  rows={rng.randint(9000, 11000)}"
                   f"  batches=1" for n in range(18)) + "\nreplayed 1 segment, 0 duplicates, 0 naive rows\n"))
    run.probes(
        ("zh-no-new-deps", "constraint", "The Chinese contribution guide, read once: no new third-party dependency "
         "under ingest/; the agent now writes the DST conversion helper's test and could reach for dateutil.",
         ["zh-rules"], [], [r"不得在\s*`?ingest/`?\s*下引入新的第三方依赖"]),
        ("zh-utc", "constraint", "The same guide: timestamps written to storage must be UTC.", ["zh-rules"], [],
         [r"时间戳必须是\s*UTC"]),
        ("error-code", "failure", "The failing DST test's error code, shown once; the regression test names it.",
         ["error-code"], [], [r"ValueError: ERR_TZ_0042", r"ERR_TZ_0042[^\n]{0,80}naive"]))
    run.act("Writing the regression test for #388.", sh(REGRESSION, pytest_dots(rng, [(
        "tests/ingest/test_dst_388.py", 4)]) + "4 passed in 0.31s\n"))
    run.act("Whole suite once more.", sh(". .venv/bin/activate && python -m pytest -q 2>&1 | tail -40", all_pass(rng)))
    run.act("Committing on a fix branch.", sh("git switch -c fix/388-dst && git add metricsd tests && git commit -q "
                                              "-m 'ingest: eu-west-7 times to UTC at parse (#388)' && git log "
                                              "--oneline -3", f"Switched to a new branch 'fix/388-dst'\n"
                                              + git_log_oneline(rng, 3)))
    run.user("512 和 256 两个 batch size 的 p95 分别是多少？我们上 staging 用哪个？")
    run.act("Let me look at the staging values for the batch size before answering.",
            sh("grep -rn BATCH charts/metricsd/values/ deploy/ | head -20", grep_hits(
                rng, ["charts/metricsd/values/values-staging-eu.yaml", "charts/metricsd/values/values-prod-eu.yaml",
                      "deploy/kustomize/base/configmap.yaml"], ["  METRICSD_BATCH_SIZE: \"256\"",
                                                                "env.METRICSD_BATCH_SIZE: \"256\""], 12)))
    run.probe("p95-figures", "fact", "The user asks for both batch sizes' p95 from the load test run early; both "
              "figures must be in view, exact.", ["p95"], matches=[r"87\.3[\s\S]{0,400}91\.6", r"91\.6[\s\S]{0,400}87\.3"])
    run.say("负载测试（30 分钟回放）里 p95 的结果见上面的表；建议 staging 先按表里更低的那个配置。")
    run.act("Let me prepare the release notes draft; first the current changelog head.",
            sh("sed -n 1,60p CHANGELOG.md", "# Changelog\n\n" + "\n".join(
                f"## 2.{minor}.{patch}\n\n" + "\n".join(f"- {rng.choice(['ingest', 'writer', 'api', 'backfill'])}: "
                                                         f"{rng.choice(['重试', '去重', '分页', '告警', '指标'])} "
                                                         f"(#{rng.randint(300, 380)})" for _ in range(6)) + "\n"
                for minor, patch in ((8, 0), (7, 3), (7, 2), (7, 1)))))
    run.act("Let me check the decision is reflected in the diff against the release branch.",
            sh("git diff release-2.8 --stat && git diff release-2.8 -- metricsd/ingest/regions.py",
               " metricsd/ingest/parse.py       | 13 +++++++---\n metricsd/ingest/regions.py     |  2 +-\n "
               "tests/ingest/test_dst_388.py   | 26 +++++++++++++++++\n 3 files changed, 35 insertions(+), 4 "
               "deletions(-)\n" + diff_output(rng).split("diff --git a/metricsd/ingest/regions.py", 1)[1]))
    run.probes(
        ("first-bad-commit", "fact", "git bisect's first bad commit, found early; the release notes name it.",
         ["bisect"], [], [r"first bad commit[^\n]{0,60}c41d8e2", r"c41d8e2\w*[^\n]{0,60}first bad commit"]),
        ("release-date", "pending", "The release tool said the release date is not yet scheduled; the notes must "
         "not invent one.", ["release-date"], [], [r"release date: not yet scheduled", r"发布日期：尚未排期"]),
        ("change-approval", "approval", "The change approval came only from the change API: id, approver, scope.",
         ["change-approval"], [], [r"APR-20931[\s\S]{0,300}staging-eu", r"APR-20931[\s\S]{0,300}王磊"]),
        ("user-approval", "approval", "The user approved in Chinese: ticket, approver, scope (staging-eu only).",
         ["user-approval"], [], [r"CHG-5521[^\n]{0,80}李娜"]),
        ("parser-decision", "decision", "The agent decided where the conversion goes; the notes explain it.",
         ["decision"], [], [r"convert to UTC at the parser boundary"]))
    run.act("Writing the 2.8.1 release notes draft.", sh("cat > docs/release-notes-2.8.1.md <<'EOF'\n## metricsd "
                                                         "2.8.1\n\n### 修复\n- eu-west-7 在夏令时切换当天的重复计数 "
                                                         "(#388)\nEOF\nwc -l docs/release-notes-2.8.1.md",
                                                         "5 docs/release-notes-2.8.1.md\n"))
    run.say("修复已提交在 fix/388-dst 分支：eu-west-7 的本地时间在解析阶段就转换成 UTC，补了回归测试，发布说明草稿在 "
            "docs/release-notes-2.8.1.md。")
    return run.finish()
