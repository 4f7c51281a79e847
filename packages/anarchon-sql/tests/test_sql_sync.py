"""The sync facade (``SyncScheduler``) on PostgreSQL and SQLite, from plain threads."""

from __future__ import annotations

import pytest
from anarchon.backend import Backend
from anarchon.testing import SyncFacadeContract
from anarchon_sql import PostgresBackend, SqliteBackend


class TestPostgresSync(SyncFacadeContract):
    @pytest.fixture
    def backend(self, pg_dsn: str, prefix: str) -> Backend:
        return PostgresBackend(pg_dsn, table_prefix=prefix)


class TestSqliteSync(SyncFacadeContract):
    @pytest.fixture
    def backend(self, sqlite_path: str, prefix: str) -> Backend:
        return SqliteBackend(sqlite_path, table_prefix=prefix)
