"""Type stubs of the compiled slot engine ``anarchon._core``.

Every time or duration argument is an ``int`` of milliseconds within
``-2**63 .. 2**63-1``; an int outside that range raises ``InvalidJobError``
with ``field`` naming the argument. A ``limit`` is ``0 .. 10_000_000``
(default 100 000). ``None`` means there is no answer in range (no next slot
before ``2**63``, or before year 10000 for cron).

A ``delay_ms`` is ``0 .. 86_400_000`` (one day). The rendezvous functions
rank instance ids by a hash fixed in the engine (the same in every build and
platform); their ``k`` (number of candidates) is ``1 .. 1024``; a ``str``
with a lone surrogate raises ``InvalidJobError``.
"""

from collections.abc import Sequence
from typing import Any, final

__version__: str
"""The Cargo workspace version this module was built from."""

__all__ = [
    "Schedule",
    "Timetable",
    "__version__",
    "build_history",
    "jitter_ms",
    "next_after_many",
    "rendezvous_candidates",
    "rendezvous_ranks",
    "result_json",
]

@final
class Schedule:
    """A compiled schedule: an epoch-aligned interval or a cron expression in a zone."""

    @staticmethod
    def cron(expression: str, tz: str = "UTC") -> Schedule: ...
    @staticmethod
    def every(period_ms: int, offset_ms: int | None = None) -> Schedule: ...
    def next_after(self, ms: int) -> int | None: ...
    def slots(self, start_ms: int, end_ms: int, limit: int | None = None) -> list[int]: ...
    def latest_between(self, from_ms: int, to_ms: int) -> int | None: ...
    @property
    def period_ms(self) -> int: ...

@final
class Timetable:
    """Every job's next slot, ordered by fire time (slot + jitter)."""

    def __new__(cls, instance_id: str) -> Timetable: ...
    def add(
        self,
        job: str,
        schedule: Schedule,
        jitter_ms: int,
        now_ms: int,
        lookback_ms: int | None = None,
        lead_ms: int | None = None,
        *,
        delay_ms: int | None = None,
    ) -> None: ...
    def set_delay(self, job: str, delay_ms: int) -> bool: ...
    def remove(self, job: str) -> bool: ...
    def due(self, now_ms: int, limit: int | None = None) -> list[tuple[str, int, int]]: ...
    def next_wakeup(self) -> int | None: ...
    def next_of(self, job: str) -> tuple[int, int] | None: ...
    def scan_due_count(self, now_ms: int) -> int: ...
    def __len__(self) -> int: ...
    def __contains__(self, job: str, /) -> bool: ...

def next_after_many(schedules: Sequence[Schedule], after_ms: int) -> list[int | None]: ...
def jitter_ms(instance_id: str, job: str, slot: int, jitter_ms: int, gap_ms: int) -> int: ...
def rendezvous_ranks(
    members: Sequence[str], me: str, keys: Sequence[str], k: int
) -> list[int | None]: ...
def rendezvous_candidates(members: Sequence[str], key: str, k: int) -> list[str]: ...
def build_history(
    claims: Sequence[Any], results: Sequence[Any], limit: int
) -> list[
    tuple[int, str, str, str | None, int, bool, int | None, int | None, int | None, str | None]
]: ...
def result_json(result: Any) -> str | None: ...
