"""Moved to :mod:`anarchon.backend.batching`; this path warns ``DeprecationWarning`` and goes in a major version."""

import warnings

from anarchon.backend.batching import DEFAULT_FALLBACK_CONCURRENCY, job_of, per_item

__all__ = ["DEFAULT_FALLBACK_CONCURRENCY", "job_of", "per_item"]

warnings.warn(
    "anarchon.batching moved to anarchon.backend.batching; import from there",
    DeprecationWarning,
    stacklevel=2,
)
