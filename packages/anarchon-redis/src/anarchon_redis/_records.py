"""How claims and results are stored, and read back for history (internal).

Claims are stream entries (``slot``, ``token``, ``instance``, ...; the
``stream-id`` strategy keeps the slot in the entry ID), results JSON members of
a sorted set scored by slot; history keeps about ``history_size`` runs.
An entry that is not one of ours is skipped and reported once, named by its
key and member or entry ID (:mod:`anarchon.backend.foreign`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from functools import partial
from typing import Any

from anarchon.backend.foreign import entry_name, skip_unreadable, stored_int
from anarchon.types import ClaimInput, ClaimRecord, StoredResult

from anarchon_redis._client import Connection, text

__all__ = [
    "append_manual_run",
    "claim_records",
    "decode_result",
    "entry_ms",
    "stream_fields",
]


def _opt_int(value: Any) -> int | None:
    return None if value is None else stored_int(value)


def _result(member: Any) -> StoredResult:
    data = json.loads(text(member))
    error, reason = data.get("error"), data.get("reason")
    return StoredResult(
        slot=stored_int(data["slot"]),
        token=str(data["token"]),
        instance_id=str(data.get("instance_id") or ""),
        status=str(data["status"]),
        started_at=_opt_int(data.get("started_at")),
        finished_at=_opt_int(data.get("finished_at")),
        error=None if error is None else str(error),
        attempt=stored_int(data.get("attempt") or 1),
        manual=bool(data.get("manual")),
        reason=None if reason is None else str(reason),
    )


def decode_result(key: str, member: Any) -> StoredResult | None:
    """A stored result back from its JSON (None, reported once, if it is not one of ours)."""
    name = entry_name(key, text(member)[:40])
    return skip_unreadable(name, "a run's result", lambda: _result(member))


def stream_fields(fields: Any) -> dict[str, str]:
    """An entry's fields as ``{str: str}`` (a dict from redis-py, or a flat list)."""
    if isinstance(fields, Mapping):
        return {text(k): text(v) for k, v in fields.items()}
    items = list(fields)
    return {text(items[i]): text(items[i + 1]) for i in range(0, len(items) - 1, 2)}


def entry_ms(entry_id: Any) -> int:
    """The millisecond part of a stream entry ID."""
    return stored_int(text(entry_id).partition("-")[0])


def claim_records(
    job: str, entries: Iterable[Any], *, key: str, manual: bool, slot_from_id: bool = False
) -> list[ClaimRecord]:
    """Claim records from the stream ``key``'s entries ``(id, fields)``.

    Fields: ``slot`` (unless ``slot_from_id``), ``token``, ``instance``,
    ``attempt``, ``manual``, ``at`` (else the entry ID's time). An entry that
    is not such a claim is skipped and reported once.
    """

    def parse(entry_id: Any, raw: Any) -> ClaimRecord:
        fields = stream_fields(raw)
        slot = entry_ms(entry_id) if slot_from_id else stored_int(fields["slot"])
        at = stored_int(fields["at"]) if "at" in fields else entry_ms(entry_id)
        return ClaimRecord(
            job=job,
            slot=slot,
            token=fields["token"],
            instance_id=fields.get("instance", ""),
            at=at,
            manual=manual or fields.get("manual", "0") == "1",
            attempt=stored_int(fields.get("attempt", "1")),
        )

    records = []
    for entry in entries:
        entry_id, raw = entry[0], entry[1]
        record = skip_unreadable(
            entry_name(key, text(entry_id)), "a claim", partial(parse, entry_id, raw)
        )
        if record is not None:
            records.append(record)
    return records


async def append_manual_run(
    conn: Connection, key: str, input: ClaimInput, *, attempt: bool = False
) -> None:
    """Append a ``run_now()`` record to a stream (never de-duplicated).

    Claim-only strategies append to the job's ``manual`` stream; the lease
    strategy to its ``runs`` stream, with ``attempt`` 1 (``attempt=True``).
    """
    await conn.execute(
        "XADD",
        key,
        "*",
        "slot",
        int(input.slot),
        "token",
        input.token,
        "instance",
        input.instance_id,
        *(("attempt", 1) if attempt else ()),
        "manual",
        1,
    )
