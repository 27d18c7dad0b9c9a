"""The docs document every setting: `workset reference` and docs/reference.md agree; the README starts with the
two commands and links to the docs."""

from __future__ import annotations

from pathlib import Path

from proxy.config import Config
from proxy.policy import Policy
from proxy.schema import describe

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
REFERENCE = (ROOT / "docs" / "reference.md").read_text()


def test_reference_lists_every_config_and_policy_key_with_its_meaning() -> None:
    for schema in (Config, Policy):
        for key, _, doc in describe(schema):
            assert f"| `{key}` |" in REFERENCE, f"docs/reference.md lacks {key}: run `workset reference`"
            assert doc and doc in REFERENCE, f"docs/reference.md's text for {key} is stale: run `workset reference`"


def test_readme_links_the_docs_that_exist() -> None:
    for name in ("docs/reference.md", "docs/how-it-works.md", "docs/eval.md"):
        assert f"({name})" in README and (ROOT / name).is_file(), name


def test_readme_starts_with_the_two_commands() -> None:
    first_block = README.split("```sh", 1)[1].split("```", 1)[0]
    assert "make run" in first_block and "make test" in first_block


def test_the_replicas_doc_states_the_store_fault_guarantees_as_the_code_has_them() -> None:
    """docs/replicas.md's section on faults names the settings with their defaults, the header, the metrics, the
    log lines and the answers the code gives, and the tests that check them."""
    import re

    from proxy.config import StoreSettings
    from proxy.errors import RETRY_AFTER_S, store_down
    from proxy.metrics import Metrics

    doc = (ROOT / "docs" / "replicas.md").read_text()
    section = doc.split("## When the database is cut off, restarted or slow", 1)[1].split("\n## ", 1)[0]
    defaults = StoreSettings()
    for key, shown in (("retry_s", "1 s"), ("check_idle_s", "1 s"), ("write_attempts", "3"),
                       ("parked_writes", "10,000"), ("missed_records", "10,000")):
        assert f"`store.{key}` ({shown}" in section, key
        assert f"{getattr(defaults, key):,g}" == shown.removesuffix(" s"), (key, shown)
    names = {metric.name for metric in Metrics(()).registry.collect()}
    for metric in ("workset_store_up", "workset_failed_open"):
        assert metric in names and f"`{metric}" in section, metric
    down = store_down()
    assert down.status == 503 and f"`retry-after: {RETRY_AFTER_S}`" in section and f"`{down.code}`" in section
    assert "`x-workset-degraded: store`" in section and '{"status": "degraded", "store": "down"}' in section
    for event in ("store_down", "store_up", "fail_open"):
        assert f"`{event}`" in section, event
    for check, path in (("tests/test_store_outage.py", "tests/test_store_outage.py"),
                        ("tests/test_store_faults.py", "tests/test_store_faults.py"),
                        ("bench.store_faults", "bench/store_faults.py")):
        assert check in section and (ROOT / path).is_file(), check
    assert re.search(r"the issue's bound is 10 s", section)
