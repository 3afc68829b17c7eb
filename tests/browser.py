"""Headless Chromium for the browser tests: Debian's chromium driven by Selenium through chromium-driver,
kept off the network. `scripts/test` installs both when run as root; without them a module importing this
one skips, saying why."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")

for _binary in (CHROMIUM, CHROMEDRIVER):
    if not _binary.is_file():
        pytest.skip(f"{_binary} absent: install Debian's chromium and chromium-driver (scripts/test does as root)",
                    allow_module_level=True)
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium not installed (pip install -e '.[test]')")
from selenium.webdriver.common.by import By  # noqa: E402  (after the skip above)

__all__ = ["By", "chromium", "console_errors", "load", "requested_urls"]


@contextmanager
def chromium(profile: Path) -> Iterator[Any]:
    """Headless chromium with an empty profile at `profile`, logging the console and the network. Kept off
    the network: no Google services, no proxy, and no name but 127.0.0.1 resolves (without these it looks up
    Google hosts); and away from Selenium Manager, which would download drivers, by explicit driver and
    browser paths."""
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-extensions", "--no-proxy-server", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
                 f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=webdriver.ChromeService(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(120)  # a ceiling a loaded machine keeps (a page here loads in a second or two)
    try:
        yield driver
    finally:
        driver.quit()


def load(driver: Any, url: str) -> None:
    """Open `url` and fail on any SEVERE console entry (printed) the page caused."""
    driver.get_log("browser")  # drop what an earlier page logged
    driver.get_log("performance")
    driver.get(url)
    console_errors(driver, url)


def console_errors(driver: Any, url: str) -> None:
    """Fail on any SEVERE console entry logged since the last look."""
    errors = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
    for entry in errors:
        print(entry)
    assert not errors, f"console errors on {url}: {errors}"


def requested_urls(driver: Any) -> list[str]:
    """The URL of every request the browser started since the last look (its DevTools network log)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls
