"""The contract suites (fleet registry included) against PostgreSQL, SQLite and the example subclass (extension path)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import pytest
from anarchon.backend import Backend
from anarchon.testing import BackendContract, FleetContract, LeaseContract
from anarchon_sql import PostgresBackend, SqliteBackend

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "threaded_sqlite.py"


def load_example() -> Any:
    """The example module ``examples/threaded_sqlite.py`` (not part of the package)."""
    spec = importlib.util.spec_from_file_location("anarchon_sql_example_threaded", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class TestPostgres(BackendContract, LeaseContract, FleetContract):
    """``PostgresBackend`` from a URL: it opens (and closes) its own pool."""

    @pytest.fixture
    def backend(self, pg_dsn: str) -> Backend:
        self.dsn = pg_dsn
        return PostgresBackend.from_url(pg_dsn)

    def peer_backends(self, backend: Backend, count: int) -> list[Backend] | None:
        return [PostgresBackend(self.dsn) for _ in range(count)]


class TestPostgresNotReadCommitted(LeaseContract):
    """A server whose default isolation is SERIALIZABLE: claims still run at READ COMMITTED."""

    @pytest.fixture
    def backend(self, pg_dsn: str) -> Backend:
        options = "options=-c%20default_transaction_isolation%3Dserializable"
        return PostgresBackend.from_url(f"{pg_dsn}?{options}&table_prefix=serial_")


class TestSqlite(BackendContract, LeaseContract, FleetContract):
    """``SqliteBackend`` on a temp file (aiosqlite, WAL)."""

    @pytest.fixture
    def backend(self, sqlite_path: str) -> Backend:
        self.path = sqlite_path
        return SqliteBackend.from_url(f"sqlite:///{sqlite_path}")

    def peer_backends(self, backend: Backend, count: int) -> list[Backend] | None:
        return [SqliteBackend(self.path) for _ in range(count)]


class TestExampleSubclass(BackendContract, LeaseContract, FleetContract):
    """The documented extension path: a hand-written SqlClient + SqlDialect + SqlBackend."""

    @pytest.fixture
    def backend(self, sqlite_path: str) -> Backend:
        module = load_example()
        self.module, self.path = module, sqlite_path
        built: Backend = module.ThreadedSqliteBackend(sqlite_path)
        return built

    def peer_backends(self, backend: Backend, count: int) -> list[Backend] | None:
        return [self.module.ThreadedSqliteBackend(self.path) for _ in range(count)]


def test_example_file_exists() -> None:
    assert os.path.exists(EXAMPLE)
