"""The service groups of the spec. Each module declares one `Group`; the app and CLI read them from GROUPS."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from chartgw.endpoints import Route

if TYPE_CHECKING:
    from chartgw.crawl import CrawlTarget, Outcome


@dataclass(frozen=True)
class Schedule:
    """One cron line: `minute hour dom month dow` in `timezone`, and the crawl arguments it runs."""

    cron: str
    args: tuple[str, ...]
    timezone: str = "UTC"
    comment: str = ""


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
    `chartgw backfill video`). `run` gets the parsed arguments by name and returns one outcome per
    target; the CLI holds the group's crawl lock around it and exits 1 when any failed."""

    verb: str
    help: str
    args: tuple[CommandArg, ...]
    run: Callable[[dict[str, Any]], list[Outcome]]


@dataclass(frozen=True)
class Group:
    name: str
    """The spec's path prefix without the slash; also the snapshot file's name."""
    title: str
    description: str
    routes: tuple[Route, ...]
    upstreams: tuple[str, ...] = ()
    targets: Callable[[dict[str, str | None]], Sequence[CrawlTarget]] | None = None
    """The crawl targets for the CLI's selection options (e.g. {"site": ..., "chart_type": ...})."""
    crawl_options: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """Selection options of `chartgw crawl GROUP` and their allowed values."""
    schedules: tuple[Schedule, ...] = ()
    retention_days: dict[str, float] = field(default_factory=dict)
    discovery: Callable[[], Sequence[CrawlTarget]] | None = None
    """Targets crawled before `targets` is asked (which may then read what they stored, e.g. a catalogue)."""
    per_upstream: int = 2
    """Requests in flight at once per upstream host."""
    commands: tuple[GroupCommand, ...] = ()


def all_groups() -> list[Group]:
    from chartgw.groups.digital_sales import GROUP as digital_sales
    from chartgw.groups.korea_chart import GROUP as korea_chart
    from chartgw.groups.recognition import GROUP as recognition
    from chartgw.groups.streaming import GROUP as streaming
    from chartgw.groups.video import GROUP as video

    return [streaming, video, digital_sales, korea_chart, recognition]


def group_by_name(name: str) -> Group:
    for group in all_groups():
        if group.name == name:
            return group
    raise KeyError(name)
