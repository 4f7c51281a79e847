"""The fleet registry and fleet-wide controls in Redis (docs/backends/redis.md, "Keys").

The same two keys for every strategy, each a plain hash (one key per command,
so a cluster needs no hash tag):

- ``<prefix>fleet``: field ``<job>\\n<instance_id>`` → JSON ``{"f": fingerprint,
  "s": schedule, "seen": ms, "exp": ms}`` (server clock). Expired fields are
  ignored on read and removed by the next ``declare``.
- ``<prefix>controls``: field ``<job>`` → JSON ``{"p": 0|1, "u": skip_until,
  "at": updated_at, "by": updated_by, "pa": paused_at, "ra": resumed_at}``
  (``pa``/``ra`` may be missing: a control stored before they existed).

A field that is not such JSON, or a key of another type, raises
``ForeignDataError`` naming the key (the store-format guard).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from anarchon.errors import ForeignDataError
from anarchon.fleet.types import Declaration, JobControl

from anarchon_redis._client import Connection, text

__all__ = ["control_of", "controls", "declarations", "declare", "set_control"]

_SEP = "\n"


def _pairs(reply: Any) -> list[tuple[str, str]]:
    if isinstance(reply, dict):
        return [(text(k), text(v)) for k, v in reply.items()]
    items = list(reply or [])
    return [(text(items[i]), text(items[i + 1])) for i in range(0, len(items) - 1, 2)]


def _foreign(key: str, where: str, field: str) -> ForeignDataError:
    return ForeignDataError(
        f"{where}: field {field!r} of {key!r} is not anarchon's fleet data; use another"
        " prefix or remove the key",
        key=key,
    )


def _entries(key: str, where: str, reply: Any, now: int) -> tuple[list[Declaration], list[str]]:
    live: list[Declaration] = []
    expired: list[str] = []
    for field, raw in _pairs(reply):
        job, sep, instance = field.partition(_SEP)
        try:
            value = json.loads(raw)
            entry = Declaration(
                job,
                instance,
                str(value["f"]),
                str(value["s"]),
                int(value["seen"]),
                int(value["exp"]),
            )
        except (ValueError, KeyError, TypeError):
            raise _foreign(key, where, field) from None
        if not sep:
            raise _foreign(key, where, field)
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
    _, expired = _entries(key, where, await conn.execute("HGETALL", key), now)
    if expired:
        await conn.execute("HDEL", key, *expired)


async def declarations(
    conn: Connection, prefix: str, where: str, job: str | None
) -> list[Declaration]:
    """Every unexpired declaration (of ``job``, or all)."""
    key = prefix + "fleet"
    now = await conn.time_ms()
    live, _ = _entries(key, where, await conn.execute("HGETALL", key), now)
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
    """Every job's control."""
    key = prefix + "controls"
    return {
        job: control_of(key, where, job, raw)
        for job, raw in _pairs(await conn.execute("HGETALL", key))
    }


def _ms(value: Any) -> int | None:
    return None if value is None else int(value)


def control_of(key: str, where: str, job: str, raw: str) -> JobControl:
    """One field of ``<prefix>controls`` as a :class:`JobControl` (``ForeignDataError`` if not ours)."""
    try:
        value = json.loads(raw)
        by = value["by"]
        return JobControl(
            job,
            bool(value["p"]),
            _ms(value["u"]),
            _ms(value["at"]),
            None if by is None else str(by),
            paused_at=_ms(value.get("pa")),
            resumed_at=_ms(value.get("ra")),
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        raise _foreign(key, where, job) from None
