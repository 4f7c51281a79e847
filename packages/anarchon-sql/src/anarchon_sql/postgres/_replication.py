"""What ``durability="replicated"`` can protect on this server, checked at ``init()``.

Reads ``synchronous_standby_names`` and ``pg_stat_replication`` on the primary:

- no synchronous standby named → ``InvalidConfigError``: ``synchronous_commit``
  would then confirm on the primary only, and the setting would promise what
  the server cannot hold;
- a standby named but none streaming as ``sync``/``quorum`` → WARNING: every
  claim waits for one (and is answered ``uncertain`` after ``call_timeout``)
  until it connects;
- else INFO naming the standbys that confirm each claim.
"""

from __future__ import annotations

import logging

from anarchon.errors import InvalidConfigError

from anarchon_sql._client import SqlClient

__all__ = ["check_replication"]

log = logging.getLogger("anarchon.sql")

_QUERY = (
    "SELECT current_setting('synchronous_standby_names'), pg_is_in_recovery(),"
    " (SELECT count(*) FROM pg_stat_replication),"
    " (SELECT string_agg(coalesce(application_name, '?') || ' (' || sync_state || ')', ', ')"
    "  FROM pg_stat_replication WHERE sync_state IN ('sync', 'quorum'))"
)


async def check_replication(client: SqlClient, where: str) -> None:
    """Refuse ``replicated`` without a synchronous standby; log what it protects."""
    rows = await client.all(_QUERY, ())
    names, in_recovery, connected, synchronous = rows[0]
    names = str(names or "").strip()
    if in_recovery:
        raise InvalidConfigError(
            f"PostgreSQL at {where} is a standby (in recovery): claims, heartbeats and lease"
            " checks must go to the primary; point the backend at the primary"
        )
    if not names:
        raise InvalidConfigError(
            f"durability='replicated' needs a synchronous standby, but PostgreSQL at {where}"
            " has synchronous_standby_names empty: a commit would be confirmed by the primary"
            " alone. Set synchronous_standby_names on the primary (for example 'ANY 1 (*)')"
            " or use durability='fast'"
        )
    if synchronous:
        log.info(
            "anarchon: PostgreSQL at %s: durability=replicated: every claim, lease extension and"
            " finish commits only once a synchronous standby flushed it (standbys: %s;"
            " synchronous_standby_names=%r). Protected: a failover to one of them loses no"
            " confirmed claim. Not protected: a failover to an asynchronous standby, or a"
            " promotion of a standby not named there",
            where,
            synchronous,
            names,
        )
        return
    log.warning(
        "anarchon: PostgreSQL at %s: durability=replicated, synchronous_standby_names=%r, but"
        " no synchronous standby is streaming now (%d connected, or pg_stat_replication is not"
        " readable by this role: grant pg_monitor). Claims wait for one; after call_timeout"
        " they are answered uncertain and skipped",
        where,
        names,
        int(connected or 0),
    )
