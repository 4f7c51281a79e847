"""How claims and results are stored, and read back for history (internal).

Claims are stream entries (``slot``, ``token``, ``instance``, ...; the
``stream-id`` strategy keeps the slot in the entry ID), results JSON members of
a sorted set scored by slot; history keeps about ``history_size`` runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

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
