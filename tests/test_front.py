"""The front door: `GET /` (public) shows every group's health and a week of crawls, as HTML to a browser
and JSON by Accept; `GET /openapi.json` (public) joins every group's document with every $ref resolving."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from html import escape
from pathlib import Path
from typing import Any

import msgspec
import pytest

from chartgw.groups import GROUPS
from chartgw.http.reasons import UNEXPLAINED
from tests.fixtures import FIXED_NOW, client, configure, copy_data
from tests.fixtures import settings as run_settings


def test_the_status_page_lists_every_group_as_json_without_a_key(all_groups_data: Path) -> None:
    with client(all_groups_data, now=FIXED_NOW + timedelta(minutes=10)) as api:
        response = api.get("/", headers={"Accept": "application/json"})
    assert response.status_code == 200 and response.headers["content-type"] == "application/json"
    page = response.json()
    assert [g["name"] for g in page["groups"]] == [g.name for g in GROUPS]
    for group in page["groups"]:
        assert group["status"] in ("ok", "degraded") and group["links"]["health"] == f"/{group['name']}/health"
        if group["name"] == "artist-history-api":  # the fixture leaves the index unbuilt
            assert group["last_crawl"] is None and group["days"] == []
            continue
        assert group["days"] and group["days"][-1]["day"] <= (FIXED_NOW + timedelta(minutes=10)).date().isoformat()
        assert group["last_crawl"] is not None
    korea = next(g for g in page["groups"] if g["name"] == "korea-chart")
    assert korea["targets"] > 10 and sum(d["ok"] for d in korea["days"]) > 10
    # Its latest change in one line: when, which chart, what changed (a first snapshot: every entry in, a new #1).
    assert re.fullmatch(r"2026-11-20T05:30:00Z \S+: \d+ in, 0 out, 0 moved; new #1 .+ - .+", korea["last_change"])
    assert next(g for g in page["groups"] if g["name"] == "artist-history-api")["last_change"] is None
    assert page["status"] == ("ok" if all(g["status"] == "ok" for g in page["groups"]) else "degraded")


def test_the_status_page_is_html_for_a_browser(all_groups_data: Path) -> None:
    with client(all_groups_data) as api:
        response = api.get("/", headers={"Accept": "text/html,application/xhtml+xml"})
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    body = response.text
    for group in GROUPS:
        assert f"<a href='/{group.name}/'>/{group.name}</a>" in body
    assert body.count("<svg") == len(GROUPS)
    assert body.count("<td class=change>") == len(GROUPS) and "<td class=change>none yet</td>" in body


def test_a_change_is_one_line_naming_the_new_number_one() -> None:
    """Through the group's entry mapping (title and artist), else the record's title or name."""
    from chartgw.groups.korea_chart import GROUP as KOREA
    from chartgw.groups.social_trends import GROUP as TRENDS
    from chartgw.http.front import change_line
    from chartgw.store import ChangeRow, StoredEntry
    from chartgw.store.diff import diff, summarize

    def row(summary: bytes) -> ChangeRow:
        return ChangeRow(7, 9, 8, "portal-a/realtime", "2026-11-20", 14, "2026-11-20T05:30:00Z", summary)

    song = [StoredEntry(1, "a", "b", None, json.dumps({"title": "Song", "artist": "Singer", "name": "#tag"}).encode())]
    old = [StoredEntry(1, "c", "d", None, b'{"title":"Old","artist":"X"}')]
    new_top = msgspec.json.encode(summarize(diff(old, song), first=False))
    assert change_line(KOREA, row(new_top)) == "2026-11-20T05:30:00Z portal-a/realtime: 1 in, 1 out, 0 moved; new #1 Song - Singer"
    assert change_line(TRENDS, row(new_top)).endswith("new #1 Song")  # no entry mapping: the record's title
    same = msgspec.json.encode(summarize(diff(song, song), first=False))
    assert change_line(KOREA, row(same)) == "2026-11-20T05:30:00Z portal-a/realtime: no change"


def test_one_openapi_document_over_every_group_whose_refs_all_resolve(all_groups_data: Path) -> None:
    with client(all_groups_data) as api:
        response = api.get("/openapi.json")
    assert response.status_code == 200
    document = response.json()
    for group in GROUPS:
        assert f"/{group.name}/health" in document["paths"]
    schemas = document["components"]["schemas"]
    refs = set(re.findall(r'"#/components/schemas/([^"]+)"', json.dumps(document)))
    assert refs and refs <= set(schemas)
    assert document["components"]["securitySchemes"]["APIKeyHeader"]["name"] == "X-API-Key"


# --- reasons ---------------------------------------------------------------------------------------------------

def _page(data: Path, now: datetime = FIXED_NOW + timedelta(minutes=10)) -> dict[str, Any]:
    with client(data, now=now) as api:
        response = api.get("/", headers={"Accept": "application/json"})
        html = api.get("/", headers={"Accept": "text/html"})
    assert response.status_code == 200 and html.status_code == 200
    page = response.json()
    for group in page["groups"]:
        assert (group["status"] == "ok") is (group["reasons"] == []), group
        for reason in group["reasons"]:
            assert reason != UNEXPLAINED, group
            assert escape(reason) in html.text
    return page


@pytest.mark.parametrize(("setting", "value", "group"), [
    ("CHARTGW_STREAMING_COUNTRIES", "us,zz", "streaming"),
    ("CHARTGW_VIDEO_COUNTRIES", "xx", "video"),
    ("CHARTGW_UK_CHARTS", "singles,bogus", "uk-charts"),
])
def test_a_bad_setting_shows_its_group_misconfigured_with_the_reason_never_a_500(
        all_groups_data: Path, setting: str, value: str, group: str) -> None:
    configure(setting, value)
    page = _page(all_groups_data)
    rows = {g["name"]: g for g in page["groups"]}
    assert rows[group]["status"] == "misconfigured" and rows[group]["reasons"][0].startswith(f"{setting}: ")
    assert value.split(",")[-1] in rows[group]["reasons"][0]
    assert rows["korea-chart"]["status"] == "ok" and page["status"] == "degraded"


def test_a_fresh_demo_is_ok_or_says_why_not(all_groups_data: Path) -> None:
    rows = {g["name"]: g for g in _page(all_groups_data)["groups"]}
    assert {name for name, g in rows.items() if g["status"] != "ok"} == {
        "streaming", "short-video", "radio", "artist-history-api"}
    # The demo's samples cover 3 of the 8 countries /streaming crawls by default (CHARTGW_STREAMING_COUNTRIES).
    assert rows["streaming"]["reasons"] == [
        "15 of 24 targets never crawled: regional-daily/gb, regional-daily/de, regional-daily/jp (+12 more)"]
    assert rows["short-video"]["reasons"] == [
        "CHARTGW_CHARTMETRIC_REFRESH_TOKEN is not set: nothing is crawled; stored charts are still served"]
    assert rows["radio"]["reasons"] == ["monitor not running (stopped 2026-11-20T05:30:00Z)"]
    assert rows["artist-history-api"]["reasons"][-1].startswith("nothing indexed yet")


def test_every_group_without_data_says_why(tmp_path: Path) -> None:
    rows = {g["name"]: g for g in _page(tmp_path)["groups"]}
    assert all(g["status"] == "degraded" for g in rows.values())
    assert rows["korea-chart"]["reasons"][0].startswith("17 of 17 snapshots never crawled: portal-a/realtime, ")
    assert rows["recognition"]["reasons"] == ["discovery never crawled"]
    assert rows["dj-rankings"]["reasons"] == ["latest list never crawled"]
    assert rows["radio"]["reasons"][0] == "monitor not running (never started)"


def test_a_broken_file_is_its_groups_row_not_the_pages(all_groups_data: Path, tmp_path: Path) -> None:
    data = copy_data(all_groups_data, tmp_path / "data")
    for file in data.glob("video.sqlite*"):
        file.unlink()
    (data / "video.sqlite").write_bytes(b"this is not a database" * 500)
    rows = {g["name"]: g for g in _page(data)["groups"]}
    assert rows["video"]["status"] == "failing" and "DatabaseError" in " ".join(rows["video"]["reasons"])
    assert rows["korea-chart"]["status"] == "ok"


def test_the_demo_served_as_scripts_serve_serves_it_is_ok_in_every_group(all_groups_data: Path, tmp_path: Path) -> None:
    """The README's promise: right after seeding, `GET /` shows every group ok. The demo data (its index built, as
    `chartgw demo` does), served with the settings file `chartgw demo` writes (scripts/serve names it), while the
    radio monitor runs beside the server (scripts/serve runs it), all on the seeding's clock."""
    import asyncio
    import sqlite3
    import threading
    import time

    from chartgw.core.clock import fixed
    from chartgw.core.settings import read_settings_file
    from chartgw.demo import seeding as demo
    from chartgw.groups.radio.monitor import Monitor
    from chartgw.index import history as artist_history
    from tests.fixtures import data_dir

    data = copy_data(all_groups_data, tmp_path / "data")
    with data_dir(data):
        artist_history.index_all(now=fixed(FIXED_NOW), settings=run_settings())
        settings_file = demo.write_demo_settings(settings=run_settings())
    assert settings_file == data / demo.DEMO_SETTINGS_FILE
    for name, value in read_settings_file(settings_file).items():
        configure(name, value)

    stopping: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

    async def monitor() -> None:
        stop = asyncio.Event()
        stopping.append((asyncio.get_running_loop(), stop))
        await Monitor(clock=fixed(FIXED_NOW), path=data / "radio.sqlite", heartbeat_seconds=0.2, settings=run_settings()).run(stop)

    def running() -> bool:
        with sqlite3.connect(f"file:{data / 'radio.sqlite'}?mode=ro", uri=True) as db:
            return bool(db.execute("SELECT count(*) FROM monitor_runs WHERE stopped_at IS NULL").fetchone()[0])

    thread = threading.Thread(target=asyncio.run, args=(monitor(),))
    thread.start()
    try:
        deadline = time.monotonic() + 120
        while not running():
            assert thread.is_alive() and time.monotonic() < deadline, "the monitor did not start"
            time.sleep(0.1)
        with client(data, now=FIXED_NOW) as api:
            page = api.get("/", headers={"Accept": "application/json"}).json()
    finally:
        while not stopping:
            time.sleep(0.05)
        loop, stop = stopping[0]
        loop.call_soon_threadsafe(stop.set)
        thread.join(60)
    assert {g["name"]: g["reasons"] for g in page["groups"] if g["status"] != "ok"} == {}
    assert page["status"] == "ok" and len(page["groups"]) == len(GROUPS)
