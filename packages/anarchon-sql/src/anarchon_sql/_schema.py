"""The schema: the tables and indexes, and the start-up transaction that creates them.

Tables (``<p>`` is the table prefix, default ``anarchon_``):

================  ==========================================================
``<p>meta``       ``store_format`` marker and schema digest
``<p>runs``       lease state per ``(job, slot)``: attempt, token, status,
                  runner, lease expiry (server clock), start/finish times
``<p>claims``     one row per won attempt and per manual run (history)
``<p>results``    one row per ended attempt (history)
``<p>jobs``       per job: a counter of saved results (drives trimming)
``<p>fleet``      the fleet registry: one row per ``(job, instance_id)``
``<p>controls``   fleet-wide pause and skip, one row per job
``<p>members``    fleet membership: one row per live instance
================  ==========================================================

``fleet`` and ``controls`` are in :mod:`anarchon_sql._fleet`, ``members`` in
:mod:`anarchon_sql._members`. A table added in a later version is created at
the next start of a store made before it: the schema digest changes with the
statements, so they run again (each is ``IF NOT EXISTS``).
"""

from __future__ import annotations

import asyncio
import hashlib

from anarchon.backend import STORE_FORMAT
from anarchon.backend.foreign import entry_name, stored_data, stored_int
from anarchon.errors import StoreFormatError

from anarchon_sql._client import SqlClient
from anarchon_sql._dialect import SqlDialect, SqlTables, StoreSetup
from anarchon_sql._fleet import fleet_ddl
from anarchon_sql._members import members_ddl
from anarchon_sql._statements import Statements

__all__ = ["Schema", "ddl"]

_FORMAT_KEY = "store_format"
_SCHEMA_KEY = "schema"


def ddl(dialect: SqlDialect, tables: SqlTables) -> list[str]:
    """The tables and indexes (``IF NOT EXISTS``), then the dialect's extra DDL."""
    big, text = dialect.bigint, dialect.text
    t = tables
    return [
        f"CREATE TABLE IF NOT EXISTS {t.runs} ("
        f"job {text} NOT NULL, slot {big} NOT NULL, attempt INTEGER NOT NULL,"
        f" max_attempts INTEGER NOT NULL, token {text} NOT NULL, status {text} NOT NULL,"
        f" runner {text} NOT NULL, lease_expires_at {big} NOT NULL, started_at {big} NOT NULL,"
        f" finished_at {big}, released INTEGER NOT NULL DEFAULT 0, end_reason {text},"
        f" outcome {text}, error {text}, PRIMARY KEY (job, slot))",
        f"CREATE INDEX IF NOT EXISTS {t('runs_status')} ON {t.runs} (job, status, slot)",
        f"CREATE TABLE IF NOT EXISTS {t.claims} ("
        f"job {text} NOT NULL, token {text} NOT NULL, slot {big} NOT NULL,"
        f" attempt INTEGER NOT NULL, instance_id {text} NOT NULL, claimed_at {big} NOT NULL,"
        f" manual INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (job, slot, token))",
        f"CREATE TABLE IF NOT EXISTS {t.results} ("
        f"job {text} NOT NULL, token {text} NOT NULL, slot {big} NOT NULL,"
        f" attempt INTEGER NOT NULL, instance_id {text} NOT NULL, status {text} NOT NULL,"
        f" reason {text}, started_at {big}, finished_at {big}, error {text},"
        f" manual INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (job, slot, token))",
        f"CREATE TABLE IF NOT EXISTS {t.jobs} ("
        f"job {text} PRIMARY KEY, saves {big} NOT NULL DEFAULT 0)",
        *fleet_ddl(dialect, tables),
        *members_ddl(dialect, tables),
        *dialect.extra_tables(tables),
    ]


class Schema:
    """Creates the tables of one (dialect, prefix) and checks the store format marker."""

    def __init__(self, store: StoreSetup, statements: Statements) -> None:
        self._store = store
        self._sql = statements

    async def install(self, client: SqlClient) -> None:
        """Create what is missing and stamp the store format, in one transaction (retried on races).

        Read in the transaction, the ``store_format`` marker refuses a newer store
        (``StoreFormatError``; one that is not a format number is ``ForeignDataError``)
        and the schema digest skips DDL already run.
        """
        for attempt in range(5):
            try:
                await client.transaction(self._install_tx)
                return
            except Exception as error:
                if attempt < 4 and self._store.dialect.is_already_created(error):
                    await asyncio.sleep(0.05 * (attempt + 1))
                    continue
                raise

    async def _install_tx(self, tx: SqlClient) -> None:
        dialect, tables = self._store.dialect, self._store.tables
        await dialect.serialize(tx, tables.prefix + "init")
        await tx.all(self._sql.create_meta, ())
        meta = {str(k): str(v) for k, v in await tx.all(self._sql.meta_get, ())}
        found = meta.get(_FORMAT_KEY)
        if found is not None:
            with stored_data(entry_name(tables.meta, f"key={_FORMAT_KEY!r}"), "a store format"):
                version = stored_int(found)
                if version < 1:
                    raise ValueError(f"no store format is {version}")
            if version > STORE_FORMAT:
                raise StoreFormatError(
                    f"the tables {tables.prefix}* at {self._store.describe()} hold store format"
                    f" {found!r}; this anarchon-sql reads format {STORE_FORMAT} at most:"
                    " upgrade anarchon-sql on this instance"
                )
        statements = ddl(dialect, tables)
        digest = hashlib.sha256("\n;\n".join(statements).encode()).hexdigest()[:16]
        if found == str(STORE_FORMAT) and meta.get(_SCHEMA_KEY) == digest:
            return
        for statement in statements:
            await tx.all(statement, ())
        await tx.all(self._sql.meta_put, (_FORMAT_KEY, str(STORE_FORMAT)))
        await tx.all(self._sql.meta_put, (_SCHEMA_KEY, digest))
