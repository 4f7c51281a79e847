"""``store_call``: every public store method raises coded errors, never a bare driver error."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from anarchon.errors import AnarchonError

__all__ = ["store_call"]

P = ParamSpec("P")
R = TypeVar("R")


class _Translator(Protocol):
    async def translate_error(self, error: Exception) -> AnarchonError: ...


class _Owned(Protocol):
    def _sql_backend(self) -> _Translator: ...


S = TypeVar("S", bound=_Owned)


def store_call(
    method: Callable[Concatenate[S, P], Awaitable[R]],
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, R]]:
    """Wrap a store method: anarchon's errors pass, driver errors go through ``translate_error``.

    The driver's error is kept as ``__cause__`` of the coded error.
    """

    async def call(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await method(self, *args, **kwargs)
        except AnarchonError:
            raise
        except Exception as error:
            raise await self._sql_backend().translate_error(error) from error

    functools.update_wrapper(call, method)
    return call
