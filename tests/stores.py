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
# where tests/test_replicas.py puts its shared store, whatever this run's own stores are
REPLICAS_DATABASE = os.environ.get("WORKSET_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
POSTGRES = DATABASE.startswith(("postgresql://", "postgres://"))
SCHEMA_PREFIX = f"wst_{os.getpid()}_"  # this run's: runs side by side never drop each other's schemas

# a test that reads or writes the SQLite file itself (its bytes, its pragmas, sqlite3 on it): PostgreSQL's own
# equivalents are in tests/test_replicas.py
sqlite_only = pytest.mark.skipif(POSTGRES, reason="reads the SQLite file itself; this run's store is PostgreSQL")


# a test whose stores are PostgreSQL whichever pass this is (replicas, outages): it runs in make test's first pass
once_per_make_test = pytest.mark.skipif(POSTGRES, reason="its stores are PostgreSQL in either pass: it ran in the first")


def _postgres_answers(url: str) -> bool:
    try:
        import psycopg

        with psycopg.connect(url, connect_timeout=3):
            return True
    except Exception:
        return False


# a test that starts replicas on the PostgreSQL test database, whatever this run's own stores are
requires_postgres = pytest.mark.skipif(not _postgres_answers(REPLICAS_DATABASE),
                                       reason=f"PostgreSQL not reachable at {REPLICAS_DATABASE}")


def store_location(path: Path | str) -> str:
    """The store standing for the SQLite file `path`: that file, or a PostgreSQL schema of its own."""
    if not POSTGRES:
        return str(path)
    schema = SCHEMA_PREFIX + hashlib.sha1(str(Path(path).resolve()).encode()).hexdigest()[:20]
    separator = "&" if "?" in DATABASE else "?"
    return f"{DATABASE}{separator}options={quote('-csearch_path=' + schema)}"


def schema_url(folder: Path | str) -> str:
    """A PostgreSQL store of its own in the replicas' test database, whatever this run's other stores are."""
    schema = SCHEMA_PREFIX + hashlib.sha1(str(Path(folder).resolve()).encode()).hexdigest()[:20]
    separator = "&" if "?" in REPLICAS_DATABASE else "?"
    return f"{REPLICAS_DATABASE}{separator}options={quote('-csearch_path=' + schema)}"


def store_settings(location: str) -> dict[str, str]:
    """The config's `store` section for a store location."""
    return {"url": location} if POSTGRES else {"path": location}


def drop_test_schemas() -> None:
    """Drop every schema the tests made (at the end of a run): this run's stores, and tests/test_replicas.py's."""
    import psycopg

    try:
        conn = psycopg.connect(DATABASE if POSTGRES else REPLICAS_DATABASE, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError:  # no PostgreSQL here: nothing was made in it
        return
    with conn:
        names = [row[0] for row in conn.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'wst\\_%'")]
        for name in names:
            if name.startswith(SCHEMA_PREFIX) or not _running(name.split("_")[1]):  # or left by a run killed
                conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def _running(pid: str) -> bool:
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


def run_sql(location: str | Path, query: str, params: tuple = ()) -> list[tuple]:
    """A statement on the store at `location` from outside workset (a SQLite file, or a PostgreSQL URL), committed;
    the rows it returns. `?` placeholders, as the store's own queries."""
    if not str(location).startswith(("postgresql://", "postgres://")):
        import sqlite3
        from contextlib import closing

        with closing(sqlite3.connect(str(location))) as conn, conn:
            return conn.execute(query, params).fetchall()
    import psycopg

    with psycopg.connect(str(location), autocommit=True, connect_timeout=5) as conn:
        cursor = conn.execute(query.replace("%", "%%").replace("?", "%s"), params)
        return cursor.fetchall() if cursor.description else []
