"""SQL backends for anarchon: PostgreSQL (psycopg 3) and SQLite (aiosqlite), with leases.

- :class:`PostgresBackend` — ``postgresql://`` / ``postgres://``; the claim is
  one call of a server-side function (one round trip, READ COMMITTED).
- :class:`SqliteBackend` — ``sqlite:///path.db``; processes on one host share
  one file (WAL, ``BEGIN IMMEDIATE``, busy timeout).
- :class:`SqlBackend`, :class:`SqlDialect`, :class:`SqlClient` — the base to
  add another SQL database (see ``docs/backends/sql.md``).

The drivers are optional: ``pip install "anarchon[postgres]"`` or
``"anarchon[sqlite]"``; importing this package never imports them.
"""

from __future__ import annotations

from anarchon_sql._backend import SqlBackend, SqlRunStore
from anarchon_sql._client import SqlClient
from anarchon_sql._dialect import DEFAULT_TABLE_PREFIX, SqlDialect, SqlTables
from anarchon_sql.postgres import PostgresBackend, PostgresDialect
from anarchon_sql.sqlite import SqliteBackend, SqliteDialect, from_sqlite_database

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_TABLE_PREFIX",
    "PostgresBackend",
    "PostgresDialect",
    "SqlBackend",
    "SqlClient",
    "SqlDialect",
    "SqlRunStore",
    "SqlTables",
    "SqliteBackend",
    "SqliteDialect",
    "__version__",
    "from_sqlite_database",
]
