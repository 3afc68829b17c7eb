"""CORS in headless Chromium: a page served from another origin (a second server on another 127.0.0.1 port)
calls a keyed endpoint of the gateway with fetch() and reads the body and the exposed headers; a page on an
origin the setting does not name is refused by the browser."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route

from chartgw.api.access import KeyChecker, RateLimiter
from chartgw.groups import korea_chart
from chartgw.http.app import build_app
from tests.browser import chromium, console_errors, load
from tests.fixtures import FIXED_NOW, TEST_KEY, data_dir, environment, serving, serving_rsgi
from tests.fixtures import settings as run_settings

CHART = "/korea-chart/charts?site=portal-a&chart_type=realtime&limit=3"
PAGE = """<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>partner page</title>
<link rel="icon" href="data:,"></head><body><script>
async function call(url, key) {
  try {
    const answer = await fetch(url, {headers: key ? {"X-API-Key": key} : {}});
    const read = (name) => answer.headers.get(name);
    return {status: answer.status, body: await answer.json(), etag: read("ETag"), limit: read("X-RateLimit-Limit"),
            remaining: read("X-RateLimit-Remaining"), reset: read("X-RateLimit-Reset"), vary: read("Vary")};
  } catch (error) {
    return {error: String(error)};
  }
}
</script></body></html>"""


async def page(request: Request) -> HTMLResponse:
    return HTMLResponse(PAGE)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with chromium(tmp_path_factory.mktemp("chromium-profile")) as driver:
        yield driver


@pytest.fixture(scope="module")
def origins() -> Iterator[tuple[str, str]]:
    """Two partner pages on their own origins: the first allowed, the second not."""
    site = Starlette(routes=[Route("/", page)])
    with serving(site) as allowed, serving(site) as other:
        yield allowed, other


@pytest.fixture(scope="module")
def gateway(korea_data: Path, origins: tuple[str, str]) -> Iterator[str]:
    """/korea-chart with a rate limit (so the X-RateLimit-* headers are sent), allowing the first page's origin."""
    with environment({"CHARTGW_CORS_ORIGINS": origins[0]}), data_dir(korea_data):
        app = build_app([korea_chart.GROUP], checker=KeyChecker(korea_data / "keys.sqlite", plain_keys=[TEST_KEY]),
                        clock=lambda: FIXED_NOW, limiter=RateLimiter(1000), settings=run_settings())
    with serving_rsgi(app) as base:  # as chartgw serve serves it
        yield base


def fetch(driver: Any, url: str, key: str | None) -> dict[str, Any]:
    return driver.execute_async_script(
        "const done = arguments[arguments.length - 1]; call(arguments[0], arguments[1]).then(done);", url, key)


def test_a_page_on_an_allowed_origin_reads_a_keyed_answer_and_its_headers(browser: Any, origins: tuple[str, str],
                                                                         gateway: str) -> None:
    load(browser, origins[0] + "/")
    for _ in range(3):  # the app answers the first call, the server's fast lane the repeats
        answer = fetch(browser, gateway + CHART, TEST_KEY)
        assert answer["status"] == 200, answer
        assert answer["body"]["count"] == 3 and len(answer["body"]["entries"]) == 3
        assert answer["etag"].startswith('"') and answer["limit"] == "1000"
        assert int(answer["remaining"]) < 1000 and 0 < int(answer["reset"]) <= 60
    console_errors(browser, origins[0])  # no CORS complaint
    metrics = httpx.get(gateway + "/metrics", trust_env=False).text
    # Chrome revalidates its cached copy (no-cache) with If-None-Match: the lane's 304s, read by the page as 200s.
    by_lane = [line for line in metrics.splitlines() if line.startswith("chartgw_requests_total{")
               and 'answered_by="lane"' in line]
    assert sum(float(line.rpartition(" ")[2]) for line in by_lane) == 2, by_lane
    missing = fetch(browser, gateway + CHART, None)  # a refusal is readable too
    assert missing["status"] == 401 and "API key" in missing["body"]["detail"]
    errors = [entry["message"] for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert len(errors) == 1 and "status of 401" in errors[0]  # the browser's note of a failed resource, no CORS error


def test_a_page_on_another_origin_is_refused_by_the_browser(browser: Any, origins: tuple[str, str], gateway: str) -> None:
    load(browser, origins[1] + "/")
    answer = fetch(browser, gateway + CHART, TEST_KEY)
    assert answer == {"error": "TypeError: Failed to fetch"}
    errors = [entry["message"] for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert any("blocked by CORS policy" in message for message in errors), errors
