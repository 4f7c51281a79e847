"""Moved to :mod:`anarchon.fleet.types`; this path warns ``DeprecationWarning`` and goes in a major version."""

import warnings

from anarchon.fleet.types import Declaration, JobControl

__all__ = ["Declaration", "JobControl"]

warnings.warn(
    "anarchon.fleet_types moved to anarchon.fleet.types; import from there",
    DeprecationWarning,
    stacklevel=2,
)
