"""Nothing blocks the event loop: every GET route of every group (each group's root, health, OpenAPI document and
fetch log among them) and the front door (`/` as JSON and as HTML, `/openapi.json`), served over every group's
demo data with the artist-history index built, in asyncio debug mode. A callback that holds the loop 50 ms or more
(blocking I/O such as a synchronous SQLite read, or heavy work that belongs in a thread) fails the test. The time a
callback holds the loop is its wall time less the time its thread waited for a CPU (Linux's per-thread schedstat),
so a CPU hog beside the suite does not make a 20 ms callback look like a 60 ms one, while a blocking read or sleep
still counts whole; asyncio's own wall-time report is off. It also fails on a SQLite
connection opened on the loop's own thread (the server reads through aiosqlite, whose connections are opened on
their own threads): that catches a blocking open however fast the disk happens to be.

Requests are served one at a time, so each report belongs to the request under way. A request found slow is
served again on a fresh app (cold caches) twice more; it fails only when slow every time, so that a scheduling
hiccup of a loaded machine is not taken for blocking."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from chartgw.api.access import KeyChecker, RateLimiter
from chartgw.core.clock import fixed
from chartgw.groups import GROUPS
from chartgw.http.app import build_app, declared_routes
from chartgw.index import history as index
from tests.fixtures import FIXED_NOW, KEY_HEADERS, TEST_KEY, copy_data, data_dir
from tests.fixtures import settings as run_settings

SLOW_CALLBACK_SECONDS = 0.05
ANSWERED_AT = FIXED_NOW + timedelta(hours=1)
TRIES = 3


def _first(path: Path, sql: str) -> str:
    db = sqlite3.connect(path)
    try:
        row = db.execute(sql).fetchone()
    finally:
        db.close()
    assert row is not None, f"{path.name}: nothing for {sql}"
    return str(row[0])


def examples(data: Path) -> dict[str, tuple[str, ...]]:
    """Requests with valid parameters over the demo data, for every route with path or required parameters
    (by its full path); the others are served as they are."""
    station = _first(data / "radio.sqlite", "SELECT station_id FROM stations ORDER BY clickcount DESC")
    asin = _first(data / "retail-physical.sqlite", "SELECT item_id FROM entries WHERE item_id IS NOT NULL")
    slug = _first(data / "ranking-charts.sqlite", "SELECT target FROM snapshots ORDER BY target")
    week = _first(data / "ranking-charts.sqlite", f"SELECT max(chart_date) FROM snapshots WHERE target = '{slug}'")
    uk_week = _first(data / "uk-charts.sqlite", "SELECT max(chart_date) FROM snapshots WHERE target = 'singles'")
    year = _first(data / "dj-rankings.sqlite", "SELECT max(substr(target, 6)) FROM snapshots WHERE target GLOB 'list/*'")
    dj = _first(data / "dj-rankings.sqlite", "SELECT substr(target, 4) FROM snapshots WHERE target GLOB 'dj/*'")
    return {
        "/streaming/chart": ("/streaming/chart?chart_date=2026-11-17&limit=2",),
        "/streaming/search": ("/streaming/search?q=love&limit=3",),
        "/streaming/history": ("/streaming/history?artist=Taylor%20Swift&title=Cruel%20Summer",),
        "/video/charts/{chart_type}/{period}/{country}/{date}": ("/video/charts/top-songs/weekly/global/2026-11-19",),
        "/video/shorts/global/{period}/{date}": ("/video/shorts/global/weekly/2026-11-05",),
        "/video/{country}/latest": ("/video/kr/latest",),
        "/digital-sales/{combo}/{country}/latest": ("/digital-sales/top-songs/us/latest",),
        "/korea-chart/charts": ("/korea-chart/charts?site=portal-a&chart_type=realtime",),
        "/korea-chart/{site}/charts/{chart_type}": ("/korea-chart/portal-c/charts/weekly",),
        "/recognition/top-200/{market}/latest": ("/recognition/top-200/brazil/latest",),
        "/recognition/genre/{market}/{genre}/latest": ("/recognition/genre/france/pop/latest",),
        "/recognition/viral/{market}/latest": ("/recognition/viral/world/latest",),
        "/recognition/top-50/{market}/{city}/latest": ("/recognition/top-50/australia/melbourne/latest",),
        "/recognition/search": ("/recognition/search?q=love",),
        "/ranking-charts/charts/{chart_slug}/snapshots": (f"/ranking-charts/charts/{slug}/snapshots",),
        "/ranking-charts/charts/{chart_slug}/dates": (f"/ranking-charts/charts/{slug}/dates",),
        "/ranking-charts/charts/{chart_slug}/latest": (f"/ranking-charts/charts/{slug}/latest",),
        "/ranking-charts/charts/{chart_slug}/preset": (f"/ranking-charts/charts/{slug}/preset?preset=gainers",),
        "/ranking-charts/charts/{chart_slug}/weeks-ago/{weeks_ago}": (f"/ranking-charts/charts/{slug}/weeks-ago/1",),
        "/ranking-charts/charts/{chart_slug}/{chart_date}": (f"/ranking-charts/charts/{slug}/{week}",),
        "/ranking-charts/search": ("/ranking-charts/search?q=love",),
        "/uk-charts/search": ("/uk-charts/search?q=love",),
        "/uk-charts/{chart_key}/latest": ("/uk-charts/singles/latest",),
        "/uk-charts/{chart_key}/{week_start}": (f"/uk-charts/singles/{uk_week}",),
        "/social-trends/trends/{location_slug}": ("/social-trends/trends/worldwide",),
        "/social-trends/trends/by-woeid/{woeid}": ("/social-trends/trends/by-woeid/1",),
        "/dj-rankings/search": ("/dj-rankings/search?q=a",),
        "/dj-rankings/djs/{slug}": (f"/dj-rankings/djs/{dj}",),
        "/dj-rankings/{year}": (f"/dj-rankings/{year}",),
        "/dj-rankings/{year}/{rank}": (f"/dj-rankings/{year}/1",),
        "/retail-digital/charts/{chart_key}/latest": ("/retail-digital/charts/us-digital-songs/latest",),
        "/retail-music/top-songs/rank/{rank}": ("/retail-music/top-songs/rank/3",),
        "/retail-physical/best-sellers/rank/{rank}": ("/retail-physical/best-sellers/rank/3",),
        "/retail-physical/products/{asin}/history": (f"/retail-physical/products/{asin}/history",),
        "/radio/stations/{station_id}": (f"/radio/stations/{station}",),
        "/radio/current/{station_id}": (f"/radio/current/{station}",),
        # The history and coverage of artists every group charts, across the index.
        "/artist-history-api/artist-history": ("/artist-history-api/artist-history?name=Taylor%20Swift",),
        "/artist-history-api/artist-history/plot": ("/artist-history-api/artist-history/plot?name=Taylor%20Swift",),
        "/artist-history-api/artist-history/coverage": ("/artist-history-api/artist-history/coverage?name=IU",),
        # Every group's diff of its most snapshotted chart (the index, which keeps no snapshots, has none).
        **{f"/{group.name}/diff": (f"/{group.name}/diff?target={quote(_most_snapshotted(data, group.name))}",)
           for group in GROUPS if group.targets is not None},
        # An export no build made (the tests' settings build none on request): looked up and answered 404.
        **{f"/{group.name}/exports/{{name}}": (f"/{group.name}/exports/{NO_EXPORT}",) for group in GROUPS},
    }


def _most_snapshotted(data: Path, group: str) -> str:
    try:
        return _first(data / f"{group}.sqlite", "SELECT target FROM snapshots GROUP BY target ORDER BY count(*) DESC,"
                                                " target")
    except sqlite3.OperationalError:  # no snapshots table
        return "none"


NO_EXPORT = f"{'0' * 64}.sqlite"
FRONT_DOOR: tuple[tuple[str, dict[str, str]], ...] = (("/", {}), ("/", {"accept": "text/html"}), ("/openapi.json", {}),
              ("/changes?limit=50", {}), ("/hooks", {}), ("/exports", {}))  # and the gateway's own keyed GETs (the stream never ends)
NOT_FOUND = {f"/{group.name}/exports/{NO_EXPORT}" for group in GROUPS}
"""Example requests whose answer is a 404 (still served whole: the handler runs and reads)."""


def requests(data: Path) -> list[tuple[str, dict[str, str]]]:
    """Every GET route of every group, then the front door, each as one request or more (method GET)."""
    known = examples(data)
    chosen: list[tuple[str, dict[str, str]]] = []
    missing = []
    for group, route in declared_routes(GROUPS):
        if route.method != "GET":
            continue
        path = f"/{group.name}{route.path}"
        needs = "{" in route.path or any(p.required and p.where != "path" for p in route.params)
        if path in known:
            chosen += [(url, {}) for url in known.pop(path)]
        elif needs:
            missing.append(path)
        else:
            chosen.append((path, {}))
    assert not missing, f"routes without an example request here: {missing}"
    assert not known, f"examples of routes that no longer exist: {sorted(known)}"
    return [*chosen, *FRONT_DOOR]


@pytest.fixture(scope="module")
def data(all_groups_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every group's demo data and the artist-history index built over it (served with that folder in force,
    as in a server process)."""
    path = copy_data(all_groups_data, tmp_path_factory.mktemp("loop") / "data")
    with data_dir(path):
        index.index_all(now=fixed(FIXED_NOW), settings=run_settings())
    return path


class SlowCallbacks(logging.Handler):
    """asyncio's debug-mode reports of callbacks that held the loop past `slow_callback_duration`."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith("Executing ") and " took " in message:
            self.seen.append(message)


def _waited_for_a_cpu() -> float:
    """Seconds this thread has spent runnable but not running (Linux schedstat); 0 where there is none."""
    try:
        with open("/proc/thread-self/schedstat", "rb") as stat:
            return int(stat.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


@contextmanager
def held_callbacks(slow: SlowCallbacks, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every loop callback that held the loop `SLOW_CALLBACK_SECONDS` or more, less the time its thread waited for
    a CPU, reported to `slow` as asyncio words it ("Executing <handle> took 0.063 seconds")."""
    real = asyncio.events.Handle._run

    def timed(handle: asyncio.events.Handle) -> None:
        began, waited = time.monotonic(), _waited_for_a_cpu()
        try:
            real(handle)
        finally:
            held = time.monotonic() - began - (_waited_for_a_cpu() - waited)
            if held >= SLOW_CALLBACK_SECONDS:
                slow.seen.append(f"Executing {handle!r} took {held:.3f} seconds (time waiting for a CPU left out)")

    monkeypatch.setattr(asyncio.events.Handle, "_run", timed)
    yield


@contextmanager
def loop_thread_connects(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every SQLite connection opened on a thread that runs an event loop (a blocking open on the loop), by
    database; aiosqlite opens its connections on their own threads, which run none."""
    opened: list[str] = []
    real = sqlite3.connect

    def connect(database: Any, *args: Any, **kwargs: Any) -> sqlite3.Connection:
        try:
            asyncio.get_running_loop()
            opened.append(f"{database} (thread {threading.current_thread().name})")
        except RuntimeError:
            pass
        return real(database, *args, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", connect)
    yield opened


def _app() -> Any:
    """A new gateway over every group, built before its loop runs (as `chartgw serve` builds it)."""
    return build_app(GROUPS, checker=KeyChecker(Path("/nonexistent/keys.sqlite"), plain_keys=[TEST_KEY]),
                     clock=lambda: ANSWERED_AT, limiter=RateLimiter(0), settings=run_settings())


async def _serve(app: Any, urls: list[tuple[str, dict[str, str]]], slow: SlowCallbacks,
                 ) -> tuple[dict[str, list[str]], dict[str, int]]:
    """Serve `urls` one at a time on `app` in a debug-mode loop: the slow-callback reports of each request
    (those it caused) and each one's status."""
    loop = asyncio.get_running_loop()
    assert loop.get_debug()
    loop.slow_callback_duration = 3600.0  # asyncio's wall-time report is off: `held_callbacks` times them
    reports: dict[str, list[str]] = {}
    statuses: dict[str, int] = {}
    # The client asks for bodies as they are: decompressing a large one would be the test's own slow callback.
    async with app.router.lifespan_context(app), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://gateway",
            headers={**KEY_HEADERS, "accept-encoding": "identity"}) as client:
        await client.get("/no-such-group")  # what the process does once (first imports, thread pools) is not timed
        await asyncio.sleep(0)
        del slow.seen[:]
        for url, headers in urls:
            name = _name(url, headers)
            before = len(slow.seen)
            response = await client.get(url, headers=headers)
            await asyncio.sleep(0)  # callbacks the request left scheduled run (and are timed) now
            statuses[name] = response.status_code
            reports[name] = slow.seen[before:]
    return reports, statuses


def _run(urls: list[tuple[str, dict[str, str]]], slow: SlowCallbacks) -> tuple[dict[str, list[str]], dict[str, int]]:
    """`urls` served on a new app in a new loop in debug mode."""
    result: tuple[dict[str, list[str]], dict[str, int]] = asyncio.run(_serve(_app(), urls, slow), debug=True)
    return result


def _name(url: str, headers: dict[str, str]) -> str:
    return f"{url} {headers}" if headers else url


def test_no_request_blocks_the_event_loop(data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    urls = requests(data)
    slow = SlowCallbacks()
    logger = logging.getLogger("asyncio")
    logger.addHandler(slow)
    try:
        with data_dir(data), loop_thread_connects(monkeypatch) as opened, held_callbacks(slow, monkeypatch):
            reports, statuses = _run(urls, slow)
            suspects = [(url, headers) for url, headers in urls if reports[_name(url, headers)]]
            for _ in range(TRIES - 1):  # served again on a fresh app: blocking is slow every time, a hiccup is not
                if not suspects:
                    break
                again, _ = _run(suspects, slow)
                suspects = [(url, headers) for url, headers in suspects if again[_name(url, headers)]]
    finally:
        logger.removeHandler(slow)
    assert {url: status for url, status in statuses.items() if status != (404 if url in NOT_FOUND else 200)} == {}
    assert opened == [], "SQLite opened on the event loop's thread"
    assert suspects == [], "\n".join(f"{_name(*s)}: {reports[_name(*s)]}" for s in suspects)
    assert len(statuses) >= 130  # every GET route of every group and the front door were served
