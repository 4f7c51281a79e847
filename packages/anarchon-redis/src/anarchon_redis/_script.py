"""The ``script`` strategy (claim-only; Redis 5+, Valkey).

One Lua script scans the job's claims of the last ``window_ms`` for the slot
and appends a claim only if none is there. Keys, trimming and history:
:mod:`anarchon_redis._dedupe`.
"""

from __future__ import annotations

from typing import Any

from anarchon.types import ClaimInput

from anarchon_redis import _lua
from anarchon_redis._client import LuaScript
from anarchon_redis._dedupe import DedupeRuntime
from anarchon_redis._runtime import Store
from anarchon_redis.strategies import Script

__all__ = ["ScriptRuntime"]


class ScriptRuntime(DedupeRuntime):
    """The ``script`` strategy for one store."""

    scripts = _lua.SCRIPT_SCRIPTS
    strategy_name = "script"

    def __init__(self, store: Store, settings: Script) -> None:
        super().__init__(store)
        self.settings = settings
        self.keep_ms = settings.window_ms

    def claim_call(self, input: ClaimInput) -> tuple[LuaScript, Any]:
        """The script appends a claim only if the window holds none for the slot."""
        args = (int(input.slot), input.token, input.instance_id, int(self.settings.window_ms))
        return _lua.SCRIPT_CLAIM, args
