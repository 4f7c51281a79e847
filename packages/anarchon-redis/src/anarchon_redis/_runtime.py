"""What every strategy implements for the backend (internal).

A runtime is one strategy bound to one store. It reaches the store only
through :class:`Store`, a small protocol the backend implements (its key
prefix, its connection, its name for messages), never through the backend's
own members, so no runtime module imports the backend.
"""

from __future__ import annotations

import abc
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from anarchon.backend import RunStore
from anarchon.batching import per_item
from anarchon.errors import UnsupportedError
from anarchon.types import (
    ClaimInput,
    ClaimRecord,
    JobLimits,
    ResultWrite,
    RunRecord,
    StoredResult,
)

from anarchon_redis._client import Connection, LuaScript, is_noscript, text

__all__ = [
    "CHUNK",
    "Runtime",
    "Store",
    "append_manual_run",
    "chunks",
    "decode_result",
    "group_by_job",
    "history_bound",
    "refuse_lease_options",
    "retry_noscript",
    "run_batched",
    "stream_fields",
]


CHUNK = 500
"""The most items one script call carries (a batch is split into calls of at most this many)."""


def chunks(one_node: bool, jobs: Sequence[str], size: int = CHUNK) -> list[list[int]]:
    """The items' indexes, per script call.

    On one node any items may share a call (in request order, ``size`` at
    most). On a cluster a script's keys must share one hash slot, so a call
    carries the items of one job only (the driver's pipeline sends each call
    to its node).
    """
    if one_node:
        return [list(range(i, min(i + size, len(jobs)))) for i in range(0, len(jobs), size)]
    by_job: dict[str, list[int]] = {}
    for i, job in enumerate(jobs):
        by_job.setdefault(job, []).append(i)
    return [
        indexes[i : i + size] for indexes in by_job.values() for i in range(0, len(indexes), size)
    ]


async def run_batched(
    conn: Connection,
    script: LuaScript,
    jobs: Sequence[str],
    keys: Callable[[int], Sequence[str]],
    args: Callable[[int], Sequence[Any]],
    shared: Sequence[Any] = (),
    profile: Callable[[int], tuple[Any, ...]] | None = None,
) -> list[Any]:
    """Run a batch script over items ``0..len(jobs)-1``; each item's reply, in request order.

    ``keys(i)`` and ``args(i)`` are item ``i``'s KEYS and ARGV; ``shared``
    goes before every call's ARGV. One pipelined round trip for all the calls.

    With ``profile``, the settings items share are sent once per call: ARGV is
    ``shared``, the number of distinct profiles, the profiles (each a tuple of
    the same length) and then each item's ``args(i)`` followed by the 1-based
    index of its profile. Fewer arguments is less server time per item.
    """
    if not jobs:
        return []
    groups = chunks(conn.one_node, jobs)
    calls: list[tuple[list[str], list[Any]]] = []
    for group in groups:
        call_keys: list[str] = []
        items: list[Any] = []
        profiles: dict[tuple[Any, ...], int] = {}
        for i in group:
            call_keys.extend(keys(i))
            items.extend(args(i))
            if profile is not None:
                items.append(profiles.setdefault(profile(i), len(profiles) + 1))
        call_args: list[Any] = list(shared)
        if profile is not None:
            call_args.append(len(profiles))
            for settings in profiles:
                call_args.extend(settings)
        call_args.extend(items)
        calls.append((call_keys, call_args))
    replies = await conn.evalsha_many(script, calls)
    answers: list[Any] = [None] * len(jobs)
    for group, reply in zip(groups, replies, strict=True):
        for i, answer in zip(group, reply, strict=True):
            answers[i] = answer
    return answers


def history_bound(history_size: int) -> int:
    """How many runs history keeps for a job's ``history_size`` (at least one): what trims use."""
    return max(int(history_size), 1)


def group_by_job(writes: Sequence[ResultWrite]) -> dict[str, ResultWrite]:
    """Each job of ``writes`` (in first-seen order) and its last write (whose settings win)."""
    last: dict[str, ResultWrite] = {}
    for w in writes:
        last[w.job] = w
    return last


async def retry_noscript(
    conn: Connection,
    scripts: Sequence[LuaScript],
    commands: Sequence[tuple[Any, ...]],
    replies: Sequence[Any],
) -> list[Any]:
    """``replies`` of pipelined ``EVALSHA`` ``commands``; those answered ``NOSCRIPT`` (they did
    not run) are sent again once the scripts are loaded. Any other error is raised."""
    out = list(replies)
    again = [n for n, r in enumerate(out) if isinstance(r, BaseException) and is_noscript(r)]
    if again:
        await conn.load_scripts(scripts)
        for n, reply in zip(again, await conn.pipeline([commands[n] for n in again]), strict=True):
            out[n] = reply
    for command, reply in zip(commands, out, strict=True):
        conn.check(reply, (str(command[3]),))
    return out


def refuse_lease_options(limits: JobLimits, strategy: str) -> None:
    """Raise ``UnsupportedError`` if the job asks for leases (a claim-only strategy has none)."""
    given = limits.lease_options_given()
    if given:
        raise UnsupportedError(
            f"job {limits.job!r}: option(s) {', '.join(given)} need leases; the"
            f" {strategy} strategy has none (use strategy=lease)"
        )


class Store(Protocol):
    """What a runtime needs of the backend it serves."""

    @property
    def prefix(self) -> str:
        """The key prefix (``cron:`` by default)."""

    async def connection(self) -> Connection:
        """The connection, opened (``init()``) first if needed."""

    def describe(self) -> str:
        """Where the store is, for messages (the password hidden)."""


class Runtime(abc.ABC):
    """One strategy bound to one store: the backend delegates its store calls here."""

    scripts: tuple[LuaScript, ...] = ()
    """Scripts loaded at ``init()``."""
    runs: RunStore | None = None
    """The lease store, for strategies with leases."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def ready(self) -> Connection:
        """The store's connection (``init()`` first if needed)."""
        return await self.store.connection()

    def key_types(self, job: str) -> dict[str, str]:
        """The keys of ``job`` and the Redis type each must have (checked by ``prepare_job``)."""
        return {}

    async def check_server(  # noqa: B027
        self, conn: Connection, server: str, version: tuple[int, ...]
    ) -> None:
        """Refuse a server this strategy cannot use (``server`` is ``redis`` or ``valkey``)."""

    def check_job(self, limits: JobLimits) -> None:  # noqa: B027
        """Refuse a job the strategy cannot run safely; learn its retention needs."""

    async def prepare_job(self, job: str, history_size: int) -> None:  # noqa: B027
        """One-time per-job set-up."""

    @abc.abstractmethod
    async def claim(self, input: ClaimInput) -> bool:
        """True for exactly one token per ``(job, slot)``; again for that token."""

    @abc.abstractmethod
    async def record_manual_run(self, input: ClaimInput) -> int | None:
        """Record a manual run (never de-duplicated)."""

    @abc.abstractmethod
    async def save_result(
        self, job: str, result: StoredResult, history_size: int, history_ttl_ms: int | None
    ) -> None:
        """Store how a run ended, and trim history."""

    @abc.abstractmethod
    async def history(self, job: str, limit: int) -> list[RunRecord]:
        """Recent runs, newest first."""

    # Batches (docs/extending.md, "Batch members"); defaults: the single calls.

    async def claim_many(self, inputs: Sequence[ClaimInput]) -> list[bool]:
        """``claim()`` for each input, answers in request order."""
        return await per_item(self.claim, inputs)

    async def save_results(self, writes: Sequence[ResultWrite]) -> None:
        """``save_result()`` for each write."""
        await per_item(
            lambda w: self.save_result(w.job, w.result, w.history_size, w.history_ttl_ms),
            writes,
        )


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def decode_result(member: Any) -> StoredResult | None:
    """A stored result back from its JSON (None if it is not one of ours)."""
    try:
        data = json.loads(text(member))
        return StoredResult(
            slot=int(data["slot"]),
            token=str(data["token"]),
            instance_id=str(data.get("instance_id") or ""),
            status=str(data["status"]),
            started_at=_opt_int(data.get("started_at")),
            finished_at=_opt_int(data.get("finished_at")),
            error=data.get("error"),
            attempt=int(data.get("attempt") or 1),
            manual=bool(data.get("manual")),
            reason=data.get("reason"),
        )
    except (ValueError, KeyError, TypeError):
        return None


def stream_fields(fields: Any) -> dict[str, str]:
    """An entry's fields as ``{str: str}`` (a dict from redis-py, or a flat list)."""
    if isinstance(fields, Mapping):
        return {text(k): text(v) for k, v in fields.items()}
    items = list(fields)
    return {text(items[i]): text(items[i + 1]) for i in range(0, len(items) - 1, 2)}


def entry_ms(entry_id: Any) -> int:
    """The millisecond part of a stream entry ID."""
    return int(text(entry_id).partition("-")[0])


def claim_records(
    job: str, entries: Iterable[Any], *, manual: bool, slot_from_id: bool = False
) -> list[ClaimRecord]:
    """Claim records from stream entries ``(id, fields)``.

    Fields: ``slot`` (unless ``slot_from_id``), ``token``, ``instance``,
    ``attempt``, ``manual``, ``at`` (else the entry ID's time).
    """
    records = []
    for entry in entries:
        entry_id, raw = entry[0], entry[1]
        fields = stream_fields(raw)
        try:
            slot = entry_ms(entry_id) if slot_from_id else int(fields["slot"])
            at = int(fields["at"]) if "at" in fields else entry_ms(entry_id)
            records.append(
                ClaimRecord(
                    job=job,
                    slot=slot,
                    token=fields["token"],
                    instance_id=fields.get("instance", ""),
                    at=at,
                    manual=manual or fields.get("manual", "0") == "1",
                    attempt=int(fields.get("attempt", "1")),
                )
            )
        except (KeyError, ValueError):
            continue
    return records


async def append_manual_run(conn: Connection, manual_key: str, input: ClaimInput) -> None:
    """Append a ``run_now()`` to a claim-only strategy's ``manual`` stream (never de-duplicated)."""
    await conn.execute(
        "XADD",
        manual_key,
        "*",
        "slot",
        int(input.slot),
        "token",
        input.token,
        "instance",
        input.instance_id,
        "manual",
        1,
    )
