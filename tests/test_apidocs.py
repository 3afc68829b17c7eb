"""`GET /docs` without a browser: public, from the package's own assets (vendored unchanged, shipped in the
wheel), behind a policy that lets the page load nothing from elsewhere. tests/test_apidocs_browser.py renders it."""

from __future__ import annotations

import hashlib
import tomllib
from pathlib import Path

from chartgw.http.apidocs import POLICY, STATIC
from tests.fixtures import client

ROOT = Path(__file__).resolve().parents[1]


def test_docs_page_and_assets_are_public_and_cached_by_etag(tmp_path: Path) -> None:
    with client(tmp_path) as api:
        page = api.get("/docs")
        assert page.status_code == 200 and page.headers["content-type"] == "text/html; charset=utf-8"
        assert page.headers["content-security-policy"] == POLICY and "default-src 'none'" in POLICY
        assert "//" not in page.text.replace("<!DOCTYPE html>", "")  # no absolute URL: nothing from a CDN
        for asset in ("docs/assets/swagger-ui/swagger-ui-bundle.js", "docs/assets/swagger-ui/swagger-ui.css",
                      "docs/assets/docs.js"):
            assert f'"{asset}"' in page.text
            answer = api.get("/" + asset)
            assert answer.status_code == 200 and answer.content == (STATIC / asset.removeprefix("docs/assets/")).read_bytes()
            assert api.get("/" + asset, headers={"If-None-Match": answer.headers["etag"]}).status_code == 304
        assert api.get("/docs/assets/nothing.js").status_code == 401  # only the bundled files are public
        assert api.get("/openapi.json").status_code == 200


def test_vendored_swagger_ui_is_the_npm_package_unchanged_with_its_licence() -> None:
    version = (STATIC / "swagger-ui" / "VERSION").read_text()
    assert "package: swagger-ui-dist" in version and "licence: Apache-2.0" in version
    sums = [line.split() for line in version.splitlines() if len(line.split()) == 2 and len(line.split()[0]) == 64]
    assert {name for _, name in sums} == {"swagger-ui-bundle.js", "swagger-ui.css", "LICENSE", "NOTICE"}
    for digest, name in sums:
        assert hashlib.sha256((STATIC / "swagger-ui" / name).read_bytes()).hexdigest() == digest, name


def test_every_static_file_is_package_data() -> None:
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["chartgw.http"]
    shipped = {path for pattern in patterns for path in STATIC.parent.glob(pattern)}
    assert {path for path in STATIC.rglob("*") if path.is_file()} <= shipped
