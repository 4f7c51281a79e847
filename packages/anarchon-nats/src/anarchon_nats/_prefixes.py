"""Prefixes that cannot mix: a prefix nested in another one used on the stream is refused.

Subjects are the prefix followed by the job's tokens, so two applications
whose prefixes nest on one stream (``cron.`` and ``cron._fleet.d.``) share
subjects: a reader of the shorter one (``<prefix>>``, ``<prefix>_fleet.d.>``)
gets the other's messages, and its fleet subjects can be the other's job
subjects. :func:`check_prefix` keeps the prefixes used on each stream in the
key-value bucket :data:`PREFIXES_BUCKET` (key ``<stream>.<base64url of the
prefix>``) and refuses, at ``init()``, a prefix that starts with another one
of the same stream or that another one starts with (docs/backends/nats.md,
"Subjects"). A prefix is added first and checked after: of two nesting
applications starting at the same moment, neither gets in.
"""

from __future__ import annotations

import base64

import nats.errors
from anarchon.errors import BackendUnavailableError, InvalidConfigError
from nats.aio.client import Client
from nats.js.errors import (
    BadRequestError,
    BucketNotFoundError,
    NoKeysError,
    NoStreamResponseError,
    ServiceUnavailableError,
)
from nats.js.kv import KeyValue

__all__ = ["PREFIXES_BUCKET", "check_prefix", "prefix_key"]

PREFIXES_BUCKET = "anarchon_prefixes"
"""The key-value bucket of the prefixes used on each stream of this account."""


def prefix_key(stream: str, prefix: str) -> str:
    """The bucket key of ``prefix`` on ``stream`` (any prefix is one valid key token)."""
    token = base64.urlsafe_b64encode(prefix.encode()).decode().rstrip("=")
    return f"{stream}.{token}"


def _prefix_of(key: str) -> str | None:
    token = key.rpartition(".")[2]
    try:
        return base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    except (ValueError, UnicodeDecodeError):
        return None  # not a key this module wrote: ignored


async def _keys(kv: KeyValue, stream: str) -> list[str]:
    """The bucket's keys of ``stream`` (filtered here: the driver's filters vary by version)."""
    try:
        keys = await kv.keys()
    except NoKeysError:
        return []
    return [k for k in keys if k.startswith(f"{stream}.")]


async def check_prefix(nc: Client, stream: str, prefix: str, replicas: int, shown: str) -> None:
    """Add ``prefix`` to ``stream``'s prefixes; refuse it if it nests with one already there.

    A bucket that does not answer yet (a cluster electing its leader) is a
    ``BackendUnavailableError``: ``init()`` waits for it as for the stream.
    """
    try:
        await _check_prefix(nc, stream, prefix, replicas, shown)
    except (NoStreamResponseError, ServiceUnavailableError, nats.errors.TimeoutError) as error:
        raise BackendUnavailableError(
            f"{shown}: the bucket {PREFIXES_BUCKET!r} does not answer yet ({error})"
        ) from error


async def _check_prefix(nc: Client, stream: str, prefix: str, replicas: int, shown: str) -> None:
    js = nc.jetstream()
    try:
        kv = await js.key_value(PREFIXES_BUCKET)
    except BucketNotFoundError:
        try:
            kv = await js.create_key_value(bucket=PREFIXES_BUCKET, history=1, replicas=replicas)
        except BadRequestError:  # created in between by another instance
            kv = await js.key_value(PREFIXES_BUCKET)
    key = prefix_key(stream, prefix)
    existing = await _keys(kv, stream)
    added = key not in existing
    if added:
        await kv.put(key, prefix.encode())
        existing = await _keys(kv, stream)
    nested = sorted(
        other
        for other in (_prefix_of(k) for k in existing)
        if other is not None
        and other != prefix
        and (other.startswith(prefix) or prefix.startswith(other))
    )
    if not nested:
        return
    if added:
        await kv.delete(key)
    raise InvalidConfigError(
        f"{shown}: prefix {prefix!r} nests with prefix {nested[0]!r}, already used on stream"
        f" {stream!r}: their subjects can mix (a reader of one gets the other's messages);"
        " use prefixes where neither starts with the other, or another stream, or delete"
        f" key {prefix_key(stream, nested[0])!r} of bucket {PREFIXES_BUCKET!r} if unused"
    )
