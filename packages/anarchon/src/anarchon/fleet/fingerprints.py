"""What an instance declares for a job: the schedule as text and its fingerprint.

The fingerprint (docs/fleet.md, "Fleet registry") is the first 16 hex
digits of the SHA-256 of a canonical JSON object: the schedule text (below),
then the options that change what runs when, in milliseconds or as plain
values, keys sorted, no spaces. It depends on nothing but those values, so it
is equal across processes, machines and versions that agree on them.

Schedule text: ``"every <interval>ms"`` plus ``" offset <offset>ms"`` when the
offset is not zero, ``"cron <expression> <zone>"``, or ``"once <at>ms"`` for a
one-off run; :func:`parse_schedule`
reads it back.
"""

from __future__ import annotations

import hashlib
import json

from anarchon.errors import InvalidJobError
from anarchon.jobs import Job
from anarchon.schedules import Cron, Every, Once, Schedule

__all__ = ["describe_schedule", "fingerprint", "parse_schedule"]

_FINGERPRINT_OPTIONS = (
    "jitter_ms",
    "max_late_ms",
    "timeout_ms",
    "overlap",
    "max_attempts",
    "catch_up_ms",
    "enabled",
)


def describe_schedule(schedule: Schedule) -> str:
    """The schedule as the registry stores it (``"every 5000ms"``, ``"cron 0 3 * * * UTC"``)."""
    if isinstance(schedule, Every):
        offset = schedule.offset_ms % schedule.interval_ms
        text = f"every {schedule.interval_ms}ms"
        return f"{text} offset {offset}ms" if offset else text
    if isinstance(schedule, Cron):
        return f"cron {' '.join(schedule.expression.split())} {schedule.tz}"
    if isinstance(schedule, Once):
        return f"once {schedule.at_ms}ms"
    raise InvalidJobError(f"cannot describe schedule {schedule!r}")


def parse_schedule(text: str) -> Schedule:
    """The schedule that :func:`describe_schedule` wrote as ``text``."""
    kind, _, rest = text.strip().partition(" ")
    if kind == "every":
        interval, _, offset = rest.partition(" offset ")
        return Every(interval.strip(), offset.strip() or 0)
    if kind == "once" and rest.endswith("ms") and rest[:-2].isdigit():
        return Once(int(rest[:-2]))
    if kind == "cron":
        expression, _, zone = rest.strip().rpartition(" ")
        if expression:
            return Cron(expression, tz=zone)
    raise InvalidJobError(f"not a declared schedule: {text!r}")


def fingerprint(job: Job) -> str:
    """A stable hash of the job's schedule, zone and timing options (16 hex digits)."""
    values: dict[str, object] = {"schedule": describe_schedule(job.schedule)}
    for name in _FINGERPRINT_OPTIONS:
        values[name] = getattr(job, name)
    canonical = json.dumps(values, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]
