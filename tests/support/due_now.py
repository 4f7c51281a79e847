"""Schedules for tests that want one slot due now and no other slot while they run."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

__all__ = ["yearly_due_now"]


def yearly_due_now() -> str:
    """A cron expression (UTC) whose last slot was a minute ago and whose next is a year away.

    An hourly job caught up with ``max_late`` has its next slot inside the test
    when the test runs in the last seconds of an hour; this one has none.
    """
    then = datetime.now(timezone.utc) - timedelta(minutes=1)
    return f"{then.minute} {then.hour} {then.day} {then.month} *"
