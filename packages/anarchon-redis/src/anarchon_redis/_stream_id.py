"""The ``stream-id`` strategy: ``XADD <prefix><job>:runs <slot>-0`` (claim-only, no leases).

Redis refuses an entry ID not greater than the stream's top, so only the
first ``XADD`` of a slot succeeds. A refused claim reads ``XRANGE key id id``:
the entry is there when the slot is taken (its token tells whether the claim
was ours, for a retried claim), and absent when the slot is older than the
stream's top ("stale": refused, like a late claim).

Keys (each command and script touches one key, so no hash tag is needed):

=========================  ==========  ============================================
``<prefix><job>:runs``      stream      one entry per claimed slot (ID ``<slot>-0``)
``<prefix><job>:manual``    stream      one entry per manual run
``<prefix><job>:results``   sorted set  one result per run (JSON, scored by slot)
=========================  ==========  ============================================
"""

from __future__ import annotations

import time
from typing import Any

from anarchon.history import build_history
from anarchon.types import ClaimInput, JobLimits, RunRecord, StoredResult

from anarchon_redis import _lua
from anarchon_redis._client import is_error_reply, is_noscript, text
from anarchon_redis._runtime import (
    Runtime,
    append_manual_run,
    claim_records,
    decode_result,
    encode_result,
    refuse_lease_options,
)
from anarchon_redis.strategies import StreamId

__all__ = ["StreamIdRuntime"]

HISTORY_SLACK = 8
"""Extra records read beyond ``limit``."""


def _is_stale_id(error: BaseException) -> bool:
    """The server's answer to an ``XADD`` ID at or below the stream's top."""
    return is_error_reply(error) and "equal or smaller" in str(error)


class StreamIdRuntime(Runtime):
    """The ``stream-id`` strategy for one backend."""

    scripts = _lua.STREAM_ID_SCRIPTS

    def __init__(self, backend: Any, settings: StreamId) -> None:
        super().__init__(backend)
        self.settings = settings
        self._keys: dict[str, tuple[str, str, str]] = {}

    def keys(self, job: str) -> tuple[str, str, str]:
        """``(runs, manual, results)`` of ``job``."""
        keys = self._keys.get(job)
        if keys is None:
            base = self.backend.prefix + job
            keys = (f"{base}:runs", f"{base}:manual", f"{base}:results")
            self._keys[job] = keys
        return keys

    def check_job(self, limits: JobLimits) -> None:
        """Refuse lease options: this strategy has no leases (the scheduler checks this too)."""
        refuse_lease_options(limits, "stream-id")

    async def claim(self, input: ClaimInput) -> bool:
        """``XADD runs <slot>-0``: won if added; if refused, won only if the entry is ours."""
        conn = self.backend._conn or await self.backend._ready()
        runs = self.keys(input.job)[0]
        entry_id = f"{int(input.slot)}-0"
        try:
            await conn.execute(
                "XADD",
                runs,
                entry_id,
                "token",
                input.token,
                "instance",
                input.instance_id,
                "at",
                time.time_ns() // 1_000_000,
            )
            return True
        except Exception as error:
            if not _is_stale_id(error):
                raise
        found = await conn.execute("XRANGE", runs, entry_id, entry_id)
        if not found:
            return False  # older than the stream's top: refused like a late claim
        fields = found[0][1]
        records = claim_records(input.job, [(entry_id, fields)], manual=False, slot_from_id=True)
        return bool(records) and records[0].token == input.token

    async def record_manual_run(self, input: ClaimInput) -> int | None:
        """Append the manual run to the job's ``manual`` stream (no de-duplication)."""
        await append_manual_run(await self.ready(), self.keys(input.job)[1], input)
        return None

    async def save_result(
        self, job: str, result: StoredResult, history_size: int, history_ttl_ms: int | None
    ) -> None:
        """Store the result and trim history (about ``history_size`` runs, and the TTL).

        The streams are trimmed first; results older than the oldest claim
        still kept are then dropped, so a finished run never shows as running.
        The newest claim always stays (a retried claim compares its token).
        """
        conn = await self.ready()
        runs, manual, results = self.keys(job)
        size = max(int(history_size), 1)
        ttl = "" if history_ttl_ms is None else int(history_ttl_ms)
        trim = _lua.TRIM_STREAM
        commands: list[tuple[Any, ...]] = [
            ("ZADD", results, int(result.slot), encode_result(result)),
            ("EVALSHA", trim.sha, 1, runs, size, ttl, 1, ""),
            ("EVALSHA", trim.sha, 1, manual, size, ttl, 0, "slot"),
        ]
        replies = await conn.pipeline(commands)
        if any(isinstance(r, Exception) and is_noscript(r) for r in replies[1:]):
            await conn.load_scripts((trim,))
            replies = [replies[0], *(await conn.pipeline(commands[1:]))]
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        removed = int(replies[1][0]) + int(replies[2][0])
        if not removed:
            return
        oldest = [int(text(r[1])) for r in replies[1:] if text(r[1])]
        if oldest:
            await conn.execute("ZREMRANGEBYSCORE", results, "-inf", f"({min(oldest)}")
        else:
            await conn.execute("DEL", results)

    async def history(self, job: str, limit: int) -> list[RunRecord]:
        """Recent runs of ``job`` (scheduled and manual), newest first."""
        if limit <= 0:
            return []
        runs, manual, results = self.keys(job)
        fetch = int(limit) + HISTORY_SLACK
        conn = await self.ready()
        replies = await conn.pipeline(
            [
                ("XREVRANGE", runs, "+", "-", "COUNT", fetch),
                ("XREVRANGE", manual, "+", "-", "COUNT", fetch),
                ("ZREVRANGE", results, 0, fetch - 1),
            ]
        )
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        scheduled, manual_entries, members = replies
        claims = claim_records(job, scheduled, manual=False, slot_from_id=True)
        claims += claim_records(job, manual_entries, manual=True)
        stored = [r for r in (decode_result(m) for m in members) if r is not None]
        return build_history(job, claims, stored, limit)
