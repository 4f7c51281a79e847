"""Moved to :mod:`anarchon.backend.history`: this internal path stays until every import uses the new one."""

from anarchon.backend.history import DEFAULT_HISTORY_SIZE, build_history

__all__ = ["DEFAULT_HISTORY_SIZE", "build_history"]
