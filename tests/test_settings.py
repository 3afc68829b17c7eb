"""One Settings object: resolved once (the environment, and a file one variable names), checked whole, passed
to the app and the CLI's commands; nothing reads the environment after start-up."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from chartgw import cli
from chartgw.api.access import KeyChecker, RateLimiter
from chartgw.api.group import crawl_group
from chartgw.core import config
from chartgw.core.settings import SETTINGS_FILE, Settings, SettingsFileError
from chartgw.demo.replay import ReplayTransport
from chartgw.demo.samples.korea import site_replies
from chartgw.groups import korea_chart, ranking_charts
from chartgw.http.app import build_app
from tests.fixtures import FIXED_NOW, KEY_HEADERS, TEST_KEY, copy_data
from tests.fixtures import settings as run_settings


def test_the_environment_wins_over_the_settings_file(tmp_path: Path) -> None:
    file = tmp_path / "chartgw.env"
    file.write_text("# production\nCHARTGW_CACHE_MAX_MB=64\nRATE_LIMIT_PER_MINUTE = 100\nexport CHARTGW_API_KEYS='a,b'\n")
    settings = Settings.from_environment({SETTINGS_FILE: str(file), "CHARTGW_CACHE_MAX_MB": "32", "HOME": "/root"})
    assert settings.get(config.CACHE_MAX_MB) == 32
    assert settings.get(config.RATE_LIMIT_PER_MINUTE) == 100
    assert settings.get(config.API_KEYS) == ("a", "b")
    assert settings.get(config.REFRESH_INTERVAL_SECONDS) == 60.0  # the default
    file.write_text("CHARTGW_CACHE_MAX_MB\n")
    with pytest.raises(SettingsFileError, match=r"chartgw.env:1: not NAME=value"):
        Settings.from_environment({SETTINGS_FILE: str(file)})
    with pytest.raises(SettingsFileError, match="cannot read"):
        Settings.from_environment({SETTINGS_FILE: str(tmp_path / "missing.env")})


def test_chartgw_settings_names_the_settings_file_it_read(tmp_path: Path) -> None:
    """`chartgw settings` (its own process) lists CHARTGW_SETTINGS_FILE first, with the file read, and the values
    that came from it as set."""
    import subprocess
    import sys

    from tests.fixtures import child_env

    file = tmp_path / "chartgw.env"
    file.write_text("CHARTGW_CACHE_MAX_MB=48\n")

    def listed(**env: str) -> list[str]:
        done = subprocess.run([sys.executable, "-m", "chartgw", "settings"], capture_output=True, text=True, timeout=60,
                              env={**child_env(DATA_DIR=str(tmp_path)), **env})
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()

    with_file = listed(CHARTGW_SETTINGS_FILE=str(file))
    assert with_file[0].split()[:3] == ["*", SETTINGS_FILE, str(file)]
    assert next(line for line in with_file if " CHARTGW_CACHE_MAX_MB " in line).split()[:3] == ["*", "CHARTGW_CACHE_MAX_MB",
                                                                                                "48"]
    assert listed()[0].split()[:2] == [SETTINGS_FILE, "(none)"]


def test_every_bad_value_is_named_at_once() -> None:
    settings = Settings({"CACHE_MAX_MB": "lots", "STREAMING_COUNTRIES": "us,zz", "RATE_LIMIT_PER_MINUTE": "60",
                         "UK_CHARTS": "singles,bogus"})
    declared = [setting for _, setting in cli.all_settings()]
    problems = settings.problems(declared)
    assert [line.split(":")[0] for line in problems] == ["CHARTGW_CACHE_MAX_MB", "CHARTGW_STREAMING_COUNTRIES",
                                                         "CHARTGW_UK_CHARTS"]
    assert settings.with_values({"CACHE_MAX_MB": None, "STREAMING_COUNTRIES": "us", "UK_CHARTS": None}).problems(
        declared) == []


def test_settings_check_prints_one_line_per_bad_value_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    bad = Settings({"CACHE_MAX_MB": "0", "VIDEO_COUNTRIES": "xx", "RETENTION_DAYS": "nowhere=3", "NOT_A_SETTING": "1"})
    assert cli.main(["settings", "--check"], bad) == 2
    err = capsys.readouterr().err.splitlines()
    assert [line.split(":")[1].strip() for line in err] == ["CHARTGW_CACHE_MAX_MB", "CHARTGW_VIDEO_COUNTRIES",
                                                           "CHARTGW_RETENTION_DAYS", "CHARTGW_NOT_A_SETTING"]
    assert err[-1].endswith("not a setting of this version (ignored)")
    assert cli.main(["settings", "--check"], Settings({"NOT_A_SETTING": "1"})) == 0
    assert cli.main(["settings", "--check"], Settings()) == 0


def test_serve_crawls_and_commands_refuse_to_start_on_a_bad_value(capsys: pytest.CaptureFixture[str],
                                                                  tmp_path: Path) -> None:
    bad = Settings({"DATA_DIR": str(tmp_path), "RATE_LIMIT_PER_MINUTE": "fast", "KOREA_NOTHING": "x"})
    assert cli.main(["serve", "--port", "1"], bad) == 2
    assert capsys.readouterr().err == "chartgw serve: CHARTGW_RATE_LIMIT_PER_MINUTE: must be 0..10000000, got 'fast'\n"
    assert cli.main(["crawl", "korea-chart"], bad) == 2
    assert "chartgw crawl: CHARTGW_RATE_LIMIT_PER_MINUTE" in capsys.readouterr().err
    # a crawl checks the platform's settings and its own group's, not every other group's
    other = Settings({"DATA_DIR": str(tmp_path), "UK_CHARTS": "bogus"})
    assert cli.settings_problems(other, korea_chart.GROUP) == []
    assert cli.main(["backfill", "ranking-charts", "--chart", "hot-100", "--since", "2026-11-01"],
                    bad.with_values({"RANKING_CHARTS": "nope"})) == 2
    assert "CHARTGW_RANKING_CHARTS" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # nothing was started or written


class _GuardedEnvironment(dict[str, str]):
    """os.environ that fails a test reading any CHARTGW_* variable (listing the environment for a child is fine)."""

    def _check(self, name: object) -> None:
        if isinstance(name, str) and name.startswith("CHARTGW_"):
            raise AssertionError(f"{name} was read from the environment after start-up")

    def __getitem__(self, name: str) -> str:
        self._check(name)
        return super().__getitem__(name)

    def get(self, name: str, default: Any = None) -> Any:
        self._check(name)
        return super().get(name, default)

    def __contains__(self, name: object) -> bool:
        self._check(name)
        return super().__contains__(name)


@pytest.fixture
def guarded_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(os, "environ", _GuardedEnvironment({**os.environ, "CHARTGW_DATA_DIR": "/nonexistent"}))
    yield


def test_nothing_reads_the_environment_after_start_up(korea_data: Path, tmp_path: Path,
                                                      guarded_environment: None) -> None:
    data = copy_data(korea_data, tmp_path / "data")
    settings = Settings({"DATA_DIR": str(data), "API_KEYS": TEST_KEY, "CRAWL_DELAY_SECONDS": "0"})
    app = build_app([korea_chart.GROUP], settings=settings)
    with TestClient(app) as api:
        for path in ("/", "/openapi.json", "/korea-chart/health", "/korea-chart/portal-a/charts/realtime",
                     "/korea-chart/openapi.json", "/korea-chart/fetch-logs"):
            assert api.get(path, headers=KEY_HEADERS).status_code == 200, path
    transport = ReplayTransport({"MELON": site_replies("portal-a", "realtime", FIXED_NOW, 1)})
    outcomes = asyncio.run(crawl_group(korea_chart.GROUP, {"site": "portal-a", "chart_type": "realtime"},
                                       now=lambda: FIXED_NOW, transport=transport, settings=settings))  # as the CLI runs it
    assert [o.status for o in outcomes] == ["ok"]


def test_two_apps_with_different_settings_answer_differently_in_one_process(tmp_path: Path) -> None:
    def app(**values: str) -> TestClient:
        settings = run_settings().with_values({"DATA_DIR": str(tmp_path / "data"), **values})
        return TestClient(build_app([ranking_charts.GROUP], checker=KeyChecker(tmp_path / "keys.sqlite",
                                                                                plain_keys=[values["API_KEYS"]]),
                                    limiter=RateLimiter(0), settings=settings))

    with app(API_KEYS="key-one", RANKING_CHARTS="hot-100") as one, \
            app(API_KEYS="key-two", RANKING_CHARTS="billboard-200,artist-100") as two:
        for _ in range(2):  # interleaved: each request answers with its own app's settings
            first = one.get("/ranking-charts/charts", headers={"X-API-Key": "key-one"}).json()
            second = two.get("/ranking-charts/charts", headers={"X-API-Key": "key-two"}).json()
            assert [c["slug"] for c in first["charts"] if c["configured"]] == ["hot-100"]
            assert [c["slug"] for c in second["charts"] if c["configured"]] == ["billboard-200", "artist-100"]
        assert one.get("/ranking-charts/charts", headers={"X-API-Key": "key-two"}).status_code == 401


def test_two_apps_interleaved_in_one_event_loop_each_read_their_own_settings(tmp_path: Path) -> None:
    """The request path reads the settings of the app answering (its GroupData's, `Call.settings`), not the
    process's: two apps interleaved in one event loop, and a crawl under A's settings meanwhile, each keep theirs."""
    import httpx

    process = run_settings()  # what the process was given: neither app's
    made = {name: run_settings().with_values({"DATA_DIR": str(tmp_path / name), "API_KEYS": TEST_KEY, **values})
            for name, values in (("a", {"HOOKS_PER_KEY": "1", "HOOKS_HTTP_HOSTS": "receiver.example.test",
                                        "RANKING_CHARTS": "hot-100", "CORS_ORIGINS": "https://a.example"}),
                                 ("b", {"HOOKS_PER_KEY": "3", "RANKING_CHARTS": "billboard-200,artist-100"}))}

    def client(name: str) -> httpx.AsyncClient:
        app = build_app([korea_chart.GROUP, ranking_charts.GROUP], limiter=RateLimiter(0), settings=made[name])
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver", headers=KEY_HEADERS)

    async def crawl_under_a() -> list[str]:
        transport = ReplayTransport({"MELON": site_replies("portal-a", "realtime", FIXED_NOW, 1)})
        outcomes = await crawl_group(korea_chart.GROUP, {"site": "portal-a", "chart_type": "realtime"},
                                     now=lambda: FIXED_NOW, transport=transport, settings=made["a"])
        return [o.status for o in outcomes]

    async def hooks(api: httpx.AsyncClient, url: str, times: int) -> list[int]:
        statuses = []
        for _ in range(times):
            statuses.append((await api.post("/hooks", json={"url": url})).status_code)
            await asyncio.sleep(0)  # let the other app and the crawl run between requests
        return statuses

    async def configured(api: httpx.AsyncClient, times: int) -> list[list[str]]:
        """A group handler's own setting (CHARTGW_RANKING_CHARTS), and the app's CORS origins, as each answer saw them."""
        seen = []
        for _ in range(times):
            answer = await api.get("/ranking-charts/charts", headers={"Origin": "https://a.example"})
            seen.append([c["slug"] for c in answer.json()["charts"] if c["configured"]]
                        + [answer.headers.get("access-control-allow-origin", "-")])
            await asyncio.sleep(0)
        return seen

    async def both() -> tuple[tuple[list[int], list[int], list[int], list[int], list[str]],
                              tuple[list[list[str]], list[list[str]]]]:
        async with client("a") as a, client("b") as b:
            return await asyncio.gather(asyncio.gather(
                hooks(a, "https://hooks.example.test/in", 2), hooks(b, "https://hooks.example.test/in", 3),
                hooks(a, "http://receiver.example.test/in", 1), hooks(b, "http://receiver.example.test/in", 1),
                crawl_under_a()), asyncio.gather(configured(a, 3), configured(b, 3)))

    (a_https, b_https, a_http, b_http, crawled), (a_charts, b_charts) = asyncio.run(both())
    assert a_charts == [["hot-100", "https://a.example"]] * 3  # A's group setting and CORS origins, every time
    assert b_charts == [["billboard-200", "artist-100", "-"]] * 3  # B's, interleaved with A's and the crawl
    assert b_https == [200, 200, 200]  # B lets a key have 3 hooks
    assert sorted(a_https + a_http) == [200, 403, 403]  # A lets it have 1 (whichever came first), and http to its host
    assert b_http == [422]  # B names no plain-http host: https only
    assert crawled == ["ok"]
    assert (tmp_path / "a" / "korea-chart.sqlite").exists() and not (tmp_path / "b" / "korea-chart.sqlite").exists()
    assert (tmp_path / "a" / "hooks.sqlite").exists() and (tmp_path / "b" / "hooks.sqlite").exists()
    assert run_settings() is process  # nothing was installed on the way
