"""PostgreSQL through psycopg 3: :class:`PostgresBackend`, :class:`PostgresDialect`, :class:`PsycopgClient`.

The entry points ``postgresql`` and ``postgres`` name
``anarchon_sql.postgres:PostgresBackend``; ``anarchon_sql`` re-exports the
backend and the dialect. Importing this package never imports psycopg.
"""

from __future__ import annotations

from anarchon_sql.postgres._backend import PostgresBackend
from anarchon_sql.postgres._dialect import PostgresDialect
from anarchon_sql.postgres._psycopg import PsycopgClient

__all__ = ["PostgresBackend", "PostgresDialect", "PsycopgClient"]
