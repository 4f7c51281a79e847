"""The one table that pairs each strategy's settings class with the runtime that runs it.

Settings classes (``anarchon_redis.strategies``) hold settings only; the
backend looks its strategy's runtime up here. A new strategy adds its row.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from anarchon_redis._idmp import IdmpRuntime
from anarchon_redis._lease import LeaseRuntime
from anarchon_redis._runtime import Runtime, Store
from anarchon_redis._script import ScriptRuntime
from anarchon_redis._stream_id import StreamIdRuntime
from anarchon_redis.strategies import Idmp, Lease, Script, Strategy, StreamId

__all__ = ["RUNTIMES", "build_runtime"]

RUNTIMES: dict[type[Strategy], Callable[[Store, Any], Runtime]] = {
    Lease: LeaseRuntime,
    StreamId: StreamIdRuntime,
    Idmp: IdmpRuntime,
    Script: ScriptRuntime,
}
"""Settings class → runtime class (called as ``runtime(store, settings)``)."""


def build_runtime(store: Store, settings: Strategy) -> Runtime:
    """The runtime of ``settings``'s strategy, bound to ``store``."""
    for cls in type(settings).__mro__:
        make = RUNTIMES.get(cls)
        if make is not None:
            return make(store, settings)
    raise LookupError(f"no runtime for strategy settings {type(settings).__name__}")
