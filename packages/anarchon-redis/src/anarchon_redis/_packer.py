"""Commands packed in C (hiredis) on the clients the backend opens (internal).

redis-py and valkey-py parse replies with hiredis when it is installed, but
their asyncio connections pack every command in Python, argument by
argument. A batch claim of 500 items carries about 17,000 arguments, so
packing was most of the client CPU per job-slot on Redis. When hiredis is
installed (the ``redis``/``valkey`` extras install it), the pools of the
clients the backend opens itself make connections that pack with
``hiredis.pack_command``: the same bytes (str as UTF-8, int and float as
their ``repr``), anything hiredis refuses (bool, None, memoryview, ...) goes
through the driver's own packer, which raises the driver's usual error.
A client handed in by the application is left as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["HIREDIS_PACKING", "pack_with_hiredis"]

_pack: Callable[[tuple[Any, ...]], bytes] | None
try:
    from hiredis import pack_command as _pack
except ImportError:  # pragma: no cover - depends on the installed extras
    _pack = None

HIREDIS_PACKING = _pack is not None
"""True when hiredis is installed (then :func:`pack_with_hiredis` takes effect)."""

_UTF8 = frozenset({"utf-8", "utf8"})
_classes: dict[type, type] = {}


class _HiredisPacking:
    """Mixin for a driver's asyncio connection class: ``pack_command`` in C."""

    _anarchon_hiredis = True

    def pack_command(self, *args: Any) -> list[bytes]:
        head = args[0]
        if isinstance(head, str):
            if " " in head:
                args = (*head.encode().split(), *args[1:])
        elif isinstance(head, bytes) and b" " in head:
            args = (*head.split(), *args[1:])
        try:
            assert _pack is not None
            return [_pack(args)]
        except TypeError:
            return super().pack_command(*args)  # type: ignore[misc,no-any-return]


def _fast(base: type) -> type:
    fast = _classes.get(base)
    if fast is None:
        fast = type(f"Hiredis{base.__name__}", (_HiredisPacking, base), {})
        _classes[base] = fast
    return fast


def pack_with_hiredis(client: Any) -> bool:
    """Make ``client``'s pool create connections that pack in C; True if it did.

    Only for a plain (non-cluster) client whose pool has not made a
    connection yet and encodes text as UTF-8, and only with hiredis.
    """
    if _pack is None:
        return False
    pool: Any = getattr(client, "connection_pool", None)
    base = getattr(pool, "connection_class", None)
    kwargs = getattr(pool, "connection_kwargs", None)
    if not isinstance(base, type) or not isinstance(kwargs, dict):
        return False
    if getattr(base, "_anarchon_hiredis", False):
        return True
    if not callable(getattr(base, "pack_command", None)):
        return False
    if str(kwargs.get("encoding", "utf-8")).lower() not in _UTF8:
        return False
    if kwargs.get("encoding_errors", "strict") != "strict":
        return False
    pool.connection_class = _fast(base)
    return True
