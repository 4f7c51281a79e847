"""The connection layer: one adapter over redis-py and valkey-py asyncio clients.

Everything the backend sends goes through :class:`Connection`:

- ``execute(*args)`` — one raw command (``execute_command``);
- ``evalsha(script, keys, args)`` — a Lua script by its SHA1, loading it again
  (``SCRIPT LOAD``) and retrying once when the server answers ``NOSCRIPT``
  (after a restart or ``SCRIPT FLUSH``);
- ``evalsha_many(script, calls)`` — several calls of one script in one round
  trip (a pipeline), with the same ``NOSCRIPT`` fallback;
- ``pipeline(commands)`` — several commands in one round trip (no transaction).

At most as many calls are in flight as the client's connection pool holds
(``connection_pool.max_connections``): more would make the driver refuse
them ("Too many connections"), which is a local limit, not a store outage.

Errors (docs/backends/redis.md, "Errors"):

- a transient failure (connection refused, reset or lost, a timeout,
  ``LOADING``, ``BUSY``, ``TRYAGAIN``, ``CLUSTERDOWN``, ``MASTERDOWN``,
  ``READONLY`` during a fail-over) is raised as
  :class:`~anarchon.errors.BackendUnavailableError`;
- ``WRONGTYPE`` (a key of ours holds something else) as
  :class:`~anarchon.errors.ForeignDataError`;
- every other driver or server error as :class:`~anarchon.errors.BackendError`;

each names the server with its password hidden and chains the driver's error
(``__cause__``).
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import inspect
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from anarchon.errors import (
    AnarchonError,
    BackendError,
    BackendUnavailableError,
    ForeignDataError,
    InvalidConfigError,
)

from anarchon_redis._packer import pack_with_hiredis

__all__ = [
    "Connection",
    "Driver",
    "GlideAdapter",
    "LuaScript",
    "driver_error",
    "is_error_reply",
    "is_noscript",
    "is_transient",
    "pool_limit",
    "text",
]

POOL_WAIT_S = 30.0
"""How long a call waits for a free pooled connection the driver refused, before giving up."""

_TRANSIENT_REPLIES = ("LOADING", "READONLY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "BUSY ")
"""Error replies that mean "the server cannot serve this right now", not "this command is wrong"."""

_TRANSIENT_CLASSES = frozenset(
    {"ReadOnlyError", "MasterDownError", "ClusterDownError", "TryAgainError", "BusyLoadingError"}
)
"""The drivers' classes for those replies (they strip the reply's code from the message)."""


FOREIGN_MARK = "ANARCHON_FOREIGN_DATA "
"""How a Lua script's error reply says a key holds data it cannot parse (``lua/lib/state.lua``)."""


def _foreign_from_script(where: str, detail: str, keys: Sequence[str]) -> ForeignDataError:
    """The ``ForeignDataError`` for a script's ``ANARCHON_FOREIGN_DATA <key>[<field>] ...``."""
    said = detail[detail.index(FOREIGN_MARK) + len(FOREIGN_MARK) :]
    key = next((k for k in sorted(keys, key=len, reverse=True) if said.startswith(k + "[")), None)
    said = said.split(" script:", 1)[0].strip()
    return ForeignDataError(
        f"{where}: {said}; another application may write there: use another prefix,"
        " or remove the data",
        key=key,
    )


@dataclass(frozen=True)
class LuaScript:
    """A Lua script and its SHA1 (what ``EVALSHA`` names it by)."""

    name: str
    source: str
    sha: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sha", hashlib.sha1(self.source.encode()).hexdigest())


def text(value: Any) -> str:
    """A reply value as ``str`` (clients with or without ``decode_responses``)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def driver_error(error: BaseException) -> BaseException:
    """The driver's own error behind one of ours (``BackendError.__cause__``), else ``error``."""
    if isinstance(error, BackendError) and error.__cause__ is not None:
        return error.__cause__
    return error


def is_noscript(error: BaseException) -> bool:
    """True for the server's ``NOSCRIPT`` reply (redis-py and valkey-py strip the code)."""
    error = driver_error(error)
    return (
        type(error).__name__ == "NoScriptError"
        or str(error).startswith("NOSCRIPT")
        or "NoScriptError" in str(error)  # Valkey GLIDE's RequestError
    )


def is_error_reply(error: BaseException) -> bool:
    """True for an error reply of the server (not a connection failure)."""
    return type(driver_error(error)).__name__ in ("ResponseError", "RequestError")


def _is_pool_exhausted(error: BaseException) -> bool:
    """The driver's pool refused a new connection: a local limit, never an outage."""
    return type(error).__name__ == "MaxConnectionsError" or "Too many connections" in str(error)


def _is_refusal(error: BaseException) -> bool:
    """Authentication or permission refused: retrying cannot help."""
    name = type(error).__name__
    message = str(error)
    return name in (
        "AuthenticationError",
        "AuthorizationError",
        "AuthenticationWrongNumberOfArgsError",
    ) or message.startswith(("WRONGPASS", "NOAUTH", "NOPERM"))


def _is_wrongtype(error: BaseException) -> bool:
    return "WRONGTYPE" in str(error)


def pool_limit(client: Any) -> int | None:
    """How many connections the client's pool may open (None: unknown or unbounded)."""
    pool = getattr(client, "connection_pool", None)
    limit = getattr(pool, "max_connections", None)
    if limit is None:  # a cluster client: the limit of each node's pool
        manager = getattr(client, "nodes_manager", None)
        kwargs = getattr(manager, "connection_kwargs", None)
        if isinstance(kwargs, Mapping):
            limit = kwargs.get("max_connections")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1 or limit >= 2**20:
        return None
    return limit


def _glide_arg(value: Any) -> str | bytes:
    if isinstance(value, (str, bytes)):
        return value
    return str(value)


def _glide_entries(reply: Any) -> Any:
    """GLIDE's ``{id: [[field, value], ...]}`` stream reply as ``[[id, [field, value, ...]], ...]``."""
    if not isinstance(reply, Mapping):
        return reply
    return [[entry_id, [x for pair in fields for x in pair]] for entry_id, fields in reply.items()]


class GlideAdapter:
    """``execute_command(*args)`` over a Valkey GLIDE client (``custom_command([...])``).

    Stream replies are given the shape redis-py uses; ``SCRIPT LOAD`` goes to
    every primary of a ``GlideClusterClient``.
    """

    def __init__(self, client: Any) -> None:
        self.client = client
        self.cluster = type(client).__name__ == "GlideClusterClient"

    async def execute_command(self, *args: Any) -> Any:
        """Send one command with ``custom_command``."""
        command = [_glide_arg(a) for a in args]
        name = str(args[0]).upper() if args else ""
        if self.cluster and name == "SCRIPT" and str(args[1]).upper() == "LOAD":
            from glide import AllPrimaries

            reply = await self.client.custom_command(command, AllPrimaries())
            if isinstance(reply, Mapping):
                shas = {text(v) for v in reply.values()}
                return shas.pop() if len(shas) == 1 else reply
            return reply
        reply = await self.client.custom_command(command)
        if name in ("XRANGE", "XREVRANGE"):
            return _glide_entries(reply)
        return reply


def _driver_errors() -> tuple[type[BaseException], ...]:
    """The connection-level exception classes of the drivers imported so far."""
    found: list[type[BaseException]] = [OSError, asyncio.TimeoutError, EOFError]
    for module in ("redis.exceptions", "valkey.exceptions"):
        loaded = sys.modules.get(module)
        if loaded is not None:
            found.append(loaded.ConnectionError)
            found.append(loaded.TimeoutError)
    glide = sys.modules.get("glide")
    if glide is not None:
        for name in ("ClosingError", "ConnectionError", "TimeoutError"):
            error = getattr(glide, name, None)
            if isinstance(error, type) and issubclass(error, BaseException):
                found.append(error)
    return tuple(found)


def _is_transient_reply(error: BaseException) -> bool:
    error = driver_error(error)
    name = type(error).__name__
    if name in _TRANSIENT_CLASSES:
        return True
    message = str(error)
    if name == "RequestError":  # GLIDE: "An error was signalled by the server: - LOADING: ..."
        message = message.rpartition("- ")[2]
    return is_error_reply(error) and message.startswith(_TRANSIENT_REPLIES)


def is_transient(error: BaseException) -> bool:
    """True for an error that may pass if the same call is retried (see the module docstring)."""
    if isinstance(error, BackendUnavailableError):
        return True
    if isinstance(error, AnarchonError):
        return False
    if _is_refusal(error):
        return False
    if _is_pool_exhausted(error) or _is_transient_reply(error):
        return True
    return isinstance(error, (*_driver_errors(), ConnectionError, TimeoutError))


class Driver:
    """A Python client library for the server: ``redis`` (redis-py) or ``valkey`` (valkey-py)."""

    def __init__(self, module: str, client_class: str, extra: str, schemes: tuple[str, ...]):
        self.module = module
        self.client_class = client_class
        self.extra = extra
        self.schemes = schemes

    def load(self) -> Any:
        """The driver's ``asyncio`` module; a missing driver names the extra to install."""
        try:
            return importlib.import_module(f"{self.module}.asyncio")
        except ImportError:
            raise InvalidConfigError(
                f'the {self.module!r} client is not installed: pip install "anarchon[{self.extra}]"'
            ) from None

    def _defaults(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """Connection defaults for clients the backend opens.

        One immediate retry (a pooled connection that died with a server
        restart is reconnected transparently) and no more: a longer outage
        reaches the scheduler, which retries with backoff and logs it once.
        Timeouts keep a hung server from hanging a claim forever; the retry
        covers timeouts too, on a fresh connection (redis-py drops the
        connection a call failed on), so a silently dead connection costs one
        ``socket_timeout``.
        """
        defaults: dict[str, Any] = {}
        if "retry" not in given:
            retry = importlib.import_module(f"{self.module}.asyncio.retry").Retry
            backoff = importlib.import_module(f"{self.module}.backoff").NoBackoff
            defaults["retry"] = retry(backoff(), 1)
        if "socket_timeout" not in given:
            defaults["socket_timeout"] = 10.0
        if "socket_connect_timeout" not in given:
            defaults["socket_connect_timeout"] = 5.0
        if "health_check_interval" not in given:
            # A pooled connection idle this long is PINGed before use.
            defaults["health_check_interval"] = 10
        return defaults

    def defaults(self) -> dict[str, Any]:
        """The connection defaults of clients the backend opens (see ``_defaults``)."""
        return self._defaults({})

    def topology_schemes(self) -> tuple[str, ...]:
        """``<scheme>+sentinel`` and ``<scheme>+cluster`` of the driver's main scheme."""
        return (f"{self.schemes[0]}+sentinel", f"{self.schemes[0]}+cluster")

    def check_url(self, url: str, shown: str) -> None:
        """Validate a URL (scheme, query options the driver takes) without connecting."""
        aio = self.load()
        try:
            pool = aio.ConnectionPool.from_url(url)
            pool.connection_class(**pool.connection_kwargs)
        except (TypeError, ValueError, OSError) as error:
            unknown = re.search(r"unexpected keyword argument '([^']+)'", str(error))
            if unknown is not None:
                raise InvalidConfigError(
                    f"unknown option {unknown.group(1)!r} in {shown!r}: anarchon-redis takes"
                    f" strategy, prefix and the strategy's settings, and {self.module}-py does"
                    " not know it either"
                ) from None
            message = str(error).replace(url, shown)
            raise InvalidConfigError(f"bad {self.module} URL {shown!r}: {message}") from None

    def check_options(self, options: Mapping[str, Any]) -> None:
        """Validate an options mapping (keywords of the driver's client) without connecting."""
        aio = self.load()
        client = getattr(aio, self.client_class)
        params = inspect.signature(client.__init__).parameters
        takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        unknown = sorted(k for k in options if k not in params and k != "url")
        if unknown and not takes_any:
            raise InvalidConfigError(
                f"{self.module}.asyncio.{self.client_class} does not take the option(s)"
                f" {', '.join(unknown)}"
            )

    def open_url(self, url: str) -> Any:
        """A new client for ``url`` (not connected yet)."""
        aio = self.load()
        client_class = getattr(aio, self.client_class)
        # Options in the URL's query win over these defaults (the drivers' rule).
        client = client_class.from_url(url, **self._defaults({}))
        pack_with_hiredis(client)
        return client

    def open_options(self, options: Mapping[str, Any]) -> Any:
        """A new client from a mapping of the client's keyword arguments (``url`` allowed)."""
        aio = self.load()
        client_class = getattr(aio, self.client_class)
        given = dict(options)
        url = given.pop("url", None)
        kwargs = {**self._defaults(given), **given}
        client = (
            client_class.from_url(str(url), **kwargs) if url is not None else client_class(**kwargs)
        )
        pack_with_hiredis(client)
        return client


REDIS_DRIVER = Driver("redis", "Redis", "redis", ("redis", "rediss", "unix"))
VALKEY_DRIVER = Driver(
    "valkey", "Valkey", "valkey", ("valkey", "valkeys", "redis", "rediss", "unix")
)


class Connection:
    """A client plus what the backend needs around it (scripts, error mapping).

    ``owned`` is True when the backend opened the client and must close it.
    """

    def __init__(
        self, client: Any, *, owned: bool, where: str, also_close: Sequence[Any] = ()
    ) -> None:
        self.also_close = list(also_close)
        """Clients closed after ``client`` (a Sentinel's connections to the Sentinels)."""
        if getattr(client, "execute_command", None) is None and callable(
            getattr(client, "custom_command", None)
        ):
            self.glide: Any = client
            client = GlideAdapter(client)
        else:
            self.glide = None
        execute = getattr(client, "execute_command", None)
        if execute is None or not callable(execute):
            raise InvalidConfigError(
                f"{type(client).__name__} is not a Redis client: it has no async"
                " execute_command(*args) (nor custom_command, as Valkey GLIDE clients)"
            )
        if not inspect.iscoroutinefunction(execute):
            raise InvalidConfigError(
                f"{type(client).__name__}.execute_command is not async: pass an asyncio client"
                " (redis.asyncio.Redis or valkey.asyncio.Valkey)"
            )
        self.client = client
        self.owned = owned
        self.where = where
        self._execute = execute
        self._errors = _driver_errors()
        self.limit = pool_limit(client)
        """The most calls in flight at once (the pool's size), or None for no bound."""
        self._gate = asyncio.Semaphore(self.limit) if self.limit is not None else None

    # Errors -----------------------------------------------------------------

    def unavailable(self, error: BaseException) -> BackendUnavailableError | None:
        """The ``BackendUnavailableError`` for a transient failure, else None."""
        if _is_refusal(error):
            return None
        if isinstance(error, self._errors) or _is_transient_reply(error):
            detail = str(error).strip() or type(error).__name__
            return BackendUnavailableError(f"{self.where} is unavailable: {detail}")
        return None

    def error(self, error: BaseException, keys: Sequence[str] = ()) -> BaseException:
        """The error to raise for a driver's ``error`` (see the module docstring)."""
        if isinstance(error, AnarchonError) or not isinstance(error, Exception):
            return error
        mapped = self.unavailable(error)
        if mapped is not None:
            return mapped
        detail = str(error).strip() or type(error).__name__
        if FOREIGN_MARK in detail:
            return _foreign_from_script(self.where, detail, keys)
        if _is_wrongtype(error):
            named = ", ".join(keys) if keys else "a key it uses"
            return ForeignDataError(
                f"{self.where}: {named} holds data anarchon did not write"
                f" (WRONGTYPE); use another prefix or remove it: {detail}",
                key=keys[0] if len(keys) == 1 else None,
            )
        return BackendError(f"{self.where} failed: {detail}")

    def _raise(self, error: BaseException, keys: Sequence[str] = ()) -> None:
        mapped = self.error(error, keys)
        if mapped is error:
            raise error
        raise mapped from error

    def check(self, reply: Any, keys: Sequence[str] = ()) -> Any:
        """A pipeline's reply, or its error raised (mapped as for a single call)."""
        if isinstance(reply, BaseException):
            self._raise(reply, keys)
        return reply

    # Commands -----------------------------------------------------------------

    async def _send(self, *args: Any) -> Any:
        """One command through the gate; a pool that refused a connection is waited for."""
        gate = self._gate
        waited = 0.0
        delay = 0.002
        while True:
            try:
                if gate is None:
                    return await self._execute(*args)
                async with gate:
                    return await self._execute(*args)
            except Exception as error:
                if not _is_pool_exhausted(error) or waited >= POOL_WAIT_S:
                    raise
            await asyncio.sleep(delay)
            waited += delay
            delay = min(delay * 2, 0.1)

    async def execute(self, *args: Any) -> Any:
        """Send one command; errors are mapped (see the module docstring)."""
        try:
            return await self._send(*args)
        except Exception as error:
            key = [text(args[1])] if len(args) > 1 and _is_wrongtype(error) else []
            self._raise(error, key)
            raise  # unreachable: _raise always raises

    async def evalsha(self, script: LuaScript, keys: Sequence[str], args: Sequence[Any]) -> Any:
        """``EVALSHA`` the script; on ``NOSCRIPT`` load it again and retry once."""
        try:
            return await self._send("EVALSHA", script.sha, len(keys), *keys, *args)
        except Exception as error:
            if not is_noscript(error):
                self._raise(error, keys)
        await self.load_scripts((script,))
        try:
            return await self._send("EVALSHA", script.sha, len(keys), *keys, *args)
        except Exception as error:
            self._raise(error, keys)
            raise

    async def evalsha_many(
        self, script: LuaScript, calls: Sequence[tuple[Sequence[str], Sequence[Any]]]
    ) -> list[Any]:
        """``EVALSHA`` the script once per ``(keys, args)``, in one round trip; replies in order.

        Several calls go in one pipeline (a cluster client sends each to its
        key's node, the nodes in parallel). Calls answered ``NOSCRIPT`` did not
        run: the script is loaded again and they are sent once more. Any other
        error is raised after every call has ended (mapped as for one call).
        """
        if len(calls) == 1:
            keys, args = calls[0]
            return [await self.evalsha(script, keys, args)]
        commands = [("EVALSHA", script.sha, len(k), *k, *a) for k, a in calls]
        replies = await self.pipeline(commands)
        again = [i for i, r in enumerate(replies) if isinstance(r, Exception) and is_noscript(r)]
        if again:
            await self.load_scripts((script,))
            for i, reply in zip(
                again, await self.pipeline([commands[i] for i in again]), strict=True
            ):
                replies[i] = reply
        for (keys, _args), reply in zip(calls, replies, strict=True):
            self.check(reply, keys)
        return replies

    @property
    def cluster(self) -> bool:
        """True for a redis-py/valkey-py cluster client (``RedisCluster``, ``ValkeyCluster``)."""
        return callable(getattr(self.client, "get_primaries", None))

    @property
    def one_node(self) -> bool:
        """True when one call may touch keys of several hash slots (not a cluster client)."""
        return not self.cluster and not (self.glide is not None and self.client.cluster)

    async def load_scripts(self, scripts: Iterable[LuaScript]) -> None:
        """``SCRIPT LOAD`` each script and check the SHA1s the server gives.

        One round trip on a single server; on a cluster client each ``SCRIPT
        LOAD`` goes to every primary (the driver routes it so).
        """
        wanted = list(scripts)
        if not wanted:
            return
        if self.cluster:
            replies: list[Any] = []
            for script in wanted:
                try:
                    replies.append(await self.client.script_load(script.source))
                except Exception as error:
                    replies.append(error)
        else:
            replies = await self.pipeline([("SCRIPT", "LOAD", s.source) for s in wanted])
        for script, reply in zip(wanted, replies, strict=True):
            if isinstance(reply, Exception):
                self._raise(reply)
            if text(reply) != script.sha:
                raise BackendUnavailableError(
                    f"{self.where} loaded the {script.name} script as {text(reply)!r},"
                    f" expected {script.sha}"
                )

    async def pipeline(self, commands: Sequence[tuple[Any, ...]]) -> list[Any]:
        """Send the commands in one round trip (no MULTI); a failed command's error is its result.

        Connection failures are raised (``BackendUnavailableError``) instead.
        """
        make = getattr(self.client, "pipeline", None)
        if make is None:
            results: list[Any] = []
            for command in commands:
                try:
                    results.append(await self._send(*command))
                except Exception as error:
                    if self.unavailable(error) is not None:
                        self._raise(error)
                    results.append(error)
            return results
        gate = self._gate
        waited = 0.0
        delay = 0.002
        while True:
            try:
                if gate is None:
                    return await self._pipe(make, commands)
                async with gate:
                    return await self._pipe(make, commands)
            except Exception as error:
                if not _is_pool_exhausted(error) or waited >= POOL_WAIT_S:
                    self._raise(error)
            await asyncio.sleep(delay)
            waited += delay
            delay = min(delay * 2, 0.1)

    @staticmethod
    async def _pipe(make: Any, commands: Sequence[tuple[Any, ...]]) -> list[Any]:
        async with make(transaction=False) as pipe:
            for command in commands:
                pipe.execute_command(*command)
            return list(await pipe.execute(raise_on_error=False))

    async def time_ms(self) -> int:
        """The server clock (``TIME``) in ms since the epoch."""
        reply = await self.execute("TIME")
        return int(reply[0]) * 1000 + int(reply[1]) // 1000

    async def close(self) -> None:
        """Close the client (only called for clients the backend opened)."""
        if self.glide is not None:
            await self.glide.close()
            return
        for client in (self.client, *self.also_close):
            closer = getattr(client, "aclose", None) or getattr(client, "close", None)
            if closer is None:
                continue
            result = closer()
            if inspect.isawaitable(result):
                await result
