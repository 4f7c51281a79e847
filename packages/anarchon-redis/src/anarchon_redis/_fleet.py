"""The fleet registry and fleet-wide controls in Redis (docs/backends/redis.md, "Keys").

The same two keys for every strategy, each a plain hash (one key per command,
so a cluster needs no hash tag):

- ``<prefix>fleet``: field ``<job>\\n<instance_id>`` → JSON ``{"f": fingerprint,
  "s": schedule, "seen": ms, "exp": ms}`` (server clock). Expired fields are
  ignored on read and removed by the next ``declare``.
- ``<prefix>controls``: field ``<job>`` → JSON ``{"p": 0|1, "u": skip_until,
  "at": updated_at, "by": updated_by, "pa": paused_at, "ra": resumed_at}``
  (``pa``/``ra`` may be missing: a control stored before they existed).

A key of another type raises ``ForeignDataError`` naming the key (the
store-format guard). A field that is not such JSON is skipped and reported
once, by key and field (:mod:`anarchon.backend.foreign`): the readable
entries are returned as usual.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import partial
from typing import Any

from anarchon.backend.foreign import entry_name, skip_unreadable, stored_int
from anarchon.fleet.types import Declaration, JobControl

from anarchon_redis._client import Connection, text

__all__ = ["control_of", "controls", "declarations", "declare", "hash_pairs", "set_control"]

_SEP = "\n"


def hash_pairs(reply: Any) -> list[tuple[str, str]]:
    """An ``HGETALL`` reply (a dict, or a flat list under RESP2 and in scripts) as (field, value)."""
    if isinstance(reply, dict):
        return [(text(k), text(v)) for k, v in reply.items()]
    items = list(reply or [])
    return [(text(items[i]), text(items[i + 1])) for i in range(0, len(items) - 1, 2)]


def _declaration(field: str, raw: str) -> Declaration:
    job, sep, instance = field.partition(_SEP)
    if not sep:
        raise ValueError("the field is not <job>\\n<instance>")
    value = json.loads(raw)
    return Declaration(
        job,
        instance,
        str(value["f"]),
        str(value["s"]),
        stored_int(value["seen"]),
        stored_int(value["exp"]),
    )


def _entries(key: str, reply: Any, now: int) -> tuple[list[Declaration], list[str]]:
    live: list[Declaration] = []
    expired: list[str] = []
    for field, raw in hash_pairs(reply):
        entry = skip_unreadable(
            entry_name(key, field), "a declaration", partial(_declaration, field, raw)
        )
        if entry is None:  # not ours: left as it is
            continue
        if entry.expires_at > now:
            live.append(entry)
        else:
            expired.append(field)
    return live, expired


async def declare(
    conn: Connection, prefix: str, where: str, items: Sequence[Declaration], ttl_ms: int
) -> None:
    """HSET every declaration (server time), then HDEL the expired fields."""
    key = prefix + "fleet"
    now = await conn.time_ms()
    if items:
        args: list[Any] = []
        for d in items:
            value = {"f": d.fingerprint, "s": d.schedule, "seen": now, "exp": now + ttl_ms}
            args += [d.job + _SEP + d.instance_id, json.dumps(value, separators=(",", ":"))]
        await conn.execute("HSET", key, *args)
    _, expired = _entries(key, await conn.execute("HGETALL", key), now)
    if expired:
        await conn.execute("HDEL", key, *expired)


async def declarations(
    conn: Connection, prefix: str, where: str, job: str | None
) -> list[Declaration]:
    """Every unexpired declaration (of ``job``, or all)."""
    key = prefix + "fleet"
    now = await conn.time_ms()
    live, _ = _entries(key, await conn.execute("HGETALL", key), now)
    return [d for d in live if job is None or d.job == job]


async def set_control(conn: Connection, prefix: str, control: JobControl) -> None:
    """HSET the job's control, stamped with server time."""
    value = {
        "p": 1 if control.paused else 0,
        "u": control.skip_until,
        "at": await conn.time_ms(),
        "by": control.updated_by,
        "pa": control.paused_at,
        "ra": control.resumed_at,
    }
    await conn.execute(
        "HSET", prefix + "controls", control.job, json.dumps(value, separators=(",", ":"))
    )


async def controls(conn: Connection, prefix: str, where: str) -> dict[str, JobControl]:
    """Every job's readable control (an unreadable field is skipped and reported once)."""
    key = prefix + "controls"
    found: dict[str, JobControl] = {}
    for job, raw in hash_pairs(await conn.execute("HGETALL", key)):
        control = skip_unreadable(
            entry_name(key, job), "a job's control", partial(control_of, job, raw)
        )
        if control is not None:
            found[job] = control
    return found


def _ms(value: Any) -> int | None:
    return None if value is None else stored_int(value)


def control_of(job: str, raw: str) -> JobControl:
    """One field of ``<prefix>controls`` as a :class:`JobControl` (parse errors raise)."""
    value = json.loads(raw)
    by = value["by"]
    paused = value["p"]
    if paused not in (0, 1) or isinstance(paused, float):
        raise ValueError(f"p is not 0 or 1: {paused!r}")
    return JobControl(
        job,
        bool(paused),
        _ms(value["u"]),
        _ms(value["at"]),
        None if by is None else str(by),
        paused_at=_ms(value.get("pa")),
        resumed_at=_ms(value.get("ra")),
    )
