"""Where the tests' stores go. By default each test's store is a SQLite file in its own folder. With
WORKSET_TEST_STORE set to a PostgreSQL URL (`make test` runs the suite a second time so, against the machine's
`test` database), each store is a schema of its own in that database, named after the path it stands for: the same
path opened again (a restart) is the same store. Schemas made by a run are dropped at its end."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from urllib.parse import quote

import pytest

DATABASE = os.environ.get("WORKSET_TEST_STORE", "")
POSTGRES = DATABASE.startswith(("postgresql://", "postgres://"))
SCHEMA_PREFIX = "wst_"

# a test that reads or writes the SQLite file itself (its bytes, its pragmas, sqlite3 on it): PostgreSQL's own
# equivalents are in tests/test_replicas.py
sqlite_only = pytest.mark.skipif(POSTGRES, reason="reads the SQLite file itself; this run's store is PostgreSQL")


def store_location(path: Path | str) -> str:
    """The store standing for the SQLite file `path`: that file, or a PostgreSQL schema of its own."""
    if not POSTGRES:
        return str(path)
    schema = SCHEMA_PREFIX + hashlib.sha1(str(Path(path).resolve()).encode()).hexdigest()[:20]
    separator = "&" if "?" in DATABASE else "?"
    return f"{DATABASE}{separator}options={quote('-csearch_path=' + schema)}"


def store_settings(location: str) -> dict[str, str]:
    """The config's `store` section for a store location."""
    return {"url": location} if POSTGRES else {"path": location}


def drop_test_schemas() -> None:
    """Drop every schema the tests made (at the end of a run)."""
    if not POSTGRES:
        return
    import psycopg

    with psycopg.connect(DATABASE, autocommit=True, connect_timeout=5) as conn:
        names = [row[0] for row in conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", (SCHEMA_PREFIX + "%",))]
        for name in names:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
