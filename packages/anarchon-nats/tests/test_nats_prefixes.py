"""Prefixes that nest on one stream are refused at ``init()`` (docs/backends/nats.md, "Subjects").

Two applications on one stream, ``<base>`` and ``<base>_fleet.d.``, would mix
subjects: the first one's fleet reader gets the second one's job messages.
The second to start is refused with ``ANARCHON_INVALID_CONFIG`` (and never
written to the bucket); the same prefix again starts.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from anarchon.errors import InvalidConfigError
from anarchon_nats import NatsBackend


def _started(url: str, stream: str, prefix: str) -> None:
    async def main() -> None:
        backend = NatsBackend(url, stream=stream, prefix=prefix)
        try:
            await backend.init()
        finally:
            await backend.close()

    asyncio.run(main())


def test_a_prefix_nested_in_one_in_use_on_the_stream_is_refused(nats_url: str) -> None:
    stream = f"P{uuid.uuid4().hex[:8].upper()}"
    base = f"np{uuid.uuid4().hex[:6]}."
    _started(nats_url, stream, base)
    _started(nats_url, stream, base)  # the same application again
    for nested in (f"{base}_fleet.d.", f"{base}a."):
        with pytest.raises(InvalidConfigError) as caught:
            _started(nats_url, stream, nested)
        assert caught.value.code == "ANARCHON_INVALID_CONFIG"
        assert base in str(caught.value)
    _started(nats_url, stream, base)  # the refused ones were never added
    with pytest.raises(InvalidConfigError):  # and are refused again
        _started(nats_url, stream, f"{base}a.")
