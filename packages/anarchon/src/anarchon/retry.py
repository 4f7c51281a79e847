"""Retry on error (docs/retries.md): the :class:`Retry` job option and the policy it follows.

A handler that raises one of ``Retry.on`` is run again after a backoff, as a
further attempt of the same slot. :class:`Retry` only describes the policy
and validates it when the job is declared; :mod:`anarchon._scheduler.retry_step` runs
the retries.
"""

from __future__ import annotations

from collections.abc import Iterable

from anarchon.durations import Duration, to_ms
from anarchon.errors import InvalidJobError

__all__ = ["Retry"]


class Retry:
    """Run a failed handler again: up to ``attempts`` handler runs per slot, with a backoff.

    ``attempts`` counts handler runs ended by an error, the first one
    included (``attempts=3``: the first run and two retries). The wait
    before retry ``n`` is ``backoff * 2**(n - 1)``, at most ``max_backoff``.
    Only exceptions that are instances of one of ``on`` are retried; a
    timeout or a cancellation never is. Bad values raise
    :class:`~anarchon.InvalidJobError` (``ANARCHON_INVALID_JOB``) here.

    >>> Retry(attempts=3, backoff="10s", max_backoff="5m").delay_ms(2)
    20000
    """

    __slots__ = ("attempts", "backoff_ms", "max_backoff_ms", "on")

    def __init__(
        self,
        attempts: int = 3,
        backoff: Duration = "10s",
        max_backoff: Duration = "5m",
        on: type[BaseException] | Iterable[type[BaseException]] = (Exception,),
    ) -> None:
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
            raise InvalidJobError(
                f"Retry attempts must be an integer >= 1, got {attempts!r}", field="attempts"
            )
        if attempts > 1000:
            raise InvalidJobError(
                f"Retry attempts must be at most 1000, got {attempts}", field="attempts"
            )
        self.attempts = attempts
        self.backoff_ms = to_ms(backoff, what="Retry backoff")
        self.max_backoff_ms = to_ms(max_backoff, what="Retry max_backoff")
        if self.max_backoff_ms < self.backoff_ms:
            raise InvalidJobError(
                f"Retry max_backoff ({self.max_backoff_ms} ms) must be at least backoff"
                f" ({self.backoff_ms} ms)",
                field="max_backoff",
            )
        self.on = _exception_types(on)

    @property
    def retries(self) -> int:
        """Retries after the first error: ``attempts - 1``."""
        return self.attempts - 1

    def delay_ms(self, retry: int) -> int:
        """The wait before retry number ``retry`` (1 for the first retry), in ms."""
        if retry < 1:
            raise ValueError(f"retry numbers start at 1, got {retry}")
        if self.backoff_ms == 0:
            return 0
        exponent = min(retry - 1, 62)
        return min(self.backoff_ms << exponent, self.max_backoff_ms)

    def matches(self, error: BaseException) -> bool:
        """True when ``error`` is one the policy retries."""
        return isinstance(error, self.on)

    def __repr__(self) -> str:
        names = ", ".join(t.__name__ for t in self.on)
        return (
            f"Retry(attempts={self.attempts}, backoff={self.backoff_ms}ms,"
            f" max_backoff={self.max_backoff_ms}ms, on=({names},))"
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Retry) and (
            self.attempts,
            self.backoff_ms,
            self.max_backoff_ms,
            self.on,
        ) == (other.attempts, other.backoff_ms, other.max_backoff_ms, other.on)

    def __hash__(self) -> int:
        return hash((self.attempts, self.backoff_ms, self.max_backoff_ms, self.on))


def _exception_types(
    on: type[BaseException] | Iterable[type[BaseException]],
) -> tuple[type[BaseException], ...]:
    items: tuple[object, ...]
    if isinstance(on, type):
        items = (on,)
    elif isinstance(on, (str, bytes)):
        raise InvalidJobError(f"Retry on must be exception classes, got {on!r}", field="on")
    else:
        try:
            items = tuple(on)
        except TypeError:
            raise InvalidJobError(
                f"Retry on must be an exception class or a tuple of them, got {on!r}", field="on"
            ) from None
    if not items:
        raise InvalidJobError("Retry on must name at least one exception class", field="on")
    for item in items:
        if not isinstance(item, type) or not issubclass(item, Exception):
            raise InvalidJobError(
                f"Retry on must hold Exception subclasses, got {item!r}", field="on"
            )
    return tuple(item for item in items if isinstance(item, type))
