"""``PostgresDialect``: what differs on PostgreSQL (types, clock, row lock, advisory locks).

Its extra DDL is the PL/pgSQL functions of :mod:`anarchon_sql.postgres._functions`;
its one-statement calls (``claim_statement`` and the ``*_many_statement``) call them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from anarchon.errors import InvalidConfigError

from anarchon_sql._client import SqlClient
from anarchon_sql._dialect import ParamStyle, SqlDialect
from anarchon_sql.postgres._durable import durable_functions
from anarchon_sql.postgres._functions import (
    CLAIM_FUNCTION,
    CLAIM_MANY_FUNCTION,
    FINISH_MANY_FUNCTION,
    FINISH_SAVE_MANY_FUNCTION,
    HEARTBEAT_MANY_FUNCTION,
    SAVE_MANY_FUNCTION,
    claim_function,
    claim_many_function,
    finish_many_function,
    finish_save_many_function,
    heartbeat_many_function,
    save_many_function,
)

__all__ = ["PostgresDialect"]


class PostgresDialect(SqlDialect):
    """PostgreSQL: ``BIGINT``, ``clock_timestamp()``, ``FOR UPDATE``, advisory locks.

    ``paramstyle`` is ``"format"`` (``%s``, psycopg); pass ``"numeric"``
    (``$1``) for a :class:`SqlClient` built on asyncpg.
    """

    name: ClassVar[str] = "postgresql"
    bigint = "BIGINT"
    text = "TEXT"
    now_ms = "(floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint"
    for_update = " FOR UPDATE"
    claims_take_overlap_wait = True

    def __init__(self, paramstyle: ParamStyle = "format") -> None:
        if paramstyle not in ("format", "numeric", "qmark"):
            raise InvalidConfigError(
                f"paramstyle must be 'format', 'numeric' or 'qmark', got {paramstyle!r}"
            )
        self.paramstyle = paramstyle

    async def serialize(self, client: SqlClient, key: str) -> None:
        """``pg_advisory_xact_lock`` on a 64-bit hash of ``key``; released at commit.

        A hash collision only makes two unrelated keys wait for each other;
        the rows stay the truth.
        """
        await client.all(
            self.placeholders("SELECT pg_advisory_xact_lock(hashtextextended(?, 0))"), (key,)
        )

    def is_already_created(self, error: BaseException) -> bool:
        """Concurrent ``CREATE ... IF NOT EXISTS`` / ``CREATE OR REPLACE`` races."""
        state = getattr(error, "sqlstate", None)
        if state in ("42P07", "42710", "42723"):
            return True
        if state == "23505" and "pg_" in str(error):  # unique violation in a system catalog
            return True
        return super().is_already_created(error)

    def extra_tables(self, table: Callable[[str], str]) -> list[str]:
        """The functions ``<prefix>claim_v3``, the batch functions (``claim_many_v3``,
        ``*_many_v1``/``_v2``) and their synchronous-commit wrappers (``*_durable_*``, see
        :mod:`anarchon_sql.postgres._durable`)."""
        return [
            claim_function(table, self.now_ms),
            claim_many_function(table, self.now_ms),
            heartbeat_many_function(table, self.now_ms),
            finish_many_function(table, self.now_ms),
            save_many_function(table, self.now_ms),
            finish_save_many_function(table, self.now_ms),
            *durable_functions(table),
        ]

    def claim_statement(self, table: Callable[[str], str]) -> str:
        """``SELECT ... FROM <prefix>claim_v3(...)``: the whole claim in one statement."""
        return (
            "SELECT out_kind, out_attempt, out_runner, out_lease, out_token"
            f" FROM {table(CLAIM_FUNCTION)}(CAST(? AS TEXT), CAST(? AS BIGINT), CAST(? AS TEXT),"
            " CAST(? AS TEXT), CAST(? AS BIGINT), CAST(? AS INTEGER), CAST(? AS BOOLEAN),"
            " CAST(? AS BIGINT), CAST(? AS BOOLEAN), CAST(? AS BIGINT), CAST(? AS BOOLEAN))"
        )

    def claim_many_statement(self, table: Callable[[str], str]) -> str:
        """``SELECT ... FROM <prefix>claim_many_v3(arrays)``: a chunk of claims in one statement."""
        return (
            "SELECT out_i, out_kind, out_attempt, out_runner, out_lease, out_token"
            f" FROM {table(CLAIM_MANY_FUNCTION)}(CAST(? AS TEXT[]), CAST(? AS BIGINT[]),"
            " CAST(? AS TEXT[]), CAST(? AS TEXT[]), CAST(? AS BIGINT[]), CAST(? AS INTEGER[]),"
            " CAST(? AS BOOLEAN[]), CAST(? AS BIGINT[]), CAST(? AS BOOLEAN[]),"
            " CAST(? AS BIGINT[]), CAST(? AS BOOLEAN[]))"
        )

    def heartbeat_many_statement(self, table: Callable[[str], str]) -> str:
        """``SELECT ... FROM <prefix>heartbeat_many_v1(lease_ms, arrays)``: ``(index, renewed)`` rows."""
        return (
            f"SELECT out_i, out_ok FROM {table(HEARTBEAT_MANY_FUNCTION)}(CAST(? AS BIGINT),"
            " CAST(? AS TEXT[]), CAST(? AS BIGINT[]), CAST(? AS TEXT[]))"
        )

    def finish_many_statement(self, table: Callable[[str], str]) -> str:
        """``SELECT ... FROM <prefix>finish_many_v2(arrays)``: ``(index, answer, healed)`` rows.

        An item not finished now is answered True when its run was already
        finished by the same token (a retried finish), as ``finish()`` does,
        or had no state (``healed``: a finished state is written).
        """
        return (
            f"SELECT out_i, out_ok, out_healed FROM {table(FINISH_MANY_FUNCTION)}(CAST(? AS TEXT[]),"
            " CAST(? AS BIGINT[]), CAST(? AS TEXT[]), CAST(? AS TEXT[]), CAST(? AS TEXT[]))"
        )

    def finish_save_many_statement(self, table: Callable[[str], str]) -> str:
        """``SELECT ... FROM <prefix>finish_save_many_v2(arrays)``: ``(index, answer, healed)`` rows."""
        return (
            f"SELECT out_i, out_ok, out_healed FROM {table(FINISH_SAVE_MANY_FUNCTION)}(CAST(? AS TEXT[]),"
            " CAST(? AS BIGINT[]), CAST(? AS TEXT[]), CAST(? AS TEXT[]), CAST(? AS TEXT[]),"
            " CAST(? AS TEXT[]), CAST(? AS TEXT[]), CAST(? AS BIGINT[]), CAST(? AS INTEGER[]),"
            " CAST(? AS TEXT[]), CAST(? AS TEXT[]), CAST(? AS TEXT[]), CAST(? AS BIGINT[]),"
            " CAST(? AS BIGINT[]), CAST(? AS TEXT[]), CAST(? AS INTEGER[]), CAST(? AS INTEGER[]),"
            " CAST(? AS BIGINT[]), CAST(? AS BIGINT[]))"
        )

    def save_many_statement(self, table: Callable[[str], str]) -> str:
        """``SELECT <prefix>save_many_v1(arrays)``: a chunk of result writes in one statement."""
        return (
            f"SELECT {table(SAVE_MANY_FUNCTION)}(CAST(? AS TEXT[]), CAST(? AS TEXT[]),"
            " CAST(? AS BIGINT[]), CAST(? AS INTEGER[]), CAST(? AS TEXT[]), CAST(? AS TEXT[]),"
            " CAST(? AS TEXT[]), CAST(? AS BIGINT[]), CAST(? AS BIGINT[]), CAST(? AS TEXT[]),"
            " CAST(? AS INTEGER[]), CAST(? AS INTEGER[]), CAST(? AS BIGINT[]), CAST(? AS BIGINT[]))"
        )

    def columns_statement(self) -> str:
        """Column names of the table named by the one parameter (search path applies)."""
        return (
            "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(CAST(? AS TEXT))"
            " AND attnum > 0 AND NOT attisdropped"
        )
