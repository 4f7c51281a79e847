"""The status page on a real Redis with 2,000 jobs: one ``GET api/status`` is cheap, whatever the fleet.

The scenario test fills a store with 2,000 declared jobs (two instances each,
``RUNS`` runs each, some errors, some runs in progress; the filler of
``benchmarks/web/status_page.py``), serves the page with
uvicorn, and prints for one ``GET``: wall time, bytes and the Redis commands it
cost (``INFO commandstats`` before and after, commands run by scripts
included). The gate test checks the bound itself on a small store: a page
costs the same number of commands in a fleet of 40 jobs as in one of 120.
"""

from __future__ import annotations

import asyncio
import importlib.util
import socket
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
import uvicorn
from anarchon.web import BackendSource, create_app
from anarchon_testservers.redis import Server
from starlette.applications import Starlette

RUNS = 45
"""Runs per job: more than the page shows (``history_limit`` 40), so every read is full."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def _serving(app: Starlette) -> Iterator[str]:
    """Serve ``app`` with uvicorn in a thread (its own loop); yield its URL."""
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive(), "uvicorn stopped before it started"
        assert time.monotonic() < deadline, "uvicorn did not start within 30 s"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def _load_fill() -> Callable[[str, int, int, str], Coroutine[Any, Any, None]]:
    """The store filler of ``benchmarks/web/status_page.py`` (the benchmark and the test share it)."""
    path = Path(__file__).resolve().parents[3] / "benchmarks" / "web" / "status_page.py"
    spec = importlib.util.spec_from_file_location("status_page_benchmark", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fill: Callable[[str, int, int, str], Coroutine[Any, Any, None]] = module.fill
    return fill


_fill = _load_fill()


def _commands(client: redis.Redis) -> int:
    stats = client.info("commandstats")
    return sum(int(v["calls"]) for k, v in stats.items() if k != "cmdstat_info")


def _measured_get(client: redis.Redis, url: str) -> tuple[float, int, int, httpx.Response]:
    """One GET: (seconds, bytes, Redis commands, response). Nothing else uses the server meanwhile."""
    before = _commands(client)
    started = time.perf_counter()
    response = httpx.get(url, timeout=60)
    seconds = time.perf_counter() - started
    # the INFO calls themselves are left out (cmdstat_info)
    return seconds, len(response.content), _commands(client) - before, response


def _page_figures(server: Server, prefix: str, page_url: str) -> list[tuple[str, float, int, int]]:
    app = create_app(BackendSource(f"{server.url}?prefix={prefix}"))
    client = redis.Redis.from_url(server.redis_url)
    figures = []
    with _serving(app) as url:
        httpx.get(
            url + "/api/status?page=2", timeout=60
        ).raise_for_status()  # connect, load scripts
        for label, path in (
            ("first page, default 50 jobs", page_url),
            ("same page again (cached)", page_url),
            ("last page", "/api/status?page=40"),
            ("200 jobs (largest page)", "/api/status?per_page=200&page=3"),
        ):
            seconds, size, commands, response = _measured_get(client, url + path)
            assert response.status_code == 200, response.text
            body = response.json()
            assert body["total"] == 2_000
            assert "hunter2" not in response.text
            figures.append((label, seconds, size, commands))
    client.close()
    return figures


@pytest.mark.scenario
def test_a_2000_job_status_answers_within_1s_and_1mb(redis_server: Server, prefix: str) -> None:
    started = time.perf_counter()
    asyncio.run(_fill(redis_server.url, 2_000, RUNS, prefix))
    filled = time.perf_counter() - started
    figures = _page_figures(redis_server, prefix, "/api/status")
    print(f"\n2,000 jobs x {RUNS} runs on {redis_server.kind} (filled in {filled:.1f} s)")
    print(f"{'GET api/status':<32} {'seconds':>8} {'bytes':>9} {'Redis commands':>15}")
    for label, seconds, size, commands in figures:
        print(f"{label:<32} {seconds:>8.3f} {size:>9,} {commands:>15,}")
    first, cached, last, widest = figures
    for one_page in (first, last):
        assert one_page[1] < 1.0
        assert one_page[2] < 1_000_000
    assert cached[3] == 0
    assert widest[1] < 1.0
    assert widest[2] < 4_000_000  # 200 jobs x 40 runs, errors included


async def _page_commands(server: Server, prefix: str) -> int:
    """Redis commands of one uncached GET of a 20-job page, through ASGI (no server)."""
    app = create_app(BackendSource(f"{server.url}?prefix={prefix}"), per_page=20)
    client = redis.Redis.from_url(server.redis_url)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
        (await http.get("/api/status?page=2")).raise_for_status()  # connect, load scripts
        before = _commands(client)
        response = await http.get("/api/status")
        used = _commands(client) - before
        before = _commands(client)
        readers = await asyncio.gather(*(http.get("/api/status?per_page=19") for _ in range(5)))
        shared = _commands(client) - before
    assert response.status_code == 200
    assert len(response.json()["jobs"]) == 20
    # five readers of an uncached page at once: one store read (19 jobs: at most a 20-job page)
    assert len({r.content for r in readers}) == 1
    assert shared <= used
    client.close()
    return used


async def test_a_page_costs_the_same_commands_in_a_small_and_a_larger_fleet(
    redis_server: Server,
) -> None:
    small, large = (
        "webs:" + str(time.monotonic_ns()) + ":",
        "webl:" + str(time.monotonic_ns()) + ":",
    )
    await _fill(redis_server.url, 40, 3, small)
    await _fill(redis_server.url, 120, 3, large)
    in_small = await _page_commands(redis_server, small)
    in_large = await _page_commands(redis_server, large)
    assert in_small == in_large
    assert in_large < 20 * 10  # a few commands per job of the page, none per job of the fleet
