"""Prefixes that cannot mix: a prefix nested in another one used on the stream is refused.

Subjects are the prefix followed by the job's tokens, so two applications
whose prefixes nest on one stream (``cron.`` and ``cron._fleet.d.``) share
subjects: a reader of the shorter one (``<prefix>>``, ``<prefix>_fleet.d.>``)
gets the other's messages, and its fleet subjects can be the other's job
subjects. :func:`check_prefix` keeps the prefixes used on each stream in the
key-value bucket :data:`PREFIXES_BUCKET` (key ``<stream>``: a JSON list) and
refuses, at ``init()``, a prefix that starts with another one of the same
stream or that another one starts with (docs/backends/nats.md, "Subjects").
The list is written with compare-and-set on its revision: of two nesting
applications starting at the same moment, the second to write sees the
first and is refused.
"""

from __future__ import annotations

import json

import nats.errors
from anarchon.backend.foreign import stored_data
from anarchon.errors import BackendUnavailableError, InvalidConfigError
from nats.aio.client import Client
from nats.js.errors import (
    BadRequestError,
    BucketNotFoundError,
    KeyDeletedError,
    KeyNotFoundError,
    KeyWrongLastSequenceError,
    NoStreamResponseError,
    ServiceUnavailableError,
)

__all__ = ["PREFIXES_BUCKET", "check_prefix", "prefix_key"]

PREFIXES_BUCKET = "anarchon_prefixes"
"""The key-value bucket of the prefixes used on each stream of this account."""


def prefix_key(stream: str) -> str:
    """The bucket key that lists the prefixes used on ``stream`` (a JSON list)."""
    return stream


_CAS_TRIES = 20
"""How often a write that lost a race with another instance's is read and tried again."""


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
    key = prefix_key(stream)
    for _ in range(_CAS_TRIES):
        try:
            entry = await kv.get(key)
        except (KeyNotFoundError, KeyDeletedError):
            used: list[str] = []
            revision = None
        else:
            with stored_data(f"{PREFIXES_BUCKET}/{key}", "a JSON list of prefixes"):
                loaded = json.loads(entry.value or b"[]")
                if not isinstance(loaded, list) or not all(isinstance(p, str) for p in loaded):
                    raise ValueError("not a list of strings")
            used, revision = loaded, entry.revision
        nested = sorted(
            other
            for other in used
            if other != prefix and (other.startswith(prefix) or prefix.startswith(other))
        )
        if nested:
            raise InvalidConfigError(
                f"{shown}: prefix {prefix!r} nests with prefix {nested[0]!r}, already used on"
                f" stream {stream!r}: their subjects can mix (a reader of one gets the"
                " other's messages); use prefixes where neither starts with the other, or"
                f" another stream, or remove {nested[0]!r} from key {key!r} of bucket"
                f" {PREFIXES_BUCKET!r} if unused"
            )
        if prefix in used:
            return
        value = json.dumps(sorted([*used, prefix])).encode()
        try:
            if revision is None:
                await kv.create(key, value)
            else:
                await kv.update(key, value, last=revision)
            return
        except (KeyWrongLastSequenceError, BadRequestError):
            continue  # another instance wrote first: read its list and check again
    raise BackendUnavailableError(
        f"{shown}: the prefixes of stream {stream!r} kept changing while read; try again"
    )
