"""The ``durability`` setting of the SQL backends (docs/backends/sql.md, "Durability").

- ``"fast"`` (the default): a write is confirmed when the primary committed
  it, with the server's own ``synchronous_commit``; a failover to an
  asynchronous standby can lose it.
- ``"replicated"`` (PostgreSQL only): claims, lease extensions and finishes
  commit with ``synchronous_commit = on``, so their commit returns only once a
  synchronous standby has flushed it; a claim whose commit is in doubt is
  confirmed by a second synchronous write, or answered ``uncertain``.

:class:`DurableCalls` holds the one-statement calls a replicated backend
runs instead of the dialect's own (:mod:`anarchon_sql.postgres._durable`
makes them for PostgreSQL).
"""

from __future__ import annotations

from dataclasses import dataclass

from anarchon.backend.durability import DURABILITY, check_single_node_durability
from anarchon.backend.durability import check_durability as check_durability_value
from anarchon.errors import BackendUnavailableError

from anarchon_sql._driver_errors import is_transient_sql_error

__all__ = [
    "DURABILITIES",
    "DurableCalls",
    "check_durability",
    "in_doubt",
]

DURABILITIES = DURABILITY
"""The accepted values of ``durability``."""


def check_durability(value: object, *, accepted: tuple[str, ...] = DURABILITIES, store: str) -> str:
    """``value`` if it is an accepted durability, else a coded ``InvalidConfigError``.

    The checks of :mod:`anarchon.backend.durability`: a store accepting
    ``"fast"`` only (SQLite) refuses ``"replicated"`` saying why.
    """
    if "replicated" in accepted:
        return check_durability_value(value)
    return check_single_node_durability(store, value)


def in_doubt(error: BaseException) -> bool:
    """True if a call that failed with ``error`` may have committed all the same.

    A timeout or a connection lost while the statement ran (or its commit
    waited for the standby) leaves its fate unknown; a definite SQL error
    rolled it back (confirming it again then does no harm either).
    """
    return isinstance(error, (BackendUnavailableError, OSError)) or is_transient_sql_error(error)


@dataclass
class DurableCalls:
    """The one-statement calls of a replicated backend: each commits synchronously.

    ``claim``, ``claim_many``, ``heartbeat_many``, ``finish_many`` and
    ``finish_save_many`` take the parameters of the dialect's statements of
    the same name; ``prologue`` is the first statement of a generic
    transaction (retry, hand-over) making its commit synchronous.
    A ``won`` claim (and a True finish) whose transaction wrote nothing
    writes its own row again, so that its commit waits for the standby too:
    a retried claim that finds its own token is confirmed, never assumed.
    """

    claim: str
    claim_many: str
    heartbeat_many: str
    finish_many: str
    finish_save_many: str
    prologue: str
