"""The fleet registry and fleet-wide controls as subjects of the backend's stream.

Subjects (docs/backends/nats.md, "Subjects"); ``b64`` is unpadded URL-safe
base64 of the UTF-8 name, so any job or instance id is one subject token:

- ``<prefix>_fleet.d.<b64 job>.<b64 instance>``: one instance's declaration,
  JSON ``{"job", "instance", "f": fingerprint, "s": schedule, "ttl": ms}``;
  ``seen_at`` is the message's stored time (server clock), ``expires_at`` is
  ``seen_at + ttl``. Only the newest message of a subject counts; ``declare``
  purges the subjects of expired entries.
- ``<prefix>_fleet.c.<b64 job>``: a job's control, JSON ``{"job", "p": 0|1,
  "u": skip_until, "by": updated_by, "pa": paused_at, "ra": resumed_at}``;
  ``updated_at`` is the stored time (``pa``/``ra`` may be missing: a control
  stored before they existed).

Job subjects are ``<prefix><job>.claims`` (two tokens), so these (three and
four tokens under ``_fleet``) never collide with a job's. A message on them
that is not such JSON raises ``ForeignDataError`` naming the subject.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from anarchon.errors import ForeignDataError
from anarchon.fleet_types import Declaration, JobControl

__all__ = [
    "control_of",
    "control_payload",
    "control_subject",
    "declaration_of",
    "declaration_payload",
    "declaration_subject",
    "filters",
]


def _b64(name: str) -> str:
    return base64.urlsafe_b64encode(name.encode()).decode().rstrip("=")


def declaration_subject(prefix: str, job: str, instance: str) -> str:
    """The subject of one instance's declaration of ``job``."""
    return f"{prefix}_fleet.d.{_b64(job)}.{_b64(instance)}"


def control_subject(prefix: str, job: str) -> str:
    """The subject of ``job``'s control."""
    return f"{prefix}_fleet.c.{_b64(job)}"


def filters(prefix: str) -> tuple[str, str]:
    """The wildcard subjects of all declarations and of all controls."""
    return f"{prefix}_fleet.d.*.*", f"{prefix}_fleet.c.*"


def _dumps(value: dict[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def declaration_payload(d: Declaration, ttl_ms: int) -> bytes:
    """The message body of a declaration."""
    return _dumps(
        {
            "job": d.job,
            "instance": d.instance_id,
            "f": d.fingerprint,
            "s": d.schedule,
            "ttl": ttl_ms,
        }
    )


def control_payload(c: JobControl) -> bytes:
    """The message body of a control."""
    return _dumps(
        {
            "job": c.job,
            "p": 1 if c.paused else 0,
            "u": c.skip_until,
            "by": c.updated_by,
            "pa": c.paused_at,
            "ra": c.resumed_at,
        }
    )


def _foreign(stream: str, subject: str, data: bytes) -> ForeignDataError:
    return ForeignDataError(
        f"stream {stream!r}: a message on {subject!r} is not anarchon fleet data: {data[:80]!r}",
        key=subject,
    )


def declaration_of(stream: str, subject: str, data: bytes, stored_ms: int) -> Declaration:
    """A stored declaration message as a :class:`Declaration`."""
    try:
        row = json.loads(data)
        return Declaration(
            str(row["job"]),
            str(row["instance"]),
            str(row["f"]),
            str(row["s"]),
            stored_ms,
            stored_ms + int(row["ttl"]),
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        raise _foreign(stream, subject, data) from None


def control_of(stream: str, subject: str, data: bytes, stored_ms: int) -> JobControl:
    """A stored control message as a :class:`JobControl`."""
    try:
        row = json.loads(data)
        skip, by = row["u"], row["by"]
        paused_at, resumed_at = row.get("pa"), row.get("ra")
        return JobControl(
            str(row["job"]),
            bool(row["p"]),
            None if skip is None else int(skip),
            stored_ms,
            None if by is None else str(by),
            paused_at=None if paused_at is None else int(paused_at),
            resumed_at=None if resumed_at is None else int(resumed_at),
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        raise _foreign(stream, subject, data) from None
