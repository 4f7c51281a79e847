"""What the CLI prints: times and plain-text tables (shared by every command)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

__all__ = ["iso_ms", "table"]


def iso_ms(ms: int | None, tz: Any = timezone.utc) -> str:
    """``ms`` (since the epoch) as ISO 8601 in ``tz``; ``-`` for None."""
    if ms is None:
        return "-"
    try:
        return datetime.fromtimestamp(ms / 1000, tz=tz).isoformat(timespec="milliseconds")
    except (ValueError, OverflowError, OSError):
        return "(outside years 1-9999)"


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A plain-text table: the headers, a rule, then one line a row (None shows as ``-``)."""
    cells = [[str(c) for c in headers]] + [
        [("-" if c is None else str(c)) for c in r] for r in rows
    ]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)).rstrip()
        for row in cells
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
