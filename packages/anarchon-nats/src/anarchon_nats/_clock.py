"""The NATS store clock: the timestamp JetStream puts on every stored message.

The backend publishes an empty message to ``<prefix>_clock`` and reads the
stored message back by sequence (``STREAM.MSG.GET``, answered by the stream
leader). Its ``time`` is the leader's clock when it stored the message: the
same clock that ages the duplicate window. See docs/backends/nats.md, "The clock".
"""

from __future__ import annotations

import calendar
import re

__all__ = ["CLOCK_TOKEN", "parse_stamp_ms"]

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
