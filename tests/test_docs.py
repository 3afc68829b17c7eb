"""Docs checked by tests: the OpenAPI document, the README and docs/ match the route tables and the CLI."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from chartgw.api.openapi import documented_paths
from chartgw.cli import crontab
from chartgw.groups import GROUPS
from chartgw.groups.korea_chart import GROUP, RisingEntry
from chartgw.http.app import service_routes
from chartgw.store.records import KoreaEntry

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def all_docs() -> str:
    """The README and every reference page under docs/, as one text."""
    return "\n".join(p.read_text() for p in [README, *sorted(DOCS.rglob("*.md"))])


def test_openapi_documents_every_route_parameter_and_error() -> None:
    for group in GROUPS:
        routes = service_routes(group)
        document = next(r for r in routes if r.path == "/openapi.json")
        import asyncio

        doc: Any = asyncio.run(document.handler(None))  # type: ignore[arg-type]
        assert doc["openapi"].startswith("3.1") and doc["servers"] == [{"url": f"/{group.name}"}]
        for route in routes:
            for path, fixed in documented_paths(route):
                operation = doc["paths"][path][route.method.lower()]
                assert [p["name"] for p in operation["parameters"] if p["in"] != "header"] == [
                    p.name for p in route.params if p.name not in fixed]
                headers = [p["name"] for p in operation["parameters"] if p["in"] == "header"]
                assert headers == (["If-None-Match"] if route.cache_ttl > 0 else [])
                codes = set(operation["responses"])
                assert "200" in codes
                assert ("401" in codes) is (not route.public)
                if route.params:
                    assert operation["responses"]["422"]["content"]["application/json"]["schema"] == {
                        "$ref": "#/components/schemas/HTTPValidationError"}
        schemas = doc["components"]["schemas"]
        assert doc["components"]["securitySchemes"]["APIKeyHeader"] == {"type": "apiKey", "in": "header",
                                                                        "name": "X-API-Key"}
        if group is GROUP:
            entry = schemas["KoreaEntry"]["properties"]
            assert set(entry) == set(KoreaEntry.__struct_fields__)
            assert set(schemas["RisingEntry"]["properties"]) == set(RisingEntry.__struct_fields__)
            assert set(entry["rank_status"]["enum"]) == {"up", "down", "same", "new"}


def test_each_group_reference_lists_every_route_of_its_group() -> None:
    for group in GROUPS:
        text = (DOCS / "groups" / f"{group.name}.md").read_text()
        for route in service_routes(group):
            assert f"{route.method} /{group.name}{route.path}" in text, f"docs/groups/{group.name}.md misses {route.path}"


def test_readme_is_a_map_that_links_every_group_reference() -> None:
    text = README.read_text()
    assert len(text.splitlines()) < 400, "the README is a map: references go under docs/"
    for group in GROUPS:
        assert f"(docs/groups/{group.name}.md)" in text


def test_the_readme_layout_names_every_package_and_module() -> None:
    """The Layout draws the house: every package, and every module outside the per-group and per-upstream
    families (which it names by pattern), is named under its package, in the order of the import layers."""
    text = README.read_text()
    layout = text[text.index("## Layout"):text.index("### Adding a group")]
    package = ROOT / "chartgw"
    families = ("groups/", "upstreams/", "demo/samples/")
    per_group = {p.stem for p in (package / "groups").iterdir()} | {"artist_history"}  # demo/<group>.py
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package).as_posix()
        if relative.startswith(families) or (relative.startswith("demo/") and path.stem in per_group):
            continue
        if path.name == "__init__.py":
            assert f"  {path.parent.name}/" in layout or path.parent == package, f"the Layout misses {relative}"
        else:
            name = path.name if relative.count("/") < 2 else path.stem  # a package's package lists stems
            assert re.search(rf"\b{re.escape(name)}\b", layout), f"the Layout misses {relative}"
    for directory in sorted(p for p in package.iterdir() if (p / "__init__.py").exists()):
        assert f"\n  {directory.name}/" in layout, f"the Layout misses chartgw/{directory.name}/"


def test_readme_names_the_two_setup_commands_and_every_upstream_variable() -> None:
    readme = README.read_text()
    assert "scripts/serve" in readme and "scripts/test" in readme
    text = all_docs()
    for group in GROUPS:
        for name in group.upstreams:
            assert f"CHARTGW_UPSTREAM_{name}" in text


def test_crontab_covers_every_schedule_in_kst_calling_the_program_with_its_data_folder() -> None:
    tab = crontab(("/opt/chartgw/bin/chartgw",), Path("/var/lib/chartgw"))
    assert "CRON_TZ=Asia/Seoul" in tab
    timed = [line for line in tab.splitlines() if re.match(r"^[\d*]", line)]
    lines = [line for line in timed if " crawl " in line]
    assert len(lines) == sum(len(g.schedules) for g in GROUPS)
    assert [line for line in timed if line not in lines] == [  # the artist-history index's catch-up
        "*/15 * * * * CHARTGW_DATA_DIR=/var/lib/chartgw /opt/chartgw/bin/chartgw index artist-history-api --wait 240"
        " >> /var/lib/chartgw/artist-history-api-index.log 2>&1"]
    assert any(line.startswith("*/5 * * * * CHARTGW_DATA_DIR=/var/lib/chartgw /opt/chartgw/bin/chartgw crawl korea-chart "
                               "--site portal-d --chart-type rising --wait 240 >> /var/lib/chartgw/crawl.log 2>&1")
               for line in lines)
    assert all("--wait 240" in line and " CHARTGW_DATA_DIR=/var/lib/chartgw /opt/chartgw/bin/chartgw crawl " in line
               for line in lines)
    boot = [line for line in tab.splitlines() if line.startswith("@reboot")]
    assert boot == ["@reboot CHARTGW_DATA_DIR=/var/lib/chartgw /opt/chartgw/bin/chartgw monitor radio"
                    " >> /var/lib/chartgw/radio-monitor.log 2>&1",
                    "@reboot CHARTGW_DATA_DIR=/var/lib/chartgw /opt/chartgw/bin/chartgw deliver"
                    " >> /var/lib/chartgw/deliver.log 2>&1"]
    quoted = crontab(("/usr/bin/python3", "-m", "chartgw"), Path("/srv/my data"))
    assert "CHARTGW_DATA_DIR='/srv/my data' /usr/bin/python3 -m chartgw crawl korea-chart" in quoted


def test_every_document_validates_and_declares_what_clients_need(all_groups_data: Path) -> None:
    """Each group's document and the joined one pass openapi-spec-validator; cached GETs declare the 304 and
    its ETag, keyed ones the 401 and 429 with the rate headers, date and time fields their format."""
    import asyncio

    from openapi_spec_validator import validate

    from tests.fixtures import client

    for group in GROUPS:
        document: Any = asyncio.run(next(r for r in service_routes(group) if r.path == "/openapi.json").handler(None))  # type: ignore[arg-type]
        validate(document)
        for route in service_routes(group):
            responses = document["paths"][documented_paths(route)[0][0]][route.method.lower()]["responses"]
            if route.cache_ttl > 0:
                assert "ETag" in responses["304"]["headers"] and "ETag" in responses["200"]["headers"]
            if not route.public:
                assert {"401", "429"} <= set(responses) and "X-RateLimit-Remaining" in responses["200"]["headers"]
    with client(all_groups_data) as api:
        joined = api.get("/openapi.json").json()
    validate(joined)
    meta = joined["components"]["schemas"]["SnapshotMeta"]["properties"]
    assert meta["fetched_at"]["format"] == "date-time" and meta["chart_date"]["format"] == "date"
    bundle = joined["components"]["schemas"]["BundledChart"]["properties"]["entries"]
    assert bundle["items"] == {"type": "object"}
