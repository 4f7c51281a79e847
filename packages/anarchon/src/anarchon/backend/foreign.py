"""Stored data a backend cannot read (docs/extending.md, "Data the backend did not write").

Every reader of stored data (controls, declarations, history records, lease
state, bookkeeping keys) parses what it reads inside :func:`stored_data`, so
a value it cannot parse (bad JSON, a field missing, ``1e400`` where an
integer belongs) raises :class:`~anarchon.errors.ForeignDataError` naming
the key, field or row, never a raw ``ValueError`` or ``OverflowError``.

A reader of many entries (every job's control, every declaration, a job's
history) skips an unreadable entry instead, with :func:`skip_unreadable`:
the entry is reported once per process at WARNING with its name, and the
readable entries are returned as usual. One bad entry never hides the
others (an unrelated job's garbage control never turns a pause off).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from anarchon.errors import ForeignDataError

__all__ = [
    "UNREADABLE",
    "entry_name",
    "report_unreadable",
    "skip_unreadable",
    "stored_data",
    "stored_flag",
    "stored_int",
]

T = TypeVar("T")

UNREADABLE: tuple[type[Exception], ...] = (
    ValueError,  # json.JSONDecodeError and UnicodeDecodeError included
    TypeError,
    KeyError,
    AttributeError,
    IndexError,
    OverflowError,  # int(float("inf")): JSON 1e400
)
"""What parsing stored data raises when the data is not what the backend wrote."""

log = logging.getLogger("anarchon.backend")

_REPORT_LIMIT = 10_000
_reported: set[tuple[str, str]] = set()


def entry_name(key: str, field: str) -> str:
    """How an entry of a key (a hash field, a row of a table) is named: ``key[field]``."""
    return f"{key}[{field}]"


def _shown(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}"
    return text if len(text) <= 120 else f"{text[:117]}..."


@contextmanager
def stored_data(key: str, what: str) -> Iterator[None]:
    """Parse data stored at ``key`` (``what`` says what it should be).

    A parse failure (:data:`UNREADABLE`) becomes :class:`ForeignDataError`
    with ``key``; a :class:`ForeignDataError` raised inside passes unchanged.
    """
    try:
        yield
    except ForeignDataError:
        raise
    except UNREADABLE as error:
        raise ForeignDataError(
            f"{key} does not hold {what} anarchon can read ({_shown(error)}); another"
            " application may write there: use another prefix, or remove the data",
            key=key,
        ) from None


def stored_int(value: Any) -> int:
    """A stored integer: an ``int``, or a string or float holding a whole number.

    Raises ``ValueError``/``TypeError``/``OverflowError`` otherwise (a bool,
    ``nan``, ``1e400``, ``"1.5"``), for :func:`stored_data` to name.
    """
    if isinstance(value, bool):
        raise TypeError(f"a boolean where an integer belongs: {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not value.is_integer():  # nan and inf too
            raise ValueError(f"not a whole number: {value!r}")
        return int(value)
    if isinstance(value, (str, bytes)):
        return int(value)
    raise TypeError(f"not an integer: {value!r}")


def stored_flag(value: Any) -> bool:
    """A stored 0/1 flag (``True``/``False`` too); anything else raises ``ValueError``."""
    if isinstance(value, bool):
        return value
    number = stored_int(value)
    if number not in (0, 1):
        raise ValueError(f"not a 0/1 flag: {value!r}")
    return number == 1


def report_unreadable(error: ForeignDataError, logger: logging.Logger | None = None) -> None:
    """Log ``error`` at WARNING the first time this process sees it (by key and message).

    The record carries ``extra={"foreign_key": error.key}``.
    """
    marker = (str(error.key), error.message)
    if marker in _reported:
        return
    if len(_reported) < _REPORT_LIMIT:
        _reported.add(marker)
    (logger or log).warning(
        "anarchon: skipped an unreadable entry: %s",
        error,
        extra={"foreign_key": error.key},
    )


def skip_unreadable(
    key: str, what: str, parse: Callable[[], T], logger: logging.Logger | None = None
) -> T | None:
    """``parse()`` under :func:`stored_data`; an unreadable entry is reported once and None returned."""
    try:
        with stored_data(key, what):
            return parse()
    except ForeignDataError as error:
        report_unreadable(error, logger)
        return None
