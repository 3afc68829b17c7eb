"""The operator's CLI: keys (unique names, rates, usage days, the listing), `chartgw storage` over every file of
the data folder, and every command surviving a closed pipe."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from chartgw import cli
from chartgw.api.access import KeyChecker, KeyStore
from chartgw.groups import GROUPS
from tests.fixtures import child_env, configure, copy_data
from tests.fixtures import settings as run_settings


@pytest.fixture
def data(tmp_path: Path) -> Path:
    configure("CHARTGW_DATA_DIR", str(tmp_path))
    return tmp_path


def chartgw(*args: str) -> int:
    """`chartgw ARGS` in this process, with the test's settings."""
    return cli.main(list(args), run_settings())


def _create(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = chartgw("keys", "create", *args)
    out, err = capsys.readouterr()
    return status, out.strip(), err


# --- keys ----------------------------------------------------------------------------------------------------

def test_a_key_name_is_unique_and_rotate_acts_on_one_key(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, first, _ = _create(capsys, "--name", "alice", "--rate", "60/minute")
    assert status == 0
    status, out, err = _create(capsys, "--name", "alice")
    assert status == 2 and out == ""
    assert "a key named 'alice' is active (id 1): rotate it (chartgw keys rotate alice) or revoke it first" in err
    assert len(KeyStore(data / "keys.sqlite").list()) == 1

    assert chartgw("keys", "rotate", "alice", "--grace-days", "2") == 0
    second = capsys.readouterr().out.strip()
    assert chartgw("keys", "rotate", "alice", "--grace-days", "1") == 0
    third = capsys.readouterr().out.strip()
    checker = KeyChecker(data / "keys.sqlite", recheck_seconds=0)
    grants = [checker.grant(k) for k in (first, second, third)]
    assert all(g is not None for g in grants)
    first_grant, second_grant, third_grant = grants
    assert first_grant and second_grant and third_grant
    # The second rotation expired only the key it succeeded; the first key keeps its two days of grace.
    assert first_grant.expires_at and second_grant.expires_at and first_grant.expires_at > second_grant.expires_at
    assert third_grant.expires_at is None and third_grant.rate_per_minute == 60

    assert chartgw("keys", "revoke", "3") == 0
    for key_id in (1, 2):
        KeyStore(data / "keys.sqlite").revoke(key_id)
    capsys.readouterr()
    status, _, _ = _create(capsys, "--name", "alice")  # no active key holds the name any more
    assert status == 0


@pytest.mark.parametrize(("rate", "stored"), [("1/minute", 1), ("600", 600), (" 90/Minute ", 90), ("unlimited", 0)])
def test_rate_takes_n_per_minute_or_unlimited(data: Path, capsys: pytest.CaptureFixture[str], rate: str,
                                              stored: int) -> None:
    status, key, _ = _create(capsys, "--name", "p", "--rate", rate)
    grant = KeyChecker(data / "keys.sqlite").grant(key)
    assert status == 0 and grant is not None and grant.rate_per_minute == stored


@pytest.mark.parametrize("rate", ["0", "0/minute", "-5/minute", "10/second", "30/hour", "fast", ""])
def test_a_rate_of_zero_or_another_unit_is_refused_with_a_clear_message(data: Path, capsys: pytest.CaptureFixture[str],
                                                                       rate: str) -> None:
    with pytest.raises(SystemExit) as exit_:
        chartgw("keys", "create", "--name", "p", f"--rate={rate}")
    assert exit_.value.code == 2
    assert "use N/minute with N >= 1, or unlimited" in capsys.readouterr().err
    assert KeyStore(data / "keys.sqlite").list() == []


@pytest.mark.parametrize("days", ["0", "-3", "two"])
def test_usage_days_must_be_at_least_one(data: Path, capsys: pytest.CaptureFixture[str], days: str) -> None:
    with pytest.raises(SystemExit) as exit_:
        chartgw("keys", "usage", "--days", days)
    assert exit_.value.code == 2 and "must be a whole number of days >= 1" in capsys.readouterr().err


def test_keys_list_shows_rate_expiry_and_last_use(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = KeyStore(data / "keys.sqlite")
    expires = datetime.now(UTC) + timedelta(days=30)
    store.create("default-rate")
    store.create("fixed", expires, 120)
    store.create("free", None, 0)
    store.add_usage({(2, "2026-11-19"): [5, 0], (2, "2026-11-20"): [3, 1], (3, "2026-11-18"): [0, 0]})
    configure("CHARTGW_RATE_LIMIT_PER_MINUTE", "300")
    assert chartgw("keys", "list") == 0
    header, *lines = capsys.readouterr().out.splitlines()
    assert header.split() == ["id", "state", "rate", "created", "expires", "last", "used", "name"]
    rows = {line.split()[-1]: line for line in lines}
    assert "default (300/minute)" in rows["default-rate"] and rows["default-rate"].count(" - ") == 2
    assert "120/minute" in rows["fixed"] and f"{expires:%Y-%m-%d}" in rows["fixed"] and "2026-11-20" in rows["fixed"]
    assert "unlimited" in rows["free"] and "2026-11-18" not in rows["free"]  # a day without requests is no use


# --- storage -------------------------------------------------------------------------------------------------

def test_storage_reports_every_file_the_artist_history_index_included(
        korea_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = copy_data(korea_data, tmp_path / "data")
    configure("CHARTGW_DATA_DIR", str(data))
    assert chartgw("index", "artist-history-api") == 0
    KeyStore(data / "keys.sqlite").create("p")
    (data / "crawl.log").write_text("a line\n")
    (data / "radio-monitor.log").write_text("")
    capsys.readouterr()

    assert chartgw("storage", "--json") == 0
    rows = {row["file"]: row for row in json.loads(capsys.readouterr().out)}
    on_disk = {p.name for p in data.iterdir() if not p.name.endswith(("-wal", "-shm"))}
    assert on_disk <= set(rows)
    assert {row["group"] for row in rows.values() if row["kind"] in ("snapshots", "index", "missing")} == {
        g.name for g in GROUPS}
    index = rows["artist-history-api.sqlite"]
    assert index["kind"] == "index" and index["rows"] > 1000 and index["snapshots"] is None and index["first"]
    assert index["bytes"] >= (data / "artist-history-api.sqlite").stat().st_size and index["error"] is None
    assert rows["korea-chart.sqlite"]["kind"] == "snapshots" and rows["korea-chart.sqlite"]["snapshots"] > 10
    assert rows["video.sqlite"]["kind"] == "missing" and rows["video.sqlite"]["bytes"] == 0
    assert rows["keys.sqlite"]["kind"] == "keys" and rows["keys.sqlite"]["group"] is None
    assert rows["radio-monitor.log"]["group"] == "radio" and rows["crawl.log"]["group"] is None

    assert chartgw("storage") == 0
    text = capsys.readouterr().out
    assert "artist-history-api.sqlite" in text and "index of " in text and "keys.sqlite" in text


def test_storage_reports_an_unreadable_file_without_failing(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (data / "video.sqlite").write_bytes(b"not a database, but the size of a page" * 200)
    assert chartgw("storage", "--json") == 0
    video = next(row for row in json.loads(capsys.readouterr().out) if row["file"] == "video.sqlite")
    assert video["bytes"] > 0 and video["error"].startswith("DatabaseError")


# --- closed pipes --------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("command", "status"), [(["settings"], cli.EXIT_PIPE), (["keys", "list"], cli.EXIT_PIPE),
                                                 (["cron"], cli.EXIT_PIPE), (["storage"], cli.EXIT_PIPE),
                                                 (["keys", "usage"], cli.EXIT_PIPE), (["--help"], 0)])
def test_every_command_survives_a_closed_pipe(data: Path, command: list[str], status: int) -> None:
    """The reader is gone before the command writes (`chartgw settings | head -0`): no traceback, and the exit
    status of a Unix tool whose pipe closed (141; argparse's help ignores a closed pipe itself)."""
    reader, writer = os.pipe()
    os.close(reader)
    try:
        done = subprocess.run([sys.executable, "-m", "chartgw", *command], stdout=writer, stderr=subprocess.PIPE,
                              env=child_env(DATA_DIR=str(data)), timeout=60)
    finally:
        os.close(writer)
    assert done.stderr == b"" and done.returncode == status, done.stderr.decode()


# --- the artist-history index: crawled, imported, in the crontab ----------------------------------------------

def _chartgw_process(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`chartgw ARGS` as its own process over `data` (what an operator or cron runs)."""
    return subprocess.run([sys.executable, "-m", "chartgw", *args], capture_output=True, text=True,
                          env=child_env(DATA_DIR=str(data)), timeout=300)


def test_an_import_is_indexed_at_once_and_crawling_the_index_catches_it_up(data: Path) -> None:
    """`chartgw import` indexes what it committed, as a crawl does (the index no longer waits for the next crawl);
    `chartgw crawl artist-history-api`, offered by `crawl --help`, catches the index up instead of a traceback."""
    from chartgw.demo.samples import streaming as samples

    assert "artist-history-api" in _chartgw_process(data, "crawl", "--help").stdout
    chart = data / "regional-us-weekly-2026-10-01.csv"
    chart.write_bytes(samples.render_download_csv("regional-weekly", "us", samples.chart_rows("regional-weekly", "us")))
    imported = _chartgw_process(data, "import", "streaming", str(chart), "--json")
    assert imported.returncode == 0 and "Traceback" not in imported.stderr, imported.stderr
    assert (data / "artist-history-api.sqlite").exists()  # the import's hook built the index
    crawled = _chartgw_process(data, "crawl", "artist-history-api", "--json")
    assert crawled.returncode == 0 and "Traceback" not in crawled.stderr, crawled.stderr
    outcomes = {o["target"]: o for o in json.loads(crawled.stdout)}
    assert outcomes["streaming"]["status"] == "ok" and outcomes["streaming"]["rows"] == 0  # nothing left behind
    assert outcomes["streaming"]["snapshot_id"] > 0
    # a later import is in the index as soon as it exits: a crawl of the index finds nothing more of it
    later = data / "regional-us-weekly-2026-10-08.csv"
    later.write_bytes(samples.render_download_csv("regional-weekly", "us", samples.chart_rows("regional-weekly", "us", 1)))
    assert _chartgw_process(data, "import", "streaming", str(later)).returncode == 0
    again = {o["target"]: o for o in json.loads(_chartgw_process(data, "crawl", "artist-history-api", "--json").stdout)}
    assert again["streaming"]["rows"] == 0 and again["streaming"]["snapshot_id"] > outcomes["streaming"]["snapshot_id"]


def test_the_crontab_runs_the_index_catch_up() -> None:
    tab = cli.crontab(("chartgw",), Path("/srv/chartgw"))
    assert ("*/15 * * * * CHARTGW_DATA_DIR=/srv/chartgw chartgw index artist-history-api --wait 240 >> "
            "/srv/chartgw/artist-history-api-index.log 2>&1") in tab.splitlines()


# --- start-up: a command imports only the groups it touches ----------------------------------------------------

_LOADED = ("import sys\nfrom chartgw import cli\ntry:\n    cli.main(sys.argv[1:])\nfinally:\n"
           "    print(sorted(m.rsplit('.', 1)[-1] for m in sys.modules if m.count('.') == 2 and "
           "m.startswith(('chartgw.groups.', 'chartgw.index.artist_history'))), file=sys.stderr)\n")


def _groups_loaded(data: Path, *args: str) -> list[str]:
    """The group modules a `chartgw ARGS` process imported (its last line on stderr)."""
    done = subprocess.run([sys.executable, "-c", _LOADED, *args], capture_output=True, text=True,
                          env=child_env(DATA_DIR=str(data)), timeout=120)
    assert "Traceback" not in done.stderr, done.stderr
    loaded: list[str] = json.loads(done.stderr.strip().splitlines()[-1].replace("'", '"'))
    return loaded


@pytest.mark.parametrize(("args", "loaded"), [
    (["keys", "list"], []),
    (["hooks", "list"], []),
    (["crawl", "korea-chart", "--help"], ["korea_chart"]),
    (["backfill", "uk-charts", "--help"], ["uk_charts"]),
    (["export", "--help"], []),
])
def test_a_command_imports_only_the_groups_it_touches(data: Path, args: list[str], loaded: list[str]) -> None:
    assert _groups_loaded(data, *args) == loaded


def test_the_help_and_the_crontab_still_load_every_group(data: Path) -> None:
    from chartgw.groups import MODULES

    every = {module.rsplit(".", 1)[-1] for module in MODULES.values()}
    for args in (["--help"], ["cron"], ["crawl", "-h"]):
        assert every <= set(_groups_loaded(data, *args)), args


def test_the_registry_names_each_group_by_its_own_name_in_order() -> None:
    """Listing order and names come from the registry without importing; loading agrees with both."""
    from chartgw.groups import MODULES

    assert [g.name for g in GROUPS] == list(MODULES) == list(GROUPS.names)
    assert GROUPS.named("korea-chart") is GROUPS[3] and GROUPS[-1].name == "artist-history-api"
