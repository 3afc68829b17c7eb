"""Builds the test databases and apps: every test that needs data gets it from here.

Data is made the way production makes it: the real crawlers run against the bundled sample
payloads on a local replay server (no network).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, overload

import httpx
import pytest
import uvicorn
from granian.constants import HTTPModes, Interfaces
from granian.log import LogLevels
from granian.server.embed import Server
from starlette.testclient import TestClient

from chartgw.api.access import KeyChecker, RateLimiter
from chartgw.api.group import Group
from chartgw.core.settings import Settings
from chartgw.demo.replay import ReplayKey, ReplayServers, Reply
from chartgw.demo.replay import replay_upstreams as replaying
from chartgw.demo.seeding import seeder
from chartgw.http.app import build_app
from chartgw.http.rsgi import Gateway, granian_limits

TEST_KEY = "test-key-0123456789"
KEY_HEADERS: Mapping[str, str] = MappingProxyType({"X-API-Key": TEST_KEY})
"""Read-only: a client that adds its defaults to the headers it is given (schemathesis does) would otherwise change
them for every later test of the worker (an Accept-Encoding: gzip left here once sent gzip to plain requests)."""
FIXED_NOW = datetime(2026, 11, 20, 5, 30, 0, tzinfo=UTC)  # 14:30 KST


@overload
def get(api: TestClient, url: str, *, status: int | None = None, headers: Mapping[str, str] | None = None,
        prefix: str = "", as_json: bool | None, **params: Any) -> Any: ...


@overload
def get(api: TestClient, url: str, *, status: int | None = None, headers: Mapping[str, str] | None = None,
        prefix: str = "", as_json: Literal[False] = False, **params: Any) -> httpx.Response: ...


def get(api: TestClient, url: str, *, status: int | None = None, headers: Mapping[str, str] | None = None,
        prefix: str = "", as_json: bool | None = False, **params: Any) -> Any:
    """The one GET of the API tests: `prefix + url` with the test key (and `headers` over it) and `params` as the
    query. `status`: the status it must answer (200 when it is asked for JSON; None, the default otherwise: not
    checked). `as_json`: True the JSON body, False the response, None the JSON body when the answer is JSON (the
    response otherwise: a CSV, a plot)."""
    response = api.get(prefix + url, params=params or None, headers={**KEY_HEADERS, **(headers or {})})
    expected = 200 if status is None and as_json is not False else status
    if expected is not None:
        assert response.status_code == expected, (url, response.status_code, response.text[:500])
    if as_json or (as_json is None and response.headers.get("content-type", "").startswith("application/json")):
        return response.json()
    return response


TEST_SETTINGS = Settings({"CRAWL_DELAY_SECONDS": "0", "RETRY_BACKOFF_SECONDS": "0.01", "EXPORTS_INTERVAL_SECONDS": "off"})
"""What every test starts from (tests/conftest.py installs it): the defaults, with no pause between requests and no
export built on request (a listing never writes into shared test data; tests of exports turn it on)."""


_TESTS: list[Settings] = [TEST_SETTINGS]
"""The running test's settings (the last), which the helpers here build its apps, crawls and commands with: a test's
own, never the process environment (tests/conftest.py resets them before each test). The app reads none of it:
every app, crawl and command is given its Settings."""


def settings() -> Settings:
    """The settings the running test builds its apps, crawls and commands with."""
    return _TESTS[-1]


def use(chosen: Settings) -> Settings:
    """The rest of this test builds with `chosen` (tests/conftest.py starts each test from its own)."""
    _TESTS[-1] = chosen
    return chosen


def configure(name: str, value: str | None) -> Settings:
    """The rest of this test runs with setting `name` (`CHARTGW_X` or `X`) at `value` (None: its default)."""
    return use(settings().with_values({name: value}))


@contextmanager
def building_with(chosen: Settings) -> Iterator[Settings]:
    """`chosen` as the test's settings for the duration of the block."""
    _TESTS.append(chosen)
    try:
        yield chosen
    finally:
        _TESTS.pop()


@contextmanager
def environment(values: Mapping[str, str | None]) -> Iterator[Settings]:
    """The test's settings with `values` set (None: unset) for the duration of the block."""
    with building_with(settings().with_values(values)) as chosen:
        yield chosen


@contextmanager
def replay_upstreams(replies: dict[str, dict[ReplayKey, Reply]]) -> Iterator[ReplayServers]:
    """`chartgw.demo.replay.replay_upstreams`, with the test's settings pointing each upstream at its replay server
    (and no crawl delay) for the duration, as the demo's crawls are given them."""
    with replaying(replies) as servers, building_with(servers.over(settings())):
        yield servers


def child_env(**values: str) -> dict[str, str]:
    """The environment for a chartgw child process of a test: the caller's variables but its CHARTGW_* ones,
    then the test's settings, then `values` (names without the prefix)."""
    return {**settings().child_environment(), **{f"CHARTGW_{name}": value for name, value in values.items()}}


@contextmanager
def data_dir(path: Path) -> Iterator[Path]:
    """The test's settings with CHARTGW_DATA_DIR at `path` for the duration."""
    with environment({"CHARTGW_DATA_DIR": str(path)}):
        yield path


UNDER_FAKETIME = "faketime" in os.environ.get("LD_PRELOAD", "")
"""Run under libfaketime (`faketime -f '+400d' scripts/test`): it shifts the monotonic clock too, which a timed
wait in a thread is computed on (the kernel then waits the offset), and it cannot reach a static binary such as
Litestream's (its clock and the test's disagree by the offset)."""


def build_group_db(path: Path, group: str | Group, now: datetime = FIXED_NOW) -> Path:
    """A data folder with `group`'s demo data (a registered group's name, or a Group): its real crawl run
    over its bundled samples at `now`."""
    path.mkdir(parents=True, exist_ok=True)
    seed = seeder(group if isinstance(group, str) else group.name)
    with data_dir(path):
        outcomes = asyncio.run(seed(now, settings()))
    failed = [o for o in outcomes if o.status != "ok"]
    assert not failed, failed
    return path


def group_data(source: Path, dest: Path, group: str) -> Path:
    """A data folder holding only `group`'s files, copied from a built folder (the session's `all_groups_data`):
    a test module's own data without seeding the group again."""
    dest.mkdir(parents=True, exist_ok=True)
    for file in source.glob(f"{group}.*"):
        shutil.copy2(file, dest / file.name)
    return dest


def read_shared(path: Path) -> contextlib.closing[sqlite3.Connection]:
    """A connection reading a SQLite file of a shared, read-only data folder, closed after the block: immutable, so
    it makes no -wal or -shm file there (another worker copying the folder meanwhile would miss them as they go)."""
    return contextlib.closing(sqlite3.connect(f"{path.absolute().as_uri()}?immutable=1", uri=True))


def copy_data(source: Path, dest: Path) -> Path:
    """A private copy of a built data folder, for a test that changes it."""
    shutil.copytree(source, dest)
    return dest


def client(path: Path, groups: list[Group] | None = None, now: datetime = FIXED_NOW,
           raise_server_exceptions: bool = True) -> TestClient:
    """A TestClient on the gateway (all groups, or `groups`) over data folder `path`, accepting TEST_KEY,
    answering as if it were `now`. Use it as a context manager. `raise_server_exceptions=False` answers an
    exception with the app's 500 instead of raising it in the test (to count them)."""
    with data_dir(path):
        # No rate limit (tests of the limit build their own) and no usage written into shared test data.
        app = build_app(groups, checker=KeyChecker(path / "keys.sqlite", plain_keys=[TEST_KEY]), clock=lambda: now,
                        limiter=RateLimiter(0), settings=settings())
    return TestClient(app, raise_server_exceptions=raise_server_exceptions)


def free_port() -> int:
    """A TCP port of 127.0.0.1 free at the time of asking (for a server started as a real process)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serving(app: Any, **options: Any) -> Iterator[str]:
    """`app` served for real by uvicorn in a thread, on a free port of 127.0.0.1 (`options` go to
    `uvicorn.Config`, e.g. chartgw serve's `http` protocol): yields its base URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, **{"log_level": "warning", **options}))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    try:
        while not server.started:
            assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
            time.sleep(0.02)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


@contextmanager
def serving_rsgi(app: Any, *, head_timeout: float | None = None, lifespan: bool = False) -> Iterator[str]:
    """`app` served as `chartgw serve` serves it (`chartgw.http.rsgi.Gateway` on granian, with
    serve's HTTP/1 settings), in this process: granian's embedded server in a thread, on a free port of 127.0.0.1,
    so a test can reach the app's parts (its lane, its change hub) while it serves. Yields its base URL.

    The gateway's limits are the app's settings (CHARTGW_LIMIT_CONCURRENCY, the body and send timeouts, the access
    log). `head_timeout`: granian's one timer, from the previous answer (or the connection) to a whole head; None:
    serve's, the shorter of the app's head and idle timeouts. `lifespan`: the app's lifespan run around the serving,
    in the server's loop (the gateway cannot run it here: the embedded server's loop is already running when it
    calls `__rsgi_init__`); off by default, as the tests served by uvicorn mostly had it."""
    gateway = Gateway(app, lifespan=False)
    loops: list[asyncio.AbstractEventLoop] = []
    failed: list[BaseException] = []

    async def serve(server: Server) -> None:
        loops.append(asyncio.get_running_loop())
        if lifespan:
            await gateway.start_lifespan()
        try:
            await server.serve()
        finally:
            await gateway.stop_lifespan()

    def run(server: Server) -> None:
        try:
            asyncio.run(serve(server))
        except BaseException as exc:  # for the test's thread to raise
            failed.append(exc)

    port = free_port()
    server = Server(gateway, address="127.0.0.1", port=port, interface=Interfaces.RSGI, http=HTTPModes.http1,
                    websockets=False, log_access=False, log_level=LogLevels.warning,
                    **granian_limits(gateway.settings, head_timeout))  # as serve sets them
    thread = threading.Thread(target=run, args=(server,), daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise AssertionError("granian did not start") from (failed[0] if failed else None)
            time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        if thread.is_alive():
            loops[0].call_soon_threadsafe(server.stop)  # the embedded server's asyncio.Event, set in its loop
            thread.join(10)
        assert not thread.is_alive(), "granian did not stop within 10 s"
        if failed:
            raise AssertionError("granian failed while serving") from failed[0]


def api_fixture(group: Group, data: str, settings: Mapping[str, str | None] | None = None,
                now: datetime = FIXED_NOW, name: str = "api") -> Any:
    """A module-scoped pytest fixture giving a TestClient on `group` over the data folder that fixture
    `data` builds, with `settings` and that folder as CHARTGW_DATA_DIR in force (as in a server process)
    and answering as if at `now`. In a test module: `api = api_fixture(GROUP, "video_data")`; a module with several
    apps names each (`music = api_fixture(MUSIC, "music_data", name="music")`)."""

    @pytest.fixture(scope="module", name=name)
    def api(request: pytest.FixtureRequest) -> Iterator[TestClient]:
        path = request.getfixturevalue(data)
        with environment(settings or {}), data_dir(path):
            test_client = client(path, [group], now)  # the app keeps the settings it was built with
        with test_client:
            yield test_client

    return api


def held_in_app(port: int, count: int = 2) -> list[socket.socket]:
    """`count` keyed POSTs to 127.0.0.1:`port` whose bodies never come: requests in progress in the app (which waits
    on their bodies until the body timeout), what `--limit-concurrency` counts. The caller closes the sockets."""
    held = []
    for _ in range(count):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(f"POST /korea-chart/refresh?site=portal-a&chart_type=realtime HTTP/1.1\r\nHost: x\r\n"
                  f"X-API-Key: {TEST_KEY}\r\nContent-Length: 10\r\n\r\n".encode())
        held.append(s)
    return held
