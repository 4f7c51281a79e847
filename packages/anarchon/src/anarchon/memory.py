"""Moved to :mod:`anarchon.backend.memory`; this path warns ``DeprecationWarning`` and goes in a major version."""

import warnings

from anarchon.backend.memory import RETENTION_MARGIN_MS, MemoryBackend, MemoryRunStore, NowMs

__all__ = ["RETENTION_MARGIN_MS", "MemoryBackend", "MemoryRunStore", "NowMs"]

warnings.warn(
    "anarchon.memory moved to anarchon.backend.memory; import from there",
    DeprecationWarning,
    stacklevel=2,
)
