"""`GET /charts` (every chart of every group, from the groups' declarations and one store query per file) and the
previous/next chart dates of every chart-by-date answer (`chartgw.api.catalog`)."""

from __future__ import annotations

import csv
import io
import json
import re
import sqlite3
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from chartgw.api.catalog import CADENCES, Chart, cadence_of, cadences
from chartgw.api.endpoints import FRESHNESS_SECONDS
from chartgw.groups import GROUPS
from chartgw.store import tables
from chartgw.store.targets import TargetKey
from tests.fixtures import FIXED_NOW, KEY_HEADERS, client, copy_data, group_data, read_shared
from tests.test_server import _port, chartgw_serve

ANSWERED_AT = FIXED_NOW + timedelta(days=1)
_LINK = re.compile(r'<([^>]+)>; rel="(prev|next)"')


@pytest.fixture(scope="module")
def app(all_groups_data: Path) -> Iterator[TestClient]:
    with client(all_groups_data, now=ANSWERED_AT) as test_client:
        yield test_client


@pytest.fixture(scope="module")
def catalog(app: TestClient) -> dict[str, Any]:
    response = app.get("/charts", headers=KEY_HEADERS)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _get(app: TestClient, url: str) -> httpx.Response:
    return app.get(url, headers=KEY_HEADERS)


def _links(response: httpx.Response) -> dict[str, str]:
    return {rel: url for url, rel in _LINK.findall(response.headers.get("link", ""))}


def test_every_group_is_listed_and_every_group_with_charts_has_stored_ones(catalog: dict[str, Any]) -> None:
    assert [g["group"] for g in catalog["groups"]] == [g.name for g in GROUPS]
    assert len(catalog["groups"]) == 15
    assert catalog["count"] == len(catalog["charts"]) == sum(g["charts"] for g in catalog["groups"])
    held = {row["group"] for row in catalog["charts"] if row["snapshots"] > 0}
    assert held == {g.name for g in GROUPS if g.charts}  # every group but the derived index declares charts
    assert {g.name for g in GROUPS if not g.charts} == {"artist-history-api"}
    for row in catalog["charts"]:
        assert row["cadence_seconds"] == CADENCES[row["cadence"]]
        if row["target"] is not None:
            assert row["first_date"] <= row["last_date"] and row["snapshots"] >= row["dates"] >= 1


def test_the_catalog_counts_what_the_store_holds(catalog: dict[str, Any], all_groups_data: Path) -> None:
    rows = {(row["group"], row["target"]): row for row in catalog["charts"]}
    with read_shared(all_groups_data / "uk-charts.sqlite") as db:
        first, last, dates, count = db.execute("SELECT min(chart_date), max(chart_date), count(DISTINCT chart_date),"
                                               " count(*) FROM snapshots WHERE target = 'singles'").fetchone()
    row = rows[("uk-charts", "singles")]
    assert (row["first_date"], row["last_date"], row["dates"], row["snapshots"]) == (first, last, dates, count)
    assert row["market"] == "gb" and row["cadence"] == "weekly"
    assert row["by_date"] == "/uk-charts/singles/{date}"
    streaming = rows[("streaming", "regional-daily/us")]
    assert streaming["market"] == "us" and streaming["chart"] == "regional-daily"
    assert streaming["latest"] == "/streaming/latest?country=us&chart_type=regional-daily"


def test_every_url_template_printed_routes(app: TestClient, catalog: dict[str, Any]) -> None:
    """Each stored chart's latest and history URLs answer 200, and its by-date URL does at its first and last date,
    with the previous date null at the first and the next date null at the last."""
    checked = 0
    for row in catalog["charts"]:
        if row["target"] is None:
            continue
        for url in (row["latest"], row["history"]):
            if url is not None:
                assert "{" not in url, url
                assert _get(app, url).status_code == 200, (row, url)
                checked += 1
        if row["by_date"] is None:
            continue
        first = _get(app, row["by_date"].replace("{date}", row["first_date"]))
        last = _get(app, row["by_date"].replace("{date}", row["last_date"]))
        assert first.status_code == last.status_code == 200, (row, first.text, last.text)
        assert first.json()["previous_date"] is None and last.json()["next_date"] is None, row
        assert (first.json()["next_date"] is None) == (row["dates"] == 1), row
        checked += 2
    assert checked > 500


@pytest.mark.parametrize(("group", "target"), [("uk-charts", "singles"), ("ranking-charts", "hot-100"),
                                               ("streaming", "regional-daily/global"),
                                               ("video", "shorts/weekly/global")])
def test_next_links_walk_every_date_held_in_order(app: TestClient, catalog: dict[str, Any], group: str,
                                                  target: str) -> None:
    row = next(r for r in catalog["charts"] if (r["group"], r["target"]) == (group, target))
    url = row["by_date"].replace("{date}", row["first_date"])
    seen: list[str] = []
    previous_url = None
    while url is not None:
        response = _get(app, url)
        assert response.status_code == 200, (url, response.text)
        body = response.json()
        seen.append(body["snapshot"]["chart_date"])
        links = _links(response)
        assert body["previous_date"] == (seen[-2] if len(seen) > 1 else None)
        if previous_url is not None:
            assert _get(app, links["prev"]).json()["snapshot"]["chart_date"] == seen[-2]
        assert ("next" in links) == (body["next_date"] is not None)
        previous_url, url = url, links.get("next")
        assert len(seen) <= row["dates"]
    assert seen == sorted(set(seen)) and len(seen) == row["dates"] and seen[-1] == row["last_date"]


def test_link_names_the_request_s_own_parameters(app: TestClient) -> None:
    response = _get(app, "/streaming/chart?country=us&chart_type=viral-daily&chart_date=2026-11-18&limit=2")
    assert response.status_code == 200
    assert _links(response) == {
        "prev": "/streaming/chart?country=us&chart_type=viral-daily&chart_date=2026-11-17&limit=2",
        "next": "/streaming/chart?country=us&chart_type=viral-daily&chart_date=2026-11-19&limit=2"}
    as_csv = _get(app, "/streaming/chart?country=us&chart_type=viral-daily&chart_date=2026-11-18&limit=2&format=csv")
    assert as_csv.headers["content-type"].startswith("text/csv") and _links(as_csv) == _links(response)
    week = _get(app, "/uk-charts/singles/2026-10-20")  # any day of a week finds it; the links name weeks held
    assert week.json()["previous_date"] == week.json()["previous_week_start"]
    assert _links(week)["prev"] == f"/uk-charts/singles/{week.json()['previous_date']}"


def test_a_date_not_held_is_a_json_404_and_the_latest_has_no_neighbour_fields(app: TestClient) -> None:
    missing = _get(app, "/streaming/chart?country=us&chart_type=viral-daily&chart_date=2020-01-01")
    assert missing.status_code == 404 and "detail" in missing.json() and "link" not in missing.headers
    latest = _get(app, "/streaming/latest?country=us&chart_type=viral-daily")
    assert "previous_date" not in latest.json() and "link" not in latest.headers


def test_filters_formats_and_errors(app: TestClient, catalog: dict[str, Any]) -> None:
    only = _get(app, "/charts?group=uk-charts&market=gb").json()
    assert only["count"] == len([r for r in catalog["charts"] if r["group"] == "uk-charts" and r["market"] == "gb"]) > 0
    assert [g["group"] for g in only["groups"]] == ["uk-charts"]
    as_csv = _get(app, "/charts?format=csv")
    rows = list(csv.DictReader(io.StringIO(as_csv.text)))
    assert len(rows) == catalog["count"] and rows[0]["by_date"] == (catalog["charts"][0]["by_date"] or "")
    ndjson = app.get("/charts", headers={**KEY_HEADERS, "Accept": "application/x-ndjson"})
    assert [json.loads(line) for line in ndjson.text.splitlines()] == catalog["charts"]
    for url in ("/charts?group=nope", "/charts?market=US%21", "/charts?format=xml"):
        refused = _get(app, url)
        assert refused.status_code == 422 and refused.headers["content-type"] == "application/json", url
    assert app.get("/charts").status_code == 401  # keyed


def test_the_joined_document_declares_charts_and_the_dated_fields(app: TestClient) -> None:
    document = app.get("/openapi.json").json()
    assert "/charts" in document["paths"]
    schemas = document["components"]["schemas"]
    assert {"market", "cadence", "first_date", "last_date", "latest", "by_date", "history"} <= set(
        schemas["CatalogChart"]["properties"])
    assert "Link" in document["paths"]["/uk-charts/{chart_key}/{week_start}"]["get"]["responses"]["200"]["headers"]
    assert "Link" not in document["paths"]["/uk-charts/{chart_key}/latest"]["get"]["responses"]["200"]["headers"]
    dated = [name for name, schema in schemas.items() if name.startswith(("Dated", "RankingChartsDated"))]
    assert len(dated) >= 5
    for name in dated:
        assert {"previous_date", "next_date"} <= set(schemas[name]["required"]), name


def test_the_catalog_is_cached_per_data_version(tmp_path: Path, all_groups_data: Path) -> None:
    data = copy_data(group_data(all_groups_data, tmp_path / "src", "uk-charts"), tmp_path / "data")
    with client(data, now=ANSWERED_AT) as test_client:
        first = _get(test_client, "/charts?group=uk-charts")
        again = test_client.get("/charts?group=uk-charts", headers={**KEY_HEADERS, "If-None-Match": first.headers["etag"]})
        assert again.status_code == 304
        with sqlite3.connect(data / "uk-charts.sqlite") as db:  # a crawler commits a new week of singles
            db.execute("INSERT INTO snapshots (target, chart_date, chart_hour, fetched_at, source, row_count)"
                       " VALUES ('singles', '2026-11-20', NULL, '2026-11-21T00:00:00Z', 'test', 0)")
        time.sleep(FRESHNESS_SECONDS + 0.2)  # the version is re-read at most once a second
        moved = _get(test_client, "/charts?group=uk-charts")
        assert moved.headers["etag"] != first.headers["etag"]
        singles = next(r for r in moved.json()["charts"] if r["target"] == "singles")
        assert singles["last_date"] == "2026-11-20"
        before = _get(test_client, "/uk-charts/singles/2026-11-13")
        assert before.json()["next_date"] == "2026-11-20"


def test_neighbour_dates_and_the_catalog_are_one_indexed_query_each(all_groups_data: Path) -> None:
    with read_shared(all_groups_data / "ranking-charts.sqlite") as db:
        plan = " ".join(row[-1] for row in db.execute(f"EXPLAIN QUERY PLAN {tables.NEIGHBOURS.sql}",
                                                      ("hot-100", "2026-06-01")))
        assert plan.count("SEARCH snapshots USING COVERING INDEX snapshots_by_chart_time") == 2, plan
        assert "SCAN snapshots" not in plan, plan
        plan = " ".join(row[-1] for row in db.execute(f"EXPLAIN QUERY PLAN {tables.SPANS.sql}"))
        assert "COVERING INDEX snapshots_by_chart_time" in plan, plan  # the index only, never the table's rows


def test_one_cadence_helper_for_every_group() -> None:
    key = TargetKey(("kind", "market"))
    charts = (Chart("fast", key, "realtime", {"kind": "fast"}), Chart("{kind}", key, "weekly", market="market"))
    assert cadence_of(charts, "fast/kr") == 300 and cadence_of(charts, "slow/us") == 7 * 86400
    assert cadence_of(charts, "not-a-target") == CADENCES["daily"]
    assert cadences(charts, ["fast/kr"]) == {"fast/kr": 300}
    korea = next(g for g in GROUPS if g.name == "korea-chart")
    assert korea.cadence_of("portal-d/rising") == 300 and korea.cadence_of("portal-a/daily") == 3600
    for bad in ({"cadence": "fortnightly"}, {"latest": "/x/{nope}"}, {"by_date": "/x/{market}"}, {"market": "nope"}):
        with pytest.raises(AssertionError):
            Chart(**{"chart": "c", "target": key, "cadence": "daily", **bad})  # type: ignore[arg-type]


def test_a_real_server_sends_links_on_repeats_from_its_fast_lane(tmp_path: Path, all_groups_data: Path) -> None:
    """`chartgw serve` answers a repeated poll from its cache inside the server; the Link header comes with it."""
    data = group_data(all_groups_data, tmp_path, "uk-charts")
    with chartgw_serve(data) as proc:
        base = f"http://127.0.0.1:{_port(proc)}"
        answers = [httpx.get(f"{base}/uk-charts/singles/2026-10-20", headers=KEY_HEADERS) for _ in range(3)]
        assert all(a.status_code == 200 for a in answers)
        assert len({a.headers["link"] for a in answers}) == 1 and 'rel="next"' in answers[-1].headers["link"]
        listed = [httpx.get(f"{base}/charts", headers=KEY_HEADERS) for _ in range(2)]
        assert listed[0].json() == listed[1].json() and listed[0].json()["groups"][0]["group"] == "streaming"
        assert any(r["target"] == "singles" for r in listed[0].json()["charts"])
