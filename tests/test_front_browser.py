"""The status page (`GET /`) in a real headless browser: Debian's chromium driven by Selenium through
chromium-driver, against the gateway served by uvicorn on 127.0.0.1. Every group must render with its
freshness and its week of outcomes, and the browser must log no console error (bad markup, a missing
favicon). `scripts/test` installs the browser when run as root; without it these tests skip."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from chartgw.groups import GROUPS
from tests.browser import By, chromium, load
from tests.fixtures import FIXED_NOW, client, copy_data, serving

NOW = FIXED_NOW + timedelta(minutes=10)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with chromium(tmp_path_factory.mktemp("chromium-profile")) as driver:
        yield driver


def serve(data: Path) -> Any:
    """The gateway (every group) over `data` answering as of NOW, served on 127.0.0.1: its base URL."""
    return serving(client(data, now=NOW).app)  # the app tests.fixtures.client builds, served for real instead


@pytest.fixture(scope="module")
def gateway(all_groups_data: Path) -> Iterator[str]:
    with serve(all_groups_data) as base:
        yield base


def rendered_row(driver: Any, group: dict[str, Any]) -> Any:
    """The group's row, checked against the JSON form of the same page: link, status, freshness and one
    bar per day of the week with the day's counts in its tooltip, every element drawn with a size."""
    name = group["name"]
    row = driver.find_element(By.CSS_SELECTOR, f"tr[data-group='{name}']")
    assert row.is_displayed() and row.get_attribute("id") == f"group-{name}"
    assert row.find_element(By.CSS_SELECTOR, "td.group a").text == f"/{name}"
    assert row.find_element(By.CSS_SELECTOR, "td.status").text == group["status"]
    targets = row.find_element(By.CSS_SELECTOR, "td.targets")
    assert targets.text == f"{group['targets'] - group['stale']} of {group['targets']} fresh"
    svg = row.find_element(By.CSS_SELECTOR, "td.outcomes svg")
    assert svg.size["width"] > 0 and svg.size["height"] > 0
    titles = [t.get_attribute("textContent") for t in svg.find_elements(By.TAG_NAME, "title")]
    week = [(NOW.date() - timedelta(days=6 - i)).isoformat() for i in range(7)]
    counts = {d["day"]: d for d in group["days"]}
    assert titles == [f"{day}: {counts[day]['ok']} ok, {counts[day]['failed']} failed" if day in counts
                      else f"{day}: no crawls" for day in week]
    drawn = [r for r in svg.find_elements(By.TAG_NAME, "rect") if r.rect["height"] > 0]
    assert len(drawn) >= 7
    return row


def test_every_group_renders_in_a_browser_without_console_errors(browser: Any, gateway: str) -> None:
    load(browser, gateway + "/")
    assert browser.title == "chartgw status"
    page = httpx.get(gateway + "/", headers={"Accept": "application/json"}, trust_env=False).json()
    assert [g["name"] for g in page["groups"]] == [g.name for g in GROUPS]
    assert browser.find_element(By.ID, "status").text == page["status"]
    rows = browser.find_elements(By.CSS_SELECTOR, "#groups tbody tr")
    assert [r.get_attribute("data-group") for r in rows] == [g.name for g in GROUPS]
    for group in page["groups"]:
        rendered_row(browser, group)
    korea = next(g for g in page["groups"] if g["name"] == "korea-chart")
    assert korea["status"] == "ok" and korea["targets"] > 10 and korea["days"]
    assert browser.find_element(By.CSS_SELECTOR, "tr[data-group='korea-chart'] td.status").value_of_css_property(
        "color") == "rgba(23, 111, 44, 1)"


def test_a_group_without_data_shows_degraded(browser: Any, all_groups_data: Path, tmp_path: Path) -> None:
    data = copy_data(all_groups_data, tmp_path / "data")
    for file in data.glob("korea-chart.sqlite*"):
        file.unlink()
    with serve(data) as base:
        load(browser, base + "/")
        page = httpx.get(base + "/", headers={"Accept": "application/json"}, trust_env=False).json()
    korea = next(g for g in page["groups"] if g["name"] == "korea-chart")
    assert korea["status"] == "degraded" and korea["last_crawl"] is None and korea["days"] == []
    row = rendered_row(browser, korea)
    assert row.find_element(By.CSS_SELECTOR, "td.status").text == "degraded"
    assert row.find_element(By.CSS_SELECTOR, "td.status").value_of_css_property("color") == "rgba(170, 51, 51, 1)"
    assert row.find_element(By.CSS_SELECTOR, "td.crawl").text.splitlines() == ["-", "never crawled"]
    assert browser.find_element(By.ID, "status").text == "degraded"
    assert page["status"] == "degraded"
