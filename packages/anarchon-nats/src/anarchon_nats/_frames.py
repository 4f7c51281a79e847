"""A chunk of requests written as one buffer of ``PUB``/``HPUB`` frames (docs/backends/nats.md).

nats-py's ``publish()`` checks the subject and reply, builds the header block
and the frame, and queues a flush, all in Python, for each message: with
10,000 claims and results due together that was about 12 µs of client CPU
per job-slot (benchmarks/README.md). The frames of a chunk are the same bytes
nats-py would send; here they are built with one ``join`` and handed to the
client's outgoing buffer at once, followed by one flush.

That buffer is not public API (``Client._send_command`` and
``Client._flush_pending``). :func:`write_frames` uses it only while the
connection is up and the client has those members, and returns False
otherwise, so the caller publishes one by one through ``publish()`` (during a
reconnect that also keeps nats-py's own buffering rules). Subjects, replies
and header values are anarchon's own, checked when a job is added (no
whitespace or line breaks), so nats-py's per-message checks have nothing
left to catch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nats.aio.client import Client
from nats.errors import MaxPayloadError

__all__ = ["Request", "frames", "write_frames"]

Request = tuple[str, bytes, "dict[str, str] | None"]
"""``(subject, payload, headers)`` of one request."""


def frames(requests: Sequence[Request], reply: str) -> bytes:
    """The ``PUB``/``HPUB`` frames of ``requests``; request ``i`` answers to ``<reply><i>``."""
    parts: list[bytes] = []
    add = parts.append
    for index, (subject, payload, headers) in enumerate(requests):
        if headers is None:
            add(f"PUB {subject} {reply}{index} {len(payload)}\r\n".encode())
        else:
            if len(headers) == 1:  # a claim's Nats-Msg-Id: no generator
                ((key, value),) = headers.items()
                head = f"NATS/1.0\r\n{key}: {value}\r\n\r\n".encode()
            else:
                lines = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
                head = f"NATS/1.0\r\n{lines}\r\n".encode()
            size = len(head)
            add(f"HPUB {subject} {reply}{index} {size} {size + len(payload)}\r\n".encode())
            add(head)
        add(payload)
        add(b"\r\n")
    return b"".join(parts)


async def write_frames(nc: Client, requests: Sequence[Request], reply: str) -> bool:
    """Queue every request's frame on ``nc`` and flush once; False: publish one by one instead."""
    client: Any = nc
    send = getattr(client, "_send_command", None)
    flush = getattr(client, "_flush_pending", None)
    if send is None or flush is None or not nc.is_connected or nc.is_draining_pubs:
        return False
    limit = nc.max_payload
    if any(len(payload) > limit for _s, payload, _h in requests):
        raise MaxPayloadError
    data = frames(requests, reply)
    stats = getattr(client, "stats", None)
    if isinstance(stats, dict):
        stats["out_msgs"] = stats.get("out_msgs", 0) + len(requests)
        stats["out_bytes"] = stats.get("out_bytes", 0) + sum(len(p) for _s, p, _h in requests)
    await send(data)
    queue = getattr(client, "_flush_queue", None)
    if queue is None or queue.empty():  # as publish(): a flush already queued sends ours too
        await flush()
    return True
