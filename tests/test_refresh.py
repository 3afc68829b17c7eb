"""POST /korea-chart/refresh runs the cron crawl in a child process and reports each target."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from chartgw.api.endpoints import ApiError, Call, GroupData
from chartgw.api.refresh import admit_refresh
from chartgw.crawl.runner import crawl_lock
from chartgw.demo.replay import Reply
from chartgw.demo.samples.korea import site_replies
from tests.fixtures import FIXED_NOW, KEY_HEADERS, client, configure, copy_data, data_dir, replay_upstreams
from tests.fixtures import settings as run_settings


@pytest.fixture
def data(korea_data: Path, tmp_path: Path) -> Path:
    path = copy_data(korea_data, tmp_path / "data")
    configure("CHARTGW_DATA_DIR", str(path))
    return path


@pytest.fixture
def api(data: Path) -> Iterator[TestClient]:
    with client(data) as c:
        yield c


@contextmanager
def replayed(data: Path, replies: dict[str, dict]) -> Iterator[TestClient]:
    """A client on an app built with Melon replayed: the refresh's child crawl runs with the app's settings."""
    with replay_upstreams(replies), client(data) as c:
        yield c


def _melon_replies(variant: int) -> dict[str, dict]:
    return {"MELON": site_replies("portal-a", "realtime", FIXED_NOW, variant)}


def test_refresh_one_chart_commits_a_new_snapshot(data: Path) -> None:
    with replayed(data, _melon_replies(1)) as api:
        before = api.get("/korea-chart/portal-a/charts/realtime?limit=100", headers=KEY_HEADERS).json()
        response = api.post("/korea-chart/refresh?site=portal-a&chart_type=realtime", headers=KEY_HEADERS)
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["status"] == "ok"
        assert [(o["target"], o["status"], o["rows"]) for o in body["outcomes"]] == [("portal-a/realtime", "ok", 100)]
        after = api.get("/korea-chart/portal-a/charts/realtime?limit=100", headers=KEY_HEADERS).json()
    assert after["snapshot"]["id"] == body["outcomes"][0]["snapshot_id"] > before["snapshot"]["id"]
    assert [e["title"] for e in after["entries"]] != [e["title"] for e in before["entries"]]
    # the refresh's crawl indexed what it committed: the artist-history index is not behind it
    with sqlite3.connect(f"file:{data / 'artist-history-api.sqlite'}?mode=ro", uri=True) as index:
        indexed = index.execute("SELECT last_snapshot_id FROM sources WHERE source = 'korea-chart'").fetchone()
    assert indexed == (after["snapshot"]["id"],)


def test_refresh_failure_reports_and_keeps_the_last_good_snapshot(data: Path) -> None:
    broken = {"MELON": {k: Reply(b"<html><title>error</title></html>", 503) for k in _melon_replies(1)["MELON"]}}
    with replayed(data, broken) as api:
        before = api.get("/korea-chart/portal-a/charts/realtime", headers=KEY_HEADERS).json()
        response = api.post("/korea-chart/refresh?site=portal-a&chart_type=realtime", headers=KEY_HEADERS)
        assert response.status_code == 502  # every target failed: the upstream's fault, with each reason
        body = response.json()["detail"]
        assert body["message"] == "Every target of the refresh failed; the last good snapshots still serve"
        assert body["outcomes"][0]["http_status"] == 503 and "503" in body["outcomes"][0]["error"]
        assert api.get("/korea-chart/portal-a/charts/realtime", headers=KEY_HEADERS).json() == before


def test_refresh_while_another_crawl_runs_is_409(api: TestClient, tmp_path: Path) -> None:
    with data_dir(tmp_path / "data"), crawl_lock("korea-chart", settings=run_settings()):
        response = api.post("/korea-chart/refresh?site=portal-a", headers=KEY_HEADERS)
    assert response.status_code == 409 and "running" in response.json()["detail"]


def test_refresh_validates_and_needs_a_key(api: TestClient) -> None:
    assert api.post("/korea-chart/refresh").status_code == 401
    bad = api.post("/korea-chart/refresh?site=portal-e&chart_type=realtime", headers=KEY_HEADERS)
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["query", "chart_type"]
    assert api.get("/korea-chart/refresh", headers=KEY_HEADERS).status_code == 405


def test_a_second_refresh_of_the_same_chart_within_the_interval_is_429(data: Path) -> None:
    with replayed(data, _melon_replies(1)) as api:
        first = api.post("/korea-chart/refresh?site=portal-a&chart_type=realtime", headers=KEY_HEADERS)
        again = api.post("/korea-chart/refresh?site=portal-a&chart_type=realtime", headers=KEY_HEADERS)
    assert first.status_code == 200
    assert again.status_code == 429 and 1 <= int(again.headers["retry-after"]) <= 60
    assert re.fullmatch(r"This was refreshed \d+s ago; refresh it again in \d+s", again.json()["detail"])


def test_a_key_past_its_refresh_budget_is_429_whatever_the_target(data: Path) -> None:
    configure("CHARTGW_REFRESHES_PER_KEY_PER_HOUR", "1")
    with replayed(data, _melon_replies(1)) as api:
        first = api.post("/korea-chart/refresh?site=portal-a&chart_type=realtime", headers=KEY_HEADERS)
        other = api.post("/korea-chart/refresh?site=portal-a&chart_type=daily", headers=KEY_HEADERS)
    assert first.status_code == 200
    assert other.status_code == 429 and 3590 <= int(other.headers["retry-after"]) <= 3600
    assert "CHARTGW_REFRESHES_PER_KEY_PER_HOUR" in other.json()["detail"]


def _call(data: GroupData, key_id: int | None) -> Call:
    return Call({}, data, FIXED_NOW, key_id=key_id)


def test_the_key_budget_is_a_sliding_hour_per_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    configure("CHARTGW_REFRESHES_PER_KEY_PER_HOUR", "2")
    configure("CHARTGW_REFRESH_INTERVAL_SECONDS", "60")
    with data_dir(tmp_path):
        data = GroupData("korea-chart", settings=run_settings())
    now = [1000.0]
    clock = lambda: now[0]
    admit_refresh(_call(data, 7), "a", clock)
    with pytest.raises(ApiError) as same_target:  # the target's interval is checked first and counts nothing
        admit_refresh(_call(data, 7), "a", clock)
    assert same_target.value.status == 429 and "refreshed" in same_target.value.detail
    now[0] = 1100.0
    admit_refresh(_call(data, 7), "b", clock)
    with pytest.raises(ApiError) as over:
        admit_refresh(_call(data, 7), "c", clock)
    assert over.value.status == 429 and over.value.headers["Retry-After"] == str(3600 - 100)
    admit_refresh(_call(data, 8), "c", clock)  # another key has its own budget
    now[0] = 1000.0 + 3600
    admit_refresh(_call(data, 7), "d", clock)  # the first refresh left the hour
    configure("CHARTGW_REFRESHES_PER_KEY_PER_HOUR", "0")
    unlimited = GroupData("korea-chart", settings=run_settings())  # an app built with them
    for target in "efgh":
        admit_refresh(_call(unlimited, 7), target, clock)  # 0 = no per-key limit
