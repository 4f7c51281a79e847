"""Moved to :mod:`anarchon.backend.registry`; this path warns ``DeprecationWarning`` and goes in a major version."""

import warnings

from anarchon.backend.registry import (
    ENTRY_POINT_GROUP,
    ENV_VAR,
    EXTRAS,
    installed_backends,
    redact_text,
    redact_url,
    resolve_backend,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "ENV_VAR",
    "EXTRAS",
    "installed_backends",
    "redact_text",
    "redact_url",
    "resolve_backend",
]

warnings.warn(
    "anarchon.registry moved to anarchon.backend.registry; import from there",
    DeprecationWarning,
    stacklevel=2,
)
