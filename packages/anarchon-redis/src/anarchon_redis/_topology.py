"""Sentinel and Cluster URLs, and a second client for the lease thread (internal).

``redis+sentinel://[user:pass@]host1:port1,host2:port2/<service>[/db]?...``
(``valkey+sentinel://`` for valkey-py) names the Sentinels that watch a
primary; the client asks them where the primary is (``master_for``) and
follows a failover. ``redis+cluster://host:port[,host:port]`` names seed
nodes of a Redis Cluster. Neither ever reads from a replica.

:func:`second_client` builds a new, unconnected client with the settings of a
client object the user passed in, so the lease thread can have connections
of its own (docs/leases.md, "Leases a blocked event loop cannot lose").
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote

from anarchon.errors import InvalidConfigError

__all__ = [
    "SENTINEL_PORT",
    "TOPOLOGIES",
    "Target",
    "is_topology_url",
    "open_target",
    "parse_target",
    "second_client",
]

SENTINEL_PORT = 26379
"""A Sentinel's port when the URL gives none."""

TOPOLOGIES = ("sentinel", "cluster")
"""What may follow ``+`` in a URL's scheme."""

_FLOATS = ("socket_timeout", "socket_connect_timeout")
_INTS = ("health_check_interval", "max_connections")
_TEXTS = ("client_name", "sentinel_username", "sentinel_password")


@dataclass(frozen=True)
class Target:
    """A parsed ``+sentinel`` or ``+cluster`` URL (the password never shown: see ``shown``)."""

    topology: str
    hosts: tuple[tuple[str, int], ...]
    service: str = ""
    db: int = 0
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    options: dict[str, Any] = field(default_factory=dict, repr=False)
    sentinel: dict[str, Any] = field(default_factory=dict, repr=False)


def is_topology_url(url: str) -> bool:
    """True for ``<scheme>+sentinel://`` and ``<scheme>+cluster://``."""
    scheme = url.partition("://")[0].lower()
    return scheme.partition("+")[2] in TOPOLOGIES


def _bad(shown: str, why: str) -> InvalidConfigError:
    return InvalidConfigError(f"bad Redis URL {shown!r}: {why}")


def _host(piece: str, default_port: int, shown: str) -> tuple[str, int]:
    if not piece:
        raise _bad(shown, "an empty host in the host list")
    if piece.startswith("["):
        end = piece.find("]")
        if end == -1:
            raise _bad(shown, "an IPv6 address without its closing ']'")
        host, rest = piece[1:end], piece[end + 1 :]
        port_text = rest[1:] if rest.startswith(":") else ""
        if rest and not rest.startswith(":"):
            raise _bad(shown, "text after an IPv6 address that is not ':<port>'")
    else:
        host, colon, port_text = piece.partition(":")
        if colon and not port_text:
            raise _bad(shown, f"host {host!r} has an empty port")
    if not host:
        raise _bad(shown, "a host without a name")
    if not port_text:
        return host, default_port
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise _bad(shown, f"the port of host {host!r} is not a number from 1 to 65535")
    return host, int(port_text)


def _options(query: str, shown: str, topology: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Driver options and Sentinel options (``sentinel_*``) of the query, checked."""
    options: dict[str, Any] = {}
    sentinel: dict[str, Any] = {}
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key in _FLOATS:
            try:
                number = float(value)
            except ValueError:
                raise _bad(shown, f"{key} must be a number of seconds") from None
            if number <= 0:
                raise _bad(shown, f"{key} must be above 0")
            options[key] = number
        elif key in _INTS:
            if not value.isdigit():
                raise _bad(shown, f"{key} must be a whole number")
            options[key] = int(value)
        elif key in _TEXTS:
            if key.startswith("sentinel_"):
                if topology != "sentinel":
                    raise _bad(shown, f"{key} is an option of Sentinel URLs only")
                sentinel[key.removeprefix("sentinel_")] = value
            else:
                options[key] = value
        else:
            known = ", ".join((*_FLOATS, *_INTS, *_TEXTS))
            raise _bad(shown, f"unknown option {key!r} (known here: {known})")
    return options, sentinel


def parse_target(url: str, shown: str) -> Target:
    """The parts of a ``+sentinel``/``+cluster`` URL; a malformed one raises ``InvalidConfigError``.

    ``shown`` is the URL with its password hidden: messages only ever use it.
    """
    scheme, _sep, rest = url.partition("://")
    topology = scheme.lower().partition("+")[2]
    rest, _hash, _fragment = rest.partition("#")
    rest, _q, query = rest.partition("?")
    netloc, slash, path = rest.partition("/")
    userinfo, at, hostlist = netloc.rpartition("@")
    if not at:
        hostlist, userinfo = netloc, ""
    username = password = None
    if userinfo:
        user, colon, secret = userinfo.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if colon else None
    default_port = SENTINEL_PORT if topology == "sentinel" else 6379
    if not hostlist:
        raise _bad(shown, "no host: give host:port[,host:port...]")
    hosts = tuple(_host(p.strip(), default_port, shown) for p in hostlist.split(","))
    pieces = [p for p in path.split("/")] if slash else []
    while pieces and pieces[-1] == "":
        pieces.pop()
    options, sentinel = _options(query, shown, topology)
    if topology == "sentinel":
        if not pieces or not pieces[0]:
            raise _bad(
                shown, "no service name: redis+sentinel://host:port[,host:port]/<service>[/db]"
            )
        if len(pieces) > 2:
            raise _bad(shown, "the path is /<service>[/db]")
        db_text = pieces[1] if len(pieces) == 2 else "0"
        if not db_text.isdigit():
            raise _bad(shown, f"the database {db_text!r} is not a whole number")
        return Target(
            "sentinel",
            hosts,
            unquote(pieces[0]),
            int(db_text),
            username,
            password,
            options,
            sentinel,
        )
    if pieces and pieces != ["0"]:
        raise _bad(shown, "a Redis Cluster has database 0 only (give no path, or /0)")
    return Target("cluster", hosts, "", 0, username, password, options)


def _auth(target: Target) -> dict[str, Any]:
    found: dict[str, Any] = {}
    if target.username is not None:
        found["username"] = target.username
    if target.password is not None:
        found["password"] = target.password
    return found


def open_target(
    module: str, client_class: str, target: Target, defaults: dict[str, Any]
) -> tuple[Any, list[Any]]:
    """A client of the primary (Sentinel) or of the cluster, and what else to close with it."""
    aio = importlib.import_module(f"{module}.asyncio")
    kwargs = {**defaults, **target.options, **_auth(target)}
    if target.topology == "sentinel":
        sentinel_module = importlib.import_module(f"{module}.asyncio.sentinel")
        for_sentinels = {k: v for k, v in kwargs.items() if k.startswith("socket_")}
        for_sentinels.update(target.sentinel)
        manager = sentinel_module.Sentinel(
            list(target.hosts), sentinel_kwargs=for_sentinels, db=target.db, **kwargs
        )
        client = manager.master_for(
            target.service, **{_class_keyword(manager): getattr(aio, client_class)}
        )
        return client, [manager]
    cluster_module = importlib.import_module(f"{module}.asyncio.cluster")
    cluster_class = getattr(cluster_module, f"{client_class}Cluster")
    node = cluster_module.ClusterNode
    client = cluster_class(startup_nodes=[node(h, p) for h, p in target.hosts], **kwargs)
    return client, []


def _class_keyword(manager: Any) -> str:
    """``master_for``'s client class keyword: ``redis_class`` (redis-py), ``valkey_class`` (valkey-py)."""
    params = inspect.signature(manager.master_for).parameters
    return "valkey_class" if "valkey_class" in params else "redis_class"


def _accepted(factory: Callable[..., Any], given: dict[str, Any]) -> dict[str, Any]:
    params = inspect.signature(factory).parameters
    return {k: v for k, v in given.items() if k in params}


def second_client(client: Any) -> tuple[Any, list[Any]] | None:
    """A new client with ``client``'s settings (its own connections), and what else to close.

    For a ``redis.asyncio.Redis`` or ``valkey.asyncio.Valkey`` (its pool's
    connection class and keywords), one from a Sentinel's ``master_for``
    (new Sentinel clients for the same Sentinels and service) and a
    ``RedisCluster``/``ValkeyCluster`` (the nodes it knows). None for any
    other client: the caller cannot give the lease thread a client of its own.
    """
    if callable(getattr(client, "get_primaries", None)):
        return _second_cluster(client)
    pool = getattr(client, "connection_pool", None)
    from_pool = getattr(type(client), "from_pool", None)
    if pool is None or from_pool is None or not hasattr(pool, "connection_kwargs"):
        return None
    if hasattr(pool, "sentinel_manager") and hasattr(pool, "service_name"):
        return _second_sentinel(client, pool)
    kwargs = dict(pool.connection_kwargs)
    new_pool = type(pool)(
        connection_class=pool.connection_class, max_connections=pool.max_connections, **kwargs
    )
    return from_pool(new_pool), []


def _second_sentinel(client: Any, pool: Any) -> tuple[Any, list[Any]]:
    manager = pool.sentinel_manager
    hosts = [
        (s.connection_pool.connection_kwargs["host"], s.connection_pool.connection_kwargs["port"])
        for s in manager.sentinels
    ]
    new_manager = type(manager)(
        hosts,
        min_other_sentinels=manager.min_other_sentinels,
        sentinel_kwargs=dict(manager.sentinel_kwargs),
        **manager.connection_kwargs,
    )
    kwargs = {k: v for k, v in pool.connection_kwargs.items() if k != "connection_pool"}
    kwargs["check_connection"] = pool.check_connection
    kwargs["max_connections"] = pool.max_connections
    second = new_manager.master_for(
        pool.service_name,
        connection_pool_class=type(pool),
        **{_class_keyword(new_manager): type(client)},
        **kwargs,
    )
    return second, [new_manager]


def _second_cluster(client: Any) -> tuple[Any, list[Any]] | None:
    module = importlib.import_module(type(client).__module__)
    node = getattr(module, "ClusterNode", None)
    given = getattr(client, "connection_kwargs", None)
    if node is None or not isinstance(given, dict):
        return None
    nodes = client.get_nodes() or getattr(client, "startup_nodes", [])
    if not nodes:
        return None
    kwargs = _accepted(type(client).__init__, given)
    kwargs.pop("read_from_replicas", None)
    if "SSL" in getattr(given.get("connection_class"), "__name__", ""):
        kwargs["ssl"] = True
    retry = getattr(client, "retry", None)
    if retry is not None:
        kwargs["retry"] = retry
    second = type(client)(startup_nodes=[node(n.host, n.port) for n in nodes], **kwargs)
    return second, []
