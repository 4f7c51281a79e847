"""What the claim-only strategies that remember a claim for a window share.

Those are ``script`` (:mod:`anarchon_redis._script`) and ``idmp``
(:mod:`anarchon_redis._idmp`); each gives its claim script, this base runs it
and keeps the keys, manual runs, trimming and history.

Keys (each command and script touches one key, so no hash tag is needed):

============================  ==========  ============================================
``<prefix><job>:runs``         stream      one entry per claim (``slot``, ``token``, ...)
``<prefix><job>:manual``       stream      one entry per manual run
``<prefix><job>:results``      sorted set  one result per run (JSON, scored by slot)
``<prefix><job>:trimmed``      string      the slot below which history is trimmed
============================  ==========  ============================================

History trimming never drops what de-duplication still needs: a claim stays
in ``runs`` while it is younger than the window (``window_ms``, or
``duration_sec``) even when history (``history_size``, ``history_ttl``) no
longer shows it; ``trimmed`` hides it from :meth:`history`.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any

from anarchon.backend import kept_runs
from anarchon.backend.foreign import skip_unreadable, stored_int
from anarchon.backend.history import build_history
from anarchon.backend.result_json import result_json
from anarchon.types import ClaimInput, JobLimits, ResultWrite, RunRecord

from anarchon_redis import _lua
from anarchon_redis._batch import group_by_job, retry_noscript
from anarchon_redis._client import LuaScript, text
from anarchon_redis._records import append_manual_run, claim_records, decode_result
from anarchon_redis._runtime import Runtime, Store, refuse_lease_options

__all__ = ["DedupeRuntime"]

HISTORY_SLACK = 8
"""Extra records read beyond ``limit``."""


class DedupeRuntime(Runtime):
    """What ``script`` and ``idmp`` share: keys, manual runs, trimming and history."""

    strategy_name = ""
    keep_ms = 0
    """How long a claim must stay in ``runs`` for de-duplication (ms)."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self._keys: dict[str, tuple[str, str, str, str]] = {}

    def keys(self, job: str) -> tuple[str, str, str, str]:
        """``(runs, manual, results, trimmed)`` of ``job``."""
        keys = self._keys.get(job)
        if keys is None:
            base = self.store.prefix + job
            keys = (f"{base}:runs", f"{base}:manual", f"{base}:results", f"{base}:trimmed")
            self._keys[job] = keys
        return keys

    def check_job(self, limits: JobLimits) -> None:
        """Refuse lease options: this strategy has no leases (the scheduler checks this too)."""
        refuse_lease_options(limits, self.strategy_name)

    def key_types(self, job: str) -> dict[str, str]:
        """The job's keys and their Redis types."""
        runs, manual, results, trimmed = self.keys(job)
        return {runs: "stream", manual: "stream", results: "zset", trimmed: "string"}

    async def evalsha(self, script: LuaScript, key: str, *args: Any) -> Any:
        """Run one of the strategy's scripts on one key."""
        conn = await self.ready()
        return await conn.evalsha(script, (key,), args)

    @abc.abstractmethod
    def claim_call(self, input: ClaimInput) -> tuple[LuaScript, Any]:
        """The claim script and its ARGV for ``input`` (KEYS: the job's ``runs``)."""

    async def claim_many(self, inputs: Sequence[ClaimInput]) -> list[bool]:
        """The claim script once per input, all in one pipeline; answers in request order."""
        if not inputs:
            return []
        conn = await self.ready()
        script = self.claim_call(inputs[0])[0]
        calls = [((self.keys(i.job)[0],), self.claim_call(i)[1]) for i in inputs]
        return [int(r) == 1 for r in await conn.evalsha_many(script, calls)]

    async def record_manual_run(self, input: ClaimInput) -> int | None:
        """Append the manual run to the job's ``manual`` stream (no de-duplication)."""
        await append_manual_run(await self.ready(), self.keys(input.job)[1], input)
        return None

    async def save_results(self, writes: Sequence[ResultWrite]) -> None:
        """Store the results, then trim each job's history once (about ``history_size`` runs, and the TTL).

        Claims the window still needs stay in ``runs``; history hides them
        (``trimmed``). Results below the cut are dropped with them. Three
        pipelined round trips at most, whatever the number of writes.
        """
        if not writes:
            return
        conn = await self.ready()
        by_job = group_by_job(writes)
        adds = [
            ("ZADD", self.keys(w.job)[2], int(w.result.slot), result_json(w.result)) for w in writes
        ]
        trims: list[tuple[Any, ...]] = []
        for job, last in by_job.items():
            runs, manual, _results, _trimmed = self.keys(job)
            size = kept_runs(last.history_size)
            ttl = "" if last.history_ttl_ms is None else int(last.history_ttl_ms)
            trims.append(("EVALSHA", _lua.TRIM_DEDUPE.sha, 1, runs, size, ttl, int(self.keep_ms)))
            trims.append(("EVALSHA", _lua.TRIM_STREAM.sha, 1, manual, size, ttl, 0, "slot"))
        replies = await conn.pipeline([*adds, *trims])
        for command, reply in zip(adds, replies, strict=False):
            conn.check(reply, (command[1],))
        trimmed = await retry_noscript(
            conn, (_lua.TRIM_DEDUPE, _lua.TRIM_STREAM), trims, replies[len(adds) :]
        )
        cuts = [
            (job, int(text(trimmed[2 * n])))
            for n, job in enumerate(by_job)
            if trimmed[2 * n] is not None and text(trimmed[2 * n])
        ]
        if not cuts:
            return
        horizons = await conn.evalsha_many(
            _lua.SET_MAX, [((self.keys(job)[3],), (cut,)) for job, cut in cuts]
        )
        removes = [
            ("ZREMRANGEBYSCORE", self.keys(job)[2], "-inf", f"({self._horizon(job, cut, horizon)}")
            for (job, cut), horizon in zip(cuts, horizons, strict=True)
        ]
        for remove, reply in zip(removes, await conn.pipeline(removes), strict=True):
            conn.check(reply, (remove[1],))

    def _horizon(self, job: str, cut: int, horizon: Any) -> int:
        """The stored horizon ``SET_MAX`` answered; the cut if it is not a number we wrote."""
        key = self.keys(job)[3]
        what = "the slot below which history is trimmed"
        found = skip_unreadable(key, what, lambda: stored_int(text(horizon)))
        return cut if found is None else found

    async def history(self, job: str, limit: int) -> list[RunRecord]:
        """Recent runs of ``job`` (scheduled and manual), newest first."""
        if limit <= 0:
            return []
        runs, manual, results, trimmed = self.keys(job)
        fetch = int(limit) + HISTORY_SLACK
        conn = await self.ready()
        replies = await conn.pipeline(
            [
                ("XREVRANGE", runs, "+", "-", "COUNT", fetch),
                ("XREVRANGE", manual, "+", "-", "COUNT", fetch),
                ("ZREVRANGE", results, 0, fetch - 1),
                ("GET", trimmed),
            ]
        )
        for key, reply in zip((runs, manual, results, trimmed), replies, strict=True):
            conn.check(reply, (key,))
        scheduled, manual_entries, members, horizon_raw = replies
        horizon: int | None = None
        if horizon_raw is not None:  # unreadable: reported, and nothing hidden by it
            horizon = skip_unreadable(
                trimmed,
                "the slot below which history is trimmed",
                lambda: stored_int(text(horizon_raw)),
            )
        claims = claim_records(job, scheduled, key=runs, manual=False)
        claims += claim_records(job, manual_entries, key=manual, manual=True)
        stored = [r for r in (decode_result(results, m) for m in members) if r is not None]
        if horizon is not None:
            claims = [c for c in claims if c.slot >= horizon]
            stored = [r for r in stored if r.slot >= horizon]
        claims = [c for c in claims if c.slot >= 0]
        return build_history(job, claims, stored, limit)
