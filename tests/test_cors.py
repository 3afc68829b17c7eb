"""CORS per CHARTGW_CORS_ORIGINS, through the app: allowed preflights answered 204 without a key, allowed origins
echoed with the headers a client reads exposed, any other origin answered as if CORS were off."""

from __future__ import annotations

from pathlib import Path

import pytest

from chartgw.core import config
from chartgw.http.cors import ALLOWED_HEADERS, EXPOSED_HEADERS
from tests.fixtures import KEY_HEADERS, client, configure

PAGE = "http://127.0.0.1:9001"
CHART = "/korea-chart/charts?site=portal-a&chart_type=realtime&limit=3"
PREFLIGHT = {"Access-Control-Request-Method": "GET", "Access-Control-Request-Headers": "x-api-key"}


def cors_headers(headers: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.startswith("access-control-")}


def test_off_by_default_a_preflight_is_a_401(korea_data: Path) -> None:
    with client(korea_data) as api:
        answer = api.options(CHART, headers={"Origin": PAGE, **PREFLIGHT})
        assert answer.status_code == 401 and cors_headers(dict(answer.headers)) == {}
        chart = api.get(CHART, headers={"Origin": PAGE, **KEY_HEADERS})
        assert chart.status_code == 200 and cors_headers(dict(chart.headers)) == {}
        assert "origin" not in chart.headers.get("vary", "").lower()


def test_an_allowed_origin_is_preflighted_without_a_key_and_echoed(korea_data: Path) -> None:
    configure("CORS_ORIGINS", f"https://other.example, {PAGE}/")
    with client(korea_data) as api:
        answer = api.options(CHART, headers={"Origin": PAGE, **PREFLIGHT})
        assert answer.status_code == 204 and answer.content == b""
        assert cors_headers(dict(answer.headers)) == {
            "access-control-allow-origin": PAGE, "access-control-allow-methods": "GET, HEAD, POST",
            "access-control-allow-headers": ALLOWED_HEADERS.decode(), "access-control-max-age": "600"}
        assert "X-API-Key" in ALLOWED_HEADERS.decode() and answer.headers["vary"] == "Origin"
        chart = api.get(CHART, headers={"Origin": PAGE, **KEY_HEADERS})
        assert chart.status_code == 200 and chart.headers["access-control-allow-origin"] == PAGE
        exposed = chart.headers["access-control-expose-headers"]
        assert exposed == EXPOSED_HEADERS.decode()
        assert {"ETag", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} <= set(exposed.split(", "))
        varies = {name.strip() for field in chart.headers.get_list("vary") for name in field.split(",")}
        assert {"Origin", "accept-encoding", "accept"} <= varies  # CORS's field beside the representation's
        assert "access-control-allow-credentials" not in chart.headers
        # Errors too, so the page can read why: a missing key, a bad parameter.
        for status, url, headers in ((401, CHART, {}), (422, CHART.replace("limit=3", "limit=x"), KEY_HEADERS)):
            error = api.get(url, headers={"Origin": PAGE, **headers})
            assert error.status_code == status and error.headers["access-control-allow-origin"] == PAGE
        # Without an Origin, the same answer says it varies by origin (for shared caches) and allows none.
        plain = api.get(CHART, headers=KEY_HEADERS)
        assert "Origin" in plain.headers.get_list("vary") and cors_headers(dict(plain.headers)) == {}


def test_another_origin_gets_no_cors_header(korea_data: Path) -> None:
    configure("CORS_ORIGINS", PAGE)
    with client(korea_data) as api:
        for origin in ("http://127.0.0.1:9002", "https://127.0.0.1:9001", "null"):
            answer = api.options(CHART, headers={"Origin": origin, **PREFLIGHT})
            assert answer.status_code == 401 and cors_headers(dict(answer.headers)) == {}
            chart = api.get(CHART, headers={"Origin": origin, **KEY_HEADERS})
            assert chart.status_code == 200 and cors_headers(dict(chart.headers)) == {}


def test_a_star_allows_every_origin(korea_data: Path) -> None:
    configure("CORS_ORIGINS", "*")
    with client(korea_data) as api:
        answer = api.options("/korea-chart/health", headers={"Origin": "https://any.example", **PREFLIGHT})
        assert answer.status_code == 204 and answer.headers["access-control-allow-origin"] == "https://any.example"


@pytest.mark.parametrize("value", ["example.com", "https://app.example/path", "ftp://example.com", "https://"])
def test_a_bad_origin_fails_loudly(value: str) -> None:
    with pytest.raises(ValueError):
        config.origins(value)
    assert config.origins("HTTPS://App.Example.com:8443, *") == ("https://app.example.com:8443", "*")
