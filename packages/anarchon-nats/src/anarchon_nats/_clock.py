"""The NATS store clock: the timestamp JetStream puts on every stored message.

The backend publishes an empty message to ``<prefix>_clock`` and reads the
stored message back by sequence (``STREAM.MSG.GET``, answered by the stream
leader). Its ``time`` is the leader's clock when it stored the message: the
same clock that ages the duplicate window. See docs/backends/nats.md, "The clock".
:class:`Clock` takes the readings; :func:`parse_stamp_ms` reads a stamp.
"""

from __future__ import annotations

import calendar
import math
import re
import time

from anarchon.errors import BackendUnavailableError, ForeignDataError

from anarchon_nats._store import Store

__all__ = ["CLOCK_TOKEN", "Clock", "parse_stamp_ms"]

CLOCK_TOKEN = "_clock"
"""The subject token after the prefix that clock readings are published to."""

_STAMP = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)[Tt ](\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?(Z|z|[+-]\d\d:\d\d)\Z"
)


def parse_stamp_ms(text: str) -> float:
    """An RFC 3339 timestamp as JetStream writes it (``2026-12-01T10:16:08.456492642Z``), in ms.

    Raises ``ValueError`` for anything else.
    """
    match = _STAMP.match(text)
    if match is None:
        raise ValueError(f"not an RFC 3339 timestamp: {text[:80]!r}")
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    seconds = calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0))
    fraction = match.group(7) or "0"
    ms = seconds * 1000 + int(fraction.ljust(9, "0")) / 1_000_000
    zone = match.group(8)
    if zone not in ("Z", "z"):
        sign = 1 if zone[0] == "+" else -1
        ms -= sign * (int(zone[1:3]) * 60 + int(zone[4:6])) * 60_000
    return ms


class Clock:
    """The store clock of one backend's stream."""

    def __init__(self, store: Store) -> None:
        self._store = store

    async def now_ms(self) -> int:
        """The stamp of a clock message, plus the time its read back took (see ``now_ms``)."""
        store = self._store
        connection = store.connection
        stream = store.stream.name
        nc = await store.client()
        subject = f"{store.prefix}{CLOCK_TOKEN}"
        with connection.driver_errors("clock"):
            for _ in range(3):
                sent = await connection.publish(nc, subject, b"", "clock")
                acked = time.monotonic()
                stored = await connection.get_message(nc, {"seq": sent})
                done = time.monotonic()
                if stored is not None:
                    break
            else:
                raise BackendUnavailableError(
                    f"the clock message on {subject} of stream {stream!r} vanished"
                    " before it could be read"
                )
        if stored.subject != subject:
            raise ForeignDataError(
                f"stream {stream!r}: the clock message at sequence {sent} is on"
                f" {stored.subject!r}, not {subject!r}",
                key=subject,
            )
        try:
            stamp = parse_stamp_ms(stored.time)
        except ValueError:
            raise ForeignDataError(
                f"stream {stream!r}: the clock message at sequence {sent} on {subject!r} has an"
                f" unreadable stored time {stored.time[:80]!r}",
                key=subject,
            ) from None
        return math.floor(stamp + (done - acked) * 1000)
