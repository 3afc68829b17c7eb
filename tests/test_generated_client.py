"""A client generated with openapi-python-client from the joined document calls every GET endpoint (issue 9).

The document is `GET /openapi.json` of the app; the client is generated into a temporary folder (offline: the
generator only reads the file; its formatting hooks are switched off) and imported. It talks HTTP to the app
served by uvicorn on 127.0.0.1, sending the key the way the README shows a partner: an `AuthenticatedClient`
with `auth_header_name="X-API-Key"` and no prefix. Every GET operation is called with values the demo data
holds; each answer must be a 200 that the generated model parses, and parse back (`to_dict`) into the very
body sent. Then every cached endpoint is asked again with `if_none_match` set to the ETag it gave: a 304 that
the client returns without raising (`raise_on_unexpected_status` is on, so an undeclared status would raise).
"""

from __future__ import annotations

import importlib
import inspect
import json
import re
import sqlite3
import subprocess
import sys
import types
import typing
from collections.abc import Collection, Iterator
from datetime import date, datetime
from enum import Enum
from pathlib import Path
from typing import Any

import httpx
import pytest

from chartgw.api.access import env_key_id
from chartgw.core.clock import fixed
from chartgw.groups import GROUPS
from chartgw.http import exports
from chartgw.index import history as index
from chartgw.push.hooks import HookStore, hooks_db_path
from tests.fixtures import FIXED_NOW, TEST_KEY, client, copy_data, data_dir, serving
from tests.fixtures import settings as run_settings

CLIENTS_DOC = Path(__file__).resolve().parents[1] / "docs" / "clients.md"
PACKAGE = "chartgw_client"


def documented_config() -> str:
    """The generator configuration docs/clients.md tells a reader to write (its `printf ... > config.yaml`)."""
    found = re.search(r"printf '(.*?)' > config\.yaml", CLIENTS_DOC.read_text())
    assert found is not None, "docs/clients.md shows no config.yaml"
    return found.group(1).replace("\\n", "\n")


GENERATOR_CONFIG = documented_config()
"""docs/clients.md's: no ruff/black run over the generated code; the SVG plot and the SQLite exports read as bytes
(the generator knows no image or SQLite types, and drops a body of a type it does not know)."""

ARTIST = "Jung Kook"
CALLS: dict[str, dict[str, Any]] = {
    "streaming_get_chart": {"chart_date": "2026-11-19"},
    "streaming_get_search": {"q": "Seven"},
    "streaming_get_history": {"artist": ARTIST, "title": "Seven (feat. Latto) (Explicit Ver.)"},
    "video_get_charts_chart_type_period_country_date": {"chart_type": "top-songs", "period": "weekly",
                                                        "country": "global", "date": "2026-11-19"},
    "video_get_shorts_global_period_date": {"period": "weekly", "date": "2026-11-19"},
    "video_get_country_latest": {"country": "kr"},
    "digital_sales_get_combo_country_latest": {"combo": "top-songs", "country": "us"},
    "korea_chart_get_charts": {"site": "portal-a"},
    "korea_chart_get_portal_a_charts_chart_type": {"chart_type": "realtime"},
    "korea_chart_get_portal_b_charts_chart_type": {"chart_type": "daily"},
    "korea_chart_get_portal_c_charts_chart_type": {"chart_type": "weekly"},
    "korea_chart_get_portal_d_charts_chart_type": {"chart_type": "rising"},
    "korea_chart_get_portal_e_charts_chart_type": {"chart_type": "daily_top100"},
    "recognition_get_top_200_market_latest": {"market": "world"},
    "recognition_get_genre_market_genre_latest": {"market": "world", "genre": "musica-mexicana"},
    "recognition_get_viral_market_latest": {"market": "world"},
    "recognition_get_top_50_market_city_latest": {"market": "south-africa", "city": "johannesburg"},
    "recognition_get_search": {"q": "love"},
    "ranking_charts_get_charts_chart_slug_snapshots": {"chart_slug": "hot-100"},
    "ranking_charts_get_charts_chart_slug_dates": {"chart_slug": "hot-100"},
    "ranking_charts_get_charts_chart_slug_latest": {"chart_slug": "hot-100"},
    "ranking_charts_get_charts_chart_slug_preset": {"chart_slug": "hot-100", "preset": "top-10"},
    "ranking_charts_get_charts_chart_slug_weeks_ago_weeks_ago": {"chart_slug": "hot-100", "weeks_ago": 1},
    "ranking_charts_get_charts_chart_slug_chart_date": {"chart_slug": "hot-100", "chart_date": "2026-11-21"},
    "ranking_charts_get_search": {"q": "love"},
    "uk_charts_get_search": {"q": "love"},
    "uk_charts_get_chart_key_latest": {"chart_key": "singles"},
    "uk_charts_get_chart_key_week_start": {"chart_key": "singles", "week_start": "2026-11-13"},
    "social_trends_get_trends_location_slug": {"location_slug": "worldwide"},
    "social_trends_get_trends_by_woeid_woeid": {"woeid": 1},
    "dj_rankings_get_search": {"q": "guetta"},
    "dj_rankings_get_djs_slug": {"slug": "david-guetta"},
    "dj_rankings_get_year": {"year": 2025},
    "dj_rankings_get_year_rank": {"year": 2025, "rank": 1},
    "retail_digital_get_charts_chart_key_latest": {"chart_key": "us-digital-music"},
    "retail_music_get_top_songs_rank_rank": {"rank": 1},
    "retail_physical_get_best_sellers_rank_rank": {"rank": 1},
    "retail_physical_get_products_asin_history": {"asin": "B0NYD1KPFL"},
    "radio_get_stations_station_id": {"station_id": "07e80ba2-70ef-4b34-a9e6-6a8e9ee15a18"},
    "radio_get_current_station_id": {"station_id": "17c3f487-60c4-4411-a9cd-95ab8ecaa53d"},
    "artist_history_api_get_artist_history": {"name": ARTIST},
    "artist_history_api_get_artist_history_plot": {"name": ARTIST},
    "artist_history_api_get_artist_history_coverage": {"name": ARTIST},
    "get_hooks_id_deliveries": {"id": 1},
}
"""Arguments of the operations that need some (held in the demo data at FIXED_NOW); the others get none."""
DIFF_CALLS: dict[str, dict[str, Any]] = {}
"""Each group's GET /diff with a target its demo data has changes of (the served fixture finds them)."""
EXPORT_CALLS: dict[str, dict[str, Any]] = {}
"""Each group's GET /exports/{name} with the export the served fixture built."""
IDENTITY_CALLS: dict[str, dict[str, Any]] = {}
"""The /identity routes with a recording, an artist and an id the served fixture's index holds."""


@pytest.fixture(scope="module")
def served(all_groups_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The gateway over the demo data with the artist-history index built, on 127.0.0.1: its base URL."""
    path = copy_data(all_groups_data, tmp_path_factory.mktemp("client") / "data")
    with data_dir(path):
        index.index_all(now=fixed(FIXED_NOW), settings=run_settings())
        with sqlite3.connect(path / f"{index.INDEX_NAME}.sqlite") as db:
            recording, title, kind, value = db.execute(
                "SELECT r.id, r.title, i.kind, i.value FROM identity_recordings r JOIN identity_ids i"
                " ON i.recording = r.number ORDER BY r.number LIMIT 1").fetchone()
            (artist,) = db.execute("SELECT artist_id FROM identity_artist_names ORDER BY name LIMIT 1").fetchone()
        IDENTITY_CALLS.update({
            "get_identity_recordings_recording_id": {"recording_id": recording},
            "get_identity_recordings_recording_id_plot": {"recording_id": recording},
            "get_identity_lookup": {kind: value},
            "get_identity_search": {"title": title},
            "get_identity_artists_artist_id": {"artist_id": artist}})
        HookStore(hooks_db_path(run_settings())).create(env_key_id(TEST_KEY), "https://hooks.example.test/in", [], [], [g.name for g in GROUPS], FIXED_NOW)  # hook 1
    for group in GROUPS:
        with data_dir(path):
            built = exports.build(group.name, run_settings())
        assert built is not None
        EXPORT_CALLS[f"{group.name.replace('-', '_')}_get_exports_name"] = {"name": f"{built.sha256}.sqlite"}
        if group.targets is not None:
            with sqlite3.connect(path / f"{group.name}.sqlite") as db:
                target = db.execute("SELECT target FROM changes ORDER BY id DESC LIMIT 1").fetchone()[0]
            DIFF_CALLS[f"{group.name.replace('-', '_')}_get_diff"] = {"target": target}
    with serving(client(path).app, lifespan="on") as base:
        yield base


@pytest.fixture(scope="module")
def generated(served: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[types.ModuleType]:
    """The client package generated from the served joined document, imported."""
    import httpx

    work = tmp_path_factory.mktemp("generated")
    document = httpx.get(f"{served}/openapi.json").json()
    (work / "openapi.json").write_text(json.dumps(document))
    (work / "config.yaml").write_text(GENERATOR_CONFIG)
    result = subprocess.run(
        [sys.executable, "-m", "openapi_python_client", "generate", "--path", "openapi.json", "--config", "config.yaml",
         "--meta", "none", "--output-path", PACKAGE],
        cwd=work, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    # The generator names what it left out ("WARNING parsing GET ...", "Unable to ..."): nothing may be.
    assert "Warning" not in result.stdout and "Unable" not in result.stdout, result.stdout
    sys.path.insert(0, str(work))
    try:
        yield importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(work))
        for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
            del sys.modules[name]


def _operations(package: types.ModuleType, skip_paths: Collection[str] = ()) -> dict[str, types.ModuleType]:
    """Every generated GET operation module, by operation id, but those of `skip_paths`."""
    folder = Path(package.__file__).parent / "api"  # type: ignore[arg-type]
    modules = {p.stem: importlib.import_module(f"{PACKAGE}.api.{p.parent.name}.{p.stem}") for p in folder.glob("*/*.py")
               if p.stem != "__init__"}
    return {name: module for name, module in modules.items() if '"method": "get"' in (source := inspect.getsource(module))
            and not any(f'"url": "{path}"' in source for path in skip_paths)}


def _event_streams(served: str) -> set[str]:
    """The paths answering Server-Sent Events: a stream never ends, so a generated client's call would wait for ever
    (tests/test_feed_streams.py tests them as streams)."""
    document = httpx.get(served + "/openapi.json", trust_env=False).json()
    return {path for path, item in document["paths"].items()
            if "text/event-stream" in item.get("get", {}).get("responses", {}).get("200", {}).get("content", {})}


def _argument(annotation: Any, value: Any) -> Any:
    """A table value as the generated signature types it: its enum member, a date, or itself."""
    for option in typing.get_args(annotation) or (annotation,):
        if isinstance(option, type) and issubclass(option, Enum):
            return option(value)
        if option is date and isinstance(value, str):
            return date.fromisoformat(value)
    return value


def _call(module: types.ModuleType, api: Any, **extra: Any) -> Any:
    name = module.__name__.rsplit(".", 1)[1]
    hints = typing.get_type_hints(module.sync_detailed)
    given = CALLS.get(name) or DIFF_CALLS.get(name) or EXPORT_CALLS.get(name) or IDENTITY_CALLS.get(name, {})
    arguments = {key: _argument(hints[key], value) for key, value in given.items()}
    return module.sync_detailed(client=api, **arguments, **extra)


def _same(sent: Any, parsed: Any) -> bool:
    """A body and the generated model's `to_dict()` of it agree (timestamps compared as instants)."""
    if isinstance(sent, dict) and isinstance(parsed, dict):
        return sent.keys() == parsed.keys() and all(_same(sent[k], parsed[k]) for k in sent)
    if isinstance(sent, list) and isinstance(parsed, list):
        return len(sent) == len(parsed) and all(_same(a, b) for a, b in zip(sent, parsed))
    if isinstance(sent, str) and isinstance(parsed, str) and sent != parsed and re.match(r"\d{4}-\d\d-\d\dT", sent):
        return datetime.fromisoformat(sent) == datetime.fromisoformat(parsed)
    return sent == parsed


def test_generated_client_calls_every_get_endpoint_and_its_conditional_get(
        served: str, generated: types.ModuleType) -> None:
    streams = _event_streams(served)
    assert streams == {"/changes/stream"}
    operations = _operations(generated, streams)  # each group's /diff is called with a target it holds (DIFF_CALLS)
    assert len(operations) >= 140 and set(CALLS) <= set(operations), sorted(set(CALLS) - set(operations))
    api = generated.AuthenticatedClient(base_url=served, token=TEST_KEY, auth_header_name="X-API-Key", prefix="",
                                        raise_on_unexpected_status=True)
    failures: list[str] = []
    conditional = 0
    with api:
        for name, module in sorted(operations.items()):
            try:
                response = _call(module, api)
            except Exception as exc:  # UnexpectedStatus, or a body the generated model cannot read
                failures.append(f"{name}: {type(exc).__name__}: {str(exc)[:300]}")
                continue
            parsed = response.parsed
            if response.status_code != 200:
                failures.append(f"{name}: {response.status_code} {response.content[:300]!r}")
                continue
            if isinstance(parsed, bytes):  # the SVG plot and the SQLite exports, read as bytes (GENERATOR_CONFIG)
                ok = parsed == response.content and response.content.lstrip().startswith(
                    (b"<svg", b"<?xml", b"SQLite format 3\x00"))
            else:
                ok = hasattr(parsed, "to_dict") and _same(json.loads(response.content), parsed.to_dict())
            if not ok:
                failures.append(f"{name}: the generated model did not give back the body: {type(parsed).__name__}")
            etag = response.headers.get("etag")
            if "if_none_match" in inspect.signature(module.sync_detailed).parameters:
                assert etag, name
                again = _call(module, api, if_none_match=etag)  # raises on an undeclared status
                conditional += 1
                if again.status_code != 304 or again.parsed is not None or again.content:
                    failures.append(f"{name}: If-None-Match {etag} gave {again.status_code}")
    assert not failures, "\n".join(failures)
    assert conditional >= 120


def test_readme_shows_a_generated_client_sending_the_key(served: str, generated: types.ModuleType) -> None:
    """docs/clients.md's example runs as written against the served gateway (its URL and key put in)."""
    section = CLIENTS_DOC.read_text()
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert code is not None
    source = code.group(1).replace("https://chartgw.example.com", served).replace("YOUR-API-KEY", TEST_KEY)
    namespace: dict[str, Any] = {}
    exec(compile(source, "docs/clients.md", "exec"), namespace)
    assert namespace["chart"].country == "kr" and namespace["chart"].entries
    assert namespace["again"].status_code == 304 and namespace["again"].parsed is None


def test_generated_client_sends_every_value_of_an_array_parameter(served: str, generated: types.ModuleType) -> None:
    """The artist-history ids are arrays in the document, so the generated function takes a list and sends the
    parameter once per value (`?isrc=A&isrc=B`): the gateway answers for both, as for `?isrc=A,B`."""
    import httpx

    module = importlib.import_module(f"{PACKAGE}.api.artist_history_api.artist_history_api_get_artist_history")
    hints = typing.get_type_hints(module.sync_detailed)
    assert list[str] in typing.get_args(hints["isrc"]) and list[int] in typing.get_args(hints["analytics_track"])
    api = generated.AuthenticatedClient(base_url=served, token=TEST_KEY, auth_header_name="X-API-Key", prefix="",
                                        raise_on_unexpected_status=True)
    with api:
        everything = module.sync_detailed(client=api, name=ARTIST, limit=50000).parsed
        isrcs = sorted({r.isrc for r in everything.rows if isinstance(r.isrc, str)})[:2]
        tracks = sorted({int(r.analytics_track) for r in everything.rows if isinstance(r.analytics_track, str)})[:2]
        assert len(isrcs) == len(tracks) == 2
        both = module.sync_detailed(client=api, isrc=isrcs, analytics_track=tracks, limit=50000)
    assert both.status_code == 200
    assert both.parsed.query.ids.to_dict() == {"isrc": isrcs, "analytics_track": [str(t) for t in tracks]}
    found = {r.isrc for r in both.parsed.rows} | {r.analytics_track for r in both.parsed.rows}
    assert set(isrcs) <= found and {str(t) for t in tracks} <= found
    comma = httpx.get(f"{served}/artist-history-api/artist-history", headers={"X-API-Key": TEST_KEY},
                      params={"isrc": ",".join(isrcs), "analytics_track": ",".join(map(str, tracks)), "limit": 50000})
    assert json.loads(both.content) == comma.json()
