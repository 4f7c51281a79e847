"""Moved to :mod:`anarchon.backend.result_json`; this path warns ``DeprecationWarning`` and goes in a major version."""

import warnings

from anarchon.backend.result_json import result_fields, result_json

__all__ = ["result_fields", "result_json"]

warnings.warn(
    "anarchon.result_json moved to anarchon.backend.result_json; import from there",
    DeprecationWarning,
    stacklevel=2,
)
