"""What differs between SQL databases: :class:`SqlDialect`, table names and placeholders.

SQL in :mod:`anarchon_sql` is written once, in a neutral style: ``?``
placeholders, ``ON CONFLICT`` upserts, ``RETURNING``, and the few spots that
differ per database read from the dialect (the integer type, the server clock,
the row lock, serialisation of claims of one job, extra DDL such as a
server-side claim function).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar, Literal, Protocol

from anarchon.errors import InvalidConfigError

if TYPE_CHECKING:
    from anarchon_sql._client import SqlClient

__all__ = [
    "DEFAULT_TABLE_PREFIX",
    "ParamStyle",
    "SqlDialect",
    "SqlTables",
    "StoreSetup",
    "convert_placeholders",
    "validate_table_prefix",
]

DEFAULT_TABLE_PREFIX = "anarchon_"
"""Prefix of every table (and index, and function) the SQL backends create."""

ParamStyle = Literal["qmark", "format", "numeric", "qnumeric"]
"""Placeholder styles :func:`convert_placeholders` produces.

``qmark``: ``?`` (sqlite3, aiosqlite); ``format``: ``%s`` (psycopg);
``numeric``: ``$1`` (asyncpg); ``qnumeric``: ``?1`` (SQLite's numbered form).
"""

_PREFIX_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}")

_TABLES = ("meta", "runs", "claims", "results", "jobs")


def validate_table_prefix(prefix: object) -> str:
    """Return ``prefix`` if it is a safe SQL identifier start, else raise ``InvalidConfigError``.

    Allowed: a letter or ``_``, then letters, digits or ``_``; 1 to 40
    characters (so that every derived name fits PostgreSQL's 63-byte limit).
    Names are never quoted, so PostgreSQL folds them to lower case.
    """
    if not isinstance(prefix, str) or _PREFIX_RE.fullmatch(prefix) is None:
        raise InvalidConfigError(
            f"table_prefix must be 1-40 characters of letters, digits and '_', not starting"
            f" with a digit (it becomes part of SQL identifiers); got {prefix!r}"
        )
    return prefix


class SqlTables:
    """The validated names of the tables of one table prefix.

    Calling it maps a logical name to the real one: ``tables("runs")`` →
    ``"anarchon_runs"``. Attributes: ``meta``, ``runs``, ``claims``,
    ``results``, ``jobs`` and ``prefix``.
    """

    def __init__(self, prefix: str = DEFAULT_TABLE_PREFIX) -> None:
        self.prefix = validate_table_prefix(prefix)
        self.meta = prefix + "meta"
        self.runs = prefix + "runs"
        self.claims = prefix + "claims"
        self.results = prefix + "results"
        self.jobs = prefix + "jobs"

    def __call__(self, name: str) -> str:
        """The real name of table, index or function ``name`` (letters, digits, ``_``)."""
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) is None:
            raise InvalidConfigError(f"not a valid SQL name suffix: {name!r}")
        return self.prefix + name

    def __repr__(self) -> str:
        return f"SqlTables({self.prefix!r})"


@functools.lru_cache(maxsize=512)
def convert_placeholders(sql: str, style: ParamStyle) -> str:
    """Rewrite the ``?`` placeholders of ``sql`` for a driver's ``style``.

    ``?`` inside single-quoted literals, double-quoted identifiers and
    dollar-quoted bodies is left alone. For ``format``, every ``%`` becomes
    ``%%`` (psycopg parses ``%`` even inside literals).
    """
    if style == "qmark":
        return sql
    out: list[str] = []
    index = 0
    i = 0
    n = len(sql)
    while i < n:
        ch = sql[i]
        if ch in ("'", '"'):
            end = sql.find(ch, i + 1)
            end = n if end < 0 else end + 1
            chunk = sql[i:end]
            out.append(chunk.replace("%", "%%") if style == "format" else chunk)
            i = end
            continue
        if ch == "$":
            match = re.match(r"\$[A-Za-z_]*\$", sql[i:])
            if match is not None:
                tag = match.group(0)
                end = sql.find(tag, i + len(tag))
                end = n if end < 0 else end + len(tag)
                chunk = sql[i:end]
                out.append(chunk.replace("%", "%%") if style == "format" else chunk)
                i = end
                continue
        if ch == "?":
            index += 1
            if style == "format":
                out.append("%s")
            elif style == "numeric":
                out.append(f"${index}")
            else:
                out.append(f"?{index}")
        elif ch == "%" and style == "format":
            out.append("%%")
        else:
            out.append(ch)
        i += 1
    return "".join(out)


class SqlDialect:
    """What differs per database (docs/backends/sql.md); subclass it for another database.

    The defaults are standard SQL; a subclass sets :attr:`now_ms` (there is no
    portable way to read the server clock) and whatever else differs.

    ============================  ==================================================
    member                        meaning
    ============================  ==================================================
    ``bigint``                    64-bit integer column type
    ``text``                      text column type
    ``now_ms``                    SQL expression: the **database server's** clock, ms
    ``for_update``                row-lock clause appended to a claim's read
    ``paramstyle``                what :meth:`placeholders` produces
    ``placeholders(sql)``         neutral ``?`` placeholders → the driver's style
    ``extra_tables(table)``       extra DDL run at start (indexes, functions)
    ``serialize(client, key)``    make two claims of one job run one after the other
    ``is_already_created(e)``     tell "already exists" races from real errors
    ``claim_statement(table)``    optional: one statement running the whole claim
    ``*_many_statement(table)``   optional: one statement per chunk of a batch
    ``columns_statement()``       optional: the column names of one table
    ``claims_take_overlap_wait``  the claim statements take an 11th parameter,
                                  ``overlap_wait`` (``RunClaim.overlap_wait``)
    ============================  ==================================================

    Every optional statement defaults to None: the backend then runs the
    single-item SQL for each item of a chunk inside one transaction.
    """

    name: ClassVar[str] = "sql"
    """Short name, for messages."""
    bigint: str = "BIGINT"
    """The 64-bit integer column type."""
    text: str = "TEXT"
    """The text column type (also used for primary keys)."""
    now_ms: str = ""
    """SQL expression reading the database server's clock, in ms since the epoch (an integer)."""
    for_update: str = ""
    """Row-lock clause for the claim's read of the run state (``" FOR UPDATE"`` or empty)."""
    paramstyle: ParamStyle = "qmark"
    """The driver's placeholder style (see :func:`convert_placeholders`)."""

    def placeholders(self, sql: str) -> str:
        """Convert neutral ``?`` placeholders to the driver's style."""
        return convert_placeholders(sql, self.paramstyle)

    def extra_tables(self, table: Callable[[str], str]) -> list[str]:
        """Extra DDL run (in order, inside the start-up transaction) after the tables exist.

        ``table`` maps a logical name to the prefixed one (``table("runs")``);
        it is the backend's :class:`SqlTables`. Statements take no parameters.
        """
        return []

    async def serialize(self, client: SqlClient, key: str) -> None:
        """Inside a transaction on ``client``: wait until no other transaction holds ``key``.

        The backend calls it first in every claim transaction with a key naming
        the job (and in the start-up transaction), so two claims of one job run
        one after the other even when the row they look for does not exist yet.
        The default does nothing: right for databases whose write transactions
        are serialised anyway (SQLite's ``BEGIN IMMEDIATE``).
        """
        return None

    def is_already_created(self, error: BaseException) -> bool:
        """True if ``error`` says a table, index or function was created concurrently.

        Start-up DDL that fails this way is retried (the other process won the
        race); anything else is raised.
        """
        text = str(error).lower()
        return "already exists" in text or "concurrently updated" in text

    claims_take_overlap_wait: ClassVar[bool] = False
    """True if :meth:`claim_statement` and :meth:`claim_many_statement` take an 11th
    parameter (array), ``overlap_wait``: an ``overlap`` answer then writes nothing.
    Without it (a dialect written before), overlap skips are written at the first
    ``overlap`` answer, as before."""

    def claim_statement(self, table: Callable[[str], str]) -> str | None:
        """One statement that runs the whole claim tree, or None for the generic transaction.

        The statement takes the parameters ``job, slot, token, instance_id,
        lease_ms, max_attempts, overlap, deadline_ms, create, early_ms`` (in that order)
        and returns one row ``(kind, attempt, runner, lease_expires_at,
        stored_token)``. Usually it calls a server-side function created by
        :meth:`extra_tables`; then a claim is one round trip.
        """
        return None

    def claim_many_statement(self, table: Callable[[str], str]) -> str | None:
        """One statement claiming a chunk, or None for one transaction of single claims.

        Parameters: ten arrays, one per claim parameter (``jobs, slots,
        tokens, instance_ids, lease_ms, max_attempts, overlap, deadline_ms,
        create, early_ms``). Rows: ``(index, kind, attempt, runner, lease_expires_at,
        stored_token)`` with the item's 1-based index, one per item, any order.
        Each item must keep the single claim's semantics, items of one job
        taken in request order.
        """
        return None

    def heartbeat_many_statement(self, table: Callable[[str], str]) -> str | None:
        """One statement renewing a chunk of leases, or None for one transaction of heartbeats.

        Parameters: ``lease_ms``, then the arrays ``jobs, slots, tokens``.
        Rows: ``(index, renewed)`` with the item's 1-based index, one per item.
        """
        return None

    def finish_many_statement(self, table: Callable[[str], str]) -> str | None:
        """One statement finishing a chunk of runs, or None for one transaction of finishes.

        Parameters: the arrays ``jobs, slots, tokens, statuses, errors``.
        Rows: ``(index, answer)`` with the 1-based index and ``finish()``'s answer,
        optionally a third column ``healed`` (True where the item found no state
        and wrote a finished one: the backend logs a WARNING for it).
        """
        return None

    def finish_save_many_statement(self, table: Callable[[str], str]) -> str | None:
        """One statement finishing a chunk of runs and saving the results of those it finished.

        Parameters: the arrays of :meth:`finish_many_statement`, then those of
        :meth:`save_many_statement`. Rows: ``(index, answer)`` as
        :meth:`finish_many_statement`. None: one transaction per chunk.
        """
        return None

    def save_many_statement(self, table: Callable[[str], str]) -> str | None:
        """One statement saving a chunk of results, or None for one transaction of saves.

        Parameters: the arrays ``jobs, tokens, slots, attempts, instance_ids,
        statuses, reasons, started_at, finished_at, errors, manual,
        history_sizes, history_ttl_ms, retention_ms``; its rows are ignored.
        """
        return None

    def columns_statement(self) -> str | None:
        """A query of the column names of the table named by its one parameter, or None.

        Used at start to tell another application's table of the same name
        (``ANARCHON_FOREIGN_DATA``). Without it the backend only checks that
        its columns can be selected.
        """
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class StoreSetup(Protocol):
    """The dialect, tables and name of one store, read at each call (a backend may swap its dialect)."""

    dialect: SqlDialect
    tables: SqlTables

    def describe(self) -> str:
        """Where the store is, for messages."""
        ...
