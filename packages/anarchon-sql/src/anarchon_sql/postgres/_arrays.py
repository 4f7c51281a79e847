"""Array parameters as PostgreSQL array literals, written in Python's C string code.

psycopg dumps a ``list`` parameter element by element in Python
(``ListDumper``): for a wave of 10,000 claims and finishes that cost more
client CPU than the rest of the job-slot together. Every batch statement
casts its array parameters (``CAST(? AS BIGINT[])``, docs/backends/sql.md),
so the same values sent as one text literal (``{1,2,3}``, ``{"a","b"}``)
mean the same to the server, and the client builds them with ``str.join``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["array_literal", "literal_params"]


def _text(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _element(value: Any) -> str:
    if value is None:
        return "NULL"
    if value is True:
        return "t"
    if value is False:
        return "f"
    if isinstance(value, int):
        return str(int(value))  # an IntEnum's str() is its name
    return _text(str(value))


def array_literal(values: list[Any]) -> str:
    """``values`` (ints, bools, strs or None; one type per list) as an array literal.

    Text elements are always quoted (so ``NULL``, blanks, commas and braces
    in a job name stay text), with ``\\`` and ``"`` escaped.
    """
    if not values:
        return "{}"
    first = values[0]
    if type(first) is int and all(type(v) is int for v in values):
        return "{" + ",".join(map(str, values)) + "}"
    if type(first) is str and all(type(v) is str for v in values):
        joined = '","'.join(values)
        if "\\" not in joined and joined.count('"') == 2 * (len(values) - 1):
            return '{"' + joined + '"}'
        return "{" + ",".join(map(_text, values)) + "}"
    return "{" + ",".join(map(_element, values)) + "}"


def literal_params(params: Sequence[Any]) -> tuple[Any, ...]:
    """``params`` with every list parameter as its :func:`array_literal`."""
    return tuple(array_literal(p) if type(p) is list else p for p in params)
