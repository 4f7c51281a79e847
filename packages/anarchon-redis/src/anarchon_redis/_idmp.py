"""The ``idmp`` strategy (claim-only; Redis 8.6+).

``XADD <runs> IDMP <job> <slot> * ...`` inside a Lua script; a duplicate
returns the first entry's ID, whose token tells whether the slot is ours.
``XCFGSET`` is applied in the same script only when the stream is created.
Keys, trimming and history: :mod:`anarchon_redis._dedupe`.
"""

from __future__ import annotations

import logging
from typing import Any

from anarchon.errors import BackendError, DedupeWindowError, UnsupportedError
from anarchon.types import ClaimInput, JobLimits

from anarchon_redis import _lua
from anarchon_redis._client import Connection, LuaScript, driver_error, is_error_reply
from anarchon_redis._dedupe import DedupeRuntime
from anarchon_redis._runtime import Store
from anarchon_redis.strategies import STRATEGIES, Idmp

__all__ = ["IdmpRuntime"]

log = logging.getLogger("anarchon.redis")


class IdmpRuntime(DedupeRuntime):
    """The ``idmp`` strategy for one store (Redis 8.6+)."""

    scripts = _lua.IDMP_SCRIPTS
    strategy_name = "idmp"

    def __init__(self, store: Store, settings: Idmp) -> None:
        super().__init__(store)
        self.settings = settings
        self.keep_ms = settings.duration_sec * 1000

    async def check_server(self, conn: Connection, server: str, version: tuple[int, ...]) -> None:
        """Refuse a server without idempotent ``XADD`` (``COMMAND INFO XCFGSET`` is empty)."""
        try:
            known = _command_known(await conn.execute("COMMAND", "INFO", "XCFGSET"))
        except BackendError as unparsed:
            if not isinstance(driver_error(unparsed), (TypeError, SystemError)):
                raise
            # The client cannot parse the reply (redis-py: the ``[nil]`` of an unknown
            # command; GLIDE: Redis 8's maps): ask COMMAND GETKEYS, which fails if unknown.
            try:
                await conn.execute("COMMAND", "GETKEYS", "XCFGSET", "k", "IDMP-DURATION", "1")
                known = True
            except Exception as error:
                if not is_error_reply(error):
                    raise
                known = False
        if known:
            return
        others = ", ".join(n for n in STRATEGIES if n != "idmp")
        shown = ".".join(str(v) for v in version)
        raise UnsupportedError(
            f"strategy 'idmp' needs Redis 8.6 or newer (idempotent XADD, XCFGSET);"
            f" {self.store.describe()} runs {server} {shown}, which does not have it."
            f" Use another strategy: {others}"
        )

    def check_job(self, limits: JobLimits) -> None:
        """No lease options; and ``max_size`` must cover the slots a late claim may reach back."""
        super().check_job(limits)
        period = max(int(limits.period_ms or 0), 1)
        reach = int(limits.jitter_ms or 0) + int(limits.max_late_ms or 0)
        needed = reach // period + 2
        if needed > self.settings.max_size:
            raise DedupeWindowError(
                f"job {limits.job!r}: a claim may come {reach} ms after its slot, which spans"
                f" {needed} slots of {period} ms, but idmp remembers only max_size="
                f"{self.settings.max_size} slots per job (raise max_size, up to 10000)"
            )

    async def prepare_job(self, job: str, history_size: int) -> None:
        """Create the job's stream with its ``XCFGSET`` settings if it does not exist yet."""
        runs = self.keys(job)[0]
        created = await self.evalsha(
            _lua.IDMP_PREPARE, runs, self.settings.duration_sec, self.settings.max_size
        )
        if not int(created):
            log.debug("idmp stream %s exists: its IDMP settings are left as they are", runs)

    def claim_call(self, input: ClaimInput) -> tuple[LuaScript, Any]:
        """``XADD IDMP <job> <slot>``; a duplicate's first entry tells whose slot it is."""
        args = (
            input.job,
            int(input.slot),
            input.token,
            input.instance_id,
            self.settings.duration_sec,
            self.settings.max_size,
        )
        return _lua.IDMP_CLAIM, args


def _command_known(reply: Any) -> bool:
    """True if a ``COMMAND INFO <name>`` reply describes a command (``[nil]`` if unknown)."""
    if reply is None:
        return False
    if isinstance(reply, dict):
        return any(v for v in reply.values())
    if isinstance(reply, (list, tuple)):
        return any(item is not None and item != [] for item in reply)
    return bool(reply)
