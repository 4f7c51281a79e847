"""Kept for its documented path (docs/backends/sql.md): see :mod:`anarchon_sql.postgres._arrays`."""

from __future__ import annotations

from anarchon_sql.postgres._arrays import array_literal, literal_params

__all__ = ["array_literal", "literal_params"]
