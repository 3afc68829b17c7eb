"""Progress people can see: a bar per step on a terminal, one line per step off one, counted by the work itself
(the crawl runner, imports, backfills, the index) through the step in progress, with measured times."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import pytest

from chartgw import cli
from chartgw.core import progress as steps
from chartgw.core.progress import Progress
from chartgw.demo import seeding as demo
from chartgw.groups import GROUPS
from tests.fixtures import configure, copy_data


class Ticks:
    """A clock for the progress shown (the work's own clock is not read): each call is one second later."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def test_off_a_terminal_each_step_is_one_line_with_counts_failures_time_and_rate() -> None:
    stream = io.StringIO()
    with Progress("demo", stream, terminal=False, clock=Ticks()) as shown:
        with shown.step("korea-chart"):
            steps.expect(3, "targets")
            steps.advance()
            steps.advance(2, failed=True)
        with shown.step("artist-history-api"):
            steps.expect(10, "snapshots")
            steps.expect(5, "targets")  # the first unit announced names the count
            steps.advance(4)
        with pytest.raises(KeyboardInterrupt), shown.step("radio"):
            steps.advance()
            raise KeyboardInterrupt
    assert stream.getvalue().splitlines() == [
        # Off a terminal the clock is read when a step starts and when it ends: one tick apart.
        "demo korea-chart: 3 targets, 2 failed in 1.0 s (3.0/s)",
        "demo artist-history-api: 4 of 15 snapshots in 1.0 s (4.0/s)",
        "demo radio: stopped after 1 done in 1.0 s (1.0/s)",
    ]


def test_without_a_step_the_work_reports_to_nobody() -> None:
    steps.expect(5, "targets")
    steps.advance()  # no step in progress: nothing happens, nothing fails


def test_the_step_in_progress_is_seen_inside_asyncio_and_its_tasks() -> None:
    async def one() -> None:
        await asyncio.sleep(0)
        steps.advance()

    async def work() -> None:
        steps.expect(4, "targets")
        await asyncio.gather(*(one() for _ in range(4)))

    with Progress("crawl", io.StringIO(), terminal=False) as shown, shown.step("korea-chart") as step:
        asyncio.run(work())
    assert (step.done, step.total) == (4, 4)


def test_on_a_terminal_a_step_is_a_bar_with_counts_rate_and_time() -> None:
    stream = io.StringIO()
    with Progress("backfill", stream, terminal=True) as shown, shown.step("hot-100"):
        steps.expect(6, "targets")
        steps.advance(6)
    drawn = stream.getvalue()
    assert "backfill hot-100" in drawn and "6/6" in drawn and "targets" in drawn and "/s" in drawn
    assert "━" in drawn


def test_chartgw_demo_shows_a_line_per_group_as_it_seeds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(demo, "GROUPS", [g for g in GROUPS if g.name in ("korea-chart", "social-trends")])
    assert cli.main(["demo"], configure("CHARTGW_DATA_DIR", str(tmp_path))) == 0
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert lines[0].startswith("demo korea-chart: ") and " targets in " in lines[0] and lines[0].endswith("/s)")
    assert lines[1].startswith("demo social-trends: ") and out.startswith("cgw_")


def test_the_index_build_reports_real_times(korea_data: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    data = copy_data(korea_data, tmp_path / "data")
    assert cli.main(["index", "artist-history-api", "--rebuild", "yes", "--json"],
                    configure("CHARTGW_DATA_DIR", str(data))) == 0
    out, err = capsys.readouterr()
    korea = next(o for o in json.loads(out) if o["target"] == "korea-chart")
    assert korea["rows"] > 1000 and korea["duration_ms"] > 0
    assert err.startswith("index artist-history-api: ") and " snapshots in " in err
