"""What a group of the spec declares: its routes, crawl targets, cadences, settings, CLI verbs and entry
mapping, all in one `Group`. The list of groups is `chartgw.groups.GROUPS`; their demo data is `chartgw.demo`'s.

Declarations are checked when built, the way Starlette asserts its routes: a mistake fails at import,
not at the first request.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from fnmatch import fnmatch
from functools import cache
from operator import attrgetter
from typing import Any, NamedTuple

import httpx
import msgspec

from chartgw.api.catalog import Chart, cadence_of
from chartgw.api.endpoints import Route
from chartgw.core import config
from chartgw.core.clock import Clock, utc_now
from chartgw.core.config import Setting
from chartgw.core.settings import Settings
from chartgw.crawl.context import Context
from chartgw.crawl.runner import CrawlTarget, Outcome, RetryPolicy, run_targets
from chartgw.store import Storage

__all__ = ["GROUP_NAMES", "PLATFORM_ID", "CommandArg", "EntryMapping", "Group", "GroupCommand", "MappedEntry", "Schedule",
           "after_crawl", "crawl_group", "retention"]

_GROUP_NAME = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")
_PATH_PARAM = re.compile(r"{([a-z_][a-z0-9_]*)}")

@dataclass(frozen=True)
class Schedule:
    """One cron line: `minute hour dom month dow` in `timezone`, and the crawl arguments it runs."""

    cron: str
    args: tuple[str, ...]
    timezone: str = "UTC"
    comment: str = ""

    def __post_init__(self) -> None:
        assert len(self.cron.split()) == 5, f"a cron schedule has five fields: {self.cron!r}"


@dataclass(frozen=True)
class CommandArg:
    """One argument of a group command: `--name` (or positional `name`) on the command line."""

    name: str
    help: str
    positional: bool = False
    choices: tuple[str, ...] | None = None
    type: Callable[[str], Any] = str
    default: Any = None
    required: bool = False


@dataclass(frozen=True)
class GroupCommand:
    """A verb of the CLI beyond `crawl` that a group offers (`chartgw import streaming FILE`,
    `chartgw backfill video`). `run` gets the command's context (settings, clock, transport, progress)
    and the parsed arguments by name, and returns one outcome per target; the CLI holds the group's
    crawl lock around it and exits 1 when any failed."""

    verb: str
    help: str
    args: tuple[CommandArg, ...]
    run: Callable[[Context, dict[str, Any]], list[Outcome]]
    lock: bool = True
    """Run under the group's crawl lock; False for a long-running component (a monitor) that must not
    hold the lock the scheduled crawls take."""
    at_boot: bool = False
    """Started at boot (`chartgw cron` prints an @reboot line for it)."""
    cron: Schedule | None = None
    """Run on this schedule too (`chartgw cron` prints its line): the artist-history index's catch-up."""


PLATFORM_ID = "platform_id"
"""The key of a platform's own song id in `MappedEntry.ids`, and the index's variant column holding it."""


class MappedEntry(NamedTuple):
    """What the artist-history index takes from one stored entry."""

    artist: str
    """The artist as shown."""
    artists: list[str]
    """Every credited artist (the index splits and normalises them)."""
    title: str | None
    """Null for artist charts."""
    market: str
    """An ISO alpha-2 code (lowercase) or "global"."""
    ids: dict[str, str]
    """Id kind -> value, only the ids the entry has; `PLATFORM_ID` -> "<id type>:<value>" for a platform's song id
    (`EntryMapping.platform_ids`)."""


@dataclass(frozen=True)
class EntryMapping:
    """Where the artist-history index finds things in this group's stored entry records (JSON field
    names, each tuple tried in order; None = the group's upstream has no such thing)."""

    market: str | Callable[[str], str]
    """"target:N" (part N of the snapshot target, split on "/"), "=xx" (a constant), a record field, or a
    function of the target."""
    artist: tuple[str, ...] = ("artist",)
    artists: str | None = "artists"
    title: tuple[str, ...] = ("title",)
    ids: dict[str, str] = field(default_factory=dict)
    """Id kind (the spec's parameter names) -> the record field that holds it."""
    skip_targets: tuple[str, ...] = ()
    """fnmatch patterns of targets that hold no chart entries (a discovered catalogue)."""
    ids_targets: tuple[str, ...] = ("*",)
    """fnmatch patterns of the targets whose entries carry the `ids` (e.g. a store id is a track's only on song charts)."""
    sub_daily_targets: tuple[str, ...] = ()
    """fnmatch patterns of charts published several times a day (folded to one row per track and day)."""
    platform_ids: tuple[tuple[str, str, str], ...] = ()
    """(fnmatch pattern of targets, identity id type, record field): a platform's own id of the song on those targets
    (a Korean site's song id: `melon_song` on Melon's charts). Kept with the variant for recording identity's
    `platform_id` tier; not one of the spec's id columns, so no artist-history response shows it."""
    facts: dict[str, str] = field(default_factory=dict)
    """Chart facts the source prints on its entries (`previous_rank`, `peak_rank`, `periods_on_chart`, `re_entry`)
    -> the record field holding it: `include=facts` gives the source's value (`chartgw.index.identity.facts`)."""

    _fields: tuple[str, ...] = field(init=False, repr=False, compare=False)
    """The record fields read (`record_type`), set from the above."""

    ID_KINDS = ("isrc", "download_store_track_id", "streaming_track_id", "analytics_artist", "analytics_track",
                "lyrics_artist_id", "lyrics_song_id", "recognition_track_id", "video_id", "asin")

    def __post_init__(self) -> None:
        unknown = set(self.ids) - set(self.ID_KINDS)
        assert not unknown, f"unknown id kinds {sorted(unknown)}; known: {self.ID_KINDS}"
        assert callable(self.market) or self.market.startswith(("target:", "=")) or self.market.isidentifier(), \
            f"market: {self.market!r}"
        market = [self.market] if isinstance(self.market, str) and self.market.isidentifier() else []
        artists = [self.artists] if self.artists else []
        fields = (*self.artist, *self.title, *artists, *self.ids.values(), *(f for _, _, f in self.platform_ids), *market)
        object.__setattr__(self, "_fields", tuple(dict.fromkeys(fields)))

    @property
    def record_type(self) -> type[msgspec.Struct]:
        """A stored entry record as the index reads it: only the fields this mapping reads."""
        return _record_type(self._fields, self.artists)

    @property
    def decode(self) -> Callable[[str | bytes], msgspec.Struct]:
        """An entry record's JSON to a `record_type` (skipping every other field: a third of the time of decoding the
        record to a dict, with the reading below half that of a dict's); `msgspec.DecodeError` for anything else."""
        return _decoder(self._fields, self.artists)

    def read(self, target: str, record: dict[str, Any]) -> MappedEntry | None:
        """The entry as the index takes it; None for a target that holds no chart entries or an entry
        without an artist."""
        return self.reader(target)(msgspec.convert(record, self.record_type))

    def reading(self, target: str) -> tuple[Callable[[Any], MappedEntry | None], Hashable, str | None] | None:
        """`reader(target)`; what else than a record its entries depend on (`reader` reads a record alike for every
        target alike in it, but for the market); and the market of all of them when it is the target's (None: each
        record's). None for a target that holds no chart entries. What depends on the target alone is decided once
        (the index reads millions of entries of a few thousand targets)."""
        if any(fnmatch(target, pattern) for pattern in self.skip_targets):
            return None
        carries_ids = any(fnmatch(target, pattern) for pattern in self.ids_targets)
        platform = self._platform(target)
        market = self._market(target)
        return self._reader(carries_ids, platform, market), (carries_ids, platform), \
            market if isinstance(market, str) else None

    def reader(self, target: str) -> Callable[[Any], MappedEntry | None]:
        """`read` for the entries of one target, each a `record_type` (`decode`)."""
        found = self.reading(target)
        return (lambda record: None) if found is None else found[0]

    def _reader(self, carries_ids: bool, platform: tuple[str, Callable[[Any], Any]] | None,
                market: str | Callable[[Any], str]) -> Callable[[Any], MappedEntry | None]:
        field = self._field
        ids = tuple((kind, field(name)) for kind, name in self.ids.items()) if carries_ids else ()
        artist_of, title_of = self._text(self.artist), self._text(self.title)
        artists_of = field(self.artists) if self.artists else None

        def read(record: Any) -> MappedEntry | None:
            artist = artist_of(record)
            if artist is None:
                return None
            credited = artists_of(record) if artists_of is not None else None
            artists = [a for a in credited if isinstance(a, str) and a] if isinstance(credited, tuple) else []
            found = {kind: str(value) for kind, of in ids if (value := of(record)) is not None and value != ""}
            _add_platform_id(found, platform, record)
            return MappedEntry(artist, artists or [artist], title_of(record),
                               market if isinstance(market, str) else market(record), found)

        return read

    def identity_fields(self, record: dict[str, Any], target: str | None = None) -> tuple[str, str, dict[str, str]] | None:
        """An entry's title ("" for none), artist as shown and every id it carries (whatever its target), with its
        platform's song id when the entry is of `target`: what recording identity looks it up by
        (`chartgw.index.identity.include`); None without an artist."""
        read = msgspec.convert(record, self.record_type)
        artist = self._text(self.artist)(read)
        if artist is None:
            return None
        ids = {kind: str(value) for kind, name in self.ids.items()
               if (value := self._field(name)(read)) is not None and value != ""}
        _add_platform_id(ids, self._platform(target) if target is not None else None, read)
        return self._text(self.title)(read) or "", artist, ids

    def _field(self, name: str) -> Callable[[Any], Any]:
        """The value of the record field `name` (None when absent) in a `record_type`."""
        return _attribute(self._fields, name)

    def _text(self, names: tuple[str, ...]) -> Callable[[Any], str | None]:
        """The first of the fields `names` that holds a non-empty string (made once per mapping and names)."""
        return _text_reader(self._fields, names)

    def _platform(self, target: str) -> tuple[str, Callable[[Any], Any]] | None:
        """("<id type>:", the record field's value) of the platform song id `target`'s entries carry, if any."""
        return next(((f"{kind}:", self._field(name)) for pattern, kind, name in self.platform_ids
                     if fnmatch(target, pattern)), None)

    def is_sub_daily(self, target: str) -> bool:
        return any(fnmatch(target, pattern) for pattern in self.sub_daily_targets)

    def _market(self, target: str) -> str | Callable[[Any], str]:
        """The market of `target`'s entries, or for a record field the market of a record."""
        if callable(self.market):
            return self.market(target)
        if self.market.startswith("="):
            return self.market[1:]
        if self.market.startswith("target:"):
            return target.partition("@")[0].split("/")[int(self.market.partition(":")[2])]
        of = self._field(self.market)
        return lambda record: str(of(record) or "")


_LISTED = tuple[Any, ...] | str | int | float | bool | dict[Any, Any] | None
"""The credited artists' field of a `record_type`: any JSON value, an array as a tuple (so that a record's fields can
key what the index made of them: `chartgw.index.source.read_batch`)."""


@cache
def _record_type(fields: tuple[str, ...], listed: str | None) -> type[msgspec.Struct]:
    return msgspec.defstruct("Record", [(f"f{n}", _LISTED if name == listed else Any, None)
                                        for n, name in enumerate(fields)],
                             rename={f"f{n}": name for n, name in enumerate(fields)}, gc=False)


@cache
def _decoder(fields: tuple[str, ...], listed: str | None) -> Callable[[str | bytes], msgspec.Struct]:
    return msgspec.json.Decoder(_record_type(fields, listed)).decode


@cache
def _attribute(fields: tuple[str, ...], name: str) -> Callable[[Any], Any]:
    return attrgetter(f"f{fields.index(name)}")


@cache
def _text_reader(fields: tuple[str, ...], names: tuple[str, ...]) -> Callable[[Any], str | None]:
    """`EntryMapping._text`, without a generator for one name (the common case)."""
    readers = tuple(_attribute(fields, name) for name in names)
    if len(readers) != 1:
        return lambda record: next((v for of in readers if isinstance(v := of(record), str) and v), None)
    (of,) = readers

    def first(record: Any) -> str | None:
        value = of(record)
        return value if isinstance(value, str) and value else None

    return first


def _add_platform_id(ids: dict[str, str], platform: tuple[str, Callable[[Any], Any]] | None, record: Any) -> None:
    """`PLATFORM_ID` -> "<id type>:<value>" in `ids` when the record carries its platform's song id (`_platform`)."""
    if platform is not None and (value := platform[1](record)) is not None and value != "":
        ids[PLATFORM_ID] = platform[0] + str(value)


@dataclass(frozen=True)
class Group:
    name: str
    """The spec's path prefix without the slash; also the snapshot file's name."""
    title: str
    description: str
    routes: tuple[Route, ...]
    upstreams: tuple[str, ...] = ()
    """The upstream names the group crawls (each a `CHARTGW_UPSTREAM_<NAME>` setting of the group)."""
    targets: Callable[[dict[str, str | None], datetime, Settings], Sequence[CrawlTarget]] | None = None
    """The crawl targets for the CLI's selection options (e.g. {"site": ..., "chart_type": ...}) at the crawl's
    time (what a marketplace's backoff is measured against), under the crawl's settings."""
    crawl_options: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """Selection options of `chartgw crawl GROUP` and their allowed values."""
    schedules: tuple[Schedule, ...] = ()
    retention_days: dict[str, float] = field(default_factory=dict)
    """Days of snapshots kept per target prefix ("" = every target); none = kept forever. The operator's
    `CHARTGW_RETENTION_DAYS` adds to or replaces these (`retention`)."""
    discovery: Callable[[Settings], Sequence[CrawlTarget]] | None = None
    """Targets crawled before `targets` is asked (which may then read what they stored, e.g. a catalogue)."""
    per_upstream: int = 2
    """Requests in flight at once per upstream host."""
    delay_seconds: Callable[[Settings], float] | None = None
    """The pause after each request when the group needs more politeness than `CHARTGW_CRAWL_DELAY_SECONDS`
    (read per crawl, e.g. from a group setting); paused with up to 50% jitter."""
    commands: tuple[GroupCommand, ...] = ()
    settings: tuple[Setting[Any], ...] = ()
    """The group's own `CHARTGW_*` settings (the platform's are `chartgw.core.config.SETTINGS`)."""
    entries: EntryMapping | None = None
    """How the artist-history index reads this group's entries; None = the group has no chart entries."""
    storage: Storage = field(default_factory=Storage)
    """The tables the group keeps in its file beside the platform's, and every query it runs itself (as data:
    migrated by the store, compiled by tests/test_store_schema.py)."""
    charts: tuple[Chart, ...] = ()
    """Every chart the group serves (`chartgw.api.catalog`): what `GET /charts` lists and where its cadence is read
    (`cadence_of`); none for a group without charts of its own (the artist-history index)."""
    after_commit: Callable[[str, Settings], object] | None = None
    """Called with a group's name and the settings after that group's crawl, import or backfill committed (`after_crawl`): the
    artist-history index catching up. Declared by the group that needs it, run for every group by the registry's
    caller: no hook list is filled at import."""

    def __post_init__(self) -> None:
        assert _GROUP_NAME.fullmatch(self.name), f"a group name is a lowercase slug: {self.name!r}"
        seen: set[tuple[str, str]] = set()
        for route in self.routes:
            check_route(route)
            key = (route.method, route.path)
            assert key not in seen, f"{self.name}: {route.method} {route.path} declared twice"
            seen.add(key)
        assert self.targets is not None or not self.schedules, f"{self.name}: schedules without crawl targets"
        names = [s.name for s in self.settings]
        assert len(names) == len(set(names)), f"{self.name}: a setting declared twice"
        ids = [c.chart for c in self.charts]
        assert len(ids) == len(set(ids)), f"{self.name}: a chart declared twice"
        GROUP_NAMES.add(self.name)

    def cadence_of(self, target: str) -> int:
        """The seconds between two editions of the chart stored under `target` (`chartgw.api.catalog.cadence_of`)."""
        return cadence_of(self.charts, target)


def check_route(route: Route) -> None:
    """A route's declaration is whole: its path starts with "/", each parameter is declared once, and its
    path parameters are exactly the `{names}` of its path."""
    assert route.path.startswith("/"), f"a route path starts with '/': {route.path!r}"
    names = [p.name for p in route.params]
    assert len(names) == len(set(names)), f"{route.path}: a parameter declared twice"
    in_path = _PATH_PARAM.findall(route.path)
    declared = [p.name for p in route.params if p.where == "path"]
    assert sorted(in_path) == sorted(declared), f"{route.path}: path parameters {in_path} but declared {declared}"
    assert route.method in {"GET", "POST"}, f"{route.path}: method {route.method}"


GROUP_NAMES: set[str] = set()
"""Every group declared in this process (what `CHARTGW_RETENTION_DAYS` may name)."""


def retention(group: Group, settings: Settings) -> dict[str, float]:
    """The days of snapshots `group` keeps per target prefix: its own declaration, with the operator's
    `CHARTGW_RETENTION_DAYS` items for it added or replacing (an item naming no group fails loudly)."""
    overrides = settings.get(config.RETENTION_DAYS)
    unknown = sorted({name for name, _, _ in overrides} - GROUP_NAMES)
    if unknown:
        raise config.SettingError(f"CHARTGW_RETENTION_DAYS: no group named {', '.join(unknown)}")
    merged = dict(group.retention_days)
    merged.update({prefix: days for name, prefix, days in overrides if name == group.name})
    return merged


def group_policy(group: Group, settings: Settings) -> RetryPolicy:
    """The crawl policy of `group`: its concurrency per upstream and, where it declares one, its delay."""
    if group.delay_seconds is None:
        return RetryPolicy.of(settings, per_upstream=group.per_upstream)
    # Replay servers (demo, tests) set the platform delay to 0: politeness is for real upstreams only.
    delay = group.delay_seconds(settings) if settings.get(config.CRAWL_DELAY_SECONDS) else 0.0
    return RetryPolicy.of(settings, per_upstream=group.per_upstream, delay_seconds=delay, jitter=0.5)


async def crawl_group(group: Group, selection: dict[str, str | None], *, settings: Settings, now: Clock = utc_now,
                      transport: httpx.AsyncBaseTransport | None = None,
                      progress: Callable[[Outcome], Any] | None = None) -> list[Outcome]:
    """What `chartgw crawl GROUP` does under `settings`: the group's discovery targets first (a failed discovery
    leaves the last good catalogue in use), then the selected targets, as one recorded run."""
    assert group.targets is not None
    policy = group_policy(group, settings)
    kept = retention(group, settings)
    outcomes: list[Outcome] = []
    if group.discovery is not None:
        outcomes += await run_targets(group.name, group.discovery(settings), retention=kept, now=now,
                                      transport=transport, policy=policy, progress=progress, run_kind="discovery",
                                      tables=group.storage.tables, settings=settings)
    targets = group.targets(selection, now(), settings)
    outcomes += await run_targets(group.name, targets, retention=kept, now=now, transport=transport,
                                  policy=policy, progress=progress, run_options=selection, tables=group.storage.tables,
                                  settings=settings)
    return outcomes


def after_crawl(name: str, groups: Iterable[Group], settings: Settings) -> None:
    """Run every group's `after_commit` for group `name` (what `chartgw crawl` does once its crawl committed).
    A hook that fails never fails the crawl: what it reads is committed, and it catches up at the next crawl."""
    for group in groups:
        if group.after_commit is not None:
            with contextlib.suppress(Exception):  # the crawl's commits stand regardless
                group.after_commit(name, settings)
