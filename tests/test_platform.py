"""The platform's shape, checked: the import layers, group declarations checked when built, target keys,
the settings table against docs/configuration.md, the public entry types, and every group's entry mapping over its
demo data (what the artist-history index will read)."""

from __future__ import annotations

import ast
import asyncio
import importlib
import json
import pkgutil
import re
import sqlite3
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest

from chartgw import demo as demo_package
from chartgw.api.endpoints import Call, Route
from chartgw.api.group import PLATFORM_ID, EntryMapping, Group
from chartgw.api.params import Param
from chartgw.cli import all_settings
from chartgw.core import config
from chartgw.core.clock import fixed
from chartgw.core.countries import COUNTRIES, GLOBAL
from chartgw.demo import seeding as demo
from chartgw.groups import GROUPS
from chartgw.http.entries import all_entry_types
from chartgw.store.connect import readonly_uri
from chartgw.store.targets import TargetKey
from tests.fixtures import configure
from tests.fixtures import settings as run_settings

PACKAGE = Path(__file__).resolve().parents[1] / "chartgw"
CONFIGURATION_DOC = PACKAGE.parent / "docs" / "configuration.md"

# Lowest first. A module imports only from its own layer or below; groups never import each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("chartgw.core",),  # the clock, countries, text, progress, the settings
    ("chartgw.store",),  # SQLite: connections, schema, the diff, shared records, target keys
    ("chartgw.replica.state", "chartgw.replica.config", "chartgw.replica.reader"),  # a node's replication state,
    # Litestream's configuration, the server's reader of a followed file
    ("chartgw.upstreams",),
    ("chartgw.crawl",),
    ("chartgw.api",),  # what a route is made of, and the Group declaration
    ("chartgw.index",),  # the artist-history index, its group, and the recording identity
    ("chartgw.groups.",),  # one group each: never importing another's modules
    ("chartgw.groups",),  # the registry
    ("chartgw.push",),
    ("chartgw.demo",),  # the demo, its samples and replay: above the groups, so serving never loads them
    ("chartgw.http",),
    ("chartgw.replica",),  # the processes that run Litestream
    ("chartgw.cli", "chartgw.__main__", "chartgw"),
)


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _layer(module: str) -> int:
    """The layer of `module`: the most specific prefix listed ("chartgw.groups." = a group module)."""
    best = (-1, -1)
    for index, names in enumerate(LAYERS):
        for name in names:
            matches = module.startswith(name) if name.endswith(".") else module == name or module.startswith(name + ".")
            if matches and len(name) > best[0]:
                best = (len(name), index)
    assert best[1] >= 0, f"{module} is in no layer: add it to LAYERS"
    return best[1]


def _imports() -> dict[str, set[str]]:
    """Every chartgw module's imports of chartgw modules, at any depth of its code (function-level too)."""
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        module = _module_name(path)
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("chartgw"):
                for alias in node.names:
                    full = PACKAGE.parent / f"{node.module}.{alias.name}".replace(".", "/")
                    is_module = full.with_suffix(".py").exists() or (full / "__init__.py").exists()
                    found.add(f"{node.module}.{alias.name}" if is_module else node.module)
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name.startswith("chartgw")}
        graph[module] = found - {module}
    return graph


def _group_module(module: str) -> str | None:
    """The group module (or package) `module` is or belongs to, if any: shared helpers such as
    `chartgw.groups.retail` declare no group and may be imported by groups."""
    parts = module.split(".")
    if parts[:2] != ["chartgw", "groups"] or len(parts) < 3:
        return None
    top = ".".join(parts[:3])
    return top if getattr(importlib.import_module(top), "GROUP", None) in GROUPS else None


def test_the_import_graph_has_no_circle_and_no_module_imports_from_above_its_layer() -> None:
    graph = _imports()
    for module, imported in graph.items():
        for target in imported:
            assert _layer(target) <= _layer(module), f"{module} (layer {_layer(module)}) imports {target} from above"
            mine, theirs = _group_module(module), _group_module(target)
            if mine is not None and theirs is not None:
                assert mine == theirs, f"{module} reaches into another group's module {target}"
    state: dict[str, int] = {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in graph.get(module, ()):
            assert state.get(target) != 1, "import circle: " + " -> ".join([*path, module, target])
            if target not in state:
                visit(target, [*path, module])
        state[module] = 2

    for module in graph:
        if module not in state:
            visit(module, [])


def test_importing_the_app_loads_no_sample_and_no_replay_server() -> None:
    """The demo sits above the groups: serving imports no sample module and no replay server. (http.server is
    not a sign of one: prometheus-client, which serving uses for /metrics, imports it.)"""
    code = ("import sys, chartgw.http.app; print(sorted(m for m in sys.modules if m.startswith(('chartgw.demo.samples', "
            "'chartgw.demo.replay', 'chartgw.demo'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_every_group_has_a_demo_module_with_a_seeder_and_every_demo_module_a_group() -> None:
    """A group's demo is its own file, found by its name (`chartgw.demo.seeding.demo_module`): none is missing, none is
    left over from a renamed group."""
    assert [group.name for group in demo.seeded_groups()] == [group.name for group in GROUPS]
    assert all(callable(demo.seeder(group.name)) for group in GROUPS)
    modules = [importlib.import_module(f"chartgw.demo.{info.name}") for info in pkgutil.iter_modules(demo_package.__path__)
               if info.name != "seeding"]
    assert {module.__name__ for module in modules if hasattr(module, "seed")} == {demo.demo_module(g) for g in GROUPS}
    with pytest.raises(KeyError):
        demo.seeder("no-such-group")


async def _nothing(call: Call) -> dict[str, str]:
    return {}


@pytest.mark.parametrize(("route", "message"), [
    (Route("charts", _nothing), "starts with '/'"),
    (Route("/c", _nothing, (Param("limit", kind="int"), Param("limit"))), "declared twice"),
    (Route("/c/{slug}", _nothing), "path parameters"),
    (Route("/c", _nothing, (Param("slug", "path"),)), "path parameters"),
])
def test_a_route_declared_wrong_fails_when_its_group_is_built(route: Route, message: str) -> None:
    with pytest.raises(AssertionError, match=message):
        Group(name="tiny", title="t", description="d", routes=(route,))


def test_a_group_declared_wrong_fails_when_built() -> None:
    with pytest.raises(AssertionError, match="declared twice"):
        Group(name="tiny", title="t", description="d", routes=(Route("/c", _nothing), Route("/c", _nothing)))
    with pytest.raises(AssertionError, match="lowercase slug"):
        Group(name="Tiny", title="t", description="d", routes=())
    with pytest.raises(AssertionError, match="unknown id kinds"):
        EntryMapping(market="=kr", ids={"spotify": "track_id"})


def test_a_target_key_makes_parses_and_globs_its_targets() -> None:
    key = TargetKey(("combo", "country"))
    assert key.make("top-songs", "us") == "top-songs/us"
    assert key.parse("top-songs/us") == {"combo": "top-songs", "country": "us"}
    assert key.parse("top-songs/us@2026-11-13") == {"combo": "top-songs", "country": "us"}
    assert key.parse("top-songs") is None and key.parse("a/b/c") is None and key.parse("/us") is None
    assert key.pattern() == "*/*" and key.pattern(country="us") == "*/us"
    assert key.pattern(combo="a*b") == "a[*]b/*"
    kind = TargetKey(("market", "genre"), prefix="genre")
    assert kind.make("france", "pop") == "genre/france/pop"
    assert kind.parse("genre/france/pop") == {"market": "france", "genre": "pop"}
    assert kind.parse("top-200/france/pop") is None
    assert kind.pattern(market="france") == "genre/france/*"
    with pytest.raises(AssertionError):
        key.make("top/songs", "us")


def test_the_configuration_reference_lists_exactly_the_declared_settings() -> None:
    section = CONFIGURATION_DOC.read_text()
    listed = re.findall(r"^\| `(CHARTGW_[A-Z0-9_]+)` \|", section, flags=re.M)
    declared = [setting.variable for _, setting in all_settings()]
    assert len(listed) == len(set(listed)), "a setting is listed twice"
    assert set(listed) - set(declared) == set(), "docs/configuration.md lists settings that do not exist"
    assert set(declared) - set(listed) == set(), "docs/configuration.md misses settings"


def test_the_environment_is_read_only_by_the_settings_object() -> None:
    for path in PACKAGE.rglob("*.py"):
        if path.relative_to(PACKAGE).as_posix() != "core/settings.py":
            text = path.read_text()
            assert "os.environ" not in text and "getenv" not in text, f"{path} reads the environment directly"


AMBIENT_SETTINGS = re.compile(r"\b(?:current\(\)|using\(|install\(|SettingsScope)|ContextVar\[Settings|config\.(?:get|data_dir|environment)\(")
"""What reading the settings from ambient state looks like: a context variable or process global (`current()`,
`using`, `install`, `SettingsScope`) and the module-level `config.get` wrappers over it."""
ENTRY_POINTS = {"cli/__init__.py", "http/app.py", "groups/radio/monitor.py"}
"""The process entry points: `chartgw`'s main, the app factories a `serve --workers N` worker calls, the monitor run
as `python -m`. Only they resolve the settings from the environment; everything else is given them."""


def test_settings_are_passed_in_never_read_from_ambient_state() -> None:
    for path in PACKAGE.rglob("*.py"):
        name = path.relative_to(PACKAGE).as_posix()
        code = "\n".join(line.split("#", 1)[0] for line in path.read_text().splitlines())  # comments aside
        if name != "core/settings.py":
            assert "from_environment(" not in code or name in ENTRY_POINTS, f"{name} resolves settings itself"
        assert not AMBIENT_SETTINGS.search(re.sub(r"(\"\"\"|\"|')(?:.|\n)*?\1", "", code)), \
            f"{name} reads settings from ambient state"
    import chartgw.core.config as config_module
    import chartgw.core.settings as settings_module

    for gone in ("current", "using", "install", "get", "data_dir", "environment"):
        assert not hasattr(settings_module, gone) and not hasattr(config_module, gone), gone


def test_every_group_names_its_public_entry_types() -> None:
    types = all_entry_types()
    assert set(types) == {g.name for g in GROUPS}
    for group in GROUPS:
        if group.entries is not None:
            assert types[group.name], f"{group.name} maps entries but serves no entry type"


def test_every_stored_entry_of_every_group_maps_for_artist_history(all_groups_data: Path) -> None:
    """Each group's declared mapping reads an artist, a market and its ids from every demo entry."""
    for group in GROUPS:
        mapping = group.entries
        if mapping is None:  # a group whose entries name no artist (trending topics) is no artist-history source
            continue
        # Read-only: a writable connection to the session's shared folder deletes its -wal and -shm files when it
        # closes, under another worker copying the folder (copy_data: "No such file or directory").
        db = sqlite3.connect(readonly_uri(all_groups_data / f"{group.name}.sqlite"), uri=True)
        rows = db.execute("SELECT s.target, e.record FROM entries e JOIN snapshots s ON s.id = e.snapshot_id").fetchall()
        db.close()
        mapped = [mapping.read(target, json.loads(record)) for target, record in rows]
        kept = [m for m in mapped if m is not None]
        assert len(kept) > 100, group.name
        for entry in kept:
            assert entry.artist and entry.artists, group.name
            assert entry.market == GLOBAL or entry.market in COUNTRIES, (group.name, entry.market)
        for kind in mapping.ids:
            assert sum(kind in m.ids for m in kept) > len(kept) / 4, (group.name, kind)


def test_a_mapping_reads_what_it_declares() -> None:
    mapping = EntryMapping(market="target:1", artist=("artist", "name"), ids={"isrc": "isrc"},
                           ids_targets=("songs/*",), skip_targets=("catalogue",))
    record = {"name": "IU", "title": "Love wins all", "artists": ["IU"], "isrc": "KRA382400001"}
    entry = mapping.read("songs/kr", record)
    assert entry is not None and entry == ("IU", ["IU"], "Love wins all", "kr", {"isrc": "KRA382400001"})
    albums = mapping.read("albums/kr", record)
    assert albums is not None and albums.ids == {}
    assert mapping.read("catalogue", record) is None
    assert mapping.read("songs/kr", {"title": "no artist"}) is None
    assert msgspec.json.decode(msgspec.json.encode(entry.ids))  # type: ignore[attr-defined]  # (mypy narrowed it to the tuple compared above) == {"isrc": "KRA382400001"}


def test_a_mapping_reads_a_records_json_as_it_reads_the_record() -> None:
    """The index decodes a record's JSON into only the fields a mapping reads (`EntryMapping.decode`); what it reads
    from them is what `read` takes from the record as a dict, odd values included."""
    mapping = EntryMapping(market="country", ids={"isrc": "isrc", "video_id": "vid"},
                           platform_ids=(("portal-a/*", "melon_song", "song_id"),))
    records: list[dict[str, Any]] = [
        {"artist": "IU", "title": "Love wins all", "artists": ["IU", "", 7, None, "V"], "isrc": 123, "vid": "",
         "country": "kr", "song_id": 37145732, "rank": 1, "extra": {"nested": [1, 2]}},
        {"artist": "", "title": "no artist"},
        {"artist": ["not", "text"], "title": "a list"},
        {"artist": "NewJeans", "title": None, "artists": "not a list", "country": None, "song_id": ""},
        {"artist": "태연", "title": "", "isrc": None},
    ]
    reader = mapping.reader("portal-a/realtime")
    for record in records:
        decoded = reader(mapping.decode(json.dumps(record, ensure_ascii=False)))
        assert decoded == mapping.read("portal-a/realtime", record), record
    first = mapping.read("portal-a/realtime", records[0])
    assert first is not None
    assert first.artists == ["IU", "V"] and first.market == "kr"
    assert first.ids == {"isrc": "123", PLATFORM_ID: "melon_song:37145732"}
    fourth = mapping.read("portal-a/realtime", records[3])
    assert fourth is not None and fourth.artists == ["NewJeans"] and fourth.market == "" and fourth.ids == {}
    assert mapping.read("portal-a/realtime", records[1]) is None and mapping.read("portal-a/realtime", records[2]) is None
    with pytest.raises(msgspec.DecodeError):  # not an object: the index skips it
        mapping.decode("[1, 2]")


def test_every_group_has_the_platform_routes_first() -> None:
    """Root, OpenAPI document and fetch log come from the platform, ahead of the group's own routes."""
    from chartgw.http.app import service_routes

    for group in GROUPS:
        paths = [route.path for route in service_routes(group)]
        assert paths[:3] == ["/", "/openapi.json", "/fetch-logs"], group.name
        assert "/health" in paths, group.name


def test_chartgw_storage_reports_every_group(korea_data: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    from chartgw import cli

    configure("CHARTGW_DATA_DIR", str(korea_data))
    assert cli.main(["storage", "--json"], run_settings()) == 0
    rows = {row["group"]: row for row in json.loads(capsys.readouterr().out) if row["file"] == f"{row['group']}.sqlite"}
    assert set(rows) == {g.name for g in GROUPS}
    korea = rows["korea-chart"]
    assert korea["bytes"] > 100_000 and korea["snapshots"] > 10 and korea["retention_days"]
    assert rows["video"]["bytes"] == 0 and rows["video"]["first"] is None


def test_retention_days_setting_adds_to_and_replaces_a_groups_own(monkeypatch: pytest.MonkeyPatch) -> None:
    from chartgw.api.group import retention
    from chartgw.groups import radio

    assert retention(radio.GROUP, settings=run_settings()) == radio.GROUP.retention_days
    configure("CHARTGW_RETENTION_DAYS", "radio:plays/=800, radio=90, korea-chart=7")
    assert retention(radio.GROUP, settings=run_settings()) == {"directory": 30, "servers": 30, "plays/": 800, "": 90}
    configure("CHARTGW_RETENTION_DAYS", "radoi=90")
    with pytest.raises(config.SettingError, match="no group named radoi"):
        retention(radio.GROUP, settings=run_settings())
    for bad in ("radio", "radio=0", "radio=forever", "=5"):
        configure("CHARTGW_RETENTION_DAYS", bad)
        with pytest.raises(config.SettingError, match="GROUP=DAYS"):
            retention(radio.GROUP, settings=run_settings())


def test_a_crawl_prunes_by_the_operators_retention(korea_data: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from chartgw.api.group import crawl_group
    from chartgw.demo.samples.korea import site_replies
    from chartgw.groups import korea_chart
    from tests.fixtures import FIXED_NOW, configure, copy_data, replay_upstreams

    data = copy_data(korea_data, tmp_path / "data")
    configure("CHARTGW_DATA_DIR", str(data))
    configure("CHARTGW_RETENTION_DAYS", "korea-chart:portal-a=5")
    later = FIXED_NOW + timedelta(days=10)

    def snapshots() -> dict[str, int]:
        with sqlite3.connect(data / "korea-chart.sqlite") as db:
            return dict(db.execute("SELECT target, count(*) FROM snapshots GROUP BY target").fetchall())

    before = snapshots()
    with replay_upstreams({"MELON": site_replies("portal-a", "realtime", later, 1)}):
        outcomes = asyncio.run(crawl_group(korea_chart.GROUP, {"site": "portal-a", "chart_type": "realtime"},
                                           now=fixed(later), settings=run_settings()))
    assert [o.status for o in outcomes] == ["ok"]
    after = snapshots()
    realtime = outcomes[0].target
    assert before[realtime] == 1 and after[realtime] == 1  # the old one left; the new one is the newest
    # Other targets are untouched by the setting; the group's own 3-day retention of FLO observations still holds.
    assert after == {**before, "portal-d/all_age": 1} and before["portal-d/all_age"] == 4


def test_chartgw_storage_shows_the_retention_and_a_bad_setting_in_one_line(
        korea_data: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from chartgw import cli

    configure("CHARTGW_DATA_DIR", str(korea_data))
    configure("CHARTGW_RETENTION_DAYS", "korea-chart=30")
    assert cli.main(["storage", "--json"], run_settings()) == 0
    korea = {row["group"]: row for row in json.loads(capsys.readouterr().out)}["korea-chart"]
    assert korea["retention_days"][""] == 30 and korea["unbounded_targets"] == 0
    configure("CHARTGW_RETENTION_DAYS", "")
    assert cli.main(["storage", "--json"], run_settings()) == 0
    korea = {row["group"]: row for row in json.loads(capsys.readouterr().out)}["korea-chart"]
    assert korea["unbounded_targets"] > 5  # every chart but FLO's observations and rising is kept for ever
    configure("CHARTGW_RETENTION_DAYS", "korea=30")
    assert cli.main(["storage"], run_settings()) == 2
    err = capsys.readouterr().err
    assert err.strip() == "chartgw: CHARTGW_RETENTION_DAYS: no group named korea"


CLOCK_NAME = re.compile(r"(?:^|_)(?:now|clock|today|time|utc_now)$")


def test_no_test_patches_a_module_clock_and_no_module_keeps_a_clock_hook() -> None:
    """A default bound at import never sees a patch of the module's clock: commands take their clock from their
    Context, crawls and apps from their arguments. So no test patches a module's clock attribute, and no module
    holds a clock in a global for others to set."""
    patches = re.compile(r"""monkeypatch\.setattr\(\s*[\w.]+\s*,\s*["'](\w+)["']""")
    for path in sorted((PACKAGE.parent / "tests").glob("*.py")):
        for name in patches.findall(path.read_text()):
            assert not CLOCK_NAME.search(name), f"{path.name} patches a module clock ({name}); pass a clock instead"
    hook = re.compile(r"^(\w+)\s*(?::\s*Clock\s*)?=\s*(?:utc_now|fixed\(|datetime\.now)", re.M)
    for path in PACKAGE.rglob("*.py"):
        assert not hook.findall(path.read_text()), f"{path} keeps a module-level clock"


def test_the_private_aiosqlite_calls_the_store_makes_are_there() -> None:
    """`SnapshotReader.read` runs a page's statements in one hop through aiosqlite's own queue (`Connection._execute`
    with `Connection._conn`): no public call runs a function on the connection's thread. requirements.lock pins
    0.22.x; an upgrade that moves either fails here, naming them, before any /identity page does."""
    import aiosqlite

    assert aiosqlite.__version__.startswith("0.22."), f"re-read aiosqlite {aiosqlite.__version__}'s _execute and _conn"
    assert callable(getattr(aiosqlite.Connection, "_execute", None))
    assert isinstance(getattr(aiosqlite.Connection, "_conn", None), property)


def test_the_lock_file_pins_every_dependency_within_its_range() -> None:
    """requirements.lock (scripts/lock) holds an exact version of each runtime and test dependency that
    pyproject.toml's range admits; the scripts and CI install from it."""
    import tomllib

    from packaging.requirements import Requirement

    project = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["project"]
    pinned = dict(re.findall(r"^([A-Za-z0-9_.-]+)==([^\s;]+)", (PACKAGE.parent / "requirements.lock").read_text(), re.M))
    pinned = {name.lower().replace("_", "-"): version for name, version in pinned.items()}
    for line in [*project["dependencies"], *project["optional-dependencies"]["test"],
                 *project["optional-dependencies"]["replica"]]:
        requirement = Requirement(line)
        name = requirement.name.lower().replace("_", "-")
        assert name in pinned, f"requirements.lock misses {name}: run scripts/lock"
        assert requirement.specifier.contains(pinned[name], prereleases=True), \
            f"requirements.lock pins {name}=={pinned[name]} outside {requirement.specifier}: run scripts/lock"
