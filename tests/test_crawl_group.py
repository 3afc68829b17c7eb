"""The runner's group-level pieces: discovery before targets, recorded runs, dated backfill keys,
local imports and the CLI verbs a group adds. A tiny group over a MockTransport stands in."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from chartgw import cli
from chartgw.api.group import CommandArg, Group, GroupCommand, crawl_group
from chartgw.core.settings import Settings
from chartgw.crawl.context import Context
from chartgw.crawl.runner import CrawlContext, CrawlTarget, Fetched, Outcome, crawl_lock, import_builds, run_targets
from chartgw.store import NewSnapshot, SnapshotWriter, group_db_path
from chartgw.store.records import stored_entry
from chartgw.upstreams import UpstreamFormatError, UpstreamRequest
from tests.fixtures import configure
from tests.fixtures import settings as run_settings

NOW = datetime(2026, 11, 20, 5, 30, 0, tzinfo=UTC)
NAME = "tiny"


class Item(msgspec.Struct):
    rank: int
    title: str
    artist: str


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    configure("CHARTGW_DATA_DIR", str(tmp_path))
    configure("CHARTGW_UPSTREAM_MELON", "http://upstream.test")
    return tmp_path


def _snapshot(target: str, lines: list[str], now: datetime, chart_date: str = "2026-11-20") -> NewSnapshot:
    if not lines:
        raise UpstreamFormatError("empty chart")
    entries = []
    for rank, line in enumerate(lines, start=1):
        title, _, artist = line.partition(" - ")
        entries.append(stored_entry(Item(rank, title, artist), rank=rank, title=title, artists=[artist], item_id=None))
    return NewSnapshot(target, chart_date, None, now, "test", entries)


def _chart(key: str) -> CrawlTarget:
    def build(fetched: list[Fetched], ctx: CrawlContext) -> list[NewSnapshot]:
        return [_snapshot(key.partition("@")[0], fetched[0].body.decode().splitlines(), ctx.now,
                          key.partition("@")[2] or "2026-11-20")]
    return CrawlTarget(key, (UpstreamRequest("MELON", f"/{key}"),), build)


def _catalogue_target() -> CrawlTarget:
    return CrawlTarget("catalogue", (UpstreamRequest("MELON", "/catalogue"),),
                       lambda fetched, ctx: [_snapshot("catalogue", fetched[0].body.decode().splitlines(), ctx.now)])


def _targets_from_catalogue(selection: dict[str, str | None], now: datetime, settings: Settings) -> list[CrawlTarget]:
    with SnapshotWriter(group_db_path(NAME, settings)) as store:
        names = [msgspec.json.decode(r)["title"] for r in store.latest_records("catalogue")]
    return [_chart(name) for name in names]


def _transport(pages: dict[str, str]) -> httpx.MockTransport:
    return httpx.MockTransport(lambda request: httpx.Response(200, text=pages[request.url.path])
                               if request.url.path in pages else httpx.Response(500, text="down"))


GROUP = Group(NAME, "Tiny", "A test group", (), targets=_targets_from_catalogue, discovery=lambda settings: [_catalogue_target()])


def _runs(path: Path) -> list[tuple[str, int, int, dict[str, Any]]]:
    db = sqlite3.connect(path / f"{NAME}.sqlite")
    return [(kind, targets, ok, json.loads(detail))
            for kind, targets, ok, detail in db.execute("SELECT kind, targets, ok, detail FROM crawl_runs ORDER BY id")]


def test_discovery_runs_first_and_the_targets_come_from_what_it_stored(data: Path) -> None:
    pages = {"/catalogue": "a - kind\nb - kind", "/a": "Song - Artist", "/b": "Other - Band"}
    outcomes = asyncio.run(crawl_group(GROUP, {}, now=lambda: NOW, transport=_transport(pages), settings=run_settings()))
    assert [(o.target, o.status) for o in outcomes] == [("catalogue", "ok"), ("a", "ok"), ("b", "ok")]
    assert [(kind, targets, ok) for kind, targets, ok, _ in _runs(data)] == [("discovery", 1, 1), ("crawl", 2, 2)]


def test_a_failed_discovery_keeps_the_last_catalogue_and_one_failing_target_does_not_stop_the_run(data: Path) -> None:
    asyncio.run(crawl_group(GROUP, {}, now=lambda: NOW, transport=_transport(
        {"/catalogue": "a - kind\nb - kind", "/a": "Song - Artist", "/b": "Other - Band"}), settings=run_settings()))
    outcomes = asyncio.run(crawl_group(GROUP, {}, now=lambda: NOW, transport=_transport({"/a": "New - Artist"}), settings=run_settings()))
    assert [(o.target, o.status) for o in outcomes] == [("catalogue", "failed"), ("a", "ok"), ("b", "failed")]
    assert "HTTP 500" in (outcomes[0].error or "")
    kind, targets, ok, detail = _runs(data)[-1]
    assert (kind, targets, ok) == ("crawl", 2, 1)
    assert [o["status"] for o in detail["outcomes"]] == ["ok", "failed"]


def test_a_dated_key_writes_its_target_and_reports_its_rows(data: Path) -> None:
    keys = ["weekly@2026-11-13", "weekly@2026-11-06"]
    outcomes = asyncio.run(run_targets(NAME, [_chart(k) for k in keys], now=lambda: NOW, run_kind="backfill",
                                       run_options={"weeks": 2},
                                       transport=_transport({f"/{k}": "Song - Artist" for k in keys}), settings=run_settings()))
    assert [(o.target, o.rows, o.snapshot_id is not None) for o in outcomes] == [(k, 1, True) for k in keys]
    db = sqlite3.connect(data / f"{NAME}.sqlite")
    assert sorted(db.execute("SELECT target, chart_date FROM snapshots")) == [("weekly", "2026-11-06"),
                                                                             ("weekly", "2026-11-13")]
    assert [(kind, detail["options"]) for kind, _, _, detail in _runs(data)] == [("backfill", {"weeks": 2})]


def test_imports_commit_like_a_crawl_and_a_bad_file_changes_nothing(data: Path) -> None:
    def build(lines: list[str]):
        return lambda ctx: [_snapshot("chart", lines, ctx.now)]

    outcomes = import_builds(NAME, [("chart", build(["Song - Artist"])), ("chart", build([]))], "file.csv", now=lambda: NOW, settings=run_settings())
    assert [(o.status, o.error) for o in outcomes] == [("ok", None), ("failed", "empty chart")]
    db = sqlite3.connect(data / f"{NAME}.sqlite")
    assert db.execute("SELECT count(*) FROM snapshots").fetchone() == (1,)
    assert db.execute("SELECT status, url FROM fetch_log ORDER BY id").fetchall() == [("ok", "file.csv"),
                                                                                   ("failed", "file.csv")]
    assert [(kind, targets, ok) for kind, targets, ok, _ in _runs(data)] == [("import", 2, 1)]


def test_the_cli_offers_each_group_command_under_its_verb(data: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    seen: list[dict[str, Any]] = []

    def run(ctx: Context, values: dict[str, Any]) -> list[Outcome]:
        seen.append(values)
        if values["file"] == "missing.csv":
            raise FileNotFoundError("missing.csv: no such file")
        return [Outcome("chart", "ok", 1, 1)]

    command = GroupCommand("import", "load a file", (CommandArg("file", "the file", positional=True),
                                                     CommandArg("weeks", "how many", type=int, default=8)), run)
    tiny = Group(NAME, "Tiny", "A test group", (), commands=(command,))
    monkeypatch.setattr(cli, "GROUPS", (tiny,))
    assert cli.main(["import", NAME, "chart.csv", "--weeks", "3", "--json"], run_settings()) == 0
    assert seen == [{"file": "chart.csv", "weeks": 3}]
    assert json.loads(capsys.readouterr().out)[0]["status"] == "ok"
    assert cli.main(["import", NAME, "missing.csv"], run_settings()) == 2
    assert "no such file" in capsys.readouterr().err


def test_a_command_outside_the_lock_runs_while_a_crawl_holds_it(data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A long-running command (`lock=False`, the radio monitor) does not wait for, nor take, the crawl lock."""
    ran: list[str] = []
    monitor = GroupCommand("monitor", "watch", (), lambda ctx, values: ran.append("ran") or [], lock=False,  # type: ignore[func-returns-value]
                           at_boot=True)
    tiny = Group(name="tiny", title="t", description="d", routes=(), targets=lambda s, now, settings: [], commands=(monitor,))
    monkeypatch.setattr(cli, "GROUPS", (tiny,))
    with crawl_lock("tiny", settings=run_settings()):
        assert cli.main(["monitor", "tiny"], run_settings()) == 0
    assert ran == ["ran"]
    tab = cli.crontab(("chartgw",), Path("/srv/chartgw"))
    assert "@reboot CHARTGW_DATA_DIR=/srv/chartgw chartgw monitor tiny >> /srv/chartgw/tiny-monitor.log 2>&1" in tab
