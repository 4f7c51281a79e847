"""The fleet registry and fleet-wide controls in SQL (docs/backends/sql.md, "Tables").

Two tables beside the others (``<p>`` is the table prefix):

================  ==========================================================
``<p>fleet``      one row per ``(job, instance_id)``: fingerprint, schedule
                  text, ``seen_at`` and ``expires_at`` (server clock, ms)
``<p>controls``   one row per job an operator paused or skipped: ``paused``
                  (0/1), ``skip_until``, ``updated_at``, ``updated_by``,
                  ``paused_at``, ``resumed_at``
================  ==========================================================

Expired registry rows are ignored on read and deleted by the next ``declare``.
A row that cannot be read (a value anarchon never writes) is skipped and
reported once, named by its table and job (:mod:`anarchon.backend.foreign`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from anarchon.backend.foreign import entry_name, stored_flag, stored_int
from anarchon.fleet.types import Declaration, JobControl

from anarchon_sql._client import Row, SqlClient
from anarchon_sql._dialect import SqlDialect, SqlTables

__all__ = ["FleetStatements", "control_of", "declaration_of", "fleet_ddl", "row_name"]


def fleet_ddl(dialect: SqlDialect, tables: SqlTables) -> list[str]:
    """``CREATE TABLE IF NOT EXISTS`` of the two tables."""
    big, text = dialect.bigint, dialect.text
    return [
        f"CREATE TABLE IF NOT EXISTS {tables('fleet')} ("
        f"job {text} NOT NULL, instance_id {text} NOT NULL, fingerprint {text} NOT NULL,"
        f" schedule {text} NOT NULL, seen_at {big} NOT NULL, expires_at {big} NOT NULL,"
        " PRIMARY KEY (job, instance_id))",
        f"CREATE TABLE IF NOT EXISTS {tables('controls')} ("
        f"job {text} PRIMARY KEY, paused INTEGER NOT NULL DEFAULT 0, skip_until {big},"
        f" updated_at {big}, updated_by {text}, paused_at {big}, resumed_at {big})",
    ]


class FleetStatements:
    """The statements of the registry and the controls, placeholders converted."""

    def __init__(self, dialect: SqlDialect, tables: SqlTables) -> None:
        q, now = dialect.placeholders, dialect.now_ms
        fleet, controls = tables("fleet"), tables("controls")
        self.upsert = q(
            f"INSERT INTO {fleet} (job, instance_id, fingerprint, schedule, seen_at, expires_at)"
            f" VALUES (?, ?, ?, ?, {now}, {now} + ?) ON CONFLICT (job, instance_id) DO UPDATE SET"
            " fingerprint = excluded.fingerprint, schedule = excluded.schedule,"
            " seen_at = excluded.seen_at, expires_at = excluded.expires_at"
        )
        self.expire = q(f"DELETE FROM {fleet} WHERE expires_at <= {now}")
        columns = "job, instance_id, fingerprint, schedule, seen_at, expires_at"
        self.all = q(f"SELECT {columns} FROM {fleet} WHERE expires_at > {now}")
        self.of_job = q(f"SELECT {columns} FROM {fleet} WHERE expires_at > {now} AND job = ?")
        self.set_control = q(
            f"INSERT INTO {controls}"
            " (job, paused, skip_until, updated_at, updated_by, paused_at, resumed_at)"
            f" VALUES (?, ?, ?, {now}, ?, ?, ?) ON CONFLICT (job) DO UPDATE SET"
            " paused = excluded.paused, skip_until = excluded.skip_until,"
            " updated_at = excluded.updated_at, updated_by = excluded.updated_by,"
            " paused_at = excluded.paused_at, resumed_at = excluded.resumed_at"
        )
        self.controls = q(
            "SELECT job, paused, skip_until, updated_at, updated_by, paused_at, resumed_at"
            f" FROM {controls}"
        )

    async def declare_tx(
        self, tx: SqlClient, declarations: Sequence[Declaration], ttl_ms: int
    ) -> None:
        """Upsert every declaration and drop expired rows (one transaction)."""
        for d in declarations:
            await tx.all(
                self.upsert, (d.job, d.instance_id, d.fingerprint, d.schedule, int(ttl_ms))
            )
        await tx.all(self.expire, ())


def row_name(table: str, row: Row) -> str:
    """A registry or controls row by table, job (and instance): ``table[job='a']``."""
    if len(row) == 6:
        return entry_name(table, f"job={row[0]!r} instance_id={row[1]!r}")
    return entry_name(table, f"job={row[0]!r}")


def declaration_of(row: Row) -> Declaration:
    """A registry row as a :class:`Declaration` (parse errors raise)."""
    job, instance, fingerprint, schedule, seen, expires = row
    return Declaration(
        str(job),
        str(instance),
        str(fingerprint),
        str(schedule),
        stored_int(seen),
        stored_int(expires),
    )


def control_of(row: Row) -> JobControl:
    """A controls row as a :class:`JobControl` (parse errors raise)."""
    job, paused, skip_until, updated_at, updated_by, paused_at, resumed_at = row
    return JobControl(
        str(job),
        stored_flag(paused),
        _ms(skip_until),
        _ms(updated_at),
        None if updated_by is None else str(updated_by),
        paused_at=_ms(paused_at),
        resumed_at=_ms(resumed_at),
    )


def _ms(value: Any) -> int | None:
    return None if value is None else stored_int(value)
