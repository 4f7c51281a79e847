"""Errors of anarchon: one base class with a stable ``code`` (docs/concepts.md, "Errors")."""

from __future__ import annotations

__all__ = [
    "AnarchonError",
    "BackendError",
    "BackendUnavailableError",
    "DedupeWindowError",
    "DuplicateJobError",
    "ForeignDataError",
    "InvalidConfigError",
    "InvalidJobError",
    "StoreFormatError",
    "UnknownBackendError",
    "UnknownJobError",
    "UnsupportedError",
]


class AnarchonError(Exception):
    """Base class of every error anarchon raises; ``code`` is stable across versions."""

    code: str = "ANARCHON_ERROR"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class InvalidJobError(AnarchonError, ValueError):
    """A bad job name, schedule or option value.

    For a schedule, ``field`` names the cron field (or ``"interval"``/``"tz"``)
    and ``position`` is the 0-based character offset of the bad token.
    """

    code = "ANARCHON_INVALID_JOB"

    def __init__(
        self, message: str, *, field: str | None = None, position: int | None = None
    ) -> None:
        super().__init__(message)
        self.field = field
        self.position = position


class DuplicateJobError(AnarchonError, ValueError):
    """A job name registered twice on one scheduler."""

    code = "ANARCHON_DUPLICATE_JOB"


class DedupeWindowError(AnarchonError, ValueError):
    """``jitter + max_late`` is not below the backend's de-duplication window."""

    code = "ANARCHON_DEDUPE_WINDOW"


class UnsupportedError(AnarchonError):
    """An option or strategy the backend or server cannot do."""

    code = "ANARCHON_UNSUPPORTED"


class StoreFormatError(AnarchonError):
    """The store holds a newer format than this version reads."""

    code = "ANARCHON_STORE_FORMAT"


class BackendUnavailableError(AnarchonError, ConnectionError):
    """The store cannot be reached or its server check failed."""

    code = "ANARCHON_BACKEND_UNAVAILABLE"


class UnknownBackendError(AnarchonError, LookupError):
    """No installed backend serves a URL scheme."""

    code = "ANARCHON_UNKNOWN_BACKEND"


class UnknownJobError(AnarchonError, LookupError):
    """A job name the fleet does not declare (the message lists the known ones)."""

    code = "ANARCHON_UNKNOWN_JOB"


class InvalidConfigError(AnarchonError, ValueError):
    """A bad backend or scheduler setting."""

    code = "ANARCHON_INVALID_CONFIG"


class ForeignDataError(AnarchonError):
    """A key, table or subject the backend uses holds data it did not write (``key`` names it)."""

    code = "ANARCHON_FOREIGN_DATA"

    def __init__(self, message: str, *, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


class BackendError(AnarchonError):
    """A store or driver error that is neither transient nor anarchon's own.

    The message names the backend and its URL with the password redacted;
    the driver's error is kept as ``__cause__``.
    """

    code = "ANARCHON_BACKEND_ERROR"
