"""Moved to :mod:`anarchon._scheduler.tasks`; this path warns ``DeprecationWarning`` and goes in a major version."""

import warnings

from anarchon._scheduler.tasks import gather_or_cancel

__all__ = ["gather_or_cancel"]

warnings.warn(
    "anarchon.tasks moved to anarchon._scheduler.tasks; import from there",
    DeprecationWarning,
    stacklevel=2,
)
