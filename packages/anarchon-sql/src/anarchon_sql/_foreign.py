"""Telling anarchon's tables from another application's tables of the same name.

``CREATE TABLE IF NOT EXISTS`` silently keeps a table that is already there,
so a table named like one of the backend's (``anarchon_runs``...) but made by
someone else would only show up later, as SQL errors deep in a claim. At
start, and whenever a store call fails with an error that is not anarchon's,
the backend compares each table's columns with its own and raises
:class:`~anarchon.ForeignDataError` naming the first table that differs.
"""

from __future__ import annotations

from anarchon.errors import ForeignDataError

from anarchon_sql._client import SqlClient
from anarchon_sql._dialect import SqlDialect, SqlTables

__all__ = ["COLUMNS", "find_foreign_table"]

COLUMNS: dict[str, tuple[str, ...]] = {
    "meta": ("key", "value"),
    "runs": (
        "job",
        "slot",
        "attempt",
        "max_attempts",
        "token",
        "status",
        "runner",
        "lease_expires_at",
        "started_at",
        "finished_at",
        "released",
        "end_reason",
        "outcome",
        "error",
    ),
    "claims": ("job", "token", "slot", "attempt", "instance_id", "claimed_at", "manual"),
    "results": (
        "job",
        "token",
        "slot",
        "attempt",
        "instance_id",
        "status",
        "reason",
        "started_at",
        "finished_at",
        "error",
        "manual",
    ),
    "jobs": ("job", "saves"),
    "fleet": ("job", "instance_id", "fingerprint", "schedule", "seen_at", "expires_at"),
    "controls": (
        "job",
        "paused",
        "skip_until",
        "updated_at",
        "updated_by",
        "paused_at",
        "resumed_at",
    ),
    "members": ("instance_id", "roster", "seen_at", "expires_at"),
}
"""The columns of each table, by logical name (``tables(name)`` gives the real one)."""


async def _differs(
    client: SqlClient, dialect: SqlDialect, table: str, wanted: tuple[str, ...]
) -> str:
    """How ``table`` differs from ``wanted`` ("" when it matches or does not exist)."""
    query = dialect.columns_statement()
    if query is not None:
        rows = await client.all(dialect.placeholders(query), (table,))
        found = {str(row[0]).lower() for row in rows}
        if not found:
            return ""
        missing = sorted(set(wanted) - found)
        extra = sorted(found - set(wanted))
        parts = []
        if missing:
            parts.append(f"lacks the column(s) {', '.join(missing)}")
        if extra:
            parts.append(f"has the column(s) {', '.join(extra)} that anarchon does not write")
        return " and ".join(parts)
    try:
        await client.all(f"SELECT {', '.join(wanted)} FROM {table} WHERE 1 = 0", ())
    except Exception as error:
        return f"cannot be read as anarchon's ({type(error).__name__}: {error})"
    return ""


async def find_foreign_table(
    client: SqlClient, dialect: SqlDialect, tables: SqlTables, where: str
) -> ForeignDataError | None:
    """A :class:`ForeignDataError` for the first table that is not anarchon's, else None."""
    for name, wanted in COLUMNS.items():
        table = tables(name)
        try:
            how = await _differs(client, dialect, table, wanted)
        except Exception:  # the check itself failed (connection gone...): no verdict
            return None
        if how:
            return ForeignDataError(
                f"the table {table} at {where} is not anarchon's: it {how}. Another"
                " application may use that name: give anarchon another table_prefix,"
                " or rename that table",
                key=table,
            )
    return None
