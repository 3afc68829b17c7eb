"""Who may call what: every route classified as the spec says, keys hashed, revocable, expiring."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
import time
from datetime import UTC
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.routing import Route as StarletteRoute
from starlette.testclient import TestClient

from chartgw.api.access import Grant, KeyChecker, KeyStore, RateLimiter, hash_key, keyed_digest
from chartgw.groups import GROUPS
from chartgw.http.app import GroupRoutes, access_table, build_app, declared_routes
from tests.fixtures import KEY_HEADERS, child_env, client, configure, copy_data
from tests.fixtures import settings as run_settings

# The spec: "Every group exposes a public root (GET /) and a public health endpoint", and schema
# documents (openapi.json) are public where listed. Everything else is a data endpoint needing a key.
SPEC_PUBLIC_SUFFIXES = ("/", "/health", "/openapi.json")


def _registered(app: Starlette) -> list[StarletteRoute]:
    """Every route the app answers (they sit in its per-group route table)."""
    return [r for table in app.routes if isinstance(table, GroupRoutes) for rs in table.by_group.values() for r in rs]


def _concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "x", path)


def test_every_registered_route_is_classified_as_the_spec_says(tmp_path: Path) -> None:
    table = access_table(declared_routes(GROUPS))
    app = build_app(checker=KeyChecker(tmp_path / "keys.sqlite"), settings=run_settings())
    routes = _registered(app)
    assert len(routes) >= 8 and all(isinstance(r, StarletteRoute) for r in routes)
    for route in routes:
        _, _, rest = route.path[1:].partition("/")
        expected_public = "/" + rest in SPEC_PUBLIC_SUFFIXES
        assert table.is_public(route.path) is expected_public, route.path
        assert table.is_public(_concrete(route.path)) is expected_public, route.path


def test_unclassified_paths_need_a_key() -> None:
    table = access_table(declared_routes(GROUPS))
    assert not table.is_public("/korea-chart/made-up")
    assert not table.is_public("/somewhere-else/health")
    assert not table.is_public("/korea-chart/health/")


def test_requests_without_a_key_are_refused_on_every_keyed_route(korea_data: Path) -> None:
    table = access_table(declared_routes(GROUPS))
    with client(korea_data) as api:
        for route in _registered(api.app):  # type: ignore[arg-type]
            path = _concrete(route.path)
            method = sorted((route.methods or set()) - {"HEAD"})[0]
            response = api.request(method, path)
            if table.is_public(route.path):
                assert response.status_code == 200, path
            else:
                assert response.status_code == 401, path
                assert response.json()["detail"] and "X-API-Key" in response.headers["www-authenticate"]
        wrong = api.get("/korea-chart/sites", headers={"X-API-Key": "not-a-key"})
        assert wrong.status_code == 401 and wrong.json() == {"detail": "Invalid, revoked or expired API key"}
        assert api.get("/korea-chart/sites?api_key=" + KEY_HEADERS["X-API-Key"]).status_code == 401


def _cli(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = child_env(DATA_DIR=str(data))
    return subprocess.run([sys.executable, "-m", "chartgw", *args], env=env, capture_output=True, text=True, timeout=60)


def test_keys_cli_create_list_revoke_and_the_server_follows(korea_data: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "korea-chart.sqlite").write_bytes((korea_data / "korea-chart.sqlite").read_bytes())
    created = _cli(data, "keys", "create", "--name", "partner-a")
    assert created.returncode == 0, created.stderr
    key = created.stdout.strip()
    assert key.startswith("cgw_") and "shown only now" in created.stderr
    stored = sqlite3.connect(data / "keys.sqlite").execute("SELECT name, key_hash FROM api_keys").fetchall()
    secret = (data / "server-secret").read_bytes()
    assert stored == [("partner-a", keyed_digest(key, secret))]  # only the digest under the server's secret
    assert stored[0][1] != hash_key(key) and (data / "server-secret").stat().st_mode & 0o777 == 0o600
    assert key not in (data / "keys.sqlite").read_bytes().decode("latin-1")

    checker = KeyChecker(data / "keys.sqlite", recheck_seconds=0)
    assert checker.check(key)
    listing = _cli(data, "keys", "list")
    assert "partner-a" in listing.stdout and "active" in listing.stdout and key not in listing.stdout

    assert _cli(data, "keys", "revoke", "1").returncode == 0
    assert not checker.check(key)
    assert "revoked" in _cli(data, "keys", "list").stdout
    again = _cli(data, "keys", "revoke", "1")
    assert again.returncode == 1 and "no active key" in again.stderr


def test_expired_keys_are_refused_and_bad_expiry_is_a_usage_error(tmp_path: Path) -> None:
    from datetime import datetime, timedelta

    store = KeyStore(tmp_path / "keys.sqlite")
    _, old = store.create("old", datetime.now(UTC) - timedelta(days=1))
    _, new = store.create("new", datetime.now(UTC) + timedelta(days=1))
    checker = KeyChecker(tmp_path / "keys.sqlite", recheck_seconds=0)
    assert not checker.check(old) and checker.check(new)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert {k.name: k.state(now) for k in store.list()} == {"old": "expired", "new": "active"}
    bad = _cli(tmp_path, "keys", "create", "--name", "x", "--expires", "next tuesday")
    assert bad.returncode == 2 and "not a date" in bad.stderr


def test_a_key_expires_by_the_checkers_clock(tmp_path: Path) -> None:
    from datetime import datetime, timedelta

    store = KeyStore(tmp_path / "keys.sqlite")
    expires = datetime(2031, 5, 1, tzinfo=UTC)
    _, key = store.create("holder", expires)
    now = [expires - timedelta(seconds=1)]
    checker = KeyChecker(tmp_path / "keys.sqlite", recheck_seconds=0, clock=lambda: now[0])
    assert checker.check(key)
    now[0] = expires
    assert not checker.check(key)


def test_env_keys_work_without_a_key_file(tmp_path: Path) -> None:
    checker = KeyChecker(tmp_path / "missing.sqlite", plain_keys=["alpha", "beta"])
    assert checker.check("beta") and not checker.check("gamma")


def test_revocation_reaches_a_running_server_without_restart(korea_data: Path, tmp_path: Path) -> None:
    data = tmp_path / "d"
    data.mkdir()
    (data / "korea-chart.sqlite").write_bytes((korea_data / "korea-chart.sqlite").read_bytes())
    key_id, key = KeyStore(data / "keys.sqlite").create("p")
    with client(data) as api:
        assert api.get("/korea-chart/sites", headers={"X-API-Key": key}).status_code == 200
        KeyStore(data / "keys.sqlite").revoke(key_id)
        time.sleep(1.1)
        assert api.get("/korea-chart/sites", headers={"X-API-Key": key}).status_code == 401


@pytest.mark.parametrize("path", ["/korea-chart", "/korea-chart/", "/korea-chart/health", "/korea-chart/openapi.json"])
def test_public_paths_need_no_key(korea_data: Path, path: str) -> None:
    with client(korea_data) as api:
        assert api.get(path).status_code == 200


def test_the_key_store_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "keys.sqlite")
    store.create("partner")
    assert (tmp_path / "keys.sqlite").stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("args", [["--name", "  "], ["--name", "x", "--expires", "2001-01-01"]])
def test_keys_create_refuses_an_empty_name_and_a_past_expiry(tmp_path: Path, args: list[str],
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from chartgw import cli

    configure("CHARTGW_DATA_DIR", str(tmp_path))
    assert cli.main(["keys", "create", *args], run_settings()) == 2
    assert capsys.readouterr().out == "" and KeyStore(tmp_path / "keys.sqlite").list() == []


# --- rate limits -------------------------------------------------------------------------------------------

def _limited_app(data: Path, limiter: RateLimiter) -> TestClient:
    from chartgw.groups.korea_chart import GROUP

    return TestClient(build_app([GROUP], checker=KeyChecker(data / "keys.sqlite", recheck_seconds=0), limiter=limiter, settings=run_settings()))


def test_a_key_past_its_rate_gets_429_with_retry_after_and_counts_per_day(korea_data: Path, tmp_path: Path) -> None:
    data = copy_data(korea_data, tmp_path / "data")
    store = KeyStore(data / "keys.sqlite")
    _, slow = store.create("slow", rate_per_minute=3)
    _, default = store.create("default")
    moment = [1_795_000_020.0 + 10]  # 10 s into a minute
    limiter = RateLimiter(100, store, clock=lambda: moment[0])
    with _limited_app(data, limiter) as api:
        answers = [api.get("/korea-chart/sites", headers={"X-API-Key": slow}) for _ in range(4)]
        assert [a.status_code for a in answers] == [200, 200, 200, 429]
        assert [a.headers["x-ratelimit-remaining"] for a in answers] == ["2", "1", "0", "0"]
        assert answers[0].headers["x-ratelimit-limit"] == "3" and answers[0].headers["x-ratelimit-reset"] == "50"
        assert answers[3].headers["retry-after"] == "50"
        assert answers[3].json() == {"detail": "Rate limit of 3 requests per minute reached; retry in 50 s"}
        assert api.get("/korea-chart/sites", headers={"X-API-Key": default}).headers["x-ratelimit-limit"] == "100"
        moment[0] += 60  # the next minute: a new window
        assert api.get("/korea-chart/sites", headers={"X-API-Key": slow}).status_code == 200
        assert api.get("/korea-chart/").headers.get("x-ratelimit-limit") is None  # public: no key, no limit
    limiter.flush()
    usage = {(name, requests, limited) for _, name, _, requests, limited in store.usage("2000-01-01")}
    assert usage == {("slow", 4, 1), ("default", 1, 0)}


def test_a_busy_key_file_never_holds_a_request_and_the_minutes_counts_are_written_after(tmp_path: Path) -> None:
    """The minute's counts go to the key file on the limiter's writer thread: while `chartgw keys create` (here:
    another connection) holds the file's write lock, the request that ends the minute is answered at once."""
    store = KeyStore(tmp_path / "keys.sqlite")
    key_id, _ = store.create("busy")
    moment = [1_795_000_020.0]
    limiter = RateLimiter(100, store, clock=lambda: moment[0])
    grant = Grant(key_id, None, None)
    limiter.take(grant)
    holder = sqlite3.connect(tmp_path / "keys.sqlite", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        moment[0] += RateLimiter.FLUSH_SECONDS
        started = time.monotonic()
        assert limiter.take(grant)[0]  # the minute's end: its counts handed to the writer thread
        assert time.monotonic() - started < 10.0  # not the key file's 30 s busy timeout (a ceiling load cannot reach)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    limiter.flush()
    assert [(name, requests) for _, name, _, requests, _ in store.usage("2000-01-01")] == [("busy", 2)]


def test_keys_create_takes_a_rate_and_keys_usage_lists_days(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    from chartgw import cli

    configure("CHARTGW_DATA_DIR", str(tmp_path))
    assert cli.main(["keys", "create", "--name", "p", "--rate", "600/minute"], run_settings()) == 0
    key = capsys.readouterr().out.strip()
    assert KeyChecker(tmp_path / "keys.sqlite").grant(key).rate_per_minute == 600  # type: ignore[union-attr]
    KeyStore(tmp_path / "keys.sqlite").add_usage({(1, "2026-11-20"): [12, 2]})
    assert cli.main(["keys", "usage", "--days", "100000"], run_settings()) == 0
    assert "2026-11-20        12       2  p" in capsys.readouterr().out


def test_a_legacy_sha256_key_still_works(tmp_path: Path) -> None:
    """Keys created before the server secret (bare SHA-256 digests) keep working."""
    store = KeyStore(tmp_path / "keys.sqlite")
    store.create("new")
    with sqlite3.connect(tmp_path / "keys.sqlite") as db:
        db.execute("INSERT INTO api_keys (name, key_hash, created_at) VALUES ('old', ?, '2026-01-01T00:00:00Z')",
                   (hash_key("cgw_legacy"),))
    assert KeyChecker(tmp_path / "keys.sqlite").check("cgw_legacy")


def test_keys_rotate_issues_a_successor_and_expires_the_old_key_after_the_grace(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from chartgw import cli

    configure("CHARTGW_DATA_DIR", str(tmp_path))
    assert cli.main(["keys", "create", "--name", "partner", "--rate", "60"], run_settings()) == 0
    old = capsys.readouterr().out.strip()
    assert cli.main(["keys", "rotate", "partner", "--grace-days", "2"], run_settings()) == 0
    new = capsys.readouterr().out.strip()
    checker = KeyChecker(tmp_path / "keys.sqlite", recheck_seconds=0)
    old_grant, new_grant = checker.grant(old), checker.grant(new)
    assert old_grant is not None and new_grant is not None and new != old
    assert old_grant.expires_at is not None and new_grant.expires_at is None and new_grant.rate_per_minute == 60
    assert cli.main(["keys", "rotate", "nobody"], run_settings()) == 1
