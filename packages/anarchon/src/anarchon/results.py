"""Moved to :mod:`anarchon._scheduler.results`; this path warns ``DeprecationWarning`` and goes in a major version."""

import warnings

from anarchon._scheduler.results import FINISH_RETRY_S

__all__ = ["FINISH_RETRY_S"]

warnings.warn(
    "anarchon.results moved to anarchon._scheduler.results; import from there",
    DeprecationWarning,
    stacklevel=2,
)
