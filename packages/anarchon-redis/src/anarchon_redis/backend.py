"""``RedisBackend`` and ``ValkeyBackend``: exactly-once slots on Redis 5+ and Valkey.

The connection is a URL, an options mapping or your own asyncio client::

    RedisBackend("rediss://user:secret@cache:6380/1")            # opened and closed by us
    RedisBackend({"host": "cache", "port": 6379, "db": 1})       # redis.asyncio.Redis(**options)
    RedisBackend(my_client, strategy="stream-id")                # yours: never closed by us
    ValkeyBackend("valkey://cache:6379/0")                       # valkey-py
    RedisBackend("redis+sentinel://:secret@s1:26379,s2:26379/mymaster/0")  # the primary Sentinel names
    RedisBackend("redis+cluster://node1:7000,node2:7001")       # a Redis Cluster
    RedisBackend(url, durability="replicated")                  # claims confirmed on a replica (WAIT)

Backend options also ride in a URL's query (``strategy``, ``prefix``,
``durability``, ``durability_replicas``, ``durability_timeout`` and the
strategy's settings, e.g. ``window_ms``); every other query option goes to the
driver, which must know it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from anarchon.backend import STORE_FORMAT, Backend, InitOnce, RunStore
from anarchon.backend.foreign import stored_data, stored_int
from anarchon.backend.membership import check_member_id, check_refresh
from anarchon.backend.registry import redact_url
from anarchon.errors import (
    AnarchonError,
    BackendError,
    BackendUnavailableError,
    ForeignDataError,
    InvalidConfigError,
    StoreFormatError,
    UnsupportedError,
)
from anarchon.fleet.types import Declaration, JobControl, Member
from anarchon.types import ClaimInput, JobLimits, ResultWrite, RunRecord, StoredResult

from anarchon_redis import _fleet, _members
from anarchon_redis._client import (
    REDIS_DRIVER,
    VALKEY_DRIVER,
    Connection,
    Driver,
    is_transient,
    text,
)
from anarchon_redis._durability import (
    DEFAULT_REPLICAS,
    DEFAULT_TIMEOUT_MS,
    Durability,
    check_replication,
    durability_options,
    parse_durability,
)
from anarchon_redis._durability import parse_info as _info
from anarchon_redis._durability import parse_version as _version
from anarchon_redis._prefixes import check_prefix
from anarchon_redis._runtime import Runtime
from anarchon_redis._runtimes import build_runtime
from anarchon_redis._topology import (
    Target,
    is_topology_url,
    open_target,
    parse_target,
    second_client,
)
from anarchon_redis.strategies import STRATEGIES, Strategy, parse_strategy

__all__ = [
    "DEFAULT_PREFIX",
    "MIN_REDIS_VERSION",
    "RedisBackend",
    "RedisBackendBase",
    "ValkeyBackend",
]

DEFAULT_PREFIX = "cron:"
"""Key prefix by default: keys look like ``{cron:<job>}:state`` and ``cron:format``."""

MIN_REDIS_VERSION = (5, 0, 0)
"""Streams and effects-replicated scripts (``TIME`` before writes)."""

log = logging.getLogger("anarchon.redis")

_OWN_OPTIONS = ("strategy", "prefix")
_FORBIDDEN_IN_PREFIX = set("{}") | {chr(c) for c in range(33)} | {"\x7f"}


def _check_prefix(prefix: Any) -> str:
    if not isinstance(prefix, str) or not prefix:
        raise InvalidConfigError(f"prefix must be a non-empty string, got {prefix!r}")
    bad = sorted(set(prefix) & _FORBIDDEN_IN_PREFIX)
    if bad:
        raise InvalidConfigError(
            f"prefix {prefix!r} may not contain braces, whitespace or control characters"
            f" (found {bad!r}): the job's keys use the hash tag {{<prefix><job>}}"
        )
    return prefix


class RedisBackendBase(Backend):
    """What :class:`RedisBackend` and :class:`ValkeyBackend` share (one driver each)."""

    name: ClassVar[str] = "redis"
    driver: ClassVar[Driver] = REDIS_DRIVER
    default_url: ClassVar[str] = "redis://localhost:6379/0"

    def __init__(
        self,
        source: str | Mapping[str, Any] | Any = None,
        *,
        strategy: str | Strategy = "lease",
        prefix: str = DEFAULT_PREFIX,
        durability: str = "fast",
        durability_replicas: int = DEFAULT_REPLICAS,
        durability_timeout: int = DEFAULT_TIMEOUT_MS,
    ) -> None:
        if source is None:
            source = self.default_url
        self.prefix = _check_prefix(prefix)
        self.durability: Durability = parse_durability(
            durability, durability_replicas, durability_timeout
        )
        self.strategy: Strategy = parse_strategy(strategy)
        if self.durability.replicated and not self.strategy.leases:
            raise UnsupportedError(
                f"durability='replicated' needs leases; the {self.strategy.name!r} strategy has"
                " none (use strategy='lease')"
            )
        if self.strategy.redis_only and self.driver is VALKEY_DRIVER:
            raise UnsupportedError(
                f"Valkey has no {self.strategy.name!r} strategy; use one of"
                f" {', '.join(n for n, c in STRATEGIES.items() if not c.redis_only)}"
            )
        self.url: str | None = None
        self.options: dict[str, Any] | None = None
        self.client: Any = None
        self.target: Target | None = None
        """The Sentinels or cluster nodes of a ``+sentinel``/``+cluster`` URL."""
        if isinstance(source, str):
            self.url = source
            self.shown = redact_url(source)
            self._check_scheme(source)
            if is_topology_url(source):
                self.driver.load()
                self.target = parse_target(source, self.shown)
            else:
                self.driver.check_url(source, self.shown)
        elif isinstance(source, Mapping):
            self.options = dict(source)
            self.driver.check_options(self.options)
            where = self.options.get("url")
            if where is not None:
                self.shown = redact_url(str(where))
            else:
                host = self.options.get("host", "localhost")
                port = self.options.get("port", 6379)
                self.shown = f"{host}:{port}/{self.options.get('db', 0)}"
        else:
            self.client = source
            Connection(source, owned=False, where="")  # validate now: is it an asyncio client?
            self.shown = f"a {type(source).__module__}.{type(source).__name__}"
        self.dedupe_window_ms = self.strategy.dedupe_window_ms
        self._runtime: Runtime = build_runtime(self, self.strategy)
        self.runs: RunStore | None = self._runtime.runs if self.strategy.leases else None
        self._conn: Connection | None = None
        self._init = InitOnce()
        self._owns_client: tuple[Any, list[Any]] | None = None
        self.server: str | None = None
        """``"redis 7.0.15"`` or ``"valkey 9.1.2"`` once initialised."""

    # Construction ----------------------------------------------------------

    def _check_scheme(self, url: str) -> None:
        scheme = url.partition("://")[0].lower()
        base, plus, topology = scheme.partition("+")
        if plus and topology in ("sentinel", "cluster") and base == self.driver.schemes[0]:
            return  # TLS (rediss+sentinel) is not read from a URL: pass a client for it
        if scheme not in self.driver.schemes:
            schemes = ", ".join(
                f"{s}://" for s in (*self.driver.schemes, *self.driver.topology_schemes())
            )
            raise InvalidConfigError(
                f"{type(self).__name__} takes {schemes} URLs, not {self.shown!r}"
            )

    @classmethod
    def from_url(cls, url: str, **options: Any) -> RedisBackendBase:
        """Build from a URL; ``strategy``, ``prefix`` and strategy settings may ride in the query.

        Keyword options are merged into the query. Every other option goes to
        the driver (``socket_timeout``, ``ssl_ca_certs``, ...), which must know it.
        """
        shown = redact_url(url)
        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        query.update({key: str(value) for key, value in options.items()})
        strategy_name = query.pop("strategy", "lease")
        prefix = query.pop("prefix", DEFAULT_PREFIX)
        durable = durability_options(query)
        settings_class = STRATEGIES.get(strategy_name.strip().lower())
        if settings_class is None:
            known = ", ".join(sorted(STRATEGIES))
            raise InvalidConfigError(
                f"unknown strategy {strategy_name!r} in {shown!r} (known: {known})"
            )
        settings_names = set(_settings_fields(settings_class))
        settings = {k: query.pop(k) for k in list(query) if k in settings_names}
        others = {k: v for k, v in query.items()}
        _refuse_other_strategies_settings(strategy_name, others, shown)
        strategy = settings_class.from_options(settings)
        driver_url = urlunsplit(
            parts._replace(query=urlencode(others, quote_via=quote, safe="/:,"))
        )
        settings_ = parse_durability(
            durable.get("durability", "fast"),
            durable.get("durability_replicas", DEFAULT_REPLICAS),
            durable.get("durability_timeout", DEFAULT_TIMEOUT_MS),
            shown,
        )
        backend = cls(
            driver_url,
            strategy=strategy,
            prefix=prefix,
            durability=settings_.mode,
            durability_replicas=settings_.replicas,
            durability_timeout=settings_.timeout_ms,
        )
        backend.shown = redact_url(driver_url)
        return backend

    def clone(self) -> RedisBackendBase | None:
        """A new, unconnected backend on the same store, for the lease thread.

        Built from the URL or options, or, for a client object, from a new
        client with that client's settings (a plain client's pool, a
        Sentinel's ``master_for`` client, a ``RedisCluster``). None for a
        client it cannot copy (a Valkey GLIDE client, another library's): the
        scheduler then logs a WARNING that heartbeats share its event loop.
        """
        settings: dict[str, Any] = {
            "strategy": self.strategy,
            "prefix": self.prefix,
            "durability": self.durability.mode,
            "durability_replicas": self.durability.replicas,
            "durability_timeout": self.durability.timeout_ms,
        }
        source: Any
        if self.url is not None:
            source = self.url
        elif self.options is not None:
            source = self.options
        else:
            try:
                made = second_client(self.client)
            except Exception as error:  # a client whose settings we misread: no thread
                log.debug("anarchon: cannot copy %s for the lease thread: %s", self.shown, error)
                return None
            if made is None:
                return None
            client, extra = made
            other = type(self)(client, **settings)
            other._owns_client = (client, extra)
            other.shown = self.shown
            return other
        other = type(self)(source, **settings)
        other.shown = self.shown
        return other

    # Connection --------------------------------------------------------------

    def describe(self) -> str:
        """Where the store is, for messages (the password hidden)."""
        return f"{self.name} at {self.shown}"

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.shown!r}, strategy={self.strategy.describe()!r},"
            f" prefix={self.prefix!r}, durability={self.durability.describe()!r})"
        )

    def _open(self) -> Connection:
        where = self.describe()
        owns = self._owns_client
        if owns is not None:  # a clone's copy of the user's client: ours to close
            return Connection(owns[0], owned=True, where=where, also_close=owns[1])
        if self.client is not None:
            return Connection(self.client, owned=False, where=where)
        if self.target is not None:
            client, extra = open_target(
                self.driver.module, self.driver.client_class, self.target, self.driver.defaults()
            )
            return Connection(client, owned=True, where=where, also_close=extra)
        if self.url is not None:
            client = self.driver.open_url(self.url)
        else:
            assert self.options is not None
            client = self.driver.open_options(self.options)
        return Connection(client, owned=True, where=where)

    async def _ready(self) -> Connection:
        await self.init()
        assert self._conn is not None
        return self._conn

    async def connection(self) -> Connection:
        """The open connection, after ``init()`` (what the strategy's runtime sends through)."""
        return self._conn or await self._ready()

    async def init(self) -> None:
        """Connect, check the server (Redis 5+ or Valkey), load the scripts, check the format.

        Idempotent. An unreachable server raises ``BackendUnavailableError``
        (``ANARCHON_BACKEND_UNAVAILABLE``) naming it with the password hidden.
        """
        await self._init.run(lambda: self._conn is not None, self._start)

    async def _start(self) -> None:
        self._conn = await self._connect()

    async def _connect(self) -> Connection:
        """Open a connection and check it as :meth:`init` says; closed again if a check fails."""
        conn = self._open()
        try:
            await self._check_server(conn)
            await conn.load_scripts(self._runtime.scripts)
            await self._check_format(conn)
            await check_prefix(conn, self.prefix, self.describe())
            await self._check_replication(conn)
        except BackendUnavailableError as error:
            if conn.owned:
                await _quietly(conn.close())
            cause = error.__cause__
            if cause is None:
                raise
            detail = str(cause).strip() or type(cause).__name__
            raise BackendUnavailableError(
                f"cannot connect to {self.describe()}: {detail}"
            ) from cause
        except AnarchonError:
            if conn.owned:
                await _quietly(conn.close())
            raise
        except Exception as error:  # a driver error of ours to name (bad option, ...)
            if conn.owned:
                await _quietly(conn.close())
            detail = str(error).strip() or type(error).__name__
            raise BackendError(f"{self.describe()} failed: {detail}") from error
        except BaseException:
            if conn.owned:
                await _quietly(conn.close())
            raise
        return conn

    async def _check_server(self, conn: Connection) -> None:
        try:
            info = _info(await conn.execute("INFO", "server"))
        except BackendUnavailableError:
            raise
        except Exception as error:  # e.g. an ACL without INFO: go on unchecked
            if "NOPERM" in str(error) or "permission" in str(error).lower():
                self.server = self.name
                return
            raise
        server = "valkey" if "valkey_version" in info else "redis"
        raw = info.get("valkey_version") or info.get("redis_version") or "0"
        version = _version(raw)
        self.server = f"{server} {raw}"
        if server == "redis" and version < MIN_REDIS_VERSION:
            raise BackendUnavailableError(
                f"{self.describe()} runs Redis {raw}; anarchon-redis needs Redis 5.0 or newer"
            )
        await self._runtime.check_server(conn, server, version)

    async def _check_replication(self, conn: Connection) -> None:
        """Log what the durability setting protects against (``INFO replication``)."""
        await check_replication(conn, self.durability, self.server or self.name, self.describe())

    async def _check_format(self, conn: Connection) -> None:
        """Write the store format marker (``<prefix>format``); refuse a newer format."""
        key = self.prefix + "format"
        found = await conn.execute("GET", key)
        if found is None:
            await conn.execute("SET", key, STORE_FORMAT, "NX")
            found = await conn.execute("GET", key)
        if found is None:  # e.g. a key that expired in between: ours again next time
            found = str(STORE_FORMAT)
        value = text(found)
        with stored_data(key, "a store format marker"):
            stored = stored_int(value)
            if stored < 1:
                raise ValueError(f"no store format is {stored}")
        if stored > STORE_FORMAT:
            raise StoreFormatError(
                f"{self.describe()} holds store format {value!r} under {key!r}; this"
                f" anarchon-redis reads format {STORE_FORMAT} at most: upgrade anarchon-redis"
                " on this instance"
            )

    async def close(self) -> None:
        """Close the client if the backend opened it; a client you passed in stays open."""
        conn, self._conn = self._conn, None
        self._init.reset()
        if conn is not None and conn.owned:
            await conn.close()

    # Backend ------------------------------------------------------------------

    def check_job(self, limits: JobLimits) -> None:
        """Refuse what the strategy cannot run safely; learn how long run state must be kept."""
        self._runtime.check_job(limits)

    async def prepare_job(self, job: str, history_size: int) -> None:
        """Check the job's keys hold what this backend writes, then the strategy's set-up.

        A key of the job holding another type (written by something else)
        raises ``ForeignDataError`` (``ANARCHON_FOREIGN_DATA``) naming the key.
        """
        await self._check_key_types(job)
        await self._runtime.prepare_job(job, history_size)

    async def _check_key_types(self, job: str) -> None:
        wanted = self._runtime.key_types(job)
        if not wanted:
            return
        conn = await self.connection()
        replies = await conn.pipeline([("TYPE", key) for key in wanted])
        for (key, kind), reply in zip(wanted.items(), replies, strict=True):
            found = text(conn.check(reply, (key,)))
            if found not in ("none", kind):
                raise ForeignDataError(
                    f"{self.describe()}: key {key!r} of job {job!r} holds a {found}, not the"
                    f" {kind} anarchon writes there: it was written by something else; use"
                    " another prefix or remove the key",
                    key=key,
                )

    async def claim(self, input: ClaimInput) -> bool:
        """True for exactly one token per ``(job, slot)``, and again for that token."""
        return await self._runtime.claim(input)

    async def claim_many(self, inputs: Sequence[ClaimInput]) -> list[bool]:
        """:meth:`claim` for each input in a few round trips; answers in request order."""
        return await self._runtime.claim_many(inputs)

    async def record_claims(self, inputs: Sequence[ClaimInput]) -> None:
        """Nothing to do: every strategy's claim is itself the history record."""
        return None

    async def save_results(self, writes: Sequence[ResultWrite]) -> None:
        """:meth:`save_result` for each write in a few round trips."""
        await self._runtime.save_results(writes)

    def is_transient(self, error: BaseException) -> bool:
        """True for an error worth retrying: connection lost, timeouts, ``LOADING``, ``BUSY``,
        ``TRYAGAIN``, ``CLUSTERDOWN``, ``MASTERDOWN``, ``READONLY`` (a fail-over), a full pool.

        Everything else (``WRONGTYPE``, a refused password, a bad database
        index, a script error...) reaches the caller.
        """
        return is_transient(error)

    async def record_manual_run(self, input: ClaimInput) -> int | None:
        """Record a ``run_now()`` (never de-duplicated); the slot is kept as given."""
        return await self._runtime.record_manual_run(input)

    async def save_result(
        self,
        job: str,
        result: StoredResult,
        history_size: int,
        history_ttl_ms: int | None = None,
    ) -> None:
        """Store how a run ended, then trim history (about ``history_size`` runs, and the TTL)."""
        await self._runtime.save_result(job, result, history_size, history_ttl_ms)

    async def history(self, job: str, limit: int) -> list[RunRecord]:
        """Recent runs of ``job`` on all instances, newest first (one record per attempt)."""
        return await self._runtime.history(job, limit)

    async def now_ms(self) -> int:
        """The server clock (``TIME``) in ms."""
        return await (await self.connection()).time_ms()

    # Fleet registry and controls (keys: anarchon_redis._fleet) --------------

    async def declare(self, declarations: Sequence[Declaration], ttl_ms: int) -> None:
        """Record this instance's declarations in ``<prefix>fleet``; drop expired ones."""
        conn = await self.connection()
        await _fleet.declare(conn, self.prefix, self.describe(), declarations, ttl_ms)

    async def declarations(self, job: str | None = None) -> list[Declaration]:
        """Every unexpired declaration (of ``job``, or of all jobs)."""
        return await _fleet.declarations(await self.connection(), self.prefix, self.describe(), job)

    async def set_control(self, control: JobControl) -> None:
        """Store the job's control in ``<prefix>controls``."""
        await _fleet.set_control(await self.connection(), self.prefix, control)

    async def controls(self) -> dict[str, JobControl]:
        """Every job's control."""
        return await _fleet.controls(await self.connection(), self.prefix, self.describe())

    # Membership (key: anarchon_redis._members) -----------------------------

    async def refresh_member(self, instance_id: str, roster: str, ttl_ms: int) -> list[Member]:
        """Write this instance's record in ``<prefix>members`` and drop expired ones (one script).

        Every strategy; one key, so a cluster needs no hash tag.
        """
        check_refresh(instance_id, roster, ttl_ms)
        return await _members.refresh(
            await self.connection(), self.prefix, instance_id, roster, ttl_ms
        )

    async def leave_member(self, instance_id: str) -> None:
        """Remove this instance's record from ``<prefix>members``."""
        check_member_id(instance_id)
        await _members.leave(await self.connection(), self.prefix, instance_id)

    async def members(self) -> list[Member]:
        """Every live member of ``<prefix>members``, sorted by instance id."""
        return await _members.members(await self.connection(), self.prefix)


def _settings_fields(cls: type[Strategy]) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)] if dataclasses.is_dataclass(cls) else []


def _refuse_other_strategies_settings(strategy: str, others: Mapping[str, str], shown: str) -> None:
    """A setting of another strategy in the query is an error, not a driver option."""
    for name, cls in STRATEGIES.items():
        if name == strategy:
            continue
        misplaced = sorted(set(others) & set(_settings_fields(cls)))
        if misplaced:
            raise InvalidConfigError(
                f"{', '.join(misplaced)} in {shown!r} is a setting of strategy {name!r},"
                f" not of {strategy!r}"
            )


async def _quietly(awaitable: Any) -> None:
    with contextlib.suppress(Exception):
        await awaitable


class RedisBackend(RedisBackendBase):
    """Redis 5+ through redis-py asyncio (``pip install "anarchon[redis]"``).

    ``redis`` is a URL (``redis://``, ``rediss://`` for TLS, user, password
    and db in the URL), a mapping of ``redis.asyncio.Redis`` keyword
    arguments (``url`` allowed), or your own ``redis.asyncio.Redis`` (never
    closed by :meth:`close`; a ``RedisCluster``, a Valkey GLIDE client or any
    object with an async ``execute_command(*args)`` works too). ``strategy``
    is ``"lease"`` (default, leases), ``"stream-id"``, ``"idmp"`` (Redis 8.6+;
    checked in :meth:`init`) or ``"script"``, or a settings object
    (:class:`~anarchon_redis.Lease`, :class:`~anarchon_redis.StreamId`,
    :class:`~anarchon_redis.Idmp`, :class:`~anarchon_redis.Script`).
    ``prefix`` starts every key (default ``"cron:"``). A URL may also be
    ``redis+sentinel://[user:pass@]host:port[,host:port]/<service>[/db]``
    (the primary the Sentinels name; never a replica) or
    ``redis+cluster://host:port[,host:port]``. ``durability`` is ``"fast"``
    (default: the primary's answer) or ``"replicated"`` (each batch is
    followed by ``WAIT durability_replicas durability_timeout`` on its
    connection; docs/backends/redis.md, "Durability").
    """

    name: ClassVar[str] = "redis"
    driver: ClassVar[Driver] = REDIS_DRIVER
    default_url: ClassVar[str] = "redis://localhost:6379/0"

    def __init__(
        self,
        redis: str | Mapping[str, Any] | Any = None,
        *,
        strategy: str | Strategy = "lease",
        prefix: str = DEFAULT_PREFIX,
        durability: str = "fast",
        durability_replicas: int = DEFAULT_REPLICAS,
        durability_timeout: int = DEFAULT_TIMEOUT_MS,
    ) -> None:
        super().__init__(
            redis,
            strategy=strategy,
            prefix=prefix,
            durability=durability,
            durability_replicas=durability_replicas,
            durability_timeout=durability_timeout,
        )


class ValkeyBackend(RedisBackendBase):
    """Valkey through valkey-py asyncio (``pip install "anarchon[valkey]"``).

    ``valkey`` is a URL (``valkey://``, ``valkeys://`` for TLS; ``redis://``
    works too), a mapping of ``valkey.asyncio.Valkey`` keyword arguments, or
    your own ``valkey.asyncio.Valkey`` (never closed by :meth:`close`).
    Strategies and ``prefix`` as for :class:`RedisBackend`, except ``idmp``
    (Redis 8.6+ only), which is refused at construction.
    """

    name: ClassVar[str] = "valkey"
    driver: ClassVar[Driver] = VALKEY_DRIVER
    default_url: ClassVar[str] = "valkey://localhost:6379/0"

    def __init__(
        self,
        valkey: str | Mapping[str, Any] | Any = None,
        *,
        strategy: str | Strategy = "lease",
        prefix: str = DEFAULT_PREFIX,
        durability: str = "fast",
        durability_replicas: int = DEFAULT_REPLICAS,
        durability_timeout: int = DEFAULT_TIMEOUT_MS,
    ) -> None:
        super().__init__(
            valkey,
            strategy=strategy,
            prefix=prefix,
            durability=durability,
            durability_replicas=durability_replicas,
            durability_timeout=durability_timeout,
        )
