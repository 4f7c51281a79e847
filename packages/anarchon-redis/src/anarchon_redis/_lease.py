"""The ``lease`` strategy: the claim tree of docs/leases.md in one Lua script, with the server's clock.

Keys of a job (one hash tag, so Redis Cluster keeps them on one node):

==========================  ==========  ===============================================
``{<prefix><job>}:state``    hash        per run (field = slot): attempt, token, status,
                                         runner, lease expiry, start (JSON); ``~act``
                                         lists the runs not ended yet
``{<prefix><job>}:runs``     stream      one entry per attempt and per manual run
``{<prefix><job>}:results``  sorted set  one result per attempt (JSON, scored by slot)
==========================  ==========  ===============================================

Releases up to 0.1.0 also kept ``:active`` (a set) and ``:slots`` (a sorted
set); ``prepare_job`` folds ``:active`` into ``~act`` and drops both.

Every step is one script that takes a batch (claims, heartbeats, finishes,
results): a single call is a batch of one, so a batch answers exactly what its
items answer one by one. See :func:`anarchon_redis._runtime.run_batched` for
how a batch is split into calls (one node, or per job on a cluster).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from typing import Any

from anarchon.backend import RunStore, StateRetention, kept_runs
from anarchon.backend.foreign import entry_name, skip_unreadable, stored_data, stored_int
from anarchon.backend.history import build_history
from anarchon.backend.result_json import result_json
from anarchon.errors import BackendError, DedupeWindowError, ForeignDataError
from anarchon.types import (
    PLAIN_CLAIM_LEASE_MS,
    ActiveRun,
    ClaimInput,
    ClaimOutcome,
    ClaimRecord,
    JobLimits,
    LeaseState,
    ResultWrite,
    RunClaim,
    RunFinish,
    RunKey,
    RunRecord,
    RunRetry,
    StoredResult,
    lease_state_of,
)

from anarchon_redis import _lua
from anarchon_redis._batch import run_batched, run_confirmed
from anarchon_redis._client import text
from anarchon_redis._durability import Durability, not_confirmed, run_waited
from anarchon_redis._records import append_manual_run, claim_records, decode_result
from anarchon_redis._runtime import Runtime, Store
from anarchon_redis.strategies import Lease

__all__ = [
    "FINISHED_MEMORY",
    "PLAIN_CLAIM_LEASE_MS",
    "LeaseRuntime",
    "RedisRunStore",
]


log = logging.getLogger("anarchon.redis")

FINISHED_MEMORY = 100_000
"""Runs ended by ``finish`` remembered until their result is saved (the oldest are forgotten)."""

HISTORY_SLACK = 16
"""Extra records read beyond ``2 * limit`` (claims are stored in claim order, not slot order)."""


def _claim_outcome(reply: Any, claim: RunClaim) -> ClaimOutcome:
    """The claim script's answer to ``claim``."""
    if type(reply) is int:  # the common answer, won as attempt 1: only the lease's end
        return ClaimOutcome("won", 1, claim.instance_id, reply)
    return _outcome(reply)


def _outcome(reply: Any) -> ClaimOutcome:
    kind = text(reply[0])
    if kind in ("late", "none", "early"):
        return ClaimOutcome(kind)
    return ClaimOutcome(kind, int(reply[1]), text(reply[2]), int(reply[3]))


def _uncertain(outcome: ClaimOutcome) -> ClaimOutcome:
    """A won claim whose replication was not confirmed (docs/backends/redis.md, "Durability")."""
    if not outcome.won:
        return outcome
    return ClaimOutcome("uncertain", outcome.attempt, outcome.runner, outcome.lease_expires_at)


def _healed(finishes: Sequence[RunFinish], replies: Sequence[Any], where: str) -> None:
    """Log each finish that found no state (answer 2) and wrote a finished one."""
    for f, reply in zip(finishes, replies, strict=True):
        if int(reply) == 2:
            log.warning(
                "anarchon: %s: job %r slot %s: no state for the run; a failover lost its claim;"
                " finished record written (status %s)",
                where,
                f.job,
                f.slot,
                f.status,
            )


class LeaseRuntime(Runtime):
    """The ``lease`` strategy for one store."""

    scripts = _lua.LEASE_SCRIPTS

    def __init__(self, store: Store, settings: Lease) -> None:
        super().__init__(store)
        self.settings = settings
        self.runs: RedisRunStore = RedisRunStore(self)
        self._keys: dict[str, tuple[str, str, str]] = {}
        self._keep = StateRetention()
        self._finished: dict[tuple[str, int, str], None] = {}

    # Keys -------------------------------------------------------------------

    @property
    def durability(self) -> Durability:
        """The store's durability setting (``fast`` unless the backend was given another)."""
        found = getattr(self.store, "durability", None)
        return found if isinstance(found, Durability) else Durability()

    def keys(self, job: str) -> tuple[str, str, str]:
        """``(state, runs, results)`` of ``job``: the claim and save scripts' KEYS per item."""
        keys = self._keys.get(job)
        if keys is None:
            tag = "{" + self.store.prefix + job + "}"
            keys = (f"{tag}:state", f"{tag}:runs", f"{tag}:results")
            self._keys[job] = keys
        return keys

    def legacy_keys(self, job: str) -> tuple[str, str]:
        """``(active, slots)`` of ``job``: kept by earlier releases, folded in by ``prepare_job``."""
        tag = "{" + self.store.prefix + job + "}"
        return (f"{tag}:active", f"{tag}:slots")

    def key_types(self, job: str) -> dict[str, str]:
        """The job's keys (and the legacy ones, should they exist) and their Redis types."""
        state, runs, results = self.keys(job)
        active, slots = self.legacy_keys(job)
        return {state: "hash", runs: "stream", results: "zset", active: "set", slots: "zset"}

    def keep_ms(self, job: str) -> int:
        """How long finished run state of ``job`` is kept (what this instance knows it needs)."""
        keep = self._keep.get(job)
        return self.settings.window_ms if keep is None else keep

    def claim_args(self, claim: RunClaim) -> tuple[Any, ...]:
        """One claim's own ARGV for the claim script (its settings go in :meth:`claim_profile`)."""
        deadline = claim.deadline_ms
        return (int(claim.slot), claim.token, "" if deadline is None else int(deadline))

    def claim_profile(self, claim: RunClaim) -> tuple[Any, ...]:
        """The settings a claim shares with others of its call (sent once per call)."""
        ttl = claim.history_ttl_ms
        return (
            claim.instance_id,
            int(claim.lease_ms),
            int(claim.max_attempts),
            1 if claim.overlap else 0,
            1 if claim.create else 0,
            kept_runs(claim.history_size),
            self.keep_ms(claim.job),
            "" if ttl is None else int(ttl),
            "" if claim.early_ms is None else int(claim.early_ms),
            1 if claim.overlap_wait else 0,
        )

    def finished(self, runs: Sequence[tuple[str, int, str]]) -> None:
        """Remember runs ``finish`` ended (job, slot, token): their results need no state check."""
        seen = self._finished
        for run in runs:
            seen[run] = None
        while len(seen) > FINISHED_MEMORY:
            del seen[next(iter(seen))]

    def result_kind(self, job: str, result: StoredResult) -> int:
        """0: a scheduled run (its state may need marking finished), 1: manual, 2: finished here."""
        if result.manual:
            return 1
        return 2 if self._finished.pop((job, int(result.slot), result.token), 0) is None else 0

    # Runtime ------------------------------------------------------------------

    def check_job(self, limits: JobLimits) -> None:
        """Refuse a catch-up window the lease window cannot cover; learn how long to keep state.

        Run state is kept ``max(max_late, catch_up) + jitter`` plus a minute
        (never while the run is in progress), and at least the newest
        ``history_size`` runs.
        """
        catch_up = limits.catch_up_ms or 0
        window = self.settings.window_ms
        if catch_up + limits.jitter_ms >= window:
            raise DedupeWindowError(
                f"job {limits.job!r}: catch_up ({catch_up} ms) + jitter ({limits.jitter_ms} ms)"
                f" must be below the lease strategy's window_ms ({window} ms)"
            )
        self._keep.learn(limits)

    async def prepare_job(self, job: str, history_size: int) -> None:
        """Record (in the store) how long this instance needs the job's run state kept.

        A job stored by an earlier release (``:active`` and ``:slots`` keys) is
        upgraded in the same script (docs/backends/redis.md, "Upgrading from anarchon-redis 0.1.0").
        """
        keep = self._keep.get(job)
        conn = await self.ready()
        await conn.evalsha(
            _lua.LEASE_PREPARE,
            (self.keys(job)[0], *self.legacy_keys(job)),
            ("" if keep is None else keep,),
        )

    async def claim_many(self, inputs: Sequence[ClaimInput]) -> list[bool]:
        """Lease claims with ``create=True``, no overlap check, one attempt, mapped to bools.

        The claim script also writes the history record.
        """
        claims = [RunClaim.plain(i) for i in inputs]
        outcomes, why = await self.runs.raw_claims_confirmed(claims)
        if why is not None:  # not confirmed on the replicas: fail closed, as for an uncertain claim
            return [False] * len(claims)
        return [type(r) is int or text(r[0]) == "won" or int(r[4]) == 1 for r in outcomes]

    async def record_manual_run(self, input: ClaimInput) -> int | None:
        """Append a manual claim record to the job's ``runs`` stream (no de-duplication)."""
        runs = self.keys(input.job)[1]
        await append_manual_run(await self.ready(), runs, input, attempt=True)
        return None

    async def save_results(self, writes: Sequence[ResultWrite]) -> None:
        """Store the results and trim history; a plain claim's run state is marked finished too."""
        if not writes:
            return
        conn = await self.ready()

        def args(i: int) -> tuple[Any, ...]:
            w = writes[i]
            r = w.result
            return (int(r.slot), r.token, result_json(r), r.status, self.result_kind(w.job, r))

        def profile(i: int) -> tuple[Any, ...]:
            w = writes[i]
            ttl = w.history_ttl_ms
            return (
                kept_runs(w.history_size),
                "" if ttl is None else int(ttl),
                self.keep_ms(w.job),
            )

        await run_batched(
            conn,
            _lua.LEASE_SAVE,
            [w.job for w in writes],
            lambda i: self.keys(writes[i].job),
            args,
            profile=profile,
        )

    async def history(self, job: str, limit: int) -> list[RunRecord]:
        """Recent runs of ``job`` (one record per attempt), newest first.

        Runs in progress come from their run state (``~act`` lists them: the
        state is the claim record), ended ones from their results; manual runs
        and the claims earlier releases wrote come from the ``runs`` stream.
        """
        if limit <= 0:
            return []
        state, runs, results = self.keys(job)
        fetch = 2 * int(limit) + HISTORY_SLACK
        conn = await self.ready()
        entries, members, act = await conn.pipeline(
            [
                ("XREVRANGE", runs, "+", "-", "COUNT", fetch),
                ("ZREVRANGE", results, 0, fetch - 1),
                ("HGET", state, "~act"),
            ]
        )
        conn.check(entries, (runs,))
        conn.check(members, (results,))
        claims = claim_records(job, entries, key=runs, manual=False)
        slots = _act_slots(state, conn.check(act, (state,)))
        if slots:
            raw = conn.check(await conn.execute("HMGET", state, *slots), (state,))
            known = {c.token for c in claims}
            for slot, value in zip(slots, raw, strict=True):
                claim = _running_claim(job, state, slot, value)
                if claim is not None and claim.token not in known:
                    claims.append(claim)
        stored = [r for r in (decode_result(results, m) for m in members) if r is not None]
        return build_history(job, claims, stored, limit)


_SLOT = re.compile(r"-?[0-9]{1,16}")
"""A slot as the scripts write it in ``~act`` (what ``whole()`` in ``lua/lib/prelude.lua`` takes)."""

_STATE_TYPES: dict[str, type] = {
    "a": int,
    "t": str,
    "s": str,
    "r": str,
    "l": int,
    "b": int,
    "m": int,
    "x": int,
}
"""The run state's fields and their JSON types (``STATE_TYPES`` in ``lua/lib/state.lua``)."""


def _act_slots(state: str, raw: Any) -> list[str]:
    """The slots ``~act`` lists; one that is not a list of slots is reported once and read as empty."""
    act = "" if raw is None else text(raw)
    if not act:
        return []

    def parse() -> list[str]:
        slots = act.split(",")
        if not all(_SLOT.fullmatch(s) for s in slots):
            raise ValueError(f"not a list of slots: {act[:40]!r}")
        return slots

    return skip_unreadable(entry_name(state, "~act"), "the runs in progress", parse) or []


def _run_state(raw: Any) -> dict[str, Any]:
    """A run state's JSON as the scripts write it; anything else raises ``ValueError``/``TypeError``.

    Parse it inside :func:`~anarchon.backend.foreign.stored_data` (or
    ``skip_unreadable``), which names the key and field.
    """
    state = json.loads(raw)
    if not isinstance(state, dict):
        raise TypeError("run state is not a JSON object")
    for name, kind in _STATE_TYPES.items():
        value = state.get(name)
        if kind is int:
            stored_int(value)  # refuses 1e400, 1.5, true
        elif not isinstance(value, kind):
            raise TypeError(f"run state has no {kind.__name__} {name!r}")
    return state


def _running_claim(job: str, key: str, slot: str, value: Any) -> ClaimRecord | None:
    """The claim record of a run in progress, from its run state (None if it ended).

    A state that is not ours is skipped and reported once, by key and field.
    """
    if value is None:
        return None

    def parse() -> ClaimRecord | None:
        state = _run_state(value)
        if state["s"] != "running":
            return None
        return ClaimRecord(
            job=job,
            slot=stored_int(slot),
            token=state["t"],
            instance_id=state["r"],
            at=stored_int(state["b"]),
            attempt=stored_int(state["a"]),
        )

    return skip_unreadable(entry_name(key, slot), "a run's state", parse)


_LUA_DECODE = "Expected "
"""How cjson's decode errors begin (``Expected value but found invalid token``...)."""


class RedisRunStore(RunStore):
    """Leases on Redis/Valkey: every method is one Lua script, timed with the server's ``TIME``.

    The batch members send one script call per chunk of items (one node), or
    per job (a cluster), pipelined in one round trip.
    """

    def __init__(self, runtime: LeaseRuntime) -> None:
        self._rt = runtime

    async def raw_claims(self, claims: Sequence[RunClaim]) -> list[Any]:
        """The claim script's reply for each claim, in request order."""
        return (await self.raw_claims_confirmed(claims))[0]

    async def raw_claims_confirmed(
        self, claims: Sequence[RunClaim]
    ) -> tuple[list[Any], str | None]:
        """The claim script's replies, and why they are not confirmed on the replicas (or None)."""
        rt = self._rt
        conn = await rt.ready()
        return await run_confirmed(
            conn,
            rt.durability,
            _lua.LEASE_CLAIM,
            [c.job for c in claims],
            lambda i: rt.keys(claims[i].job),
            lambda i: rt.claim_args(claims[i]),
            profile=lambda i: rt.claim_profile(claims[i]),
        )

    async def claim(self, claim: RunClaim) -> ClaimOutcome:
        """Walk the claim tree of docs/leases.md in one script and return its outcome.

        With ``durability="replicated"``, a won claim whose ``WAIT`` answered
        fewer replicas than asked is ``uncertain`` (the lease is held for the token).
        """
        return (await self.claim_many((claim,)))[0]

    async def claim_many(self, claims: Sequence[RunClaim]) -> list[ClaimOutcome]:
        """:meth:`claim` for each item, in a few script calls; answers in request order."""
        replies, why = await self.raw_claims_confirmed(claims)
        outcomes = [_claim_outcome(r, c) for r, c in zip(replies, claims, strict=True)]
        if why is None:
            return outcomes
        log.debug("anarchon: %s: claims not confirmed: %s", self._rt.store.describe(), why)
        return [_uncertain(o) for o in outcomes]

    async def heartbeat(self, job: str, slot: int, token: str, lease_ms: int) -> bool:
        """Extend the lease to server time + ``lease_ms`` if ``token`` still owns the run."""
        return (await self.heartbeat_many((RunKey(job, slot, token),), lease_ms))[0]

    async def heartbeat_many(self, runs: Sequence[RunKey], lease_ms: int) -> list[bool]:
        """:meth:`heartbeat` for each run, in a few script calls; answers in request order."""
        rt = self._rt
        conn = await rt.ready()
        replies, why = await run_confirmed(
            conn,
            rt.durability,
            _lua.LEASE_HEARTBEAT,
            [r.job for r in runs],
            lambda i: rt.keys(runs[i].job)[:1],
            lambda i: (int(runs[i].slot), runs[i].token),
            shared=(int(lease_ms),),
        )
        answers = [int(r) == 1 for r in replies]
        if why is not None and any(answers):
            # Not "refused" (False): the store did extend the lease, but a failover may lose the
            # extension. Transient, so the scheduler does not extend its local lease and renews again.
            raise not_confirmed(rt.store.describe(), "lease renewal", why)
        return answers

    async def finish(
        self, job: str, slot: int, token: str, status: str, error: str | None = None
    ) -> bool:
        """Mark the run finished if ``token`` owns it (run state only; a retry is answered True).

        The scheduler stores the result with ``save_result`` afterwards.
        """
        return (await self.finish_many((RunFinish(job, slot, token, status, error),)))[0]

    async def finish_many(self, finishes: Sequence[RunFinish]) -> list[bool]:
        """:meth:`finish` for each item, in a few script calls; answers in request order."""
        rt = self._rt
        conn = await rt.ready()
        replies, why = await run_confirmed(
            conn,
            rt.durability,
            _lua.LEASE_FINISH,
            [f.job for f in finishes],
            lambda i: rt.keys(finishes[i].job)[:1],
            lambda i: (int(finishes[i].slot), finishes[i].token, finishes[i].status),
        )
        _healed(finishes, replies, rt.store.describe())
        answers = [int(r) != 0 for r in replies]
        if why is not None and any(answers):
            raise not_confirmed(rt.store.describe(), "finish", why)
        rt.finished(
            [(f.job, int(f.slot), f.token) for f, ok in zip(finishes, answers, strict=True) if ok]
        )
        return answers

    async def finish_and_save_many(
        self, finishes: Sequence[RunFinish], writes: Sequence[ResultWrite]
    ) -> list[bool]:
        """Finish each run and store its result if it finished, one script per chunk."""
        rt = self._rt
        conn = await rt.ready()

        def keys(i: int) -> tuple[str, ...]:
            state, _runs, results = rt.keys(finishes[i].job)
            return (state, results)

        def args(i: int) -> tuple[Any, ...]:
            f = finishes[i]
            return (int(f.slot), f.token, f.status, result_json(writes[i].result))

        replies, why = await run_confirmed(
            conn, rt.durability, _lua.LEASE_FINISH_SAVE, [f.job for f in finishes], keys, args
        )
        _healed(finishes, replies, rt.store.describe())
        answers = [int(r) != 0 for r in replies]
        if why is not None and any(answers):
            raise not_confirmed(rt.store.describe(), "finish", why)
        return answers

    async def release(self, job: str, slot: int, token: str) -> bool:
        """End ``token``'s lease now (hand-over); on the last attempt mark the run interrupted.

        The released attempt is recorded ``interrupted`` (reason ``handed_over``).
        A batch of one (:meth:`release_many`): one script call, as before.
        """
        return (await self.release_many((RunKey(job, slot, token),)))[0]

    async def release_many(self, runs: Sequence[RunKey]) -> list[bool]:
        """``release()`` for each run: one ``release-many`` script call per chunk (per node)."""
        rt = self._rt
        conn = await rt.ready()

        def keys(i: int) -> tuple[str, str]:
            state, _runs, results = rt.keys(runs[i].job)
            return (state, results)

        def args(i: int) -> tuple[Any, ...]:
            return (int(runs[i].slot), runs[i].token)

        replies = await run_batched(
            conn, _lua.LEASE_RELEASE_MANY, [r.job for r in runs], keys, args
        )
        return [int(r) == 1 for r in replies]

    native_retry = True
    overlap_wait = True

    async def retry(self, retry: RunRetry) -> ClaimOutcome:
        """End a failed attempt and start the next under the same runner, in one script."""
        rt = self._rt
        state, runs, _results = rt.keys(retry.job)
        conn = await rt.ready()
        keys = (state, runs)
        args = (
            int(retry.slot),
            retry.token,
            retry.new_token,
            retry.instance_id,
            int(retry.lease_ms),
            int(retry.max_attempts),
        )
        durability = rt.durability
        if not durability.replicated:
            return _outcome(await conn.evalsha(_lua.LEASE_RETRY, keys, args))
        replies, why = await run_waited(conn, durability, _lua.LEASE_RETRY, [(keys, args)])
        outcome = _outcome(replies[0])
        return outcome if why is None else _uncertain(outcome)

    async def now_ms(self) -> int:
        """The server clock (``TIME``) in ms."""
        return await (await self._rt.ready()).time_ms()

    async def lease_state(self, job: str, slot: int, token: str) -> LeaseState:
        """Why ``token`` does or does not hold the lease of ``(job, slot)`` (one ``HGET``)."""
        rt = self._rt
        conn = await rt.ready()
        raw = await conn.execute("HGET", rt.keys(job)[0], str(int(slot)))
        if raw is None:
            return lease_state_of(token, None, False, False)
        with stored_data(entry_name(rt.keys(job)[0], str(int(slot))), "a run's state"):
            state = _run_state(raw)
            return lease_state_of(token, state["t"], state["s"] == "running", bool(state["x"]))

    async def active(self, job: str) -> list[ActiveRun]:
        """Unfinished runs of ``job``, oldest slot first, and whether each lease is live."""
        rt = self._rt
        conn = await rt.ready()
        keys = (rt.keys(job)[0], rt.legacy_keys(job)[0])
        try:
            reply = list(await conn.evalsha(_lua.LEASE_ACTIVE, keys, ()))
        except BackendError as error:
            if _LUA_DECODE not in str(error):
                raise
            raise ForeignDataError(
                f"{keys[0]} holds a run state that is not JSON anarchon wrote ({error.message});"
                " another application may write there: use another prefix, or remove the key",
                key=keys[0],
            ) from None
        now = int(reply[0])
        runs = []
        for i in range(1, len(reply) - 4, 5):
            lease = int(reply[i + 3])
            runs.append(
                ActiveRun(
                    slot=int(text(reply[i])),
                    attempt=int(reply[i + 1]),
                    runner=text(reply[i + 2]),
                    lease_expires_at=lease,
                    live=lease > now,
                    token=text(reply[i + 4]),
                )
            )
        runs.sort(key=lambda run: run.slot)
        return runs
