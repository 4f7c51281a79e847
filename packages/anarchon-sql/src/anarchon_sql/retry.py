"""``RunStore.retry`` for the SQL backends (docs/leases.md, "Retries"): one transaction.

The failed attempt ends and the next starts under the same runner with a new
token, a new lease and a claim record, with the same statements the claim
transaction uses for a takeover, behind the same per-job lock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from anarchon.types import ClaimOutcome, RunRetry

from anarchon_sql._client import SqlClient

if TYPE_CHECKING:
    from anarchon_sql._backend import SqlBackend

__all__ = ["retry_tx"]


async def retry_tx(backend: SqlBackend, tx: SqlClient, r: RunRetry) -> ClaimOutcome:
    """The retry tree of docs/leases.md inside the transaction ``tx``."""
    s = backend._sql
    await backend.dialect.serialize(tx, backend.tables.prefix + "job:" + r.job)
    now = int((await tx.all(s.now, ()))[0][0])
    rows = await tx.all(s.run_row, (r.job, r.slot))
    if not rows:
        return ClaimOutcome("done")
    attempt, _max, token, status, runner, lease, _started, released = rows[0]
    attempt, lease = int(attempt), int(lease)
    runner = None if runner is None else str(runner)
    if status == "running" and token == r.new_token and not released:
        return ClaimOutcome("won", attempt, runner, lease)  # a repeated call
    if status != "running" or token != r.token or bool(released):
        kind = "running" if status == "running" and token != r.token else "done"
        return ClaimOutcome(kind, attempt, runner, lease)
    if attempt >= r.max_attempts:
        return ClaimOutcome("done", attempt, runner, lease)
    new_lease = now + r.lease_ms
    await tx.all(
        s.take_over,
        (attempt + 1, r.new_token, r.instance_id, new_lease, r.max_attempts, now, r.job, r.slot),
    )
    await tx.all(s.insert_claim, (r.job, r.new_token, r.slot, attempt + 1, r.instance_id, now, 0))
    return ClaimOutcome("won", attempt + 1, r.instance_id, new_lease)
