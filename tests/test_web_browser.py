"""The status page in headless Chromium (Debian's, via selenium) with a live two-process fleet.

Two OS processes run two jobs on one SQLite file; the page, served by uvicorn
from the same file, must show both jobs with runs of both instances, and a
pause button pressed in the browser must pause the job in the store.
``ANARCHON_UPDATE_SCREENSHOT=1`` also writes docs/img/status-page.png.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import uvicorn
from anarchon._core import rendezvous_candidates
from anarchon.backend.memory import MemoryBackend
from anarchon.backend.registry import resolve_backend
from anarchon.fleet.roster import roster_of
from anarchon.fleet.types import Declaration
from anarchon.testing.fleet import Fleet, start_fleet
from anarchon.web import BackendSource, create_app
from anarchon_testservers.chromium import chromium_paths
from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait
from starlette.applications import Starlette

ROOT = Path(__file__).resolve().parents[1]
SCREENSHOT = ROOT / "docs" / "img" / "status-page.png"


@dataclass
class Page:
    url: str
    store: str
    fleet: Fleet
    driver: webdriver.Chrome


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Page]:
    browser, driver_path = chromium_paths()  # fails loudly when it cannot be provisioned
    tmp = tmp_path_factory.mktemp("web")
    store = f"sqlite:///{tmp / 'fleet.db'}"
    fleet = start_fleet(
        store,
        tmp_path=tmp / "fleet",
        processes=2,
        jobs=2,
        job="billing",
        every_ms=400,
        jitter_ms=0,
        handler_ms=150,
        window_s=40.0,
        startup_s=10.0,
        scheduler_options={"lease": "5s", "heartbeat": "1s"},
    )
    app = create_app(
        BackendSource(store, jobs=fleet.jobs), refresh_s=0.5, allow_writes_without_token=True
    )
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1500,660"):
        options.add_argument(flag)
    with fleet:
        fleet.wait_started(timeout=60)
        with _serving(app) as url:
            driver = webdriver.Chrome(service=Service(driver_path), options=options)
            try:
                yield Page(url, store, fleet, driver)
            finally:
                driver.quit()


@contextmanager
def _serving(app: Starlette) -> Iterator[str]:
    """Serve ``app`` with uvicorn in a thread; yield its URL."""
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
        yield f"http://127.0.0.1:{port}/"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


_RUNS_JS = """
return Array.from(document.querySelectorAll('tr[data-job="' + arguments[0] + '"] .timeline .run'))
  .map((run) => [run.dataset.status, Number(run.dataset.slot), run.title]);
"""


def _runs(page: Page, job: str) -> list[tuple[str, int, str]]:
    """The timeline of ``job`` as the page shows it now (read in one script: the page re-renders)."""
    return [tuple(run) for run in page.driver.execute_script(_RUNS_JS, job)]


def _run_instances(page: Page, job: str) -> set[str]:
    return {title.split(" on ")[1].split(",")[0] for _, _, title in _runs(page, job)}


def _both_instances(page: Page, job: str) -> Callable[[WebDriver], bool]:
    return lambda _driver: _run_instances(page, job) == {"proc-0", "proc-1"}


async def _store_slots(store: str, job: str) -> set[int]:
    backend = resolve_backend(store)
    await backend.init()
    try:
        return {r.slot for r in await backend.history(job, 200)}
    finally:
        await backend.close()


def _click(page: Page, selector: str, timeout: float = 60) -> None:
    """Click ``selector`` with the mouse, again if a refresh replaced it under the click."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            page.driver.find_element(By.CSS_SELECTOR, selector).click()
            return
        except (StaleElementReferenceException, NoSuchElementException):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_the_page_shows_the_jobs_and_runs_of_both_processes(page: Page) -> None:
    page.driver.get(page.url)
    wait = WebDriverWait(page.driver, 60, poll_frequency=0.5)
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, 'body[data-loaded="true"]'))
    for job in page.fleet.jobs:
        wait.until(_both_instances(page, job))
    rows = page.driver.execute_script(
        "return Array.from(document.querySelectorAll('#jobs tbody tr')).map((r) => r.dataset.job);"
    )
    assert rows == page.fleet.jobs
    for job in page.fleet.jobs:
        runs = _runs(page, job)
        statuses = {status for status, _, _ in runs}
        assert statuses <= {"ok", "running", "skipped"}, statuses  # skipped: overlap, under load
        # what the timeline shows is what the store holds
        shown = {slot for _, slot, _ in runs}
        assert shown
        assert shown <= asyncio.run(_store_slots(page.store, job))
    assert page.driver.find_elements(By.CSS_SELECTOR, 'button[data-action="pause"]')
    if os.environ.get("ANARCHON_UPDATE_SCREENSHOT") == "1":
        time.sleep(1.0)
        shot = Path(page.fleet.outs[0]).parent / "status-page.png"
        assert page.driver.save_screenshot(str(shot))
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, SCREENSHOT)


def test_a_pause_pressed_in_the_browser_pauses_the_job_in_the_store(page: Page) -> None:
    job = page.fleet.jobs[0]
    page.driver.get(page.url)
    wait = WebDriverWait(page.driver, 60, poll_frequency=0.5)
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, 'body[data-loaded="true"]'))
    _click(page, f'button[data-job="{job}"][data-action="pause"]')
    wait.until(
        lambda d: (
            d.find_elements(By.CSS_SELECTOR, f'button[data-job="{job}"][data-action="resume"]')
            or d.find_element(By.ID, "error").text
        )
    )
    assert page.driver.find_element(By.ID, "error").text == ""
    backend = resolve_backend(page.store)

    async def controls() -> dict[str, bool]:
        await backend.init()
        try:
            return {name: c.paused for name, c in (await backend.controls()).items()}
        finally:
            await backend.close()

    assert asyncio.run(controls()) == {job: True}


def test_with_a_token_the_page_asks_for_it_before_a_pause_is_stored(page: Page) -> None:
    backend = MemoryBackend()
    app = create_app(BackendSource(backend, jobs=["nightly"]), token="s3cret", refresh_s=0.5)
    selector = 'button[data-job="nightly"][data-action="pause"]'
    wait = WebDriverWait(page.driver, 60, poll_frequency=0.2)
    with _serving(app) as url:
        page.driver.get(url)
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, 'body[data-loaded="true"]'))
        token = page.driver.find_element(By.ID, "token")
        assert token.is_displayed()
        _click(page, selector)  # no token yet
        wait.until(lambda d: "ANARCHON_UNAUTHORIZED" in d.find_element(By.ID, "error").text)
        assert asyncio.run(backend.controls()) == {}
        token.send_keys("s3cret")
        _click(page, selector)
        wait.until(
            lambda d: d.find_elements(
                By.CSS_SELECTOR, 'button[data-job="nightly"][data-action="resume"]'
            )
        )
        assert page.driver.find_element(By.ID, "error").text == ""
    assert asyncio.run(backend.controls())["nightly"].paused is True


def test_the_page_shows_the_jobs_a_page_at_a_time(page: Page) -> None:
    names = ["alpha", "bravo", "charlie"]
    app = create_app(BackendSource(MemoryBackend(), jobs=names), per_page=2, refresh_s=0.5)
    wait = WebDriverWait(page.driver, 60, poll_frequency=0.2)
    rows_js = (
        "return Array.from(document.querySelectorAll('#jobs tbody tr')).map((r) => r.dataset.job);"
    )
    with _serving(app) as url:
        page.driver.get(url)
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, 'body[data-loaded="true"]'))
        wait.until(lambda d: d.execute_script(rows_js) == names[:2])
        assert page.driver.find_element(By.ID, "pager").is_displayed()
        assert not page.driver.find_elements(By.CSS_SELECTOR, "button[data-action]")  # read-only
        _click(page, "#next")
        wait.until(lambda d: d.execute_script(rows_js) == names[2:])
        assert page.driver.find_element(By.ID, "page").text == "page 2 of 2 (3 jobs)"


_MEMBERS_JS = """
return Array.from(document.querySelectorAll('#members tbody tr'))
  .map((row) => [row.dataset.member || null, Array.from(row.cells).map((cell) => cell.textContent)]);
"""


def test_the_page_shows_the_live_members_and_each_jobs_candidates(
    page: Page, tmp_path: Path
) -> None:
    """Three membership records in a SQLite store: the members table lists them, and the job's
    row names its two candidates in rank order."""
    store = f"sqlite:///{tmp_path / 'members.db'}"
    names = ["m-1", "m-2", "m-3"]
    roster = roster_of(2, [("nightly", "f" * 16)])

    async def fill() -> None:
        backend = resolve_backend(store)
        await backend.init()
        try:
            for name in names:
                entry = Declaration("nightly", name, "f" * 16, "cron 0 3 * * * UTC", 0, 0)
                await backend.declare([entry], 600_000)
                await backend.refresh_member(name, roster, 600_000)
        finally:
            await backend.close()

    asyncio.run(fill())
    app = create_app(store, refresh_s=0.5)
    wait = WebDriverWait(page.driver, 60, poll_frequency=0.2)
    candidates_js = (
        "return document.querySelector('tr[data-job=\"nightly\"] td.candidates').textContent;"
    )
    with _serving(app) as url:
        page.driver.get(url)
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, 'body[data-loaded="true"]'))
        wait.until(lambda d: [m for m, _ in d.execute_script(_MEMBERS_JS)] == names)
        rows = page.driver.execute_script(_MEMBERS_JS)
        shown = page.driver.execute_script(candidates_js)
    expected = rendezvous_candidates(names, "nightly", 2)
    assert shown == ", ".join(expected)
    for _, (instance, k, group, seen, expires, count) in rows:
        assert k == "2"
        assert group == roster[:11]
        assert seen.endswith(" s ago")
        assert float(expires.split()[0]) > 500  # a 600 s record
        assert count == ("1 job(s)" if instance in expected else "0 job(s)")


def test_a_fleet_without_membership_records_says_so(page: Page) -> None:
    """The two-process fleet runs with candidates=None: no record, and the page says why."""
    page.driver.get(page.url)
    wait = WebDriverWait(page.driver, 60, poll_frequency=0.5)
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, 'body[data-loaded="true"]'))
    [(member, cells)] = page.driver.execute_script(_MEMBERS_JS)
    assert member is None
    assert cells[0].startswith("no live members")
