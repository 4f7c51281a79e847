"""``benchmarks/fleet/fleet_raw.py`` keeps working: every reference side runs on Redis and PostgreSQL.

The raw sides reach into the backends' internals (script layout, batch
statements) to send the same physical operation as the backend; when those
change, a side breaks or reports itself unavailable. This runs a small
reference on real servers and asserts that every side claimed its items,
without asserting any timing.
"""

from __future__ import annotations

import asyncio

import pytest
from fleet_raw import reference  # type: ignore[import-not-found,unused-ignore]
from fleet_stores import open_store  # type: ignore[import-not-found,unused-ignore]


@pytest.mark.parametrize("kind", ["redis", "postgres"])
def test_every_reference_side_claims_its_items(kind: str) -> None:
    store = open_store(kind)
    try:
        sides = asyncio.run(reference(store, store.url(), 60, 25, 10.0, rounds=1))
    finally:
        store.stop()
    by_name = {side.name: side for side in sides}
    assert set(by_name) == {"backend", "raw batched", "raw single"}
    for side in sides:
        assert side.error == "", f"{side.name}: {side.error}"
        assert side.items > 0, side
    assert by_name["backend"].items == 60
    assert by_name["raw batched"].items == 60
    assert "native" in by_name["backend"].how
