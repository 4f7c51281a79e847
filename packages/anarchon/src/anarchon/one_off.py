"""Moved to :mod:`anarchon.schedules`: this internal path stays until every import uses the new one."""

from anarchon.schedules import Once, to_epoch_ms

__all__ = ["Once", "to_epoch_ms"]
