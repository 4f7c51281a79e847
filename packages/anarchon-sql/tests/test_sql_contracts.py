"""The contract suites (fleet registry included) against PostgreSQL, SQLite and the example subclass (extension path)."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from anarchon.backend import Backend
from anarchon.testing import (
    BackendContract,
    FleetContract,
    LeaseContract,
    LeaseModelContract,
)
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


def test_example_clients_opening_a_fresh_file_together_all_open(tmp_path: Path) -> None:
    """Switching a fresh file to WAL can answer "database is locked" at once (no busy
    handler); the example retries it, so clients opened together all open (a CI run of
    the cross-thread race failed so before)."""
    module = load_example()
    failures: list[BaseException] = []

    def open_and_close(path: str) -> None:
        async def main() -> None:
            client = module.ThreadedSqliteClient(path)
            try:
                await client.open()
                assert (await client.all("PRAGMA journal_mode"))[0][0] == "wal"
            finally:
                await client.close()

        try:
            asyncio.run(main())
        except BaseException as error:
            failures.append(error)

    for round_ in range(100):
        path = str(tmp_path / f"fresh-{round_}.db")
        threads = [threading.Thread(target=open_and_close, args=(path,)) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    assert not failures, f"{len(failures)} opens failed, the first: {failures[0]!r}"


class TestPostgresModel(LeaseModelContract):
    """PostgreSQL answers every lease operation like the reference model (anarchon.lease_model)."""

    @pytest.fixture
    def backend(self, pg_dsn: str) -> Backend:
        return PostgresBackend.from_url(pg_dsn)


class TestSqliteModel(LeaseModelContract):
    """SQLite answers every lease operation like the reference model (anarchon.lease_model)."""

    @pytest.fixture
    def backend(self, sqlite_path: str) -> Backend:
        return SqliteBackend.from_url(f"sqlite:///{sqlite_path}")
