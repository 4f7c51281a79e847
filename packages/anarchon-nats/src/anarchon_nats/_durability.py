"""What ``durability`` asks of the server, checked and logged when a backend starts.

``replicated`` needs nats-server 2.11 or later (leader completeness, the
in-flight de-duplication and per-subject compare-and-set fixes) and a stream
with at least 3 replicas; both are checked at ``init()``. The log line says
what the setting protects against and what it does not (docs/backends/nats.md,
"Durability").
"""

from __future__ import annotations

import logging
from typing import Any

from anarchon.errors import InvalidConfigError
from nats.aio.client import Client

__all__ = ["MIN_REPLICATED_VERSION", "REPLICATED_REPLICAS", "check_server", "report"]

log = logging.getLogger("anarchon.nats")

MIN_REPLICATED_VERSION = (2, 11)
"""The oldest nats-server ``durability="replicated"`` accepts."""
REPLICATED_REPLICAS = 3
"""Stream replicas of ``durability="replicated"``."""


def server_version(nc: Client) -> tuple[int, int, int]:
    """``(major, minor, patch)`` of the server ``nc`` is connected to (0s: unknown)."""
    try:
        version = nc.connected_server_version
        return (int(version.major), int(version.minor), int(version.patch))
    except (AttributeError, TypeError, ValueError, IndexError):
        return (0, 0, 0)


def check_server(nc: Client, durability: str, shown: str) -> None:
    """Refuse ``replicated`` on a server older than 2.11 (``InvalidConfigError``)."""
    if durability != "replicated":
        return
    found = server_version(nc)
    if found[:2] < MIN_REPLICATED_VERSION:
        raise InvalidConfigError(
            f"durability='replicated' needs nats-server 2.11 or later; {shown} runs"
            f" {'.'.join(map(str, found)) if any(found) else 'an unknown version'}"
            " (before 2.11 a new stream leader could answer before it had applied its log,"
            " and de-duplication and compare-and-set could let a second claim through)"
        )


def report(info: dict[str, Any], durability: str, stream: str, shown: str) -> None:
    """Log at INFO what ``durability`` protects against on this stream (WARNING: it cannot)."""
    config = info.get("config") or {}
    replicas = int(config.get("num_replicas") or 1)
    cluster = info.get("cluster") or {}
    peers = cluster.get("replicas") or []
    behind = [str(p.get("name")) for p in peers if p.get("offline") or not p.get("current", True)]
    if durability == "fast":
        if replicas >= REPLICATED_REPLICAS:
            log.info(
                "anarchon: NATS durability 'fast' on stream %s (R%d): a claim is acknowledged"
                " once a majority stored it, and remembered for the duplicate window only; a"
                " power loss of the majority before its fsync can lose it",
                stream,
                replicas,
            )
        else:
            log.info(
                "anarchon: NATS durability 'fast' on stream %s (R%d): a claim is acknowledged"
                " before it is on disk; a server crash can lose it (a second run of the slot)."
                " Use durability='replicated' on a 3-node cluster to survive one",
                stream,
                replicas,
            )
        return
    if replicas < REPLICATED_REPLICAS:  # pragma: no cover - the stream is created/updated R3
        log.warning(
            "anarchon: NATS durability 'replicated' but stream %s has %d replica(s) on %s:"
            " a claim does not survive the loss of its server",
            stream,
            replicas,
            shown,
        )
        return
    if behind:
        log.warning(
            "anarchon: NATS durability 'replicated' on stream %s (R%d): replica(s) %s are"
            " offline or behind; a claim waits for a majority, one more failure stops claims",
            stream,
            replicas,
            ", ".join(behind),
        )
    log.info(
        "anarchon: NATS durability 'replicated' on stream %s (R%d, leader %s): a claim is a"
        " compare-and-set on its slot's subject, acknowledged once a majority stored it; it"
        " survives the loss of any one server and needs no duplicate window or clock. It"
        " does not survive a power loss of the majority before its fsync unless the servers"
        " run with jetstream sync_interval: always",
        stream,
        replicas,
        cluster.get("leader", "?"),
    )
