"""The change feed over HTTP: each group's /diff, /changes with its cursor and long poll, /changes/stream.

Groups here are tiny local ones (no routes of their own) over files written with the store's writer, so every
change is made by the test at a time it chooses.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from chartgw.api.endpoints import ApiError, GroupData
from chartgw.api.group import Group
from chartgw.groups import GROUPS
from chartgw.http.app import access_table, declared_routes, service_routes
from chartgw.push.changes import STREAM_BUFFER, ChangeHub, Subscriber, decode_cursor, encode_cursor
from chartgw.store import ChangeRow, FetchLogRow, NewSnapshot, SnapshotWriter, StoredEntry
from tests.fixtures import FIXED_NOW, KEY_HEADERS, UNDER_FAKETIME, client, data_dir, environment, serving
from tests.fixtures import settings as run_settings

pytestmark = pytest.mark.waits

# Groups that crawl (no target here: the tests commit every snapshot themselves), so the platform gives them /diff.
ALPHA = Group("alpha", "Alpha", "A test group", (), targets=lambda *selection: ())
BETA = Group("beta", "Beta", "Another test group", (), targets=lambda *selection: ())


def chart(target: str, titles: str, day: int = 0, *, ids: dict[str, str] | None = None) -> NewSnapshot:
    """A chart of one-letter titles ranked in the order given, on FIXED_NOW's date plus `day` days."""
    when = FIXED_NOW + timedelta(days=day)
    entries = [StoredEntry(rank, t.lower(), "artist", (ids or {}).get(t), json.dumps({"rank": rank, "title": t}).encode())
               for rank, t in enumerate(titles, start=1)]
    return NewSnapshot(target, when.date().isoformat(), None, when, f"test {titles}", entries)


def commit(data: Path, group: str, *snapshots: NewSnapshot, minute: int = 0) -> list[int]:
    """Commit `snapshots` to `group`'s file as one crawl result, the writer's clock `minute` minutes past FIXED_NOW."""
    at = FIXED_NOW + timedelta(minutes=minute)
    with data_dir(data), SnapshotWriter(data / f"{group}.sqlite", now=lambda: at) as writer:
        return writer.commit(list(snapshots), FetchLogRow(snapshots[0].target, at, 0, "ok"))


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

def titles(body: dict[str, Any]) -> list[tuple[str, str, int | None, int | None]]:
    return [(e["status"], e["entry"]["title"], e["rank"], e["previous_rank"]) for e in body["entries"]]


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


def test_every_group_that_crawls_snapshots_has_a_diff() -> None:
    for group in GROUPS:
        assert any(r.path == "/diff" for r in service_routes(group)) is (group.targets is not None), group.name
    assert not any(r.path == "/diff" for r in service_routes(Group("index", "Index", "No snapshots", ())))


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


# --- GET /changes ----------------------------------------------------------------------------------

def feed(api: TestClient, query: str = "") -> dict[str, Any]:
    response = api.get(f"/changes?{query}", headers=KEY_HEADERS)
    assert response.status_code == 200, response.text
    assert response.headers["cache-control"] == "no-store"
    return response.json()


def seen(body: dict[str, Any]) -> list[tuple[str, int, str]]:
    return [(c["group"], c["id"], c["target"]) for c in body["changes"]]


def test_changes_merge_every_group_in_commit_order_and_page_without_gaps(api: TestClient, data: Path) -> None:
    commit(data, "alpha", chart("top", "AB"), minute=1)
    commit(data, "beta", chart("top", "XY"), chart("new", "Q"), minute=2)
    commit(data, "alpha", chart("top", "BA", 1), minute=3)
    commit(data, "beta", chart("top", "YX", 1), minute=3)  # the same second: alpha (the first group) first
    commit(data, "alpha", chart("other", "C"), minute=4)
    everything = feed(api)
    assert seen(everything) == [("alpha", 1, "top"), ("beta", 1, "top"), ("beta", 2, "new"), ("alpha", 2, "top"),
                                ("beta", 3, "top"), ("alpha", 3, "other")]
    assert everything["more"] is False and everything["count"] == 6
    change = everything["changes"][3]
    assert {k: change[k] for k in ("chart_date", "chart_hour", "snapshot_id", "previous_snapshot_id", "committed_at",
                                   "diff")} == {
        "chart_date": "2026-11-21", "chart_hour": None, "snapshot_id": 2, "previous_snapshot_id": 1,
        "committed_at": "2026-11-20T05:33:00Z", "diff": "/alpha/diff?target=top&from=1&to=2"}
    assert change["summary"]["new_number_one"] is True and change["summary"]["number_one"]["entry"]["title"] == "B"
    assert api.get(change["diff"], headers=KEY_HEADERS).json()["counts"] == {"new": 0, "up": 1, "down": 1, "same": 0,
                                                                              "out": 0}
    # Pages of two: the same changes, each once, in the same order.
    pages, cursor = [], ""
    while True:
        body = feed(api, f"limit=2{cursor}")
        pages.append(seen(body))
        cursor = f"&since={body['next']}"
        if not body["more"]:
            break
    assert [c for page in pages for c in page] == seen(everything) and [len(p) for p in pages] == [2, 2, 2]
    # Caught up: nothing more until a commit, which the same cursor then finds, also through a new server.
    assert feed(api, cursor[1:])["changes"] == []
    commit(data, "beta", chart("new", "QR", 1), minute=5)
    with client(data, [ALPHA, BETA]) as restarted:
        assert seen(feed(restarted, cursor[1:])) == [("beta", 4, "new")]


def test_changes_filter_by_group_and_target_and_move_past_what_they_skip(api: TestClient, data: Path) -> None:
    commit(data, "alpha", chart("top", "AB"), chart("other", "C"))
    commit(data, "beta", chart("top", "XY"), chart("other", "Z"))
    assert seen(feed(api, "groups=beta")) == [("beta", 1, "top"), ("beta", 2, "other")]
    body = feed(api, "targets=other,missing")
    assert seen(body) == [("alpha", 2, "other"), ("beta", 2, "other")]
    alpha_top = feed(api, "groups=alpha&targets=top&limit=1")
    assert seen(alpha_top) == [("alpha", 1, "top")] and alpha_top["more"] is True
    rest = feed(api, f"groups=alpha&targets=top&since={alpha_top['next']}")
    assert rest["changes"] == [] and rest["more"] is False
    # The cursor moved past alpha's "other" (skipped by the filter): a later top change is the next one.
    commit(data, "alpha", chart("other", "CD", 1))
    commit(data, "alpha", chart("top", "BA", 1))
    assert seen(feed(api, f"groups=alpha&targets=top&since={rest['next']}")) == [("alpha", 4, "top")]


def test_since_now_starts_at_the_current_end(api: TestClient, data: Path) -> None:
    commit(data, "alpha", chart("top", "AB"))
    now = feed(api, "since=now")
    assert now["changes"] == [] and now["more"] is False
    commit(data, "beta", chart("top", "XY"))
    assert seen(feed(api, f"since={now['next']}")) == [("beta", 1, "top")]


def test_changes_refuse_bad_parameters_and_callers_without_a_key(api: TestClient) -> None:
    assert not access_table(declared_routes(GROUPS)).is_public("/changes")  # keyed: the access table's default deny
    assert api.get("/changes").status_code == 401
    body = api.get("/changes?groups=alpha,nope&since=c1.%21&limit=0&wait=61", headers=KEY_HEADERS)
    assert body.status_code == 422
    assert [(e["loc"][1], e["type"]) for e in body.json()["detail"]] == [
        ("groups", "value_error"), ("since", "value_error"), ("limit", "greater_than_equal"),
        ("wait", "less_than_equal")]
    for since in ("c1.bm9wZQ", "x", "c1.YTox,", "c1.QUE6MQ"):  # "nope", not a cursor, bad base64, "AA:1"
        answer = api.get(f"/changes?since={since}", headers=KEY_HEADERS)
        assert answer.status_code == 422 and answer.json()["detail"][0]["loc"] == ["query", "since"], since


def test_pruned_snapshots_leave_the_feed_whole(api: TestClient, data: Path) -> None:
    """Retention drops old snapshots; their change records stay in the feed, summaries and all, and the diff of a
    pruned snapshot is a 404 that says so."""
    commit(data, "alpha", chart("top", "AB", -10))
    commit(data, "alpha", chart("top", "BC", -9))
    with SnapshotWriter(data / "alpha.sqlite", retention={"": 3.0}, now=lambda: FIXED_NOW) as writer:
        writer.commit([chart("top", "CD")], FetchLogRow("top", FIXED_NOW, 0, "ok"))
    body = feed(api)
    assert [(c["id"], c["snapshot_id"]) for c in body["changes"]] == [(1, 1), (2, 2), (3, 3)]
    assert [e["entry"]["title"] for e in body["changes"][1]["summary"]["exited"]] == ["A"]
    pruned = api.get(body["changes"][1]["diff"], headers=KEY_HEADERS)
    assert pruned.status_code == 404 and "pruned" in pruned.json()["detail"]


# --- long polls ----------------------------------------------------------------------------------------

def later(seconds: float, action: Callable[[], object]) -> threading.Timer:
    timer = threading.Timer(seconds, action)
    timer.start()
    return timer


@pytest.mark.skipif(UNDER_FAKETIME, reason="under libfaketime a timed wait in a thread lasts the clock's offset")
def test_a_long_poll_answers_the_moment_a_change_lands(api: TestClient, data: Path) -> None:
    commit(data, "alpha", chart("top", "AB"))
    start = feed(api)["next"]
    timer = later(0.5, lambda: commit(data, "beta", chart("top", "XY")))
    began = time.monotonic()
    body = feed(api, f"since={start}&wait=60")
    waited = time.monotonic() - began
    timer.join()
    assert seen(body) == [("beta", 1, "top")]
    assert 0.4 < waited < 30, waited  # woken by the commit (polled every 0.25 s), not by the 60 s (a loaded box is slow)
    # A change the filters skip does not answer a long poll; the time running out does, with nothing.
    timer = later(0.3, lambda: commit(data, "alpha", chart("other", "C")))
    began = time.monotonic()
    empty = feed(api, f"since={body['next']}&targets=top&wait=2")
    timer.join()
    assert empty["changes"] == [] and 1.9 < time.monotonic() - began < 20  # ended by its 2 s (a generous ceiling)
    assert seen(feed(api, f"since={empty['next']}")) == []  # the skipped change is behind the cursor


def test_long_polls_are_bounded_per_process(data: Path) -> None:
    """Past CHANGES_MAX_WAITERS a long poll is refused with a 503 at once; a slot frees when a wait ends."""
    async def scenario() -> None:
        hub = ChangeHub({"alpha": GroupData("alpha", settings=run_settings())}, settings=run_settings())
        async with hub.waiting():
            with pytest.raises(ApiError) as refused:
                async with hub.waiting():
                    pass
            assert (refused.value.status, refused.value.headers) == (503, {"Retry-After": "1"})
        async with hub.waiting():
            assert hub.waiters == 1
        await hub.close()

    with data_dir(data), environment({"CHARTGW_CHANGES_MAX_WAITERS": "1"}):
        asyncio.run(scenario())


# --- GET /changes/stream -------------------------------------------------------------------------------

@pytest.fixture
def server(data: Path) -> Iterator[tuple[str, Any]]:
    """The gateway over `data` served for real by uvicorn (a stream never ends, so no TestClient): (base URL, app)."""
    with client(data, [ALPHA, BETA]) as test_client, serving(test_client.app) as base:
        yield base, test_client.app


def sse(lines: Iterator[str]) -> Iterator[dict[str, str]]:
    """Server-Sent Events as dicts of their fields; a comment line alone (a heartbeat) as {"comment": ...}."""
    event: dict[str, str] = {}
    for line in lines:
        if not line:
            if event:
                yield event
            event = {}
        elif line.startswith(":"):
            yield {"comment": line[1:].strip()}
        else:
            name, _, value = line.partition(":")
            event[name] = value.removeprefix(" ")


def changes_of(events: Iterator[dict[str, str]], n: int) -> list[dict[str, str]]:
    """The next `n` change events (comments skipped)."""
    found: list[dict[str, str]] = []
    while len(found) < n:
        event = next(events)
        if event.get("event") == "change":
            found.append(event)
    return found


def test_a_stream_sends_what_waits_then_each_new_change_and_resumes_by_last_event_id(
        server: tuple[str, Any], data: Path) -> None:
    base, _ = server
    commit(data, "alpha", chart("top", "AB"), minute=1)
    commit(data, "beta", chart("top", "XY"), minute=2)
    with httpx.Client(base_url=base, headers=KEY_HEADERS, timeout=10) as http:
        with http.stream("GET", "/changes/stream") as stream:
            assert stream.status_code == 200 and stream.headers["content-type"].startswith("text/event-stream")
            assert stream.headers["cache-control"] == "no-store"
            events = sse(stream.iter_lines())
            first, second = changes_of(events, 2)
            assert [(json.loads(e["data"])["group"], json.loads(e["data"])["id"]) for e in (first, second)] == [
                ("alpha", 1), ("beta", 1)]
            assert decode_cursor(first["id"]) == {"alpha": 1} and decode_cursor(second["id"]) == {"alpha": 1, "beta": 1}
            began = time.monotonic()
            commit(data, "alpha", chart("top", "BA", 1), minute=3)
            third, = changes_of(events, 1)
            assert json.loads(third["data"])["summary"]["new_number_one"] is True
            assert time.monotonic() - began < 20  # pushed soon after the commit (a ceiling a loaded box keeps)
        # Resumed after the first event: the second and third, nothing twice, nothing missed.
        with http.stream("GET", "/changes/stream", headers={"Last-Event-ID": first["id"]}) as stream:
            again = changes_of(sse(stream.iter_lines()), 2)
        assert [e["id"] for e in again] == [second["id"], third["id"]]
        # The query's cursor too, and filters; the header wins over `since`.
        with http.stream("GET", f"/changes/stream?groups=alpha&since={first['id']}") as stream:
            assert changes_of(sse(stream.iter_lines()), 1)[0]["id"] == encode_cursor({"alpha": 2})
        bad = http.get("/changes/stream?since=now", headers={"Last-Event-ID": "nonsense"})
        assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["header", "last-event-id"]
        assert http.get("/changes/stream", headers={"X-API-Key": ""}).status_code == 401
        assert http.get("/changes/stream?groups=gamma").status_code == 422


def test_an_idle_stream_sends_heartbeats(data: Path) -> None:
    with environment({"CHARTGW_CHANGES_HEARTBEAT_SECONDS": "1"}), client(data, [ALPHA]) as test_client, \
            serving(test_client.app) as base, httpx.Client(base_url=base, headers=KEY_HEADERS, timeout=10) as http, \
            http.stream("GET", "/changes/stream?since=now") as stream:
        events = sse(stream.iter_lines())
        assert [next(events), next(events)] == [{"comment": "chartgw changes"}, {"retry": "3000"}]  # reconnect after 3 s
        began = time.monotonic()
        assert next(events) == {"comment": "ping"} and 0.5 < time.monotonic() - began < 20


def test_streams_are_bounded_per_process(data: Path) -> None:
    with environment({"CHARTGW_CHANGES_MAX_STREAMS": "1"}), client(data, [ALPHA]) as test_client, \
            serving(test_client.app) as base, httpx.Client(base_url=base, headers=KEY_HEADERS, timeout=10) as http:
        with http.stream("GET", "/changes/stream?since=now") as stream:
            events = sse(stream.iter_lines())  # kept: a dropped line iterator closes the connection
            next(events)
            refused = http.get("/changes/stream")
            assert (refused.status_code, refused.headers["retry-after"]) == (503, "1")
        deadline = time.monotonic() + 5
        while test_client.app.state.change_hub.subscribers:  # type: ignore[attr-defined]  # the Starlette app  # the closed stream lets go of its place
            assert time.monotonic() < deadline
            time.sleep(0.05)
        with http.stream("GET", "/changes/stream?since=now") as stream:
            assert stream.status_code == 200


def test_a_subscriber_holds_at_most_its_buffer_then_is_dropped() -> None:
    subscriber = Subscriber(["alpha"], ())
    dropped: list[bool] = []
    subscriber.on_drop = lambda: dropped.append(True)
    row = ChangeRow(1, 1, None, "top", "2026-11-20", None, "2026-11-20T05:30:00Z", b"{}")
    subscriber.offer("beta", row)  # another group's: not its
    assert not subscriber.pending
    for _ in range(STREAM_BUFFER):
        subscriber.offer("alpha", row)
    assert len(subscriber.pending) == STREAM_BUFFER and not subscriber.dropped
    subscriber.offer("alpha", row)
    assert subscriber.dropped and not subscriber.pending and dropped == [True]
    subscriber.offer("alpha", row)
    assert not subscriber.pending and dropped == [True]


def big_charts(n: int, day: int) -> list[NewSnapshot]:
    """`n` charts whose change summaries are large (long records), to fill a stalled client's socket quickly."""
    pad = "x" * 3000
    charts = []
    for i in range(n):
        entries = [StoredEntry(r, f"t{day}-{r}", "a", None, json.dumps({"title": f"{day}-{r}", "pad": pad}).encode())
                   for r in range(1, 11)]
        charts.append(NewSnapshot(f"big/{i}", (FIXED_NOW + timedelta(days=day)).date().isoformat(), None, FIXED_NOW,
                                  "test", entries))
    return charts


def test_a_client_that_stops_reading_is_dropped_and_resumes_without_a_gap(server: tuple[str, Any], data: Path) -> None:
    """A stream whose client reads nothing while changes keep coming is cut off once its buffer overflows (memory
    stays bounded: the subscriber is gone); the client then resumes from the last event it has, missing nothing."""
    base, app = server
    hub = app.state.change_hub
    commit(data, "alpha", chart("top", "AB"))
    host, port = base.removeprefix("http://").split(":")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((host, int(port)))
    sock.sendall(f"GET /changes/stream?since=now HTTP/1.1\r\nHost: x\r\nX-API-Key: {KEY_HEADERS['X-API-Key']}\r\n\r\n"
                 .encode())
    deadline = time.monotonic() + 5
    while not hub.subscribers:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    committed = 0
    for day in range(1, 40):
        commit(data, "alpha", *big_charts(25, day))
        committed += 25
        if not hub.subscribers:
            break
        time.sleep(0.3)  # a poll reads each batch
    assert not hub.subscribers, "the stalled stream was never dropped"
    received = b""
    sock.settimeout(10)
    while chunk := sock.recv(65536):  # the server closed the connection: what was sent, then EOF
        received += chunk
    sock.close()
    body = received.partition(b"\r\n\r\n")[2].decode("latin-1")
    ids = [line[4:] for line in body.splitlines() if line.startswith("id: ")]
    assert len(ids) < committed  # it did not get everything
    last = ids[-1] if ids else encode_cursor({"alpha": 1})
    with httpx.Client(base_url=base, headers={**KEY_HEADERS, "Last-Event-ID": last}, timeout=10) as http, \
            http.stream("GET", "/changes/stream") as stream:
        rest = changes_of(sse(stream.iter_lines()), committed - len(ids))
    assert [json.loads(e["data"])["id"] for e in rest] == list(range(2 + len(ids), 2 + committed))
