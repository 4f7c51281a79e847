"""What every strategy implements for the backend (internal)."""

from __future__ import annotations

import abc
import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from anarchon.backend import RunStore
from anarchon.errors import UnsupportedError
from anarchon.types import ClaimInput, ClaimRecord, JobLimits, RunRecord, StoredResult

from anarchon_redis._client import Connection, LuaScript, text

if TYPE_CHECKING:
    from anarchon_redis.backend import RedisBackendBase

__all__ = [
    "Runtime",
    "append_manual_run",
    "decode_result",
    "encode_result",
    "refuse_lease_options",
    "stream_fields",
]


def refuse_lease_options(limits: JobLimits, strategy: str) -> None:
    """Raise ``UnsupportedError`` if the job asks for leases (a claim-only strategy has none)."""
    given = limits.lease_options_given()
    if given:
        raise UnsupportedError(
            f"job {limits.job!r}: option(s) {', '.join(given)} need leases; the"
            f" {strategy} strategy has none (use strategy=lease)"
        )


class Runtime(abc.ABC):
    """One strategy bound to one backend: the backend delegates its store calls here."""

    scripts: tuple[LuaScript, ...] = ()
    """Scripts loaded at ``init()``."""
    runs: RunStore | None = None
    """The lease store, for strategies with leases."""

    def __init__(self, backend: RedisBackendBase) -> None:
        self.backend = backend

    async def ready(self) -> Connection:
        """The backend's connection (``init()`` first if needed)."""
        return self.backend._conn or await self.backend._ready()

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


def encode_result(result: StoredResult) -> str:
    """A result as stored in the ``results`` sorted set (JSON, the same keys as the Lua side)."""
    return json.dumps(
        {
            "slot": int(result.slot),
            "token": result.token,
            "instance_id": result.instance_id,
            "status": result.status,
            "started_at": result.started_at,
            "finished_at": result.finished_at,
            "error": result.error,
            "attempt": int(result.attempt),
            "manual": bool(result.manual),
            "reason": getattr(result, "reason", None),
        },
        separators=(",", ":"),
        sort_keys=True,
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
