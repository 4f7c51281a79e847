"""anarchon: distributed cron for Python. Every instance declares the jobs; exactly one runs each slot."""

from __future__ import annotations

from anarchon.errors import (
    AnarchonError,
    BackendUnavailableError,
    DedupeWindowError,
    DuplicateJobError,
    InvalidConfigError,
    InvalidJobError,
    StoreFormatError,
    UnknownBackendError,
    UnsupportedError,
)
from anarchon.schedules import Cron, Every

__version__ = "0.1.0"

__all__ = [
    "AnarchonError",
    "BackendUnavailableError",
    "Cron",
    "DedupeWindowError",
    "DuplicateJobError",
    "Every",
    "InvalidConfigError",
    "InvalidJobError",
    "StoreFormatError",
    "UnknownBackendError",
    "UnsupportedError",
    "__version__",
]
