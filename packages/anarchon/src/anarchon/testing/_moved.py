"""The deprecation warning of the old module paths of ``anarchon.testing`` (now subpackages)."""

from __future__ import annotations

import warnings


def warn_moved(old: str, new: str) -> None:
    """Warn the importer of ``old`` (a stub that re-exports ``new``) that it moved."""
    warnings.warn(
        f"{old} is deprecated: import from {new} (same names)", DeprecationWarning, stacklevel=3
    )
