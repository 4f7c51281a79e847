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
from collections.abc import Sequence
from typing import Any

from anarchon.backend import kept_runs
from anarchon.backend.foreign import skip_unreadable, stored_int
from anarchon.backend.history import build_history
from anarchon.backend.result_json import result_json
from anarchon.types import ClaimInput, JobLimits, ResultWrite, RunRecord

from anarchon_redis import _lua
from anarchon_redis._batch import group_by_job, retry_noscript
from anarchon_redis._client import is_error_reply, text
from anarchon_redis._records import append_manual_run, claim_records, decode_result
from anarchon_redis._runtime import Runtime, Store, refuse_lease_options
from anarchon_redis.strategies import StreamId

__all__ = ["StreamIdRuntime"]

HISTORY_SLACK = 8
"""Extra records read beyond ``limit``."""


_UNREADABLE = object()
"""The oldest slot of a stream whose oldest entry is not ours (reported once)."""


def _oldest_slot(key: str, value: str) -> int | object | None:
    """The slot the trim script answered for stream ``key`` (None: the stream is empty)."""
    if not value:
        return None
    found = skip_unreadable(key, "a run's slot", lambda: stored_int(value))
    return _UNREADABLE if found is None else found


def _is_stale_id(error: BaseException) -> bool:
    """The server's answer to an ``XADD`` ID at or below the stream's top."""
    return is_error_reply(error) and "equal or smaller" in str(error)


class StreamIdRuntime(Runtime):
    """The ``stream-id`` strategy for one store."""

    scripts = _lua.STREAM_ID_SCRIPTS

    def __init__(self, store: Store, settings: StreamId) -> None:
        super().__init__(store)
        self.settings = settings
        self._keys: dict[str, tuple[str, str, str]] = {}

    def keys(self, job: str) -> tuple[str, str, str]:
        """``(runs, manual, results)`` of ``job``."""
        keys = self._keys.get(job)
        if keys is None:
            base = self.store.prefix + job
            keys = (f"{base}:runs", f"{base}:manual", f"{base}:results")
            self._keys[job] = keys
        return keys

    def check_job(self, limits: JobLimits) -> None:
        """Refuse lease options: this strategy has no leases (the scheduler checks this too)."""
        refuse_lease_options(limits, "stream-id")

    def key_types(self, job: str) -> dict[str, str]:
        """The job's keys and their Redis types."""
        runs, manual, results = self.keys(job)
        return {runs: "stream", manual: "stream", results: "zset"}

    async def claim_many(self, inputs: Sequence[ClaimInput]) -> list[bool]:
        """:meth:`claim` for each input: the ``XADD``s in one pipeline, the refused ones' reads in one more."""
        if not inputs:
            return []
        conn = await self.ready()
        at = time.time_ns() // 1_000_000
        ids = [f"{int(i.slot)}-0" for i in inputs]
        runs = [self.keys(i.job)[0] for i in inputs]
        replies = await conn.pipeline(
            [
                ("XADD", key, entry_id, "token", i.token, "instance", i.instance_id, "at", at)
                for key, entry_id, i in zip(runs, ids, inputs, strict=True)
            ]
        )
        refused = [n for n, reply in enumerate(replies) if isinstance(reply, BaseException)]
        for n in refused:
            if not _is_stale_id(replies[n]):
                conn.check(replies[n], (runs[n],))
        found = await conn.pipeline([("XRANGE", runs[n], ids[n], ids[n]) for n in refused])
        won = [True] * len(inputs)
        for n, entries in zip(refused, found, strict=True):
            entries = conn.check(entries, (runs[n],))
            if not entries:
                won[n] = False  # older than the stream's top: refused like a late claim
                continue
            records = claim_records(
                inputs[n].job,
                [(ids[n], entries[0][1])],
                key=runs[n],
                manual=False,
                slot_from_id=True,
            )
            won[n] = bool(records) and records[0].token == inputs[n].token
        return won

    async def record_manual_run(self, input: ClaimInput) -> int | None:
        """Append the manual run to the job's ``manual`` stream (no de-duplication)."""
        await append_manual_run(await self.ready(), self.keys(input.job)[1], input)
        return None

    async def save_results(self, writes: Sequence[ResultWrite]) -> None:
        """Store the results and trim each job's history once (about ``history_size`` runs, and the TTL).

        The streams are trimmed first; results older than the oldest claim
        still kept are then dropped, so a finished run never shows as running.
        The newest claim always stays (a retried claim compares its token).
        One pipeline for the results and trims, one more for what a trim removed.
        """
        if not writes:
            return
        conn = await self.ready()
        by_job = group_by_job(writes)
        trim = _lua.TRIM_STREAM
        adds = [
            ("ZADD", self.keys(w.job)[2], int(w.result.slot), result_json(w.result)) for w in writes
        ]
        trims: list[tuple[Any, ...]] = []
        for job, last in by_job.items():
            runs, manual, _results = self.keys(job)
            size = kept_runs(last.history_size)
            ttl = "" if last.history_ttl_ms is None else int(last.history_ttl_ms)
            trims.append(("EVALSHA", trim.sha, 1, runs, size, ttl, 1, ""))
            trims.append(("EVALSHA", trim.sha, 1, manual, size, ttl, 0, "slot"))
        replies = await conn.pipeline([*adds, *trims])
        for command, reply in zip(adds, replies, strict=False):
            conn.check(reply, (command[1],))
        trimmed = await retry_noscript(conn, (trim,), trims, replies[len(adds) :])
        follow: list[tuple[Any, ...]] = []
        for n, job in enumerate(by_job):
            first, second = trimmed[2 * n], trimmed[2 * n + 1]
            removed = int(first[0]) + int(second[0])
            if not removed:
                continue
            runs, manual, results = self.keys(job)
            oldest = [_oldest_slot(key, text(r[1])) for key, r in ((runs, first), (manual, second))]
            if any(o is _UNREADABLE for o in oldest):
                continue  # the oldest manual run is not ours: results stay until it is trimmed
            kept = [o for o in oldest if isinstance(o, int)]
            if kept:
                follow.append(("ZREMRANGEBYSCORE", results, "-inf", f"({min(kept)}"))
            else:
                follow.append(("DEL", results))
        for command, reply in zip(follow, await conn.pipeline(follow), strict=True):
            conn.check(reply, (command[1],))

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
        for key, reply in zip((runs, manual, results), replies, strict=True):
            conn.check(reply, (key,))
        scheduled, manual_entries, members = replies
        claims = claim_records(job, scheduled, key=runs, manual=False, slot_from_id=True)
        claims += claim_records(job, manual_entries, key=manual, manual=True)
        stored = [r for r in (decode_result(results, m) for m in members) if r is not None]
        return build_history(job, claims, stored, limit)
