"""The front door: `GET /` (public) shows every group's health and a week of crawls, as HTML to a browser
and JSON by Accept; `GET /openapi.json` (public) joins every group's document with every $ref resolving."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path

import msgspec

from chartgw.groups import GROUPS
from tests.fixtures import FIXED_NOW, client


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
    from chartgw.changes import diff, summarize
    from chartgw.front import change_line
    from chartgw.groups.korea_chart import GROUP as KOREA
    from chartgw.groups.social_trends import GROUP as TRENDS
    from chartgw.store import ChangeRow, StoredEntry

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
