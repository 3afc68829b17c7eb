"""`GET /docs` in headless Chromium: Swagger UI, served from the package, renders every operation of the joined
OpenAPI document with no console error, and the page makes no request that leaves the gateway's origin."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from selenium.webdriver.support.ui import WebDriverWait

from tests.browser import By, chromium, console_errors, load, requested_urls
from tests.fixtures import client, serving

pytestmark = pytest.mark.waits

ON_SCREEN = """const done = arguments[arguments.length - 1];
requestAnimationFrame(() => requestAnimationFrame(() => done([
  Array.from(document.querySelectorAll('.opblock-summary'), block => [
    block.querySelector('.opblock-summary-method')?.innerText.trim() ?? '',
    block.querySelector('.opblock-summary-path')?.getAttribute('data-path') ?? '']),
  Array.from(document.querySelectorAll('.opblock-tag'), section => section.getAttribute('data-tag'))])));"""
"""Each operation on the page (its method as shown, its path) and each section's tag, read in one step once the page
has drawn twice: Swagger UI re-renders what it keeps near the viewport as it scrolls, so elements looked up one call
at a time went stale between calls (and each call is a round trip to the browser)."""


def on_screen(browser: Any) -> list[list[Any]]:
    """What `ON_SCREEN` reads, once two reads agree (the page done rendering what the last scroll brought near)."""
    screen: list[list[Any]] = browser.execute_async_script(ON_SCREEN)
    for _ in range(100):
        again = browser.execute_async_script(ON_SCREEN)
        if again == screen:
            break
        screen = again
    return screen


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with chromium(tmp_path_factory.mktemp("chromium-profile")) as driver:
        yield driver


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Every group over an empty data folder: the document is declared by the routes, not the data."""
    with serving(client(tmp_path_factory.mktemp("data")).app) as base:
        yield base


def test_docs_renders_every_operation_from_bundled_assets_only(browser: Any, gateway: str) -> None:
    document = httpx.get(gateway + "/openapi.json", trust_env=False).json()
    operations = sorted((method.upper(), path) for path, item in document["paths"].items() for method in item)
    assert len(operations) > 100
    load(browser, gateway + "/docs")
    assert browser.title == "chartgw API reference"

    # Swagger UI keeps only what is near the viewport in the page: read it screen by screen, top to bottom.
    browser.set_window_size(1400, 1000)
    WebDriverWait(browser, 120).until(lambda driver: driver.find_elements(By.CSS_SELECTOR, ".opblock-summary"))
    shown: set[tuple[str, str]] = set()
    sections: list[str] = []
    while True:
        WebDriverWait(browser, 120).until(lambda driver: driver.find_elements(By.CSS_SELECTOR, ".opblock-summary"))
        blocks, tags = on_screen(browser)
        shown.update((method, path) for method, path in blocks)
        sections += [tag for tag in tags if tag not in sections]
        at = browser.execute_script("return window.scrollY")
        if browser.execute_script("window.scrollBy(0, window.innerHeight * 0.8); return window.scrollY") == at:
            break
    assert sorted(shown) == operations
    assert sections == [tag["name"] for tag in document["tags"]]  # one section per group, in the document's order
    console_errors(browser, gateway + "/docs")
    # the browser's own pages (its new-tab page before the first navigation) are not requests to anywhere
    urls = [url for url in requested_urls(browser) if not url.startswith(("data:", "blob:", "chrome:", "chrome-untrusted:", "about:"))]
    assert gateway + "/docs/assets/swagger-ui/swagger-ui-bundle.js" in urls and gateway + "/openapi.json" in urls
    assert [url for url in urls if not url.startswith(gateway + "/")] == []
