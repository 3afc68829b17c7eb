"""The change feed over HTTP: each group's /diff, /changes with its cursor and long poll, /changes/stream.

Groups here are tiny local ones (no routes of their own) over files written with the store's writer, so every
change is made by the test at a time it chooses.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from chartgw.group import Group
from chartgw.store import FetchLogRow, NewSnapshot, SnapshotWriter, StoredEntry
from tests.fixtures import FIXED_NOW, KEY_HEADERS, client, data_dir

ALPHA = Group("alpha", "Alpha", "A test group", ())
BETA = Group("beta", "Beta", "Another test group", ())


def chart(target: str, titles: str, day: int = 0, *, ids: dict[str, str] | None = None) -> NewSnapshot:
    """A chart of one-letter titles ranked in the order given, on FIXED_NOW's date plus `day` days."""
    when = FIXED_NOW + timedelta(days=day)
    entries = [StoredEntry(rank, t.lower(), "artist", (ids or {}).get(t), json.dumps({"rank": rank, "title": t}).encode())
               for rank, t in enumerate(titles, start=1)]
    return NewSnapshot(target, when.date().isoformat(), None, when, f"test {titles}", entries)


def commit(data: Path, group: str, *snapshots: NewSnapshot) -> list[int]:
    with data_dir(data), SnapshotWriter(data / f"{group}.sqlite", now=lambda: FIXED_NOW) as writer:
        return writer.commit(list(snapshots), FetchLogRow(snapshots[0].target, FIXED_NOW, 0, "ok"))


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "data"
    path.mkdir()
    return path


@pytest.fixture
def api(data: Path) -> Iterator[TestClient]:
    with client(data, [ALPHA, BETA]) as test_client:
        yield test_client


# --- /{group}/diff ---------------------------------------------------------------------------------

def titles(body: dict[str, object]) -> list[tuple[str, str, int | None, int | None]]:
    return [(e["status"], e["entry"]["title"], e["rank"], e["previous_rank"]) for e in body["entries"]]  # type: ignore[index,union-attr]


def test_diff_answers_every_entry_in_out_and_moved_with_its_record(api: TestClient, data: Path) -> None:
    first, _ = commit(data, "alpha", chart("top", "ABCD"), chart("other", "XY"))
    second, = commit(data, "alpha", chart("top", "CAEB", 1))
    response = api.get("/alpha/diff?target=top", headers=KEY_HEADERS)
    assert response.status_code == 200 and response.headers["cache-control"] == "private, no-cache"
    body = response.json()
    assert (body["target"], body["from"]["id"], body["to"]["id"], body["count"]) == ("top", first, second, 5)
    assert body["to"] == {"id": second, "chart_date": "2026-11-21", "chart_hour": None, "fetched_at": "2026-11-21T05:30:00Z",
                          "source": "test CAEB", "row_count": 4}
    assert body["counts"] == {"new": 1, "up": 1, "down": 2, "same": 0, "out": 1}
    assert titles(body) == [("up", "C", 1, 3), ("down", "A", 2, 1), ("new", "E", 3, None), ("down", "B", 4, 2),
                            ("out", "D", None, 4)]
    assert body["entries"][0] == {"status": "up", "rank": 1, "previous_rank": 3, "change": 2,
                                  "entry": {"rank": 1, "title": "C"}}
    # Explicit ends, either way round; the same answer for the default ends.
    assert api.get(f"/alpha/diff?target=top&from={first}&to={second}", headers=KEY_HEADERS).json() == body
    backwards = api.get(f"/alpha/diff?target=top&from={second}&to={first}", headers=KEY_HEADERS).json()
    assert titles(backwards) == [("up", "A", 1, 2), ("up", "B", 2, 4), ("down", "C", 3, 1), ("new", "D", 4, None),
                                 ("out", "E", None, 3)]
    # Cached per data version: the ETag answers a 304 until a commit changes the file.
    etag = response.headers["etag"]
    assert api.get("/alpha/diff?target=top", headers={**KEY_HEADERS, "If-None-Match": etag}).status_code == 304


def test_diff_of_a_first_snapshot_has_every_entry_new(api: TestClient, data: Path) -> None:
    only, = commit(data, "alpha", chart("top", "AB"))
    body = api.get("/alpha/diff?target=top", headers=KEY_HEADERS).json()
    assert body["from"] is None and body["to"]["id"] == only
    assert titles(body) == [("new", "A", 1, None), ("new", "B", 2, None)]


def test_diff_refuses_what_it_cannot_answer(api: TestClient, data: Path) -> None:
    top, other = commit(data, "alpha", chart("top", "AB"), chart("other", "XY"))
    assert api.get("/alpha/diff?target=top").status_code == 401
    missing = api.get("/alpha/diff", headers=KEY_HEADERS)
    assert missing.status_code == 422 and missing.json() == {"detail": [
        {"type": "missing", "loc": ["query", "target"], "msg": "Field required", "input": None}]}
    bad = api.get("/alpha/diff?target=top&from=x&to=0", headers=KEY_HEADERS)
    assert bad.status_code == 422 and [e["loc"] for e in bad.json()["detail"]] == [["query", "from"], ["query", "to"]]
    for query, detail in (("target=nope", "No snapshot of nope"),
                          (f"target=top&to={other}", f"No snapshot {other} of top (it may have been pruned)"),
                          (f"target=top&from=99&to={top}", "No snapshot 99 of top (it may have been pruned)")):
        answer = api.get(f"/alpha/diff?{query}", headers=KEY_HEADERS)
        assert (answer.status_code, answer.json()) == (404, {"detail": detail}), query
    assert api.get("/beta/diff?target=top", headers=KEY_HEADERS).status_code == 404  # a group without a file yet
