"""The hiredis packer packs exactly what the driver's own packer packs."""

from __future__ import annotations

import pytest
import redis.asyncio as aio
import valkey.asyncio as valkey_aio
from anarchon_redis._client import REDIS_DRIVER, VALKEY_DRIVER
from anarchon_redis._packer import HIREDIS_PACKING, pack_with_hiredis
from redis.exceptions import DataError

COMMANDS = [
    ("EVALSHA", "ab" * 20, 2, "k:1", b"k:\xff", 0, -1, 1 << 70, 2.5, 0.1, 1e20, "é", ""),
    ("CONFIG GET", "maxmemory"),
    (b"CLIENT SETNAME", "anarchon"),
    ("SET", "k", "x" * 100_000),
]


def test_hiredis_is_installed() -> None:
    assert HIREDIS_PACKING, "the redis extra installs hiredis"


@pytest.mark.parametrize("module", [aio, valkey_aio], ids=["redis", "valkey"])
def test_same_bytes_as_the_driver(module: object) -> None:
    client = module.Redis() if module is aio else module.Valkey()  # type: ignore[attr-defined]
    plain = client.connection_pool.make_connection()
    assert pack_with_hiredis(client)
    fast = client.connection_pool.make_connection()
    assert type(fast) is not type(plain)
    for command in COMMANDS:
        assert b"".join(fast.pack_command(*command)) == b"".join(plain.pack_command(*command))
    assert b"".join(fast.pack_commands(COMMANDS)) == b"".join(plain.pack_commands(COMMANDS))


def test_refused_arguments_raise_the_drivers_error() -> None:
    client = aio.Redis()
    assert pack_with_hiredis(client)
    fast = client.connection_pool.make_connection()  # type: ignore[no-untyped-call]
    with pytest.raises(DataError):
        fast.pack_command("SET", "k", True)
    with pytest.raises(DataError):
        fast.pack_command("SET", "k", None)


def test_other_encodings_keep_the_drivers_packer() -> None:
    client = aio.Redis(encoding="latin-1")
    assert not pack_with_hiredis(client)


def test_clients_the_backend_opens_pack_in_c() -> None:
    for driver, url in (
        (REDIS_DRIVER, "redis://127.0.0.1:1/0"),
        (VALKEY_DRIVER, "valkey://127.0.0.1:1/0"),
    ):
        for client in (
            driver.open_url(url),
            driver.open_options({"url": url}),
            driver.open_options({}),
        ):
            assert getattr(client.connection_pool.connection_class, "_anarchon_hiredis", False)
